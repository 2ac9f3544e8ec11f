"""Propensity estimates from intervention traffic against the simulator's true examination curve."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
from ltr.clicks.propensities.interventions import (
    compare_to_truth,
    estimate_from_randomized,
    estimate_from_swaps,
    fit_power_law,
    propensities_from_curve,
)
from ltr.base.errors import LtrError


@pytest.fixture(scope="module")
def log_and_truth():
    rng = np.random.default_rng(1)
    lengths = rng.integers(4, 25, 1500)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(np.float64)
    # A logging ranker that is good: the top item is usually relevant, which is what makes
    # naive CTR-by-position (production traffic) a biased propensity estimate.
    scores = labels + rng.normal(0, 0.7, offsets[-1])
    eta, k = 1.4, 8
    log = simulate_clicks(labels, offsets, scores, eta=eta, top_k=k, sessions_per_query=30,
                          randomize_fraction=0.35, swap_fraction=0.35, seed=4)
    return log, pbm_examination(k, eta), eta, k


@pytest.mark.parametrize("estimator", [estimate_from_randomized, estimate_from_swaps])
def test_estimate_matches_truth_within_standard_errors(log_and_truth, estimator):
    log, truth, eta, k = log_and_truth
    est = estimator(log, k)
    assert est.theta[0] == 1.0
    z = (est.theta[1:] - truth[1:]) / est.se[1:]
    assert np.all(np.abs(z) < 4), z
    # The standard errors are not vacuous: the intervals are narrow relative to the curve.
    assert np.all(est.se[1:] < 0.15 * truth[1:])
    rows = compare_to_truth(est, truth)
    assert [r["position"] for r in rows] == list(range(1, k + 1))
    assert sum(r["covered"] for r in rows) >= k - 1
    # The fitted power law recovers eta (delta-method weights, positions 2..k).
    assert abs(fit_power_law(est) - eta) < 0.1


def test_production_traffic_alone_is_biased(log_and_truth):
    # The reason for interventions: CTR by position on production lists confounds relevance with
    # examination (top items are more relevant), so its ratio falls faster than theta.
    log, truth, _, k = log_and_truth
    clicks, shown = log.ctr_by_position(k, mode=0)
    naive = (clicks / shown) / (clicks[0] / shown[0])
    assert np.all(naive[2:] < truth[2:] * 0.85)


def test_randomized_needs_randomized_sessions():
    rng = np.random.default_rng(0)
    offsets = np.array([0, 5, 10])
    labels = rng.integers(0, 3, 10).astype(float)
    log = simulate_clicks(labels, offsets, labels, sessions_per_query=5, seed=0)
    with pytest.raises(LtrError, match="randomized"):
        estimate_from_randomized(log, 3)
    with pytest.raises(LtrError, match="swap"):
        estimate_from_swaps(log, 3)


def test_curve_holds_its_last_position_and_smooths_with_the_power_law(log_and_truth):
    log, _, _, k = log_and_truth
    est = estimate_from_randomized(log, k)
    eta_hat = fit_power_law(est)
    curve = est.curve(12)
    np.testing.assert_allclose(curve[:k], est.theta)
    np.testing.assert_allclose(curve[k:], est.theta[k - 1])  # beyond the estimate: held at its last position
    np.testing.assert_allclose(est.curve(12, smooth=True), np.arange(1, 13) ** -eta_hat)
    p = propensities_from_curve(log, curve)
    np.testing.assert_allclose(p, curve[log.position - 1])
    with pytest.raises(LtrError, match="positions"):
        propensities_from_curve(log, curve[:3])


@pytest.mark.parametrize("estimator", [estimate_from_randomized, estimate_from_swaps])
def test_intervals_stay_above_zero_and_cover_positions_without_clicks(estimator):
    # a small log with steep position bias: the low positions see few or no clicks
    rng = np.random.default_rng(3)
    offsets = np.arange(0, 12 * 40 + 1, 12)
    labels = rng.integers(0, 3, offsets[-1]).astype(float)
    log = simulate_clicks(labels, offsets, labels, eta=3.0, top_k=10, sessions_per_query=3,
                          randomize_fraction=0.5, swap_fraction=0.5, seed=2)
    est = estimator(log, 10)
    ok = np.isfinite(est.theta)
    assert np.all(est.low[ok] >= 0) and np.all(est.high[ok] >= est.theta[ok] - 1e-12)
    assert np.all(est.low[ok] <= est.theta[ok] + 1e-12)
    no_clicks = ok & (est.clicks == 0)
    assert no_clicks.any() and np.all(est.high[no_clicks] > 0)  # not "0 [0, 0]"
