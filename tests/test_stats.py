"""metrics.stats against scipy.stats on fixed inputs, and Holm against a hand computation."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import stats

from metrics.stats import (
    bootstrap_ci,
    bootstrap_means,
    holm,
    normal_interval,
    paired_bootstrap_test,
    paired_t_test,
    t_interval,
)

# Fixed inputs: per-query NDCG-like values of two systems (written out, not generated).
A = np.array([0.61, 0.42, 0.88, 0.35, 0.72, 0.55, 0.91, 0.47, 0.66, 0.59, 0.30, 0.77])
B = np.array([0.58, 0.40, 0.80, 0.37, 0.65, 0.50, 0.90, 0.41, 0.60, 0.61, 0.22, 0.70])


def SEED(seed):  # noqa: N802  scipy.stats.bootstrap's generator: rng= from scipy 1.15, random_state= before
    name = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return {name: np.random.default_rng(seed)}


def test_percentile_bootstrap_equals_scipy_exactly_with_same_seed_and_batch():
    for batch in (None, 500):
        ours = bootstrap_ci(A, n_resamples=2000, seed=7, batch=batch, confidence=0.9)
        ref = stats.bootstrap((A,), np.mean, n_resamples=2000, batch=batch, method="percentile",
                              confidence_level=0.9, **SEED(7))
        assert ours.low == pytest.approx(ref.confidence_interval.low, abs=1e-12)
        assert ours.high == pytest.approx(ref.confidence_interval.high, abs=1e-12)
        boot = bootstrap_means(A, 2000, seed=7, batch=batch)
        np.testing.assert_allclose(boot, ref.bootstrap_distribution, atol=1e-12)


def test_bca_and_basic_delegate_to_scipy():
    for method in ("BCa", "basic"):
        ours = bootstrap_ci(A, n_resamples=999, seed=3, method=method)
        ref = stats.bootstrap((A,), np.mean, n_resamples=999, batch=1000, method=method, **SEED(3))
        assert ours.low == pytest.approx(ref.confidence_interval.low, abs=1e-12)
        assert ours.high == pytest.approx(ref.confidence_interval.high, abs=1e-12)
    with pytest.raises(ValueError, match="unknown bootstrap method"):
        bootstrap_ci(A, method="studentized")


def test_bootstrap_ci_drops_nan_and_is_seeded():
    with_nan = np.concatenate([A, [np.nan, np.nan]])
    assert bootstrap_ci(with_nan, seed=1) == bootstrap_ci(A, seed=1)
    assert bootstrap_ci(A, seed=1).low != bootstrap_ci(A, seed=2).low
    assert bootstrap_ci(A).n == 12
    one = bootstrap_ci([0.4])
    assert (one.low, one.mean, one.high) == (0.4, 0.4, 0.4)


def test_t_interval_equals_scipy_t_interval():
    for conf in (0.9, 0.95, 0.99):
        ours = t_interval(A, confidence=conf)
        lo, hi = stats.t.interval(conf, len(A) - 1, loc=A.mean(), scale=stats.sem(A))
        assert ours.low == pytest.approx(lo, abs=1e-12)
        assert ours.high == pytest.approx(hi, abs=1e-12)
    # five seeds: hand computation with t_{0.975, 4} = 2.7764451051977987
    seeds = np.array([0.70, 0.72, 0.69, 0.71, 0.73])
    half = 2.7764451051977987 * seeds.std(ddof=1) / np.sqrt(5)
    ci = t_interval(seeds)
    assert ci.low == pytest.approx(0.71 - half, abs=1e-12) and ci.high == pytest.approx(0.71 + half, abs=1e-12)
    assert np.isnan(t_interval([0.5]).low) and t_interval([0.5]).mean == 0.5


def test_normal_interval_equals_scipy_norm_interval_and_broadcasts():
    center = np.array([[0.2, 0.5, 1.3], [-0.4, 0.0, 2.0]])
    se = np.array([0.05, 0.002, 0.31])   # broadcast over the rows
    for conf in (0.8, 0.95, 0.99):
        low, high = normal_interval(center, se, confidence=conf)
        lo, hi = stats.norm.interval(conf, loc=center, scale=np.broadcast_to(se, center.shape))
        assert low.shape == high.shape == (2, 3)
        np.testing.assert_allclose(low, lo, rtol=0, atol=1e-12)
        np.testing.assert_allclose(high, hi, rtol=0, atol=1e-12)
    low, high = normal_interval(center, 0.0)   # se = 0 gives a point (scipy needs scale > 0)
    assert np.array_equal(low, center) and np.array_equal(high, center)
    # scalars; 1.959963984540054 is z_{0.975}; NaN spreads to the bounds
    low, high = normal_interval(0.5, 0.1)
    assert low == pytest.approx(0.5 - 0.1959963984540054, abs=1e-15)
    assert high == pytest.approx(0.5 + 0.1959963984540054, abs=1e-15)
    assert np.isnan(normal_interval(np.nan, 0.1)[0]) and np.isnan(normal_interval(0.5, np.nan)[1])
    with pytest.raises(ValueError, match="confidence"):
        normal_interval(0.5, 0.1, confidence=1.0)


def test_paired_t_test_equals_ttest_rel_and_drops_nan_pairs():
    ours = paired_t_test(A, B)
    ref = stats.ttest_rel(A, B)
    assert ours.statistic == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    assert ours.mean_difference == pytest.approx((A - B).mean(), abs=1e-15)
    a = A.copy()
    b = B.copy()
    a[2] = np.nan
    b[5] = np.nan
    ours = paired_t_test(a, b)
    ref = stats.ttest_rel(a, b, nan_policy="omit")
    keep = [i for i in range(len(A)) if i not in (2, 5)]
    ref2 = stats.ttest_rel(A[keep], B[keep])
    assert ours.n == 10
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12) == pytest.approx(ref2.pvalue, abs=1e-12)


def test_paired_t_test_degenerate_differences():
    same = paired_t_test(A, A)
    assert (same.statistic, same.p_value) == (0.0, 1.0)  # scipy would give NaN here
    shifted = paired_t_test(np.arange(6.0) + 1.0, np.arange(6.0))  # d = 1 exactly
    assert shifted.statistic == np.inf and shifted.p_value == 0.0
    with pytest.raises(ValueError, match="equal lengths"):
        paired_t_test(A, B[:-1])


def test_paired_bootstrap_agrees_with_t_test_on_large_normal_sample():
    rng = np.random.default_rng(0)
    a = rng.normal(0.5, 0.2, 400)
    b = a - rng.normal(0.02, 0.15, 400)
    boot = paired_bootstrap_test(a, b, n_resamples=20_000, seed=0)
    t = paired_t_test(a, b)
    # the two tests estimate the same tail probability; Monte Carlo error ~ sqrt(p(1-p)/20000)
    assert abs(boot.p_value - t.p_value) < 0.015
    assert boot.mean_difference == pytest.approx(t.mean_difference)


def test_paired_bootstrap_p_value_bounds_and_seed():
    big = paired_bootstrap_test(A + 0.3, A - 0.01 * np.arange(12), n_resamples=999, seed=1)
    assert big.p_value == pytest.approx(1 / 1000)  # only the observed sample is as extreme
    same = paired_bootstrap_test(A, A)
    assert same.p_value == 1.0
    r1 = paired_bootstrap_test(A, B, seed=4)
    assert r1 == paired_bootstrap_test(A, B, seed=4)
    assert 0.0 < r1.p_value <= 1.0


def test_holm_matches_hand_computation():
    p = np.array([0.010, 0.040, 0.030, 0.005, 0.200])
    # sorted: 0.005 (x5=0.025), 0.010 (x4=0.040), 0.030 (x3=0.090), 0.040 (x2=0.080 -> max 0.090),
    # 0.200 (x1=0.200)
    expected = np.array([0.040, 0.090, 0.090, 0.025, 0.200])
    np.testing.assert_allclose(holm(p), expected, atol=1e-15)
    adj = holm(p)
    assert np.all(adj >= p)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= 0)


def test_holm_caps_at_one_and_keeps_nan():
    adj = holm([0.7, np.nan, 0.6])  # m = 2: min(1, 2 * 0.6) = 1, then max(1, 0.7) = 1
    assert np.isnan(adj[1])
    np.testing.assert_allclose(adj[[0, 2]], [1.0, 1.0])
    np.testing.assert_allclose(holm([0.45, 0.3, 0.6]), [0.9, 0.9, 0.9])
    with pytest.raises(ValueError):
        holm([1.2])
