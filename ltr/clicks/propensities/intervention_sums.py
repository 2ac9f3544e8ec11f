"""Sufficient statistics of a click log's intervention sessions, summed batch by batch.

The propensity estimators of :mod:`ltr.clicks.propensities.interventions` need only a few sums over the randomized and
swap sessions, grouped by how many items each session showed (``s``):

* randomized sessions: ``n[s]`` sessions; for each position r, ``sum c_r``, ``sum c_r^2`` and
  ``sum c_1 c_r`` (``c_r``: the click at position r; 0 when nothing was clicked there);
* swap sessions with swap position k (k = 1: the control group): ``n[k, s]`` sessions and the sum and
  sum of squares of ``t``, the click on the item the logging ranker put first.

Sums add, so a Parquet log is read in record batches (:func:`stream_intervention_sums`) and its
production sessions, however many, cost nothing but the reading: memory does not grow with the log.
The in-memory :class:`~ltr.clicks.simulate.click_models.ClickLog` goes through the same sums
(:func:`sums_of_log`), so both give the same estimate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ltr.clicks.logs.click_log import ClickLog, MODE_RANDOMIZED, MODE_SWAP
from ltr.base.errors import LtrError

__all__ = ["InterventionSums", "sums_from_rows", "sums_of_log", "stream_intervention_sums"]


@dataclass
class InterventionSums:
    """Sums over intervention sessions (module docstring); index ``s`` = items shown, ``r - 1`` = position r.

    rand_n [S+1]; rand_x, rand_xx, rand_x1x [S+1, P]: randomized sessions.
    swap_n, swap_t, swap_tt [K+1, S+1]: swap sessions by swap position k and items shown.
    max_position: the largest position shown in an intervention session (0 when there is none).
    """

    rand_n: np.ndarray
    rand_x: np.ndarray
    rand_xx: np.ndarray
    rand_x1x: np.ndarray
    swap_n: np.ndarray
    swap_t: np.ndarray
    swap_tt: np.ndarray
    max_position: int

    def merge(self, other: InterventionSums) -> InterventionSums:
        """The sums of both (arrays padded with zeros to the larger shape)."""
        def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape))
            out = np.zeros(shape, dtype=np.result_type(a, b))
            out[tuple(slice(0, n) for n in a.shape)] += a
            out[tuple(slice(0, n) for n in b.shape)] += b
            return out

        names = ("rand_n", "rand_x", "rand_xx", "rand_x1x", "swap_n", "swap_t", "swap_tt")
        merged = {n: add(getattr(self, n), getattr(other, n)) for n in names}
        return InterventionSums(**merged, max_position=max(self.max_position, other.max_position))

    @property
    def n_randomized(self) -> int:
        return int(self.rand_n.sum())

    @property
    def n_swap(self) -> int:
        return int(self.swap_n.sum())


def _per_cell(index: np.ndarray, weights: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``out[i, j] = sum of weights`` over the rows whose flat cell index ``i * shape[1] + j`` is ``index``."""
    return np.bincount(index, weights=weights, minlength=shape[0] * shape[1]).reshape(shape)


def sums_from_rows(session, position, click, mode, swap, logged_rank) -> InterventionSums:
    """The sums of the sessions in these rows (every row of each session; any row order).

    ``mode`` and ``swap`` are per row (the session's value on each of its rows); rows of production
    sessions (mode 0) are ignored.
    """
    keep = (mode == MODE_RANDOMIZED) | (mode == MODE_SWAP)
    session, position, mode, swap, logged_rank = (np.asarray(a)[keep] for a in (session, position, mode, swap, logged_rank))
    click = np.asarray(click, dtype=np.float64)[keep]
    _, first, sid = np.unique(session, return_index=True, return_inverse=True)
    sid = sid.ravel()
    shown = np.bincount(sid, minlength=len(first))
    s_mode, s_swap = mode[first], swap[first]
    n_shown = int(shown.max()) + 1 if len(first) else 1
    n_pos = int(position.max()) if len(position) else 0
    # randomized: per (items shown, position) sums of c_r, c_r^2 and c_1 c_r
    c1 = np.zeros(len(first))
    at1 = position == 1
    c1[sid[at1]] = click[at1]
    rand = s_mode[sid] == MODE_RANDOMIZED
    cell = shown[sid[rand]] * max(n_pos, 1) + position[rand] - 1
    shape = (n_shown, max(n_pos, 1))
    c = click[rand]
    rand_x, rand_xx = _per_cell(cell, c, shape), _per_cell(cell, c * c, shape)
    rand_x1x = _per_cell(cell, c1[sid[rand]] * c, shape)
    rand_n = np.bincount(shown[s_mode == MODE_RANDOMIZED], minlength=n_shown).astype(np.float64)
    # swaps: per (swap position, items shown) count, sum and sum of squares of the top item's click
    top = np.zeros(len(first))
    is_top = logged_rank == 1
    top[sid[is_top]] = click[is_top]
    sw = s_mode == MODE_SWAP
    k_max = int(s_swap[sw].max()) + 1 if sw.any() else 1
    cell = s_swap[sw] * n_shown + shown[sw]
    shape = (k_max, n_shown)
    t = top[sw]
    return InterventionSums(rand_n, rand_x, rand_xx, rand_x1x, _per_cell(cell, np.ones(len(t)), shape),
                            _per_cell(cell, t, shape), _per_cell(cell, t * t, shape), n_pos)


def sums_of_log(log: ClickLog) -> InterventionSums:
    """:func:`sums_from_rows` of an in-memory log."""
    return sums_from_rows(log.session, log.position, log.click, log.session_mode[log.session],
                          log.session_swap[log.session], log.logged_rank)


_COLUMNS = ["session", "position", "click", "session_mode", "session_swap", "logged_rank"]


def _batch_columns(cols: dict, where: tuple[str, int]):
    """(session, position, click, mode, swap, logged rank) of one batch, checked; None when the file
    has no ``session_mode`` column (production sessions only)."""
    from ltr.clicks.logs.ids import LogIds

    if "session_mode" not in cols:
        return None
    session = np.asarray(cols["session"], dtype=np.int64)
    pos = np.asarray(cols["position"], dtype=np.int64)
    click = np.asarray(cols["click"], dtype=np.float64)
    LogIds.check(pos < 1, pos, where, "position", "is below 1")
    LogIds.check((click != 0) & (click != 1), click, where, "click", "is not 0 or 1")
    mode = np.asarray(cols["session_mode"], dtype=np.int64)
    swap = np.asarray(cols["session_swap"], dtype=np.int64) if "session_swap" in cols else np.zeros_like(pos)
    rank = np.asarray(cols["logged_rank"], dtype=np.int64) if "logged_rank" in cols else pos
    keep = (mode == MODE_RANDOMIZED) | (mode == MODE_SWAP)
    return tuple(a[keep] for a in (session, pos, click, mode, swap, rank))


def stream_intervention_sums(path: str | os.PathLike, *, batch_size: int = 1_000_000,
                             progress: bool = False) -> InterventionSums:
    """The sums of the Parquet log at ``path`` (a file or a folder), read in record batches of
    ``batch_size`` rows (``progress``: a bar over the rows read).

    The intervention sessions' rows must come together, in non-decreasing session ids (what ``ltr
    clicks simulate`` writes); otherwise :class:`~ltr.clicks.logs.list_stream.UnsortedSessionsError` is
    raised and the caller reads them whole. A session's rows may be split between batches: the last
    session of a batch waits for the next one.
    """
    from ltr.clicks.logs.list_stream import check_session_order
    from ltr.clicks.logs.ids import LogIds
    from ltr.clicks.logs.stream import iter_log_batches

    acc, carry, last, has_modes = None, None, None, False
    for where, cols in iter_log_batches(path, _COLUMNS, batch_size, progress):
        batch = _batch_columns(cols, where)
        if batch is None:
            continue
        has_modes = True
        if len(batch[0]) == 0:
            continue
        check_session_order(batch[0], last, LogIds, where)
        last = int(batch[0][-1])
        if carry is not None:
            batch = tuple(np.concatenate([a, b]) for a, b in zip(carry, batch))
        done = batch[0] != last  # the last session may go on in the next batch
        carry = tuple(a[~done] for a in batch)
        if done.any():
            part = sums_from_rows(*(a[done] for a in batch))
            acc = part if acc is None else acc.merge(part)
    if not has_modes:
        raise LtrError(f"{path}: the log has no session_mode column (all its sessions are production sessions): "
                       "it has no randomized or swap traffic")
    if carry is not None and len(carry[0]):
        part = sums_from_rows(*carry)
        acc = part if acc is None else acc.merge(part)
    return acc if acc is not None else sums_from_rows(*(np.zeros(0, dtype=np.int64),) * 6)
