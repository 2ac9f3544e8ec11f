"""The binary cache of parsed data files: where it lives, its key, reading and writing it.

A cache is an ``.npz`` file in the cache folder, :func:`default_cache_dir` (``$LTR_CACHE_DIR`` or
the platform's cache folder), named after its source and a tag of the source's absolute path; with
``cache_dir="beside"`` (or ``LTR_CACHE_DIR=beside``) it is written beside the source instead
(``train.txt.ltrcache.npz``, the cache folder when the source's folder is read-only). The cache
folder is the default because writing into a shared data folder surprises the others who read it. Its key holds a SHA-1 digest of the source's whole content (and of its
``.query`` sidecar), the parse options and a format version: any change to the file, one byte in the
middle with the size and the modification time kept, makes the cache stale. The digest costs a pass
over the file at every load, a small fraction of a cold parse (``docs/benchmarks.md``, "Data cache").

A cache with the right key is still not trusted blindly: the arrays must have the shapes, types and
ranges a parse produces (finite features and labels, offsets from 0 to N, one id per query...);
anything else is rebuilt from the source, never used. A cache is never much larger than its source:
the features are stored dense, or as sparse rows when that is smaller, and a cache that would still
exceed :data:`MAX_CACHE_RATIO` times the source (plus 1 MiB) is not written.
"""


import hashlib
import json
import mmap
import os
from pathlib import Path

import numpy as np

from ltr.data.dataset import RankingDataset
from ltr.data.labels import LABEL_LIMIT
from ltr.base.io_utils import atomic_path

__all__ = ["default_cache_dir", "BESIDE", "CACHE_ENV", "CACHE_FORMAT_VERSION", "CACHE_SUFFIX", "MAX_CACHE_RATIO",
           "content_digest"]

CACHE_FORMAT_VERSION = 2
CACHE_SUFFIX = ".ltrcache.npz"
MAX_CACHE_RATIO = 4
#: the environment variable naming the cache folder (or ``beside``)
CACHE_ENV = "LTR_CACHE_DIR"
#: ``cache_dir`` (or ``$LTR_CACHE_DIR``) value that writes each cache beside its source file
BESIDE = "beside"


def default_cache_dir() -> Path:
    """The cache folder: ``$LTR_CACHE_DIR``, else the platform's cache folder for ``ltr``
    (``platformdirs.user_cache_dir``: ``$XDG_CACHE_HOME/ltr`` or ``~/.cache/ltr`` on Linux,
    ``~/Library/Caches/ltr`` on macOS, ``%LOCALAPPDATA%\\ltr\\Cache`` on Windows).
    """
    env = os.environ.get(CACHE_ENV)
    if env and env != BESIDE:
        return Path(env)
    import platformdirs  # small; only a reader that writes a cache needs it

    return Path(platformdirs.user_cache_dir("ltr", appauthor=False))


def content_digest(path: str | os.PathLike) -> str:
    """SHA-1 of a file's whole content (read through ``mmap``: no copy of the file is made)."""
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                step = 64 << 20
                for lo in range(0, size, step):
                    h.update(data[lo:lo + step])
    return f"{size}:{h.hexdigest()}"


def _cache_key(path: Path, query_file, n_features, zero_based, negative_labels="zero") -> str:
    key = {
        "version": CACHE_FORMAT_VERSION,
        "source": content_digest(path),
        "query_file": None if query_file is None else content_digest(query_file),
        "n_features": n_features,
        "zero_based": bool(zero_based),
        "negative_labels": negative_labels,
    }
    return json.dumps(key, sort_keys=True)


def _folder_writable(folder: Path) -> bool:
    # os.access says yes to root even on a folder without write bits (a read-only data share);
    # respect the mode bits too, so a cache never lands inside someone else's read-only data.
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return bool(mode & 0o222) and os.access(folder, os.W_OK)


def _cache_location(path: Path, cache_dir) -> Path:
    """The cache file of ``path``: in ``cache_dir`` (None: :func:`default_cache_dir`), or beside the
    source when ``cache_dir`` (or, when it is None, ``$LTR_CACHE_DIR``) is :data:`BESIDE` and the
    source's folder is writable."""
    name = path.name + CACHE_SUFFIX
    choice = os.environ.get(CACHE_ENV) if cache_dir is None else cache_dir
    beside = isinstance(choice, str) and choice == BESIDE
    if beside and _folder_writable(path.resolve().parent):
        return path.with_name(name)
    folder = default_cache_dir() if cache_dir is None or beside else Path(cache_dir)
    tag = hashlib.blake2b(str(path.resolve()).encode(), digest_size=6).hexdigest()
    return folder / f"{path.name}.{tag}{CACHE_SUFFIX}"


def _read_cache(cache_file: Path, key: str, n_features=None) -> RankingDataset | None:
    try:
        if not cache_file.is_file():
            return None
        with np.load(cache_file, allow_pickle=False) as z:
            if "key" not in z.files or str(z["key"]) != key:
                return None
            arrays = {name: z[name] for name in z.files if name not in ("key", "meta")}
            meta = json.loads(str(z["meta"]))
        if not isinstance(meta, dict) or not _arrays_sound(arrays, n_features):
            return None
        features = _dense_features(arrays)
        ds = RankingDataset(
            features=features,
            labels=arrays["labels"],
            query_offsets=arrays["query_offsets"],
            query_ids=arrays["query_ids"],
            user_ids=arrays.get("user_ids"),
            weights=arrays.get("weights"),
            doc_ids=arrays.get("doc_ids"),
            meta=meta,
        )
    except Exception:  # a damaged, foreign or crafted cache is rebuilt, never trusted
        return None
    ds.meta["cache"] = str(cache_file)
    return ds


def _arrays_sound(a: dict, n_features) -> bool:
    """Whether the arrays have the shapes, types and ranges a parse produces."""
    labels, offsets, qids = a.get("labels"), a.get("query_offsets"), a.get("query_ids")
    if labels is None or offsets is None or qids is None:
        return False
    if labels.dtype != np.float64 or labels.ndim != 1 or not np.all(np.isfinite(labels) & (labels < LABEL_LIMIT)):
        return False
    n = labels.shape[0]
    if offsets.dtype != np.int64 or offsets.ndim != 1 or offsets.shape[0] < 2 or offsets[0] != 0 or offsets[-1] != n:
        return False
    if np.any(np.diff(offsets) < 1) or qids.ndim != 1 or qids.shape[0] != offsets.shape[0] - 1:
        return False
    if qids.dtype.kind not in "iuU":
        return False
    if "features" in a:
        x = a["features"]
        if x.dtype != np.float32 or x.ndim != 2 or x.shape[0] != n or not np.all(np.isfinite(x)):
            return False
        width = x.shape[1]
    else:
        data, indices, indptr, shape = (a.get(k) for k in ("x_data", "x_indices", "x_indptr", "x_shape"))
        if data is None or indices is None or indptr is None or shape is None or shape.shape != (2,):
            return False
        width = int(shape[1])
        if data.dtype != np.float32 or indices.dtype != np.int32 or indptr.dtype != np.int64 or int(shape[0]) != n:
            return False
        if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr[-1] != data.shape[0] or np.any(np.diff(indptr) < 0):
            return False
        if indices.shape != data.shape or not np.all(np.isfinite(data)):
            return False
        if indices.size and (indices.min() < 0 or indices.max() >= width):
            return False
    if n_features is not None and width != n_features:
        return False
    for name, length, kinds in (("doc_ids", n, "U"), ("weights", n, "f"), ("user_ids", qids.shape[0], "iuU")):
        v = a.get(name)
        if v is not None and (v.ndim != 1 or v.shape[0] != length or v.dtype.kind not in kinds):
            return False
    return True


def _dense_features(a: dict) -> np.ndarray:
    if "features" in a:
        return a["features"]
    n, width = (int(v) for v in a["x_shape"])
    x = np.zeros((n, width), dtype=np.float32)
    rows = np.repeat(np.arange(n), np.diff(a["x_indptr"]))
    x[rows, a["x_indices"]] = a["x_data"]
    return x


def _write_cache(cache_file: Path, key: str, ds: RankingDataset, *, source_size: int | None = None) -> None:
    arrays = {
        "key": np.asarray(key),
        "meta": np.asarray(json.dumps(ds.meta)),
        "labels": ds.labels,
        "query_offsets": ds.query_offsets,
        "query_ids": ds.query_ids,
    }
    x = ds.features
    nonzero = x != 0
    nnz = int(np.count_nonzero(nonzero))
    if nnz * 8 + (x.shape[0] + 1) * 8 < x.nbytes:  # sparse rows are smaller: keep those
        rows, cols = np.nonzero(nonzero)
        arrays.update(x_data=x[rows, cols], x_indices=cols.astype(np.int32),
                      x_indptr=np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))]).astype(np.int64),
                      x_shape=np.asarray(x.shape, dtype=np.int64))
    else:
        arrays["features"] = x
    for name in ("user_ids", "weights", "doc_ids"):
        value = getattr(ds, name)
        if value is not None:
            arrays[name] = value
    if source_size is not None:
        size = sum(np.asarray(v).nbytes for v in arrays.values())
        if size > MAX_CACHE_RATIO * source_size + (1 << 20):
            return  # a cache this much larger than its source would cost more disk than it saves time
    try:
        with atomic_path(cache_file) as tmp:
            with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
                np.savez(fh, **arrays)
    except OSError:
        pass  # a cache that cannot be written only costs speed
