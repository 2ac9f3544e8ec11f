"""Click logs as tables: one row per shown item, written to and read from Parquet (pyarrow).

Columns (``REQUIRED`` first)::

    session   int    a session's id (any integers; renumbered 0..S-1 in order of first appearance)
    query     int    the query's index in the labelled data set (0..Q-1)
    doc       int    the shown item's row index in the data set
    position  int    1-based shown position
    click     int    0 or 1
    propensity      float  optional: the logging examination propensity (absent: 1.0, and meta says so)
    logged_rank     int    optional: the item's rank under the logging ranker (absent: = position)
    session_mode    int    optional: 0 production, 1 randomized, 2 swap (absent: 0)
    session_swap    int    optional: the position swapped with 1 in a swap session (absent: 0)
    logging_score   float  optional: the logging ranker's score of the item (kept in meta when present)

The simulator's settings (:attr:`ClickLog.meta`) travel as JSON in the schema metadata under
``b"ltr.clicklog"``, so ``read_log_parquet(write_log_parquet(log))`` gives back the same log.
Rows may come in any order: they are sorted by (session, position) on reading.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ltr.clicks.logs.click_log import ClickLog, log_problem
from ltr.errors import LtrError
from ltr.io_utils import atomic_path

__all__ = ["REQUIRED", "log_to_table", "write_log_parquet", "read_log_parquet", "is_log_table"]

REQUIRED = ("session", "query", "doc", "position", "click")
META_KEY = b"ltr.clicklog"


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


def is_log_table(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a Parquet log (a ``.parquet`` file or a folder of them)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        from pathlib import Path

        return any(Path(p).rglob("*.parquet"))
    return p.endswith(".parquet")


def _column(table, name: str, path, dtype) -> np.ndarray:
    col = table.column(name)
    if col.null_count:
        raise LtrError(f"{path}: column {name!r} has {col.null_count} missing values")
    try:
        return np.asarray(col.to_numpy(), dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise LtrError(f"{path}: column {name!r} is not numeric ({exc})") from None


def read_log_parquet(path: str | os.PathLike, *, ids: Any = None, modes: Any = None) -> ClickLog:
    """Read a Parquet click log (a file or a folder of files; see the module docstring). ``ids``: a
    :class:`ltr.clicks.logs.ids.LogIds` that maps the query and doc columns to the data set's query
    indices and rows (for logs naming them by id); ``modes``: read only the sessions of these modes."""
    import pyarrow.parquet as pq

    try:
        filters = None
        if modes is not None:
            import pyarrow.dataset as pads

            if "session_mode" in pads.dataset(path, format="parquet").schema.names:
                filters = [("session_mode", "in", [int(m) for m in modes])]
            elif 0 not in modes:
                raise LtrError(f"{path}: the log has no session_mode column (all its sessions are production "
                               "sessions): it has no randomized or swap traffic")
        table = pq.read_table(path, filters=filters)
    except LtrError:
        raise
    except Exception as exc:  # pyarrow raises many kinds on a missing or damaged file
        raise LtrError(f"{path}: cannot read a Parquet click log ({type(exc).__name__}: {str(exc)[:160]})") from None
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise LtrError(f"{path}: not a click log table (missing columns: {', '.join(missing)})")
    raw = (table.schema.metadata or {}).get(META_KEY)
    meta = json.loads(raw) if raw else {}
    f = {name: _column(table, name, path, np.int64) for name in REQUIRED if ids is None or name not in ("query", "doc")}
    if ids is not None:
        for name in ("query", "doc"):
            if table.column(name).null_count:
                raise LtrError(f"{path}: column {name!r} has {table.column(name).null_count} missing values")
        f["query"], f["doc"] = ids.rows(table.column("query").to_numpy(zero_copy_only=False),
                                        table.column("doc").to_numpy(zero_copy_only=False), (str(path), 0))
    n = len(f["session"])
    opt = {name: _column(table, name, path, dtype) if name in table.column_names else None
           for name, dtype in (("propensity", np.float64), ("logged_rank", np.int64), ("session_mode", np.int64),
                               ("session_swap", np.int64))}
    if opt["propensity"] is None:
        meta.setdefault("propensity", "absent (set to 1)")
    _, first, sid = np.unique(f["session"], return_index=True, return_inverse=True)
    # Renumber sessions by first appearance, then sort rows by (session, position).
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    sid = rank[sid.ravel()]
    order = np.lexsort((f["position"], sid))
    sid = sid[order]
    s_first = np.flatnonzero(np.r_[True, np.diff(sid) > 0]) if n else np.zeros(0, dtype=np.int64)
    fields = {
        "session": sid, "query": f["query"][order], "doc": f["doc"][order], "position": f["position"][order],
        "logged_rank": (opt["logged_rank"] if opt["logged_rank"] is not None else f["position"])[order],
        "click": f["click"][order].astype(np.int8),
        "propensity": (opt["propensity"] if opt["propensity"] is not None else np.ones(n))[order],
        "session_query": f["query"][order][s_first],
        "session_mode": (opt["session_mode"][order][s_first] if opt["session_mode"] is not None
                         else np.zeros(len(s_first))).astype(np.int8),
        "session_swap": (opt["session_swap"][order][s_first] if opt["session_swap"] is not None
                         else np.zeros(len(s_first))).astype(np.int64),
    }
    why = log_problem(fields)
    if why is None and np.any(fields["session_query"][fields["session"]] != fields["query"]):
        why = "a session shows items of more than one query"
    if why:
        raise LtrError(f"{path}: not a valid click log: {why}")
    return ClickLog(**fields, meta=meta)
