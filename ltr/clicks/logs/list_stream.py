"""The shown lists of a Parquet click log, read in record batches: what DLA and pairwise debiasing train on.

:func:`ltr.clicks.logs.lists.group_sessions` groups a log held in memory by (query, shown rows in
order). :func:`stream_shown_lists` builds the same :class:`ltr.clicks.logs.lists.ShownLists` from a
Parquet log read ``batch_size`` rows at a time, and with ``pairs=True`` the pair counts of
:func:`ltr.clicks.logs.lists.pair_counts`::

    sessions[g]    = number of sessions that showed list g
    clicks[g, i]   = sum_{sessions s of g} c_s(i)
    pairs[g, i, j] = sum_{sessions s of g} c_s(i) (1 - c_s(j))      (j a shown cell)

Each batch's complete sessions are grouped, and their groups merged into the running ones by the
same key (query, shown rows), so memory is the distinct shown lists (G x K, G x K x K with the pairs)
plus one batch, however many sessions the log holds. The sums are counts, so the result equals the
whole-log grouping exactly, groups in the same order (sorted by key). ``group`` (each session's
group) is left empty: it has one entry per session.

A session's rows must be consecutive and session ids non-decreasing in file order, as ``ltr clicks
simulate`` writes them; the rows of a batch's last session are carried into the next batch. A log
whose session ids go back raises :class:`UnsortedSessionsError` naming the file and row (``ltr clicks
train`` then reads that log whole).
"""

from __future__ import annotations

import os

import numpy as np

from ltr.clicks.logs.lists import ShownLists
from ltr.clicks.logs.reader import row_text
from ltr.base.errors import LtrError

__all__ = ["stream_shown_lists", "iter_complete_sessions", "UnsortedSessionsError", "check_session_order"]


class UnsortedSessionsError(LtrError):
    """A streamed log whose session ids go back: its sessions cannot be told apart batch by batch."""


def check_session_order(session: np.ndarray, last_session, mapper, where) -> None:
    """Session ids of one batch must not go back, within it or from ``last_session`` (the previous batch's last)."""
    back = np.r_[last_session is not None and len(session) > 0 and session[0] < last_session,
                 session[1:] < session[:-1]][: len(session)]
    try:
        mapper.check(back, session, where, "session", "comes after a larger session id: streaming needs each "
                     "session's rows together and session ids in non-decreasing order (sort the log's rows by session)")
    except LtrError as exc:
        raise UnsortedSessionsError(str(exc)) from None

_PAIR_CHUNK = 100_000  # sessions per step of the pair counts (K x K floats each)


def _group_chunk(session, query, doc, pos, click, where, pairs: bool):
    """The groups of complete sessions: ``(key [G, 1 + K], sessions [G], clicks [G, K], pairs [G, K, K] | None)``."""
    _, sid = np.unique(session, return_inverse=True)
    sid = sid.ravel()
    n_s, k = int(sid.max()) + 1, int(pos.max())
    flat = sid * k + (pos - 1)
    if len(np.unique(flat)) != len(flat):
        raise LtrError(f"{row_text(where)} onwards: a session shows two items at one position")
    docs = np.full(n_s * k, -1, dtype=np.int64)
    docs[flat] = doc
    cells = np.zeros(n_s * k)
    cells[flat] = click
    docs, cells = docs.reshape(n_s, k), cells.reshape(n_s, k)
    sq = np.full(n_s, -1, dtype=np.int64)
    sq[sid] = query
    if (sq[sid] != query).any():
        raise LtrError(f"{row_text(where)} onwards: a session's rows name two queries")
    uniq, inv = np.unique(np.concatenate([sq[:, None], docs], axis=1), axis=0, return_inverse=True)
    inv = inv.ravel()
    clicks = np.zeros((len(uniq), k))
    np.add.at(clicks, inv, cells)
    out_pairs = None
    if pairs:
        shown = (docs >= 0).astype(np.float64)
        out_pairs = np.zeros((len(uniq), k, k))
        for s in range(0, n_s, _PAIR_CHUNK):
            c = cells[s : s + _PAIR_CHUNK]
            np.add.at(out_pairs, inv[s : s + _PAIR_CHUNK], c[:, :, None] * ((1.0 - c) * shown[s : s + _PAIR_CHUNK])[:, None, :])
    return uniq, np.bincount(inv, minlength=len(uniq)).astype(np.int64), clicks, out_pairs


def _pad(a: np.ndarray, k: int, fill, axes) -> np.ndarray:
    """``a`` widened to ``k`` along ``axes`` (the position axes), new cells = ``fill``."""
    widths = [(0, 0)] * a.ndim
    for ax in axes:
        widths[ax] = (0, k - a.shape[ax])
    return np.pad(a, widths, constant_values=fill)


def _merge(acc, part):
    """Two sets of groups as one: the same key's counts summed, keys sorted."""
    if acc is None:
        return part
    k = max(acc[0].shape[1], part[0].shape[1]) - 1
    keys = np.concatenate([_pad(acc[0], k + 1, -1, (1,)), _pad(part[0], k + 1, -1, (1,))])
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    sessions = np.bincount(inv, weights=np.concatenate([acc[1], part[1]]), minlength=len(uniq)).astype(np.int64)
    clicks = np.zeros((len(uniq), k))
    np.add.at(clicks, inv, np.concatenate([_pad(acc[2], k, 0.0, (1,)), _pad(part[2], k, 0.0, (1,))]))
    pairs = None
    if acc[3] is not None:
        pairs = np.zeros((len(uniq), k, k))
        np.add.at(pairs, inv, np.concatenate([_pad(acc[3], k, 0.0, (1, 2)), _pad(part[3], k, 0.0, (1, 2))]))
    return uniq, sessions, clicks, pairs


def _checked(cols, mapper, where, last_session, propensity: bool = False):
    """One batch's (session, query index, row, position, click[, propensity]), checked; ``last_session``: the
    previous batch's last session id (ids must not go back); ``propensity``: with the logged propensity (1 when
    the log has none)."""
    from ltr.clicks.logs.stream import batch_positions_and_clicks, batch_propensity

    session = np.asarray(cols["session"], dtype=np.int64)
    pos, click = batch_positions_and_clicks(cols, mapper, where)
    check_session_order(session, last_session, mapper, where)
    query, rows = mapper.rows(cols["query"], cols["doc"], where)
    batch = (session, np.asarray(query, dtype=np.int64), np.asarray(rows, dtype=np.int64), pos, click)
    return (*batch, batch_propensity(cols, mapper, where)) if propensity else batch


def iter_complete_sessions(path: str | os.PathLike, dataset, *, ids: str = "auto", batch_size: int = 1_000_000,
                           propensity: bool = False, progress: bool = False):
    """``((file, row) where its rows begin, (session, query index, row, position, click[, propensity]))`` per chunk
    of whole sessions of the Parquet log at ``path``, read ``batch_size`` rows at a time: each batch's sessions
    but its last, whose rows are carried into the next batch (module docstring); the arrays of
    :func:`_checked`, in file order."""
    from ltr.clicks.logs.ids import LogIds
    from ltr.clicks.logs.stream import id_mode, iter_log_batches

    mapper = LogIds(dataset, id_mode(path, ids))
    columns = ["session", "query", "doc", "position", "click"] + (["propensity"] if propensity else [])
    carry, last, start = None, None, None
    for where, cols in iter_log_batches(path, columns, batch_size, progress):
        batch = _checked(cols, mapper, where, last, propensity)
        n_new = len(batch[0])
        if n_new == 0:
            continue
        last = int(batch[0][-1])
        if carry is not None and len(carry[0]):
            batch = tuple(np.concatenate([a, b]) for a, b in zip(carry, batch))
        else:
            start = where  # (file, row) where the rows of this chunk begin, for error messages
        done = batch[0] != last  # the last session may go on in the next batch
        carry = tuple(a[~done] for a in batch)
        if done.any():
            yield start, tuple(a[done] for a in batch)
            start = (where[0], where[1] + n_new - len(carry[0]))  # the carried rows end this batch
    if carry is not None and len(carry[0]):
        yield start, carry


def stream_shown_lists(path: str | os.PathLike, dataset, *, ids: str = "auto", batch_size: int = 1_000_000,
                       pairs: bool = False, progress: bool = False) -> tuple[ShownLists, np.ndarray | None, dict]:
    """``(lists, pairs or None, meta)`` of the Parquet log at ``path`` (module docstring); ``ids``: how its
    query and doc columns name the rows of ``dataset`` (:mod:`ltr.clicks.logs.ids`); ``progress``: a bar
    over the rows read."""
    from ltr.clicks.logs.stream import read_log_meta

    acc = None
    for start, chunk in iter_complete_sessions(path, dataset, ids=ids, batch_size=batch_size, progress=progress):
        acc = _merge(acc, _group_chunk(*chunk, start, pairs))
    if acc is None:
        raise LtrError(f"{path}: the click log is empty")
    key, sessions, clicks, pair_sums = acc
    lists = ShownLists(docs=key[:, 1:], query=key[:, 0], sessions=sessions, clicks=clicks, sums={},
                       group=np.zeros(0, dtype=np.int64))
    return lists, pair_sums, read_log_meta(path)
