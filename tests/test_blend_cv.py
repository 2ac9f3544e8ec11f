"""The blend weights rule ``cv`` (ltr.models.blend.fit_cv, ``ltr blend --weights cv``): the searched
weights shrunk toward equal weights by a lambda chosen by cross-validation over the validation
queries. Hand-built cases where lambda must be 1 and must be 0, the rounding of the shrunk weights,
the folds, small sets, and the weights reproducing from the saved folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_blend import _linear_folder, make_ds, ndcg10

from ltr.cli import main
from ltr.data import RankingDataset, load_svmlight, save_svmlight
from ltr.base.errors import LtrError
from ltr.models.blend import CV_LAMBDAS, combine, cv_folds, fit_weights, read_blend, shrink_units, standardise
from ltr.models.folder import load_scorer

G = 1 / np.log2(3)  # NDCG@10 of one relevant item at rank 2 of a list


def _dataset(queries):
    """A data set from (labels, member 0's scores, member 1's scores) per query; the members' score arrays."""
    labels = np.concatenate([np.asarray(q[0], dtype=np.float64) for q in queries])
    offsets = np.concatenate([[0], np.cumsum([len(q[0]) for q in queries])])
    ds = RankingDataset(np.zeros((len(labels), 1), dtype=np.float32), labels, offsets, np.arange(len(queries)))
    return ds, [np.concatenate([np.asarray(q[k], dtype=np.float64) for q in queries]) for k in (1, 2)]


def test_shrunk_units_by_hand():
    assert shrink_units((416, 84), 1.0) == (416, 84) and shrink_units((416, 84), 0.0) == (250, 250)
    # 0.25 * 416 + 0.75 * 250 = 291.5 and 208.5: one unit left over, tied remainders -> the earlier member
    assert shrink_units((416, 84), 0.25) == (292, 208)
    assert shrink_units((416, 84), 0.5) == (333, 167)
    # (500, 0, 0) halfway to (167, 167, 166): 333.5, 83.5, 83 -> 334, 83, 83
    assert shrink_units((500, 0, 0), 0.5) == (334, 83, 83)
    assert shrink_units((0, 0, 500), 0.75) == (42, 42, 416)  # 41.75, 41.75, 416.5: floors 41, 41, 416; +1, +1
    for lam in CV_LAMBDAS:
        assert sum(shrink_units((3, 400, 97), lam)) == 500 and min(shrink_units((3, 400, 97), lam)) >= 0


def test_folds_deal_every_query_once_deterministically():
    folds = cv_folds(23)
    assert [len(f) for f in folds] == [5, 5, 5, 4, 4]
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(23))
    assert all(np.array_equal(a, b) for a, b in zip(folds, cv_folds(23)))
    assert not np.array_equal(np.concatenate(folds), np.arange(23))  # dealt at random, not in file order
    assert [len(f) for f in cv_folds(3)] == [1, 1, 1] and [len(f) for f in cv_folds(2)] == [1, 1]
    with pytest.raises(LtrError, match="has 1 query; cross-validating the weights needs at least 2"):
        cv_folds(1)
    with pytest.raises(LtrError, match="1 folds"):
        cv_folds(10, 1)


def test_a_member_better_on_every_query_keeps_lambda_1():
    """Member 1 ranks the relevant item first by a hair (z gap about 2e-6, the far third item stretches
    its spread); member 0 puts an irrelevant item above it by a z gap of 1.22. Any weight on member 0
    (at least 1/500) flips the pair: NDCG@10 = 1/log2(3) on every query, so the search takes member 1
    alone on every fold, and every held-out query scores 1 at lambda = 1 and G below it."""
    ds, members = _dataset([([1, 0, 0], [0.0, 1.0, -1.0], [0.001, 0.0, -1000.0])] * 10)
    fit = fit_weights(members, ds, rule="cv")
    assert fit.member_values == pytest.approx([G, 1.0], abs=1e-12)
    cv = fit.search["cv"]
    assert cv["folds"] == 5 and cv["fold_units"] == [[0, 500]] * 5 and cv["searched_units"] == [0, 500]
    assert cv["values"] == pytest.approx([G, G, G, G, 1.0], abs=1e-12)
    assert fit.shrinkage == cv["lambda"] == 1.0 and fit.units == (0, 500) and fit.value == 1.0
    assert fit.equal_value == pytest.approx(G, abs=1e-12)


def _overfit_set():
    """35 queries dealt by :func:`cv_folds` into 5 folds of 7: fold 5 holds 7 'both' queries (the
    relevant item is first only while member 0's weight w lies in (0.45, 0.55)); folds 1-4 hold two
    'member 0' queries each (first only while w >= 0.8314: 1.2247 / (1.2247 + 0.2483), the two
    members' z gaps) and five queries both members rank right.

    On all 35 queries the search takes the 8 'member 0' queries over the 7 'both' queries (w = 416/500);
    without fold 5 it does the same, and every 'both' query of fold 5 then drops from 1 to G for every
    lambda > 0 (0.25 already moves w to 0.584); without a fold of 1-4 it keeps equal weights
    (7 'both' > 6 'member 0'), which lambda does not change. So CV(0) = (27 + 8G) / 35 beats
    CV(lambda > 0) = (20 + 15G) / 35: the search overfits the validation set, cross-validation says so."""
    both = ([1, 0, 0], [0.1, 1.0, -1.0], [0.1, -1.0, 1.0])
    first = ([1, 0, 0], [1.0, 0.0, -8.0], [0.0, 1.0, -1.0])
    right = ([1, 0], [1.0, 0.0], [1.0, 0.0])
    queries = [None] * 35
    folds = cv_folds(35)
    for q in folds[4]:
        queries[q] = both
    for f in folds[:4]:
        for j, q in enumerate(f):
            queries[q] = first if j < 2 else right
    return _dataset(queries)


def test_a_search_that_overfits_is_shrunk_to_equal_weights():
    ds, members = _overfit_set()
    zs = [standardise(m, ds.query_offsets) for m in members]
    one = cv_folds(35)[4][:1]  # one 'both' query: the window (0.45, 0.55) of w
    both, rows = ds.subset(one), ds.row_indices(one)
    zb = [standardise(m[rows], both.query_offsets) for m in members]
    assert [ndcg10(combine(zb, [w, 1 - w]), both) for w in (0.448, 0.452, 0.5, 0.548, 0.552, 0.584)] == \
        pytest.approx([G, 1, 1, 1, G, G], abs=1e-12)
    searched = fit_weights(members, ds, rule="search")
    assert searched.units == (416, 84) and searched.value == pytest.approx((20 + 8 + 7 * G) / 35, abs=1e-12)
    fit = fit_weights(members, ds, rule="cv")
    cv = fit.search["cv"]
    assert cv["fold_units"] == [[250, 250]] * 4 + [[416, 84]] and cv["searched_units"] == [416, 84]
    assert cv["values"] == pytest.approx([(27 + 8 * G) / 35] + [(20 + 15 * G) / 35] * 4, abs=1e-12)
    assert fit.shrinkage == 0.0 and fit.units == (250, 250)
    assert fit.value == fit.equal_value == pytest.approx(ndcg10(combine(zs, [0.5, 0.5]), ds), abs=1e-12)
    assert fit.value < searched.value  # lower on the validation set it was fitted on: that is the point
    # the same inputs give the same fit, bit for bit
    again = fit_weights(members, ds, rule="cv")
    assert again.units == fit.units and again.search == fit.search and again.value == fit.value


def test_ties_go_to_the_smaller_lambda_and_small_sets():
    ds = make_ds(12, 4)
    s = ds.features[:, 0].astype(np.float64)
    fit = fit_weights([s, 2 * s + 1], ds, rule="cv")  # every weight ranks alike: every CV value ties
    assert len(set(fit.search["cv"]["values"])) == 1 and fit.shrinkage == 0.0 and fit.units == (250, 250)
    three = ds.subset([0, 1, 2])
    rng = np.random.default_rng(0)
    members = [three.labels + rng.normal(size=three.n_items), rng.normal(size=three.n_items)]
    assert fit_weights(members, three, rule="cv").search["cv"]["folds"] == 3  # K = number of queries
    one = ds.subset([0])
    with pytest.raises(LtrError, match="rule cv: the validation set has 1 query"):
        fit_weights([m[: one.n_items] for m in members], one, rule="cv")
    assert fit_weights([s], ds, rule="cv").units == (500,)


def test_cli_cv_weights_are_saved_and_reproduce(tmp_path, capsys):
    train_free = {name: make_ds(60, seed) for name, seed in (("valid", 21), ("test", 22))}
    for name, ds in train_free.items():
        save_svmlight(ds, tmp_path / f"{name}.txt")
    _linear_folder(tmp_path / "a", [1.0, 0.2, 0.0, 0.0])
    _linear_folder(tmp_path / "b", [0.1, 1.0, 0.3, 0.0])
    out = tmp_path / "blend"
    assert main(["blend", "--models", str(tmp_path / "a"), str(tmp_path / "b"), "--valid", str(tmp_path / "valid.txt"),
                 "--test", str(tmp_path / "test.txt"), "--weights", "cv", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads((out / "blend.json").read_text())
    cv = doc["search"]["cv"]
    assert doc["search"]["rule"] == "cv" and cv["folds"] == 5 and cv["lambdas"] == list(CV_LAMBDAS)
    assert f"shrunk toward equal by lambda {cv['lambda']:g}, chosen by 5-fold" in printed
    assert doc["weight_units"] == list(shrink_units(cv["searched_units"], cv["lambda"]))
    assert cv["values"][CV_LAMBDAS.index(cv["lambda"])] == max(cv["values"])
    # reading the folder: its members refitted with rule cv give the same lambda, CV values and weights
    valid = load_svmlight(tmp_path / "valid.txt")
    member_scores = [load_scorer(f)[0](valid.features, valid.query_offsets) for f in read_blend(out)["member_folders"]]
    refit = fit_weights(member_scores, valid, doc["metric"]["name"], rule="cv")
    assert list(refit.units) == doc["weight_units"] and refit.search["cv"] == cv and refit.value == doc["valid_value"]
    # and the folder scores as the combination of the members' standardised scores with those weights
    zs = [standardise(s, valid.query_offsets) for s in member_scores]
    blended = load_scorer(out)[0](valid.features, valid.query_offsets)
    assert np.array_equal(blended, combine(zs, doc["weights"]))
    assert ndcg10(blended, valid) == pytest.approx(doc["valid_value"], abs=1e-12)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["weights"] == doc["weights"] and summary["arguments"]["weights"] == "cv"


def test_ablation_blend_variant_takes_the_cv_rule():
    from test_blend import _study

    from ltr.study.methods import resolve_method

    cfg = _study(variants={"bl": {"blend": ["lightgbm", "ranknet"], "weights": "cv"}})
    assert resolve_method("bl", cfg).blend_weights == "cv"


@pytest.mark.slow
def test_ablation_blend_cell_with_the_cv_rule_records_lambda():
    from test_blend import _study

    from ltr.study import ablation
    from ltr.study.cell_training import train_method
    from ltr.study.methods import resolve_method

    cfg = _study(variants={"bl": {"blend": ["lightgbm", "ranknet"], "weights": "cv"}})
    train, valid, test = ablation.load_splits(cfg.datasets[0], None)
    kw = dict(seed=0, metrics=cfg.metrics, monitor="ndcg@10", budget=1, threads=1)
    scores, info = train_method(resolve_method("bl", cfg), train, valid, test, **kw)
    cv = info["cv"]
    assert cv["lambda"] in CV_LAMBDAS and cv["values"][CV_LAMBDAS.index(cv["lambda"])] == max(cv["values"])
    expected = shrink_units(cv["searched_units"], cv["lambda"])
    assert [info["weights"][m] for m in ("lightgbm", "ranknet")] == [u / 500 for u in expected]
    members = [train_method(resolve_method(m, cfg), train, valid, test, **kw)[0] for m in ("lightgbm", "ranknet")]
    assert np.array_equal(scores, combine([standardise(m, test.query_offsets) for m in members],
                                          [u / 500 for u in expected]))


def test_lambda_tally_of_a_study_folder(tmp_path, capsys):
    from experiment_scripts import load_experiment

    module = load_experiment("blend_cv_lambdas")
    cells = {"mq/fold0/blend_cv-seed0": (0.0, [0.7, 0.6, 0.6, 0.6, 0.5]),
             "mq/fold1/blend_cv-seed0": (1.0, [0.5, 0.6, 0.6, 0.6, 0.9]),
             "mq/fold0/blend_cv-seed1": (0.0, [0.9, 0.6, 0.6, 0.6, 0.7])}
    for cell, (lam, values) in cells.items():
        (tmp_path / "runs" / cell).mkdir(parents=True)
        (tmp_path / "runs" / cell / "blend.json").write_text(json.dumps({"search": {"cv": {"lambda": lam, "values": values}}}))
    (tmp_path / "runs" / "mq/fold0/blend-seed0").mkdir(parents=True)  # a searched blend: no cv, not counted
    (tmp_path / "runs" / "mq/fold0/blend-seed0/blend.json").write_text(json.dumps({"search": {"rule": "search"}}))
    assert module.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == ["| mq | blend_cv | 3 | 2 / 0 / 0 / 0 / 1 | 0.7000 / 0.6000 / 0.6000 / 0.6000 / 0.7000 |"]
