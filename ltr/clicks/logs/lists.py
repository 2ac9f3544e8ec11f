"""A click log grouped by the list that was shown: the form the estimators train on.

Sessions of one query that showed the same items in the same order form a *group* g. Each group
keeps its shown rows ``docs [G, K]`` (-1 = padding; column c is position c + 1), its number of
sessions ``n_g``, and per cell the sums over its sessions of the clicks and of any per-entry
value (an inverse propensity times the click, an affine-corrected click)::

    clicks[g, c]  = sum_{sessions s of g} click_s(c)
    sums[g, c]    = sum_{sessions s of g} value_s(c)          (value given per log entry)

A log of one deterministic ranker has one group per query, so 10^6 sessions cost no more to train
on than 10^4. Every loss that is linear in the clicks of a session (softmax cross-entropy with
click labels, pointwise losses) gives the same objective on the groups as on the sessions, up
to a constant factor; pairwise losses need the pair counts ``sum_s c_s(i) (1 - c_s(j))``, which
:func:`pair_counts` gives per group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.base.errors import LtrError

__all__ = ["ShownLists", "group_sessions", "session_matrix", "pair_counts"]


@dataclass
class ShownLists:
    """Distinct shown lists of a log; see the module docstring. ``group`` [S]: each session's group."""

    docs: np.ndarray
    query: np.ndarray
    sessions: np.ndarray
    clicks: np.ndarray
    sums: dict
    group: np.ndarray

    @property
    def n_groups(self) -> int:
        return int(len(self.query))

    @property
    def mask(self) -> np.ndarray:
        return self.docs >= 0

    @property
    def positions(self) -> np.ndarray:
        """1-based shown position of every cell ``[G, K]`` (0 on padding)."""
        k = self.docs.shape[1]
        return np.where(self.mask, np.arange(1, k + 1)[None, :], 0)


def session_matrix(log: ClickLog, values: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(docs [S, K], cells [S, K])``: each session's shown rows by position (-1 padding) and the
    per-entry ``values`` (default: the clicks) placed the same way (0 on padding)."""
    if log.n_entries == 0:
        raise LtrError("the click log is empty")
    k = int(log.position.max())
    docs = np.full((log.n_sessions, k), -1, dtype=np.int64)
    docs[log.session, log.position - 1] = log.doc
    v = log.click if values is None else np.asarray(values, dtype=np.float64)
    if v.shape != (log.n_entries,):
        raise LtrError(f"per-entry values must have one value per log entry ({log.n_entries}), got shape {v.shape}")
    cells = np.zeros((log.n_sessions, k), dtype=np.float64)
    cells[log.session, log.position - 1] = v
    return docs, cells


def group_sessions(log: ClickLog, values: dict | None = None) -> ShownLists:
    """Group the sessions of ``log`` by (query, shown rows in order); ``values``: name -> per-entry
    array whose sums per group cell are kept in ``ShownLists.sums[name]``.

    >>> import numpy as np
    >>> z = np.zeros(4, dtype=np.int64)
    >>> log = ClickLog(np.array([0, 0, 1, 1]), z, np.array([0, 1, 0, 1]), np.array([1, 2, 1, 2]),
    ...                np.array([1, 2, 1, 2]), np.array([1, 0, 1, 1], np.int8), np.ones(4),
    ...                np.zeros(2, np.int64), np.zeros(2, np.int8), np.zeros(2, np.int64))
    >>> g = group_sessions(log)
    >>> g.docs.tolist(), g.sessions.tolist(), g.clicks.tolist()
    ([[0, 1]], [2], [[2.0, 1.0]])
    """
    docs, cells = session_matrix(log)
    key = np.concatenate([log.session_query[:, None], docs], axis=1)
    uniq, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    n_groups, k = len(uniq), docs.shape[1]

    def per_group(c: np.ndarray) -> np.ndarray:
        out = np.zeros((n_groups, k))
        np.add.at(out, inverse, c)
        return out

    sums = {name: per_group(session_matrix(log, v)[1]) for name, v in (values or {}).items()}
    return ShownLists(
        docs=uniq[:, 1:], query=uniq[:, 0], sessions=np.bincount(inverse, minlength=n_groups),
        clicks=per_group(cells), sums=sums, group=inverse,
    )


def pair_counts(log: ClickLog, lists: ShownLists, chunk: int = 100_000) -> np.ndarray:
    """``[G, K, K]``: per group, the number of sessions with a click at cell i and none at cell j."""
    docs, cells = session_matrix(log)
    k = docs.shape[1]
    shown = (docs >= 0).astype(np.float64)
    out = np.zeros((lists.n_groups, k, k))
    for start in range(0, log.n_sessions, chunk):
        c = cells[start : start + chunk]
        pairs = c[:, :, None] * ((1.0 - c) * shown[start : start + chunk])[:, None, :]
        np.add.at(out, lists.group[start : start + chunk], pairs)
    return out
