"""AUC, grouped AUC, LogLoss, Brier, ECE / MCE and the calibration curve against scikit-learn,
the measured peer vectors and hand computations."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import REFERENCE
from sklearn.calibration import calibration_curve as sk_calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.metrics import log_loss as sk_log_loss

from metrics.classification import (
    auc,
    brier,
    calibration_curve,
    ece,
    grouped_auc,
    log_loss,
    mce,
)


@pytest.mark.parametrize("seed", range(5))
def test_auc_equals_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    y = (rng.random(n) < 0.1 + 0.3 * seed / 5).astype(int)
    # Rounded scores: many ties inside and across the classes.
    s = np.round(rng.normal(size=n) + 0.8 * y, 1)
    assert auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_auc_peer_vectors():
    path = REFERENCE / "vectors.json"
    if not path.exists():
        pytest.skip(f"shared reference not present: {path}")
    cases = {c["id"]: c for c in json.loads(path.read_text())["cases"]}
    for cid in ("auc_ties", "auc_all_tied", "auc_no_ties"):
        inp = cases[cid]["input"]
        expected = cases[cid]["outputs"]["scikit-learn"]["roc_auc_score"]["value"]
        assert auc(inp["y_true"], inp["y_score"]) == pytest.approx(expected, abs=1e-12), cid
    inp = cases["auc_single_class_negative"]["input"]
    assert math.isnan(auc(inp["y_true"], inp["y_score"]))


def test_auc_hand_computed_ties():
    # Positives {0.5, 0.9, 0.3}, negatives {0.1, 0.5, 0.9}: of 9 pairs, wins are
    # 0.5>0.1, 0.9>0.1, 0.9>0.5, 0.3>0.1 (4) and ties 0.5=0.5, 0.9=0.9 (2 x 1/2): 5/9.
    assert auc([0, 0, 1, 1, 0, 1], [0.1, 0.5, 0.5, 0.9, 0.9, 0.3]) == pytest.approx(5 / 9, abs=1e-15)


def test_auc_rejects_non_binary_and_length_mismatch():
    with pytest.raises(ValueError, match="binary"):
        auc([0, 2, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="labels have"):
        auc([0, 1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        auc([0, 1], [0.1, np.nan])


def _grouped_reference(y, s, g, weighting):
    vals, weights, skipped = [], [], 0
    for key in np.unique(g):
        m = g == key
        yy, ss = y[m], s[m]
        npos = yy.sum()
        nneg = m.sum() - npos
        if npos == 0 or nneg == 0:
            skipped += 1
            continue
        vals.append(roc_auc_score(yy, ss))
        weights.append({"pairs": npos * nneg, "size": m.sum(), "uniform": 1.0}[weighting])
    return np.average(vals, weights=weights), skipped


@pytest.mark.parametrize("weighting", ["pairs", "size", "uniform"])
def test_grouped_auc_equals_per_group_sklearn(weighting):
    rng = np.random.default_rng(7)
    n = 3000
    g = rng.integers(0, 120, size=n)
    y = (rng.random(n) < 0.15).astype(int)
    s = np.round(rng.normal(size=n) + y, 1)  # ties inside groups
    expected, skipped = _grouped_reference(y, s, g, weighting)
    r = grouped_auc(y, s, g, weighting=weighting)
    assert r.value == pytest.approx(expected, abs=1e-12)
    assert r.n_skipped == skipped and skipped > 0
    assert r.n_groups == 120
    # Pair weighting with all rows in one group is the global AUC.
    if weighting == "pairs":
        assert grouped_auc(y, s, np.zeros(n)).value == pytest.approx(auc(y, s), abs=1e-12)


def test_grouped_auc_string_groups_and_bad_weighting():
    r = grouped_auc([1, 0, 1, 0], [0.9, 0.1, 0.2, 0.8], ["u1", "u1", "u2", "u2"], weighting="size")
    assert r.per_group.tolist() == [1.0, 0.0] and r.value == 0.5
    with pytest.raises(ValueError, match="weighting"):
        grouped_auc([1, 0], [0.2, 0.1], [0, 0], weighting="queries")


def test_log_loss_and_brier_equal_sklearn():
    rng = np.random.default_rng(3)
    y = (rng.random(500) < 0.3).astype(int)
    p = rng.random(500)
    p[:3] = [0.0, 1.0, 1e-20]  # clipped the same way as sklearn (float64 machine epsilon)
    y[:3] = [1, 0, 1]
    assert log_loss(y, p) == pytest.approx(sk_log_loss(y, p, labels=[0, 1]), rel=1e-12)
    w = rng.random(500)
    assert log_loss(y, p, sample_weight=w) == pytest.approx(sk_log_loss(y, p, sample_weight=w, labels=[0, 1]), rel=1e-12)
    assert brier(y, p) == pytest.approx(brier_score_loss(y, p), rel=1e-12)
    assert brier(y, p, sample_weight=w) == pytest.approx(brier_score_loss(y, p, sample_weight=w), rel=1e-12)
    # A fixed eps: a confident miss costs -log(eps).
    assert log_loss([1], [0.0], eps=1e-3) == pytest.approx(-math.log(1e-3))


def test_probabilities_out_of_range_rejected():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        log_loss([0, 1], [0.2, 1.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ece([0, 1], [-0.1, 0.5])


@pytest.mark.parametrize("ours,theirs", [("width", "uniform"), ("mass", "quantile")])
def test_calibration_curve_equals_sklearn(ours, theirs):
    rng = np.random.default_rng(11)
    p = rng.beta(0.5, 5.0, size=4000)
    p[:50] = 0.2  # values on an inner equal-width edge, and a big tie for the quantile edges
    y = (rng.random(4000) < p * 1.3).astype(int)
    for n_bins in (5, 10, 17):
        prob_true, prob_pred = sk_calibration_curve(y, p, n_bins=n_bins, strategy=theirs)
        c = calibration_curve(y, p, n_bins=n_bins, strategy=ours)
        np.testing.assert_allclose(c.fraction_positive, prob_true, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.mean_predicted, prob_pred, rtol=0, atol=1e-12)
        assert c.counts.sum() == 4000


def test_ece_and_mce_hand_computed():
    # Equal-width, 4 bins [0, .25], (.25, .5], (.5, .75], (.75, 1]; 0.25 and 0.5 sit on edges and go to
    # the lower bin.
    p = [0.05, 0.25, 0.30, 0.50, 0.60, 0.90, 0.95, 0.10]
    y = [0, 1, 0, 0, 1, 1, 1, 0]
    # bin 1: p .05 .25 .10 -> mean .13333, y 0 1 0 -> .33333, gap .2       share 3/8
    # bin 2: p .30 .50     -> mean .4,     y 0 0    -> 0,      gap .4       share 2/8
    # bin 3: p .60         -> .6,          y 1      -> 1,      gap .4       share 1/8
    # bin 4: p .90 .95     -> .925,        y 1 1    -> 1,      gap .075     share 2/8
    expected = 3 / 8 * 0.2 + 2 / 8 * 0.4 + 1 / 8 * 0.4 + 2 / 8 * 0.075  # = 0.24375
    assert ece(y, p, n_bins=4) == pytest.approx(expected, abs=1e-12)
    assert mce(y, p, n_bins=4) == pytest.approx(0.4, abs=1e-12)
    # Equal-mass, 2 bins: the median edge is 0.4 (between 0.30 and 0.50); lower bin .05 .10 .25 .30:
    # mean p .175, rate .25, gap .075; upper .50 .60 .90 .95: mean p .7375, rate .75, gap .0125.
    assert ece(y, p, n_bins=2, strategy="mass") == pytest.approx(0.5 * 0.075 + 0.5 * 0.0125, abs=1e-12)
    assert mce(y, p, n_bins=2, strategy="mass") == pytest.approx(0.075, abs=1e-12)


def test_ece_mass_bins_resolve_rare_positives():
    # Rare clicks with predictions crowded near zero. An under-confident model (halfway to the mean)
    # over-predicts the low CTRs and under-predicts the higher ones; with equal-width bins nearly
    # everything lands in the first bin, where the two errors cancel, so ECE looks perfect. Equal-mass
    # bins separate them.
    rng = np.random.default_rng(5)
    true = rng.beta(0.3, 60.0, size=200_000)
    y = (rng.random(true.shape[0]) < true).astype(int)
    p = 0.5 * true + 0.5 * true.mean()
    width = ece(y, p, n_bins=10, strategy="width")
    mass = ece(y, p, n_bins=10, strategy="mass")
    assert calibration_curve(y, p, n_bins=10, strategy="width").counts[0] > 0.95 * y.shape[0]
    assert len(calibration_curve(y, p, n_bins=10, strategy="mass").counts) == 10
    assert mass > 5 * width
    # The equal-mass value is the mean |gap| of ten bins of 20 000 rows each, recomputed by hand.
    order = np.argsort(p, kind="stable")
    gaps = [abs(p[c].mean() - y[c].mean()) for c in np.array_split(order, 10)]
    assert mass == pytest.approx(np.mean(gaps), rel=1e-9)
