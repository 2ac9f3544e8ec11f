"""Click logs larger than memory: written chunk by chunk, read in record batches and aggregated.

Writing: :func:`write_log_stream` writes the chunks of :func:`ltr.clicks.simulate.click_models.simulate_click_chunks`
into one Parquet file (a row group per chunk), holding one chunk at a time.

Reading: :func:`aggregate_log` reads a Parquet log (a file or a folder) in record batches of
``batch_size`` rows and keeps, per (query, document, position) cell of the data set,

    n[c]      = impressions                      clicks[c] = sum of the clicks
    ips[c]    = sum of click / max(p, clip)      (p the logged propensity; 1 when the log has none)
    examined[c] = sum of p                       (the expected examinations of the cell)

so its memory is the number of distinct cells (at most rows x positions of the data set), however
many sessions the log holds. The counts are exact whatever the batch size; ``ips`` is a float sum
whose last bits depend on the order of the additions (batches of another size differ by ~1e-16
relative). :func:`aggregate_from_log` builds the same table from a log in memory.

What the aggregate is enough for: regression EM (its observations are exactly these cells,
:meth:`LogAggregate.observations`), and training with the estimators whose corrected click is a
sum of per-entry values: ``naive``, ``ips``, ``rem`` and ``affine``
(:mod:`ltr.clicks.estimators.cells`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.logs.reader import id_mode, iter_log_batches, read_log_meta
from ltr.base.errors import LtrError

__all__ = ["write_log_stream", "read_log_meta", "iter_log_batches", "LogAggregate", "aggregate_log",
           "aggregate_from_log", "id_mode", "query_sessions", "batch_propensity",
           "batch_positions_and_clicks"]

_POS_BITS = 20  # a cell key is row * 2^20 + (position - 1)


def write_log_stream(chunks: Iterable[tuple[int, ClickLog]], path: str | os.PathLike, meta: dict,
                     on_chunk=None) -> None:
    """Write ``(start, log)`` chunks (sessions numbered from ``start``) to one Parquet file, atomically;
    ``meta`` goes into the schema metadata; ``on_chunk(start, log)`` sees each chunk before it is dropped."""
    import pyarrow.parquet as pq

    from ltr.clicks.logs.reader import META_KEY
    from ltr.clicks.logs.table import log_to_table
    from ltr.base.io_utils import atomic_path

    with atomic_path(path, suffix=".parquet") as tmp:
        writer = None
        try:
            for start, log in chunks:
                table = log_to_table(log, first_session=start).replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
                if on_chunk is not None:
                    on_chunk(start, log)
            if writer is None:  # no session at all: an empty table with the log's columns
                empty = log_to_table(ClickLog(*[np.zeros(0, np.int64)] * 5, np.zeros(0, np.int8), np.zeros(0),
                                              np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.int64)))
                pq.write_table(empty.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}), tmp)
        finally:
            if writer is not None:
                writer.close()


@dataclass
class LogAggregate:
    """Per (row, position) cell, sorted by (row, position): ``doc`` (data-set row), ``query`` (its query
    index), ``position``, ``n`` impressions, ``clicks``, ``ips`` (sum of click / max(p, clip)), ``examined``
    (sum of the logged propensities p: the cell's expected examinations)."""

    doc: np.ndarray
    query: np.ndarray
    position: np.ndarray
    n: np.ndarray
    clicks: np.ndarray
    ips: np.ndarray
    examined: np.ndarray
    clip: float
    meta: dict = field(default_factory=dict)
    n_entries: int = 0
    n_batches: int = 0

    @property
    def n_sessions(self) -> int:
        """Impressions at position 1: the number of sessions when every session shows position 1."""
        return int(self.n[self.position == 1].sum())

    def observations(self):
        """The cells as regression EM's observations (item = row, with their queries)."""
        from ltr.clicks.logs.counts import Observations

        return Observations(self.doc.copy(), self.position.copy(), self.n.copy(), self.clicks.copy(), self.query.copy())

    def ctr_by_position(self) -> tuple[np.ndarray, np.ndarray]:
        """Clicks and impressions per position 1..K."""
        k = int(self.position.max()) if len(self.position) else 0
        return (np.bincount(self.position - 1, weights=self.clicks, minlength=k),
                np.bincount(self.position - 1, weights=self.n, minlength=k))


def _reduce(key: np.ndarray, values: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    uniq, inv = np.unique(key, return_inverse=True)
    inv = inv.ravel()
    return uniq, [np.bincount(inv, weights=v, minlength=len(uniq)) for v in values]


def cell_key(index: np.ndarray, position: np.ndarray) -> np.ndarray:
    """The key of each (row or query index, position) cell: ``index * 2^20 + (position - 1)``."""
    return index * (1 << _POS_BITS) + (position - 1)


def cell_of(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(index, position)`` of each :func:`cell_key`."""
    return key >> _POS_BITS, (key & ((1 << _POS_BITS) - 1)) + 1


def merge_cells(key: np.ndarray, sums: list[np.ndarray], batch_key: np.ndarray, batch_sums: list[np.ndarray]):
    """The running per-cell sums ``(key, sums)`` with one batch's reduced cells added."""
    return _reduce(np.concatenate([key, batch_key]), [np.concatenate([a, b]) for a, b in zip(sums, batch_sums)])


def _batch_rows(cols: dict, ids, where) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One batch's ``(query index, row, position, click, propensity)`` after the checks and the id mapping
    (of every row, so that an error names the row of the file); propensity 1 when the log has none."""
    pos, click = batch_positions_and_clicks(cols, ids, where)
    query, rows = ids.rows(cols["query"], cols["doc"], where)
    return np.asarray(query, dtype=np.int64), np.asarray(rows, dtype=np.int64), pos, click, batch_propensity(cols, ids, where)


def batch_positions_and_clicks(cols: dict, ids, where) -> tuple[np.ndarray, np.ndarray]:
    """One batch's shown positions (int64, checked to lie in 1..2^20 - 1) and clicks (float64, checked to be 0 or 1);
    ``ids.check`` names the file and row of a bad value."""
    pos = np.asarray(cols["position"], dtype=np.int64)
    click = np.asarray(cols["click"], dtype=np.float64)
    ids.check((pos < 1) | (pos >= 2**_POS_BITS), pos, where, "position", f"is outside 1..{2**_POS_BITS - 1}")
    ids.check((click != 0) & (click != 1), click, where, "click", "is not 0 or 1")
    return pos, click


def batch_propensity(cols: dict, ids, where) -> np.ndarray:
    """One batch's logged propensities, checked to lie in [0, 1]; 1 for every row when the log has none."""
    p = np.asarray(cols["propensity"], dtype=np.float64) if "propensity" in cols else np.ones(len(cols["position"]))
    ids.check(~((p >= 0) & (p <= 1)), p, where, "propensity", "is not in [0, 1]")
    return p


def _batch_cells(cols: dict, ids, where, modes, clip) -> tuple[np.ndarray, list[np.ndarray]]:
    """One batch's cell keys and (n, clicks, ips, examined) sums (:func:`_batch_rows`), keeping the sessions of
    ``modes``."""
    _, rows, pos, click, p = _batch_rows(cols, ids, where)
    key = cell_key(rows, pos)
    values = [np.ones(len(key)), click, click / np.maximum(p, clip), p]
    if modes is not None:
        mode = cols.get("session_mode", np.zeros(len(pos), dtype=np.int8))
        keep = np.isin(mode, modes)
        key, values = key[keep], [v[keep] for v in values]
    return _reduce(key, values)


def _finish(key, sums, ids, clip, meta, n_entries, n_batches) -> LogAggregate:
    doc, position = cell_of(key)
    return LogAggregate(doc=doc, query=ids.row_query[doc], position=position,
                        n=sums[0], clicks=sums[1], ips=sums[2], examined=sums[3], clip=clip, meta=meta, n_entries=n_entries,
                        n_batches=n_batches)


def aggregate_log(path: str | os.PathLike, dataset, *, ids: str = "auto", batch_size: int = 1_000_000,
                  modes: Any = None, clip: float = 0.01, progress: bool = False) -> LogAggregate:
    """Stream the Parquet log at ``path`` into its per-cell sums (module docstring); ``ids``: how its
    query and doc columns name the rows of ``dataset`` (:mod:`ltr.clicks.logs.ids`); ``modes``: keep only
    sessions of these modes (0 production, 1 randomized, 2 swap; a log without the column is all 0);
    ``progress``: a bar over the rows read."""
    from ltr.clicks.logs.ids import LogIds

    mapper = LogIds(dataset, id_mode(path, ids))
    key, sums = np.zeros(0, dtype=np.int64), [np.zeros(0)] * 4
    n_entries = n_batches = 0
    columns = ["session", "query", "doc", "position", "click", "propensity", "session_mode"]  # session: the place check
    for where, cols in iter_log_batches(path, columns, batch_size, progress):
        k, s = _batch_cells(cols, mapper, where, modes, clip)
        key, sums = merge_cells(key, sums, k, s)
        n_entries += int(s[0].sum())
        n_batches += 1
    return _finish(key, sums, mapper, clip, read_log_meta(path), n_entries, n_batches)


def aggregate_from_log(log: ClickLog, dataset, *, modes: Any = None, clip: float = 0.01) -> LogAggregate:
    """:func:`aggregate_log` of a log in memory (indices into ``dataset``)."""
    from ltr.clicks.logs.ids import LogIds

    mapper = LogIds(dataset, "index")
    cols = {"query": log.query, "doc": log.doc, "position": log.position, "click": log.click,
            "propensity": log.propensity, "session_mode": log.session_mode[log.session]}
    key, sums = _batch_cells(cols, mapper, ("the click log", 0), modes, clip)
    return _finish(key, sums, mapper, clip, dict(log.meta), log.n_entries if modes is None else int(sums[0].sum()), 1)


def query_sessions(agg: LogAggregate, n_queries: int) -> np.ndarray:
    """n_q per query [Q]: the impressions of the query's most shown position (its sessions, when every session
    shows position 1; 0 for a query not in the log)."""
    n_q = np.zeros(n_queries)
    np.maximum.at(n_q, agg.query, _per_query_position(agg))
    return n_q


def _per_query_position(agg: LogAggregate) -> np.ndarray:
    """Per cell: the impressions of its (query, position), summed over the query's rows."""
    key = cell_key(agg.query, agg.position)
    _, inv = np.unique(key, return_inverse=True)
    inv = inv.ravel()
    return np.bincount(inv, weights=agg.n)[inv]
