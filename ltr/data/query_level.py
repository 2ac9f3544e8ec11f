"""Are a data set's features already min-max normalised within each query (LETOR's QueryLevelNorm)?

LETOR 4.0 publishes MQ2008 and MQ2007 with every feature rescaled per query,
``x' = (x - min_q x) / (max_q x - min_q x)``, which erases each feature's level between queries and
keeps only where a document stands among the query's others. On such data the defaults study
(docs/experiments.md, "0.4: per-query z-scores on data normalised per query") found that a per-query
z-score inside the scorer gains over the global input transform alone, and on data that is not
normalised per query it loses; ``query_norm = "auto"`` uses :func:`check_query_minmax` to tell the two apart
from the training split alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["QueryMinMaxCheck", "check_query_minmax", "SAMPLE_QUERIES", "QUERY_SHARE", "FEATURE_SHARE", "TOLERANCE",
           "MAX_ROWS", "BLOCK_ROWS"]

#: at most this many queries (evenly spaced over the data set) are read: a store larger than RAM is never loaded whole
SAMPLE_QUERIES = 2000
#: a feature is min-max normalised per query when its minimum is 0 and its maximum 1 in this share of the queries where it varies
QUERY_SHARE = 0.99
#: the data set is normalised per query when this share of its checked features are
FEATURE_SHARE = 0.9
#: |min| and |max - 1| below this count as 0 and 1 (LETOR prints six decimals)
TOLERANCE = 1e-6
#: rows read at most (about): fewer queries are read when their mean length would exceed it
MAX_ROWS = 500_000
#: rows held in memory at once (as float64)
BLOCK_ROWS = 16_384


@dataclass(frozen=True)
class QueryMinMaxCheck:
    """What :func:`check_query_minmax` found: the verdict and the counts behind it."""

    normalised: bool
    queries_read: int
    features_checked: int  # varying somewhere and not binary
    features_minmax: int  # of those, at 0 and 1 in at least QUERY_SHARE of the queries where they vary

    def as_dict(self) -> dict:
        return asdict(self)


def check_query_minmax(features, query_offsets, *, sample_queries: int = SAMPLE_QUERIES,
                       block_rows: int = BLOCK_ROWS) -> QueryMinMaxCheck:
    """Whether ``features`` [N, F] (an array or a memory-mapped store's) look min-max normalised per query.

    For each feature f and each read query q where f varies, the query passes when
    ``|min_q f| <= tol`` and ``|max_q f - 1| <= tol``. Feature f is min-max normalised when at least
    ``QUERY_SHARE`` (99%) of those queries pass. Features that never vary in a read query, and
    binary ones (every value 0 or 1, which pass the test whatever the data's scaling), are not
    checked. The data set is normalised when at least ``FEATURE_SHARE`` (90%) of the checked features
    are, and at least one feature was checked. At most ``sample_queries`` queries, evenly spaced, are
    read (fewer when they would hold more than ``MAX_ROWS`` rows), ``block_rows`` rows at a time.

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
    picked = _pick_queries(offsets, int(sample_queries))
    n_features = int(features.shape[1]) if picked.size else 0
    varies_in = np.zeros(n_features, dtype=np.int64)  # queries where the feature varies
    at_ends_in = np.zeros(n_features, dtype=np.int64)  # ... and spans exactly [0, 1]
    binary = np.ones(n_features, dtype=bool)
    for x, starts in _blocks(features, offsets, picked, block_rows):
        low = np.minimum.reduceat(x, starts, axis=0)
        high = np.maximum.reduceat(x, starts, axis=0)
        varies = high > low
        varies_in += varies.sum(axis=0)
        at_ends_in += (varies & (np.abs(low) <= TOLERANCE) & (np.abs(high - 1.0) <= TOLERANCE)).sum(axis=0)
        binary &= np.all((x == 0.0) | (x == 1.0), axis=0)
    checked = (varies_in > 0) & ~binary
    passing = at_ends_in >= QUERY_SHARE * varies_in
    n_checked, n_minmax = int(checked.sum()), int((checked & passing).sum())
    normalised = n_checked > 0 and n_minmax >= FEATURE_SHARE * n_checked
    return QueryMinMaxCheck(bool(normalised), int(picked.size), n_checked, n_minmax)


def _pick_queries(offsets: np.ndarray, sample_queries: int) -> np.ndarray:
    """Evenly spaced non-empty queries: at most ``sample_queries``, and about ``MAX_ROWS`` rows at most."""
    lengths = np.diff(offsets)
    n_queries = lengths.size
    if n_queries == 0 or offsets[-1] == 0:
        return np.zeros(0, dtype=np.int64)
    mean_length = offsets[-1] / n_queries
    n_pick = max(1, min(n_queries, sample_queries, int(MAX_ROWS // mean_length)))
    picked = np.unique(np.linspace(0, n_queries - 1, n_pick).round().astype(np.int64))
    return picked[lengths[picked] > 0]


def _blocks(features, offsets: np.ndarray, picked: np.ndarray, block_rows: int):
    """``(rows [M, F] float64, each query's first row in them)`` for consecutive groups of the ``picked``
    queries of about ``block_rows`` rows (a longer query makes a block of its own)."""
    from ltr.data.dataset import query_rows
    from ltr.data.store import is_mapped, release_pages

    mapped = is_mapped(features)
    lengths = offsets[picked + 1] - offsets[picked]
    group = np.cumsum(lengths) // max(1, int(block_rows))
    for g in np.unique(group):
        queries, sizes = picked[group == g], lengths[group == g]
        rows = query_rows(offsets, queries)
        block = np.asarray(features[rows], dtype=np.float64).reshape(rows.size, -1)
        if mapped:  # a store's pages go back after each gather: the resident set holds one block
            release_pages(features)
        yield block, np.cumsum(sizes) - sizes
