"""Query shares: cutting a data set's queries into contiguous parts of about equal rows.

Distributed neural training gives each process one share of every batch and of the evaluation sets;
LightGBM on Dask cuts its partitions the same way, so a query is never split between workers.
"""

from __future__ import annotations

import numpy as np

__all__ = ["query_shares"]


def query_shares(query_offsets: np.ndarray, world_size: int) -> np.ndarray:
    """Cut the queries into ``world_size`` contiguous shares of about equal rows; [W + 1] query bounds.

    >>> query_shares(np.array([0, 5, 6, 7, 12]), 2).tolist()   # rows 0..6 and 6..12
    [0, 2, 4]
    """
    offsets = np.asarray(query_offsets, dtype=np.int64)
    targets = offsets[-1] * np.arange(1, world_size) / world_size
    cuts = np.searchsorted(offsets, targets, side="left")
    return np.concatenate([[0], np.clip(cuts, 0, len(offsets) - 1), [len(offsets) - 1]]).astype(np.int64)
