"""Unbiased LambdaMART: the debiased lambdas and the position-bias update against a hand computation,
then a LightGBM run on a simulated PBM log."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.engines.lambdamart import fit_unbiased_lambdamart, pair_lambdas, update_position_biases

SCORES = np.array([[0.5, 0.0, 1.0]])
POS = np.array([[1, 2, 3]])
MASK = np.ones((1, 3), dtype=bool)
PAIRS = np.zeros((1, 3, 3))
PAIRS[0, 0, 1] = 3.0  # item 0 clicked, item 1 not: 3 sessions
PAIRS[0, 2, 1] = 1.0  # item 2 clicked, item 1 not: 1 session
T_PLUS = np.array([1.0, 0.5, 0.25])
T_MINUS = np.array([1.0, 0.8, 0.6])


def test_lambdas_by_hand():
    grad, hess, loss = pair_lambdas(SCORES, PAIRS, POS, MASK, T_PLUS, T_MINUS, sigma=1.0)
    # Ranks by score: item 2 first, item 0 second, item 1 third.
    d01 = 1 / np.log2(3) - 1 / np.log2(4)
    d21 = 1 - 1 / np.log2(4)
    rho01 = 1 / (1 + np.exp(0.5))
    rho21 = 1 / (1 + np.exp(1.0))
    lam01 = 3 * d01 * rho01 / (1.0 * 0.8)  # t+ at position 1, t- at position 2
    lam21 = 1 * d21 * rho21 / (0.25 * 0.8)  # t+ at position 3, t- at position 2
    np.testing.assert_allclose(grad[0], [-lam01, lam01 + lam21, -lam21], rtol=1e-12)
    h01 = 3 * d01 * rho01 * (1 - rho01) / 0.8
    h21 = d21 * rho21 * (1 - rho21) / 0.2
    np.testing.assert_allclose(hess[0], [h01, h01 + h21, h21], rtol=1e-12)
    assert loss[0, 0, 1] == pytest.approx(3 * d01 * np.log1p(np.exp(-0.5)), rel=1e-12)
    assert loss[0, 2, 1] == pytest.approx(d21 * np.log1p(np.exp(-1.0)), rel=1e-12)


def test_position_bias_update_by_hand():
    _, _, loss = pair_lambdas(SCORES, PAIRS, POS, MASK, T_PLUS, T_MINUS)
    l01, l21 = loss[0, 0, 1], loss[0, 2, 1]
    tp, tm = update_position_biases(loss, POS, T_PLUS, T_MINUS, power=0.0)
    # t+: clicked item at position 1 (pair 0-1) and at position 3 (pair 2-1), both against t-_2.
    np.testing.assert_allclose(tp, [1.0, 1e-6, (l21 / 0.8) / (l01 / 0.8)], rtol=1e-12)
    # t-: the only unclicked position is 2, none at position 1: the update keeps the old values.
    np.testing.assert_allclose(tm, T_MINUS)
    tp1, _ = update_position_biases(loss, POS, T_PLUS, T_MINUS, power=1.0)
    assert tp1[2] == pytest.approx(np.sqrt(tp[2]), rel=1e-12)


def test_boosting_on_a_pbm_log_learns_relevance_and_a_falling_click_bias():
    from scipy.stats import spearmanr

    from ltr.clicks.simulate.click_models import simulate_clicks
    from ltr.data import RankingDataset

    rng = np.random.default_rng(0)
    q, n = 300, 12
    x = rng.normal(size=(q * n, 4))
    labels = np.clip(np.round(1.5 + x[:, 0] + 0.5 * x[:, 1] + rng.normal(0, 0.5, q * n)), 0, 4)
    offsets = np.arange(0, q * n + 1, n)
    ds = RankingDataset(x.astype(np.float32), labels, offsets, np.arange(q))
    log = simulate_clicks(labels, offsets, x[:, 1] + rng.normal(0, 1.0, q * n), top_k=8, sessions_per_query=50, seed=1)
    model = fit_unbiased_lambdamart(ds, log, rounds=30, params={"num_leaves": 7})
    assert spearmanr(model.predict(x), labels).statistic > 0.5
    assert model.t_plus[0] == 1.0 and model.t_plus[1] < 0.9 and model.t_plus[-1] < model.t_plus[1]
    assert len(model.history) == 30
