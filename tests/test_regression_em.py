"""EM and regression EM for position bias without randomized traffic.

The logs here are *enumerable*: with expected click counts ``c = n theta_k gamma`` (the mean over
every click outcome) the truth must be a fixed point of one EM step, to rounding; from a neutral
start EM must converge to it when the model is identifiable.
"""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
from ltr.clicks.propensities.regression_em import (
    Observations,
    bootstrap_em,
    em_step,
    observations_from_log,
    regression_em,
)
from ltr.base.errors import LtrError

THETA = np.array([0.9, 0.5, 0.25])
GAMMA = np.array([0.8, 0.45, 0.3, 0.1])


def _all_positions_log():
    """Every item at every position (two rankers' worth of lists), expected clicks; n varies by cell."""
    item = np.repeat(np.arange(4), 3)
    position = np.tile(np.arange(1, 4), 4)
    n = 100.0 + 7.0 * np.arange(12)
    return Observations(item, position, n, n * THETA[position - 1] * GAMMA[item])


def test_truth_is_a_fixed_point_of_one_em_step():
    obs = _all_positions_log()
    theta_new, exam, rel = em_step(obs, THETA, GAMMA[obs.item])
    np.testing.assert_allclose(theta_new, THETA, rtol=0, atol=1e-14)
    # Hand check of the E-step for one unclicked mass: item 1 at position 2.
    o = 4
    t, g, c = 0.5, 0.45, obs.clicks[4]
    assert exam[o] == pytest.approx(c + (obs.n[o] - c) * t * (1 - g) / (1 - t * g), rel=1e-15)
    # The per-item M-step returns gamma unchanged too: expected relevant mass = n gamma.
    np.testing.assert_allclose(rel / obs.n, GAMMA[obs.item], rtol=1e-14)


def test_per_item_em_converges_to_the_truth_and_never_loses_likelihood():
    obs = _all_positions_log()
    res = regression_em(obs, relevance="per-item", iterations=3000, tol=0)
    np.testing.assert_allclose(res.theta, THETA / THETA[0], rtol=1e-6)
    # The fixed point's scale is free: theta * gamma must reproduce the clicks.
    np.testing.assert_allclose(res.theta_raw[obs.position - 1] * res.gamma, obs.clicks / obs.n, rtol=1e-6)
    assert np.all(np.diff(res.log_likelihood) >= -1e-9)


@pytest.fixture(scope="module")
def one_ranker():
    """One deterministic ranker per query (every item always at the same position); gamma logistic."""
    rng = np.random.default_rng(0)
    q, k = 2000, 6
    x = rng.normal(size=(q * k, 3))
    gamma = 1 / (1 + np.exp(-(x @ np.array([1.5, -1.0, 0.5]) - 1.0)))
    score = x @ np.array([1.5, -1.0, 0.5]) + rng.normal(0, 1.0, q * k)
    pos = np.zeros(q * k, dtype=np.int64)
    for i in range(q):
        pos[i * k + np.argsort(-score[i * k : (i + 1) * k])] = np.arange(1, k + 1)
    theta = pbm_examination(k, 1.0)
    n = np.full(q * k, 50.0)
    return x, gamma, pos, theta, n, np.repeat(np.arange(q), k), rng


def test_regression_em_recovers_propensities_from_one_ranker(one_ranker):
    x, gamma, pos, theta, n, query, rng = one_ranker
    exact = Observations(np.arange(len(n)), pos, n, n * theta[pos - 1] * gamma, query)
    res = regression_em(exact, relevance="logistic", features=x, iterations=500, tol=1e-13)
    np.testing.assert_allclose(res.theta, theta, rtol=1e-3)
    # Per-item EM on the same log cannot separate theta from gamma (each item has one position):
    # from a flat start it stays flat, "no position bias", and fits the clicks exactly all the same.
    flat = regression_em(exact, relevance="per-item", theta0=np.ones(6), iterations=50)
    np.testing.assert_allclose(flat.theta, np.ones(6))
    np.testing.assert_allclose(flat.theta_raw[pos - 1] * flat.gamma, theta[pos - 1] * gamma, rtol=1e-9)


def test_sampled_clicks_bootstrap_interval_covers_and_stays_in_unit_range(one_ranker):
    x, gamma, pos, theta, n, query, rng = one_ranker
    clicks = rng.binomial(50, theta[pos - 1] * gamma).astype(np.float64)
    obs = Observations(np.arange(len(n)), pos, n, clicks, query)
    res = regression_em(obs, relevance="logistic", features=x, iterations=300)
    assert np.all(np.abs(res.theta - theta) / theta < 0.05)
    low, high = bootstrap_em(obs, 20, relevance="logistic", features=x, iterations=100)
    assert np.all((0 <= low) & (low <= res.theta + 1e-12) & (res.theta <= high + 1e-12) & (high <= 1))
    assert np.sum((low <= theta) & (theta <= high)) >= 5


def test_observations_from_a_simulated_log():
    rng = np.random.default_rng(3)
    offsets = np.array([0, 4, 9])
    labels = rng.integers(0, 3, 9).astype(float)
    log = simulate_clicks(labels, offsets, labels, top_k=3, sessions_per_query=25, seed=1)
    obs = observations_from_log(log)
    assert obs.n.sum() == log.n_entries and obs.clicks.sum() == log.n_clicks
    assert set(obs.n.tolist()) == {25.0}  # one ranker: each shown item at one position, every session
    for o in range(len(obs.n)):
        rows = (log.doc == obs.item[o]) & (log.position == obs.position[o])
        assert obs.clicks[o] == log.click[rows].sum()
    with pytest.raises(LtrError, match="features"):
        regression_em(obs, relevance="logistic")


def test_relevance_predictor_reproduces_the_fitted_gamma():
    # The predictor EM returns scores any rows with the M-step model: on the observed items it gives back
    # EM's own gamma, rescaled to theta_1 = 1 (gamma * theta_raw[0]).
    from ltr.clicks.simulate.click_models import simulate_clicks
    from ltr.clicks.propensities.regression_em import observations_from_log, regression_em

    rng = np.random.default_rng(7)
    lengths = rng.integers(8, 15, 120)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], 4))
    labels = np.clip(np.round(1.5 + x[:, 0] + 0.5 * rng.normal(size=len(x))), 0, 4)
    log = simulate_clicks(labels, offsets, labels + rng.normal(0, 1, len(x)), max_label=4, sessions_per_query=30, seed=1)
    obs = observations_from_log(log)
    for relevance in ("logistic", "gbdt"):
        res = regression_em(obs, relevance=relevance, features=x, iterations=30)
        np.testing.assert_allclose(res.predict(x[obs.item]), np.clip(res.gamma, 1e-12, 1) * res.theta_raw[0], rtol=1e-6)
    assert regression_em(obs, iterations=5).predict is None


def test_gbdt_m_step_reuses_the_binned_data_with_the_same_boosters():
    # Every M-step fits the same features and weights to new soft labels: the dataset kept from the first
    # step, relabelled, gives the boosters of a dataset built anew, prediction for prediction.
    from ltr.clicks.propensities.regression_em import _fit_gbdt

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 5))
    weight = rng.integers(1, 50, 400).astype(float)
    targets = [1 / (1 + np.exp(-(x[:, 0] - 0.5 * x[:, 1] * k))) for k in (1.0, 2.0, -1.0)]
    kept: dict = {}
    for t in targets:
        reused = _fit_gbdt(x, t, weight, 0, 20, kept).predict(x)
        fresh = _fit_gbdt(x, t, weight, 0, 20, {}).predict(x)
        np.testing.assert_array_equal(reused, fresh)
    assert kept["gbdt_data"].get_label().tolist() == np.clip(targets[-1], 0, 1).astype(np.float32).tolist()
