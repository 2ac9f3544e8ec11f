"""XGBoost and CatBoost beside LightGBM: each engine's run equals the library called directly with the
same parameters; early stopping keeps the round with the best toolkit NDCG; saved folders predict as
in memory; a missing library says how to install it; ``ltr gbdt --engine`` end to end."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import metrics
from ltr.data.synthetic import make_synthetic_splits
from ltr.base.errors import LtrError
from ltr.gbdt.engines import (
    ValidationMonitor,
    import_engine,
    load_gbdt,
    predict_gbdt,
    query_ids,
    resolve_objective,
    save_gbdt,
    train_gbdt,
)
from ltr.runs.scoring import evaluate_scores

ROUNDS = dict(num_boost_round=40, early_stopping_rounds=8, seed=5, threads=1)


@pytest.fixture(scope="module")
def splits():
    return make_synthetic_splits(80, 12, seed=2, mean_list_length=25, valid_share=0.25, test_share=0.2)


def ndcg10(scores, ds):
    ev = evaluate_scores(scores, ds, ["ndcg@10"])
    return ev.mean[ev.names["ndcg@10"]]


@pytest.mark.parametrize("objective", ["rank:ndcg", "rank:pairwise"])
def test_xgboost_run_equals_xgboost_called_directly(splits, objective):
    """The library on the raw integer labels with its default exp gain (ndcg_exp_gain=true), the
    same parameters and the number of rounds early stopping kept: the same predictions."""
    xgb = pytest.importorskip("xgboost")
    train, valid, test = splits
    booster, info = train_gbdt("xgboost", train, valid, {"max_depth": 4}, objective=objective, **ROUNDS)
    assert info["params"]["nthread"] == 1 and info["params"]["seed"] == 5 and info["params"]["max_depth"] == 4
    direct = {k: v for k, v in info["params"].items() if k not in ("eval_metric", "ndcg_exp_gain")}
    theirs = xgb.train(direct, xgb.DMatrix(train.features, label=train.labels, qid=query_ids(train)), info["best_iteration"])
    ours = predict_gbdt("xgboost", booster, test.features)
    np.testing.assert_allclose(ours, theirs.predict(xgb.DMatrix(test.features)), rtol=0, atol=1e-6)
    assert ndcg10(ours, test) == ndcg10(theirs.predict(xgb.DMatrix(test.features)), test)
    assert 1 <= info["best_iteration"] < info["rounds_run"] <= 40


@pytest.mark.parametrize("objective, params", [
    ("YetiRank", {"depth": 4}), ("QuerySoftMax", {"depth": 4}),
    # the run quantizes its training pool before the fit: the binning parameters must reach the quantization
    ("YetiRank", {"depth": 4, "border_count": 16, "feature_border_type": "Median"}),
])
def test_catboost_run_equals_catboost_called_directly(splits, objective, params):
    """CatBoost fitted on raw features without an evaluation set for the rounds our run made, then cut
    at the kept round: the same predictions (the evaluation metric, the callback and the pool quantized
    before the fit change no tree)."""
    cb = pytest.importorskip("catboost")
    train, valid, test = splits
    model, info = train_gbdt("catboost", train, valid, params, objective=objective, **ROUNDS)
    assert info["params"]["thread_count"] == 1 and info["params"]["random_seed"] == 5
    assert info["params"]["learning_rate"] == pytest.approx(0.03)  # CatBoost's default for these objectives
    theirs = cb.CatBoost({**info["params"], "iterations": info["rounds_run"]})
    theirs.fit(cb.Pool(train.features, label=train.labels, group_id=query_ids(train)))
    expected = theirs.predict(test.features, ntree_end=info["best_iteration"])
    ours = predict_gbdt("catboost", model, test.features)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)
    assert ndcg10(ours, test) == ndcg10(expected, test)
    assert model.tree_count_ == info["best_iteration"] < info["rounds_run"]


@pytest.mark.parametrize("engine", ["xgboost", "catboost"])
def test_early_stopping_keeps_the_round_with_the_best_toolkit_ndcg(splits, engine):
    pytest.importorskip(engine)
    train, valid, _ = splits
    model, info = train_gbdt(engine, train, valid, objective=None, **{**ROUNDS, "early_stopping_rounds": 6})
    curve = info["curve"]
    assert len(curve) == info["rounds_run"]
    # the first maximum of the curve, and training went on exactly 6 rounds past it
    assert info["best_iteration"] == 1 + int(np.argmax(curve))
    assert info["rounds_run"] == min(info["best_iteration"] + 6, 40)
    # the curve is the toolkit's metric of the kept model's scores
    assert "empty=skip" in info["monitor"] and "gain=exp2" in info["monitor"]
    assert ndcg10(predict_gbdt(engine, model, valid.features), valid) == pytest.approx(info["best_score"], abs=1e-12)
    assert info["best_score"] == max(curve)


def test_xgboost_curve_is_each_rounds_prediction(splits):
    """The per-round value read from XGBoost's cached validation predictions equals the NDCG of a
    from-scratch prediction with that many trees."""
    xgb = pytest.importorskip("xgboost")
    train, valid, _ = splits
    booster, info = train_gbdt("xgboost", train, valid, objective="rank:ndcg", **{**ROUNDS, "early_stopping_rounds": None,
                                                                                  "num_boost_round": 12})
    assert info["rounds_run"] == 12 and info["best_iteration"] == 1 + int(np.argmax(info["curve"]))
    full, _ = train_gbdt("xgboost", train, None, objective="rank:ndcg", **{**ROUNDS, "num_boost_round": 12})
    dvalid = xgb.DMatrix(valid.features)
    for r in (1, 5, 12):
        scores = full.predict(dvalid, iteration_range=(0, r), output_margin=True)
        assert ndcg10(scores, valid) == pytest.approx(info["curve"][r - 1], abs=1e-12), r


def test_xgboost_gains_follow_the_toolkit_convention():
    """Non-integer labels under the linear gain: XGBoost's own validation NDCG at the kept round is
    the toolkit's NDCG with the same gain and LightGBM's empty-query rule (a query without a
    relevant item scores 1)."""
    pytest.importorskip("xgboost")
    train, valid, _ = make_synthetic_splits(60, 8, seed=4, mean_list_length=20, valid_share=0.3, test_share=0.1)
    train.labels[:] = train.labels * 0.75
    valid.labels[:] = valid.labels * 0.75
    valid.labels[valid.query_offsets[0]:valid.query_offsets[2]] = 0.0  # two queries without a relevant item
    booster, info = train_gbdt("xgboost", train, valid, gain="linear", **ROUNDS)
    scores = predict_gbdt("xgboost", booster, valid.features)
    ev = metrics.evaluate(scores, valid.labels, valid.query_offsets, ["ndcg@10"], preset="lightgbm", gain="linear")
    own = info["own_metrics"]["per_round"]["valid"]["ndcg@10"][info["best_iteration"] - 1]
    assert ev.mean[ev.names["ndcg@10"]] == pytest.approx(own, abs=1e-6)
    assert "gain=linear" in info["monitor"]
    # early stopping skips those queries (empty=skip): its best value is the mean over the others
    skip = metrics.evaluate(scores, valid.labels, valid.query_offsets, ["ndcg@10"], gain="linear")
    assert np.isnan(skip.per_query[skip.names["ndcg@10"]][:2]).all()
    assert info["best_score"] == pytest.approx(np.nanmean(skip.per_query[skip.names["ndcg@10"]]), abs=1e-12)


@pytest.mark.parametrize("engine", ["xgboost", "catboost", "lightgbm"])
def test_saved_folder_predicts_like_the_model_in_memory(splits, engine, tmp_path):
    pytest.importorskip(engine)
    from ltr.models.folder import load_scorer, model_feature_names

    train, valid, test = splits
    model, info = train_gbdt(engine, train, valid, **ROUNDS)
    save_gbdt(engine, model, tmp_path, info, n_features=train.n_features, feature_names=[f"x{i}" for i in range(12)])
    meta = json.loads((tmp_path / "model.json").read_text())
    assert meta["type"] == engine and (tmp_path / meta["file"]).exists()
    loaded, _ = load_gbdt(tmp_path, engine)
    expected = predict_gbdt(engine, model, test.features)
    np.testing.assert_array_equal(predict_gbdt(engine, loaded, test.features), expected)
    score, n_features = load_scorer(tmp_path)
    assert n_features == 12 and model_feature_names(tmp_path)[3] == "x3"
    np.testing.assert_array_equal(score(test.features, test.query_offsets), expected)


def test_seeded_runs_are_identical(splits):
    """YetiRank draws random permutations: the same seed gives the same model, another seed another."""
    pytest.importorskip("catboost")
    train, valid, test = splits
    runs = [train_gbdt("catboost", train, valid, num_boost_round=15, early_stopping_rounds=None, seed=s, threads=1)[0]
            for s in (1, 1, 2)]
    scores = [predict_gbdt("catboost", m, test.features) for m in runs]
    np.testing.assert_array_equal(scores[0], scores[1])
    assert np.abs(scores[0] - scores[2]).max() > 1e-6


@pytest.mark.parametrize("engine", ["xgboost", "catboost"])
def test_missing_library_says_how_to_install(engine, monkeypatch, splits):
    monkeypatch.setitem(sys.modules, engine, None)  # `import engine` now raises ImportError
    with pytest.raises(LtrError, match=rf"pip install 'ltr\[{engine}\]'"):
        import_engine(engine)
    with pytest.raises(LtrError, match=rf"pip install 'ltr\[{engine}\]'"):
        train_gbdt(engine, splits[0], splits[1], num_boost_round=2)


def test_objectives_and_parameters_the_toolkit_sets():
    assert resolve_objective("xgboost", None) == "rank:ndcg" and resolve_objective("catboost", "yetirankpairwise") == "YetiRankPairwise"
    assert resolve_objective("lightgbm", "rank_xendcg") == "rank_xendcg"
    with pytest.raises(LtrError, match="rank:ndcg, rank:pairwise"):
        resolve_objective("xgboost", "lambdarank")
    with pytest.raises(LtrError, match="unknown GBDT engine 'sklearn'"):
        resolve_objective("sklearn", None)
    pytest.importorskip("xgboost")
    pytest.importorskip("catboost")
    train, valid, _ = make_synthetic_splits(20, 4, seed=1, mean_list_length=8)
    for engine, key in (("xgboost", "eval_metric"), ("xgboost", "ndcg_exp_gain"), ("catboost", "iterations"),
                        ("catboost", "use_best_model")):
        with pytest.raises(LtrError, match=f"{engine} parameter '{key}' is set by the toolkit"):
            train_gbdt(engine, train, valid, {key: 1}, num_boost_round=2)
    # the objective may come in the engine's table (as in a TOML [xgboost] / [catboost] table)
    assert train_gbdt("xgboost", train, valid, {"objective": "rank:pairwise"}, num_boost_round=2)[1]["objective"] == "rank:pairwise"
    _, info = train_gbdt("catboost", train, valid, {"loss_function": "QuerySoftMax"}, num_boost_round=2)
    assert info["objective"] == "QuerySoftMax" and info["params"]["loss_function"] == "QuerySoftMax"
    train.labels[3] = -1.0
    for engine in ("xgboost", "catboost"):
        with pytest.raises(LtrError, match="training set: .* row 3 has label -1.0"):
            train_gbdt(engine, train, valid, num_boost_round=2)


def test_validation_monitor_rule():
    """Patience counts rounds after the first best; a tie does not improve."""
    from types import SimpleNamespace

    ds = SimpleNamespace(labels=np.array([1.0, 0.0]), query_offsets=np.array([0, 2]))
    mon = ValidationMonitor(ds, 10, "exp2", rounds=2)
    stops = [mon.record(v) for v in (0.5, 0.7, 0.7, 0.6)]
    assert stops == [False, False, False, True] and mon.best_round == 2 and mon.best_value == 0.7
    assert mon.name.startswith("ndcg@10[gain=exp2")
    assert mon.update(np.array([0.0, 1.0])) is True and mon.curve[-1] == pytest.approx(1 / np.log2(3))


@pytest.fixture(scope="module")
def synth_files(tmp_path_factory):
    from ltr.cli import main

    d = tmp_path_factory.mktemp("engines_cli")
    assert main(["synth", "--out", str(d), "--queries", "70", "--features", "10", "--mean-length", "20",
                 "--valid-share", "0.2", "--test-share", "0.2", "--seed", "7", "--quiet"]) == 0
    return d


@pytest.mark.parametrize("engine, objective, params", [
    ("xgboost", "rank:pairwise", ["max_depth=3", "nthread=1"]),
    ("catboost", "QuerySoftMax", ["depth=3", "thread_count=1"]),
    ("lightgbm", "rank_xendcg", ["num_leaves=7", "min_data_in_leaf=5", "num_threads=1"]),
])  # fmt: skip
def test_cli_gbdt_engine_end_to_end(synth_files, tmp_path, engine, objective, params, capsys):
    """``ltr gbdt --engine E --objective O --param ...``: a run folder whose summary names the engine,
    whose test NDCG@10 is the metric of ``ltr predict``'s scores from the saved model, and whose
    parameters reached the library."""
    pytest.importorskip(engine)
    from ltr.cli import main
    from ltr.data import load_svmlight

    out = tmp_path / "run"
    argv = ["gbdt", "--engine", engine, "--objective", objective, "--train", str(synth_files / "train.txt"),
            "--valid", str(synth_files / "valid.txt"), "--test", str(synth_files / "test.txt"), "--num-boost-round", "25",
            "--early-stopping-rounds", "5", "--seed", "3", "--out", str(out), "--quiet"]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == engine and summary["objective"] == objective
    key = params[0].split("=")[0]
    assert summary["config"][engine][key] == int(params[0].split("=")[1])
    assert json.loads((out / "model.json").read_text())["type"] == engine
    assert (out / "importance.json").exists() and (out / "importance.png").exists()
    run_file = tmp_path / "test.tsv"
    assert main(["predict", "--model", str(out), "--data", str(synth_files / "test.txt"), "--out", str(run_file),
                 "--format", "tsv"]) == 0
    test = load_svmlight(synth_files / "test.txt", n_features=10, cache=False)
    scores = np.loadtxt(run_file)
    name = next(n for n in summary["metrics"]["test"] if n.startswith("ndcg@10["))
    assert ndcg10(scores, test) == pytest.approx(summary["metrics"]["test"][name], abs=1e-9)
    assert f"test\t{name}" in printed
    if engine != "lightgbm":
        stop = summary["early_stopping"]
        assert summary["best_iteration"] == 1 + int(np.argmax(stop["curve"])) and stop["monitor"] == name
        assert summary["metrics"]["valid"][name] == pytest.approx(stop["best_value"], abs=1e-12)


def test_cli_gbdt_refuses_what_an_engine_cannot_take(synth_files, tmp_path, monkeypatch, capsys):
    from ltr.cli import main

    base = ["gbdt", "--train", str(synth_files / "train.txt"), "--valid", str(synth_files / "valid.txt"), "--quiet"]
    cases = [
        (["--engine", "xgboost", "--num-leaves", "7"], "--num-leaves is a LightGBM option"),
        (["--engine", "catboost", "--objective", "rank:ndcg"], "catboost objective 'rank:ndcg' is not one of"),
        (["--engine", "xgboost", "--param", "depth"], "expected KEY=VALUE"),
        (["--engine", "xgboost", "--dask-workers", "2"], "train LightGBM only"),
    ]
    for extra, message in cases:
        assert main(base + extra + ["--out", str(tmp_path / "x")]) == 2
        assert message in capsys.readouterr().err
    cfg = tmp_path / "c.toml"
    cfg.write_text("[xgboost]\nmax_depth = {a = 1}\n")
    assert main(base + ["--engine", "xgboost", "--config", str(cfg), "--out", str(tmp_path / "y")]) == 2
    assert "[xgboost] max_depth must be a number" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "catboost", None)
    assert main(base + ["--engine", "catboost", "--out", str(tmp_path / "z")]) == 2
    assert "pip install 'ltr[catboost]'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()


@pytest.mark.slow
def test_ablate_methods_by_engine_name():
    """``xgboost``, ``catboost:QuerySoftMax``, ``lightgbm:rank_xendcg`` and a variant: each cell's test
    scores are those of the engine trained directly with the cell's seed, [ENGINE] table and [gbdt]."""
    pytest.importorskip("xgboost")
    pytest.importorskip("catboost")
    from ltr.study import ablation
    from ltr.study.ablation import AblationConfig, Cell, DatasetSpec
    from ltr.study.methods import resolve_method, split_method

    cfg = AblationConfig(
        datasets=[DatasetSpec("tiny", "synthetic", dict(n_queries=60, n_features=8, mean_list_length=12, seed=3))],
        methods=["xgboost", "catboost:QuerySoftMax", "lightgbm:rank_xendcg", "deep"], seeds=[4], reference="xgboost",
        n_resamples=100, xgboost={"max_depth": 3}, catboost={"depth": 3}, lightgbm={"num_leaves": 5, "min_data_in_leaf": 3},
        gbdt={"num_boost_round": 12, "early_stopping_rounds": 4},
        variants={"deep": {"method": "xgboost/rank_pairwise", "xgboost": {"max_depth": 5}}})
    assert split_method("catboost:QuerySoftMax") == (None, "catboost", None)
    deep = resolve_method("deep", cfg)
    assert (deep.kind, deep.objective, deep.xgboost) == ("xgboost", "rank:pairwise", {"max_depth": 5})
    assert "objective" not in resolve_method("lightgbm", cfg).as_dict()  # older fingerprints stay valid
    train, valid, test = ablation.load_splits(cfg.datasets[0], None)
    for method, engine, objective, params in (("xgboost", "xgboost", None, {"max_depth": 3}),
                                              ("catboost:QuerySoftMax", "catboost", "QuerySoftMax", {"depth": 3}),
                                              ("deep", "xgboost", "rank:pairwise", {"max_depth": 5}),
                                              ("lightgbm:rank_xendcg", "lightgbm", "rank_xendcg", cfg.lightgbm)):
        rec = ablation.run_cell(Cell("tiny", method, 4), cfg)
        model, info = train_gbdt(engine, train, valid, params, objective=objective, seed=4, threads=1,
                                 num_boost_round=12, early_stopping_rounds=4)
        name = rec["metric_names"]["ndcg@10"]
        assert rec["mean"][name] == ndcg10(predict_gbdt(engine, model, test.features), test), method
        assert rec["train_info"]["best_iteration"] == info["best_iteration"]
        if engine == "lightgbm":
            assert info["params"]["objective"] == "rank_xendcg"
    fps = {ablation.cell_fingerprint(Cell("tiny", m, 4), cfg) for m in cfg.methods}
    assert len(fps) == 4
    with pytest.raises(LtrError, match="xgboost objective 'yetirank' is not one of"):
        split_method("xgboost:yetirank")


@pytest.mark.slow
@pytest.mark.parametrize("engine, space", [
    ("xgboost", "max_depth = { int = [2, 5] }\neta = { float = [0.05, 0.3], log = true }"),
    ("catboost", "depth = { int = [2, 5] }"),
])
def test_tune_space_of_an_engine_and_its_best_toml(synth_files, tmp_path, engine, space):
    """``ltr tune`` with kind = ENGINE: the best trial's value is what ``ltr gbdt --engine ENGINE --config
    best.toml`` reaches on the same validation set (the objective travels in the engine's table)."""
    pytest.importorskip(engine)
    pytest.importorskip("optuna")
    from ltr.cli import main

    key = "objective" if engine == "xgboost" else "loss_function"
    objective = "rank:pairwise" if engine == "xgboost" else "QuerySoftMax"
    cfg = tmp_path / "space.toml"
    cfg.write_text(f"""[tune]
kind = "{engine}"
startup_trials = 2
[data]
train = "{synth_files / 'train.txt'}"
valid = "{synth_files / 'valid.txt'}"
[{engine}]
{key} = "{objective}"
{'nthread' if engine == 'xgboost' else 'thread_count'} = 1
[gbdt]
num_boost_round = 12
early_stopping_rounds = 4
[space.{engine}]
{space}
""")
    out = tmp_path / "study"
    assert main(["tune", "--config", str(cfg), "--trials", "2", "--out", str(out)]) == 0
    trials = json.loads((out / "trials.json").read_text())["trials"]
    best = max((t for t in trials if t["state"] == "complete"), key=lambda t: t["value"])
    assert f"ltr gbdt --engine {engine} --config" in (out / "best.toml").read_text()
    run_dir = tmp_path / "run"
    assert main(["gbdt", "--engine", engine, "--config", str(out / "best.toml"), "--train", str(synth_files / "train.txt"),
                 "--valid", str(synth_files / "valid.txt"), "--quiet", "--out", str(run_dir)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["objective"] == objective
    name = next(n for n in summary["metrics"]["valid"] if n.startswith("ndcg@10["))
    assert summary["metrics"]["valid"][name] == pytest.approx(best["value"], abs=1e-12)
