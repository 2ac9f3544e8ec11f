"""IPS / SNIPS estimators: exact expectations on enumerable cases, consistency, clipping bias.

The exact tests enumerate every click outcome of a small logging policy with its probability and
take the probability-weighted sum of the estimator; under the position-based and cascade models
the IPS expectation must equal sum_i a_i d(rank_new(i)) to 1e-12.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.simulate.click_models import attraction, pbm_examination, simulate_clicks
from ltr.clicks.estimators.ips import (
    click_dcg,
    expected_click_dcg,
    inverse_propensity_weights,
    logged_support,
    ranks_within_queries,
)
from ltr.clicks.propensities.interventions import propensities_from_curve
from ltr.base.errors import LtrError
from metrics.discounts import discount_values

# One query, five items. Labels in row order; the logger and the new ranker score them differently.
LABELS = np.array([2.0, 0.0, 1.0, 3.0, 1.0])
OFFSETS = np.array([0, 5])
A = attraction(LABELS, max_label=3, eps=0.1)
NEW_SCORES = np.array([0.3, 0.1, 0.2, 0.9, 0.25])  # new ranking: rows 3, 0, 4, 2, 1


def _session_log(order, clicks, propensity):
    """A one-session log showing rows ``order`` with the given clicks and propensities."""
    n = len(order)
    z = np.zeros(n, dtype=np.int64)
    return ClickLog(
        session=z, query=z, doc=np.asarray(order, dtype=np.int64), position=np.arange(1, n + 1),
        logged_rank=np.arange(1, n + 1), click=np.asarray(clicks, dtype=np.int8),
        propensity=np.asarray(propensity, dtype=np.float64),
        session_query=np.zeros(1, np.int64), session_mode=np.zeros(1, np.int8), session_swap=np.zeros(1, np.int64),
    )


def _pbm_expectation(orders, order_probs, theta, estimator, k, clip=None, discount="log2"):
    """E[estimator] under a stochastic logger (orders with probabilities) and PBM clicks."""
    total = 0.0
    for order, q in zip(orders, order_probs):
        p_click = theta[: len(order)] * A[order]
        for clicks in itertools.product((0, 1), repeat=len(order)):
            c = np.array(clicks)
            prob = q * np.prod(np.where(c == 1, p_click, 1 - p_click))
            log = _session_log(order, c, theta[: len(order)])
            value = click_dcg(log, NEW_SCORES, OFFSETS, estimator=estimator, k=k, clip=clip, discount=discount)[0]
            total += prob * (0.0 if np.isnan(value) else value)
    return total


@pytest.mark.parametrize("k", [None, 3])
def test_ips_is_exactly_unbiased_under_pbm(k):
    theta = pbm_examination(5, 1.0)
    orders = [np.array([0, 1, 2, 3, 4]), np.array([3, 2, 1, 0, 4])]  # a two-ranking logging policy
    expected = _pbm_expectation(orders, [0.7, 0.3], theta, "ips", k)
    truth = expected_click_dcg(NEW_SCORES, A, OFFSETS, k=k)[0]
    # Hand value of the target for k=None: ranks of rows 0..4 under NEW_SCORES are 2, 5, 4, 1, 3.
    d = 1 / np.log2(np.array([2, 5, 4, 1, 3]) + 1)
    if k is None:
        assert truth == pytest.approx((A * d).sum(), abs=1e-15)
    assert abs(expected - truth) < 1e-12


def test_ips_with_user_discount_is_unbiased():
    theta = pbm_examination(5, 0.7)
    discount = lambda r: 1.0 / r  # noqa: E731 (a user examination curve)
    expected = _pbm_expectation([np.array([4, 3, 2, 1, 0])], [1.0], theta, "ips", None, discount=discount)
    truth = expected_click_dcg(NEW_SCORES, A, OFFSETS, k=None, discount=discount)[0]
    assert abs(expected - truth) < 1e-12


def test_naive_is_biased_by_the_logging_positions():
    # E[naive] = sum_i theta_{pos(i)} a_i d(rank_new(i)): the logger's examination leaks in.
    theta = pbm_examination(5, 1.0)
    order = np.array([0, 1, 2, 3, 4])
    expected = _pbm_expectation([order], [1.0], theta, "naive", None)
    d = discount_values(ranks_within_queries(NEW_SCORES, OFFSETS))
    pos = np.empty(5, dtype=int)
    pos[order] = np.arange(5)
    assert abs(expected - (theta[pos] * A * d).sum()) < 1e-12
    assert expected < expected_click_dcg(NEW_SCORES, A, OFFSETS, k=None)[0] - 0.3


def test_clipping_bias_is_exact():
    # With clip tau the weight is 1/max(p, tau): E = sum_i a_i d_i min(1, p_i / tau).
    theta = pbm_examination(5, 1.0)
    order = np.array([0, 1, 2, 3, 4])
    tau = 0.3
    expected = _pbm_expectation([order], [1.0], theta, "ips", None, clip=tau)
    d = discount_values(ranks_within_queries(NEW_SCORES, OFFSETS))
    pos = np.empty(5, dtype=int)
    pos[order] = np.arange(5)
    target = (A * d * np.minimum(1.0, theta[pos] / tau)).sum()
    assert abs(expected - target) < 1e-12
    assert target < expected_click_dcg(NEW_SCORES, A, OFFSETS, k=None)[0]


def test_ips_is_exactly_unbiased_under_cascade():
    # Outcomes: the first click at position j (prob a_j prod_{i<j}(1-a_i)) or no click at all.
    order = np.array([2, 0, 4, 1, 3])
    a = A[order]
    exam = np.concatenate([[1.0], np.cumprod(1 - a)[:-1]])
    total = 0.0
    for j in range(6):
        clicks = np.zeros(5, dtype=int)
        if j < 5:
            clicks[j] = 1
            prob = a[j] * exam[j]
        else:
            prob = np.prod(1 - a)
        log = _session_log(order, clicks, exam)
        total += prob * click_dcg(log, NEW_SCORES, OFFSETS, estimator="ips", k=None)[0]
    assert abs(total - expected_click_dcg(NEW_SCORES, A, OFFSETS, k=None)[0]) < 1e-12


def test_ranks_within_queries_against_per_query_sort():
    rng = np.random.default_rng(0)
    offsets = np.array([0, 7, 7, 20, 21])
    scores = rng.integers(0, 4, 21).astype(float)  # many ties: input order breaks them
    ranks = ranks_within_queries(scores, offsets)
    for q in range(4):
        s = scores[offsets[q]:offsets[q + 1]]
        order = np.argsort(-s, kind="stable")
        expected = np.empty(len(s), dtype=int)
        expected[order] = np.arange(1, len(s) + 1)
        np.testing.assert_array_equal(ranks[offsets[q]:offsets[q + 1]], expected)


@pytest.fixture(scope="module")
def simulated():
    rng = np.random.default_rng(3)
    lengths = rng.integers(5, 12, 60)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(np.float64)
    logger = labels + rng.normal(0, 2.0, offsets[-1])
    new = labels + rng.normal(0, 1.0, offsets[-1])
    a = attraction(labels, max_label=4, eps=0.1)
    return labels, offsets, logger, new, a


def test_snips_is_consistent(simulated):
    labels, offsets, logger, new, a = simulated
    target = expected_click_dcg(new, a, offsets, k=None, normalize=True)
    errors = []
    for spq in (20, 2000):
        log = simulate_clicks(labels, offsets, logger, eta=1.0, top_k=None, sessions_per_query=spq, seed=spq)
        est = click_dcg(log, new, offsets, estimator="snips", k=None)
        errors.append(np.nanmean(np.abs(est - target)))
    # Error shrinks roughly like 1/sqrt(n): 100x the sessions, well under half the error.
    assert errors[1] < 0.3 * errors[0]
    assert errors[1] < 0.02


def test_ips_mean_over_queries_within_standard_error(simulated):
    labels, offsets, logger, new, a = simulated
    log = simulate_clicks(labels, offsets, logger, eta=1.0, top_k=None, sessions_per_query=400, seed=9)
    # Per-session IPS values give the standard error of the mean over all sessions.
    est = click_dcg(log, new, offsets, estimator="ips", k=5)
    truth = expected_click_dcg(new, a, offsets, k=5)
    ranks = ranks_within_queries(new, offsets)
    contrib = log.click * discount_values(ranks[log.doc], k=5) / log.propensity
    per_session = np.bincount(log.session, weights=contrib, minlength=log.n_sessions)
    se = per_session.std(ddof=1) / np.sqrt(log.n_sessions)
    assert abs(est.mean() - truth.mean()) < 4 * se
    naive = click_dcg(log, new, offsets, estimator="naive", k=5)
    assert naive.mean() < truth.mean() - 10 * se  # the naive estimate is far off


def test_snips_invariant_to_propensity_scale_ips_is_not(simulated):
    labels, offsets, logger, new, a = simulated
    log = simulate_clicks(labels, offsets, logger, eta=1.0, top_k=6, sessions_per_query=30, seed=1)
    curve = pbm_examination(6, 1.0)
    base_s = click_dcg(log, new, offsets, estimator="snips", propensity=propensities_from_curve(log, curve))
    half_s = click_dcg(log, new, offsets, estimator="snips", propensity=propensities_from_curve(log, curve / 2))
    np.testing.assert_allclose(base_s, half_s, rtol=1e-12)
    base_i = click_dcg(log, new, offsets, estimator="ips", propensity=propensities_from_curve(log, curve))
    half_i = click_dcg(log, new, offsets, estimator="ips", propensity=propensities_from_curve(log, curve / 2))
    np.testing.assert_allclose(half_i, 2 * base_i, rtol=1e-12)
    # Logged propensities are the curve itself here.
    np.testing.assert_allclose(click_dcg(log, new, offsets, estimator="ips"), base_i, rtol=1e-12)


def test_support_and_errors(simulated):
    labels, offsets, logger, new, a = simulated
    log = simulate_clicks(labels, offsets, logger, top_k=3, sessions_per_query=2, seed=0)
    support = logged_support(log, len(labels))
    assert support.sum() == 3 * (len(offsets) - 1)
    full = expected_click_dcg(new, a, offsets, k=None)
    part = expected_click_dcg(new, a, offsets, k=None, support=support)
    assert np.all(part < full)
    with pytest.raises(LtrError, match="beyond the data set"):
        click_dcg(log, new[:10], np.array([0, 10]))  # a one-query data set of 10 rows
    with pytest.raises(LtrError, match="estimator"):
        click_dcg(log, new, offsets, estimator="dr")
    with pytest.raises(LtrError, match="clip"):
        inverse_propensity_weights(np.array([0.5]), clip=0.0)
    zero = log.propensity.copy()
    zero[log.click == 1] = 0.0
    with pytest.raises(LtrError, match="propensity 0"):
        click_dcg(log, new, offsets, propensity=zero)
