"""Judging a ranker on a Parquet click log read in record batches (``ltr clicks evaluate`` on a log larger than memory).

:func:`ltr.clicks.estimators.ips.click_dcg` needs only sums over the log. With d(rank_s(i)) the discount of row
i's rank under the new scores, C[i] the clicks of row i, W[i] = sum over its clicked entries of
1 / max(p, clip) (p the logged propensity, or ``curve[position - 1]``) and n_q the sessions of q::

    naive(q) = 1/n_q * sum_{rows i of q} d(rank_s(i)) C[i]
    IPS(q)   = 1/n_q * sum_{rows i of q} d(rank_s(i)) W[i]
    SNIPS(q) = sum_{rows i of q} d(rank_s(i)) W[i]  /  sum_{rows i of q} W[i]
    policy-aware(q) = 1/n_q * sum_{rows i of q} d(rank_s(i)) C[i] / max(E[i] / n_q, clip)

with E[i] the sum of the propensities of row i's impressions (clicked or not).

:func:`stream_click_cells` keeps per (row, position) cell the clicks, the sum of click / max(p, clip)
with the logged p, the impressions and the sum of their propensities, and per query its number of
sessions (distinct session ids, counted batch by batch, so session ids must not go back:
:class:`ltr.clicks.logs.list_stream.UnsortedSessionsError` otherwise). :func:`click_dcg_from_cells` then gives what ``click_dcg`` gives on the log read whole, up
to the order of the float additions (~1e-15 relative). Memory: one batch plus the distinct cells.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["ClickCells", "stream_click_cells", "click_dcg_from_cells"]


@dataclass
class ClickCells:
    """Per (row, position) cell: ``doc`` (row), ``position``, ``clicks``, ``ips`` (sum of click / max(p, clip),
    logged p; inf where a clicked entry has p = 0 and no clip), ``shown`` (impressions), ``examined`` (sum of
    their logged p); ``sessions`` [Q] per query; the log's ``meta``."""

    doc: np.ndarray
    position: np.ndarray
    clicks: np.ndarray
    ips: np.ndarray
    shown: np.ndarray
    examined: np.ndarray
    sessions: np.ndarray
    clip: float | None
    meta: dict

    @property
    def n_sessions(self) -> int:
        return int(self.sessions.sum())


def _inverse(click: np.ndarray, p: np.ndarray, clip: float | None) -> np.ndarray:
    """click / max(p, clip) per entry (0 where not clicked; inf where clicked with p = 0 and no clip)."""
    p = p if clip is None else np.maximum(p, clip)
    out = np.zeros(len(click))
    with np.errstate(divide="ignore"):
        np.divide(click, p, out=out, where=click > 0)
    return out


def stream_click_cells(path: str | os.PathLike, dataset, *, ids: str = "auto", batch_size: int = 1_000_000,
                       clip: float | None = None, progress: bool = False) -> ClickCells:
    """The cells and session counts of the Parquet log at ``path`` (module docstring), read ``batch_size`` rows at
    a time; ``ids``: how its query and doc columns name the rows of ``dataset`` (:mod:`ltr.clicks.logs.ids`);
    ``progress``: a bar over the rows read."""
    from ltr.clicks.logs.list_stream import check_session_order
    from ltr.clicks.logs.ids import LogIds
    from ltr.clicks.logs.stream import _batch_rows, _reduce, cell_key, cell_of, id_mode, iter_log_batches, merge_cells, read_log_meta

    mapper = LogIds(dataset, id_mode(path, ids))
    key, sums = np.zeros(0, dtype=np.int64), [np.zeros(0)] * 4
    sessions = np.zeros(dataset.n_queries, dtype=np.int64)
    last = None
    columns = ["session", "query", "doc", "position", "click", "propensity"]
    for where, cols in iter_log_batches(path, columns, batch_size, progress):
        session = np.asarray(cols["session"], dtype=np.int64)
        check_session_order(session, last, mapper, where)
        query, rows, pos, click, p = _batch_rows(cols, mapper, where)
        if len(session) == 0:
            continue
        new = np.r_[session[0] != last, session[1:] != session[:-1]]  # the first row of each session not yet counted
        sessions += np.bincount(query[new], minlength=dataset.n_queries)
        last = int(session[-1])
        k, s = _reduce(cell_key(rows, pos), [click, _inverse(click, p, clip), np.ones(len(pos)), p])
        key, sums = merge_cells(key, sums, k, s)
    doc, position = cell_of(key)
    return ClickCells(doc=doc, position=position, clicks=sums[0], ips=sums[1], shown=sums[2], examined=sums[3],
                      sessions=sessions, clip=clip, meta=read_log_meta(path))


def click_dcg_from_cells(cells: ClickCells, scores, query_offsets, *, estimator: str = "ips", k: int | None = 10,
                         discount="log2", curve=None) -> np.ndarray:
    """Per-query click-DCG@k of the ranking by ``scores`` (:func:`ltr.clicks.estimators.ips.click_dcg`, from the cells);
    ``curve``: propensities by position to use instead of the logged ones. NaN for queries without sessions
    (and, for SNIPS, without clicks)."""
    from ltr.clicks.estimators.ips import ESTIMATORS, ranks_within_queries
    from metrics.discounts import discount_values

    if estimator not in ESTIMATORS:
        raise LtrError(f"unknown estimator {estimator!r}: use one of {', '.join(ESTIMATORS)}")
    offsets = np.asarray(query_offsets, dtype=np.int64)
    n_queries = len(offsets) - 1
    query = np.searchsorted(offsets, cells.doc, side="right") - 1
    gain = discount_values(ranks_within_queries(scores, offsets)[cells.doc], discount, k)
    c = None
    if curve is not None:
        c = np.asarray(curve, dtype=np.float64).ravel()
        if len(cells.position) and cells.position.max() > len(c):
            raise LtrError(f"the propensity curve has {len(c)} positions, the log shows up to {cells.position.max()}")
    if estimator != "naive" and c is None:
        from ltr.clicks.estimators.propensity_source import require_propensity

        require_propensity(cells.meta, estimator)
    if estimator == "naive":
        w = cells.clicks
    elif estimator == "policy-aware":
        examined = cells.examined if c is None else cells.shown * c[cells.position - 1]
        rho = np.bincount(cells.doc, weights=examined, minlength=offsets[-1])[cells.doc] / cells.sessions[query]
        w = _inverse(cells.clicks, rho, cells.clip)
    elif c is not None:
        w = _inverse(cells.clicks, c[cells.position - 1], cells.clip)
    else:
        w = cells.ips
    if estimator != "naive" and not np.isfinite(w).all():
        raise LtrError("a clicked entry has propensity 0: IPS is undefined (clip the propensities)")
    num = np.bincount(query, weights=gain * w, minlength=n_queries)
    with np.errstate(invalid="ignore", divide="ignore"):
        if estimator == "snips":
            return num / np.bincount(query, weights=w, minlength=n_queries)
        return np.where(cells.sessions > 0, num / cells.sessions, np.nan)
