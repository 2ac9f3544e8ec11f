"""metrics.averaging: micro / macro / cohorts against hand computations and a plain-loop oracle."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.averaging import (
    activity_cohorts,
    averages_by_cohort,
    macro_average,
    micro_average,
    per_user_means,
)
from metrics.stats import bootstrap_ci


def test_hand_example_micro_vs_macro():
    # user 1: three queries at 0.9; users 2 and 3 (newcomers): one query each at 0.3
    values = [0.9, 0.9, 0.9, 0.3, 0.3]
    users = [1, 1, 1, 2, 3]
    assert micro_average(values) == pytest.approx((3 * 0.9 + 2 * 0.3) / 5)
    assert macro_average(values, users) == pytest.approx((0.9 + 0.3 + 0.3) / 3)


def test_nan_queries_and_all_nan_users_are_skipped():
    values = [0.8, np.nan, 0.4, np.nan]
    users = ["u", "u", "v", "w"]  # w has only a NaN query
    assert micro_average(values) == pytest.approx(0.6)
    assert macro_average(values, users) == pytest.approx((0.8 + 0.4) / 2)
    users_sorted, means, counts = per_user_means(values, users)
    assert users_sorted.tolist() == ["u", "v", "w"]
    assert counts.tolist() == [1, 1, 0] and np.isnan(means[2])
    assert np.isnan(micro_average([np.nan]))


def test_vectorised_means_equal_a_plain_loop():
    rng = np.random.default_rng(5)
    users = rng.integers(0, 300, 5000)
    values = rng.random(5000)
    values[rng.random(5000) < 0.05] = np.nan
    per_user: dict[int, list[float]] = {}
    for u, v in zip(users.tolist(), values.tolist()):
        if not np.isnan(v):
            per_user.setdefault(u, []).append(v)
    expected = np.mean([np.mean(vs) for vs in per_user.values()])
    assert macro_average(values, users) == pytest.approx(expected, rel=1e-12)
    assert micro_average(values) == pytest.approx(np.nanmean(values), rel=1e-12)


def test_macro_equals_micro_when_every_user_has_one_query():
    rng = np.random.default_rng(1)
    v = rng.random(50)
    assert macro_average(v, np.arange(50)) == pytest.approx(micro_average(v), rel=1e-12)


def test_activity_cohorts_and_cohort_table():
    users = np.array([1, 1, 1, 2, 3, 4, 4])
    values = np.array([0.9, 0.8, 0.7, 0.2, 0.4, 0.6, 0.6])
    cohorts = activity_cohorts(users)
    assert cohorts.tolist() == ["active"] * 3 + ["newcomer"] * 2 + ["active"] * 2
    assert activity_cohorts(users, newcomer_max_queries=2).tolist()[-1] == "newcomer"
    table = averages_by_cohort(values, users, cohorts, n_resamples=500, seed=2)
    assert list(table) == ["all", "active", "newcomer"]
    assert table["newcomer"].micro.mean == pytest.approx(0.3)
    assert table["newcomer"].n_users == 2 and table["active"].n_queries == 5
    assert table["active"].macro.mean == pytest.approx((0.8 + 0.6) / 2)
    assert table["all"].macro.mean == pytest.approx((0.8 + 0.2 + 0.4 + 0.6) / 4)
    for row in table.values():
        for ci in (row.micro, row.macro):
            assert ci.low <= ci.mean <= ci.high
    # the macro interval resamples users: the same as a bootstrap of the per-user means
    _, means, _ = per_user_means(values, users)
    assert table["all"].macro == bootstrap_ci(means, n_resamples=500, seed=2)


def test_shape_errors():
    with pytest.raises(ValueError):
        macro_average([0.1, 0.2], [1])
    with pytest.raises(ValueError):
        averages_by_cohort([0.1, 0.2], [1, 2], cohorts=["a"])
