"""A click log reduced to (item, position) observations: impressions and clicks per shown cell.

What the EM propensity estimators (:mod:`ltr.clicks.propensities.regression_em`) fit, and what a
streamed log's per-cell sums (:meth:`ltr.clicks.logs.stream.LogAggregate.observations`) give without
the log held in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.base.errors import LtrError

__all__ = ["Observations", "observations_from_log"]


@dataclass
class Observations:
    """``item`` [O] (row index), ``position`` [O] (1-based), ``n`` [O] impressions, ``clicks`` [O] (float)."""

    item: np.ndarray
    position: np.ndarray
    n: np.ndarray
    clicks: np.ndarray
    query: np.ndarray | None = None

    def subset(self, rows: np.ndarray) -> "Observations":
        q = None if self.query is None else self.query[rows]
        return Observations(self.item[rows], self.position[rows], self.n[rows], self.clicks[rows], q)


def observations_from_log(log: ClickLog) -> Observations:
    """Aggregate a log into (item, position) observations with impression and click counts."""
    if log.n_entries == 0:
        raise LtrError("the click log is empty")
    k = int(log.position.max())
    key = log.doc * k + (log.position - 1)
    uniq, inverse = np.unique(key, return_inverse=True)
    n = np.bincount(inverse).astype(np.float64)
    clicks = np.bincount(inverse, weights=log.click.astype(np.float64))
    query = np.zeros(len(uniq), dtype=np.int64)
    query[inverse] = log.query
    return Observations(uniq // k, uniq % k + 1, n, clicks, query)
