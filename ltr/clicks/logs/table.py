"""Click logs as tables, one row per shown item: the log schema, Parquet writing, and reading a whole log.

The log schema (:data:`SCHEMA`; Parquet or CSV, read by :mod:`ltr.clicks.logs.reader`)::

    session        int or text   required: a session's id; its rows form one shown list
    query          int or text   required: the query, an index into the labelled data (0..Q-1), or its query id
    doc            int or text   required: the shown item, a row index of the data (0..N-1), or its document id
    position       int           required: 1-based shown position
    click          0 / 1         required
    propensity     float         optional: the logging examination probability of the entry, in [0, 1]
    logged_rank    int           optional: the item's rank under the logging ranker before any intervention
                                 (absent: its position)
    logging_score  float         optional: the logging ranker's score of the item (checked to be numbers;
                                 no estimator reads it yet)
    session_mode   int           optional: 0 production, 1 randomized order, 2 swap (absent: 0)
    session_swap   int           optional: the position swapped with 1 in a swap session (absent: 0)

Indices or ids (``query`` and ``doc``) are told apart by :mod:`ltr.clicks.logs.ids` (text means ids; integer
ids need ``--log-ids id``). A log without a ``propensity`` column says so: its :attr:`ClickLog.meta` records
``"propensity": "absent"`` and the entries hold 1.0 as a placeholder that no estimator may read as a
propensity (:func:`ltr.clicks.estimators.unbiased.require_propensity` refuses).

The simulator's settings (:attr:`ClickLog.meta`) travel as JSON in a Parquet file's schema metadata under
``b"ltr.clicklog"``, so ``read_log_table(write_log_parquet(log))`` gives back the same log. Rows may come in
any order: they are sorted by (session, position) on reading, sessions numbered by first appearance.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ltr.clicks.logs.click_log import ClickLog, log_problem
from ltr.clicks.logs.reader import META_KEY, REQUIRED, is_log_table, iter_log_batches, row_text
from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_path

__all__ = ["REQUIRED", "OPTIONAL", "SCHEMA", "log_to_table", "write_log_parquet", "read_log_table", "read_log_parquet",
           "is_log_table", "PROPENSITY_ABSENT"]

OPTIONAL = ("propensity", "logged_rank", "logging_score", "session_mode", "session_swap")
#: column -> (type, meaning): the log schema of the module docstring
SCHEMA = {
    "session": ("int or text", "a session's id; its rows form one shown list"),
    "query": ("int or text", "the query: an index into the labelled data, or its query id"),
    "doc": ("int or text", "the shown item: a row index of the labelled data, or its document id"),
    "position": ("int", "1-based shown position"),
    "click": ("0 or 1", "whether the item was clicked"),
    "propensity": ("float, optional", "the logging examination probability of the entry, in [0, 1]"),
    "logged_rank": ("int, optional", "the item's rank under the logging ranker before any intervention"),
    "logging_score": ("float, optional", "the logging ranker's score of the item (no estimator reads it yet)"),
    "session_mode": ("int, optional", "0 production, 1 randomized order, 2 swap"),
    "session_swap": ("int, optional", "the position swapped with position 1 in a swap session"),
}
#: what ``ClickLog.meta["propensity"]`` says of a log read without a propensity column
PROPENSITY_ABSENT = "absent"


def log_to_table(log: ClickLog, first_session: int = 0):
    """The log as a ``pyarrow.Table``, one row per entry, ``meta`` in the schema metadata; session ids
    are shifted by ``first_session`` (a chunk of a longer log)."""
    import pyarrow as pa

    cols = {
        "session": log.session + first_session, "query": log.query, "doc": log.doc, "position": log.position,
        "click": log.click.astype(np.int8), "propensity": log.propensity, "logged_rank": log.logged_rank,
        "session_mode": log.session_mode[log.session].astype(np.int8), "session_swap": log.session_swap[log.session],
    }
    table = pa.table({k: pa.array(np.ascontiguousarray(v)) for k, v in cols.items()})
    return table.replace_schema_metadata({META_KEY: json.dumps(log.meta).encode()})


def write_log_parquet(log: ClickLog, path: str | os.PathLike) -> None:
    """Write the log to a Parquet file, atomically."""
    import pyarrow.parquet as pq

    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(log_to_table(log), tmp)


class _Rows:
    """The batches of a whole log, concatenated, with the (file, row) of every entry for messages."""

    def __init__(self, batches: list):
        self.batches = batches
        self.starts = np.cumsum([0] + [len(cols["position"]) for _, cols in batches])

    def where(self, i: int) -> str:
        """``FILE: row N`` of global entry ``i`` (1-based row in its file)."""
        b = int(np.searchsorted(self.starts, i, side="right") - 1)
        return row_text(self.batches[b][0], i - int(self.starts[b]))

    def column(self, name: str) -> np.ndarray | None:
        """The column over all batches, or None when a batch lacks it (an optional column counts only when every
        file holds it)."""
        if not self.batches or any(name not in cols for _, cols in self.batches):
            return None
        return np.concatenate([cols[name] for _, cols in self.batches])

    def integers(self, name: str) -> np.ndarray | None:
        """The column as int64 (None when absent); a value that is not an integer is an error naming its row."""
        values = self.column(name)
        if values is None or values.dtype.kind in "iub":
            return None if values is None else values.astype(np.int64)
        if values.dtype.kind == "f":
            bad = ~np.isfinite(values) | (values != np.round(values))
        else:
            bad = np.array([not _is_integer(v) for v in values], dtype=bool)
        if bad.any():
            i = int(np.argmax(bad))
            hint = " (ids from outside: --log-ids id)" if name in ("query", "doc") else ""
            raise LtrError(f"{self.where(i)}: column {name!r} holds {values[i]!r}, expected an integer{hint}")
        return np.asarray([int(float(v)) for v in values] if values.dtype.kind not in "f" else values, dtype=np.int64)

    def floats(self, name: str) -> np.ndarray | None:
        values = self.column(name)
        if values is None:
            return None
        try:
            return np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            i = next(i for i, v in enumerate(values) if not _is_number(v))
            raise LtrError(f"{self.where(i)}: column {name!r} holds {values[i]!r}, expected a number") from None


def _is_integer(v) -> bool:
    try:
        return float(v) == int(float(v))
    except (TypeError, ValueError, OverflowError):
        return False


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def _check_rows(rows: _Rows, f: dict) -> None:
    """Every entry's values against the schema; an error names the file and the 1-based row."""
    p = f["propensity"]
    rules = [
        ("position", f["position"] < 1, "positions >= 1"),
        ("click", (f["click"] != 0) & (f["click"] != 1), "clicks 0 or 1"),
        ("propensity", ~((p >= 0) & (p <= 1)), "propensities in [0, 1]"),
        ("logged_rank", f["logged_rank"] < 1, "ranks >= 1"),
        ("session_mode", ~np.isin(f["session_mode"], (0, 1, 2)), "modes 0, 1 or 2"),
        ("session_swap", f["session_swap"] < 0, "positions >= 0"),
        ("query", f["query"] < 0, "query indices >= 0"),
        ("doc", f["doc"] < 0, "row indices >= 0"),
    ]
    for name, bad, want in rules:
        if bad.any():
            i = int(np.argmax(bad))
            raise LtrError(f"{rows.where(i)}: {name} is {f[name][i].item()!r}, expected {want}")


def _fields(rows: _Rows, ids: Any) -> dict:
    """The entry arrays of the rows read (ids mapped, optional columns filled in), in file order."""
    f = {name: rows.integers(name) for name in ("session", "position", "click")}
    if ids is None:
        f["query"], f["doc"] = rows.integers("query"), rows.integers("doc")
    else:
        parts = [ids.rows(cols["query"], cols["doc"], where) for where, cols in rows.batches]
        f["query"] = np.concatenate([q for q, _ in parts]).astype(np.int64)
        f["doc"] = np.concatenate([d for _, d in parts]).astype(np.int64)
    n = len(f["session"])
    p = rows.floats("propensity")
    f["propensity"] = np.ones(n) if p is None else p
    rows.floats("logging_score")  # checked to be numbers; read by no estimator yet
    rank = rows.integers("logged_rank")
    f["logged_rank"] = rank if rank is not None else f["position"].copy()
    for name in ("session_mode", "session_swap"):
        value = rows.integers(name)
        f[name] = np.zeros(n, dtype=np.int64) if value is None else value
    return f


def _read_rows(path, modes) -> _Rows:
    """Every batch of the log, keeping the sessions of ``modes``."""
    columns = list(REQUIRED + OPTIONAL)
    batches = list(iter_log_batches(path, columns, batch_size=1 << 20))
    if modes is not None:
        if batches and all("session_mode" not in cols for _, cols in batches) and 0 not in modes:
            raise LtrError(f"{path}: the log has no session_mode column (all its sessions are production sessions): "
                           "it has no randomized or swap traffic")
        kept = []
        for where, cols in batches:
            mode = np.asarray(cols.get("session_mode", np.zeros(len(cols["position"]))))
            keep = np.isin(mode, [int(m) for m in modes])
            # rows dropped here leave holes in the batch: it is split where they were, so rows keep their numbers
            for start, stop in _runs(keep):
                kept.append(((where[0], where[1] + start), {c: v[start:stop] for c, v in cols.items()}))
        batches = kept
    return _Rows(batches)


def _runs(keep: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of every run of True in ``keep``."""
    edges = np.flatnonzero(np.diff(np.r_[0, keep.astype(np.int8), 0]))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def read_log_table(path: str | os.PathLike, *, ids: Any = None, modes: Any = None) -> ClickLog:
    """Read a whole click log table, Parquet or CSV (a file or a folder of files; module docstring). ``ids``:
    a :class:`ltr.clicks.logs.ids.LogIds` that maps the query and doc columns to the data set's query indices
    and rows (for logs naming them by id); ``modes``: read only the sessions of these modes."""
    from ltr.clicks.logs.reader import read_log_meta

    rows = _read_rows(path, modes)
    if not any(len(cols["position"]) for _, cols in rows.batches):
        asked = f" in the sessions of mode {sorted(int(m) for m in modes)}" if modes is not None else ""
        raise LtrError(f"{path}: the click log holds no rows{asked}: nothing to learn from")
    meta = read_log_meta(path)
    if rows.column("propensity") is None:
        meta["propensity"] = PROPENSITY_ABSENT
    f = _fields(rows, ids)
    _check_rows(rows, f)
    return _assemble(rows, f, meta, path)


def _assemble(rows: _Rows, f: dict, meta: dict, path) -> ClickLog:
    """The :class:`ClickLog` of the checked entries: sessions numbered by first appearance, rows sorted by
    (session, position)."""
    n = len(f["session"])
    _, first, sid = np.unique(f["session"], return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    sid = rank[sid.ravel()]
    order = np.lexsort((f["position"], sid))
    sid = sid[order]
    s_first = np.flatnonzero(np.r_[True, np.diff(sid) > 0]) if n else np.zeros(0, dtype=np.int64)
    fields = {
        "session": sid, "query": f["query"][order], "doc": f["doc"][order], "position": f["position"][order],
        "logged_rank": f["logged_rank"][order], "click": f["click"][order].astype(np.int8),
        "propensity": f["propensity"][order], "session_query": f["query"][order][s_first],
        "session_mode": f["session_mode"][order][s_first].astype(np.int8),
        "session_swap": f["session_swap"][order][s_first].astype(np.int64),
    }
    twice = np.flatnonzero((sid[1:] == sid[:-1]) & (fields["position"][1:] == fields["position"][:-1]))
    if len(twice):
        first, second = sorted((int(order[twice[0]]), int(order[twice[0] + 1])))
        raise LtrError(f"{rows.where(second)}: the session shows a second item at position "
                       f"{int(fields['position'][twice[0]])} (the first is at {rows.where(first)}); a session shows one "
                       "item per position, so the log is refused")
    mixed = fields["session_query"][fields["session"]] != fields["query"]
    if mixed.any():
        raise LtrError(f"{rows.where(int(order[np.argmax(mixed)]))}: a session shows items of more than one query")
    why = log_problem(fields)
    if why:
        raise LtrError(f"{path}: not a valid click log: {why}")
    return ClickLog(**fields, meta=meta)


def read_log_parquet(path: str | os.PathLike, *, ids: Any = None, modes: Any = None) -> ClickLog:
    """:func:`read_log_table` (the name of before CSV logs were read too)."""
    return read_log_table(path, ids=ids, modes=modes)
