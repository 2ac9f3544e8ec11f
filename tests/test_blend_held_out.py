"""The blend weights rule ``held-out`` (``ltr blend --weights held-out``; ltr.models.blend.fit_held_out):
the ``cv`` blend, kept only when it beats the best member alone on validation queries its weights
were not fitted on (one-sided paired t-test), else the best member alone."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from test_blend import _linear_folder, make_ds, ndcg10

from ltr.cli import main
from ltr.data import RankingDataset, save_svmlight
from ltr.models.blend import DEFAULT_WEIGHT_RULE, HELD_OUT_ALPHA, combine, fit_weights, shrink_units, standardise


def graded(n_queries: int, length: int, seed: int):
    """Lists with graded labels, and members scoring ``label + noise`` of a given noise each."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n_queries * length).astype(np.float64)
    ds = RankingDataset(np.zeros((len(labels), 1), dtype=np.float32), labels, np.arange(0, len(labels) + 1, length),
                        np.arange(n_queries))
    return ds, (lambda noise: labels + rng.normal(0.0, noise, len(labels)))


def test_it_is_offered_beside_the_default_cv():
    assert DEFAULT_WEIGHT_RULE == "cv" and HELD_OUT_ALPHA == 0.05


def test_two_members_as_good_as_each_other_keep_the_cv_blend():
    ds, member = graded(300, 10, 0)
    a, b = member(1.0), member(1.0)  # independent errors: their average ranks better on most queries
    fit, cv = fit_weights([a, b], ds, rule="held-out"), fit_weights([a, b], ds, rule="cv")
    held = fit.search["held_out"]
    assert held["chosen"] == "blend" and held["p"] < 1e-6 and held["mean_gain"] > 0.01
    assert fit.units == cv.units and fit.search["cv"] == cv.search["cv"]  # the blend kept is cv's, bit for bit
    # the recorded gain and p are those of the held-out blend against the best member, recomputed here
    best = held["best_member"]
    assert best == int(np.argmax(fit.member_values)) and held["member_values"] == fit.member_values
    zs = [standardise(s, ds.query_offsets) for s in (a, b)]
    folds = cv.search["cv"]
    from ltr.models.blend import cv_folds
    from ltr.runs.scoring import evaluate_scores

    name = fit.metric
    held_scores = np.zeros(ds.n_items)
    for units, queries in zip(folds["fold_units"], cv_folds(ds.n_queries)):
        rows = ds.row_indices(queries)
        held_scores[rows] = combine([z[rows] for z in zs], [u / 500 for u in shrink_units(units, folds["lambda"])])
    d = (evaluate_scores(held_scores, ds, ["ndcg@10"], None).per_query[name]
         - evaluate_scores(zs[best], ds, ["ndcg@10"], None).per_query[name])
    assert held["mean_gain"] == pytest.approx(float(np.mean(d)), abs=1e-12)
    assert held["p"] == pytest.approx(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue, rel=1e-9)


def test_a_much_weaker_member_leaves_the_best_member_alone():
    ds, member = graded(300, 10, 1)
    good, weak = member(0.8), member(4.0)
    fit = fit_weights([weak, good], ds, rule="held-out")
    held = fit.search["held_out"]
    assert held["chosen"] == "best member" and held["best_member"] == 1 and held["p"] >= HELD_OUT_ALPHA
    assert fit.units == (0, 500) and fit.value == pytest.approx(ndcg10(good, ds), abs=1e-12)


def test_a_perfect_member_cannot_be_beaten():
    ds, member = graded(40, 8, 2)
    perfect = ds.labels.copy()
    fit = fit_weights([member(1.0), perfect], ds, rule="held-out")
    held = fit.search["held_out"]
    assert held["mean_gain"] <= 0 and held["chosen"] == "best member" and fit.units == (0, 500)
    assert fit.value == pytest.approx(1.0, abs=1e-12)


def test_identical_members_tie_and_the_earlier_one_is_kept():
    ds, member = graded(30, 6, 3)
    s = member(1.0)
    fit = fit_weights([s, 3.0 * s + 2.0], ds, rule="held-out")  # every blend ranks as either: no gain, p = 1
    assert fit.search["held_out"]["p"] == 1.0 and fit.units == (500, 0)


def test_cli_held_out_rule_is_saved_and_reproduces(tmp_path, capsys):
    for name, seed in (("valid", 21), ("test", 22)):
        save_svmlight(make_ds(60, seed), tmp_path / f"{name}.txt")
    _linear_folder(tmp_path / "a", [1.0, 0.2, 0.0, 0.0])
    _linear_folder(tmp_path / "b", [0.1, 1.0, 0.3, 0.0])
    out = tmp_path / "blend"
    assert main(["blend", "--models", str(tmp_path / "a"), str(tmp_path / "b"), "--valid", str(tmp_path / "valid.txt"),
                 "--test", str(tmp_path / "test.txt"), "--weights", "held-out", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads((out / "blend.json").read_text())
    held = doc["search"]["held_out"]
    assert doc["search"]["rule"] == "held-out" and held["chosen"] in ("blend", "best member")
    assert f"one-sided paired t p = {held['p']:.3g}" in printed
    expected = (shrink_units(doc["search"]["cv"]["searched_units"], doc["search"]["cv"]["lambda"]) if held["chosen"] == "blend"
                else tuple(500 if k == held["best_member"] else 0 for k in range(2)))
    assert tuple(doc["weight_units"]) == tuple(expected)
