"""Field values compared as values: the one rule every field calibrator, report and streamed pass uses.

A field value's **key** is its canonical text:

* a number (an int, a float, a bool, or text that reads as a finite number) is written as the number:
  an integral value as an integer (``1``, ``1.0``, ``"1"``, ``" 1.0 "`` and ``True`` are all ``"1"``),
  any other value by Python's shortest round-trip ``repr`` (``0.5`` and ``"0.50"`` are ``"0.5"``);
* other text is itself, surrounding white space stripped.

So a Parquet int column, the same column read by pandas as floats (an int column with nulls becomes
float), and a CSV column read as text all match one fitted vocabulary. Text that reads as a number is
that number: ``"007"`` and ``"7"`` are one value.

A field's **type** (recorded in a saved calibrator): ``"int"`` when every key is an integer,
``"float"`` when every key is a number and one is not integral, ``"text"`` otherwise. A mismatch that
could only miss is refused, naming the field (:func:`check_field_type`): text that is not a number
given to an int or float field, or numbers given to a text field none of whose fitted values is a
number.
"""

from __future__ import annotations

import math

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["value_key", "encode_values", "canonical_words", "words_type", "check_field_type", "FIELD_TYPES"]

FIELD_TYPES = ("int", "float", "text")


def _number_key(x: float) -> str | None:
    if not math.isfinite(x):
        return None
    if x == int(x):
        return str(int(x))
    return repr(float(x))


def value_key(v) -> str:
    """The canonical text of one field value (see the module docstring).

    >>> [value_key(v) for v in (1, 1.0, "1", " 1.0 ", True, 0.5, "0.50", "phone", np.int64(7))]
    ['1', '1', '1', '1', '1', '0.5', '0.5', 'phone', '7']
    """
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        key = _number_key(float(v))
        return key if key is not None else repr(float(v))
    if isinstance(v, bytes):
        v = v.decode("utf-8", errors="replace")
    text = str(v).strip()
    try:
        key = _number_key(float(text))
    except ValueError:
        return text
    return key if key is not None else text


def _is_number_key(key: str) -> bool:
    try:
        return math.isfinite(float(key))
    except ValueError:
        return False


def words_type(words) -> str:
    """``"int"``, ``"float"`` or ``"text"`` of a list of keys (see the module docstring)."""
    kind = "int"
    for w in words:
        if not _is_number_key(w):
            return "text"
        if kind == "int" and ("." in w or "e" in w or "E" in w):
            kind = "float"
    return kind


def canonical_words(words) -> tuple[np.ndarray, list]:
    """``(remap, keys)``: the distinct keys of ``words`` (any Python values) and, for each word, the
    index of its key (two words with one key, such as ``1`` and ``"1"``, share it)."""
    keys, remap, seen = [], np.empty(len(words), dtype=np.int64), {}
    for i, w in enumerate(words):
        k = value_key(w)
        if k not in seen:
            seen[k] = len(keys)
            keys.append(k)
        remap[i] = seen[k]
    return remap, keys


def encode_values(values) -> tuple[np.ndarray, list]:
    """``(codes, keys)`` of an array of field values: ``keys`` the distinct canonical texts, sorted as
    text, ``codes[i]`` the index of row i's key."""
    v = np.asarray(values)
    if v.ndim != 1:
        v = v.reshape(-1)
    if v.dtype.kind in "biuf":
        uniq, inv = np.unique(v, return_inverse=True)
        words = uniq.tolist()
    else:
        import pandas as pd

        inv, words = pd.factorize(v, use_na_sentinel=False)
        words = list(words)
    remap, keys = canonical_words(words)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    return rank[remap][np.asarray(inv).reshape(-1)], [keys[i] for i in order]


def check_field_type(name: str, fitted: str | None, keys: list, raw_dtype_kind: str = "O", vocab=()) -> None:
    """Refuse values of field ``name`` (their ``keys``) that cannot match a fitted vocabulary ``vocab`` of
    type ``fitted`` (see the module docstring); ``raw_dtype_kind``: the numpy dtype kind of the values as
    given (``"i"``, ``"f"``, ``"O"``...)."""
    if fitted is None:
        return  # a calibrator saved before the types were recorded
    if fitted in ("int", "float"):
        bad = next((k for k in keys if not _is_number_key(k)), None)
        if bad is not None:
            raise LtrError(f"field {name!r}: the calibrator was fitted on {fitted} values, but this table holds the text "
                           f"{bad!r}, which is not a number (is it the right column?)")
    elif raw_dtype_kind in "biuf" and keys and not any(_is_number_key(k) for k in vocab):
        raise LtrError(f"field {name!r}: the calibrator was fitted on text values, but this table holds numbers "
                       f"(such as {keys[0]!r}) (is it the right column?)")
