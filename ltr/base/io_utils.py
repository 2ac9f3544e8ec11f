"""Atomic file writes: every file the toolkit writes appears whole or not at all.

A temporary file is written in the destination folder, flushed, fsynced and then renamed over the
destination with :func:`os.replace`, which is atomic on POSIX file systems. A crash mid-write leaves
the previous version (or nothing) in place, never a truncated file.

The command line's ``-`` (standard input or output in place of a file) is read and written here
too: :func:`open_text`, :func:`write_text_or_stdout`, :func:`write_json_report`.

Every JSON file is strict JSON (RFC 8259): a number that is not finite (NaN, an infinity: a skipped
query's value, a ratio over nothing) is written as ``null``, never as the ``NaN`` / ``Infinity``
tokens that Python's :mod:`json` writes by default and that jq, browsers and most languages refuse.
:func:`json_safe` does the conversion; :func:`atomic_write_json` and :func:`write_json_report` use it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ltr.base.errors import LtrError

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "json_safe", "json_text",
           "STDIO", "open_text", "write_text_or_stdout", "write_json_report"]


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, and setting it on every write would
# briefly leave umask 0 for any other thread creating files (TensorBoard's writer threads do).
_UMASK = _read_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    Use it with writers that want a file name (``torch.save``, ``np.savez``, matplotlib)::

        with atomic_path("model.pt") as tmp:
            torch.save(state, tmp)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        # mkstemp creates 0600 files; give the result the mode a plain open() would have.
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            # a write() that failed (a disk full, a file-size limit) names no file: name the destination
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode(encoding))


def json_safe(obj: Any) -> Any:
    """``obj`` with plain JSON values only: numpy arrays and scalars as lists and numbers, paths as
    text, and every number that is not finite (NaN, +-inf) as None (``null``; a reader takes it back
    as "no value").

    >>> import numpy as np
    >>> json_safe({"a": float("nan"), "b": np.array([1.0, np.inf]), "c": (np.float32(0.5), 2)})
    {'a': None, 'b': [1.0, None], 'c': [0.5, 2]}
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays and scalars (torch tensors too)
        return json_safe(obj.tolist())
    return obj


def json_text(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``obj`` (:func:`json_safe` first; a value JSON cannot hold is a TypeError)."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int = 2) -> None:
    """Write ``obj`` as strict JSON to ``path`` atomically (numpy values become plain numbers, NaN and
    infinities ``null``)."""
    atomic_write_text(path, json_text(obj, indent) + "\n")


STDIO = "-"  # a path argument of "-" means standard input (to read) or standard output (to write)


@contextlib.contextmanager
def open_text(path: str | os.PathLike) -> Iterator[Any]:
    """Open a text file to read, or standard input when ``path`` is ``"-"`` (left open afterwards).

    A path that is missing, a folder, a FIFO (which would block) or unreadable is an
    :class:`ltr.base.errors.LtrError` (:func:`ltr.base.checks.input_file`); a UTF-8 byte order mark at the start
    is skipped, never read as part of the first field.
    """
    if str(path) == STDIO:
        yield sys.stdin
        return
    from ltr.base.checks import input_file

    path = input_file(path)
    try:
        fh = open(path, "r", encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise LtrError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        yield fh


def write_text_or_stdout(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically, or to standard output when ``path`` is ``"-"``."""
    if str(path) == STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write_text(path, text)


def write_json_report(target: str | os.PathLike, obj: Any) -> None:
    """The ``--json`` rule of every command: JSON on standard output for ``"-"``, else written to the
    file ``target`` atomically. Strict JSON: NaN and infinities are written as null (:func:`json_safe`)."""
    write_text_or_stdout(target, json_text(obj) + "\n")
