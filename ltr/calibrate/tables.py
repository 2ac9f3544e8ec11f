"""Tables of (score, label, fields, weight) rows for ``ltr calibrate``: reading them, the rows that
cannot be used, and what the scores are.

A table is a Parquet file, a folder of Parquet files, or a CSV file with a header line; only the named
columns are read. A row is **invalid** when its score is not a finite number, its label is not 0 or 1,
one of its field values is empty (null, NaN or an empty text), or its weight is not a finite number
>= 0. By default the first invalid row stops the run with an error naming the file, the column and
the row (1-based, data rows); ``drop_invalid=True`` leaves such rows out and counts them by reason
(a row bad in two columns counts once in ``total``).

**Score scale.** ``"probability"``: every score must lie in [0, 1] (a score outside is an error naming
its row); ``"logit"``: raw scores (logits, margins), read through the sigmoid wherever a probability
is needed; ``"auto"``: probabilities when every score lies in [0, 1], else logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["CalibrationTable", "read_calibration_table", "read_table_columns", "scores_are_probabilities",
           "SCORE_SCALES", "DROP_HINT"]

SCORE_SCALES = ("auto", "probability", "logit")
DROP_HINT = " (--drop-invalid leaves such rows out and counts them)"


@dataclass
class CalibrationTable:
    scores: np.ndarray
    labels: np.ndarray
    fields: dict  # name -> [N] values
    weights: np.ndarray | None
    source: str
    rows: np.ndarray | None = None  # position of every kept row in the file (None: every row was kept)
    dropped: dict | None = None  # with drop_invalid: rows left out, by reason, and "total"
    n_read: int = 0  # rows in the file


def read_table_columns(path: Path, columns: list[str], text_columns=()):
    """``{name: numpy array}`` from a Parquet file / folder or a CSV file with a header line."""
    from ltr.data.parquet import is_parquet

    if is_parquet(path):
        import pyarrow.parquet as pq

        try:
            if path.is_file():
                _missing(path, columns, pq.read_schema(path).names)
            table = pq.read_table(path, columns=columns)
        except (KeyError, ValueError, OSError) as exc:
            raise LtrError(f"{path}: cannot read the columns {', '.join(columns)} ({exc})") from None
        return {c: table.column(c).to_numpy(zero_copy_only=False) for c in columns}
    import pandas as pd

    try:
        head = pd.read_csv(path, nrows=0)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LtrError(f"{path}: not a CSV file with a header line ({exc})") from None
    _missing(path, columns, list(head.columns))
    frame = pd.read_csv(path, usecols=columns, dtype={c: str for c in text_columns}, keep_default_na=True)
    return {c: frame[c].to_numpy() for c in columns}


def _missing(path, wanted, names) -> None:
    absent = [c for c in wanted if c not in names]
    if absent:
        raise LtrError(f"{path}: no column {absent[0]!r}; the columns are {', '.join(map(str, names))}")


def _as_numbers(values) -> np.ndarray:
    """Float64 of a column; values that are not numbers (text in a CSV column, None) become NaN."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        import pandas as pd

        return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)


def _bad_numbers(values, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(numbers, invalid mask)`` of a score (finite), label (0 / 1) or weight (finite, >= 0) column."""
    v = _as_numbers(values)
    bad = ~np.isfinite(v)
    if np.asarray(values).dtype == bool and what != "label":
        bad[:] = True  # a CSV reader reads true / false as booleans: they would silently become scores of 1 / 0
    if what == "label":
        bad |= (v != 0) & (v != 1)
    elif what == "weight":
        bad |= v < 0
    return v, bad


def _empty_values(values) -> np.ndarray:
    """Rows whose field value is empty: null, NaN, or text that is empty after stripping."""
    v = np.asarray(values)
    if v.dtype.kind == "f":
        return np.isnan(v)
    if v.dtype.kind in "iub":
        return np.zeros(v.shape[0], dtype=bool)
    return np.array([x is None or (isinstance(x, float) and x != x) or (isinstance(x, str) and not x.strip())
                     for x in v.tolist()], dtype=bool)


_NEED = {"score": "a finite number", "label": "one of 0, 1", "weight": "a finite number >= 0"}


def _refuse(path, name: str, what: str, raw, i: int) -> LtrError:
    if what == "field":
        return LtrError(f"{path}: column {name!r}, row {i + 1} is empty{DROP_HINT}")
    shown = raw[i].item() if isinstance(raw[i], np.generic) else raw[i]
    if isinstance(shown, bool):
        return LtrError(f"{path}: column {name!r}, row {i + 1} holds {shown!r}: a true/false column is not "
                        f"{_NEED[what]} (write the {what}s as numbers){DROP_HINT}")
    return LtrError(f"{path}: column {name!r}, row {i + 1} holds {shown!r}, which is not {_NEED[what]}{DROP_HINT}")


def read_calibration_table(path, *, score_column: str, label_column: str, field_columns=(),
                           weight_column: str | None = None, drop_invalid: bool = False) -> CalibrationTable:
    """Read the named columns (see the module docstring for the invalid rows and ``drop_invalid``)."""
    path = Path(path)
    if not path.exists():
        raise LtrError(f"{path}: no such file or folder")
    fields = [f for f in field_columns if f]
    cols = [score_column, label_column] + fields + ([weight_column] if weight_column else [])
    if len(set(cols)) != len(cols):
        raise LtrError(f"a column is named twice in --score-column / --label-column / --field-columns / --weight-column: {cols}")
    raw = read_table_columns(path, cols, text_columns=fields)
    n = len(raw[score_column])
    if n == 0:
        raise LtrError(f"{path}: the table has no rows")
    checks = [(score_column, "score"), (label_column, "label")] + [(f, "field") for f in fields]
    checks += [(weight_column, "weight")] if weight_column else []
    numbers, bad = {}, {}
    for name, what in checks:
        if what == "field":
            bad[name] = _empty_values(raw[name])
        else:
            numbers[name], bad[name] = _bad_numbers(raw[name], what)
    if not drop_invalid:
        for name, what in checks:
            if bad[name].any():
                raise _refuse(path, name, what, raw[name], int(np.flatnonzero(bad[name])[0]))
        keep, rows, dropped = None, None, None
    else:
        any_bad = np.logical_or.reduce([bad[name] for name, _ in checks])
        keep = ~any_bad
        if not keep.any():
            raise LtrError(f"{path}: every one of the {n} rows is invalid (an empty field, a score that is not finite, "
                           "a label other than 0 / 1, or a bad weight)")
        rows = np.flatnonzero(keep)
        dropped = {"score": int(bad[score_column].sum()), "label": int(bad[label_column].sum()),
                   "fields": int(np.logical_or.reduce([bad[f] for f in fields]).sum()) if fields else 0,
                   "weight": int(bad[weight_column].sum()) if weight_column else 0, "total": int(any_bad.sum())}

    def kept(a):
        return a if keep is None else a[keep]

    return CalibrationTable(scores=kept(numbers[score_column]), labels=kept(numbers[label_column]),
                            fields={f: kept(np.asarray(raw[f])) for f in fields},
                            weights=kept(numbers[weight_column]) if weight_column else None, source=str(path),
                            rows=rows, dropped=dropped, n_read=n)


def scores_are_probabilities(scores: np.ndarray, scale: str, *, where: str = "the scores", rows=None) -> bool:
    """Whether to read ``scores`` as probabilities under ``scale`` (see the module docstring); a score
    outside [0, 1] under ``"probability"`` is an error naming its row (``rows``: the file positions)."""
    if scale not in SCORE_SCALES:
        raise LtrError(f"score scale must be one of {', '.join(SCORE_SCALES)}, got {scale!r}")
    inside = bool(scores.size and scores.min() >= 0.0 and scores.max() <= 1.0)
    if scale == "probability" and not inside:
        i = int(np.flatnonzero((scores < 0) | (scores > 1))[0])
        row = i if rows is None else int(rows[i])
        raise LtrError(f"{where}, row {row + 1} holds {float(scores[i])!r}, which is not a probability in [0, 1] "
                       "(--score-scale probability; pass --score-scale logit for raw scores)")
    return inside if scale == "auto" else scale == "probability"
