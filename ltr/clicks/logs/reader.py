"""The one reader of click-log tables: Parquet or CSV files (or a folder of them), in record batches.

Every action that reads a log table goes through :func:`iter_log_batches`, which yields the columns it asks
for batch by batch (``batch_size`` rows), whatever the file format:

* Parquet (``.parquet``): the columns are read as typed, the simulator's settings come from the schema
  metadata (``b"ltr.clicklog"``, :func:`read_log_meta`);
* CSV (``.csv``, a header line naming the columns, comma separated): read by pyarrow's streaming CSV
  reader, each column's type inferred from the first block of the file (integers, floats or text); a CSV
  log carries no simulator settings.

The log schema (the columns and what they mean) is :data:`ltr.clicks.logs.table.SCHEMA`. Session ids may
be integers or text: text ids are numbered by first appearance as the file is read (a dictionary of the
ids seen, one entry per session), so that a session whose rows come back after another session's reads as
going back, as an integer id that decreases does (:class:`ltr.clicks.logs.list_stream.UnsortedSessionsError`
for the readers that need each session's rows together). Rows are numbered from 1 in every message: row N
is the N-th data row of the file (a CSV header is not a row).
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["LOG_SUFFIXES", "log_files", "is_log_table", "file_format", "read_log_meta", "log_columns",
           "iter_log_batches", "id_mode", "row_text"]

#: the columns every log table has (the schema: :mod:`ltr.clicks.logs.table`)
REQUIRED = ("session", "query", "doc", "position", "click")
#: what a log table's file names end with
LOG_SUFFIXES = (".parquet", ".csv")
#: the key of the simulator's settings in a Parquet log's schema metadata
META_KEY = b"ltr.clicklog"
#: bytes of a CSV file parsed at a time (its first block also fixes the columns' types)
CSV_BLOCK_BYTES = 1 << 22


def row_text(where: tuple[str, int], i: int = 0) -> str:
    """``FILE: row N``, N the 1-based row of entry ``i`` of the batch that begins at 0-based row ``where[1]``.

    >>> row_text(("log.csv", 0), 2)
    'log.csv: row 3'
    """
    return f"{where[0]}: row {where[1] + i + 1}"


def file_format(name: str | os.PathLike) -> str:
    """``"csv"`` for a name ending in .csv, else ``"parquet"``."""
    return "csv" if os.fspath(name).lower().endswith(".csv") else "parquet"


def is_log_table(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a log table: a ``.parquet`` or ``.csv`` file, or a folder holding such files."""
    p = os.fspath(path)
    if os.path.isdir(p):
        from pathlib import Path

        return any(f.suffix.lower() in LOG_SUFFIXES for f in Path(p).rglob("*") if f.is_file())
    return p.lower().endswith(LOG_SUFFIXES)


def log_files(path: str | os.PathLike) -> list[str]:
    """The files of a log: ``path`` itself, or the ``.parquet`` (or ``.csv``) files under a folder in name order;
    a folder holding both kinds is refused (which one is the log?)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        from pathlib import Path

        found = {s: sorted(str(f) for f in Path(p).rglob("*") if f.is_file() and f.suffix.lower() == s)
                 for s in LOG_SUFFIXES}
        kinds = [s for s, files in found.items() if files]
        if not kinds:
            raise LtrError(f"{p}: the folder holds no .parquet or .csv file")
        if len(kinds) > 1:
            raise LtrError(f"{p}: the folder holds both .parquet and .csv files; a log is one or the other")
        return found[kinds[0]]
    if not os.path.isfile(p):
        raise LtrError(f"{p}: no such click log")
    return [p]


def _damaged(name: str, exc: Exception) -> LtrError:
    kind = "CSV" if file_format(name) == "csv" else "Parquet"
    return LtrError(f"{name}: cannot read a {kind} click log ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})")


def read_log_meta(path: str | os.PathLike) -> dict:
    """The simulator's settings stored in the first file's schema ({} for a log from outside: a CSV log, or a
    Parquet log written by anything but ``ltr clicks``), with ``"propensity": "absent"`` when the log has no
    propensity column (:data:`ltr.clicks.logs.table.PROPENSITY_ABSENT`)."""
    import pyarrow.parquet as pq

    first = log_files(path)[0]
    meta = {}
    if file_format(first) != "csv":
        try:
            raw = (pq.read_schema(first).metadata or {}).get(META_KEY)
        except Exception as exc:  # pyarrow raises many kinds on a damaged file
            raise _damaged(first, exc) from None
        meta = json.loads(raw) if raw else {}
    if "propensity" not in log_columns(path):
        meta["propensity"] = "absent"
    return meta


def _open_csv(name: str, columns=None):
    import pyarrow.csv as pcsv

    convert = pcsv.ConvertOptions(include_columns=list(columns)) if columns is not None else None
    return pcsv.open_csv(name, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES), convert_options=convert)


def _schema(name: str):
    """The arrow schema of one file of a log (a CSV file's: its types inferred from the first block)."""
    import pyarrow.parquet as pq

    try:
        return _open_csv(name).schema if file_format(name) == "csv" else pq.read_schema(name)
    except Exception as exc:  # pyarrow raises many kinds on a damaged file
        raise _damaged(name, exc) from None


def log_columns(path: str | os.PathLike) -> list[str]:
    """The columns every file of the log has (an optional column counts only when all its files hold it)."""
    files = log_files(path)
    names = _schema(files[0]).names
    for name in files[1:]:
        have = set(_schema(name).names)
        names = [c for c in names if c in have]
    return list(names)


def _check_required(name: str, have: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in have]
    if missing:
        raise LtrError(f"{name}: not a click log table (missing columns: {', '.join(missing)}; the log schema is in "
                       "the clicks guide, 'The log schema')")


def _file_batches(name: str, columns: list[str], batch_size: int):
    """Record batches of at most ``batch_size`` rows of the columns of one file (those it has)."""
    import pyarrow.parquet as pq

    if file_format(name) == "csv":
        have = _schema(name).names
        _check_required(name, have)
        reader = _open_csv(name, [c for c in columns if c in have])
        for batch in reader:
            for start in range(0, batch.num_rows, batch_size):
                yield batch.slice(start, batch_size)
        return
    try:
        pf = pq.ParquetFile(name)
    except Exception as exc:  # pyarrow raises many kinds on a damaged file
        raise _damaged(name, exc) from None
    have = pf.schema_arrow.names
    _check_required(name, have)
    yield from pf.iter_batches(batch_size=batch_size, columns=[c for c in columns if c in have])


def _total_rows(files: list[str]) -> int | None:
    """Rows of a Parquet log from the files' footers, for the progress bar; None for CSV or a file that
    cannot be read (the batches then raise the located error)."""
    import pyarrow.parquet as pq

    if any(file_format(name) == "csv" for name in files):
        return None
    try:
        return sum(pq.ParquetFile(name).metadata.num_rows for name in files)
    except Exception:  # any damage is reported while reading, with its file
        return None


class _SessionNumbers:
    """Text session ids as integers, numbered by first appearance over the whole read."""

    def __init__(self):
        self.seen: dict[str, int] = {}

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        text = np.asarray(ids).astype(str)
        uniq, first, inv = np.unique(text, return_index=True, return_inverse=True)
        numbers = np.empty(len(uniq), dtype=np.int64)
        for u in np.argsort(first, kind="stable"):
            numbers[u] = self.seen.setdefault(str(uniq[u]), len(self.seen))
        return numbers[inv.ravel()]


class _PlaceCheck:
    """The rule for a session that shows two items at one position, the same for every reader: refused, naming
    both rows. Duplicates are looked for among the rows of one batch and against the rows of the previous batch's
    last session (a session whose rows come together, as every streamed reader needs, is checked whole)."""

    def __init__(self):
        self.session, self.rows = None, {}

    def __call__(self, session: np.ndarray, position: np.ndarray, where: tuple[str, int]) -> None:
        try:
            session, position = np.asarray(session, dtype=np.int64), np.asarray(position, dtype=np.int64)
        except (TypeError, ValueError):
            return  # not integers: the reader that converts them names the row
        if not len(session):
            return
        order = np.lexsort((position, session))
        s, p = session[order], position[order]
        same = np.flatnonzero((s[1:] == s[:-1]) & (p[1:] == p[:-1]))
        if len(same):
            first, second = sorted((int(order[same[0]]), int(order[same[0] + 1])))
            self._refuse(where, second, position[second], row_text(where, first))
        if self.session is not None:
            carried = np.flatnonzero(session == self.session)
            for i in carried:
                if int(position[i]) in self.rows:
                    self._refuse(where, int(i), position[i], self.rows[int(position[i])])
        last = session[-1]
        tail = np.flatnonzero(session == last)
        rows = self.rows if last == self.session else {}
        rows.update({int(position[i]): f"{where[0]}: row {where[1] + int(i) + 1}" for i in tail})
        self.session, self.rows = last, rows

    @staticmethod
    def _refuse(where, i: int, position, other: str) -> None:
        raise LtrError(f"{row_text(where, i)}: the session shows a second item at position {int(position)} (the first "
                       f"is at {other}); a session shows one item per position, so the log is refused")


def _numpy(batch, name: str, where: tuple[str, int]) -> np.ndarray:
    col = batch.column(batch.schema.get_field_index(name))
    if col.null_count:
        bad = int(np.flatnonzero(np.asarray(col.is_null()))[0])
        raise LtrError(f"{row_text(where, bad)}: column {name!r} is empty ({col.null_count} missing values in rows "
                       f"{where[1] + 1}..{where[1] + len(col)})")
    return col.to_numpy(zero_copy_only=False)


def iter_log_batches(path: str | os.PathLike, columns: list[str], batch_size: int = 1_000_000,
                     progress: bool = False) -> Iterator[tuple[tuple[str, int], dict]]:
    """``((file, first row), {column: array})`` per record batch, files in name order; the first row is
    0-based (:func:`row_text` gives the 1-based row of a message). An optional column is left out of the dict
    when a file lacks it; a text ``session`` column comes as integers numbered by first appearance (module
    docstring). Reading ``session`` and ``position`` together refuses a session that shows two items at one
    position (:class:`_PlaceCheck`). ``progress``: a tqdm bar over the log's rows (on stderr)."""
    from tqdm.auto import tqdm

    if batch_size < 1:
        raise LtrError(f"batch_size must be >= 1, got {batch_size}")
    files = log_files(path)
    sessions, places = _SessionNumbers(), _PlaceCheck()
    with tqdm(total=_total_rows(files) if progress else None, desc="reading the click log", unit="row",
              unit_scale=True, disable=not progress) as bar:
        for name in files:
            row = 0
            batches = _file_batches(name, columns, batch_size)
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except LtrError:
                    raise
                except Exception as exc:  # a CSV block whose values do not fit the inferred types, a damaged page
                    raise _damaged(name, exc) from None
                where = (name, row)
                cols = {c: _numpy(batch, c, where) for c in columns if c in batch.schema.names}
                if "session" in cols and cols["session"].dtype.kind not in "iub":
                    cols["session"] = sessions(cols["session"])
                if "session" in cols and "position" in cols:
                    places(cols["session"], cols["position"], where)
                yield where, cols
                row += batch.num_rows
                bar.update(batch.num_rows)


def id_mode(path, ids: str) -> str:
    """``index`` or ``id``; ``auto`` reads the first file's schema (text query or doc columns mean ids)."""
    import pyarrow as pa

    if ids not in ("auto", "index", "id"):
        raise LtrError(f"unknown log id mode {ids!r}: use auto, index or id")
    if ids != "auto":
        return ids
    schema = _schema(log_files(path)[0])
    text = [n for n in ("query", "doc") if n in schema.names and
            (pa.types.is_string(schema.field(n).type) or pa.types.is_large_string(schema.field(n).type)
             or pa.types.is_dictionary(schema.field(n).type))]
    return "id" if text else "index"
