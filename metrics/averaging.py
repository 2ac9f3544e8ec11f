"""Micro and macro averages of per-query metric values, overall and by user cohort.

- micro: the mean over queries, ``sum_q v_q / Q``. Heavy users weigh in proportion to their
  number of queries.
- macro: the mean over users of each user's mean, ``(1/U) sum_u (1/Q_u) sum_{q in u} v_q``. Every
  user weighs the same, so a cohort that is small in queries but large in users (newcomers with one
  query each) moves it much more than it moves the micro average.

NaN policy: a query whose value is NaN (for example no relevant item under ``empty=skip``) is left
out of both averages; a user all of whose queries are NaN has no mean and is left out of the macro
average. Cohorts are assigned on *all* of a user's queries (activity is behaviour, not evaluation).

Everything is vectorised (``np.unique(..., return_inverse=True)`` and ``np.bincount``); user ids
may be integers or strings. Confidence intervals are percentile bootstraps from
:func:`metrics.stats.bootstrap_ci`: over queries for micro, over users for macro (the user is the
sampling unit of a macro average).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metrics.stats import ConfidenceInterval, bootstrap_ci

__all__ = [
    "micro_average",
    "macro_average",
    "per_user_means",
    "activity_cohorts",
    "CohortAverage",
    "averages_by_cohort",
]


def _values_and_users(values, user_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=np.float64)
    u = np.asarray(user_ids)
    if v.ndim != 1 or u.ndim != 1 or v.shape != u.shape:
        raise ValueError(f"values and user_ids must be 1-D of equal length, got {v.shape} and {u.shape}")
    users, inverse = np.unique(u, return_inverse=True)
    return v, users, inverse.reshape(-1)


def micro_average(values) -> float:
    """Mean over queries, NaN left out (NaN if no query has a value).

    >>> micro_average([1.0, 0.0, float("nan"), 0.5])
    0.5
    """
    v = np.asarray(values, dtype=np.float64)
    ok = ~np.isnan(v)
    return float(v[ok].mean()) if ok.any() else float("nan")


def per_user_means(values, user_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each user's mean over its non-NaN queries.

    Returns ``(users, means, counts)``: sorted unique user ids, their means (NaN for a user without
    any non-NaN query) and their numbers of non-NaN queries.

    >>> users, means, counts = per_user_means([1.0, 0.0, 0.5, float("nan")], ["b", "a", "a", "c"])
    >>> users.tolist(), means.tolist(), counts.tolist()
    (['a', 'b', 'c'], [0.25, 1.0, nan], [2, 1, 0])
    """
    v, users, inv = _values_and_users(values, user_ids)
    ok = ~np.isnan(v)
    counts = np.bincount(inv[ok], minlength=users.shape[0])
    sums = np.bincount(inv[ok], weights=v[ok], minlength=users.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return users, means, counts


def macro_average(values, user_ids) -> float:
    """Mean over users of each user's mean (users without a non-NaN query left out).

    >>> macro_average([1.0, 0.0, 0.5], ["b", "a", "a"])   # (1.0 + 0.25) / 2
    0.625
    """
    _, means, _ = per_user_means(values, user_ids)
    return micro_average(means)


def activity_cohorts(user_ids, *, newcomer_max_queries: int = 1, names=("newcomer", "active")) -> np.ndarray:
    """Per-query cohort label from the user's number of queries (all queries, NaN or not).

    A user with at most ``newcomer_max_queries`` queries is a newcomer, others are active.

    >>> activity_cohorts([7, 3, 7, 9]).tolist()
    ['active', 'newcomer', 'active', 'newcomer']
    """
    u = np.asarray(user_ids)
    _, inv, counts = np.unique(u, return_inverse=True, return_counts=True)
    per_query = counts[inv.reshape(-1)]
    return np.where(per_query <= newcomer_max_queries, names[0], names[1])


@dataclass(frozen=True)
class CohortAverage:
    """Micro and macro averages of one cohort, with bootstrap intervals and sizes."""

    cohort: str
    micro: ConfidenceInterval
    macro: ConfidenceInterval
    n_queries: int
    n_users: int

    def as_dict(self) -> dict:
        return {"cohort": self.cohort, "micro": self.micro.as_dict(), "macro": self.macro.as_dict(),
                "n_queries": self.n_queries, "n_users": self.n_users}


def averages_by_cohort(values, user_ids, cohorts=None, *, confidence: float = 0.95, n_resamples: int = 2000,
                       seed: int = 0) -> dict[str, CohortAverage]:
    """Micro and macro averages (with bootstrap CIs) for all queries and for each cohort.

    ``cohorts``: per-query labels (for example :func:`activity_cohorts`), or None for only ``"all"``.
    A user whose queries span several cohorts counts in each, with the queries of that cohort.
    The key ``"all"`` is always present; cohorts follow in sorted order.

    >>> r = averages_by_cohort([1.0, 0.0, 0.5], ["b", "a", "a"], n_resamples=200)
    >>> r["all"].micro.mean, r["all"].macro.mean, r["all"].n_users
    (0.5, 0.625, 2)
    """
    v, _, _ = _values_and_users(values, user_ids)
    u = np.asarray(user_ids)
    groups: dict[str, np.ndarray] = {"all": np.ones(v.shape[0], dtype=bool)}
    if cohorts is not None:
        c = np.asarray(cohorts)
        if c.shape != v.shape:
            raise ValueError(f"cohorts must have one label per query, got {c.shape} for {v.shape}")
        for name in np.unique(c):
            groups[str(name)] = c == name
    out: dict[str, CohortAverage] = {}
    for name, sel in groups.items():
        vv, uu = v[sel], u[sel]
        _, means, counts = per_user_means(vv, uu)
        micro = bootstrap_ci(vv, confidence=confidence, n_resamples=n_resamples, seed=seed)
        macro = bootstrap_ci(means, confidence=confidence, n_resamples=n_resamples, seed=seed)
        out[name] = CohortAverage(name, micro, macro, int(np.count_nonzero(~np.isnan(vv))),
                                  int(np.count_nonzero(counts)))
    return out
