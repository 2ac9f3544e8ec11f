"""Turning ranking scores into probabilities: Platt scaling, isotonic regression and a strictly
monotone isotonic variant. The AUC-invariance check that runs after every calibration is in
:mod:`ltr.calibrate.invariance`, the before / after report in :mod:`ltr.calibrate.report`.

Why the AUC check: calibration must change the numbers, never the order. Platt scaling with a
positive slope is strictly increasing, so AUC is unchanged exactly. Isotonic regression is only
non-decreasing: it merges runs of scores into one value (pool adjacent violators), which turns
ordered positive-negative pairs into ties worth 1/2 and moves AUC. :class:`IsotonicCalibrator`
with ``strict=True`` adds a tiny increasing ramp across every flat block (and beyond the fitted
range), so distinct scores stay distinct in their original order while each value moves by at most
``tie_margin`` times the gap to the neighbouring level.

Where the calibrator is fitted (the rule, enforced by ``fit``):

* A calibrator must be fitted on predictions for data the model was NOT trained on; on training
  predictions it learns the model's over-confidence, not the deployment error.
* ``fit(..., held_out=False)`` is refused with :class:`~ltr.base.errors.LtrError`. The default
  ``held_out=True`` is the caller's statement that the data is held out.
* ``fit(..., training_fingerprint=fp)`` with ``fp = prediction_fingerprint(train_scores,
  train_labels)`` (taken when the model was trained) is refused when the fit data has the same
  fingerprint, i.e. the same multiset of (score, label) pairs as the training predictions. Every
  fitted calibrator stores the fingerprint of its own fit data in its JSON, so the provenance can
  be checked later.

Calibrators are saved as JSON (floats written with ``repr``, so the round trip is exact), never
pickled.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import numpy as np
from scipy.special import expit

from ltr.base.errors import LtrError

__all__ = [
    "PlattCalibrator",
    "IsotonicCalibrator",
    "prediction_fingerprint",
    "METHODS",
    "ALL_METHODS",
]

METHODS = ("platt", "isotonic", "isotonic-strict")
ALL_METHODS = METHODS + ("beta", "spline", "field-aware", "field-joint", "multicalibration")
_FORMAT_VERSION = 1


# ----------------------------------------------------------------------------- input checks
def _as_scores(scores, name: str = "scores") -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise LtrError(f"{name} must be one-dimensional, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise LtrError(f"{name} must be finite; value {i} is {s[i]!r}")
    return s


def _as_labels(labels, n: int) -> np.ndarray:
    y = np.asarray(labels, dtype=np.float64)
    if y.shape != (n,):
        raise LtrError(f"labels must have shape ({n},) to match the scores, got {y.shape}")
    bad = ~((y == 0) | (y == 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise LtrError(f"labels must be 0/1; value {i} is {y[i]!r}")
    return y


def prediction_fingerprint(scores, labels) -> str:
    """SHA-256 of the multiset of (score, label) pairs (order-insensitive), as hex.

    Two prediction sets with the same fingerprint are the same data; the calibrators use it to refuse
    fitting on the model's training predictions (see the module docstring).
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    order = np.lexsort((y, s))
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(s[order]).tobytes())
    h.update(np.ascontiguousarray(y[order]).tobytes())
    return h.hexdigest()


class _Calibrator:
    """Shared fit-data checks and JSON plumbing."""

    kind = "base"
    fit_fingerprint_: str | None = None
    n_fit_: int = 0

    def _check_fit_data(self, scores, labels, held_out: bool, training_fingerprint: str | None):
        s = _as_scores(scores)
        y = _as_labels(labels, s.shape[0])
        if not held_out:
            raise LtrError(
                "refusing to fit a calibrator on training predictions (held_out=False): it would learn "
                "the model's over-confidence on data it has seen; fit on a held-out split"
            )
        fp = prediction_fingerprint(s, y)
        if training_fingerprint is not None and fp == training_fingerprint:
            raise LtrError(
                "refusing to fit a calibrator: the fit data has the fingerprint of the model's training "
                "predictions; fit on a held-out split"
            )
        n_pos = int(y.sum())
        if n_pos == 0 or n_pos == y.shape[0]:
            raise LtrError(f"calibration needs both classes in the fit data; got {n_pos} positives of {y.shape[0]}")
        self.fit_fingerprint_ = fp
        self.n_fit_ = int(s.shape[0])
        return s, y

    def _require_fitted(self):
        if self.fit_fingerprint_ is None:
            raise LtrError(f"{type(self).__name__} is not fitted: call fit(scores, labels) first")

    def fit_predict(self, scores, labels, **kwargs) -> np.ndarray:
        return self.fit(scores, labels, **kwargs).predict(scores)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def save(self, path) -> None:
        """Write the calibrator as JSON, atomically."""
        from ltr.base.io_utils import atomic_write_text

        atomic_write_text(path, self.to_json() + "\n")


# ----------------------------------------------------------------------------- Platt
class PlattCalibrator(_Calibrator):
    r"""Platt scaling: ``p = sigmoid(a x + b)``, an unpenalised logistic fit of the label on ``x``.

    ``input="logit"``: ``x = logit(clip(s, logit_eps, 1 - logit_eps))`` for scores that are already
    probabilities (the identity map is then ``a = 1, b = 0``); ``input="score"``: ``x = s`` for raw
    scores (margins, logits). ``smoothed_targets=True`` uses Platt's (1999) targets
    ``t+ = (N+ + 1) / (N+ + 2)`` and ``t- = 1 / (N- + 2)`` instead of 1 / 0, which keeps the fit finite
    on separable data. The parameters minimise ``sum_i softplus(z_i) - t_i z_i`` with ``z = a x + b``
    (:func:`ltr.calibrate.logistic.weighted_logistic`, to a gradient of 1e-10 per item).

    A fitted slope ``a <= 0`` raises :class:`LtrError`: the map would reverse or erase the ranking.

    >>> import numpy as np
    >>> s = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]); y = np.array([0, 0, 1, 0, 0, 1, 1, 1])
    >>> cal = PlattCalibrator(input="score").fit(s, y)
    >>> round(cal.slope_, 4), round(cal.intercept_, 4)
    (8.2688, -3.7209)
    """

    kind = "platt"

    def __init__(self, input: str = "logit", smoothed_targets: bool = False, logit_eps: float = 1e-15,
                 max_iter: int = 100):
        if input not in ("logit", "score"):
            raise LtrError(f"input must be 'logit' or 'score', got {input!r}")
        self.input = input
        self.smoothed_targets = bool(smoothed_targets)
        self.logit_eps = float(logit_eps)
        self.max_iter = int(max_iter)
        self.slope_: float | None = None
        self.intercept_: float | None = None

    def _x(self, s: np.ndarray) -> np.ndarray:
        if self.input == "score":
            return s
        if s.size and (s.min() < 0.0 or s.max() > 1.0):
            i = int(np.flatnonzero((s < 0) | (s > 1))[0])
            raise LtrError(f"input='logit' needs scores in [0, 1]; value {i} is {s[i]!r} (use input='score')")
        p = np.clip(s, self.logit_eps, 1.0 - self.logit_eps)
        return np.log(p) - np.log1p(-p)

    def fit(self, scores, labels, *, held_out: bool = True, training_fingerprint: str | None = None):
        s, y = self._check_fit_data(scores, labels, held_out, training_fingerprint)
        x = self._x(s)
        if x.max() == x.min():
            raise LtrError(f"Platt fit is undefined: every fit score is the same ({s[0]!r}), so no slope can be "
                           "fitted; constant scores carry no ranking to calibrate")
        # In one dimension the maximum-likelihood fit exists iff the classes overlap; otherwise the
        # slope runs off to infinity (Newton would stop on a vanishing gradient at a huge slope).
        if not self.smoothed_targets and x[y == 0].max() <= x[y == 1].min():
            raise LtrError(
                "Platt fit is undefined: the fit data is separable by the score (every positive scores at "
                "least as high as every negative), so the maximum-likelihood slope is infinite; use "
                "smoothed_targets=True or more held-out data"
            )
        if self.smoothed_targets:
            n_pos = y.sum()
            n_neg = y.shape[0] - n_pos
            t = np.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        else:
            t = y
        slope, intercept = self._newton(x, t)
        if not slope > 0:
            raise LtrError(
                f"Platt fit has a non-positive slope ({slope:.6g}): the scores do not rank the positives "
                "higher, so the calibrated probabilities would reverse or erase the order"
            )
        self.slope_ = float(slope)
        self.intercept_ = float(intercept)
        return self

    def _newton(self, x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
        """Slope and intercept (:func:`ltr.calibrate.logistic.weighted_logistic`, one feature)."""
        from ltr.calibrate.logistic import weighted_logistic

        try:
            a, b = weighted_logistic(np.column_stack([x, np.ones_like(x)]), t, max_iter=self.max_iter)
        except LtrError:
            raise LtrError(
                "Platt fit did not converge: the fit data is (nearly) separable by the score, so the "
                "maximum-likelihood slope is infinite; use smoothed_targets=True or more held-out data"
            ) from None
        return float(a), float(b)

    def predict(self, scores) -> np.ndarray:
        """Calibrated probabilities ``sigmoid(a x + b)``."""
        self._require_fitted()
        return expit(self.slope_ * self._x(_as_scores(scores)) + self.intercept_)

    def to_dict(self) -> dict[str, Any]:
        self._require_fitted()
        return {
            "kind": self.kind,
            "format_version": _FORMAT_VERSION,
            "input": self.input,
            "smoothed_targets": self.smoothed_targets,
            "logit_eps": self.logit_eps,
            "slope": self.slope_,
            "intercept": self.intercept_,
            "n_fit": self.n_fit_,
            "fit_fingerprint": self.fit_fingerprint_,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PlattCalibrator":
        _check_fields(d, _PLATT_RULES, "platt")
        cal = cls(input=d["input"], smoothed_targets=d["smoothed_targets"], logit_eps=d["logit_eps"])
        cal.slope_ = float(d["slope"])
        cal.intercept_ = float(d["intercept"])
        cal.n_fit_ = int(d["n_fit"])
        cal.fit_fingerprint_ = d["fit_fingerprint"]
        return cal


# ----------------------------------------------------------------------------- isotonic
class IsotonicCalibrator(_Calibrator):
    r"""Isotonic regression of the label on the score (scikit-learn's pool adjacent violators).

    ``fit`` runs ``sklearn.isotonic.IsotonicRegression(y_min=0, y_max=1, increasing=True)`` and keeps its
    breakpoints ``X_thresholds_``, ``y_thresholds_``; ``predict`` interpolates linearly between them,
    which is what scikit-learn's ``predict`` does. Outside the fitted range: ``out_of_bounds="clip"``
    returns the end values, ``"nan"`` NaN, ``"raise"`` an error.

    ``strict=True`` makes the map strictly increasing, so AUC is unchanged: every run of equal
    breakpoint values ``v`` (a flat block) is replaced by a linear ramp inside
    ``[v - m (v - lo), v + m (hi - v)]``, with ``lo`` / ``hi`` the neighbouring levels (0 and 1 at the
    ends) and ``m = tie_margin``. The clipped regions beyond the fitted range are flat blocks too: the
    first and last blocks share their interval with a bounded tail ``y_end -/+ (room) * d / (1 + d)``
    (``d`` = distance to the range over its width). Scores tied in the input stay tied; distinct
    scores keep their order (down to float resolution: the report would count any tie left); each
    value moves by at most ``m`` times the gap between its neighbouring levels, so calibration is kept
    (``m < 1/2`` keeps the levels apart).
    """

    kind = "isotonic"

    def __init__(self, strict: bool = False, out_of_bounds: str = "clip", tie_margin: float = 1e-4):
        if out_of_bounds not in ("clip", "nan", "raise"):
            raise LtrError(f"out_of_bounds must be 'clip', 'nan' or 'raise', got {out_of_bounds!r}")
        if not 0.0 < tie_margin < 0.5:
            raise LtrError(f"tie_margin must be in (0, 0.5), got {tie_margin!r}")
        self.strict = bool(strict)
        self.out_of_bounds = out_of_bounds
        self.tie_margin = float(tie_margin)
        self.X_thresholds_: np.ndarray | None = None
        self.y_thresholds_: np.ndarray | None = None
        self.y_strict_: np.ndarray | None = None

    def fit(self, scores, labels, *, held_out: bool = True, training_fingerprint: str | None = None):
        from sklearn.isotonic import IsotonicRegression

        s, y = self._check_fit_data(scores, labels, held_out, training_fingerprint)
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(s, y)
        self.X_thresholds_ = np.asarray(iso.X_thresholds_, dtype=np.float64)
        self.y_thresholds_ = np.asarray(iso.y_thresholds_, dtype=np.float64)
        self.y_strict_, self.tail_low_, self.tail_high_ = _strict_levels(self.y_thresholds_, self.tie_margin)
        return self

    def predict(self, scores) -> np.ndarray:
        """Calibrated probabilities (strictly increasing in the score when ``strict=True``)."""
        if self.X_thresholds_ is None:
            raise LtrError("IsotonicCalibrator is not fitted: call fit(scores, labels) first")
        s = _as_scores(scores)
        X = self.X_thresholds_
        lo_x, hi_x = X[0], X[-1]
        outside = (s < lo_x) | (s > hi_x)
        if self.out_of_bounds == "raise" and outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise LtrError(f"score {s[i]!r} (value {i}) is outside the fitted range [{lo_x!r}, {hi_x!r}]")
        if not self.strict:
            out = np.interp(s, X, self.y_thresholds_)
        else:
            ys = self.y_strict_
            out = np.interp(s, X, ys)
            width = (hi_x - lo_x) or 1.0
            below = s < lo_x
            if below.any():
                d = (lo_x - s[below]) / width
                out[below] = ys[0] - (ys[0] - self.tail_low_) * (d / (1.0 + d))
            above = s > hi_x
            if above.any():
                d = (s[above] - hi_x) / width
                out[above] = ys[-1] + (self.tail_high_ - ys[-1]) * (d / (1.0 + d))
        if self.out_of_bounds == "nan":
            out[outside] = np.nan
        return out

    def to_dict(self) -> dict[str, Any]:
        if self.X_thresholds_ is None:
            raise LtrError("IsotonicCalibrator is not fitted: call fit(scores, labels) first")
        return {
            "kind": "isotonic-strict" if self.strict else "isotonic",
            "format_version": _FORMAT_VERSION,
            "strict": self.strict,
            "out_of_bounds": self.out_of_bounds,
            "tie_margin": self.tie_margin,
            "X_thresholds": self.X_thresholds_.tolist(),
            "y_thresholds": self.y_thresholds_.tolist(),
            "n_fit": self.n_fit_,
            "fit_fingerprint": self.fit_fingerprint_,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "IsotonicCalibrator":
        _check_fields(d, _ISOTONIC_RULES, d.get("kind"))
        cal = cls(strict=d["strict"], out_of_bounds=d["out_of_bounds"], tie_margin=d["tie_margin"])
        cal.X_thresholds_ = np.asarray(d["X_thresholds"], dtype=np.float64)
        cal.y_thresholds_ = np.asarray(d["y_thresholds"], dtype=np.float64)
        if cal.X_thresholds_.shape != cal.y_thresholds_.shape or cal.X_thresholds_.size == 0:
            raise LtrError("isotonic calibrator JSON: X_thresholds and y_thresholds must be non-empty and equal length")
        if np.any(np.diff(cal.X_thresholds_) < 0) or np.any(np.diff(cal.y_thresholds_) < 0):
            raise LtrError("isotonic calibrator JSON: X_thresholds and y_thresholds must be non-decreasing")
        cal.y_strict_, cal.tail_low_, cal.tail_high_ = _strict_levels(cal.y_thresholds_, cal.tie_margin)
        cal.n_fit_ = int(d["n_fit"])
        cal.fit_fingerprint_ = d["fit_fingerprint"]
        return cal


def _calibrator_rules():
    from ltr.base.checks import boolean, integer, list_of, number, text

    common = {"kind": text(), "format_version": integer(), "n_fit": integer(min=0),
              "fit_fingerprint": text(optional=True)}
    platt = {**common, "input": text(choices=("logit", "score")), "smoothed_targets": boolean(),
             "logit_eps": number(above=0, below=0.5), "slope": number(above=0), "intercept": number()}
    iso = {**common, "strict": boolean(), "out_of_bounds": text(choices=("clip", "nan", "raise")),
           "tie_margin": number(above=0, below=0.5), "X_thresholds": list_of(number(), min_len=1),
           "y_thresholds": list_of(number(min=0, max=1), min_len=1)}
    return platt, iso


_PLATT_RULES, _ISOTONIC_RULES = _calibrator_rules()


def _check_fields(d: Mapping[str, Any], rules, kind) -> None:
    """Every field present and of its type and range: a NaN or negative slope, a probability outside
    [0, 1] would otherwise load and answer wrong numbers."""
    missing = [k for k in rules if k not in d]
    if missing:
        raise LtrError(f"calibrator JSON of kind {kind!r} lacks the field {missing[0]!r}")
    from ltr.base.checks import check_table

    check_table({k: d[k] for k in rules}, rules, where=f"calibrator JSON ({kind})")


def _strict_levels(y: np.ndarray, margin: float) -> tuple[np.ndarray, float, float]:
    """Strictly increasing breakpoint values, and the limits the two tails approach.

    A flat block of value ``v`` (a run of equal breakpoints; the first and the last breakpoint always
    start / end a block, because clipping extends them to -inf / +inf) gets the interval
    ``[L, H] = [v - m (v - lo), v + m (hi - v)]`` inside the gap to its neighbouring levels ``lo`` /
    ``hi`` (0 and 1 at the ends). Interior blocks ramp linearly from ``L`` to ``H``; the first block
    keeps ``[L, mid]`` for its lower tail and the last block ``[mid, H]`` for its upper tail. Single
    interior breakpoints are left alone (they already lie strictly between their neighbours).

    >>> ys, lo, hi = _strict_levels(np.array([0.0, 0.2, 0.2, 0.6]), 0.25)
    >>> ys.round(6).tolist(), lo, round(hi, 6)
    ([0.0375, 0.15, 0.3, 0.55], 0.0, 0.7)
    """
    out = y.astype(np.float64).copy()
    n = y.shape[0]
    levels = np.unique(y)
    lo_limit = hi_limit = None
    start = 0
    while start < n:
        end = start
        while end + 1 < n and y[end + 1] == y[start]:
            end += 1
        first, last = start == 0, end == n - 1
        if end > start or first or last:
            v = y[start]
            k = int(np.searchsorted(levels, v))
            lo = levels[k - 1] if k > 0 else 0.0
            hi = levels[k + 1] if k + 1 < levels.shape[0] else 1.0
            low, high = v - margin * (v - lo), v + margin * (hi - v)
            if first and last:
                f0, f1 = 1.0 / 3.0, 2.0 / 3.0
            else:
                f0, f1 = (0.5 if first else 0.0), (0.5 if last else 1.0)
            if end > start:
                frac = f0 + (f1 - f0) * (np.arange(start, end + 1) - start) / (end - start)
            else:
                frac = np.array([(f0 + f1) / 2.0])
            out[start:end + 1] = low + (high - low) * frac
            if first:
                lo_limit = float(low)
            if last:
                hi_limit = float(high)
        start = end + 1
    return out, lo_limit, hi_limit


def __getattr__(name: str):
    """make_calibrator, calibrator_from_json and load_calibrator moved to :mod:`ltr.calibrate.factory` in 0.2
    (they know every calibrator kind, field-aware ones included): forwarded with a DeprecationWarning."""
    from ltr.base._moved import MOVED_NAMES, moved

    if name in MOVED_NAMES.get(__name__, {}):
        return moved(__name__, name, MOVED_NAMES[__name__][name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


