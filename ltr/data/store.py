"""The memory-mapped store: a data set whose features stay on disk, for data larger than RAM.

A store is a folder written by ``ltr convert`` (:func:`convert_to_store`) in one streaming pass::

    store.json          format, sizes, feature names, where the data came from
    features.npy        [N, F] float32, C order: memory-mapped by open_store, never read whole
    labels.npy          [N] float64
    query_offsets.npy   [Q+1] int64 (query q owns rows offsets[q]:offsets[q+1])
    query_ids.npy       [Q] int64 or str
    weights.npy         [N] float64      (when the source has weights)
    user_ids.npy        [Q]              (when the source has user ids)
    doc_ids.txt         N lines          (when the source has document ids)

Why ``.npy`` and not Arrow IPC (DESIGN_NOTES.md has the long form): every part of the toolkit takes
features as one row-major [N, F] float32 array; ``np.load(mmap_mode="r")`` of a ``.npy`` file is
exactly that array, zero-copy, with no chunk boundaries, so batching, prediction and LightGBM take
it unchanged. An Arrow IPC file holds record batches of columns: a row-major view needs a copy per
batch. The ``.npy`` header is written with room for the final row count (numpy pads it for growth),
so the file is appended to as blocks arrive and the header is rewritten at the end.

Bounded memory. Reading a mapped page makes it part of the process's resident set until the
kernel takes it back, which it does only under memory pressure; and one fault may map much more than
the rows asked for (read-ahead and large page-cache folios: on this project's machines a batch of 64
queries, 3 MB of rows, mapped about 35 MB). So the passes over a store (batches, prediction,
normalisation statistics) call :func:`release_pages` after each batch or block, which tells the
kernel (``madvise(MADV_DONTNEED)``) that this process is done with the pages: they leave the
resident set and stay in the page cache, so reading them again costs no disk I/O while RAM lasts.
A call costs about 0.1 ms.

The writer builds the store in a hidden ``.NAME.partial-PID`` folder and renames it at the end: a
failed conversion leaves nothing behind.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import shutil
from pathlib import Path
from typing import Iterator

import numpy as np

from ltr.data.blocks import Block, QueryRuns
from ltr.data.dataset import RankingDataset
from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_write_json

__all__ = ["open_store", "convert_to_store", "StoreWriter", "is_store", "release_pages", "is_mapped", "row_blocks", "STORE_FORMAT"]

STORE_FORMAT = "ltr-store-1"
STORE_JSON = "store.json"


# --------------------------------------------------------------------------------------------------
# Mapped pages
# --------------------------------------------------------------------------------------------------
def _mapping(array) -> mmap.mmap | None:
    """The read-only mmap behind ``array`` (an np.memmap of mode "r", or a view of one), else None."""
    seen = array
    while seen is not None:
        if isinstance(seen, np.memmap) and getattr(seen, "_mmap", None) is not None:
            return seen._mmap if seen.mode == "r" else None
        seen = getattr(seen, "base", None)
    return None


def is_mapped(array) -> bool:
    """True when ``array`` is (a view of) a read-only memory-mapped file."""
    return _mapping(array) is not None


def release_pages(array) -> None:
    """Drop the pages of a read-only memory-mapped ``array`` from this process's resident set.

    ``madvise(MADV_DONTNEED)`` on a read-only file mapping discards nothing: the next access maps the
    page again from the page cache (or the file). A no-op for arrays in RAM and where the platform
    lacks ``madvise``.
    """
    m = _mapping(array)
    if m is not None and hasattr(m, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        m.madvise(mmap.MADV_DONTNEED)


def row_blocks(array, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, block)`` over consecutive blocks of ``rows`` rows of ``array`` (C-contiguous). Blocks of
    a memory-mapped array are copies in RAM (writeable), and its pages are released as the pass goes;
    blocks of an array in RAM are views where possible."""
    array = array if hasattr(array, "shape") else np.asarray(array)
    mapped = is_mapped(array)
    step = max(1, int(rows))
    for start in range(0, array.shape[0], step):
        if mapped:
            block = np.array(array[start : start + step], order="C")
            release_pages(array)
        else:
            block = np.ascontiguousarray(array[start : start + step])
        yield start, block


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------
def _npy_header(dtype, shape: tuple[int, ...]) -> bytes:
    buf = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue()


class _GrowingNpy:
    """A ``.npy`` file appended to block by block; the header gets the final row count at close
    (numpy leaves room for it in the header: its length does not depend on the row count)."""

    def __init__(self, path: Path, dtype, row_shape: tuple[int, ...] = ()):
        self.path, self.dtype, self.row_shape = path, np.dtype(dtype), tuple(row_shape)
        self.header_len = len(_npy_header(self.dtype, (0, *self.row_shape)))
        self.fh = open(path, "wb")
        self.fh.write(b"\0" * self.header_len)
        self.rows = 0

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        assert block.shape[1:] == self.row_shape, (block.shape, self.row_shape)
        self.fh.write(memoryview(block).cast("B"))
        self.rows += block.shape[0]

    def close(self) -> None:
        header = _npy_header(self.dtype, (self.rows, *self.row_shape))
        if len(header) != self.header_len:  # pragma: no cover - over 10^20 rows
            raise LtrError(f"{self.path}: the .npy header cannot hold {self.rows} rows")
        self.fh.seek(0)
        self.fh.write(header)
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()

    def widen(self, width: int, block_rows: int = 65536) -> "_GrowingNpy":
        """A new file of ``width`` columns holding these rows, zero-padded (one pass, in blocks)."""
        self.fh.flush()
        old = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.header_len, shape=(self.rows, *self.row_shape))
        wider = _GrowingNpy(self.path.with_name(self.path.name + ".wider"), self.dtype, (width,))
        for _, block in row_blocks(old, block_rows):
            padded = np.zeros((block.shape[0], width), dtype=self.dtype)
            padded[:, : block.shape[1]] = block
            wider.append(padded)
        del old
        self.fh.close()
        os.replace(wider.path, self.path)
        wider.path = self.path
        return wider


class StoreWriter:
    """Write a store from :class:`~ltr.data.blocks.Block` s, one at a time (memory: one block plus
    O(queries)). ``source`` supplies ``name``, ``n_features`` (None: the width of the widest block),
    ``feature_names``, ``describe`` and ``error_at`` (for the query checks' messages)."""

    def __init__(self, path: str | os.PathLike, source, *, overwrite: bool = False, inputs=()):
        from ltr.base.checks import output_folder

        self.path = output_folder(path, "--out", inputs=inputs)  # not a file, not the cwd, not holding an input
        if self.path.exists() and any(self.path.iterdir()):
            if not is_store(self.path):  # --force replaces a store, never a folder holding other things
                raise LtrError(f"--out {self.path} is a folder that is not a store, which --force never replaces (only "
                               "a store written by ltr convert): choose another --out")
            if not overwrite:
                raise LtrError(f"--out {self.path} already exists (a store); choose another --out or pass --force to "
                               "replace it")
        self.source = source
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.parent / f".{self.path.name}.partial-{os.getpid()}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir()
        self.width = int(source.n_features or 0)
        self.features = _GrowingNpy(self.tmp / "features.npy", np.float32, (self.width,))
        self.labels = _GrowingNpy(self.tmp / "labels.npy", np.float64)
        self.weights: _GrowingNpy | None = None
        self.doc_ids = None
        self.has_users = None
        self.runs = QueryRuns(source.error_at, source.describe)

    def append(self, block: Block) -> None:
        n = block.n_rows
        if n == 0:
            return
        first = self.runs.n_rows == 0
        for name, present in (("weights", block.weights is not None), ("doc_ids", block.doc_ids is not None), ("user_ids", block.user_ids is not None)):
            had = getattr(self, "_has_" + name, None)
            if had is not None and had != present:  # pragma: no cover - the sources keep this
                raise LtrError(f"{self.source.name}: some blocks have {name} and others do not")
            setattr(self, "_has_" + name, present)
        x = block.features
        if x.shape[1] > self.width:
            self.features = self.features.widen(x.shape[1])
            self.width = x.shape[1]
        elif x.shape[1] < self.width:
            x = np.concatenate([x, np.zeros((n, self.width - x.shape[1]), dtype=np.float32)], axis=1)
        self.runs.add(block.query_keys, block.positions, query_ids=block.query_ids, user_ids=block.user_ids)
        self.features.append(x)
        self.labels.append(block.labels)
        if block.weights is not None:
            if first:
                self.weights = _GrowingNpy(self.tmp / "weights.npy", np.float64)
            self.weights.append(block.weights)
        if block.doc_ids is not None:
            if first:
                self.doc_ids = open(self.tmp / "doc_ids.txt", "w", encoding="utf-8", newline="\n")
            bad = [i for i, d in enumerate(block.doc_ids.tolist()) if "\n" in d or "\r" in d]
            if bad:
                raise self.source.error_at(int(block.positions[bad[0]]), "a document id holds a line break")
            self.doc_ids.write("\n".join(block.doc_ids.tolist()) + "\n")

    def close(self) -> Path:
        """Finish the files, write ``store.json`` and move the store into place; returns its path."""
        if self.runs.n_rows == 0:
            raise LtrError(f"{self.source.name}: no rows")
        offsets, keys, per_query = self.runs.finish()
        for f in (self.features, self.labels, self.weights):
            if f is not None:
                f.close()
        arrays = {"features": "features.npy", "labels": "labels.npy", "query_offsets": "query_offsets.npy", "query_ids": "query_ids.npy"}
        if self.weights is not None:
            arrays["weights"] = "weights.npy"
        query_ids = per_query.get("query_ids", keys)
        np.save(self.tmp / "query_offsets.npy", offsets)
        np.save(self.tmp / "query_ids.npy", query_ids)
        if "user_ids" in per_query:
            users = per_query["user_ids"]
            if getattr(self.source, "user_ids_from_text", False):
                from ltr.data.svmlight import ints_if_possible

                users = ints_if_possible(users)
            np.save(self.tmp / "user_ids.npy", users)
            arrays["user_ids"] = "user_ids.npy"
        if self.doc_ids is not None:
            self.doc_ids.close()
            arrays["doc_ids"] = "doc_ids.txt"
        names = self.source.feature_names
        manifest = {
            "format": STORE_FORMAT,
            "n_items": int(self.runs.n_rows),
            "n_queries": int(len(offsets) - 1),
            "n_features": int(self.width),
            "feature_names": None if names is None else list(names),
            "negative_labels": int(getattr(self.source, "n_negative_labels", 0)),  # read as 0 on the way in
            "arrays": arrays,
            "source": str(self.source.name),
        }
        atomic_write_json(self.tmp / STORE_JSON, manifest)
        old = None
        if self.path.exists():
            old = self.path.parent / f".{self.path.name}.old-{os.getpid()}"
            os.replace(self.path, old)
        os.replace(self.tmp, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        for f in (self.features, self.labels, self.weights, self.doc_ids):
            if f is not None:
                (f.fh if hasattr(f, "fh") else f).close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is not None:
            self.abort()


def convert_to_store(
    src: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    n_features: int | None = None,
    zero_based: bool = False,
    query_file: str | os.PathLike | None = None,
    block_rows: int = 65536,
    progress: bool | None = None,
    **columns,
) -> Path:
    """Convert an SVMlight/LETOR file or a Parquet file/folder into a store, in one streaming pass.

    Memory: one block of rows (``block_rows`` Parquet rows, or a few thousand SVMlight lines) plus
    O(queries), whatever the size of ``src``. SVMlight options: ``n_features``, ``zero_based``,
    ``query_file``; Parquet options: the column roles of :func:`ltr.data.parquet.load_parquet`
    (``query_column=``, ``label_column=``, ...). Rows of a query must be contiguous in the source.
    """
    from ltr.data.parquet import ParquetSource, is_parquet
    from ltr.data.svmlight import SvmlightSource

    if columns.pop("sort_by_query", False):
        raise LtrError("a store is written in one streaming pass and cannot regroup rows: sort the source by query first")
    if is_parquet(src):
        source = ParquetSource(src, block_rows=block_rows, **columns)
    else:
        source = SvmlightSource(src, query_file=query_file, n_features=n_features, zero_based=zero_based, progress=progress)
    inputs = [("SRC", src)] + ([("--query-file", query_file)] if query_file is not None else [])
    with StoreWriter(out, source, overwrite=overwrite, inputs=inputs) as writer:
        for block in source.blocks():
            writer.append(block)
        return writer.close()


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------
def is_store(path: str | os.PathLike) -> bool:
    """A folder holding ``store.json``."""
    return (Path(path) / STORE_JSON).is_file()


def open_store(path: str | os.PathLike) -> RankingDataset:
    """The store at ``path`` as a :class:`RankingDataset` whose ``features`` are memory-mapped
    (``np.load(mmap_mode="r")``): nothing of the [N, F] matrix is read until rows are used. Labels,
    offsets and ids (O(N) numbers, F times smaller) are read into memory."""
    path = Path(path)
    manifest_path = path / STORE_JSON
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise LtrError(f"{path}: not a store (no {STORE_JSON}; write one with `ltr convert`)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LtrError(f"{manifest_path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise LtrError(f"{manifest_path}: not a store manifest (a JSON object is expected; damaged store)")
    if manifest.get("format") != STORE_FORMAT:
        raise LtrError(f"{manifest_path}: format {manifest.get('format')!r} is not {STORE_FORMAT!r} (written by another version?)")
    arrays = manifest.get("arrays", {})
    sizes = [manifest.get(k) for k in ("n_items", "n_features")]
    if not isinstance(arrays, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes):
        raise LtrError(f"{manifest_path}: arrays, n_items or n_features is not what ltr convert writes (damaged store)")

    def load(name: str, mmap_mode=None):
        if name not in arrays:
            return None
        file = path / str(arrays[name])
        if file.resolve().parent != path.resolve():  # a manifest names files of its own folder only
            raise LtrError(f"{manifest_path}: array {name!r} names {arrays[name]!r}, outside the store (damaged store)")
        try:
            if file.suffix == ".txt":
                return np.asarray(file.read_text(encoding="utf-8").split("\n")[:-1], dtype=str)
            return np.load(file, mmap_mode=mmap_mode, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise LtrError(f"{file}: damaged store file ({exc})") from None

    features = load("features", "r")
    n, width = sizes
    if features is None or features.shape != (n, width) or features.dtype != np.float32:
        raise LtrError(f"{path}: features.npy does not hold [{n}, {width}] float32 as {STORE_JSON} says (damaged store)")
    labels = load("labels")
    _check_values(path, features, labels)
    names = manifest.get("feature_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(x, str) for x in names)):
        raise LtrError(f"{manifest_path}: feature_names is not a list of names (damaged store)")
    try:
        return RankingDataset(
            features=features,
            labels=labels,
            query_offsets=load("query_offsets"),
            query_ids=load("query_ids"),
            user_ids=load("user_ids"),
            weights=load("weights"),
            doc_ids=load("doc_ids"),
            feature_names=names,
            meta={"source": manifest.get("source"), "store": str(path), "format": "store"},
        )
    except ValueError as exc:
        raise LtrError(f"{path}: damaged store ({exc})") from None


def _check_values(path: Path, features, labels) -> None:
    """The checks of the readers the store was converted from (:mod:`ltr.data.labels`; finite
    features), so a store changed since, or written by other means, is refused as its source file
    would be. Labels are in memory; the features are read once in blocks of about 16 MB whose pages
    are released as the pass goes (the resident set stays bounded). Cost: about 0.3 s for a
    1,000,000 x 136 store (0.54 GB) whose pages are in the page cache."""
    from ltr.data.labels import LABEL_LIMIT, label_problem

    if labels is not None and getattr(labels, "dtype", None) is not None and labels.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(labels) | (labels >= LABEL_LIMIT))
        if bad.size:
            r = int(bad[0])
            raise LtrError(f"{path}: labels.npy row {r}: {label_problem(float(labels[r]))} (damaged store, or not written by ltr convert)")
    rows = max(1, (16 << 20) // (4 * max(features.shape[1], 1)))
    for start, block in row_blocks(features, rows):
        finite = np.isfinite(block)
        if not finite.all():
            r, j = (int(v) for v in np.argwhere(~finite)[0])
            raise LtrError(f"{path}: features.npy row {start + r}, feature {j + 1} holds {block[r, j]}; features must be finite "
                           "numbers, as in the file it was converted from (damaged store)")
