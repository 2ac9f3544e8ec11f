"""A Parquet click log summed for intervention harvesting, read in record batches.

Intervention harvesting (:mod:`ltr.clicks.propensities.harvesting`) needs, per (query, document,
position) cell of the logs, the impressions ``n(q, d, k)`` and the clicks ``c(q, d, k)``: sums, so a
log of any length can be read ``batch_size`` rows at a time and merged into the running cells, holding
one batch and one row per distinct cell. The log's query and doc columns are the integer indices that
``ltr clicks simulate`` writes (a document's row number is unique across queries, so a cell is keyed
by (row, position)); the estimate needs no data set. The sessions are counted as the runs of equal
session ids in file order, which needs each session's rows together and ids that never go back (as the
simulator writes them): :class:`ltr.clicks.logs.list_stream.UnsortedSessionsError` otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ltr.clicks.logs.reader import row_text
from ltr.base.errors import LtrError

__all__ = ["HarvestCells", "stream_harvest_cells", "cells_of_log"]


@dataclass
class HarvestCells:
    """Per (query, document, position) cell: ``query``, ``doc``, ``position``, impressions ``n`` and
    ``clicks``; ``n_sessions`` of the log and its ``meta``."""

    query: np.ndarray
    doc: np.ndarray
    position: np.ndarray
    n: np.ndarray
    clicks: np.ndarray
    n_sessions: int
    meta: dict = field(default_factory=dict)


def cells_of_log(log) -> HarvestCells:
    """The entries of a :class:`ltr.clicks.simulate.click_models.ClickLog` in memory as cells of one impression each."""
    return HarvestCells(log.query, log.doc, log.position, np.ones(log.n_entries), log.click.astype(np.float64),
                        int(log.n_sessions), log.meta)


def stream_harvest_cells(path: str | os.PathLike, *, batch_size: int = 1_000_000,
                         progress: bool = False) -> HarvestCells:
    """The cells of the Parquet log at ``path`` (module docstring), read ``batch_size`` rows at a time."""
    from ltr.clicks.logs.stream import cell_key, cell_of, iter_log_batches, merge_cells, read_log_meta

    key, sums = np.zeros(0, dtype=np.int64), [np.zeros(0)] * 2
    docs, queries = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)  # each logged doc row's query
    runs, last = 0, None
    for where, cols in iter_log_batches(path, ["session", "query", "doc", "position", "click"], batch_size, progress):
        session, query, doc, pos, click = _checked_batch(cols, where)
        runs += _new_sessions(session, last, where)
        last = session[-1] if len(session) else last
        key, sums = merge_cells(key, sums, cell_key(doc, pos), [np.ones(len(doc)), click])
        docs, queries = _merge_doc_queries(docs, queries, doc, query, where)
    if len(key) == 0:
        raise LtrError(f"{path}: the click log is empty")
    doc, position = cell_of(key)
    return HarvestCells(queries[np.searchsorted(docs, doc)], doc, position, sums[0], sums[1], runs, read_log_meta(path))


def _checked_batch(cols: dict, where) -> tuple[np.ndarray, ...]:
    """``(session, query, doc, position, click)`` of one batch as integers / floats, each value checked (an error
    names the file and row)."""
    from ltr.clicks.logs.ids import LogIds
    from ltr.clicks.logs.stream import batch_positions_and_clicks

    try:
        session, query, doc = (np.asarray(cols[c], dtype=np.int64) for c in ("session", "query", "doc"))
    except (TypeError, ValueError):
        raise LtrError(f"{where[0]}: intervention harvesting reads logs whose session, query and doc columns are "
                       "integer indices (as `ltr clicks simulate` writes them)") from None
    pos, click = batch_positions_and_clicks(cols, LogIds, where)
    LogIds.check(query < 0, query, where, "query index", "is negative")
    LogIds.check(doc < 0, doc, where, "doc row", "is negative")
    return session, query, doc, pos, click


def _new_sessions(session: np.ndarray, last, where) -> int:
    """How many sessions begin in this batch (ids must not go back: the runs of equal ids are the sessions)."""
    from ltr.clicks.logs.list_stream import check_session_order
    from ltr.clicks.logs.ids import LogIds

    if len(session) == 0:
        return 0
    check_session_order(session, last, LogIds, where)
    return int(last is None or session[0] != last) + int(np.count_nonzero(session[1:] != session[:-1]))


def _merge_doc_queries(docs, queries, batch_doc, batch_query, where) -> tuple[np.ndarray, np.ndarray]:
    """The running (doc row, its query) pairs, sorted by row, with one batch's added; a row logged under two
    queries is refused."""
    d, q = np.concatenate([docs, batch_doc]), np.concatenate([queries, batch_query])
    order = np.lexsort((q, d))
    d, q = d[order], q[order]
    first = np.r_[True, d[1:] != d[:-1]]
    clash = np.flatnonzero(~first & (q != np.r_[q[:1], q[:-1]]))
    if clash.size:
        i = int(clash[0])
        raise LtrError(f"{where[0]}: doc row {int(d[i])} is logged under queries {int(q[i - 1])} and {int(q[i])} "
                       f"(by {row_text(where)} onwards); a doc row belongs to one query")
    return d[first], q[first]
