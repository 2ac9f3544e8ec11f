"""Bad input, round 2 (issue 25): the surfaces added after the first battery.

Parquet folders, ``ltr convert``, stores, ``ltr tune``, ``ltr importance``, ``NeuralRanker``, the
trec_eval names and what a newcomer tripped on. The table uses the first battery's rules
(:mod:`test_bad_inputs`: exit 2, one line naming the place, inputs unchanged, no ``.partial`` left);
the cases that are not a refusal (a message that must say something, a subprocess under a file-size
limit) are tests of their own below it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from ltr.cli import main
from test_bad_inputs import (
    Case,
    _parquet,
    _quiet_main,
    assert_refused,
    build_world,
    check_refusal,
    run_cli,
    space,
    store_copy,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world2"))


# --------------------------------------------------------------------------------------------------
# Setups
# --------------------------------------------------------------------------------------------------
def parquet_folder(**second):
    """A Parquet folder of two files; the second file's columns changed by ``second`` (see _parquet)."""

    def setup(tmp: Path, w: dict) -> dict:
        d = tmp / "pqdir"
        d.mkdir()
        _parquet(d / "a.parquet", seed=5)
        _parquet(d / "b.parquet", seed=6, qid=lambda v: v + 100, **second)
        return {"bad": str(d)}

    return setup


def store_with(**arrays):
    """The world's store with some arrays replaced (``name=function of the old array``)."""

    def edit(folder: Path) -> None:
        for name, change in arrays.items():
            old = np.load(folder / f"{name}.npy")
            np.save(folder / f"{name}.npy", change(old.copy()))

    return store_copy(edit)


def _set(index, value):
    def change(a):
        a[index] = value
        return a

    return change


def dup_doc_ids(tmp: Path, w: dict) -> dict:
    """A Parquet file whose query 2 (rows 4..7) holds document id d5 twice (rows 5 and 7)."""
    _parquet(tmp / "dup.parquet", docid=[f"d{i}" for i in range(7)] + ["d5"] + [f"d{i}" for i in range(8, 16)])
    return {"bad": str(tmp / "dup.parquet")}


def lgb_space(body: str) -> Callable[[Path, dict], dict]:
    """A LightGBM search space over the world's data (``{bad}``), 2 rounds, ``body`` added."""

    def setup(tmp: Path, w: dict) -> dict:
        head = (f'[tune]\nkind = "lightgbm"\nmetric = "ndcg@10"\n[data]\ntrain = "{w["train"]}"\nvalid = "{w["valid"]}"\n'
                "[gbdt]\nnum_boost_round = 2\n")
        (tmp / "space.toml").write_text(head + body)
        return {"bad": str(tmp / "space.toml")}

    return setup


def study_db(content: bytes | None = None, mode: int | None = None) -> Callable[[Path, dict], dict]:
    """A neural space as ``{bad}`` and ``{tmp}/tu/study.db`` holding ``content`` (None: a study of one
    finished trial), then chmod ``mode``."""

    def setup(tmp: Path, w: dict) -> dict:
        d = space("[space.train]\nlr = { float = [1e-3, 1e-2] }\n")(tmp, w)
        if content is None:
            assert _quiet_main(["tune", "--config", d["bad"], "--trials", "1", "--out", str(tmp / "tu")]) == 0
        else:
            (tmp / "tu").mkdir()
            (tmp / "tu" / "study.db").write_bytes(content)
        if mode is not None:
            os.chmod(tmp / "tu" / "study.db", mode)
        return d

    return setup


def mlp_model(**changes) -> Callable[[Path, dict], dict]:
    """An MLP model folder for the world's 5 features, its model.json changed by ``changes``."""

    def setup(tmp: Path, w: dict) -> dict:
        from ltr.train.models import MLPScorer, save_model

        save_model(MLPScorer(5, hidden=(4,)), tmp / "mlp")
        d = json.loads((tmp / "mlp" / "model.json").read_text())
        d.update(changes)
        (tmp / "mlp" / "model.json").write_text(json.dumps(d))
        return {"bad": str(tmp / "mlp")}

    return setup


def pq_model_and_renamed_data(tmp: Path, w: dict, key: str = "bad") -> dict:
    """A linear model trained on the world's Parquet file (features f1..f3), and ``other.parquet``
    whose three feature columns are named g1..g3 (same values): matching by position would run."""
    import pyarrow.parquet as pq

    assert _quiet_main(["train", "--train", w["pq"], "--valid", w["pq"], "--quiet", "--epochs", "1", "--model", "linear",
                        "--out", str(tmp / "m")]) == 0
    table = pq.read_table(w["pq"])
    pq.write_table(table.rename_columns([{"f1": "g1", "f2": "g2", "f3": "g3"}.get(c, c) for c in table.column_names]),
                   tmp / "other.parquet")
    return {key: str(tmp / "m")}


T = ["train", "--train", "{train}", "--valid", "{valid}", "--quiet", "--epochs", "1", "--out", "{tmp}/out"]
TU = ["tune", "--config", "{bad}", "--trials", "1", "--out", "{tmp}/tu"]
CASES: list[Case] = [
    # ------------------------------------------------------------------ Parquet folders: every file checked
    Case("pq-folder-second-file-lacks-a-column", ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"],
         ("b.parquet", "f3"), parquet_folder(f3=None)),
    Case("pq-folder-second-file-text-feature", ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"],
         ("b.parquet", "f2", "string"), parquet_folder(f2=lambda v: ["abc"] * len(v))),
    Case("pq-folder-second-file-numbers-as-text", ["train", "--train", "{bad}", "--valid", "{bad}", "--quiet",
                                                   "--epochs", "1", "--out", "{tmp}/o"],
         ("b.parquet", "f1", "string"), parquet_folder(f1=lambda v: [f"{x:.3f}" for x in v])),
    Case("pq-folder-second-file-text-label", ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"],
         ("b.parquet", "label"), parquet_folder(label=lambda v: [str(x) for x in v])),
    # ------------------------------------------------------------------ nothing new inside an input folder
    Case("convert-out-inside-parquet-folder", ["convert", "{bad}", "--out", "{bad}/x.store", "--quiet"],
         ("--out", "inside the input folder"), parquet_folder()),
    Case("train-out-inside-store", ["train", "--train", "{store}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                    "--out", "{store}/run"], ("--out", "inside the input folder")),
    Case("importance-out-inside-model", ["importance", "--model", "{lin}", "--data", "{test}", "--repeats", "1",
                                         "--out", "{lin}/imp"], ("--out", "inside the input folder")),
    Case("simulate-out-inside-logger-model", ["clicks", "simulate", "--data", "{train}", "--logger-model", "{lin}",
                                              "--out", "{lin}/sim", "--quiet"], ("--out", "inside the input folder")),
    Case("evaluate-json-inside-ranker", ["clicks", "evaluate", "--log", "{log}", "--data", "{train}", "--ranker", "{lin}",
                                         "--json", "{lin}/ips.json"], ("--json", "inside the input folder")),
    Case("open-bandit-json-inside-data", ["clicks", "open-bandit", "--data", "{data}", "--json", "{data}/ob.json"],
         ("--json", "inside the input folder")),
    Case("ablate-out-inside-a-data-folder", ["ablate", "--config", "{bad}", "--out", "{data}/abl", "--no-progress"],
         ("--out", "inside the input folder"),
         lambda t, w: ((t / "a.toml").write_text(f'[[datasets]]\nname = "f"\nkind = "folds"\npath = "{w["data"]}"\n'),
                       {"bad": str(t / "a.toml")})[1]),
    # ------------------------------------------------------------------ ltr tune: the study file, the spaces
    Case("tune-study-db-garbage", TU, ("study.db", "not an sqlite database"), study_db(b"garbage garbage garbage\n")),
    Case("tune-study-db-damaged-sqlite", TU, ("study.db",), study_db(b"SQLite format 3\x00" + bytes(range(256)) * 8)),
    Case("tune-study-db-read-only", TU[:4] + ["2"] + TU[5:], ("study.db", "read-only"), study_db(None, 0o444)),
    Case("tune-study-db-folder", TU, ("study.db", "not a file"),
         lambda t, w: ((t / "tu" / "study.db").mkdir(parents=True), space(LR)(t, w))[1]),
    Case("tune-lightgbm-num-leaves-0", TU, ("space.toml", "num_leaves", "[2, "), lgb_space("[space.lightgbm]\nnum_leaves = { int = [0, 8] }\n")),
    Case("tune-lightgbm-learning-rate-negative", TU, ("space.toml", "learning_rate"),
         lgb_space("[space.lightgbm]\nlearning_rate = { float = [-0.1, 0.1] }\n")),
    Case("tune-lightgbm-fixed-num-leaves-1", TU, ("space.toml", "num_leaves"),
         lgb_space("[lightgbm]\nnum_leaves = 1\n[space.lightgbm]\nlearning_rate = { float = [0.01, 0.1] }\n")),
    Case("gbdt-toml-num-leaves-0", ["gbdt", "--train", "{train}", "--valid", "{valid}", "--quiet", "--num-boost-round", "2",
                                    "--out", "{tmp}/o", "--config", "{bad}"], ("g.toml", "num_leaves"),
         lambda t, w: ((t / "g.toml").write_text("[lightgbm]\nnum_leaves = 0\n"), {"bad": str(t / "g.toml")})[1]),
    # ------------------------------------------------------------------ model.json values by the [model] rules
    Case("predict-model-json-hidden-text", ["predict", "--model", "{bad}", "--data", "{test}", "--out", "{tmp}/r.run"],
         ("model.json", "hidden"), mlp_model(hidden="xy")),
    Case("predict-model-json-dropout-text", ["predict", "--model", "{bad}", "--data", "{test}", "--out", "{tmp}/r.run"],
         ("model.json", "dropout"), mlp_model(dropout="x")),
    Case("predict-model-json-activation-number", ["predict", "--model", "{bad}", "--data", "{test}", "--out", "{tmp}/r.run"],
         ("model.json", "activation"), mlp_model(activation=3)),
    # ------------------------------------------------------------------ stores: the checks of the files they came from
    Case("predict-store-nan-feature", ["predict", "--model", "{lin}", "--data", "{bad}", "--out", "{tmp}/r.run"],
         ("features.npy", "row 7", "nan"), store_with(features=_set((7, 2), np.nan))),
    Case("train-store-label-5000", ["train", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                    "--out", "{tmp}/o"], ("labels.npy", "row 3", "5000", "1024"), store_with(labels=_set(3, 5000.0))),
    Case("importance-store-label-5000", ["importance", "--model", "{lin}", "--data", "{bad}", "--repeats", "1"],
         ("labels.npy", "5000"), store_with(labels=_set(3, 5000.0))),
    Case("train-store-label-nan", ["train", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                   "--out", "{tmp}/o"], ("labels.npy", "nan"), store_with(labels=_set(0, np.nan))),
    # ------------------------------------------------------------------ importance matches Parquet columns by name
    Case("importance-parquet-other-column-names", ["importance", "--model", "{bad}", "--data", "{tmp}/other.parquet",
                                                   "--repeats", "1"], ("f1",), pq_model_and_renamed_data),
    Case("predict-parquet-other-column-names", ["predict", "--model", "{bad}", "--data", "{tmp}/other.parquet",
                                                "--out", "{tmp}/r.run"], ("f1",), pq_model_and_renamed_data),
    # ------------------------------------------------------------------ trec_eval names: every parameter in its domain
    *[Case(f"eval-trec-param-{name}", ["eval", "--qrels", "{qrels}", "--run", "{run}", "--metrics", name], expect)
      for name, expect in [
          ("iprec_at_recall.1.5", ("iprec_at_recall", "[0, 1]", "1.5")),
          ("iprec_at_recall_1.5", ("iprec_at_recall", "[0, 1]")),
          ("iprec_at_recall.-0.5", ("iprec_at_recall",)),
          ("11pt_avg.0,2", ("11pt_avg", "[0, 1]", "2")),
          ("Rprec_mult.0", ("rprec_mult", "> 0")),
          ("set_F.-1", ("set_f", ">= 0")),
          ("utility.nan,1,1,1", ("utility", "finite")),
      ]],
    # ------------------------------------------------------------------ predict: a run names each document once
    Case("predict-doc-ids-repeated-in-a-query", ["predict", "--model", "{m3}", "--data", "{bad}", "--doc-id-column", "docid",
                                                 "--out", "{tmp}/r.run"], ("dup.parquet", "'d5'", "query 2", "rows 5 and 7"),
         lambda t, w: {**dup_doc_ids(t, w), **pq_model_and_renamed_data(t, w, key="m3")}),
    Case("predict-doc-ids-repeated-qrels", ["predict", "--model", "{m3}", "--data", "{bad}", "--doc-id-column", "docid",
                                            "--out", "{tmp}/r.tsv", "--format", "tsv", "--qrels", "{tmp}/q.txt"], ("'d5'",),
         lambda t, w: {**dup_doc_ids(t, w), **pq_model_and_renamed_data(t, w, key="m3")}),
]
LR = "[space.train]\nlr = { float = [1e-3, 1e-2] }\n"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case: Case, world, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_refusal(case, world, tmp_path, capsys)


# --------------------------------------------------------------------------------------------------
# NeuralRanker (the scikit-learn interface): scikit-learn's errors, one value per row, the label rule
# --------------------------------------------------------------------------------------------------
def _arrays(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(12, 3)).astype(np.float32)
    return X, rng.integers(0, 3, 12).astype(float), np.repeat([1, 2, 3], 4)


def test_neural_ranker_predict_before_fit_raises_not_fitted_error():
    from sklearn.exceptions import NotFittedError

    from ltr.train.sklearn_ranker import NeuralRanker

    with pytest.raises(NotFittedError):
        NeuralRanker().predict(np.zeros((3, 2)))


@pytest.mark.parametrize("which", ["y", "qid", "sample_weight"])
def test_neural_ranker_refuses_a_2d_array_instead_of_flattening_it(which):
    from ltr.train.sklearn_ranker import NeuralRanker

    X, y, qid = _arrays()
    given = {"y": y, "qid": qid, "sample_weight": np.ones(12)}
    given[which] = given[which].reshape(6, 2)  # 12 values: flattened, they would pass for 12 rows
    with pytest.raises(ValueError, match=rf"{which} must hold one value per row .* shape \(6, 2\)"):
        NeuralRanker(epochs=1).fit(X, given["y"], qid=given["qid"], sample_weight=given["sample_weight"])


def test_neural_ranker_takes_a_single_column_as_scikit_learn_does():
    from ltr.train.sklearn_ranker import NeuralRanker

    X, y, qid = _arrays()
    a = NeuralRanker(model="linear", epochs=2).fit(X, y, qid=qid).predict(X)
    b = NeuralRanker(model="linear", epochs=2).fit(X, y.reshape(-1, 1), qid=qid.reshape(-1, 1)).predict(X)
    np.testing.assert_array_equal(a, b)


def test_neural_ranker_names_a_label_beyond_the_readers_rule():
    from ltr.train.sklearn_ranker import NeuralRanker

    X, y, qid = _arrays()
    y[5] = 5000
    with pytest.raises(ValueError, match=r"X: y\[5\]: label 5000 is too large: labels must be below 1024"):
        NeuralRanker(epochs=1).fit(X, y, qid=qid)
    y[5] = 1
    with pytest.raises(ValueError, match=r"eval_set\[0\]: y\[0\]: label 5000"):
        NeuralRanker(epochs=1).fit(X, y, qid=qid, eval_set=[(X, np.full(12, 5000.0), qid)])


# --------------------------------------------------------------------------------------------------
# Leftovers and misleading answers
# --------------------------------------------------------------------------------------------------
def test_a_killed_convert_leaves_a_partial_store_that_the_next_run_removes(world, tmp_path, capsys):
    """SIGKILL gives no chance to clean up: the next `ltr convert` to the same --out removes the
    dead process's .NAME.partial-PID, as a run folder's command does."""
    code = ("import os, signal, sys\nfrom ltr.data import store\nreal = store.StoreWriter.append\n"
            "def append(self, block):\n    real(self, block)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            "store.StoreWriter.append = append\nfrom ltr.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "st"
    proc = subprocess.run([sys.executable, "-c", code, "convert", world["train"], "--out", str(out), "--quiet"],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    stale = [p for p in tmp_path.iterdir() if p.name.startswith(".st.partial-")]
    assert len(stale) == 1 and (stale[0] / "features.npy").is_file() and not out.exists()
    code, err = run_cli(["convert", world["train"], "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    assert f"removed {stale[0]}, left by run process {stale[0].name.rsplit('-', 1)[1]}, which is gone" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["st"]


def test_a_port_that_answers_but_is_not_dask_is_named_as_such(world, tmp_path, capsys):
    """Not "out of memory": Dask reads an HTTP reply's first bytes as a frame length of ~3e18 bytes."""
    pytest.importorskip("distributed")
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]

    def answer():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            try:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 4)
                conn.recv(65536)
            except OSError:
                pass
            finally:
                conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        code, err = run_cli(["gbdt", "--train", world["train"], "--valid", world["valid"], "--quiet", "--num-boost-round", "2",
                             "--out", str(tmp_path / "o"), "--dask-scheduler", f"tcp://127.0.0.1:{port}"], capsys)
    finally:
        server.close()
    assert_refused(code, err, ("--dask-scheduler", f"127.0.0.1:{port}", "not as a Dask scheduler"))
    assert "memory" not in err.splitlines()[-1].replace("MemoryError", "")
    assert not (tmp_path / "o").exists()


# One interpreter for both cases (importing torch is most of a case's time): each case runs ltr.cli.main under
# its own soft RLIMIT_FSIZE, its stderr lines after a marker line.
_UNDER_LIMITS = ("import json, resource, signal, sys\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                 "from ltr.cli import main\n"
                 "for limit, argv in json.loads(sys.argv[1]):\n"
                 "    print('=== case', file=sys.stderr, flush=True)\n"
                 "    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))\n"
                 "    print('exit', main(argv), file=sys.stderr, flush=True)\n")


_LIMIT_CASES = [
    (3000, [], "tensorboard"),  # the event file passes 3 kB in TensorBoard's writer thread
    (200_000, ["--hidden", "256,256", "--checkpoint-dir", "{tmp}/ck"], "ck/last.pt"),  # a 0.8 MB checkpoint
]


def test_a_file_size_limit_is_one_line_naming_the_file(world, tmp_path):
    """RLIMIT_FSIZE with SIGXFSZ ignored: write() fails with EFBIG. Not torch's RuntimeError from its
    zip writer, not a thread traceback before the error line."""
    import shutil

    for name in ("train", "valid"):
        shutil.copy(world[name], tmp_path / f"{name}.txt")
    cases = []
    for i, (limit, extra, _) in enumerate(_LIMIT_CASES):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        cases.append((limit, ["train", "--train", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"),
                              "--quiet", "--epochs", "2", "--ensemble", "1", "--out", str(folder / "run"),
                              *[a.format(tmp=folder) for a in extra]]))
    proc = subprocess.run([sys.executable, "-c", _UNDER_LIMITS, json.dumps(cases)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    outputs = proc.stderr.split("=== case\n")[1:]
    assert len(outputs) == len(_LIMIT_CASES), proc.stderr
    for i, ((_, _, where), out) in enumerate(zip(_LIMIT_CASES, outputs)):
        lines = [line for line in out.splitlines() if line.strip()]
        assert lines[-1] == "exit 2" and len(lines) == 2, out
        assert lines[0].startswith("ltr train: error: ") and where in lines[0] and "file too large" in lines[0], lines[0]
        folder = tmp_path / f"case{i}"
        assert not (folder / "run").exists() and not list(folder.glob(".run.partial*"))


# --------------------------------------------------------------------------------------------------
# What a newcomer tripped on
# --------------------------------------------------------------------------------------------------
def test_shipped_ablation_config_with_datasets_synthetic_does_not_look_for_mq2008(tmp_path, monkeypatch):
    """From a folder without ../shared/data, `--datasets synthetic` takes the shipped config; the
    MQ2008 folder is still checked when its data set is asked for."""
    from ltr.cli import build_parser
    from ltr.commands.ablate import build_config
    from ltr.base.errors import LtrError

    monkeypatch.chdir(tmp_path)
    shipped = str(ROOT / "experiments" / "ablate_pairwise_vs_lambda.toml")
    args = build_parser().parse_args(["ablate", "--config", shipped, "--datasets", "synthetic", "--out", "abl"])
    config = build_config(args)
    assert [d.name for d in config.datasets] == ["synthetic"] and len(config.methods) == 7
    args = build_parser().parse_args(["ablate", "--config", shipped, "--datasets", "mq2008", "--out", "abl"])
    with pytest.raises(LtrError, match="letor4-mq2008: folder not found"):
        build_config(args)


@pytest.mark.parametrize("argv, line", [
    (["train", "--train", "a", "--valid", "b", "--epochs", "0"], "ltr train: error: argument --epochs: must be an integer >= 1, got '0'"),
    (["train"], "ltr train: error: the following arguments are required: --train, --valid (see ltr train --help)"),
    (["eval", "--qrels", "a", "--run", "b", "--bogus"], "ltr eval: error: unrecognized arguments: --bogus (see ltr eval --help)"),
    (["clicks", "estimate", "--log", "a", "--bogus", "1"],
     "ltr clicks estimate: error: unrecognized arguments: --bogus 1 (see ltr clicks estimate --help)"),
    (["gbdt", "--train", "a", "--valid", "b", "--out", "c", "--gain", "cubic"],
     "ltr gbdt: error: argument --gain: invalid choice: 'cubic' (choose from 'exp2', 'linear')"),
])
def test_an_option_error_is_one_line_without_the_usage_block(argv, line, capsys):
    code, err = run_cli(argv, capsys)
    assert code == 2 and err.splitlines() == [line], err


def test_help_still_shows_the_usage(capsys):
    capsys.readouterr()
    assert _quiet_main(["train", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: ltr train [-h] --train FILE --valid FILE")


def _tiny_sets():
    from ltr.train.sklearn_ranker import dataset_from_arrays

    X, y, qid = _arrays()
    return dataset_from_arrays(X, y, qid), dataset_from_arrays(X[:8], y[:8], qid[:8])


def test_a_resumed_run_says_where_it_resumes(tmp_path, capsys):
    import losses
    from ltr.train.config import TrainConfig
    from ltr.train.models import LinearScorer
    from ltr.train.trainer import Trainer

    train, valid = _tiny_sets()
    ck = tmp_path / "ck"
    for epochs in (2, 3):
        cfg = TrainConfig(epochs=epochs, batch_size=2, checkpoint_dir=str(ck), resume=True, progress=False, patience=None)
        Trainer(LinearScorer(3), losses.get_loss("ranknet"), cfg).fit(train, valid)
        err = capsys.readouterr().err
        if epochs == 2:
            assert "resuming" not in err
    assert f"resuming from {ck / 'last.pt'} at epoch 3 (2 of 3 epochs done)" in err


def test_an_ensembles_progress_bar_names_the_member(capsys):
    import losses
    from ltr.train.config import TrainConfig
    from ltr.train.ensemble import fit_ensemble
    from ltr.train.models import LinearScorer

    train, valid = _tiny_sets()
    cfg = TrainConfig(epochs=1, batch_size=2, progress=True)
    fit_ensemble(lambda seed: LinearScorer(3), losses.get_loss("ranknet"), cfg, train, valid, seeds=[4, 9])
    err = capsys.readouterr().err
    assert "member 1/2 (seed 4) epochs" in err and "member 2/2 (seed 9) epochs" in err
    # after the first member: how long the rest will take (the README's 5-member attention ensemble: an hour)
    assert re.search(r"member 1/2 trained; about \d+ s more for the other 1\n", err), err
    assert "member 2/2 trained" not in err


def test_durations_read_in_the_unit_that_fits():
    from ltr.train.ensemble import _duration

    assert [_duration(s) for s in (44.6, 720, 5400)] == ["45 s", "12 min", "1.5 h"]


def test_compare_announces_the_queries_its_statistics_use(tmp_path, capsys):
    """Query 4 has no relevant document: NDCG and MAP skip it, so the tests use 3 of the 4 queries."""
    qrels = "".join(f"{q} 0 d{d} {(q + d) % 3 if q < 4 else 0}\n" for q in range(1, 5) for d in range(4))
    (tmp_path / "qrels.txt").write_text(qrels)
    for name, sign in (("a", 1), ("b", -1)):
        (tmp_path / f"{name}.run").write_text(
            "".join(f"{q} Q0 d{d} {d + 1} {sign * (10 - d)} {name}\n" for q in range(1, 5) for d in range(4)))
    capsys.readouterr()
    assert main(["compare", "--qrels", str(tmp_path / "qrels.txt"), "--run", str(tmp_path / "a.run"), "--run",
                 str(tmp_path / "b.run"), "--metrics", "ndcg@10,map", "--json", str(tmp_path / "c.json")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("4 queries, 1 without relevant items skipped; "), first
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["queries"] == 4 and report["queries_used"] == {"ndcg@10": 3, "map": 3}
