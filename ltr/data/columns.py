"""Column files (one value per line, or a 1-D ``.npy`` array) and the one rule for a number field.

Used for score, label and group files given to the CLI (``ltr calibrate``, ``ltr clicks``), and
:func:`parse_number` for the number fields of TREC qrels and run files.

Text layout: one value per line; whitespace around it is ignored. An empty line before the last
value is an error, because skipping it would move every later value onto the wrong row; empty
lines after the last value (a trailing newline left by an editor) are ignored. A file named
``*.npy`` is read with ``np.load(allow_pickle=False)`` and must hold a 1-D array. The path ``-``
reads the text layout from standard input.

Errors are :class:`~ltr.base.errors.DataFormatError` naming the file, the line (or the ``.npy``
element) and the bad value: ``scores.txt:2: score 'abc' is not a number``.

>>> parse_number(" 0.25", "run.txt", 3, "score")
0.25
>>> parse_number("nan", "run.txt", 3, "score")
Traceback (most recent call last):
...
ltr.base.errors.DataFormatError: run.txt:3: score 'nan' is not finite
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable

import numpy as np

from ltr.base.checks import input_file
from ltr.base.errors import DataFormatError
from ltr.base.io_utils import STDIO, open_text

__all__ = ["parse_number", "read_number_column", "read_id_column"]


def parse_number(text: str, path, line: int | None, what: str = "value") -> float:
    """``float(text)``, which must be finite; else ``DataFormatError(path, line, "<what> '<text>' is ...")``."""
    try:
        value = float(text)
    except ValueError:
        raise DataFormatError(path, line, f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise DataFormatError(path, line, f"{what} {text!r} is not finite")
    return value


def _existing(path: str | os.PathLike, option: str | None = None) -> Path:
    if str(path) == STDIO:
        return Path(path)  # standard input
    return input_file(path, option)


def _load_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy fails in many ways on a damaged file (ValueError, EOFError, OSError...)
        raise DataFormatError(path, None, f"not a plain .npy array ({' '.join(str(exc).split())[:160]})") from None
    if not isinstance(arr, np.ndarray):
        raise DataFormatError(path, None, "not a plain .npy array (an .npz archive?)")
    if arr.ndim != 1:
        raise DataFormatError(path, None, f"expected a 1-D array, got shape {arr.shape}")
    return arr


def _value_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, stripped text)`` of every value line, under the empty-line rule above."""
    out: list[tuple[int, str]] = []
    empty = None  # first empty line since the last value
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                empty = lineno if empty is None else empty
                continue
            if empty is not None:
                raise DataFormatError(path, empty, "empty line (one value per line expected)")
            out.append((lineno, text))
    if not out:
        raise DataFormatError(path, None, "no values")
    return out


def _describe(allowed: tuple[float, ...]) -> str:
    return " or ".join(f"{a:g}" for a in allowed)


def read_number_column(path: str | os.PathLike, *, what: str = "value",
                       allowed: Iterable[float] | None = None, option: str | None = None) -> np.ndarray:
    """Read a column of finite numbers into a float64 array [N].

    ``what`` names a value in error messages (``"score"``, ``"label"``); ``allowed``, if given,
    lists the only values accepted (e.g. ``(0, 1)`` for click labels). A ``.npy`` file may hold
    any numeric or boolean dtype. ``option`` (e.g. ``"--scores"``) names the file in messages about
    the path itself (missing, a folder, a FIFO).
    """
    path = _existing(path, option)
    allowed = None if allowed is None else tuple(float(a) for a in allowed)
    if path.suffix == ".npy":
        arr = _load_npy(path)
        if not np.issubdtype(arr.dtype, np.number) and arr.dtype != bool:
            raise DataFormatError(path, None, f"expected numbers, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if arr.shape[0] == 0:
            raise DataFormatError(path, None, "no values")
        bad = ~np.isfinite(arr) if allowed is None else ~np.isin(arr, allowed)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            rule = "finite" if allowed is None else _describe(allowed)
            raise DataFormatError(path, None, f"element {i}: {what} {float(arr[i])!r} is not {rule}")
        return arr
    values = []
    for lineno, text in _value_lines(path):
        v = parse_number(text, path, lineno, what)
        if allowed is not None and v not in allowed:
            raise DataFormatError(path, lineno, f"{what} {text!r} is not {_describe(allowed)}")
        values.append(v)
    return np.asarray(values, dtype=np.float64)


def read_id_column(path: str | os.PathLike, *, option: str | None = None) -> np.ndarray:
    """Read a column of ids (any text, e.g. user or query ids) into a string array [N]."""
    path = _existing(path, option)
    if path.suffix == ".npy":
        arr = _load_npy(path)
        if arr.shape[0] == 0:
            raise DataFormatError(path, None, "no values")
        return arr.astype(str)
    return np.asarray([text for _, text in _value_lines(path)], dtype=str)
