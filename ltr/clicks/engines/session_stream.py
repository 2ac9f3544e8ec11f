"""The sessions with a click of a Parquet click log, read in record batches: what LightGBM's ``naive``,
``ips`` and ``position-bias`` estimators boost on, without the log or the float matrix held whole.

:func:`ltr.clicks.estimators.ips.click_training_set` makes every logged session with a click one query group
(its shown items in log order, clicks as labels, for ``ips`` the weights ``1 / max(p, clip)`` on
clicked items and 1 on the others) from a log in memory, and copies each row's features out of the
data set: 49 bytes a log row for the log and ``4 F`` bytes a training row for the matrix.
:func:`stream_click_sessions` builds the same groups from a Parquet log read ``batch_size`` rows at a
time, keeping per training row only its data-set row, click, shown position and weight (9 bytes,
13 with weights), and :func:`session_training_set` serves their features as row blocks gathered from the data
set (:class:`ltr.data.streamed.StreamedData`), which LightGBM bins through a ``lightgbm.Sequence``
(:mod:`ltr.gbdt.streaming`): the same bin sample and the same rows as the matrix in memory, so the
same model. With ``every_session`` it keeps the sessions without a click too, each session's rows by shown
position: XGBoost's ``naive`` and ``pairwise-debias`` groups (:func:`ltr.clicks.engines.xgboost.fit_xgboost_streamed_sessions`),
which XGBoost sketches and bins from the gathered blocks through its data iterator.

A session's rows must be consecutive and session ids non-decreasing in file order, as ``ltr clicks
simulate`` writes them (:func:`ltr.clicks.logs.list_stream.iter_complete_sessions`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["ClickSessions", "stream_click_sessions", "session_training_set"]


@dataclass
class ClickSessions:
    """The training rows of the sessions with a click, in log order: ``rows`` (data-set rows), ``click``,
    ``position`` and ``weight`` (None without weighting) per row; ``offsets`` [S + 1] cut them into
    sessions; ``n_sessions`` counts every session read, with a click or not."""

    rows: np.ndarray
    click: np.ndarray
    position: np.ndarray
    weight: np.ndarray | None
    offsets: np.ndarray
    n_sessions: int


def _kept_sessions(session, rows, pos, click, p, weighting: str, clip: float, curve, every_session: bool = False):
    """The rows of one chunk's complete sessions that have a click (of all of them with ``every_session``, each
    session's rows then by shown position): ``(rows, click, position, weight, lengths, sessions in the chunk)``."""
    from ltr.clicks.estimators.ips import click_weights

    if every_session:  # the chunk's session ids do not go back, so this keeps the sessions in log order
        order = np.lexsort((pos, session))
        session, rows, pos, click, p = session[order], rows[order], pos[order], click[order], p[order]
    _, sid, counts = np.unique(session, return_inverse=True, return_counts=True)
    sid = sid.ravel()
    kept = np.ones(len(counts), dtype=bool) if every_session else np.bincount(sid, weights=click, minlength=len(counts)) > 0
    keep = kept[sid]
    weight = None
    if weighting == "ips":
        if curve is not None:
            if pos.max() > len(curve):
                raise LtrError(f"the propensity curve covers {len(curve)} positions, the log shows {int(pos.max())}")
            p = curve[pos - 1]
        weight = click_weights(click[keep], p[keep], clip).astype(np.float32)
    # compact per chunk, so that the chunks held until the end cost 9 bytes a row (13 with weights); positions
    # reach 2^20 - 1 (log_stream._POS_BITS)
    row_type = np.int32 if rows.size == 0 or rows.max() < 2**31 else np.int64
    return (rows[keep].astype(row_type), click[keep].astype(np.uint8), pos[keep].astype(np.int32), weight, counts[kept],
            len(counts))


def stream_click_sessions(path: str | os.PathLike, dataset, *, weighting: str = "none", clip: float = 0.01,
                          curve: Any = None, ids: str = "auto", batch_size: int = 1_000_000,
                          progress: bool = False, every_session: bool = False) -> ClickSessions:
    """The sessions with a click of the Parquet log at ``path`` (module docstring). ``weighting``: ``"none"``
    or ``"ips"`` (the logged propensities, or ``curve`` by position, θ_1 first); ``ids``: how its query and
    doc columns name the rows of ``dataset`` (:mod:`ltr.clicks.logs.ids`); ``every_session``: the sessions
    without a click too, each session's rows by shown position (what XGBoost's ``rank:ndcg`` groups are)."""
    from ltr.clicks.logs.list_stream import iter_complete_sessions

    if weighting not in ("ips", "none"):
        raise LtrError(f"unknown weighting {weighting!r}: use 'ips' or 'none'")
    curve = None if curve is None else np.asarray(curve, dtype=np.float64).ravel()
    parts, n_sessions = [], 0
    for _, (session, _query, rows, pos, click, p) in iter_complete_sessions(path, dataset, ids=ids, batch_size=batch_size,
                                                                           propensity=True, progress=progress):
        *part, n = _kept_sessions(session, rows, pos, click, p, weighting, clip, curve, every_session)
        parts.append(part)
        n_sessions += n
    if n_sessions == 0:
        raise LtrError(f"{path}: the click log is empty")
    if not every_session and not any(len(part[4]) for part in parts):
        raise LtrError("the click log has no session with a click")
    rows, click, pos, weight, lengths = (np.concatenate([part[i] for part in parts]) if parts[0][i] is not None else None
                                         for i in range(5))
    return ClickSessions(rows=rows, click=click, position=pos, weight=weight,
                         offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), n_sessions=n_sessions)


def session_training_set(dataset, sessions: ClickSessions):
    """``(training set, position)`` for ``train_lightgbm``: a :class:`ltr.data.streamed.StreamedData` whose row
    blocks are the data set's rows of the sessions (gathered block by block), clicks as labels, the weights;
    and the shown position of every row (LightGBM's position-bias model)."""
    from ltr.data.streamed import StreamedData

    features = dataset.features

    def blocks(size: int):
        for a in range(0, len(sessions.rows), size):
            yield a, np.asarray(features[sessions.rows[a:a + size]], dtype=np.float32)

    train = StreamedData(labels=sessions.click, query_offsets=sessions.offsets,
                         query_ids=np.arange(len(sessions.offsets) - 1), n_features=dataset.n_features, blocks=blocks,
                         weights=sessions.weight, name="the sessions with a click")
    return train, sessions.position
