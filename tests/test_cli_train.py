"""``ltr train`` / ``ltr gbdt`` / ``ltr predict`` end to end, their run folders and their refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_training import make_ds

import metrics
from ltr.cli import build_parser, main
from ltr.data import load_svmlight, save_svmlight
from ltr.train.models import load_model
from ltr.train.trainer import predict_scores


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_data")
    paths = {}
    for name, (nq, seed) in {"train": (40, 21), "valid": (12, 22), "test": (12, 23)}.items():
        paths[name] = d / f"{name}.txt"
        save_svmlight(make_ds(nq, seed), paths[name])
    return paths


def read_run(path):
    rows = [line.split() for line in path.read_text().splitlines()]
    assert all(len(r) == 6 and r[1] == "Q0" for r in rows)
    return rows


def run_scores(rows, ds):
    """Scores back in data-set row order (doc id = row index within its query)."""
    scores = np.full(ds.n_items, np.nan)
    qpos = {str(q): i for i, q in enumerate(ds.query_ids)}
    for qid, _, doc, rank, score, _ in rows:
        scores[ds.query_offsets[qpos[qid]] + int(doc)] = float(score)
    return scores


def test_train_then_predict(files, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--test", str(files["test"]),
                 "--loss", "ranknet", "--model", "mlp", "--hidden", "12,6", "--epochs", "3", "--seed", "4",
                 "--normalize", "standard", "--out", str(out), "--quiet"])
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [".ltr-run.json", "input_transform.json", "model.json", "model.pt", "summary.json", "tensorboard"]
    # three MLPs by default (seeds 4, 5, 6), each with its TensorBoard folder
    assert [len(list((out / "tensorboard" / f"member-{k}").glob("events.out.tfevents.*"))) for k in range(3)] == [1, 1, 1]
    assert not list(tmp_path.glob(".run.partial-*"))
    summary = json.loads((out / "summary.json").read_text())
    assert [m["seed"] for m in summary["ensemble"]] == [4, 5, 6]
    assert summary["config"]["train"]["batch_size"] == 4  # auto: 40 training queries // 30 = 1, raised to 4
    assert summary["seed"] == 4 and summary["config"]["loss"] == {"name": "ranknet"}
    assert summary["config"]["model"]["hidden"] == [12, 6] and summary["config"]["train"]["epochs"] == 3
    assert set(summary["versions"]) >= {"python", "torch", "lightgbm", "numpy", "ltr"}
    assert summary["wall_time_s"] > 0 and len(summary["history"]) == 3
    test_metrics = summary["metrics"]["test"]
    ndcg_name = next(k for k in test_metrics if k.startswith("ndcg@10["))

    # the saved model reproduces the summary's test metric
    test = load_svmlight(files["test"], n_features=6, cache=False)
    model = load_model(out)
    assert len(model.members) == 3
    assert all(m.normalizer is not None and m.hidden == (12, 6) for m in model.members)
    scores = predict_scores(model, test.features)
    ev = metrics.evaluate(scores, test.labels, test.query_offsets, ["ndcg@10"])
    assert ev.mean[ndcg_name] == pytest.approx(test_metrics[ndcg_name], abs=1e-12)

    run_file = tmp_path / "test.run"
    assert main(["predict", "--model", str(out), "--data", str(files["test"]), "--out", str(run_file)]) == 0
    rows = read_run(run_file)
    assert len(rows) == test.n_items and {r[5] for r in rows} == {"run"}
    np.testing.assert_allclose(run_scores(rows, test), scores, rtol=1e-6)
    # ranks are 1..n within each query, by descending score
    for q, qid in enumerate(test.query_ids):
        mine = [r for r in rows if r[0] == str(qid)]
        assert [int(r[3]) for r in mine] == list(range(1, len(mine) + 1))
        assert all(float(a[4]) >= float(b[4]) for a, b in zip(mine, mine[1:]))


def test_train_attention_ensemble_then_predict(files, tmp_path):
    out = tmp_path / "attn"
    assert main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--test", str(files["test"]),
                 "--loss", "softmax", "--model", "attention", "--width", "8", "--heads", "2", "--layers", "1",
                 "--input-noise", "0.1", "--ensemble", "2", "--normalize", "standard", "--epochs", "2", "--seed", "7",
                 "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [m["seed"] for m in summary["ensemble"]] == [7, 8]
    assert sorted(p.name for p in (out / "tensorboard").iterdir()) == ["member-0", "member-1"]
    model = load_model(out)
    assert model.config()["type"] == "ensemble" and model.listwise
    assert model.members[0].config() == {"type": "attention", "n_features": 6, "width": 8, "heads": 2, "layers": 1,
                                         "dropout": 0.1, "input_noise": 0.1, "normalizer": "standard"}
    test = load_svmlight(files["test"], n_features=6, cache=False)
    scores = predict_scores(model, test.features, query_offsets=test.query_offsets)
    ev = metrics.evaluate(scores, test.labels, test.query_offsets, ["ndcg@10"])
    name = next(iter(ev.mean))
    assert ev.mean[name] == pytest.approx(summary["metrics"]["test"][name], abs=1e-12)
    run_file = tmp_path / "attn.run"
    assert main(["predict", "--model", str(out), "--data", str(files["test"]), "--out", str(run_file)]) == 0
    np.testing.assert_allclose(run_scores(read_run(run_file), test), scores, rtol=1e-6)


def test_gbdt_then_predict(files, tmp_path):
    out = tmp_path / "gbdt"
    cfg = tmp_path / "g.toml"
    cfg.write_text("[lightgbm]\nnum_leaves = 7\nmin_data_in_leaf = 5\nnum_threads = 1\n[gbdt]\nnum_boost_round = 20\nearly_stopping_rounds = 5\n")
    code = main(["gbdt", "--train", str(files["train"]), "--valid", str(files["valid"]), "--test", str(files["test"]),
                 "--config", str(cfg), "--out", str(out), "--quiet"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["lightgbm"]["num_leaves"] == 7 and summary["label_gain"] == [0.0, 1.0, 3.0, 7.0, 15.0]
    best = summary["best_iteration"]
    # LightGBM's own validation ndcg@10 at the best round = the project's under the lightgbm preset
    valid = load_svmlight(files["valid"], n_features=6, cache=False)
    run_file = tmp_path / "valid.run"
    assert main(["predict", "--model", str(out), "--data", str(files["valid"]), "--out", str(run_file), "--tag", "lgb"]) == 0
    scores = run_scores(read_run(run_file), valid)
    ev = metrics.evaluate(scores, valid.labels, valid.query_offsets, ["ndcg@10"], preset="lightgbm")
    # ... and is stamped with that preset's conventions (empty=one), not written as the project's ndcg
    own = summary["lightgbm_own_metrics"]
    assert "empty=one" in ev.names["ndcg@10"] and "empty=one" in own["convention"]
    assert ev.mean[ev.names["ndcg@10"]] == pytest.approx(own["per_round"]["valid"][ev.names["ndcg@10"]][best - 1], abs=1e-6)
    # the training curve is there too, one value per round, and TensorBoard holds both under stamped tags
    rounds = len(own["per_round"]["valid"][ev.names["ndcg@10"]])
    assert len(own["per_round"]["train"][ev.names["ndcg@10"]]) == rounds
    tags = set(summary["tensorboard"]["tags"].values())
    assert f"train/{ev.names['ndcg@10']}" in tags and f"valid/{ev.names['ndcg@10']}" in tags
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tensorboard")).Reload()
    assert len(acc.Scalars(f"train/{ev.names['ndcg@10']}")) == rounds
    # gain and split importances, named, one per feature, beside a bar chart
    imp = json.loads((out / "importance.json").read_text())
    assert imp["feature"] == [f"f{j}" for j in range(1, 7)] and len(imp["gain"]) == 6
    assert sum(imp["split"]) > 0 and (out / "importance.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--train", "MISSING"], "file not found"),
        (["--loss", "lambdamart"], "lambdamart"),
        (["--model", "attention", "--width", "10", "--heads", "3"], "multiple of heads"),
        (["--config", "BADKEY"], "unknown key 'epoch'"),
        (["--hidden", "12,x"], "--hidden must be comma-separated integers"),
        (["--device", "cuda:7"], "cuda:7"),
    ],
)
def test_train_refuses_bad_input_and_writes_nothing(files, tmp_path, capsys, extra, message):
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text("[train]\nepoch = 3\n")
    args = {"--train": str(files["train"]), "--valid": str(files["valid"]), "--loss": "ranknet", "--epochs": "1"}
    for flag, value in zip(extra[::2], extra[1::2]):
        args[flag] = {"MISSING": str(tmp_path / "nope.txt"), "BADKEY": str(bad_cfg)}.get(value, value)
    out = tmp_path / "out"
    argv = ["train", *[x for kv in args.items() for x in kv], "--out", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["bad.toml"]


def test_existing_output_is_refused_unless_forced(files, tmp_path, capsys):
    out = tmp_path / "taken"
    argv = ["gbdt", "--train", str(files["train"]), "--valid", str(files["valid"]), "--num-boost-round", "3", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    first = (out / "model.txt").read_bytes()
    (out / "model.txt").write_text("stale")
    assert main(argv) == 2
    assert "already exists" in capsys.readouterr().err and (out / "model.txt").read_text() == "stale"
    assert main(argv + ["--force"]) == 0  # a run folder made by ltr is replaced, whole
    assert (out / "model.txt").read_bytes() == first


def test_force_never_replaces_a_folder_ltr_did_not_make(files, tmp_path, capsys):
    """Issue 13: `--out v --force` with the data in v/ deleted the data; a folder without ltr's mark stays."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("x")
    argv = ["gbdt", "--train", str(files["train"]), "--valid", str(files["valid"]), "--num-boost-round", "3",
            "--out", str(mine), "--quiet", "--force"]
    assert main(argv) == 2
    assert "not a run folder made by ltr" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt"]


def test_predict_refuses_bad_model_folder(files, tmp_path, capsys):
    (tmp_path / "empty").mkdir()  # the run file goes beside the folder: never inside an input folder
    assert main(["predict", "--model", str(tmp_path / "empty"), "--data", str(files["test"]), "--out", str(tmp_path / "r.run")]) == 2
    assert "no model.json" in capsys.readouterr().err
    assert not (tmp_path / "r.run").exists()


@pytest.mark.parametrize("command", ["train", "gbdt", "predict"])
def test_every_option_is_documented(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    for action in sub._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and len(action.help) > 10, action.option_strings
    text = sub.format_help()
    for action in sub._actions:
        for opt in action.option_strings:
            assert opt in text


def test_synth_train_predict_eval_end_to_end(tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["synth", "--out", str(data), "--queries", "60", "--features", "10", "--mean-length", "12",
                 "--max-length", "40", "--seed", "3", "--quiet"]) == 0
    run_dir = tmp_path / "run"
    assert main(["train", "--train", str(data / "train.txt"), "--valid", str(data / "valid.txt"), "--test", str(data / "test.txt"),
                 "--loss", "lambdarank", "--model", "linear", "--normalize", "log1p_standard", "--epochs", "2",
                 "--metrics", "ndcg@10,map", "--out", str(run_dir), "--quiet"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    run_file, qrels = tmp_path / "test.run", tmp_path / "test.qrels"
    assert main(["predict", "--model", str(run_dir), "--data", str(data / "test.txt"), "--out", str(run_file), "--qrels", str(qrels)]) == 0
    report = tmp_path / "eval.json"
    capsys.readouterr()
    assert main(["eval", "--qrels", str(qrels), "--run", str(run_file), "--metrics", "ndcg@10,map", "--output", str(report)]) == 0
    # ltr eval stamps that its ideal DCG / |R| come from the qrels (here: the same labels as the data)
    evaluated = {m["stamped"].replace(",R=qrels]", "]"): m["mean"] for m in json.loads(report.read_text())["metrics"].values()}
    # ltr eval on the written run + qrels gives the metrics the trainer reported for the test split
    assert len(summary["metrics"]["test"]) == 2
    for name, value in summary["metrics"]["test"].items():
        assert evaluated[name] == pytest.approx(value, abs=1e-9), name


def test_toml_config_and_command_line_precedence(files, tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[train]\nepochs = 5\nbatch_size = 4\nmetrics = ["map"]\nmonitor = "map"\n'
                   '[model]\ntype = "mlp"\nhidden = [5]\nactivation = "tanh"\n[loss]\nname = "ranknet"\nsigma = 2.0\n')
    out = tmp_path / "run"
    assert main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--config", str(cfg),
                 "--epochs", "1", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["train"]["epochs"] == 1  # the command line wins over the file
    assert summary["config"]["train"]["batch_size"] == 4 and summary["config"]["loss"] == {"name": "ranknet", "sigma": 2.0}
    assert summary["monitor"].startswith("map[") and list(summary["metrics"]["valid"]) == [summary["monitor"]]
    assert summary["monitor_higher_is_better"] is True
    model = load_model(out)
    assert all(m.hidden == (5,) and m.activation == "tanh" for m in model.members)


def test_gbdt_reads_negative_labels_as_judged_non_relevant(files, tmp_path, capsys):
    """One rule for negative labels (ltr.data.labels): read as 0, with a note; LightGBM never sees them."""
    neg = tmp_path / "neg.txt"
    neg.write_text("-1 qid:1 1:0.5\n0 qid:1 1:0.2\n1 qid:2 1:0.1\n0 qid:2 1:0.3\n")
    out = tmp_path / "out"
    assert main(["gbdt", "--train", str(neg), "--valid", str(neg), "--out", str(out), "--quiet"]) == 0
    assert "--train " + str(neg) + ": 1 negative label(s) read as 0" in capsys.readouterr().err
    assert load_svmlight(neg).labels.tolist() == [0.0, 0.0, 1.0, 0.0]
    assert load_svmlight(neg, negative_labels="keep", cache=False).labels[0] == -1.0


def test_resumed_train_logs_every_epoch_to_tensorboard(files, tmp_path):
    """A run extended from its checkpoint (--checkpoint-dir, more --epochs) has TensorBoard curves
    from epoch 1 in its new run folder, equal to its summary's history."""
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    common = ["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--loss", "ranknet",
              "--model", "linear", "--patience", "10", "--checkpoint-dir", str(tmp_path / "ckpt"), "--quiet"]
    assert main(common + ["--epochs", "2", "--out", str(tmp_path / "first")]) == 0
    assert main(common + ["--epochs", "4", "--out", str(tmp_path / "extended")]) == 0
    summary = json.loads((tmp_path / "extended" / "summary.json").read_text())
    first = json.loads((tmp_path / "first" / "summary.json").read_text())
    assert summary["history"][:2] == first["history"]  # the restored epochs
    ea = event_accumulator.EventAccumulator(str(tmp_path / "extended" / "tensorboard"), size_guidance={"scalars": 0})
    ea.Reload()
    events = ea.Scalars("train/loss")
    assert [e.step for e in events] == [1, 2, 3, 4]
    np.testing.assert_allclose([e.value for e in events], [h["train_loss"] for h in summary["history"]], rtol=1e-6)


@pytest.mark.parametrize("command", ["train", "gbdt"])
def test_unknown_metric_is_refused_before_training(files, tmp_path, capsys, command):
    out = tmp_path / "run"
    args = [command, "--train", str(files["train"]), "--valid", str(files["valid"]), "--metrics", "ndcg@10,bogus",
            "--out", str(out), "--quiet"]
    assert main(args + (["--epochs", "1"] if command == "train" else [])) == 2
    err = capsys.readouterr().err
    assert "invalid metrics" in err and "bogus" in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
