"""Bad input, round 3 (issue 48): files overwritten, engine parameters, training on no signal, hints.

The table uses the first battery's rules (:mod:`test_bad_inputs`: exit 2, one line naming the place,
inputs and earlier outputs unchanged, files named in ``protect`` byte for byte, no ``.partial`` left).
The cases that are not a refusal (a hint that must work when followed, what a run prints, the Python
API) are tests of their own below it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from test_bad_inputs import Case, _quiet_main, build_world, check_refusal, edit_json, put, run_cli, store_copy

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world3"))


# --------------------------------------------------------------------------------------------------
# Setups
# --------------------------------------------------------------------------------------------------
def data_copy(name: str = "s/test.txt") -> Callable[[Path, dict], dict]:
    """A copy of the world's test file at ``tmp/name`` (the user's data file): ``{bad}``."""

    def setup(tmp: Path, w: dict) -> dict:
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(w["test"], p)
        return {"bad": str(p)}

    return setup


def holding(name: str) -> Callable[[Path, dict], dict]:
    """A folder ``tmp/mine`` (no ltr mark) holding the user's file ``name``: ``{bad}`` is the folder."""

    def setup(tmp: Path, w: dict) -> dict:
        (tmp / "mine").mkdir()
        (tmp / "mine" / name).write_text("the user's own file\n")
        return {"bad": str(tmp / "mine"), "theirs": str(tmp / "mine" / name)}

    return setup


CONSTANT = "".join(f"{q % 3} qid:{q // 4 + 1} 1:0.5 2:0 3:7 4:1 5:-2\n" for q in range(16))  # the world's 5 features
G = ["gbdt", "--train", "{train}", "--valid", "{valid}", "--quiet", "--num-boost-round", "2", "--out", "{tmp}/o"]
GX, GC = G + ["--engine", "xgboost"], G + ["--engine", "catboost"]
EX = ["export", "--model", "{lin}", "--format", "torchscript", "--out"]
P = ["predict", "--model", "{lin}", "--data", "{test}"]
E = ["eval", "--qrels", "{qrels}", "--run", "{run}"]


def toml(name: str, body: str) -> Callable[[Path, dict], dict]:
    return lambda t, w: ((t / name).write_text(body), {"bad": str(t / name)})[1]


def tune_space(body: str, kind: str = "xgboost") -> Callable[[Path, dict], dict]:
    def setup(tmp: Path, w: dict) -> dict:
        (tmp / "space.toml").write_text(f'[tune]\nkind = "{kind}"\nmetric = "ndcg@10"\n[data]\ntrain = "{w["train"]}"\n'
                                        f'valid = "{w["valid"]}"\n[gbdt]\nnum_boost_round = 2\n' + body)
        return {"bad": str(tmp / "space.toml")}

    return setup


CASES: list[Case] = [
    # ------------------------------------------------------------------ an existing file: replaced only with --force
    Case("export-out-over-a-data-file", EX + ["{bad}"], ("--out", "test.txt", "already exists", "--force"), data_copy(),
         protect=("bad",)),
    Case("export-out-model-file-force", EX + ["{lin}/model.pt", "--force"], ("--out", "input --model")),
    Case("export-out-run-folder-file-force", EX + ["{gb}/summary.json", "--force"], ("--out", "earlier ltr run")),
    Case("predict-out-over-a-data-file", P + ["--out", "{bad}"], ("--out", "already exists", "--force"), data_copy(),
         protect=("bad",)),
    Case("predict-qrels-over-a-file", P + ["--out", "{tmp}/r.run", "--qrels", "{bad}"], ("--qrels", "already exists"),
         put("q.txt", "mine\n"), protect=("bad",)),
    Case("predict-out-is-data-force", P + ["--out", "{test}", "--force"], ("--out", "input --data")),
    Case("eval-json-over-a-file", E + ["--json", "{bad}"], ("--json", "already exists", "--force"), put("r.json", "{}"),
         protect=("bad",)),
    Case("eval-output-is-run-force", E + ["--output", "{run}", "--force"], ("--output", "input --run")),
    Case("compare-latex-over-a-file", ["compare", "--qrels", "{qrels}", "--run", "{run}", "--run", "{run}", "--latex", "{bad}"],
         ("--latex", "already exists"), put("t.tex", "mine"), protect=("bad",)),
    Case("importance-json-over-a-file", ["importance", "--model", "{lin}", "--data", "{test}", "--repeats", "1", "--json",
                                         "{bad}"], ("--json", "already exists"), put("i.json", "{}"), protect=("bad",)),
    Case("importance-out-holds-its-file-name", ["importance", "--model", "{lin}", "--data", "{test}", "--repeats", "1",
                                                "--out", "{bad}"], ("permutation_importance.json", "already exists"),
         holding("permutation_importance.json"), protect=("theirs",)),
    Case("clicks-estimate-json-over-a-file", ["clicks", "estimate", "--log", "{log}", "--json", "{bad}"],
         ("--json", "already exists", "--force to replace it"), put("e.json", "{}"), protect=("bad",)),
    # ------------------------------------------------------------------ a hint names what works
    Case("train-out-user-folder", ["train", "--train", "{train}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                   "--out", "{bad}"], ("--out", "not a run folder", "never replaces", "choose another --out"),
         holding("notes.txt"), protect=("theirs",)),
    Case("gbdt-out-user-folder-force", G[:-1] + ["{bad}", "--force"], ("--out", "not a run folder"), holding("notes.txt"),
         protect=("theirs",)),
    # ------------------------------------------------------------------ calibration tables: no silent true = 1
    Case("calibrate-table-boolean-scores", ["calibrate", "--table", "{bad}", "--method", "platt", "--out", "{tmp}/cal"],
         ("t.csv", "'score'", "true/false"), put("t.csv", "score,label\n" + "true,1\nfalse,0\n" * 10)),
    Case("calibrate-table-text-score-names-the-row", ["calibrate", "--table", "{bad}", "--method", "platt", "--out",
                                                      "{tmp}/cal"], ("t.csv", "'score'", "row 3", "'x'"),
         put("t.csv", "score,label\n0.5,1\n0.2,0\nx,1\n" + "0.4,0\n" * 10)),
    # ------------------------------------------------------------------ found by the property tests
    Case("train-store-feature-names-not-a-list", ["train", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--epochs",
                                                  "1", "--out", "{tmp}/o"], ("store.json", "feature_names"),
         store_copy(edit_json("store.json", feature_names=False))),
    # ------------------------------------------------------------------ training on no signal
    Case("train-every-feature-constant", ["train", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                          "--out", "{tmp}/o"], ("c.txt", "constant", "no signal"), put("c.txt", CONSTANT)),
    Case("gbdt-every-feature-constant", ["gbdt", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--out", "{tmp}/o"],
         ("c.txt", "constant", "no signal"), put("c.txt", CONSTANT)),
    # ------------------------------------------------------------------ engine parameters: names and ranges
    Case("gbdt-lightgbm-param-misspelt", G + ["--param", "num_leave=8"], ("--param", "num_leave", "num_leaves")),
    Case("gbdt-lightgbm-alias-out-of-range", G + ["--param", "min_child_samples=-3"], ("--param", "min_child_samples", ">= 0")),
    Case("gbdt-lightgbm-fraction-above-1", G + ["--param", "feature_fraction=1.5"], ("--param", "feature_fraction", "(0, 1]")),
    Case("gbdt-xgboost-param-misspelt", GX + ["--param", "max_dept=4"], ("--param", "max_dept", "not used", "max_depth")),
    Case("gbdt-xgboost-depth-negative", GX + ["--param", "max_depth=-1"], ("--param", "max_depth", ">= 0")),
    Case("gbdt-xgboost-eta-0", GX + ["--param", "eta=0"], ("--param", "eta", "> 0")),
    Case("gbdt-xgboost-subsample-2", GX + ["--param", "subsample=2"], ("--param", "subsample")),
    Case("gbdt-xgboost-toml-misspelt", GX + ["--config", "{bad}"], ("x.toml [xgboost]", "colsample_by_tree"),
         toml("x.toml", "[xgboost]\ncolsample_by_tree = 0.5\n")),
    Case("gbdt-catboost-depth-40", GC + ["--param", "depth=40"], ("--param", "depth", "[1, 16]")),
    Case("gbdt-catboost-param-misspelt", GC + ["--param", "dept=4"], ("--param", "dept", "catboost knows")),
    Case("gbdt-catboost-l2-negative", GC + ["--param", "l2_leaf_reg=-1"], ("--param", "l2_leaf_reg", ">= 0")),
    Case("gbdt-catboost-value-catboost-refuses", GC + ["--param", "grow_policy=Sideways"], ("--param", "grow_policy", "catboost")),
    Case("tune-xgboost-space-misspelt", ["tune", "--config", "{bad}", "--trials", "1", "--out", "{tmp}/tu"],
         ("space.toml [space.xgboost]", "max_dept"), tune_space("[space.xgboost]\nmax_dept = { int = [2, 4] }\n")),
    Case("tune-catboost-space-depth-out-of-range", ["tune", "--config", "{bad}", "--trials", "1", "--out", "{tmp}/tu"],
         ("space.toml [space.catboost]", "depth", "[1, 16]"),
         tune_space("[space.catboost]\ndepth = { int = [4, 20] }\n", kind="catboost")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case: Case, world, tmp_path, capsys, monkeypatch):
    pytest.importorskip("xgboost")
    pytest.importorskip("catboost")
    monkeypatch.chdir(tmp_path)
    check_refusal(case, world, tmp_path, capsys)


# --------------------------------------------------------------------------------------------------
# The overwrite rule and its hints: a hint names a command line that works
# --------------------------------------------------------------------------------------------------
def _forced(argv: list[str]) -> list[str]:
    return argv + ["--force"]


def test_every_force_hint_names_a_command_line_that_works(world, tmp_path, capsys, monkeypatch):
    """Each refusal that says "pass --force" succeeds when --force is added, and replaces the old output."""
    monkeypatch.chdir(tmp_path)
    data = ["--train", world["train"], "--valid", world["valid"], "--quiet"]
    commands = [
        ["train", *data, "--epochs", "1", "--model", "linear", "--ensemble", "1", "--out", "runs/t"],
        ["gbdt", *data, "--num-boost-round", "2", "--out", "runs/g"],
        ["export", "--model", world["lin"], "--format", "torchscript", "--out", "m.pt"],
        ["predict", "--model", world["lin"], "--data", world["test"], "--out", "r.run", "--qrels", "q.txt"],
        ["eval", "--qrels", world["qrels"], "--run", world["run"], "--json", "e.json"],
        ["compare", "--qrels", world["qrels"], "--run", world["run"], "--run", world["run"], "--json", "c.json"],
        ["convert", world["train"], "--out", "st", "--quiet"],
        ["synth", "--out", "syn", "--queries", "10", "--mean-length", "3", "--features", "2", "--quiet"],
    ]
    for argv in commands:
        assert run_cli(argv, capsys)[0] == 0, argv
        code, err = run_cli(argv, capsys)
        assert code == 2 and "pass --force" in err.splitlines()[-1], (argv, err)
        code, err = run_cli(_forced(argv), capsys)
        assert code == 0, (argv, err)


def test_a_hint_does_not_offer_force_where_force_would_be_refused(world, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    holding("notes.txt")(tmp_path, world)
    for argv in (["train", "--train", world["train"], "--valid", world["valid"], "--quiet", "--epochs", "1", "--out", "mine"],
                 ["convert", world["train"], "--out", "mine", "--quiet"]):
        code, err = run_cli(argv, capsys)
        assert code == 2 and "pass --force" not in err and "never replaces" in err, err
        code, err = run_cli(_forced(argv), capsys)
        assert code == 2 and (tmp_path / "mine" / "notes.txt").read_text() == "the user's own file\n"


def test_export_with_force_replaces_the_file_it_was_told_to(world, tmp_path, capsys):
    target = tmp_path / "old.pt"
    target.write_text("an older export\n")
    code, err = run_cli(["export", "--model", world["lin"], "--format", "torchscript", "--out", str(target), "--force"], capsys)
    assert code == 0, err
    assert target.read_bytes()[:2] == b"PK"  # a TorchScript archive (zip) now


# --------------------------------------------------------------------------------------------------
# What a newcomer tripped on
# --------------------------------------------------------------------------------------------------
def test_gbdt_has_a_default_run_folder_as_train_has(world, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert _quiet_main(["gbdt", "--train", world["train"], "--valid", world["valid"], "--quiet",
                        "--num-boost-round", "3"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    (folder,) = list((tmp_path / "runs").iterdir())
    assert re.fullmatch(r"gbdt-lightgbm-\d{8}-\d{6}", folder.name), folder.name
    summary = json.loads((folder / "summary.json").read_text())
    assert first == f"run folder: runs/{folder.name} (best round {summary['best_iteration']})"


def test_an_ensemble_prints_the_best_epoch_of_every_member(world, tmp_path, capsys):
    capsys.readouterr()
    assert _quiet_main(["train", "--train", world["train"], "--valid", world["valid"], "--quiet", "--epochs", "3",
                        "--ensemble", "3", "--model", "linear", "--out", str(tmp_path / "e")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    members = json.loads((tmp_path / "e" / "summary.json").read_text())["ensemble"]
    epochs = ", ".join(str(m["best_epoch"]) for m in members)
    assert first == f"run folder: {tmp_path / 'e'} (best epochs of the 3 members: {epochs})"


def test_gbdt_progress_labels_lightgbms_own_ndcg(world, tmp_path, capsys):
    capsys.readouterr()
    assert _quiet_main(["gbdt", "--train", world["train"], "--valid", world["valid"], "--num-boost-round", "3",
                        "--out", str(tmp_path / "g")]) == 0
    err = capsys.readouterr().err
    assert "valid ndcg@10 (LightGBM's) [empty=one]" in err, err


def test_eval_says_how_many_queries_are_scored(tmp_path, capsys):
    (tmp_path / "q.txt").write_text("1 0 a 1\n1 0 b 0\n2 0 a 0\n2 0 b 0\n3 0 a 2\n")
    (tmp_path / "r.run").write_text("1 Q0 a 1 2 t\n1 Q0 b 2 1 t\n2 Q0 a 1 2 t\n2 Q0 b 2 1 t\n3 Q0 a 1 2 t\n")
    capsys.readouterr()
    assert _quiet_main(["eval", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.run"), "--metrics",
                        "ndcg@10,map", "--json", str(tmp_path / "e.json")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "queries evaluated: 3" in first and "scored: 2 (1 skipped: no relevant document, empty=skip)" in first
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["queries"]["evaluated"] == 3 and report["queries"]["scored"] == {"ndcg@10": 2, "map": 2}


def test_intervals_of_a_measure_in_0_1_stay_in_its_range():
    import metrics
    from metrics.stats import t_interval

    # two seeds at 0.98 and 0.90: the plain t-interval reaches 1.19
    plain, clipped = t_interval([0.98, 0.90]), t_interval([0.98, 0.90], bounds=(0, 1))
    assert plain.high > 1.0 and clipped.high == 1.0 and clipped.low == plain.low and clipped.method == "t, clipped to [0, 1]"
    # ltr compare: the difference of two NDCG means lies in [-1, 1], and so does its interval
    labels, offsets = [1, 0, 1, 0, 1, 0], [0, 2, 4, 6]
    a = metrics.evaluate([2.0, 1.0, 2.0, 1.0, 1.0, 2.0], labels, offsets, "ndcg@1")
    b = metrics.evaluate([1.0, 2.0, 1.0, 2.0, 1.0, 2.0], labels, offsets, "ndcg@1")
    row = metrics.compare({"b": b, "a": a}).row("ndcg@1", "a")
    assert row.difference == pytest.approx(2 / 3) and row.high == 1.0 and -1.0 <= row.low
    assert t_interval([1.0, 1.0, 0.0]).high > 1.0  # the per-query differences: unclipped, it leaves the range


# --------------------------------------------------------------------------------------------------
# The Python API: predict_gbdt's feature count, NeuralRanker's group=
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["lightgbm", "xgboost", "catboost"])
def test_predict_gbdt_refuses_a_wrong_feature_count_for_every_engine(engine):
    pytest.importorskip(engine)
    from ltr.base.errors import FeatureCountError
    from ltr.gbdt.engines import predict_gbdt, train_gbdt
    from ltr.train.sklearn_ranker import dataset_from_arrays

    rng = np.random.default_rng(0)
    X = rng.normal(size=(48, 12)).astype(np.float32)
    ds = dataset_from_arrays(X, rng.integers(0, 3, 48).astype(float), np.repeat(np.arange(8), 6))
    model, _ = train_gbdt(engine, ds, ds, num_boost_round=2, early_stopping_rounds=None, threads=1)
    assert predict_gbdt(engine, model, X).shape == (48,)
    for width in (3, 13):
        with pytest.raises(FeatureCountError, match=rf"features have {width} columns, the {engine} model expects 12"):
            predict_gbdt(engine, model, X[:, :width] if width < 12 else np.hstack([X, X[:, :1]]))
    with pytest.raises(ValueError, match="not \\[rows, features\\]"):
        predict_gbdt(engine, model, X[0])


def test_neural_ranker_takes_group_sizes_as_lightgbm_and_xgboost_do():
    from ltr.train.sklearn_ranker import NeuralRanker

    rng = np.random.default_rng(1)
    X = rng.normal(size=(12, 3)).astype(np.float32)
    y = rng.integers(0, 3, 12).astype(float)
    qid = np.repeat([5, 9, 2], [3, 4, 5])
    by_qid = NeuralRanker(model="linear", epochs=2).fit(X, y, qid=qid).predict(X)
    by_group = NeuralRanker(model="linear", epochs=2).fit(X, y, group=[3, 4, 5]).predict(X)
    np.testing.assert_array_equal(by_qid, by_group)
    ranker = NeuralRanker(model="linear", epochs=2).fit(X, y, group=[3, 4, 5], eval_set=[(X[:7], y[:7])], eval_group=[[3, 4]])
    assert len(ranker.history_) == 2
    for group, words in (([3, 4, 4], "adds up to 11 rows, X has 12"), ([3, 0, 9], r"group\[1\] = 0"),
                         ([3.5, 3.5, 5], r"group\[0\] = 3.5")):
        with pytest.raises(ValueError, match=words):
            NeuralRanker(epochs=1).fit(X, y, group=group)
    with pytest.raises(ValueError, match="not both"):
        NeuralRanker(epochs=1).fit(X, y, qid=qid, group=[3, 4, 5])


def test_valid_engine_parameters_and_aliases_pass(world, tmp_path, capsys):
    """The checks refuse what the engines would not use, and nothing they would."""
    pytest.importorskip("xgboost")
    pytest.importorskip("catboost")
    base = ["gbdt", "--train", world["train"], "--valid", world["valid"], "--quiet", "--num-boost-round", "2"]
    for i, extra in enumerate([["--param", "min_child_samples=2", "--param", "colsample_bytree=0.8", "--param", "verbosity=-1"],
                               ["--engine", "xgboost", "--param", "max_depth=3", "--param", "lambdarank_pair_method=topk",
                                "--param", "reg_lambda=2", "--param", "tree_method=hist"],
                               ["--engine", "catboost", "--param", "depth=3", "--param", "l2_leaf_reg=1",
                                "--param", "random_strength=0.5"]]):
        code, err = run_cli(base + extra + ["--out", str(tmp_path / f"ok{i}")], capsys)
        assert code == 0, err
