"""Loader and click-through estimates for the Open Bandit Dataset (ZOZOTOWN, small sample).

Real logged feedback from a fashion recommendation widget with three slots: each row is one
impression of ``item_id`` (0..79) at ``position`` (1, 2, 3 = left, centre, right), its ``click``
(0/1) and ``propensity_score``, the logging policy's probability of choosing that item for that
slot. Two logging policies: ``random`` (uniform, 1/80) and ``bts`` (Bernoulli Thompson sampling).
Source and terms: Saito et al., "Open Bandit Dataset and Pipeline", arXiv:2008.07146; the files
are the ones of the ``obp`` package, described in the data folder's SOURCE.md.

Layout expected: ``<root>/<policy>/<campaign>/<campaign>.csv`` and ``item_context.csv`` beside it.

Estimates:

* :func:`ctr_by_position`: clicks / impressions per slot with a Wilson score interval
  (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``) or a percentile bootstrap
  (:func:`metrics.stats.bootstrap_ci`). Under the random policy every item is equally likely in
  every slot, so the ratio CTR_r / CTR_1 estimates the slots' relative examination (as in
  :func:`ltr.clicks.propensities.interventions.estimate_from_randomized`).
* :func:`ips_value`: off-policy value (expected CTR) of a target policy from a log, with
  importance weights ``w = pi_target / propensity_score``: IPS ``mean(w c)`` and SNIPS
  ``sum(w c) / sum(w)``, with a normal interval for IPS.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as _st

from ltr.base.errors import DataFormatError, LtrError
from metrics.stats import normal_interval

__all__ = ["POLICIES", "OpenBanditLog", "load_open_bandit", "ctr_by_position", "ips_value"]

POLICIES = ("random", "bts")
_REQUIRED = ("timestamp", "item_id", "position", "click", "propensity_score")


@dataclass(frozen=True)
class OpenBanditLog:
    """One policy's log: arrays ``[n]`` and the item table.

    ``user_features`` [n, 4] hashed categoricals (str), ``affinity`` [n, n_items] float32 user-item
    affinities, ``item_features`` [n_items, F] the numeric item feature(s) (``item_feature_0``).
    """

    policy: str
    campaign: str
    path: Path
    timestamp: np.ndarray
    item_id: np.ndarray
    position: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    user_features: np.ndarray
    affinity: np.ndarray
    item_features: np.ndarray

    @property
    def n_rounds(self) -> int:
        return int(len(self.click))

    @property
    def n_items(self) -> int:
        return int(len(self.item_features))

    @property
    def n_positions(self) -> int:
        return int(self.position.max()) if len(self.position) else 0


def _read_csv(path: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    """Header and the columns (tuples of strings) of a CSV file; ragged rows are an error."""
    from ltr.base.checks import input_file

    if not path.exists():
        raise LtrError(f"{path}: file not found (expected the Open Bandit layout <root>/<policy>/<campaign>/)")
    path = input_file(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataFormatError(path, None, f"not a UTF-8 CSV file ({exc})") from None
    if not rows:
        raise DataFormatError(path, 1, "empty file (expected a CSV header)")
    header = rows[0]
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataFormatError(path, i, f"{len(row)} fields, the header has {len(header)}")
    # Column-wise conversion is several times faster than one 2-D string array.
    columns = list(zip(*rows[1:])) if len(rows) > 1 else [() for _ in header]
    return header, columns


def _column(path: Path, header: list[str], columns, name: str, dtype) -> np.ndarray:
    if name not in header:
        raise DataFormatError(path, 1, f"missing column {name!r}")
    col = columns[header.index(name)]
    if dtype is str:
        return np.array(col, dtype=str)
    try:
        return np.array(col, dtype=dtype)
    except ValueError:
        for i, value in enumerate(col):  # find the first bad line for the message
            try:
                np.array([value], dtype=dtype)
            except ValueError:
                raise DataFormatError(path, i + 2, f"column {name!r}: cannot read {str(value)!r} as {np.dtype(dtype).name}") from None
        raise


def load_open_bandit(root: str | os.PathLike, policy: str = "random", campaign: str = "all") -> OpenBanditLog:
    """Read ``<root>/<policy>/<campaign>/<campaign>.csv`` and its ``item_context.csv``.

    Checks: clicks are 0/1, positions are 1.., propensities lie in (0, 1], item ids index the item
    table; a violation is a :class:`DataFormatError` naming the file and line.
    """
    if policy not in POLICIES:
        raise LtrError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    if not campaign or campaign in (".", "..") or "/" in campaign or "\\" in campaign:
        raise LtrError(f"--campaign must be a campaign folder name (such as all, men, women), got {campaign!r}")
    folder = Path(root) / policy / campaign
    path = folder / f"{campaign}.csv"
    header, table = _read_csv(path)
    n = len(table[0]) if table else 0
    for name in _REQUIRED:
        if name not in header:
            raise DataFormatError(path, 1, f"missing column {name!r}")
    item_id = _column(path, header, table, "item_id", np.int64)
    position = _column(path, header, table, "position", np.int64)
    click = _column(path, header, table, "click", np.int64)
    propensity = _column(path, header, table, "propensity_score", np.float64)
    for name, bad in (("click", (click != 0) & (click != 1)), ("position", position < 1),
                      ("propensity_score", ~((propensity > 0) & (propensity <= 1)))):
        if bad.any():
            line = int(np.argmax(bad)) + 2
            raise DataFormatError(path, line, f"column {name!r}: invalid value {table[header.index(name)][line - 2]!r}")
    user_cols = [h for h in header if h.startswith("user_feature_")]
    aff_cols = sorted((h for h in header if h.startswith("user-item_affinity_")), key=lambda h: int(h.rsplit("_", 1)[1]))
    affinity = np.stack([_column(path, header, table, h, np.float32) for h in aff_cols], axis=1) if aff_cols \
        else np.zeros((n, 0), np.float32)

    ipath = folder / "item_context.csv"
    iheader, itable = _read_csv(ipath)
    ids = _column(ipath, iheader, itable, "item_id", np.int64)
    if not np.array_equal(ids, np.arange(len(ids))):
        raise DataFormatError(ipath, 2, "item_id must run 0..n_items-1 in order")
    item_features = _column(ipath, iheader, itable, "item_feature_0", np.float64)[:, None]
    if item_id.min() < 0 or item_id.max() >= len(ids):
        line = int(np.argmax((item_id < 0) | (item_id >= len(ids)))) + 2
        raise DataFormatError(path, line, f"item_id outside 0..{len(ids) - 1}")
    return OpenBanditLog(
        policy=policy,
        campaign=campaign,
        path=path,
        timestamp=_column(path, header, table, "timestamp", str),
        item_id=item_id,
        position=position,
        click=click.astype(np.int8),
        propensity=propensity,
        user_features=np.stack([_column(path, header, table, h, str) for h in user_cols], axis=1) if user_cols
        else np.zeros((n, 0), dtype=str),
        affinity=affinity,
        item_features=item_features,
    )


def ctr_by_position(log: OpenBanditLog, *, confidence: float = 0.95, interval: str = "wilson",
                    n_resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Click-through rate per position with an interval (``"wilson"`` or ``"bootstrap"``).

    Each row: position, impressions, clicks, ctr, low, high and ``relative`` = CTR_r / CTR_1.
    """
    if interval not in ("wilson", "bootstrap"):
        raise LtrError(f"unknown interval {interval!r}: use 'wilson' or 'bootstrap'")
    rows = []
    for pos in range(1, log.n_positions + 1):
        c = log.click[log.position == pos].astype(np.float64)
        n, k = len(c), int(c.sum())
        if n == 0:
            rows.append({"position": pos, "impressions": 0, "clicks": 0, "ctr": np.nan, "low": np.nan, "high": np.nan})
            continue
        if interval == "wilson":
            ci = _st.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            low, high = float(ci.low), float(ci.high)
        else:
            from metrics.stats import bootstrap_ci

            ci = bootstrap_ci(c, confidence=confidence, n_resamples=n_resamples, seed=seed + pos)
            low, high = float(ci.low), float(ci.high)
        rows.append({"position": pos, "impressions": n, "clicks": k, "ctr": k / n, "low": low, "high": high})
    first = rows[0]["ctr"] if rows else np.nan
    for row in rows:
        row["relative"] = row["ctr"] / first if first and first > 0 else np.nan
    return rows


def ips_value(log: OpenBanditLog, target_probability, *, confidence: float = 0.95) -> dict:
    """Off-policy CTR of a target policy from ``log``: IPS and SNIPS with ``w = pi / propensity``.

    ``target_probability``: the target policy's probability of the logged (item, position) choice,
    a scalar (e.g. 1/80 for the uniform random policy) or an array [n]. Returns a dict with
    ``ips``, ``ips_low``, ``ips_high`` (normal interval of the mean of w c), ``snips``, ``n``,
    ``max_weight`` and ``ess`` (effective sample size ``(sum w)^2 / sum w^2``).
    """
    pi = np.broadcast_to(np.asarray(target_probability, dtype=np.float64), log.propensity.shape)
    if ((pi < 0) | (pi > 1)).any():
        raise LtrError("target probabilities must lie in [0, 1]")
    w = pi / log.propensity
    wc = w * log.click
    n = len(wc)
    mean = float(wc.mean())
    se = float(wc.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
    low, high = normal_interval(mean, se, confidence=confidence)
    return {
        "ips": mean,
        "ips_low": float(low),
        "ips_high": float(high),
        "snips": float(wc.sum() / w.sum()),
        "n": n,
        "max_weight": float(w.max()),
        "ess": float(w.sum() ** 2 / (w ** 2).sum()),
    }
