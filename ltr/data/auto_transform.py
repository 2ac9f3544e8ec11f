"""The ``auto`` input transform: per-feature decisions fitted on the training split, no knowledge needed.

For each feature column ``x`` of the training rows:

1. **constant** (``min(x) == max(x)``): dropped, i.e. multiplied by 0 (the input width stays the same,
   so a model folder reads the same files; a value the training split never showed cannot move a score);
2. **log or linear**: ``f(x) = sign(x) * log(1 + |x|)`` when a tail dominates the column's range and the
   log tames it: ``spread(x) > SPREAD_LIMIT`` and ``spread(f(x)) < spread(x) / 2``, with
   ``spread(x) = (max(x) - min(x)) / s(x)`` the training range in robust standard deviations ``s``
   (step 3); a normal sample of 10^5 rows spans about 9, a 0/1 flag at most 1 / s, heavy-tailed counts,
   BM25 sums or prices hundreds; else ``f(x) = x``;
3. **robust scale**: ``z = (f(x) - median) / s`` with ``s = IQR / 1.349`` (the standard deviation for
   normal data) of ``f(x)``; when the IQR is 0 (a mostly-zero sparse column) ``s`` is the standard
   deviation, and 1 when that is 0 too;
4. **clip** to the training range: ``z`` is clipped to ``[(f(min) - median) / s, (f(max) - median) / s]``,
   so an extreme value at prediction time scores as the most extreme training value did.

Minimum, maximum and constancy come from every training row (one streaming pass in blocks, so a
memory-mapped store is never loaded whole); median, IQR and standard deviation from an evenly spaced
sample of at most :data:`SAMPLE_ROWS` rows (deterministic: no random draw), gathered in blocks and
kept in the features' own dtype, its statistics computed a few columns at a time in float64. The
decisions are the same whether the rows are in RAM or in a store (tests/test_auto_transform.py), and
the memory is bounded by the sample, not by N.

Below, the third column spans 1000 / (4 / 1.349) = 337 robust standard deviations, its log 11.0: logged.

>>> x = np.column_stack([np.arange(1.0, 10.0), np.full(9, 5.0), [0, 1, 2, 3, 4, 5, 6, 7, 1000.0]])
>>> fit = fit_auto(x)
>>> fit.actions
['linear', 'constant', 'log']
>>> fit.transform(np.array([[4.0, 9.0, 1e9]])).round(4).tolist()   # (4 - 5) / (4 / 1.349); 0; clipped at log(1001)
[[-0.3372, 0.0, 8.4371]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AutoFit", "fit_auto", "sample_rows", "SPREAD_LIMIT", "SAMPLE_ROWS"]

#: a column whose training range spans at most this many robust standard deviations stays linear
SPREAD_LIMIT = 20.0
#: rows of the evenly spaced sample that skewness, median and IQR are computed on
SAMPLE_ROWS = 200_000


def _signed_log1p(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


@dataclass
class AutoFit:
    """The fitted decisions and statistics of the ``auto`` transform, one entry per feature."""

    log: np.ndarray      # bool [F]: f = signed log1p
    center: np.ndarray   # float64 [F]: median of f(x)
    scale: np.ndarray    # float64 [F]: IQR / 1.349 of f(x) (or std, or 1)
    low: np.ndarray      # float64 [F]: (f(min) - center) / scale
    high: np.ndarray     # float64 [F]: (f(max) - center) / scale
    keep: np.ndarray     # bool [F]: False for a constant feature

    @property
    def actions(self) -> list[str]:
        """``constant``, ``log`` or ``linear`` per feature."""
        return ["constant" if not k else ("log" if g else "linear") for k, g in zip(self.keep, self.log)]

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Apply the transform to rows [N, F] (float64 out)."""
        z = np.asarray(x, dtype=np.float64)
        z = np.where(self.log, _signed_log1p(z), z)
        z = np.clip((z - self.center) / self.scale, self.low, self.high)
        return z * self.keep

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k).tolist() for k in ("log", "center", "scale", "low", "high", "keep")}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> "AutoFit":
        arrays = {k: np.asarray(state[k], dtype=bool if k in ("log", "keep") else np.float64)
                  for k in ("log", "center", "scale", "low", "high", "keep")}
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ValueError("auto transform state: every entry must be a list of one value per feature")
        return cls(**arrays)


def _range_of(x, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-column min and max over every row, block by block; refuses non-finite values."""
    from ltr.data.store import row_blocks

    low = high = None
    for _, block in row_blocks(x, block_rows):
        if not np.all(np.isfinite(block)):
            raise ValueError("cannot fit a normaliser on non-finite feature values")
        b_low, b_high = block.min(axis=0).astype(np.float64), block.max(axis=0).astype(np.float64)
        low = b_low if low is None else np.minimum(low, b_low)
        high = b_high if high is None else np.maximum(high, b_high)
    if low is None:
        raise ValueError("cannot fit a normaliser on zero rows")
    return low, high


def _robust_scale(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and IQR / 1.349 of each column (std where the IQR is 0, 1 where that is 0 too)."""
    q1, median, q3 = np.quantile(f, [0.25, 0.5, 0.75], axis=0)
    scale = (q3 - q1) / 1.349
    std = f.std(axis=0)
    scale = np.where(scale > 0, scale, np.where(std > 0, std, 1.0))
    return median, scale


def sample_rows(n_rows: int) -> np.ndarray:
    """The rows the sample statistics are computed on: at most :data:`SAMPLE_ROWS`, evenly spaced, sorted.

    >>> sample_rows(5).tolist(), len(sample_rows(10**7)) == SAMPLE_ROWS
    ([0, 1, 2, 3, 4], True)
    """
    return np.unique(np.linspace(0, n_rows - 1, min(n_rows, SAMPLE_ROWS)).round().astype(np.int64))


def _gather_sample(x, rows: np.ndarray, block_rows: int) -> np.ndarray:
    """``x[rows]`` (sorted ``rows``) in ``x``'s own dtype, gathered from one span of ``block_rows`` rows of
    ``x`` at a time; a memory-mapped array's pages are released after each span, so the resident set
    holds the sample and one span, not the store."""
    from ltr.data.store import is_mapped, release_pages

    mapped = is_mapped(x)
    step = max(1, int(block_rows))
    sample = np.empty((len(rows), x.shape[1]), dtype=x.dtype)
    cuts = np.searchsorted(rows, np.arange(0, x.shape[0] + step, step))
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi > lo:
            sample[lo:hi] = x[rows[lo:hi]]
            if mapped:
                release_pages(x)
    return sample


def _sample_statistics(sample: np.ndarray, columns: int = 16) -> tuple[np.ndarray, ...]:
    """Median and robust scale of each column of the sample, raw and after the signed log1p, in float64.

    Computed ``columns`` columns at a time: each column's statistics are those of the whole matrix at
    once (numpy reduces every column on its own), with float64 temporaries of a few columns only.
    """
    width = sample.shape[1]
    stats = [np.empty(width) for _ in range(4)]
    for lo in range(0, width, columns):
        f = sample[:, lo : lo + columns].astype(np.float64)
        raw_center, raw_scale = _robust_scale(f)
        log_center, log_scale = _robust_scale(_signed_log1p(f))
        for out, value in zip(stats, (raw_center, raw_scale, log_center, log_scale)):
            out[lo : lo + columns] = value
    return tuple(stats)


def fit_auto(x, block_rows: int = 65536) -> AutoFit:
    """Fit the ``auto`` transform on training features [N, F] (an array or a memory-mapped store's).

    Memory: one block of ``block_rows`` rows, the sample (:data:`SAMPLE_ROWS` rows in ``x``'s dtype;
    109 MB for 136 float32 features) and float64 temporaries of a few columns: bounded whatever N is,
    with a store's pages released as the passes go.
    """
    x = x if hasattr(x, "shape") else np.asarray(x)
    low, high = _range_of(x, block_rows)
    sample = _gather_sample(x, sample_rows(x.shape[0]), block_rows)
    keep = high > low
    raw_center, raw_scale, log_center, log_scale = _sample_statistics(sample)
    del sample
    spread_raw = (high - low) / raw_scale
    spread_log = (_signed_log1p(high) - _signed_log1p(low)) / log_scale
    log = keep & (spread_raw > SPREAD_LIMIT) & (spread_log < spread_raw / 2)
    center, scale = np.where(log, log_center, raw_center), np.where(log, log_scale, raw_scale)
    f_low = np.where(log, _signed_log1p(low), low)
    f_high = np.where(log, _signed_log1p(high), high)
    return AutoFit(log=log, center=center, scale=scale, low=(f_low - center) / scale, high=(f_high - center) / scale,
                   keep=keep)
