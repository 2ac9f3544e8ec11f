"""Are a data set's features already min-max normalised within each query (LETOR's QueryLevelNorm)?

LETOR 4.0 publishes MQ2008 and MQ2007 with every feature rescaled per query,
``x' = (x - min_q x) / (max_q x - min_q x)``, which erases each feature's level between queries and
keeps only where a document stands among the query's others. On such data the defaults study
(docs/experiments.md, "Per-query z-scores on data normalised per query") found that a per-query
z-score inside the scorer gains over the global input transform alone, and on data that is not
normalised per query it loses; ``query_norm = "auto"`` uses :func:`check_query_minmax` to tell the two apart
from the training split alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["QueryMinMaxCheck", "check_query_minmax", "SAMPLE_QUERIES", "QUERY_SHARE", "FEATURE_SHARE", "TOLERANCE"]

#: at most this many queries (evenly spaced over the data set) are read: a store larger than RAM is never loaded whole
SAMPLE_QUERIES = 2000
#: a feature is min-max normalised per query when its minimum is 0 and its maximum 1 in this share of the queries where it varies
QUERY_SHARE = 0.99
#: the data set is normalised per query when this share of its checked features are
FEATURE_SHARE = 0.9
#: |min| and |max - 1| below this count as 0 and 1 (LETOR prints six decimals)
TOLERANCE = 1e-6


@dataclass(frozen=True)
class QueryMinMaxCheck:
    """What :func:`check_query_minmax` found: the verdict and the counts behind it."""

    normalised: bool
    queries_read: int
    features_checked: int  # varying somewhere and not binary
    features_minmax: int  # of those, at 0 and 1 in at least QUERY_SHARE of the queries where they vary

    def as_dict(self) -> dict:
        return asdict(self)


def check_query_minmax(features, query_offsets, *, sample_queries: int = SAMPLE_QUERIES) -> QueryMinMaxCheck:
    """Whether ``features`` [N, F] (an array or a memory-mapped store's) look min-max normalised per query.

    For each feature f and each read query q where f varies, the query passes when
    ``|min_q f| <= tol`` and ``|max_q f - 1| <= tol``. Feature f is min-max normalised when at least
    ``QUERY_SHARE`` (99%) of those queries pass. Features that never vary in a read query, and
    binary ones (every value 0 or 1, which pass the test whatever the data's scaling), are not
    checked. The data set is normalised when at least ``FEATURE_SHARE`` (90%) of the checked features
    are, and at least one feature was checked. At most ``sample_queries`` queries, evenly spaced, are read.

    >>> offsets = np.array([0, 3, 5])
    >>> per_query = np.array([[0.0, 1.0], [0.5, 0.0], [1.0, 0.25], [1.0, 0.0], [0.0, 1.0]])
    >>> check_query_minmax(per_query, offsets).normalised
    True
    >>> check_query_minmax(per_query * 3 + 1, offsets).normalised
    False
    >>> check_query_minmax(np.array([[0.0], [1.0], [1.0], [0.0], [1.0]]), offsets).features_checked  # binary
    0
    """
    offsets = np.asarray(query_offsets, dtype=np.int64)
    n_queries = offsets.size - 1
    if n_queries <= 0:
        return QueryMinMaxCheck(False, 0, 0, 0)
    picked = np.unique(np.linspace(0, n_queries - 1, min(n_queries, int(sample_queries))).round().astype(np.int64))
    x, starts = _gather(features, offsets, picked)
    if starts.size == 0 or x.shape[1] == 0:
        return QueryMinMaxCheck(False, int(starts.size), 0, 0)
    low = np.minimum.reduceat(x, starts, axis=0)
    high = np.maximum.reduceat(x, starts, axis=0)
    varies = high > low
    at_ends = varies & (np.abs(low) <= TOLERANCE) & (np.abs(high - 1.0) <= TOLERANCE)
    binary = np.all((x == 0.0) | (x == 1.0), axis=0)
    checked = varies.any(axis=0) & ~binary
    passing = at_ends.sum(axis=0) >= QUERY_SHARE * varies.sum(axis=0)
    n_checked, n_minmax = int(checked.sum()), int((checked & passing).sum())
    normalised = n_checked > 0 and n_minmax >= FEATURE_SHARE * n_checked
    return QueryMinMaxCheck(bool(normalised), int(starts.size), n_checked, n_minmax)


def _gather(features, offsets: np.ndarray, picked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the ``picked`` queries as one float64 array, and each query's first row in it."""
    from ltr.data.dataset import query_rows

    lengths = offsets[picked + 1] - offsets[picked]
    picked, lengths = picked[lengths > 0], lengths[lengths > 0]
    rows = query_rows(offsets, picked)
    x = np.asarray(features[rows], dtype=np.float64).reshape(rows.size, -1)
    return x, np.cumsum(lengths) - lengths
