"""Data sets whose features are read in row blocks: a store or a Parquet file/folder, never held whole.

:func:`open_streamed` returns a :class:`StreamedData`: the labels, query offsets and ids in memory
(O(N) numbers, F times fewer than the features) and the [N, F] float32 features as passes of row
blocks (:meth:`StreamedData.feature_blocks`). What trains or scores from it holds one block at a time:

- a store (:func:`ltr.data.store.open_store`): blocks are copies of the memory-mapped rows, whose
  pages leave the resident set after each block (:func:`ltr.data.store.row_blocks`);
- a Parquet file or folder (:class:`ltr.data.parquet.ParquetSource`): one pass reads the labels and
  the query column (the contiguity check of :class:`~ltr.data.blocks.QueryRuns`); every pass over the
  features decodes record batches of ``rows`` rows. ``--sort-by-query`` cannot be streamed (a sort
  needs every row): the commands read such a file into memory instead.

:class:`RowReader` serves any row range ``[a, b)`` from the blocks of a forward pass: consumers that
read in increasing order (LightGBM's bin sample of sorted row indices, then its pushes of
consecutive batches) cost one pass each; a range before the current block starts a new pass.
:func:`query_blocks` cuts the rows at query boundaries (XGBoost's batches must not split a query).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["StreamedData", "RowReader", "open_streamed", "is_streamed", "feature_blocks", "query_blocks",
           "predict_in_blocks", "predict_in_query_blocks", "block_rows", "compact_labels", "BLOCK_BYTES"]

BLOCK_BYTES = 64 << 20  # one block of features: 64 MB


def block_rows(n_features: int, block_bytes: int = BLOCK_BYTES) -> int:
    """Rows of ``n_features`` float32 features in about ``block_bytes`` bytes (at least 1).

    >>> block_rows(136)
    123361
    """
    return max(1, int(block_bytes) // (4 * max(int(n_features), 1)))


class StreamedData:
    """A data set with everything but the features in memory; the features come in row blocks.

    ``blocks(rows)`` returns an iterator of ``(start, features [n, F] float32)`` over consecutive rows
    from row 0 (a new pass each call). Reading ``features`` is an error: the point of this class is
    that nothing holds the whole matrix.

    ``labels`` is [N] float64, made at each access from the smallest copy that holds every value
    exactly (:func:`compact_labels`: uint8 for graded labels 0..255, else float32, else float64): a
    data set larger than RAM holds 1 byte a row for its labels while an engine trains on it, not 8.
    """

    def __init__(self, *, labels, query_offsets, query_ids, n_features: int, blocks: Callable[[int], Iterator],
                 feature_names=None, weights=None, user_ids=None, doc_ids=None, meta=None, name: str = "data"):  # fmt: skip
        self._labels = compact_labels(labels)
        self.query_offsets = np.asarray(query_offsets, dtype=np.int64)
        self.query_ids, self.user_ids, self.weights, self.doc_ids = query_ids, user_ids, weights, doc_ids
        self.feature_names = None if feature_names is None else tuple(feature_names)
        self.meta = dict(meta or {})
        self.name, self._n_features, self._blocks = name, int(n_features), blocks

    @property
    def labels(self) -> np.ndarray:
        return self._labels if self._labels.dtype == np.float64 else self._labels.astype(np.float64)

    @property
    def n_items(self) -> int:
        return int(self._labels.shape[0])

    @property
    def n_queries(self) -> int:
        return int(self.query_offsets.shape[0] - 1)

    @property
    def n_features(self) -> int:
        return self._n_features

    @property
    def query_lengths(self) -> np.ndarray:
        return np.diff(self.query_offsets)

    @property
    def features(self):
        raise LtrError(f"{self.name}: the features of a streamed data set are read in row blocks (feature_blocks), never whole")

    def feature_blocks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, block)`` over consecutive blocks of about ``rows`` rows (float32, C order)."""
        expected = 0
        for start, block in self._blocks(max(1, int(rows))):
            if start != expected or block.ndim != 2 or block.shape[1] != self._n_features:
                raise LtrError(f"{self.name}: a row block at row {start} does not continue the rows read before it (changed since it was opened?)")
            expected = start + block.shape[0]
            yield start, np.ascontiguousarray(block, dtype=np.float32)
        if expected != self.n_items:
            raise LtrError(f"{self.name}: a pass over the features read {expected} rows, {self.n_items} expected (changed since it was opened?)")

    def __repr__(self) -> str:
        return f"StreamedData({self.name!r}, n_queries={self.n_queries}, n_items={self.n_items}, n_features={self.n_features})"


def compact_labels(labels) -> np.ndarray:
    """``labels`` as uint8, else float32, else float64: the first type that gives every value back
    exactly when converted to float64 (NaN, never a valid label, keeps float64).

    >>> [compact_labels(y).dtype.name for y in ([0, 4, 2], [0.5, 1.0], [0.1], [-1.0])]
    ['uint8', 'float32', 'float64', 'float32']
    """
    y = np.asarray(labels, dtype=np.float64)
    for dtype in (np.uint8, np.float32):
        with np.errstate(invalid="ignore", over="ignore"):
            small = y.astype(dtype)
        if np.array_equal(small.astype(np.float64), y):
            return small
    return y


def is_streamed(ds) -> bool:
    return isinstance(ds, StreamedData)


def feature_blocks(ds, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """Row blocks of a :class:`StreamedData` or of a data set in memory (memory-mapped: pages released)."""
    if is_streamed(ds):
        return ds.feature_blocks(rows)
    from ltr.data.store import row_blocks

    return row_blocks(ds.features, rows)


def predict_in_blocks(predict: Callable[[np.ndarray], np.ndarray], ds, rows: int | None = None, *,
                      exact: bool = False) -> np.ndarray:
    """Scores [N] float64: ``predict(block)`` of each row block of ``ds`` (memory: one block and the
    scores). Row-wise models (GBDTs) give exactly the scores of one call on the whole matrix.

    The blocks hold about ``rows`` rows (a Parquet file's batches decide); with ``exact`` every block
    but the last holds exactly ``rows`` (:class:`RowReader`), for a ``predict`` that batches rows itself
    and must see the batches of one call on the whole matrix.
    """
    rows = block_rows(ds.n_features) if rows is None else int(rows)
    scores = np.empty(ds.n_items, dtype=np.float64)
    if exact and is_streamed(ds):
        reader = RowReader(ds, rows)
        blocks = ((a, reader.rows_between(a, min(ds.n_items, a + rows))) for a in range(0, ds.n_items, rows))
    else:
        blocks = feature_blocks(ds, rows)
    for start, block in blocks:
        scores[start : start + block.shape[0]] = np.asarray(predict(block), dtype=np.float64).reshape(-1)
    return scores


def predict_in_query_blocks(score: Callable[[np.ndarray, np.ndarray], np.ndarray], ds: StreamedData, rows: int | None = None) -> np.ndarray:
    """Scores [N] float64: ``score(block, block_offsets)`` of blocks of whole queries
    (:func:`query_blocks`, about ``rows`` rows each) with the block's query offsets from 0, for
    scorers that need whole queries (a listwise model, a blend standardising within queries).
    Memory: one block and the scores."""
    rows = block_rows(ds.n_features) if rows is None else int(rows)
    offsets = np.asarray(ds.query_offsets, dtype=np.int64)
    scores = np.empty(ds.n_items, dtype=np.float64)
    for a, b, block in query_blocks(ds, rows):
        qa, qb = np.searchsorted(offsets, [a, b])
        scores[a:b] = np.asarray(score(block, offsets[qa : qb + 1] - a), dtype=np.float64).reshape(-1)
    return scores


class RowReader:
    """Rows ``[a, b)`` of a :class:`StreamedData` from a forward pass of blocks of ``rows`` rows.

    Holds the current block only. A range that starts before the current block starts a new pass
    (see the module docstring for why LightGBM needs just two).
    """

    def __init__(self, data: StreamedData, rows: int):
        self.data, self.rows = data, max(1, int(rows))
        self.passes = 0
        self._it: Iterator | None = None
        self._start, self._block = 0, np.zeros((0, data.n_features), dtype=np.float32)

    def _restart(self) -> None:
        self._it = iter(self.data.feature_blocks(self.rows))
        self._start, self._block = 0, np.zeros((0, self.data.n_features), dtype=np.float32)
        self.passes += 1

    def rows_between(self, a: int, b: int) -> np.ndarray:
        """[b - a, F] float32 (a view of the current block when the range lies inside it)."""
        a, b = int(a), int(b)
        if not 0 <= a <= b <= self.data.n_items:
            raise IndexError(f"rows {a}:{b} of {self.data.n_items}")
        if self._it is None or a < self._start:
            self._restart()
        pieces, pos = [], a
        while pos < b:
            end = self._start + self._block.shape[0]
            if pos >= end:
                self._start, self._block = next(self._it)  # type: ignore[arg-type]
                continue
            piece = self._block[pos - self._start : min(b, end) - self._start]
            pieces.append(piece)
            pos += piece.shape[0]
        if not pieces:
            return np.zeros((0, self.data.n_features), dtype=np.float32)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def query_blocks(ds: StreamedData, rows: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(a, b, features of rows a..b)`` over blocks that end at query boundaries, each of at most
    ``rows`` rows or one whole query (a query longer than ``rows`` is one block)."""
    offsets = np.asarray(ds.query_offsets, dtype=np.int64)
    reader = RowReader(ds, rows)
    q, n_queries = 0, len(offsets) - 1
    while q < n_queries:
        a = int(offsets[q])
        last = int(np.searchsorted(offsets, a + int(rows), side="right")) - 1  # the last offset <= a + rows
        q_end = min(max(last, q + 1), n_queries)
        b = int(offsets[q_end])
        yield a, b, reader.rows_between(a, b)
        q = q_end


# --------------------------------------------------------------------------------------------------
# Opening
# --------------------------------------------------------------------------------------------------
def open_streamed(path: str | os.PathLike, option: str, n_features: int | None = None, options=None, *,
                  feature_names: Sequence[str] | None = None) -> StreamedData:  # fmt: skip
    """A store or Parquet file/folder given as ``--<option>`` as a :class:`StreamedData`, with the
    checks of :func:`ltr.data.files.load_data_file` (width, feature names, negative labels' note).
    Anything else (SVMlight, ``--sort-by-query``) is an :class:`LtrError`: read it with load_data_file."""
    from pathlib import Path

    from ltr.base.checks import input_file, input_folder
    from ltr.data.files import DataOptions, check_loaded, data_format

    options = options or DataOptions()
    is_dir = Path(os.path.expanduser(str(path))).is_dir()
    path = input_folder(path, f"--{option}") if is_dir else input_file(path, f"--{option}")
    kind = data_format(path)
    if kind == "store":
        data = _store_data(path)
    elif kind == "parquet" and not options.sort_by_query:
        data = _parquet_data(path, options.parquet_kwargs(feature_names))
    else:
        raise LtrError(f"--{option} {path}: only a store or a Parquet file/folder without --sort-by-query is read in row blocks")
    return check_loaded(data, path, option, n_features, feature_names)


def _store_data(path) -> StreamedData:
    from ltr.data.store import open_store, row_blocks

    ds = open_store(path)  # labels, offsets and ids in memory; the features memory-mapped
    mapped = ds.features
    return StreamedData(labels=ds.labels, query_offsets=ds.query_offsets, query_ids=ds.query_ids, n_features=ds.n_features,
                        blocks=lambda rows: row_blocks(mapped, rows), feature_names=ds.feature_names, weights=ds.weights,
                        user_ids=ds.user_ids, doc_ids=ds.doc_ids, meta=ds.meta, name=str(path))  # fmt: skip


def _parquet_data(path, columns: dict[str, Any]) -> StreamedData:
    """One pass over the Parquet rows for everything but the features (which are decoded, checked
    and dropped block by block), then a :class:`StreamedData` whose passes decode the features again."""
    from ltr.data.blocks import QueryRuns
    from ltr.data.parquet import ParquetSource

    columns = {k: v for k, v in columns.items() if k != "sort_by_query"}
    source = ParquetSource(path, **columns)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("labels", "doc_ids", "weights")}
    runs = QueryRuns(source.error_at, source.describe)
    for block in source.blocks():
        runs.add(block.query_keys, block.positions, user_ids=block.user_ids)
        for k, values in parts.items():
            if getattr(block, k) is not None:
                values.append(getattr(block, k))
    if runs.n_rows == 0:
        from ltr.base.errors import DataFormatError

        raise DataFormatError(source.name, None, "no rows")
    offsets, query_ids, per_query = runs.finish()
    arrays = {k: (np.concatenate(v) if v else None) for k, v in parts.items()}

    def blocks(rows: int):
        for block in ParquetSource(path, block_rows=rows, **columns).blocks():
            yield int(block.positions[0]), block.features

    meta = {**source.meta(), "format": "parquet"}
    return StreamedData(labels=arrays["labels"], query_offsets=offsets, query_ids=query_ids, n_features=source.n_features,
                        blocks=blocks, feature_names=source.feature_names, weights=arrays["weights"],
                        user_ids=per_query.get("user_ids"), doc_ids=arrays["doc_ids"], meta=meta, name=str(path))  # fmt: skip
