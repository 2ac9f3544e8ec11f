"""The binary cache of parsed data files: where it lives, its key, reading and writing it.

A cache is an ``.npz`` file beside the source (or in :func:`default_cache_dir` when the source's
folder is read-only). It is keyed on the source's fingerprint and the parse options, and a damaged or
foreign cache is rebuilt, never trusted.
"""


import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ltr.data.dataset import RankingDataset
from ltr.io_utils import atomic_path

__all__ = ["default_cache_dir", "CACHE_FORMAT_VERSION", "CACHE_SUFFIX"]

CACHE_FORMAT_VERSION = 1
CACHE_SUFFIX = ".ltrcache.npz"


def default_cache_dir() -> Path:
    """Where caches go when the data file's folder is not writable: ``$LTR_CACHE_DIR`` or ``~/.cache/ltr``."""
    env = os.environ.get("LTR_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ltr"



def _fingerprint(path: Path) -> dict:
    st = path.stat()
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        digest.update(fh.read(1 << 16))
        if st.st_size > (1 << 17):
            fh.seek(st.st_size - (1 << 16))
            digest.update(fh.read(1 << 16))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sample": digest.hexdigest()}


def _cache_key(path: Path, query_file, n_features, zero_based) -> str:
    key = {
        "version": CACHE_FORMAT_VERSION,
        "source": _fingerprint(path),
        "query_file": None if query_file is None else _fingerprint(Path(query_file)),
        "n_features": n_features,
        "zero_based": bool(zero_based),
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
    name = path.name + CACHE_SUFFIX
    if cache_dir is None and _folder_writable(path.resolve().parent):
        return path.with_name(name)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    tag = hashlib.blake2b(str(path.resolve()).encode(), digest_size=6).hexdigest()
    return folder / f"{path.name}.{tag}{CACHE_SUFFIX}"


def _read_cache(cache_file: Path, key: str) -> RankingDataset | None:
    if not cache_file.is_file():
        return None
    try:
        with np.load(cache_file, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return None
            arrays = {name: z[name] for name in z.files if name not in ("key", "meta")}
            meta = json.loads(str(z["meta"]))
    except Exception:  # a damaged or foreign cache is rebuilt, never trusted
        return None
    meta["cache"] = str(cache_file)
    return RankingDataset(
        features=arrays["features"],
        labels=arrays["labels"],
        query_offsets=arrays["query_offsets"],
        query_ids=arrays["query_ids"],
        user_ids=arrays.get("user_ids"),
        weights=arrays.get("weights"),
        doc_ids=arrays.get("doc_ids"),
        meta=meta,
    )


def _write_cache(cache_file: Path, key: str, ds: RankingDataset) -> None:
    arrays = {
        "key": np.asarray(key),
        "meta": np.asarray(json.dumps(ds.meta)),
        "features": ds.features,
        "labels": ds.labels,
        "query_offsets": ds.query_offsets,
        "query_ids": ds.query_ids,
    }
    for name in ("user_ids", "weights", "doc_ids"):
        value = getattr(ds, name)
        if value is not None:
            arrays[name] = value
    try:
        with atomic_path(cache_file) as tmp:
            with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
                np.savez(fh, **arrays)
    except OSError:
        pass  # a cache that cannot be written only costs speed


