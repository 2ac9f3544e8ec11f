"""DBN, UBM, trust bias and click noise: closed forms against exact enumeration and simulation.

Exact: every hidden path of a three-item list (examination, click, satisfaction, continuation) is
enumerated with its probability, written from the models' generative stories and not from the
closed forms; the marginal click rate of each position must equal the closed form to 1e-12.
Simulated: the click rate per position over many sessions must lie within 5 standard errors of
the closed form (rates over n independent sessions: se = sqrt(p (1 - p) / n)).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ltr.clicks.simulate import browsing
from ltr.clicks.simulate.click_models import attraction, pbm_examination, simulate_clicks
from ltr.base.errors import LtrError

A = np.array([0.7, 0.3, 0.55])
S = np.array([0.6, 0.9, 0.2])


def _dbn_enumerated(a, s, gamma):
    """Marginal click rates by summing over every path of (click, satisfied, continue) choices."""
    k = len(a)
    rates = np.zeros(k)

    def walk(r, prob):
        if r == k or prob == 0:
            return
        for click in (0, 1):
            pc = a[r] if click else 1 - a[r]
            if click:
                rates[r] += prob * pc
                # satisfied: stop; not satisfied: continue with gamma
                walk(r + 1, prob * pc * (1 - s[r]) * gamma)
            else:
                walk(r + 1, prob * pc * gamma)

    walk(0, 1.0)
    return rates


def _ubm_enumerated(a, g):
    """Sum over all 2^K click vectors of P(vector) times the vector (P from the chain rule)."""
    k = len(a)
    rates = np.zeros(k)
    for clicks in itertools.product((0, 1), repeat=k):
        prob, last = 1.0, 0
        for r in range(1, k + 1):
            p = g[r - 1, r - last - 1] * a[r - 1]
            prob *= p if clicks[r - 1] else 1 - p
            if clicks[r - 1]:
                last = r
        rates += prob * np.array(clicks)
    return rates


def test_dbn_closed_form_equals_enumeration():
    for gamma in (1.0, 0.7):
        c, e = browsing.dbn_click_rates(A, S, gamma)
        np.testing.assert_allclose(c, _dbn_enumerated(A, S, gamma), rtol=0, atol=1e-12)
        # Hand value: P(E_2) = gamma (1 - a_1 s_1) = gamma * 0.58
        assert e[1] == pytest.approx(gamma * 0.58, abs=1e-15)


def test_dbn_with_full_perseverance_and_satisfaction_is_the_cascade():
    c, e = browsing.dbn_click_rates(A, np.ones(3), 1.0)
    cascade_exam = np.concatenate([[1.0], np.cumprod(1 - A)[:-1]])
    np.testing.assert_allclose(c, A * cascade_exam, rtol=1e-15)


def test_ubm_closed_form_equals_enumeration_and_reduces_to_pbm():
    g = browsing.ubm_examination(3, eta=1.2, xi=0.5)
    assert g[2, 0] == pytest.approx(3 ** -0.7, rel=1e-15) and g[0, 1] == 0.0
    np.testing.assert_allclose(browsing.ubm_click_rates(A, g)[0], _ubm_enumerated(A, g), rtol=0, atol=1e-12)
    # xi = 0: examination depends on the position only, so clicks are PBM's theta_r a_r.
    g0 = browsing.ubm_examination(3, eta=1.2, xi=0.0)
    np.testing.assert_allclose(browsing.ubm_click_rates(A, g0)[0], pbm_examination(3, 1.2) * A, rtol=1e-14)
    with pytest.raises(LtrError, match="xi"):
        browsing.ubm_examination(3, eta=1.0, xi=1.5)


def _one_list(labels):
    labels = np.asarray(labels, dtype=np.float64)
    return labels, np.array([0, len(labels)]), -np.arange(len(labels), dtype=np.float64)  # shown in input order


def _assert_rates(log, expected, k):
    clicks, shown = log.ctr_by_position(k)
    rate = clicks / shown
    se = np.sqrt(expected * (1 - expected) / shown)
    assert np.all(np.abs(rate - expected) < 5 * se), (rate, expected, se)


LABELS = [3.0, 0.0, 2.0, 1.0, 0.0, 3.0]


def test_simulated_dbn_matches_closed_form():
    labels, offsets, scores = _one_list(LABELS)
    log = simulate_clicks(labels, offsets, scores, model="dbn", gamma=0.85, eps=0.1, top_k=None, max_label=4,
                          sessions_per_query=100_000, seed=1)
    a = attraction(labels, max_label=4, eps=0.1)
    s = attraction(labels, max_label=4, eps=0.0)
    c, e = browsing.dbn_click_rates(a, s, 0.85)
    _assert_rates(log, c, 6)
    np.testing.assert_allclose(log.propensity, e[log.position - 1], rtol=1e-15)
    assert log.meta["model"] == "dbn" and log.meta["gamma"] == 0.85


def test_simulated_ubm_matches_closed_form_and_logs_the_conditional_examination():
    labels, offsets, scores = _one_list(LABELS)
    log = simulate_clicks(labels, offsets, scores, model="ubm", eta=1.0, ubm_xi=0.6, eps=0.1, top_k=None, max_label=4,
                          sessions_per_query=100_000, seed=2)
    a = attraction(labels, max_label=4, eps=0.1)
    g = browsing.ubm_examination(6, 1.0, 0.6)
    _assert_rates(log, browsing.ubm_click_rates(a, g)[0], 6)
    # The logged propensity of each entry is G[r, r - last click above it].
    first = log.session[:: 6][:300]
    for sess in first:
        rows = np.flatnonzero(log.session == sess)
        last = 0
        for i in rows:
            r = int(log.position[i])
            assert log.propensity[i] == g[r - 1, r - last - 1]
            if log.click[i]:
                last = r


def test_simulated_trust_bias_matches_affine_form():
    labels, offsets, scores = _one_list(LABELS)
    log = simulate_clicks(labels, offsets, scores, model="trust", eta=1.0, top_k=None, max_label=4,
                          sessions_per_query=100_000, seed=3)
    rho = attraction(labels, max_label=4, eps=0.0)
    theta = pbm_examination(6, 1.0)
    plus, minus = browsing.trust_curves(6)
    expected = browsing.trust_click_rates(rho, theta, plus, minus)
    # Hand value at position 2 (label 0, rho 0): theta_2 * eps_minus_2 = 0.5 * 0.325.
    assert expected[1] == pytest.approx(0.1625, abs=1e-15)
    _assert_rates(log, expected, 6)
    np.testing.assert_allclose(log.meta["eps_minus"], 0.65 / np.arange(1, 7))
    np.testing.assert_array_equal(log.propensity, theta[log.position - 1])


@pytest.mark.parametrize("model", ["pbm", "cascade"])
def test_click_noise_adds_nu_times_the_non_clicks(model):
    labels, offsets, scores = _one_list(LABELS)
    log = simulate_clicks(labels, offsets, scores, model=model, noise=0.05, eps=0.1, top_k=None, max_label=4,
                          sessions_per_query=100_000, seed=4)
    a = attraction(labels, max_label=4, eps=0.1)
    if model == "pbm":
        base = pbm_examination(6, 1.0) * a
    else:
        base = a * np.concatenate([[1.0], np.cumprod(1 - a)[:-1]])
    _assert_rates(log, browsing.noise_click_rates(base, 0.05), 6)
    assert log.meta["noise"] == 0.05


def test_bad_model_settings_are_user_errors():
    labels, offsets, scores = _one_list(LABELS)
    with pytest.raises(LtrError, match="gamma"):
        simulate_clicks(labels, offsets, scores, model="dbn", gamma=1.5)
    with pytest.raises(LtrError, match="noise"):
        simulate_clicks(labels, offsets, scores, noise=-0.1)
    with pytest.raises(LtrError, match="eps_minus <= eps_plus"):
        simulate_clicks(labels, offsets, scores, model="trust", eps_plus=0.2, eps_minus=0.5)
    with pytest.raises(LtrError, match="6 x 6"):
        simulate_clicks(labels, offsets, scores, model="ubm", top_k=None, ubm_matrix=np.eye(3))
