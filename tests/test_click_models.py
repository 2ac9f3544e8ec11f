"""Click simulators against their closed-form expectations, and the structure of the click log.

Tolerances come from the standard error of each simulated rate: a rate over n sessions whose
clicks are independent Bernoulli(p_i) has variance sum_i p_i (1 - p_i) / n^2; we allow 5 SE.
"""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.logs.click_log import ClickLog, MODE_PRODUCTION, MODE_RANDOMIZED, MODE_SWAP
from ltr.clicks.simulate.click_models import attraction, pbm_examination, simulate_clicks, top_k_matrix
from ltr.base.errors import LtrError


def _toy(n_queries=40, seed=0, min_len=3, max_len=15):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    labels = rng.integers(0, 5, offsets[-1]).astype(np.float64)
    scores = labels + rng.normal(0, 1.5, offsets[-1])
    return labels, offsets, scores


def _rate_and_se(probabilities):
    p = np.asarray(probabilities, dtype=np.float64)
    return p.mean(), np.sqrt((p * (1 - p)).sum()) / len(p)


def test_attraction_map_hand_values():
    # eps + (1 - eps) (2^rel - 1) / (2^4 - 1) with eps = 0.2: rel 1 -> 0.2 + 0.8 / 15.
    a = attraction(np.array([0, 1, 4]), max_label=4, eps=0.2)
    np.testing.assert_allclose(a, [0.2, 0.2 + 0.8 / 15, 1.0], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="max_label"):
        attraction(np.array([0, 5]), max_label=4)


def test_pbm_examination_is_power_law():
    np.testing.assert_allclose(pbm_examination(5, 2.0), [1, 1 / 4, 1 / 9, 1 / 16, 1 / 25])


def test_pbm_click_rate_by_position_matches_theta_times_mean_attraction():
    labels, offsets, scores = _toy()
    spq, eta, eps, k = 3000, 1.2, 0.1, 8
    log = simulate_clicks(labels, offsets, scores, model="pbm", eta=eta, eps=eps, top_k=k,
                          sessions_per_query=spq, seed=3)
    shown, n_shown = top_k_matrix(scores, offsets, k)
    a = attraction(labels, max_label=4, eps=eps)
    theta = pbm_examination(k, eta)
    clicks, impressions = log.ctr_by_position(k)
    for r in range(k):
        rows = shown[n_shown > r, r]
        # Every query is repeated spq times, so the expected rate is the mean over its queries.
        p = np.repeat(theta[r] * a[rows], spq)
        expected, se = _rate_and_se(p)
        assert impressions[r] == len(p)
        assert abs(clicks[r] / impressions[r] - expected) < 5 * se, (r, clicks[r] / impressions[r], expected, se)
    # The logged propensity of a PBM entry is theta at its position.
    np.testing.assert_array_equal(log.propensity, theta[log.position - 1])


def test_pbm_randomized_sessions_have_theta_times_list_mean_attraction():
    labels, offsets, scores = _toy(min_len=6, max_len=6)  # equal lengths: every position sees every list
    k, spq = 6, 4000
    log = simulate_clicks(labels, offsets, scores, eta=1.0, top_k=k, sessions_per_query=spq,
                          randomize_fraction=1.0, seed=5)
    assert (log.session_mode == MODE_RANDOMIZED).all()
    a = attraction(labels, max_label=4, eps=0.1)
    list_mean = np.add.reduceat(a, offsets[:-1]) / 6
    clicks, impressions = log.ctr_by_position(k)
    theta = pbm_examination(k, 1.0)
    for r in range(k):
        # Marginal per session: theta_r times the list's mean attraction (uniform placement).
        p = np.repeat(theta[r] * list_mean, spq)
        expected, se = _rate_and_se(p)
        assert abs(clicks[r] / impressions[r] - expected) < 5 * se


def test_cascade_click_rate_matches_closed_form():
    labels = np.array([1.0, 0.0, 2.0, 1.0, 0.0])
    offsets = np.array([0, 5])
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])  # shown in input order
    spq = 200_000
    log = simulate_clicks(labels, offsets, scores, model="cascade", eps=0.15, max_label=3, top_k=None,
                          sessions_per_query=spq, seed=11)
    a = attraction(labels, max_label=3, eps=0.15)  # all below 1: every position can be reached
    exam = np.concatenate([[1.0], np.cumprod(1 - a)[:-1]])
    expected = a * exam
    clicks, impressions = log.ctr_by_position(5)
    se = np.sqrt(expected * (1 - expected) / spq)
    np.testing.assert_array_less(np.abs(clicks / impressions - expected), 5 * se)
    # A cascade session has at most one click, and the logged propensity is the examination.
    per_session = np.bincount(log.session, weights=log.click, minlength=log.n_sessions)
    assert per_session.max() == 1
    np.testing.assert_allclose(log.propensity, exam[log.position - 1], rtol=1e-15)
    # P(no click) = prod (1 - a_j)
    no_click = (per_session == 0).mean()
    p0 = np.prod(1 - a)
    assert abs(no_click - p0) < 5 * np.sqrt(p0 * (1 - p0) / spq)


def test_log_structure_and_interventions():
    labels, offsets, scores = _toy(n_queries=30)
    k = 7
    log = simulate_clicks(labels, offsets, scores, top_k=k, sessions_per_query=50,
                          randomize_fraction=0.3, swap_fraction=0.3, seed=2)
    shown, n_shown = top_k_matrix(scores, offsets, k)
    qidx = np.repeat(np.arange(30), np.diff(offsets))
    assert (qidx[log.doc] == log.query).all()
    assert (log.session_query[log.session] == log.query).all()
    counts = np.bincount(log.session, minlength=log.n_sessions)
    np.testing.assert_array_equal(counts, n_shown[log.session_query])
    # The production ranking is recovered from logged_rank in every session.
    np.testing.assert_array_equal(shown[log.query, log.logged_rank - 1], log.doc)
    mode = log.session_mode[log.session]
    prod = mode == MODE_PRODUCTION
    np.testing.assert_array_equal(log.position[prod], log.logged_rank[prod])
    sw = mode == MODE_SWAP
    kk = log.session_swap[log.session[sw]]
    moved = np.where(log.logged_rank[sw] == 1, kk, np.where(log.logged_rank[sw] == kk, 1, log.logged_rank[sw]))
    np.testing.assert_array_equal(log.position[sw], moved)
    assert set(np.unique(log.session_swap[log.session_mode == MODE_SWAP])) == set(range(1, k + 1))
    # Shares of each mode are close to the requested fractions (binomial SE over 1500 sessions).
    share = np.bincount(log.session_mode, minlength=3) / log.n_sessions
    assert abs(share[MODE_RANDOMIZED] - 0.3) < 5 * np.sqrt(0.21 / log.n_sessions)
    assert abs(share[MODE_SWAP] - 0.3) < 5 * np.sqrt(0.21 / log.n_sessions)
    # Randomized sessions show a permutation of the same top-k set.
    rnd = np.flatnonzero(log.session_mode == MODE_RANDOMIZED)[:20]
    for s in rnd:
        docs = log.doc[log.session == s]
        q = log.session_query[s]
        assert sorted(docs) == sorted(shown[q, : n_shown[q]])


def test_seed_determinism_and_round_trip(tmp_path):
    labels, offsets, scores = _toy(n_queries=10)
    a = simulate_clicks(labels, offsets, scores, sessions_per_query=20, randomize_fraction=0.5, seed=7)
    b = simulate_clicks(labels, offsets, scores, sessions_per_query=20, randomize_fraction=0.5, seed=7)
    c = simulate_clicks(labels, offsets, scores, sessions_per_query=20, randomize_fraction=0.5, seed=8)
    np.testing.assert_array_equal(a.click, b.click)
    np.testing.assert_array_equal(a.doc, b.doc)
    assert not np.array_equal(a.click, c.click)
    path = tmp_path / "log.npz"
    a.save(path)
    back = ClickLog.load(path)
    for name in ClickLog._ENTRY + ClickLog._SESSION:
        np.testing.assert_array_equal(getattr(back, name), getattr(a, name))
    assert back.meta == a.meta and back.meta["randomize_fraction"] == 0.5
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(LtrError, match="not a click log"):
        ClickLog.load(tmp_path / "other.npz")


def test_bad_arguments_are_user_errors():
    labels, offsets, scores = _toy(n_queries=3)
    with pytest.raises(LtrError, match="click model"):
        simulate_clicks(labels, offsets, scores, model="dcm")
    with pytest.raises(LtrError, match="must not exceed 1"):
        simulate_clicks(labels, offsets, scores, randomize_fraction=0.7, swap_fraction=0.7)
    with pytest.raises(LtrError, match="examination curve"):
        simulate_clicks(labels, offsets, scores, top_k=5, examination=[1.0, 0.5])
