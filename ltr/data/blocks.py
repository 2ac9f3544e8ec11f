"""Rows that arrive in blocks (a Parquet file's record batches, an SVMlight file's lines): one block
type, and the query bookkeeping every reader shares.

A reader that streams (``ltr convert``) or reads a table in parts turns each part into a
:class:`Block`; :class:`QueryRuns` follows the query column across blocks and enforces the toolkit's
rule that the rows of one query are contiguous (a query that comes back after other queries is an
error naming both places; nothing is regrouped silently, because row order is the tie-break of the
metrics). Per-query values given per row (the query id itself when it differs from the grouping key,
user ids) must be the same on every row of a query.

Memory: O(number of queries), never O(rows): a block is looked at once, and only the run starts are
kept. The contiguity check runs at :meth:`QueryRuns.finish`, over the run ids (one per query), so
it needs no hash set of every id seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["Block", "QueryRuns"]


@dataclass
class Block:
    """Consecutive rows of a data source.

    features [n, F] float32; labels [n] float64; query_keys [n]: rows of a query share a key (the
    query column, or the group number of a LightGBM ``.query`` sidecar); positions [n] int64: where
    each row is in the source (line numbers, row numbers), for error messages. Optional per row:
    query_ids (when the stored query id is not the key), doc_ids, weights, user_ids.
    """

    features: np.ndarray
    labels: np.ndarray
    query_keys: np.ndarray
    positions: np.ndarray
    query_ids: np.ndarray | None = None
    doc_ids: np.ndarray | None = None
    weights: np.ndarray | None = None
    user_ids: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return int(self.labels.shape[0])


class QueryRuns:
    """Query boundaries of a stream of rows, checked for contiguity.

    ``error_at(position, message)`` turns a source position (``Block.positions``) into the error to
    raise (e.g. a :class:`~ltr.base.errors.DataFormatError` naming the file and line); ``describe(position)``
    names a position inside a message ("line 7", "row 7").

    >>> runs = QueryRuns(lambda pos, msg: LtrError(f"row {pos}: {msg}"))
    >>> runs.add(np.array([7, 7, 3]), np.arange(3))
    >>> runs.add(np.array([3, 5]), np.arange(3, 5))
    >>> offsets, ids, _ = runs.finish()
    >>> offsets.tolist(), ids.tolist()
    ([0, 2, 4, 5], [7, 3, 5])
    """

    def __init__(self, error_at: Callable[[int, str], Exception], describe: Callable[[int], str] = "row {}".format):
        self.error_at = error_at
        self.describe = describe
        self._starts: list[np.ndarray] = []  # global row of each run start
        self._keys: list[np.ndarray] = []
        self._where: list[np.ndarray] = []  # source position of each run start
        self._values: dict[str, list[np.ndarray]] = {}
        self._last_key = None
        self._last_values: dict[str, object] = {}
        self.n_rows = 0

    def add(self, keys: np.ndarray, positions: np.ndarray, **per_query: np.ndarray | None) -> None:
        """Rows with these query ``keys``; ``per_query`` values (e.g. ``query_ids=``, ``user_ids=``,
        per row) must be constant within a query and are kept once per query."""
        keys = np.asarray(keys)
        n = keys.shape[0]
        if n == 0:
            return
        change = np.ones(n, dtype=bool)
        change[1:] = keys[1:] != keys[:-1]
        continues = self.n_rows > 0 and keys[0] == self._last_key
        if continues:
            change[0] = False
        run_of_row = np.cumsum(change) - 1  # -1 on rows that continue the previous block's query
        starts = np.flatnonzero(change)
        for name, values in per_query.items():
            if values is None:
                continue
            values = np.asarray(values)
            table = values[starts]  # the value of each query, from its first row
            if continues:  # row -1 of the table: the query the previous block ended with
                table = np.concatenate([np.asarray([self._last_values[name]]), table])
            first = table[run_of_row + 1 if continues else run_of_row]
            bad = np.flatnonzero(values != first)
            if bad.size:
                r = int(bad[0])
                what = name.removesuffix("_ids").replace("_", " ")
                raise self.error_at(
                    int(positions[r]),
                    f"{what} {_show(values[r])} differs from {what} {_show(first[r])} of the query's first row",
                )
            self._values.setdefault(name, []).append(values[starts])
            self._last_values[name] = values[-1]
        self._starts.append(starts.astype(np.int64) + self.n_rows)
        self._keys.append(keys[starts])
        self._where.append(np.asarray(positions)[starts].astype(np.int64))
        self._last_key = keys[-1]
        self.n_rows += n

    def finish(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(query_offsets [Q+1], run keys [Q], {name: per-query values [Q]})``; raises when a query
        comes back after other queries."""
        starts = _cat(self._starts, np.int64)
        keys = _cat(self._keys, None)
        where = _cat(self._where, np.int64)
        if keys.size:
            order = np.argsort(keys, kind="stable")
            sorted_keys = keys[order]
            repeated = order[1:][sorted_keys[1:] == sorted_keys[:-1]]
            if repeated.size:
                run = int(repeated.min())  # the first run that repeats an earlier query
                first_run = int(np.flatnonzero(keys == keys[run])[0])
                raise self.error_at(
                    int(where[run]),
                    f"rows of query {_show(keys[run])} are not contiguous: the query starts at "
                    f"{self.describe(int(where[first_run]))} and comes back here after other queries "
                    "(group each query's rows together, e.g. sort by query keeping the row order, "
                    "or pass sort_by_query=True / --sort-by-query)",
                )
        offsets = np.append(starts, self.n_rows).astype(np.int64)
        values = {name: _cat(parts, None) for name, parts in self._values.items()}
        return offsets, keys, values


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=dtype or np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _show(value) -> str:
    return repr(value.item()) if isinstance(value, np.generic) else repr(value)
