"""Propensity curves: which positions a log identifies, the one rule for the others, and curves from files.

A curve is the relative examination propensity by position, ``theta_r / theta_1`` for r = 1..K. An estimate
only speaks for the positions the log shows often enough: a position shown fewer than ``min_impressions``
times (never, say, because nothing was ever shown at 11-49) is *unidentified*, and the estimators report
NaN there (``null`` in JSON) instead of a number that only repeats their starting point.

Training and evaluation still need a weight for a click at such a position. The rule, the same for every
source of a curve (EM, DLA, harvesting, interventions, a file)::

    theta_r = theta_j,   j = the nearest identified position above r      (theta_1 = 1 always)

The curve is held flat from the last identified position (clipped there): a click at an unidentified
position weighs as one at the identified position above it, never more. Where the truth keeps falling
below that position, those clicks are under-weighted (a downward bias on items shown only there), and no
weight grows without bound from a position the log cannot measure.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["MIN_IMPRESSIONS", "EM_ITERATIONS", "identified_positions", "complete_curve", "read_curve_file",
           "unidentified_note"]

#: impressions a position needs before an estimator reports a propensity for it
MIN_IMPRESSIONS = 30
#: regression EM's iterations at most where the toolkit runs it (it stops sooner when the log-likelihood
#: stops gaining): the click commands and the estimators' REM
EM_ITERATIONS = 200


def identified_positions(impressions: Any, min_impressions: int = MIN_IMPRESSIONS) -> np.ndarray:
    """``[K]`` bool: the positions 1..K shown at least ``min_impressions`` times (``impressions[r - 1]``).

    >>> identified_positions([500, 80, 0, 12, 40], min_impressions=30).tolist()
    [True, True, False, False, True]
    """
    if min_impressions < 1:
        raise LtrError(f"min_impressions must be >= 1, got {min_impressions}")
    return np.asarray(impressions, dtype=np.float64).ravel() >= min_impressions


def complete_curve(curve: Any, n_positions: int, identified: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(theta [n_positions], identified [n_positions])``: ``curve`` where it is identified (finite, > 0, and
    ``identified`` where given), elsewhere the value of the nearest identified position above (module
    docstring); position 1 is 1 when the curve leaves it out.

    >>> theta, known = complete_curve([1.0, 0.5, float("nan"), 0.2], 6)
    >>> theta.tolist(), known.tolist()
    ([1.0, 0.5, 0.5, 0.2, 0.2, 0.2], [True, True, False, True, False, False])
    """
    c = np.asarray([np.nan if v is None else v for v in np.asarray(curve, dtype=object).ravel()], dtype=np.float64)
    out = np.full(n_positions, np.nan)
    m = min(n_positions, len(c))
    out[:m] = c[:m]
    known = np.isfinite(out) & (out > 0)
    if identified is not None:
        mask = np.zeros(n_positions, dtype=bool)
        given = np.asarray(identified, dtype=bool).ravel()
        mask[: min(n_positions, len(given))] = given[:n_positions]
        known &= mask
    if n_positions and not known[0]:
        out[0], known[0] = 1.0, False
    last = 1.0
    for r in range(n_positions):
        if known[r]:
            last = out[r]
        else:
            out[r] = last
    return out, known


def unidentified_note(identified: Any, why: str = "shown too rarely") -> str | None:
    """A line naming the unidentified positions (``"positions 11-49, 51"``), None when every one is identified.

    >>> unidentified_note([True, True, False, False, False, True, False])
    'positions 3-5, 7 unidentified (shown too rarely): each takes the propensity of the nearest identified position above it'
    """
    bad = np.flatnonzero(~np.asarray(identified, dtype=bool)) + 1
    if not len(bad):
        return None
    runs, start = [], bad[0]
    for prev, r in zip(bad, list(bad[1:]) + [None]):
        if r != prev + 1:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = r
    word = "position" if len(bad) == 1 else "positions"
    return (f"{word} {', '.join(runs)} unidentified ({why}): each takes the propensity of the nearest "
            "identified position above it")


def _curve_of_json(value: Any, path: str) -> list:
    """The curve in a JSON document: a list of numbers, ``{"propensity": [...]}`` (a clicks_training.json) or
    ``{"rows": [{"position": r, "theta": t}, ...]}`` (``ltr clicks estimate --json``)."""
    if isinstance(value, dict) and isinstance(value.get("propensity"), list):
        return value["propensity"]
    if isinstance(value, dict) and isinstance(value.get("rows"), list):
        rows = value["rows"]
        try:
            k = max(int(r["position"]) for r in rows)
            out: list = [None] * k
            for r in rows:
                out[int(r["position"]) - 1] = r.get("theta")
            return out
        except (KeyError, TypeError, ValueError):
            raise LtrError(f"--propensity-file {path}: its rows need a position and a theta") from None
    if isinstance(value, list):
        return value
    raise LtrError(f"--propensity-file {path}: expected a list of propensities, a clicks_training.json or the JSON of "
                   "ltr clicks estimate --json")


def _text_curve(path) -> list:
    """One propensity per line (blank lines and ``#`` comments skipped); ``nan`` or ``null`` for an
    unidentified position."""
    values = []
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if text.lower() in ("nan", "null", "none"):
            values.append(None)
            continue
        try:
            values.append(float(text))
        except ValueError:
            raise LtrError(f"--propensity-file {path}: line {lineno}: {text!r} is not a number") from None
    return values


def read_curve_file(path: str | os.PathLike) -> np.ndarray:
    """A propensity curve by position from a file: JSON (see :func:`_curve_of_json`), or one number per line
    (text or a ``.npy`` array; ``nan`` for an unidentified position). Values must be > 0 and finite, or NaN
    / null; the curve is divided by its first value, so any scale will do."""
    from ltr.base.checks import input_file

    path = input_file(path, "--propensity-file")
    if str(path).lower().endswith(".json"):
        try:
            raw = json.loads(open(path, encoding="utf-8").read())
        except (OSError, ValueError) as exc:
            raise LtrError(f"--propensity-file {path}: not valid JSON ({exc})") from None
        values = _curve_of_json(raw, str(path))
    elif str(path).lower().endswith(".npy"):
        try:
            values = np.load(path, allow_pickle=False).ravel().tolist()
        except (OSError, ValueError) as exc:
            raise LtrError(f"--propensity-file {path}: not a .npy array ({exc})") from None
    else:
        values = _text_curve(path)
    try:
        c = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise LtrError(f"--propensity-file {path}: every propensity must be a number (or null)") from None
    bad = ~np.isnan(c) & ~((c > 0) & np.isfinite(c))
    if len(c) == 0 or bad.any():
        where = f" (position {int(np.argmax(bad)) + 1} holds {float(c[bad][0])!r})" if bad.any() else ""
        raise LtrError(f"--propensity-file {path}: expected propensities > 0 by position, one or more{where}")
    if not np.isfinite(c[0]):
        raise LtrError(f"--propensity-file {path}: position 1 has no propensity (every curve is relative to it)")
    return c / c[0]
