"""``ltr tune``: a tiny search end to end, killed mid-trial and resumed; pruning through the trainer
callback; best.toml reproduces the best trial under ``ltr train`` / ``ltr gbdt``; HParams per trial."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from test_training import make_ds

from ltr.cli import main
from ltr.data import save_svmlight
from ltr.base.errors import LtrError
from ltr.study.tune import load_tune_config

ROOT = Path(__file__).resolve().parents[1]
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin_data_pb2 = pytest.importorskip("tensorboard.plugins.hparams.plugin_data_pb2")

SPACE = """
[tune]
metric = "ndcg@10"
seed = 1
startup_trials = 2
pruner = "{pruner}"
warmup_epochs = 1
[data]
train = "{train}"
valid = "{valid}"
[train]
epochs = 3
batch_size = 8
[model]
normalize = "standard"
[loss]
name = "lambdarank"
[space.train]
lr = {{ float = [1e-3, 3e-2], log = true }}
[space.model]
hidden = {{ choices = [[6], [8, 4]] }}
[space.loss]
sigma = {{ float = [0.5, 2.0] }}
"""

# Runs `ltr tune` and SIGKILLs the process at the end of epoch 2 of trial 1 (before the epoch is reported).
KILLER = textwrap.dedent("""
    import os, signal, sys
    import ltr.train.trainer as trainer
    end_epoch = trainer.Trainer._end_epoch
    def killing_end_epoch(self, record, scores):
        end_epoch(self, record, scores)
        if self.hparams.get("trial") == 1 and record["epoch"] == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    trainer.Trainer._end_epoch = killing_end_epoch
    from ltr.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune_data")
    for name, (nq, seed) in {"train": (40, 51), "valid": (12, 52)}.items():
        save_svmlight(make_ds(nq, seed), d / f"{name}.txt")
    return d / "train.txt", d / "valid.txt"


def write_space(path, data_files, pruner="median"):
    path.write_text(SPACE.format(pruner=pruner, train=data_files[0], valid=data_files[1]))
    return path


def hparams_of(log_dir):
    ea = event_accumulator.EventAccumulator(str(log_dir))
    ea.Reload()
    content = ea.PluginTagToContent("hparams")
    return plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info.hparams


def valid_ndcg10(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    return next(v for k, v in summary["metrics"]["valid"].items() if k.startswith("ndcg@10["))


@pytest.mark.slow  # a real process is started and killed
def test_search_killed_mid_trial_resumes_and_best_toml_reproduces_it(data_files, tmp_path, capsys):
    space, out = write_space(tmp_path / "space.toml", data_files), tmp_path / "study"
    args = ["tune", "--config", str(space), "--trials", "3", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    killed = subprocess.run([sys.executable, "-c", KILLER, *args], env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    storage = f"sqlite:///{out / 'study.db'}"
    trials = optuna.load_study(study_name="ltr-tune", storage=storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.RUNNING]
    assert sorted(trials[1].intermediate_values) == [1]  # it died in epoch 2, before reporting it
    interrupted = trials[1].params

    assert main(args) == 0
    text = capsys.readouterr().out
    assert "trial 1 was interrupted: marked failed, its settings queued again" in text
    trials = optuna.load_study(study_name="ltr-tune", storage=storage).trials
    states = [t.state for t in trials]
    assert states[1] == TrialState.FAIL and states.count(TrialState.FAIL) == 1
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == 3  # --trials counts finished trials, not the killed one
    assert trials[2].params == interrupted and trials[2].user_attrs["retry_of"] == 1

    # best.toml is a configuration `ltr train` accepts, and it reproduces the best trial exactly
    best = max((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    assert f"best: trial {best.number}" in text
    run_dir = tmp_path / "best-run"
    assert main(["train", "--config", str(out / "best.toml"), "--train", str(data_files[0]), "--valid", str(data_files[1]),
                 "--quiet", "--out", str(run_dir)]) == 0
    assert valid_ndcg10(run_dir) == pytest.approx(best.value, abs=1e-12)

    # every finished trial has its HParams record; the killed trial's partial logs are gone
    for t in finished:
        hp = hparams_of(out / "tensorboard" / f"trial-{t.number:04d}")
        assert hp["trial"].number_value == t.number and hp["train.lr"].number_value == pytest.approx(t.params["train.lr"])
    assert not (out / "tensorboard" / "trial-0001").exists()
    saved = json.loads((out / "trials.json").read_text())
    expected = {"complete": states.count(TrialState.COMPLETE), "pruned": states.count(TrialState.PRUNED), "fail": 1}
    assert saved["counts"] == {k: v for k, v in expected.items() if v}

    # a finished search run again does nothing more; another space in the same folder is refused
    assert main(args) == 0 and len(optuna.load_study(study_name="ltr-tune", storage=storage).trials) == len(trials)
    other = tmp_path / "other.toml"
    other.write_text(space.read_text().replace("epochs = 3", "epochs = 4"))
    assert main(["tune", "--config", str(other), "--trials", "3", "--out", str(out)]) == 2
    assert "another search space" in capsys.readouterr().err


class PruneFromStepTwo(optuna.pruners.BasePruner):
    """Prunes every trial after the first once it has reported epoch 2."""

    def prune(self, study, trial):
        return trial.number >= 1 and max(trial.intermediate_values, default=0) >= 2


def test_pruning_stops_the_trainer_and_is_recorded(data_files, tmp_path):
    from ltr.data import load_svmlight
    from ltr.study.tune import run_tuning

    cfg = load_tune_config(write_space(tmp_path / "space.toml", data_files))
    data = (load_svmlight(data_files[0], cache=False), load_svmlight(data_files[1], n_features=6, cache=False))
    lines = []
    result = run_tuning(cfg, tmp_path / "study", 2, data, pruner=PruneFromStepTwo(), say=lines.append)
    trials = optuna.load_study(study_name="ltr-tune", storage=f"sqlite:///{tmp_path / 'study' / 'study.db'}").trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED]
    assert sorted(trials[0].intermediate_values) == [1, 2, 3] and sorted(trials[1].intermediate_values) == [1, 2]
    assert trials[1].user_attrs["info"]["epochs_run"] == 2 and "pruned after epoch 2" in lines[1]
    assert hparams_of(tmp_path / "study" / "tensorboard" / "trial-0001")["trial_state"].string_value == "pruned"
    assert result.best_trial == 0 and result.counts == {"complete": 1, "pruned": 1}


def test_lightgbm_search_and_its_best_toml_for_ltr_gbdt(data_files, tmp_path):
    space = tmp_path / "gbdt.toml"
    space.write_text(f"""
[tune]
kind = "lightgbm"
startup_trials = 2
[data]
train = "{data_files[0]}"
valid = "{data_files[1]}"
[lightgbm]
min_data_in_leaf = 5
num_threads = 1
[gbdt]
num_boost_round = 15
early_stopping_rounds = 5
[space.lightgbm]
num_leaves = {{ int = [3, 15] }}
learning_rate = {{ float = [0.05, 0.3], log = true }}
""")
    out = tmp_path / "study"
    assert main(["tune", "--config", str(space), "--trials", "2", "--out", str(out)]) == 0
    trials = optuna.load_study(study_name="ltr-tune", storage=f"sqlite:///{out / 'study.db'}").trials
    best = max((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    run_dir = tmp_path / "gbdt-run"
    assert main(["gbdt", "--config", str(out / "best.toml"), "--train", str(data_files[0]), "--valid", str(data_files[1]),
                 "--quiet", "--out", str(run_dir)]) == 0
    assert valid_ndcg10(run_dir) == pytest.approx(best.value, abs=1e-12)


@pytest.mark.parametrize("section, text, message", [
    ("[space.train]", "weight_decay = { uniform = [0.1, 0.2] }", "give exactly one of"),
    ("[space.train]", "weight_decay = { float = [0.1, 0.01] }", "low < high"),
    ("[space.train]", "epoch = { int = [1, 3] }", "unknown key 'epoch'"),
    ("[train]", "monitor = 'map'", "set by ltr tune"),
    ("[tune]", "kind = 'forest'", "choose neural or lightgbm"),
])
def test_bad_spaces_are_refused_with_the_key(data_files, tmp_path, section, text, message):
    base = SPACE.format(pruner="median", train=data_files[0], valid=data_files[1])
    path = tmp_path / "bad.toml"
    path.write_text(base.replace(section, section + "\n" + text, 1))
    with pytest.raises(LtrError, match=message):
        load_tune_config(path)


# --------------------------------------------------------------------------------------------------
# best.toml is written by tomli-w: every value reads back as it was (issue 48)
# --------------------------------------------------------------------------------------------------
def _same(a, b) -> bool:
    """Equality that takes NaN for NaN (a NaN learning rate is written as TOML's nan)."""
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_toml_text_reads_back_whatever_the_values():
    """The hand-written writer failed on a string holding a carriage return or a control character (a
    raw TOMLDecodeError) and refused a NaN; property-based: any text, number, boolean and list."""
    import tomllib

    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ltr.train.config import toml_text

    scalar = st.one_of(st.text(max_size=12), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True), st.booleans())
    value = st.one_of(scalar, st.lists(scalar, max_size=4))
    tables = st.dictionaries(st.sampled_from(["train", "lightgbm", "model"]),
                             st.dictionaries(st.text(min_size=1, max_size=8), value, max_size=5), max_size=3)

    @settings(max_examples=60, database=None, deadline=None)
    @given(tables)
    def round_trip(values):
        assert _same(values, tomllib.loads(toml_text(values)))

    round_trip()
    text = toml_text({"train": {"monitor": "a\rb\x01\"", "lr": float("nan"), "seed": np.int64(3), "grad_clip": None}}, "# best")
    assert text.startswith("# best\n\n[train]\n")
    back = tomllib.loads(text)["train"]
    assert back["monitor"] == "a\rb\x01\"" and back["lr"] != back["lr"] and back["seed"] == 3 and "grad_clip" not in back
