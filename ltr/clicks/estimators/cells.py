"""Training lists from a log's per-cell sums: the corrected clicks of each (document, position) cell.

A streamed log (:func:`ltr.clicks.logs.stream.aggregate_log`) keeps per cell the impressions ``n``, the
clicks and the sum of click / max(p, clip). The estimators whose corrected click is a sum of per-entry
values (``naive``, ``ips``, ``rem``, ``affine``; :func:`ltr.clicks.estimators.unbiased.corrected_clicks`)
need nothing else. Per query q, with ``n_q`` = the largest number of impressions of one position of q (the
number of sessions when every session shows position 1), each document d shown for q gets

    label(q, d)  = max(0, sum_{positions r} v(q, d, r)) / n_q,     weight = n_q

with v the cell's corrected clicks; the documents are ordered by their first shown position. When
every session of a query shows the same items (one shown list per query, as ``ltr clicks simulate``
logs without interventions), this is exactly :func:`ltr.clicks.estimators.unbiased.lists_dataset` of the
log; otherwise it is the average list over the query's sessions (the same objective for losses
linear in the labels when the shown set does not change, e.g. randomized or swapped orders).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.clicks.logs.stream import LogAggregate, query_sessions
from ltr.base.errors import LtrError

__all__ = ["cell_values", "aggregate_dataset"]


def cell_values(agg: LogAggregate, estimator: str, *, clip: float, curve: Any = None,
                affine: tuple[Any, Any] | None = None) -> np.ndarray:
    """Per-cell sums of the corrected clicks (:func:`ltr.clicks.estimators.unbiased.corrected_clicks`, summed)."""
    from ltr.clicks.estimators.unbiased import _check_clip

    clip = _check_clip(clip)

    def by_position(c) -> np.ndarray:
        c = np.asarray(c, dtype=np.float64).ravel()
        if len(agg.position) and agg.position.max() > len(c):
            raise LtrError(f"the propensity curve has {len(c)} positions, the log shows up to {agg.position.max()}")
        return c[agg.position - 1]

    if estimator == "naive":
        return agg.clicks.copy()
    if estimator == "affine":
        alpha, beta = affine
        return (agg.clicks - by_position(beta) * agg.n) / np.maximum(by_position(alpha), clip)
    if estimator in ("ips", "rem"):
        if curve is not None:
            return agg.clicks / np.maximum(by_position(curve), clip)
        if clip != agg.clip:
            raise LtrError(f"the aggregate was summed with clip {agg.clip}, not {clip}")
        return agg.ips.copy()
    raise LtrError(f"estimator {estimator!r} needs the sessions, not per-cell sums: use naive, ips, rem or affine")


def aggregate_dataset(dataset, agg: LogAggregate, values: np.ndarray):
    """The training lists of the module docstring as a :class:`ltr.data.RankingDataset` (one list per query)."""
    from ltr.data import RankingDataset

    if len(agg.n) == 0:
        raise LtrError("the click log is empty")
    n_q = query_sessions(agg, dataset.n_queries)
    # One item per (query, row): its value summed over positions, ordered by first position.
    order = np.lexsort((agg.position, agg.doc))
    doc, pos, v = agg.doc[order], agg.position[order], values[order]
    first = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    rows, first_pos, total = doc[first], pos[first], np.add.reduceat(v, first)
    q = agg.query[order][first]
    items = np.lexsort((rows, first_pos, q))
    rows, q, total = rows[items], q[items], total[items]
    queries, lengths = np.unique(q, return_counts=True)
    return RankingDataset(
        features=np.ascontiguousarray(dataset.features[rows], dtype=np.float32),
        labels=np.maximum(total, 0.0) / n_q[q],
        query_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        query_ids=queries.astype(np.int64),
        weights=n_q[q].astype(np.float64),
    )
