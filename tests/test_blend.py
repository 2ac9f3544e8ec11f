"""Blends (ltr.models.blend, ltr blend): per-query standardisation by hand, the weight search's
guarantees (corners, ties toward equal weights, a perfect member), weights and scores that reproduce
from the saved folder, and the command line with ltr predict / ltr eval / ltr importance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import metrics
from ltr.cli import main
from ltr.data import RankingDataset, load_svmlight, save_svmlight
from ltr.base.errors import LtrError
from ltr.models.blend import DENOMINATOR, combine, fit_weights, read_blend, shrink_units, standardise
from ltr.models.folder import load_scorer


def make_ds(n_queries=80, seed=0, n_features=4):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 20, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], n_features)).astype(np.float32)
    y = np.clip(np.round(x[:, 0] + 0.5 * x[:, 1] + 1 + 0.5 * rng.normal(size=len(x))), 0, 3)
    return RankingDataset(x, y, offsets, np.arange(n_queries))


def ndcg10(scores, ds):
    return float(np.nanmean(metrics.ndcg(scores, ds.labels, ds.query_offsets, k=10)))


def test_standardise_by_hand():
    s = np.array([1.0, 2.0, 3.0, 0.1, 0.1, 0.1, 7.0, -4.0, 4.0, 10.0, 2.0])
    off = np.array([0, 3, 6, 6, 7, 11])  # a constant list, an empty query, a one-item list
    z = standardise(s, off)
    r = np.sqrt(1.5)  # population std of 1, 2, 3 is sqrt(2/3)
    assert z[:3] == pytest.approx([-r, 0.0, r], abs=1e-15)
    assert np.array_equal(z[3:7], np.zeros(4))  # all equal (even where the mean rounds off 0.1): exactly 0
    tail = np.array([-4.0, 4.0, 10.0, 2.0])
    assert z[7:] == pytest.approx((tail - 3.0) / np.sqrt(np.mean((tail - 3.0) ** 2)), abs=1e-15)
    with pytest.raises(LtrError, match="row 1 has the score nan"):
        standardise(np.array([0.0, np.nan]), np.array([0, 2]))
    with pytest.raises(LtrError, match="query offsets"):
        standardise(np.zeros(3), np.array([0, 2]))


def test_one_member_blend_ranks_as_the_member():
    ds = make_ds()
    s = ds.features[:, 0].astype(np.float64) * 3.0 + 7.0
    fit = fit_weights([s], ds)
    assert fit.units == (DENOMINATOR,) and fit.weights == [1.0]
    blended = combine([standardise(s, ds.query_offsets)], fit.weights)
    assert np.array_equal(metrics.rank_order(blended, ds.query_offsets), metrics.rank_order(s, ds.query_offsets))
    assert fit.value == fit.member_values[0] == pytest.approx(ndcg10(s, ds), abs=1e-12)


def test_perfect_member_beats_noise():
    ds = make_ds(seed=1)
    rng = np.random.default_rng(5)
    perfect = ds.labels + 0.01 * rng.random(ds.n_items)  # every higher grade first: NDCG 1 on every query
    noise = rng.normal(size=ds.n_items)
    fit = fit_weights([noise, perfect], ds, rule="search")
    assert ndcg10(perfect, ds) == 1.0 and fit.member_values[1] == 1.0 and fit.member_values[0] < 0.8
    assert fit.value == 1.0 and fit.weights[1] > fit.weights[0]
    # the noise keeps only a weight that changes no ranking across grades
    blended = combine([standardise(noise, ds.query_offsets), standardise(perfect, ds.query_offsets)], fit.weights)
    assert ndcg10(blended, ds) == 1.0


def test_identical_members_share_the_weight_equally():
    ds = make_ds(seed=2)
    s = ds.features[:, 0].astype(np.float64)
    # every weight vector ranks alike: the tie goes to equal weights (250 + 250, 167 + 167 + 166)
    assert fit_weights([s, 2 * s + 1], ds, rule="search").units == (250, 250)
    assert fit_weights([s, s, s], ds, rule="search").units == (167, 167, 166)


@pytest.mark.parametrize("n_members", [2, 3, 4])
def test_blend_is_at_least_every_member_and_the_coarse_grid(n_members):
    ds = make_ds(seed=3)
    rng = np.random.default_rng(n_members)
    members = [ds.features[:, 0] + rng.normal(0, 1.5, ds.n_items) * (k + 1) for k in range(n_members)]
    fit = fit_weights(members, ds, rule="search")
    zs = [standardise(m, ds.query_offsets) for m in members]
    assert fit.member_values == pytest.approx([ndcg10(m, ds) for m in members], abs=1e-12)  # each alone
    assert fit.value == pytest.approx(ndcg10(combine(zs, fit.weights), ds), abs=1e-12)  # what the weights give
    assert fit.value >= max(fit.member_values) and fit.value >= fit.equal_value
    assert sum(fit.units) == DENOMINATOR and min(fit.units) >= 0
    if n_members == 2:  # the search starts from the grid of step 1/20: nothing on it is better
        grid = [ndcg10(combine(zs, [a / 20, 1 - a / 20]), ds) for a in range(21)]
        assert fit.value >= max(grid)


def test_equal_rule_weighs_every_member_alike_and_only_measures():
    ds = make_ds(seed=4)
    rng = np.random.default_rng(9)
    perfect = ds.labels + 0.01 * rng.random(ds.n_items)
    noise = rng.normal(size=ds.n_items)
    searched, equal = fit_weights([noise, perfect], ds, rule="search"), fit_weights([noise, perfect], ds, rule="equal")
    assert searched.weights[1] > 0.5 and equal.units == (250, 250) and equal.search == {"rule": "equal"}
    zs = [standardise(noise, ds.query_offsets), standardise(perfect, ds.query_offsets)]
    # the value is what 1/2 + 1/2 gives, below the search's (the noise drags the ranking) and below the perfect member
    assert equal.value == equal.equal_value == pytest.approx(ndcg10(combine(zs, [0.5, 0.5]), ds), abs=1e-12)
    assert equal.value < searched.value == 1.0 and equal.member_values == searched.member_values
    assert fit_weights([noise, noise, perfect], ds, rule="equal").units == (167, 167, 166)
    with pytest.raises(LtrError, match="rule 'best': expected one of search, equal, cv, held-out$"):
        fit_weights([noise], ds, rule="best")


def _linear_folder(folder: Path, weights) -> Path:
    from ltr.train.models import LinearScorer, save_model

    model = LinearScorer(len(weights))
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([weights], dtype=torch.float32))
        model.linear.bias.zero_()
    return save_model(model, folder)


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """A LightGBM folder and a linear scorer's folder, and SVMlight train / valid / test files."""
    from ltr.gbdt.lightgbm import save_booster, train_lightgbm

    root = tmp_path_factory.mktemp("blend")
    train, valid, test = make_ds(120, 10), make_ds(50, 11), make_ds(50, 12)
    for name, ds in (("train", train), ("valid", valid), ("test", test)):
        save_svmlight(ds, root / f"{name}.txt")
    booster, info = train_lightgbm(train, valid, {"num_leaves": 7, "min_data_in_leaf": 5, "num_threads": 1},
                                   num_boost_round=20)
    save_booster(booster, root / "gbdt", n_features=4, best_iteration=info["best_iteration"])
    _linear_folder(root / "lin", [0.3, 1.0, 0.0, 0.0])
    return root


def test_weights_and_scores_reproduce_from_the_saved_folder(members, tmp_path, capsys):
    root = members
    out = tmp_path / "blend"
    assert main(["blend", "--models", str(root / "gbdt"), str(root / "lin"), "--valid", str(root / "valid.txt"),
                 "--test", str(root / "test.txt"), "--out", str(out)]) == 0
    doc = json.loads((out / "blend.json").read_text())
    assert [m["path"] for m in doc["members"]] == [_rel(root / "gbdt", out), _rel(root / "lin", out)]
    valid = load_svmlight(root / "valid.txt")
    from ltr.train.trainer import data_fingerprint

    assert doc["valid"]["fingerprint"] == data_fingerprint(valid)
    # the weights reproduce: the members reloaded from the folder's paths, fitted again on the same data
    loaded = [load_scorer(f)[0] for f in read_blend(out)["member_folders"]]
    member_scores = [fn(valid.features, valid.query_offsets) for fn in loaded]
    refit = fit_weights(member_scores, valid, doc["metric"]["name"])
    assert list(refit.units) == doc["weight_units"] and refit.weights == doc["weights"]
    assert refit.value == doc["valid_value"]
    # the scorer of the folder gives, bit for bit, the combination of the members' standardised scores
    score, n_features = load_scorer(out)
    blended = score(valid.features, valid.query_offsets)
    zs = [standardise(s, valid.query_offsets) for s in member_scores]
    assert n_features == 4 and np.array_equal(blended, combine(zs, doc["weights"]))
    assert ndcg10(blended, valid) == pytest.approx(doc["valid_value"], abs=1e-12)
    # the default rule is cv: the whole set's searched weights shrunk by the lambda it chose; the search
    # itself never ends below its best corner (each member alone is a start point)
    searched = fit_weights(member_scores, valid, doc["metric"]["name"], rule="search")
    assert doc["search"]["rule"] == "cv" and doc["search"]["cv"]["searched_units"] == list(searched.units)
    assert tuple(doc["weight_units"]) == shrink_units(searched.units, doc["search"]["cv"]["lambda"])
    assert searched.value >= max(m["valid_value"] for m in doc["members"])
    summary = json.loads((out / "summary.json").read_text())
    test = load_svmlight(root / "test.txt")
    assert summary["metrics"]["test"]["blend"] == pytest.approx(ndcg10(score(test.features, test.query_offsets), test), abs=1e-12)
    with pytest.raises(LtrError, match="pass query_offsets"):
        score(valid.features)


def test_cli_equal_weights_are_saved_and_score_as_the_mean_of_z_scores(members, tmp_path, capsys):
    root = members
    out = tmp_path / "equal"
    assert main(["blend", "--models", str(root / "gbdt"), str(root / "lin"), "--valid", str(root / "valid.txt"),
                 "--weights", "equal", "--out", str(out)]) == 0
    assert "equal weights, measured on the validation set" in capsys.readouterr().out
    doc = json.loads((out / "blend.json").read_text())
    assert doc["weights"] == [0.5, 0.5] and doc["search"]["rule"] == "equal" and doc["search"]["evaluations"] == 3
    valid = load_svmlight(root / "valid.txt")
    zs = [standardise(load_scorer(root / m)[0](valid.features, valid.query_offsets), valid.query_offsets)
          for m in ("gbdt", "lin")]
    blended = load_scorer(out)[0](valid.features, valid.query_offsets)
    assert np.array_equal(blended, 0.5 * zs[0] + 0.5 * zs[1])
    assert doc["valid_value"] == doc["equal_weights_value"] == pytest.approx(ndcg10(blended, valid), abs=1e-12)


def _rel(path: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


def test_copied_members_travel_and_changed_members_are_refused(members, tmp_path):
    root = members
    work = tmp_path / "work"
    shutil.copytree(root, work)
    args = ["blend", "--models", str(work / "gbdt"), str(work / "lin"), "--valid", str(work / "valid.txt")]
    assert main(args + ["--out", str(tmp_path / "copied"), "--copy-members"]) == 0
    assert main(args + ["--out", str(tmp_path / "referred")]) == 0
    valid = load_svmlight(root / "valid.txt")
    before = load_scorer(tmp_path / "copied")[0](valid.features, valid.query_offsets)
    assert np.array_equal(before, load_scorer(tmp_path / "referred")[0](valid.features, valid.query_offsets))
    _linear_folder(work / "lin", [1.0, 0.0, 0.0, 0.0])  # the member is retrained in place
    with pytest.raises(LtrError, match="member 1 .* has changed since the blend was fitted"):
        load_scorer(tmp_path / "referred")
    shutil.move(tmp_path / "copied", tmp_path / "moved")  # a self-contained blend works anywhere
    shutil.rmtree(work)
    assert np.array_equal(before, load_scorer(tmp_path / "moved")[0](valid.features, valid.query_offsets))
    with pytest.raises(LtrError, match="member 0's folder .* is missing"):
        load_scorer(tmp_path / "referred")


def test_bad_members_and_widths_are_refused(members, tmp_path, capsys):
    root = members
    (tmp_path / "empty").mkdir()
    _linear_folder(tmp_path / "wide", [1.0, 0.0, 0.0, 0.0, 0.0])
    wide_valid = make_ds(10, 4, n_features=6)
    save_svmlight(wide_valid, tmp_path / "wide.txt")
    base = ["blend", "--out", str(tmp_path / "b")]
    cases = [
        (["--models", str(root / "gbdt"), str(tmp_path / "empty"), "--valid", str(root / "valid.txt")], "no model.json"),
        (["--models", str(root / "gbdt"), str(tmp_path / "wide"), "--valid", str(root / "valid.txt")],
         "trained on 4 features, .* on 5; blend members must be trained on the same features"),
        (["--models", str(root / "gbdt"), str(root / "lin"), "--valid", str(tmp_path / "wide.txt")],
         "--valid .* has 6 features, the model expects 4"),
        (["--models", str(root / "lin"), str(root / "lin"), "--valid", str(root / "valid.txt")], "same folder twice"),
        (["--models", str(root / "lin"), "--valid", str(root / "valid.txt"), "--metric", "auc"], "ranking metric"),
    ]
    for argv, message in cases:
        assert main(base + argv) == 2
        assert __import__("re").search(message, capsys.readouterr().err), message
        assert not (tmp_path / "b").exists()
    with pytest.raises(SystemExit) as stop:  # argparse's own refusal: one line, exit 2
        main(base + ["--models", str(root / "lin"), "--valid", str(root / "valid.txt"), "--weights", "best"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--weights: invalid choice: 'best'" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
    assert main(base + ["--models", str(root / "lin"), "--valid", str(root / "valid.txt")]) == 0
    assert main(["blend", "--out", str(tmp_path / "c"), "--models", str(tmp_path / "b"), "--valid",
                 str(root / "valid.txt")]) == 2
    assert "is a blend folder" in capsys.readouterr().err
    assert main(["export", "--model", str(tmp_path / "b"), "--format", "torchscript", "--out", str(tmp_path / "b.pt")]) == 2
    assert "a blend model exports to ONNX only" in capsys.readouterr().err  # ONNX: tests/test_serving.py


@pytest.mark.slow
def test_cli_end_to_end_gbdt_and_neural_runs(tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["synth", "--out", str(data), "--queries", "100", "--features", "8", "--mean-length", "12",
                 "--seed", "2", "--quiet"]) == 0
    files = ["--train", str(data / "train.txt"), "--valid", str(data / "valid.txt")]
    # a small forest and one MLP: the blend of a GBDT folder and a neural one is the point, not their size
    assert main(["gbdt", *files, "--num-boost-round", "30", "--out", str(tmp_path / "gbdt"), "--quiet"]) == 0
    assert main(["train", *files, "--epochs", "2", "--ensemble", "1", "--out", str(tmp_path / "net"), "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "blend"
    assert main(["blend", "--models", str(tmp_path / "gbdt"), str(tmp_path / "net"), "--valid", str(data / "valid.txt"),
                 "--test", str(data / "test.txt"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert f"test\tblend\t{summary['metrics']['test']['blend']:.6f}" in printed
    run, qrels = tmp_path / "blend.run", tmp_path / "test.qrels"
    assert main(["predict", "--model", str(out), "--data", str(data / "test.txt"), "--out", str(run),
                 "--qrels", str(qrels)]) == 0
    capsys.readouterr()
    assert main(["eval", "--qrels", str(qrels), "--run", str(run), "--metrics", "ndcg@10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # the run file from ltr predict scores as the blend did inside ltr blend
    assert report["mean"]["ndcg@10"] == pytest.approx(summary["metrics"]["test"]["blend"], abs=1e-12)
    assert main(["importance", "--model", str(out), "--data", str(data / "valid.txt"), "--repeats", "1",
                 "--top", "3", "--json"]) == 0
    imp = json.loads(capsys.readouterr().out)
    assert imp["base"] == pytest.approx(summary["metrics"]["valid"]["blend"], abs=1e-12) and len(imp["importance"]) == 8


# ------------------------------------------------------------------------------ blends in ltr ablate
def _study(**kw):
    from ltr.study.ablation import AblationConfig, DatasetSpec

    base = dict(datasets=[DatasetSpec("tiny", "synthetic", dict(n_queries=60, n_features=12, mean_list_length=12, seed=3))],
                methods=["ranknet", "lightgbm", "bl"], seeds=[0], n_resamples=200,
                train={"epochs": 2, "batch_size": 16, "patience": 2}, model={"type": "mlp", "hidden": [8], "normalize": "standard"},
                lightgbm={"num_leaves": 7, "min_data_in_leaf": 5}, gbdt={"num_boost_round": 8, "early_stopping_rounds": 4},
                variants={"bl": {"blend": ["lightgbm", "ranknet"]}})
    base.update(kw)
    return AblationConfig(**base)


@pytest.mark.parametrize("variant, message", [
    ({"blend": ["lightgbm"]}, "two or more"),
    ({"blend": ["lightgbm", "lightgbm"]}, "a member twice"),
    ({"blend": ["lightgbm", "rank_net"]}, "unknown method 'rank_net'"),
    ({"blend": ["lightgbm", "ranknet"], "ensemble": 2}, "takes only blend"),
    ({"blend": ["lightgbm", "inner"]}, "itself a blend"),
    ({"blend": ["lightgbm", "ranknet"], "weights": "best"}, "weights must be one of 'search', 'equal', 'cv', 'held-out', got 'best'"),
])
def test_bad_blend_variants_are_refused(variant, message):
    with pytest.raises(LtrError, match=message):
        _study(variants={"bl": variant, "inner": {"blend": ["lightgbm", "ranknet"]}})


def test_blend_variant_resolves_to_its_members():
    from ltr.study import ablation
    from ltr.study.ablation import Cell
    from ltr.study.methods import resolve_method

    cfg = _study(variants={"bl": {"blend": ["lightgbm", "soft"]}, "soft": {"method": "softmax", "ensemble": 2}})
    spec = resolve_method("bl", cfg)
    assert spec.kind == "blend" and [m.name for m in spec.members] == ["lightgbm", "soft"]
    assert spec.members[1].ensemble == 2 and spec.members[1].loss == "softmax"
    # the cell's fingerprint follows its members' settings
    other = _study(variants={"bl": {"blend": ["lightgbm", "soft"]}, "soft": {"method": "softmax", "ensemble": 3}})
    assert ablation.cell_fingerprint(Cell("tiny", "bl", 0), cfg) != ablation.cell_fingerprint(Cell("tiny", "bl", 0), other)
    # so does its weights rule; "cv" written out is the default, the same cell; "search" (the default
    # before cv), "equal" and "held-out" are other cells
    rules = {r: _study(variants={"bl": {"blend": ["lightgbm", "soft"], **w}, "soft": {"method": "softmax", "ensemble": 2}})
             for r, w in (("default", {}), ("cv", {"weights": "cv"}), ("search", {"weights": "search"}),
                          ("equal", {"weights": "equal"}), ("held-out", {"weights": "held-out"}))}
    assert resolve_method("bl", rules["equal"]).blend_weights == "equal" and spec.blend_weights == "cv"
    prints = {r: ablation.cell_fingerprint(Cell("tiny", "bl", 0), c) for r, c in rules.items()}
    assert prints["default"] == prints["cv"] == ablation.cell_fingerprint(Cell("tiny", "bl", 0), cfg)
    assert len({prints["cv"], prints["search"], prints["equal"], prints["held-out"]}) == 4


@pytest.mark.slow
def test_blend_cell_trains_its_members_as_their_own_cells():
    from ltr.study import ablation
    from ltr.study.ablation import Cell

    cfg = _study()
    lgb, net, bl = (ablation.run_cell(Cell("tiny", m, 0), cfg) for m in ("lightgbm", "ranknet", "bl"))
    info = bl["train_info"]
    # the same seed and data: the members inside the blend are the models of their own cells
    assert info["members"]["ranknet"]["curve"] == net["train_info"]["curve"]
    assert info["members"]["lightgbm"]["valid_best"] == lgb["train_info"]["valid_best"]
    assert info["member_valid"]["lightgbm"] == pytest.approx(lgb["train_info"]["valid_best"], abs=1e-12)
    # the default rule, cv: the lambda with the best cross-validated value (ties: the smaller one)
    cv = info["cv"]
    assert cv["lambda"] == cv["lambdas"][cv["values"].index(max(cv["values"]))]
    assert sum(info["weights"].values()) == pytest.approx(1.0, abs=1e-12) and min(info["weights"].values()) >= 0
    assert set(bl["per_query"]) == set(lgb["per_query"]) and bl["query_ids"] == lgb["query_ids"]
    # the test scores are the members' test scores, standardised and weighted as the validation chose
    from ltr.study.cell_training import train_method
    from ltr.study.methods import resolve_method

    train, valid, test = ablation.load_splits(cfg.datasets[0], None)
    kw = dict(seed=0, metrics=cfg.metrics, monitor="ndcg@10", budget=1, threads=1)
    scores, again = train_method(resolve_method("bl", cfg), train, valid, test, **kw)
    members = [train_method(resolve_method(m, cfg), train, valid, test, **kw)[0] for m in ("lightgbm", "ranknet")]
    weights = [again["weights"]["lightgbm"], again["weights"]["ranknet"]]
    assert again["weights"] == info["weights"]
    assert np.array_equal(scores, combine([standardise(m, test.query_offsets) for m in members], weights))
    equal_cfg = _study(variants={"bl": {"blend": ["lightgbm", "ranknet"], "weights": "equal"}})
    scores, equal = train_method(resolve_method("bl", equal_cfg), train, valid, test, **kw)
    assert equal["weights"] == {"lightgbm": 0.5, "ranknet": 0.5} and equal["valid_best"] == equal["equal_weights_valid"]
    assert np.array_equal(scores, combine([standardise(m, test.query_offsets) for m in members], [0.5, 0.5]))


def test_the_blend_study_config_loads(shared_data):
    from ltr.study import ablation
    from ltr.study.methods import resolve_method

    shared_data("letor4-mq2008")
    cfg = ablation.load_config(Path(__file__).resolve().parents[1] / "experiments" / "blend_mq2008.toml")
    spec = resolve_method("blend", cfg)
    assert spec.kind == "blend" and [m.kind for m in spec.members] == ["lightgbm", "neural"]
    assert spec.members[0].tune and spec.members[1].loss == "softmax"
    synthetic = ablation.load_config(Path(__file__).resolve().parents[1] / "experiments" / "blend_synthetic.toml")
    members = resolve_method("blend", synthetic).members
    assert [m.name for m in members] == ["lgbm", "mlp_log1p"] and members[1].model["normalize"] == "log1p_standard"


def test_listwise_member_gets_the_query_offsets_through_predict(members, tmp_path, capsys):
    """A context-aware (listwise) member scores whole queries: the blend passes the offsets on, and
    `ltr predict --format tsv` writes exactly the blend of the members' scores."""
    from ltr.train.models import build_model, save_model

    root = members
    torch.manual_seed(0)
    save_model(build_model({"type": "attention", "n_features": 4, "width": 8, "heads": 2, "layers": 1}), tmp_path / "attn")
    out = tmp_path / "blend"
    assert main(["blend", "--models", str(tmp_path / "attn"), str(root / "lin"), "--valid", str(root / "valid.txt"),
                 "--out", str(out), "--copy-members"]) == 0
    assert main(["predict", "--model", str(out), "--data", str(root / "test.txt"), "--format", "tsv",
                 "--out", str(tmp_path / "s.tsv")]) == 0
    test = load_svmlight(root / "test.txt")
    parts = [load_scorer(f)[0](test.features, test.query_offsets) for f in (tmp_path / "attn", root / "lin")]
    # the listwise member really depends on the lists: scored as one long list it would differ
    assert not np.allclose(parts[0], load_scorer(tmp_path / "attn")[0](test.features, np.array([0, test.n_items])))
    weights = json.loads((out / "blend.json").read_text())["weights"]
    assert min(weights) > 0  # both members count (0.646 / 0.354 here)
    expected = combine([standardise(p, test.query_offsets) for p in parts], weights)
    written = np.array([float(v) for v in (tmp_path / "s.tsv").read_text().split()])
    assert np.array_equal(written, expected)
