"""NE, PCOC, debiased ECE, F-RCE, field ECE and the per-field breakdown: hand computations on small
cases, properties a bug would break, and mcgrad's NE / calibration ratio as a peer where installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import metrics
from metrics.calibration import (
    ece_debiased,
    field_calibration,
    field_ece,
    field_rce,
    normalized_entropy,
    pcoc,
    poisson_bootstrap_ratio,
)


def test_normalized_entropy_by_hand():
    y = [1, 0, 0, 0, 1]
    p = [0.6, 0.3, 0.1, 0.2, 0.5]
    ll = -(math.log(0.6) + math.log(0.7) + math.log(0.9) + math.log(0.8) + math.log(0.5)) / 5
    q = 0.4
    h = -(q * math.log(q) + (1 - q) * math.log(1 - q))
    assert normalized_entropy(y, p) == pytest.approx(ll / h, rel=1e-12)
    # The constant prediction at the click rate scores exactly 1.
    assert normalized_entropy(y, [0.4] * 5) == pytest.approx(1.0, rel=1e-12)
    assert math.isnan(normalized_entropy([0, 0], [0.1, 0.2]))


def test_normalized_entropy_weights_equal_repeated_rows():
    y, p, w = [1, 0, 0], [0.7, 0.2, 0.4], [2, 1, 3]
    rep_y = [1, 1, 0, 0, 0, 0]
    rep_p = [0.7, 0.7, 0.2, 0.4, 0.4, 0.4]
    assert normalized_entropy(y, p, sample_weight=w) == pytest.approx(normalized_entropy(rep_y, rep_p), rel=1e-12)
    assert pcoc(y, p, sample_weight=w) == pytest.approx(pcoc(rep_y, rep_p), rel=1e-12)


def test_pcoc_by_hand_and_edges():
    assert pcoc([1, 0, 1, 0], [0.3, 0.2, 0.4, 0.1]) == pytest.approx(1.0 / 2.0)
    assert pcoc([0, 0], [0.1, 0.0]) == math.inf
    assert math.isnan(pcoc([0, 0], [0.0, 0.0]))


def test_mcgrad_peer_ne_and_ratio():
    mm = pytest.importorskip("mcgrad.metrics")
    rng = np.random.default_rng(3)
    p = rng.uniform(0.01, 0.5, 2000)
    y = (rng.random(2000) < p * 1.1).astype(float)
    w = rng.uniform(0.5, 2.0, 2000)
    assert normalized_entropy(y, p, sample_weight=w) == pytest.approx(mm.normalized_entropy(y, p, w), rel=1e-6)
    assert pcoc(y, p, sample_weight=w) == pytest.approx(mm.calibration_ratio(y, p, w), rel=1e-12)


def test_ece_debiased_by_hand():
    # Bin (0.25, 0.5] holds p = 0.3 x 4 with clicks 1, 1, 0, 0; bin (0.75, 1] holds p = 0.9 x 2 with clicks 1, 1.
    y = [1, 1, 0, 0, 1, 1]
    p = [0.3] * 4 + [0.9] * 2
    b1 = (0.3 - 0.5) ** 2 - 0.5 * 0.5 / 3
    b2 = (0.9 - 1.0) ** 2 - 0.0
    expected = math.sqrt(max(4 / 6 * b1 + 2 / 6 * b2, 0.0))
    assert ece_debiased(y, p, n_bins=4, strategy="width") == pytest.approx(expected, rel=1e-12)


def test_ece_debiased_removes_the_noise_of_a_calibrated_model():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.2, 20000)
    y = (rng.random(p.shape[0]) < p).astype(float)
    plug_in = math.sqrt(sum(c * g ** 2 for c, g in zip(*_shares_gaps(y, p))))
    debiased = ece_debiased(y, p, n_bins=50, strategy="mass")
    assert debiased < 0.5 * plug_in  # most of the plug-in value is sampling noise
    # A real miscalibration survives the debiasing.
    assert ece_debiased(y, np.clip(p * 1.5, 0, 1), n_bins=50) > 0.03


def _shares_gaps(y, p):
    c = metrics.calibration_curve(y, p, n_bins=50, strategy="mass")
    return c.shares, c.gaps


def test_field_rce_and_field_ece_by_hand():
    y = [1, 0, 0, 1, 1, 0, 0]
    p = [0.5, 0.3, 0.2, 0.6, 0.1, 0.4, 0.3]
    f = ["a", "a", "a", "b", "b", "c", "c"]
    # a: clicks 1, predicted 1.0; b: clicks 2, predicted 0.7; c: clicks 0 (no relative error), predicted 0.7
    rce = (3 * 0.0 + 2 * abs(2 - 0.7) / 2 + 0) / 7
    assert field_rce(y, p, f) == pytest.approx(rce, rel=1e-12)
    assert field_ece(y, p, f) == pytest.approx((0.0 + 1.3 + 0.7) / 7, rel=1e-12)
    w = [1, 1, 1, 2, 2, 1, 1]  # b counts twice: N_b = 4, its relative error unchanged
    assert field_rce(y, p, f, sample_weight=w) == pytest.approx((4 * 1.3 / 2) / 9, rel=1e-12)


def test_metrics_package_exports():
    assert metrics.normalized_entropy is normalized_entropy
    assert metrics.field_calibration is field_calibration


def test_field_calibration_table_by_hand_and_worst_first():
    y = np.array([1, 0, 0, 1, 1, 0, 0, 1])
    p = np.array([0.5, 0.3, 0.2, 0.6, 0.1, 0.4, 0.3, 0.2])
    fields = {"site": np.array(["a", "a", "a", "b", "b", "c", "c", "c"]), "device": np.array([0, 1] * 4)}
    fc = field_calibration(y, p, fields, n_boot=50)
    by = {(r["field"], r["value"]): r for r in fc.rows}
    assert by[("site", "b")]["count"] == 2 and by[("site", "b")]["clicks"] == 2
    assert by[("site", "b")]["pcoc"] == pytest.approx(0.35)
    assert by[("site", "c")]["pcoc"] == pytest.approx(0.9)
    assert by[("device", 0)]["pcoc"] == pytest.approx((0.5 + 0.2 + 0.1 + 0.3) / 2)  # rows 0, 2, 4, 6: two clicks
    errs = [r["abs_error"] for r in fc.rows]
    assert errs == sorted(errs, reverse=True)
    assert fc.fields["site"]["f_rce"] == pytest.approx(field_rce(y, p, fields["site"]))
    assert fc.fields["site"]["worst_value"] == "b"
    assert fc.mean_f_rce == pytest.approx((field_rce(y, p, fields["site"]) + field_rce(y, p, fields["device"])) / 2)
    # min_count sends the small values to the back
    fc2 = field_calibration(y, p, fields, n_boot=20, min_count=3)
    assert all(r["count"] >= 3 for r in fc2.rows[:3]) and fc2.rows[-1]["count"] < 3
    assert fc2.worst_abs_error == pytest.approx(max(r["abs_error"] for r in fc2.rows if r["count"] >= 3))


def test_bootstrap_interval_covers_and_narrows():
    rng = np.random.default_rng(1)
    n = 40000
    codes = rng.integers(0, 2, n)
    codes[:4000] = 0
    p = rng.uniform(0.05, 0.15, n)
    y = (rng.random(n) < p).astype(float)
    small = np.arange(n) < 2000  # group 0 restricted to fewer rows -> a wider interval
    lo, hi = poisson_bootstrap_ratio(codes, 2, p, y, n_boot=200, seed=0)
    ratio = np.bincount(codes, weights=p) / np.bincount(codes, weights=y)
    assert np.all(lo < ratio) and np.all(ratio < hi)
    lo_s, hi_s = poisson_bootstrap_ratio(codes[small], 2, p[small], y[small], n_boot=200, seed=0)
    assert (hi_s - lo_s)[0] > 2 * (hi - lo)[0]
    # seeded: same numbers again
    lo2, hi2 = poisson_bootstrap_ratio(codes, 2, p, y, n_boot=200, seed=0)
    assert np.array_equal(lo, lo2) and np.array_equal(hi, hi2)


def test_field_calibration_bad_input():
    with pytest.raises(ValueError, match="field 'site'"):
        field_calibration([1, 0], [0.5, 0.5], {"site": ["a"]})
    with pytest.raises(ValueError, match="at least one field"):
        field_calibration([1, 0], [0.5, 0.5], {})


def test_field_rce_values_without_clicks_counted_or_dropped():
    # a: |1 - 1| / 1 = 0 over 2 rows; b: |2 - 0.9| / 2 = 0.55 over 3 rows; c: no click, 2 rows
    y = [1, 0, 1, 1, 0, 0, 0]
    p = [0.5, 0.5, 0.3, 0.3, 0.3, 0.1, 0.1]
    f = ["a", "a", "b", "b", "b", "c", "c"]
    assert field_rce(y, p, f) == pytest.approx(3 * 0.55 / 7, rel=1e-12)
    assert field_rce(y, p, f, without_clicks="drop") == pytest.approx(3 * 0.55 / 5, rel=1e-12)  # DESC's getFieldRCE
    assert field_rce(y[:5], p[:5], f[:5], without_clicks="drop") == field_rce(y[:5], p[:5], f[:5])
    with pytest.raises(ValueError, match="without_clicks"):
        field_rce(y, p, f, without_clicks="skip")
