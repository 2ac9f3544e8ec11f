"""The click log: one entry per shown item, grouped by session, in shown order (:class:`ClickLog`).

Every part of :mod:`ltr.clicks` reads and writes this type: the simulator (:mod:`ltr.clicks.simulate`)
draws it, the Parquet tables (:mod:`ltr.clicks.logs.table`) hold it, the propensity estimators and the
unbiased estimators read it. A session's *mode* says what the logger did: ``MODE_PRODUCTION`` (0) showed
its ranking, ``MODE_RANDOMIZED`` (1) the top-k set in a uniformly random order, ``MODE_SWAP`` (2) the
ranking with position 1 swapped with the session's ``session_swap`` position.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_path

__all__ = ["MODE_PRODUCTION", "MODE_RANDOMIZED", "MODE_SWAP", "ClickLog", "concat_logs", "query_index", "log_problem"]

MODE_PRODUCTION, MODE_RANDOMIZED, MODE_SWAP = 0, 1, 2

@dataclass
class ClickLog:
    """A click log: one entry per shown item, grouped by session, in shown order.

    Entry arrays ``[M]``:
      ``session`` (0..S-1), ``query`` (query *index* into the data set, 0..Q-1), ``doc`` (row index
      into the data set), ``position`` (1-based shown position), ``logged_rank`` (1-based rank of the
      item under the production ranking, before any intervention), ``click`` (0/1, int8) and
      ``propensity`` (the logging examination probability of the entry).
    Session arrays ``[S]``: ``session_query``, ``session_mode`` (0 production, 1 randomized order,
      2 swap), ``session_swap`` (the position swapped with position 1, 0 when no swap session).
    ``meta``: the simulator's settings (model, eta, eps, max_label, top_k, seed, ...), JSON-able.
    """

    session: np.ndarray
    query: np.ndarray
    doc: np.ndarray
    position: np.ndarray
    logged_rank: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    session_query: np.ndarray
    session_mode: np.ndarray
    session_swap: np.ndarray
    meta: dict = field(default_factory=dict)

    _ENTRY = ("session", "query", "doc", "position", "logged_rank", "click", "propensity")
    _SESSION = ("session_query", "session_mode", "session_swap")

    def __post_init__(self) -> None:
        m = len(self.session)
        for name in self._ENTRY:
            if len(getattr(self, name)) != m:
                raise ValueError(f"ClickLog.{name} has {len(getattr(self, name))} entries, session has {m}")
        s = len(self.session_query)
        for name in self._SESSION:
            if len(getattr(self, name)) != s:
                raise ValueError(f"ClickLog.{name} has {len(getattr(self, name))} sessions, expected {s}")
        if m and (self.session.min() < 0 or self.session.max() >= s):
            raise ValueError("ClickLog.session refers to a session outside 0..n_sessions-1")

    @property
    def n_entries(self) -> int:
        return int(len(self.session))

    @property
    def n_sessions(self) -> int:
        return int(len(self.session_query))

    @property
    def n_clicks(self) -> int:
        return int(self.click.sum())

    def sessions_per_query(self, n_queries: int) -> np.ndarray:
        """Number of logged sessions of each query ``[n_queries]`` (sessions without clicks count)."""
        return np.bincount(self.session_query, minlength=n_queries).astype(np.int64)

    def select_sessions(self, keep: np.ndarray) -> "ClickLog":
        """The log restricted to the sessions where ``keep`` ([S] bool) is true, renumbered 0..S'-1."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n_sessions,):
            raise ValueError(f"keep must have shape ({self.n_sessions},), got {keep.shape}")
        new_id = np.cumsum(keep) - 1
        rows = keep[self.session]
        return ClickLog(
            session=new_id[self.session[rows]],
            **{name: getattr(self, name)[rows] for name in self._ENTRY if name != "session"},
            **{name: getattr(self, name)[keep] for name in self._SESSION},
            meta=dict(self.meta),
        )

    def ctr_by_position(self, n_positions: int | None = None, mode: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Clicks and impressions per position ``1..n_positions`` (optionally for one session mode)."""
        rows = np.ones(self.n_entries, dtype=bool) if mode is None else self.session_mode[self.session] == mode
        n = int(self.position.max()) if n_positions is None and self.n_entries else int(n_positions or 0)
        pos = self.position[rows] - 1
        inside = pos < n
        clicks = np.bincount(pos[inside], weights=self.click[rows][inside], minlength=n)[:n]
        shown = np.bincount(pos[inside], minlength=n)[:n].astype(np.float64)
        return clicks, shown

    def save(self, path: str | os.PathLike) -> None:
        """Write the log as a compressed ``.npz`` (atomically); ``meta`` is stored as JSON text."""
        arrays = {name: getattr(self, name) for name in self._ENTRY + self._SESSION}
        with atomic_path(path, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, meta=np.array(json.dumps(self.meta)), **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ClickLog":
        """Read a log written by :meth:`save`; a missing, foreign, damaged or inconsistent file is an
        :class:`LtrError` naming it (every array is checked: its shape, integer type and range)."""
        from ltr.base.checks import input_file

        path = input_file(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [n for n in cls._ENTRY + cls._SESSION + ("meta",) if n not in data.files]
                if missing:
                    raise LtrError(f"{path}: not a click log (missing arrays: {', '.join(missing)})")
                fields = {name: data[name] for name in cls._ENTRY + cls._SESSION}
                meta = json.loads(str(data["meta"]))
        except LtrError:
            raise
        except Exception as exc:  # a damaged archive fails in many ways (zip, EOF, pickle refusal, JSON)
            raise LtrError(f"{path}: cannot read click log ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:160]})") from None
        if not isinstance(meta, dict):
            raise LtrError(f"{path}: the click log's meta is not a JSON object")
        why = log_problem(fields)
        if why:
            raise LtrError(f"{path}: not a valid click log: {why}")
        return cls(**fields, meta=meta)


def log_problem(f: dict[str, np.ndarray]) -> str | None:
    """What is wrong with a click log's arrays (shapes, types, ranges), or None."""
    for name, arr in f.items():
        if arr.ndim != 1:
            return f"{name} has shape {arr.shape}, expected one dimension"
        if name != "propensity" and arr.dtype.kind not in "iub":
            return f"{name} holds {arr.dtype} values, expected integers"
    m, s = len(f["session"]), len(f["session_query"])
    for name in ClickLog._ENTRY:
        if len(f[name]) != m:
            return f"{name} has {len(f[name])} entries, session has {m}"
    for name in ClickLog._SESSION:
        if len(f[name]) != s:
            return f"{name} has {len(f[name])} sessions, session_query has {s}"
    p = f["propensity"]
    rules = [
        ("session", (f["session"] < 0) | (f["session"] >= s), f"session ids in 0..{s - 1}"),
        ("query", f["query"] < 0, "query indices >= 0"), ("doc", f["doc"] < 0, "row indices >= 0"),
        ("position", f["position"] < 1, "positions >= 1"), ("logged_rank", f["logged_rank"] < 1, "ranks >= 1"),
        ("click", (f["click"] != 0) & (f["click"] != 1), "clicks 0 or 1"),
        # 0 is a valid logging propensity: a cascade / DBN position below a certain stop is never examined
        ("propensity", ~((p >= 0) & (p <= 1)) if p.dtype.kind == "f" else np.ones(m, bool), "propensities in [0, 1]"),
        ("session_query", f["session_query"] < 0, "query indices >= 0"),
        ("session_mode", ~np.isin(f["session_mode"], (0, 1, 2)), "modes 0, 1 or 2"),
        ("session_swap", f["session_swap"] < 0, "positions >= 0"),
    ]
    for name, bad, want in rules:
        if bad.any():
            i = int(np.argmax(bad))
            where = f"session {i + 1}" if name.startswith("session_") else f"entry {i + 1}"
            return f"{where}: {name} is {f[name][i]!r}, expected {want}"
    order = np.lexsort((f["position"], f["session"]))
    s, pos = f["session"][order], f["position"][order]
    twice = np.flatnonzero((s[1:] == s[:-1]) & (pos[1:] == pos[:-1]))
    if len(twice):
        first, second = sorted((int(order[twice[0]]), int(order[twice[0] + 1])))
        return (f"entries {first + 1} and {second + 1} show two items at position {int(pos[twice[0]])} of session "
                f"{int(s[twice[0]]) + 1}; a session shows one item per position")
    return None


def query_index(query_offsets: np.ndarray) -> np.ndarray:
    """The query index of every row [N] of a data set with these query offsets [Q+1].

    >>> query_index(np.array([0, 2, 2, 5])).tolist()
    [0, 0, 2, 2, 2]
    """
    return np.repeat(np.arange(len(query_offsets) - 1), np.diff(query_offsets))


def concat_logs(logs: Sequence[ClickLog], meta: dict | None = None) -> ClickLog:
    """One log of the sessions of ``logs`` in order (session ids shifted; ``meta`` or the first log's)."""
    shift = np.cumsum([0] + [lg.n_sessions for lg in logs])

    def cat(name: str, dtype) -> np.ndarray:
        parts = [getattr(lg, name) for lg in logs]
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

    entry = {name: cat(name, getattr(logs[0], name).dtype if logs else np.int64) for name in ClickLog._ENTRY[1:]}
    if not logs:
        entry["click"], entry["propensity"] = entry["click"].astype(np.int8), entry["propensity"].astype(np.float64)
    session = (np.concatenate([lg.session + s for lg, s in zip(logs, shift)]) if logs else np.zeros(0, dtype=np.int64))
    return ClickLog(session=session.astype(np.int64), **entry, session_query=cat("session_query", np.int64),
                    session_mode=cat("session_mode", np.int8), session_swap=cat("session_swap", np.int64),
                    meta=dict(meta if meta is not None else (logs[0].meta if logs else {})))
