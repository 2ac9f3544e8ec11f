"""Beta, spline, field-aware and multicalibration: beta against scikit-learn's unpenalised logistic
fit on (ln s, -ln(1 - s)), the spline against scipy's bounded optimiser, the within-field order
invariance on random data (and the refusal when it breaks), shrinkage, the held-out stopping rule,
JSON round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.linear_model import LogisticRegression

import ltr.calibrate.field_calibrators as fcal
from ltr.calibrate.factory import calibrator_from_json, make_calibrator
from ltr.calibrate.field_calibrators import (
    BetaCalibrator,
    FieldAwareCalibrator,
    MulticalibrationCalibrator,
    SplineCalibrator,
    check_within_field_order,
)
from ltr.calibrate.invariance import check_auc_invariance
from ltr.base.errors import LtrError
from metrics.classification import grouped_auc, log_loss


def _probs(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.5, 1.3, n)
    y = (rng.random(n) < expit(z)).astype(float)
    s = expit(0.6 * z - 0.4 + 0.3 * np.sin(z))  # monotone in z, miscalibrated
    return s, y


def test_beta_equals_sklearn_logistic_regression_on_the_two_features():
    s, y = _probs()
    cal = BetaCalibrator().fit(s, y)
    X = np.column_stack([np.log(s), -np.log1p(-s)])
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(X, y)
    assert cal.a_ > 0 and cal.b_ > 0
    assert cal.a_ == pytest.approx(ref.coef_[0, 0], abs=1e-5)
    assert cal.b_ == pytest.approx(ref.coef_[0, 1], abs=1e-5)
    assert cal.c_ == pytest.approx(ref.intercept_[0], abs=1e-5)
    assert np.allclose(cal.predict(s), ref.predict_proba(X)[:, 1], atol=1e-7)


def test_beta_drops_a_negative_coefficient_and_stays_monotone():
    rng = np.random.default_rng(5)
    s = rng.uniform(0.01, 0.99, 5000)
    y = (rng.random(5000) < 0.9 * s * (1 - s)).astype(float)  # logit p ~ ln s + ln(1 - s): b = -1 < 0
    full = LogisticRegression(C=np.inf, max_iter=10_000).fit(np.column_stack([np.log(s), -np.log1p(-s)]), y)
    assert full.coef_[0, 1] < 0
    cal = BetaCalibrator().fit(s, y)
    assert cal.b_ == 0.0 and cal.a_ > 0
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(np.log(s)[:, None], y)
    assert cal.a_ == pytest.approx(ref.coef_[0, 0], abs=1e-5)
    grid = np.linspace(0.01, 0.99, 200)
    assert np.all(np.diff(cal.predict(grid)) > 0)


def test_spline_reaches_the_bounded_optimum_and_keeps_auc():
    s, y = _probs(4000, seed=1)
    cal = SplineCalibrator(n_knots=6).fit(s, y)
    x = np.log(s) - np.log1p(-s)
    A = np.column_stack([SplineCalibrator._basis(x, cal.knots_), np.ones_like(x)])

    def f(th):
        u = A @ th
        return float(np.mean(-log_expit(-u) - y * u)), A.T @ (expit(u) - y) / len(y)

    k = A.shape[1] - 1
    ref = minimize(f, np.r_[np.ones(k), -1.0], jac=True, method="L-BFGS-B",
                   bounds=[(cal.min_slope, None)] * k + [(None, None)], options={"ftol": 1e-15, "gtol": 1e-12})
    ours = f(np.r_[cal.slopes_, cal.intercept_])[0]
    assert ours <= ref.fun + 1e-10
    assert np.all(cal.slopes_ >= cal.min_slope)
    inv = check_auc_invariance(s, cal.predict(s), y)
    assert inv.unchanged and inv.tied_pairs_created == 0
    assert log_loss(y, cal.predict(s)) < log_loss(y, s)


def test_spline_min_slope_binds_on_flat_stretch():
    rng = np.random.default_rng(2)
    s = rng.uniform(0.05, 0.95, 8000)
    y = (rng.random(8000) < np.where(s < 0.5, 0.2, 0.6)).astype(float)  # a step: flat on each side
    cal = SplineCalibrator(n_knots=8, min_slope=1e-3).fit(s, y)
    assert np.isclose(cal.slopes_.min(), 1e-3) and cal.slopes_.max() > 1.0


def _field_data(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    site = rng.integers(0, 12, n)
    dev = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    z = rng.normal(-2.0, 1.0, n)
    effect = np.linspace(-0.6, 0.6, 12)[site] + np.array([0.0, -0.4, 0.5])[dev]
    y = (rng.random(n) < expit(z + effect)).astype(float)
    return expit(z), y, {"site": site, "device": dev}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_field_aware_keeps_the_order_inside_each_value_exactly(seed):
    s, y, fields = _field_data(seed=seed)
    cal = FieldAwareCalibrator(["site"], global_method="platt").fit(s, y, fields)
    p = cal.predict(s, fields)
    assert cal.order_check_ == {"reversed": 0, "ties_created": 0, "ties_broken": 0}
    before = grouped_auc(y, s, fields["site"])
    after = grouped_auc(y, p, fields["site"])
    assert after.value == before.value and np.array_equal(after.per_group, before.per_group)
    # Two fields: the order is kept inside each (site, device) cell, and the global AUC may move.
    cal2 = FieldAwareCalibrator(["site", "device"]).fit(s, y, fields)
    p2 = cal2.predict(s, fields)
    cells = fields["site"] * 10 + fields["device"]
    assert grouped_auc(y, p2, cells).value == grouped_auc(y, s, cells).value
    assert check_within_field_order(s, p2, cells) == {"reversed": 0, "ties_created": 0, "ties_broken": 0}
    assert check_within_field_order(s, p2, fields["site"])["reversed"] > 0  # across devices: not kept
    assert log_loss(y, p2) < log_loss(y, make_calibrator("platt").fit(s, y).predict(s))


def test_check_within_field_order_by_hand():
    before = [0.1, 0.2, 0.3, 0.3, 0.5, 0.6]
    after = [0.2, 0.1, 0.4, 0.5, 0.7, 0.7]
    groups = [0, 0, 0, 0, 1, 1]
    # group 0: (0.1 -> 0.2) then (0.2 -> 0.1): reversed; 0.3 / 0.3 tie broken. group 1: tie created.
    assert check_within_field_order(before, after, groups) == {"reversed": 1, "ties_created": 1, "ties_broken": 1}


def test_field_aware_refuses_a_map_that_breaks_the_order(monkeypatch):
    s, y, fields = _field_data()
    real = fcal.global_logit
    monkeypatch.setattr(fcal, "global_logit", lambda cal, x: np.minimum(real(cal, x), -2.5))  # a flat stretch
    with pytest.raises(LtrError, match="field-aware fit refused.*ties created"):
        FieldAwareCalibrator(["site"], global_method="platt").fit(s, y, fields)


def test_field_aware_offsets_equal_the_penalised_fit_and_shrink_by_clicks():
    s, y, fields = _field_data(n=8000, seed=3)
    lam = 25.0
    cal = FieldAwareCalibrator(["site"], global_method="platt", prior_clicks=lam).fit(s, y, fields)
    z0 = fcal.global_logit(cal.global_, s)
    site = fields["site"]

    def obj(d):
        z = z0 + d[site]
        return float(np.sum(-log_expit(-z) - y * z) + lam / 2 * np.sum(d ** 2))

    ref = minimize(obj, np.zeros(12), method="BFGS", options={"gtol": 1e-8})
    ours = np.array([cal.offsets_["site"][str(v)] for v in range(12)])
    assert np.allclose(ours, ref.x, atol=1e-4)
    # Shrinkage: a larger penalty pulls every offset towards 0 (the global map).
    strong = FieldAwareCalibrator(["site"], global_method="platt", prior_clicks=5000).fit(s, y, fields)
    assert all(abs(strong.offsets_["site"][k]) < abs(v) for k, v in cal.offsets_["site"].items())
    # A value never seen in the fit data falls back to the global map.
    assert cal.predict(s[:3], {"site": np.array([99, 99, 99])}) == pytest.approx(cal.global_.predict(s[:3]))


def _interaction_data(n=40000, seed=0):
    rng = np.random.default_rng(seed)
    dev = rng.integers(0, 3, n)
    z = rng.normal(-2.0, 1.0, n)
    # device 1 is over-predicted only at high scores: a score x field interaction no offset can fix
    true = z - 0.9 * ((dev == 1) & (z > -1.5))
    y = (rng.random(n) < expit(true)).astype(float)
    return expit(z), y, {"device": dev}


def test_multicalibration_stops_at_the_best_held_out_round_and_fixes_an_interaction():
    s, y, fields = _interaction_data()
    cal = MulticalibrationCalibrator(["device"], n_bins=4, learning_rate=0.5).fit(s, y, fields)
    h = cal.history_
    assert len(cal.rounds_) == int(np.argmin(h))  # kept rounds end at the best held-out loss
    assert len(cal.rounds_) >= 2
    assert all(h[i] > h[len(cal.rounds_)] for i in range(len(cal.rounds_)))
    s2, y2, f2 = _interaction_data(seed=1)
    fa = FieldAwareCalibrator(["device"], global_method="platt").fit(s, y, fields)
    assert log_loss(y2, cal.predict(s2, f2)) < log_loss(y2, fa.predict(s2, f2)) - 1e-4


@pytest.mark.parametrize("method", ["beta", "spline", "field-aware", "multicalibration"])
def test_json_round_trip_is_exact(method, tmp_path):
    s, y, fields = _field_data(n=6000, seed=4)
    kw = {"fields": ["site", "device"]} if method in ("field-aware", "multicalibration") else {}
    cal = make_calibrator(method, **kw)
    cal = cal.fit(s, y, fields) if kw else cal.fit(s, y)
    path = tmp_path / "cal.json"
    cal.save(path)
    back = calibrator_from_json(path.read_text())
    args = (s, fields) if kw else (s,)
    assert np.array_equal(back.predict(*args), cal.predict(*args))
    assert json.loads(path.read_text())["kind"] == method


def test_bad_json_and_missing_fields_are_clear_errors():
    s, y, fields = _field_data(n=4000)
    cal = FieldAwareCalibrator(["site"]).fit(s, y, fields)
    d = cal.to_dict()
    d["offsets"]["site"]["0"] = "x"
    with pytest.raises(LtrError, match="offsets of field 'site' must be finite"):
        calibrator_from_json(json.dumps(d))
    with pytest.raises(LtrError, match="field 'site' is missing"):
        cal.predict(s, {"device": fields["device"]})
    with pytest.raises(LtrError, match="needs the field values"):
        FieldAwareCalibrator(["site"]).fit(s, y)
    d = SplineCalibrator().fit(s, y).to_dict()
    d["slopes"][0] = -1.0
    with pytest.raises(LtrError, match="slope must be finite and > 0"):
        calibrator_from_json(json.dumps(d))


def _brute_order(before, after, groups):
    """Adjacent pairs in (group, before, after) order, classified as check_within_field_order does."""
    rows = sorted(zip(groups, before, after))
    out = {"reversed": 0, "ties_created": 0, "ties_broken": 0}
    for (g0, b0, a0), (g1, b1, a1) in zip(rows, rows[1:]):
        if g0 != g1:
            continue
        if b1 > b0 and a1 < a0:
            out["reversed"] += 1
        elif b1 > b0 and a1 == a0:
            out["ties_created"] += 1
        elif b1 == b0 and a1 != a0:
            out["ties_broken"] += 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_check_within_field_order_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 60
    before = rng.integers(0, 12, n) / 4.0  # many ties
    after = np.where(rng.random(n) < 0.8, before * 2.0, rng.integers(0, 12, n) / 2.0)
    groups = rng.integers(0, 4, n)
    assert check_within_field_order(before, after, groups) == _brute_order(before, after, groups)


@pytest.mark.parametrize("seed", range(4))
def test_field_aware_invariance_on_random_data_with_ties(seed):
    rng = np.random.default_rng(100 + seed)
    n = 5000
    s = np.round(rng.uniform(0.01, 0.4, n), 2)  # tied scores
    fields = {"a": rng.integers(0, 7, n), "b": rng.choice(["x", "y", "z"], n), "c": rng.integers(0, 2, n)}
    y = (rng.random(n) < s * np.exp(0.3 * (fields["a"] - 3) / 3)).astype(float)
    cal = FieldAwareCalibrator(["a", "b", "c"], global_method=["platt", "beta", "spline"][seed % 3]).fit(s, y, fields)
    p = cal.predict(s, fields)
    cells = fields["a"] * 100 + np.unique(fields["b"], return_inverse=True)[1] * 10 + fields["c"]
    assert _brute_order(s, p, cells) == {"reversed": 0, "ties_created": 0, "ties_broken": 0}
    assert grouped_auc(y, p, cells).value == grouped_auc(y, s, cells).value
