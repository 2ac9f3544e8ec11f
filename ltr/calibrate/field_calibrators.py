"""Calibrators beyond Platt and isotonic: beta calibration, a monotone piecewise-linear (spline) map,
field-aware calibration and multicalibration over fields. All saved as JSON, never pickled.

* :class:`BetaCalibrator` (Kull, Silva Filho and Flach, AISTATS 2017): an unpenalised logistic fit on
  the two features ``(ln s, -ln(1 - s))``: ``p = sigmoid(a ln s - b ln(1 - s) + c)``. When a fitted
  ``a`` or ``b`` is negative its feature is dropped and the fit redone (the paper's rule), so the map
  is monotone; both ``a, b >= 0`` and one of them > 0 makes it strictly increasing.
* :class:`SplineCalibrator`: ``p = sigmoid(g(x))`` with ``g`` continuous piecewise linear in
  ``x = logit(s)`` (or the raw score), knots at quantiles of the fit scores, every segment slope at
  least ``min_slope > 0`` (strictly increasing: AUC unchanged), fitted by maximum likelihood
  (projected Newton with the slopes bounded, :mod:`ltr.calibrate.logistic`). Linear beyond the outer knots.
* :class:`FieldAwareCalibrator`: a global map ``g`` (Platt, beta or spline) plus one logit offset per
  field value, ``p = sigmoid(g(s) + sum_f delta_f[v_f])``, the offsets shrunk towards 0 (the global
  map) by their click count (see the class). Inside a group of rows that share the value of every
  calibrated field the map is ``g`` plus one constant: the order there is kept exactly; the fit checks
  it and refuses a map that breaks it. With one field that is "grouped AUC by the field unchanged".
* :class:`MulticalibrationCalibrator`: iterative multicalibration over given fields: each round cuts
  the current logit into equal-mass bins and adds a shrunk logit offset per (field value, bin) cell;
  rounds stop when the log loss on a held-out share of the fit data stops falling. It may reorder rows
  inside a field value (across bins); its report says how much AUC moved.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from scipy.special import expit, log_expit

from ltr.calibrate.calibrators import _FORMAT_VERSION, _as_scores, _Calibrator
from ltr.calibrate.logistic import weighted_logistic
from ltr.calibrate.field_values import check_field_type, encode_values, value_key, words_type
from ltr.base.errors import LtrError

__all__ = [
    "BetaCalibrator", "SplineCalibrator", "FieldAwareCalibrator", "MulticalibrationCalibrator",
    "check_within_field_order", "field_keys", "field_codes", "cell_codes", "FieldCodes", "unseen_values", "FIELD_METHODS", "GLOBAL_MAPS", "make_field_calibrator",
    "field_calibrator_from_dict", "make_global_map", "global_logit",
]  # fmt: skip

FIELD_METHODS = ("beta", "spline", "field-aware", "multicalibration")
GLOBAL_MAPS = ("platt", "beta", "spline")
_EPS = 1e-12


def _as_probabilities(s: np.ndarray, what: str) -> np.ndarray:
    if s.size and (s.min() < 0.0 or s.max() > 1.0):
        i = int(np.flatnonzero((s < 0) | (s > 1))[0])
        raise LtrError(f"{what} needs probabilities in [0, 1]; value {i} is {s[i]!r} (use input='logit' for raw scores)")
    return s


# ----------------------------------------------------------------------------- beta calibration
class BetaCalibrator(_Calibrator):
    r"""Beta calibration: ``p = sigmoid(a ln s - b ln(1 - s) + c)``, an unpenalised logistic fit on the
    features ``(ln s, -ln(1 - s))`` with ``s`` clipped to ``[eps, 1 - eps]``.

    ``input="probability"``: ``s`` is the score (must be in [0, 1]); ``input="logit"``: ``s =
    sigmoid(score)`` for raw scores. A negative ``a`` (or ``b``) drops that feature and refits with
    the other (Kull et al.'s rule); if the one left has a non-positive coefficient the fit is refused.
    The map is then non-decreasing and strictly increasing in ``s`` (one of ``a, b`` > 0).
    """

    kind = "beta"

    def __init__(self, input: str = "probability", eps: float = 1e-12):
        if input not in ("probability", "logit"):
            raise LtrError(f"input must be 'probability' or 'logit', got {input!r}")
        self.input, self.eps = input, float(eps)
        self.a_: float | None = None
        self.b_: float | None = None
        self.c_: float | None = None

    def _features(self, scores) -> np.ndarray:
        s = _as_scores(scores)
        s = expit(s) if self.input == "logit" else _as_probabilities(s, "beta calibration")
        s = np.clip(s, self.eps, 1.0 - self.eps)
        return np.column_stack([np.log(s), -np.log1p(-s)])

    def fit(self, scores, labels, *, held_out: bool = True, training_fingerprint: str | None = None):
        s, y = self._check_fit_data(scores, labels, held_out, training_fingerprint)
        X = self._features(s)
        ones = np.ones(X.shape[0])
        a, b, c = weighted_logistic(np.column_stack([X, ones]), y)
        if a < 0 or b < 0:
            keep = 1 if a < 0 else 0
            coef, c = weighted_logistic(np.column_stack([X[:, keep], ones]), y)
            a, b = (0.0, coef) if keep == 1 else (coef, 0.0)
        if not (a >= 0 and b >= 0 and a + b > 0):
            raise LtrError(f"beta calibration fit has non-positive coefficients (a={a:.6g}, b={b:.6g}): the scores "
                           "do not rank the positives higher")
        self.a_, self.b_, self.c_ = float(a), float(b), float(c)
        return self

    def logit(self, scores) -> np.ndarray:
        """The calibrated logit ``a ln s - b ln(1 - s) + c``."""
        self._require_fitted()
        X = self._features(scores)
        return self.a_ * X[:, 0] + self.b_ * X[:, 1] + self.c_

    def predict(self, scores) -> np.ndarray:
        return expit(self.logit(scores))

    def to_dict(self) -> dict[str, Any]:
        self._require_fitted()
        return {"kind": self.kind, "format_version": _FORMAT_VERSION, "input": self.input, "eps": self.eps,
                "a": self.a_, "b": self.b_, "c": self.c_, "n_fit": self.n_fit_, "fit_fingerprint": self.fit_fingerprint_}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BetaCalibrator":
        _need(d, ("input", "eps", "a", "b", "c", "n_fit", "fit_fingerprint"), "beta")
        cal = cls(input=d["input"], eps=_num(d, "eps"))
        cal.a_, cal.b_, cal.c_ = _num(d, "a", lo=0.0), _num(d, "b", lo=0.0), _num(d, "c")
        cal.n_fit_, cal.fit_fingerprint_ = int(d["n_fit"]), d["fit_fingerprint"]
        return cal


# ----------------------------------------------------------------------------- monotone spline
class SplineCalibrator(_Calibrator):
    r"""Monotone piecewise-linear calibration in the logit: ``p = sigmoid(g(x))``.

    ``x = logit(clip(s))`` (``input="probability"``) or ``x = s`` (``input="score"``). Knots
    ``t_1 < ... < t_K`` are the distinct ``j / (n_knots + 1)`` quantiles of ``x`` over the clicked fit
    rows, so every segment (the two tails too) holds about the same number of clicks;
    ``g(x) = c + sum_j beta_j phi_j(x)`` with ``phi_0 = min(x - t_1, 0)``, ``phi_j =
    clip(x - t_j, 0, t_{j+1} - t_j)`` and ``phi_K = max(x - t_K, 0)``: ``beta_j`` is the slope on
    segment j. The fit minimises the mean log loss with every ``beta_j >= min_slope``
    (:func:`ltr.calibrate.logistic.weighted_logistic`), so ``g`` is strictly increasing (AUC unchanged up to
    floating-point ties, which the invariance check counts).
    """

    kind = "spline"

    def __init__(self, input: str = "probability", n_knots: int = 8, min_slope: float = 1e-3, eps: float = 1e-12):
        if input not in ("probability", "score"):
            raise LtrError(f"input must be 'probability' or 'score', got {input!r}")
        if int(n_knots) != n_knots or n_knots < 1:
            raise LtrError(f"n_knots must be a positive integer, got {n_knots!r}")
        if not min_slope > 0:
            raise LtrError(f"min_slope must be > 0, got {min_slope!r}")
        self.input, self.n_knots, self.min_slope, self.eps = input, int(n_knots), float(min_slope), float(eps)
        self.knots_: np.ndarray | None = None
        self.slopes_: np.ndarray | None = None
        self.intercept_: float | None = None

    def _x(self, scores) -> np.ndarray:
        s = _as_scores(scores)
        if self.input == "score":
            return s
        p = np.clip(_as_probabilities(s, "spline calibration"), self.eps, 1.0 - self.eps)
        return np.log(p) - np.log1p(-p)

    @staticmethod
    def _basis(x: np.ndarray, t: np.ndarray) -> np.ndarray:
        cols = [np.minimum(x - t[0], 0.0)]
        cols += [np.clip(x - t[j], 0.0, t[j + 1] - t[j]) for j in range(t.shape[0] - 1)]
        cols.append(np.maximum(x - t[-1], 0.0))
        return np.column_stack(cols)

    def fit(self, scores, labels, *, held_out: bool = True, training_fingerprint: str | None = None):
        s, y = self._check_fit_data(scores, labels, held_out, training_fingerprint)
        x = self._x(s)
        # Knots at quantiles of the clicked rows' x: every segment, the two tails included, holds about
        # 1 / (n_knots + 1) of the clicks, so no slope is fitted on a stretch without clicks.
        t = np.unique(np.quantile(x[y == 1], np.arange(1, self.n_knots + 1) / (self.n_knots + 1)))
        B = self._basis(x, t)
        k = B.shape[1]
        lower = np.r_[np.full(k, self.min_slope), -np.inf]
        theta = weighted_logistic(np.column_stack([B, np.ones(x.shape[0])]), y, lower=lower)
        self.knots_, self.slopes_, self.intercept_ = t, theta[:k], float(theta[k])
        return self

    def logit(self, scores) -> np.ndarray:
        """``g(x)``, the calibrated logit (strictly increasing in the score)."""
        self._require_fitted()
        return self._basis(self._x(scores), self.knots_) @ self.slopes_ + self.intercept_

    def predict(self, scores) -> np.ndarray:
        return expit(self.logit(scores))

    def to_dict(self) -> dict[str, Any]:
        self._require_fitted()
        return {"kind": self.kind, "format_version": _FORMAT_VERSION, "input": self.input, "n_knots": self.n_knots,
                "min_slope": self.min_slope, "eps": self.eps, "knots": self.knots_.tolist(),
                "slopes": self.slopes_.tolist(), "intercept": self.intercept_, "n_fit": self.n_fit_,
                "fit_fingerprint": self.fit_fingerprint_}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SplineCalibrator":
        _need(d, ("input", "n_knots", "min_slope", "eps", "knots", "slopes", "intercept", "n_fit", "fit_fingerprint"),
              "spline")
        cal = cls(input=d["input"], n_knots=d["n_knots"], min_slope=_num(d, "min_slope"), eps=_num(d, "eps"))
        knots, slopes = np.asarray(d["knots"], dtype=np.float64), np.asarray(d["slopes"], dtype=np.float64)
        if knots.ndim != 1 or knots.size < 1 or slopes.shape != (knots.size + 1,) or np.any(np.diff(knots) <= 0):
            raise LtrError("spline calibrator JSON: knots must increase strictly and slopes have one more value")
        if not np.all(np.isfinite(slopes)) or np.any(slopes <= 0):
            raise LtrError("spline calibrator JSON: every slope must be finite and > 0")
        cal.knots_, cal.slopes_, cal.intercept_ = knots, slopes, _num(d, "intercept")
        cal.n_fit_, cal.fit_fingerprint_ = int(d["n_fit"]), d["fit_fingerprint"]
        return cal


# ----------------------------------------------------------------------------- JSON helpers
def _need(d: Mapping[str, Any], keys, kind: str) -> None:
    for k in keys:
        if k not in d:
            raise LtrError(f"calibrator JSON of kind {kind!r} lacks the field {k!r}")


def _num(d: Mapping[str, Any], key: str, lo: float | None = None) -> float:
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (lo is not None and v < lo):
        raise LtrError(f"calibrator JSON: {key!r} must be a finite number{'' if lo is None else f' >= {lo}'}, got {v!r}")
    return float(v)


def _global_from_dict(d: Mapping[str, Any]):
    from ltr.calibrate.calibrators import PlattCalibrator

    kind = d.get("kind") if isinstance(d, Mapping) else None
    if kind == "platt":
        return PlattCalibrator.from_dict(d)
    if kind == "beta":
        return BetaCalibrator.from_dict(d)
    if kind == "spline":
        return SplineCalibrator.from_dict(d)
    raise LtrError(f"calibrator JSON: the global map must be platt, beta or spline, got {kind!r}")


def make_global_map(method: str, scores: np.ndarray, probabilities: bool | None = None):
    """A global strictly increasing map for ``method`` ("platt", "beta", "spline"), reading ``scores`` as
    probabilities (``probabilities=True``) or as logits / raw scores (False); None: probabilities when
    all lie in [0, 1]."""
    from ltr.calibrate.calibrators import PlattCalibrator

    prob = bool(scores.size and scores.min() >= 0.0 and scores.max() <= 1.0) if probabilities is None else probabilities
    if method == "platt":
        return PlattCalibrator(input="logit" if prob else "score")
    if method == "beta":
        return BetaCalibrator(input="probability" if prob else "logit")
    if method == "spline":
        return SplineCalibrator(input="probability" if prob else "score")
    raise LtrError(f"unknown global map {method!r}; choose one of {', '.join(GLOBAL_MAPS)}")


def global_logit(cal, scores) -> np.ndarray:
    """The calibrated logit of a global map (Platt computes it from its slope and intercept)."""
    if hasattr(cal, "logit"):
        return cal.logit(scores)
    cal._require_fitted()
    return cal.slope_ * cal._x(_as_scores(scores)) + cal.intercept_


# ----------------------------------------------------------------------------- fields
class FieldCodes:
    """The values of one field as integer codes into their canonical keys
    (:func:`ltr.calibrate.field_values.encode_values`), and the numpy kind of the values as given."""

    __slots__ = ("codes", "keys", "raw_kind")

    def __init__(self, values):
        v = np.asarray(values)
        self.raw_kind = v.dtype.kind
        self.codes, self.keys = encode_values(v)

    def subset(self, rows) -> "FieldCodes":
        """The codes of ``rows`` (a mask or indices), renumbered over the keys those rows use."""
        out = FieldCodes.__new__(FieldCodes)
        used, inv = np.unique(self.codes[rows], return_inverse=True)
        out.codes, out.keys, out.raw_kind = inv.reshape(-1), [self.keys[i] for i in used], self.raw_kind
        return out

    def texts(self) -> np.ndarray:
        """The key of every row, as a numpy string array."""
        return np.asarray(self.keys, dtype=str)[self.codes] if self.keys else np.zeros(0, dtype=str)

    def lookup(self, table: Mapping[str, Any], width: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per row: ``table[key]`` (``[n, width]``) and whether the key is in ``table`` (else zeros)."""
        vals = np.zeros((len(self.keys), width))
        found = np.zeros(len(self.keys), dtype=bool)
        for i, k in enumerate(self.keys):
            if k in table:
                vals[i], found[i] = table[k], True
        return vals[self.codes], found[self.codes]


def field_codes(fields: Mapping[str, Any], names, n: int) -> dict[str, FieldCodes]:
    """``{name: FieldCodes}`` of the named fields, each with one value per score (``n``)."""
    out = {}
    for name in names:
        if name not in fields:
            raise LtrError(f"field {name!r} is missing (the calibrator was fitted with fields {', '.join(names)})")
        v = np.asarray(fields[name])
        if v.shape != (n,):
            raise LtrError(f"field {name!r} has shape {v.shape}, expected one value per score ({n})")
        out[name] = FieldCodes(v)
    return out


def field_keys(fields: Mapping[str, Any], names, n: int) -> dict[str, np.ndarray]:
    """The named fields as arrays of their values' canonical texts (:mod:`ltr.calibrate.field_values`:
    ``3``, ``3.0`` and ``"3"`` are the same value)."""
    return {name: c.texts() for name, c in field_codes(fields, names, n).items()}


def cell_codes(codes) -> np.ndarray:
    """One integer per row for the combination of the values of several fields (``codes``: integer
    code arrays, or :class:`FieldCodes`, or text arrays)."""
    cell = None
    for c in codes:
        c = c.codes if isinstance(c, FieldCodes) else np.asarray(c)
        if c.dtype.kind not in "iu":
            c = np.unique(c, return_inverse=True)[1].reshape(-1)
        c = c.astype(np.int64)
        cell = c if cell is None else cell * (int(c.max()) + 1 if c.size else 1) + c
        cell = np.unique(cell, return_inverse=True)[1].reshape(-1)  # compact, so that the next product cannot overflow
    return np.zeros(0, dtype=np.int64) if cell is None else cell


def _cell_codes(keys: dict) -> np.ndarray:
    """One integer per row for the combination of all field values (``keys``: name -> values or codes)."""
    return cell_codes(list(keys.values()))


def unseen_values(table: Mapping[str, Any], codes: FieldCodes, weights=None) -> dict:
    """The values of one field absent from a fitted ``table`` (they took the global map for this field):
    ``{key: [rows, weight]}`` and the mask of their rows."""
    _, found = codes.lookup(table)
    out = {}
    if not found.all():
        miss = ~found
        rows = np.bincount(codes.codes[miss], minlength=len(codes.keys))
        w = rows if weights is None else np.bincount(codes.codes[miss], weights=weights[miss], minlength=len(codes.keys))
        out = {codes.keys[i]: [int(rows[i]), float(w[i])] for i in np.flatnonzero(rows)}
    return {"values": out, "mask": ~found}


def check_within_field_order(before, after, groups) -> dict[str, int]:
    """Whether ``after`` keeps the order of ``before`` inside every group exactly.

    Counts adjacent pairs (in the order of ``before`` within a group) that a strictly monotone map
    per group would keep: ``reversed`` (before increases, after decreases), ``ties_created`` (before
    increases, after equal), ``ties_broken`` (before equal, after differs). All three 0 is the
    invariance (then every within-group AUC is unchanged bit for bit, since the ranks are the same).
    """
    b = np.asarray(before, dtype=np.float64)
    a = np.asarray(after, dtype=np.float64)
    g = np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    order = np.lexsort((a, b, g))  # ties in b ordered by a, so broken ties show as increases of a
    same = g[order][1:] == g[order][:-1]
    db = np.diff(b[order])[same]
    da = np.diff(a[order])[same]
    return {"reversed": int(np.sum((db > 0) & (da < 0))), "ties_created": int(np.sum((db > 0) & (da == 0))),
            "ties_broken": int(np.sum((db == 0) & (da != 0)))}


def _offset_newton(codes, k, z, y, lam, delta=None, iters: int = 3) -> np.ndarray:
    r"""Penalised logit offsets per code: maximise ``sum_i loglik(y_i, sigmoid(z_i + d[c_i])) - lam/2 sum d^2``
    by ``iters`` Newton steps, ``d += (sum (y - q) - lam d) / (sum q (1 - q) + lam)``."""
    d = np.zeros(k) if delta is None else delta.copy()
    for _ in range(iters):
        q = expit(z + d[codes])
        g = np.bincount(codes, weights=y - q, minlength=k) - lam * d
        h = np.bincount(codes, weights=q * (1.0 - q), minlength=k) + lam
        d += g / h
    return d


def _joint_offsets(codes, sizes, z0, y, lam, max_iter, tol, dense_limit: int = 3000, counts=None):
    r"""The penalised offsets of :class:`FieldAwareCalibrator`: Newton's method on all offsets at once
    (the Hessian of the log likelihood in the offsets is built block by block with one ``bincount`` per
    pair of fields, plus ``lam`` on the diagonal), until no offset moves by more than ``tol``. Above
    ``dense_limit`` offsets in total it backfits instead (one field at a time). With ``counts`` each
    entry stands for ``counts`` rows sharing ``z0`` and ``y`` is their number of clicks (the binned fit
    of :mod:`ltr.calibrate.stream_fit`): gradient ``sum (y - counts q)``, curvature ``sum counts q (1 - q)``."""
    starts = np.r_[0, np.cumsum(sizes)]
    total = int(starts[-1])
    d = np.zeros(total)
    cycle_move = 0.0
    for it in range(max_iter * (1 if total <= dense_limit else len(codes))):
        z = z0 + sum(d[starts[j] + c] for j, c in enumerate(codes))
        q = expit(z)
        w = q * (1.0 - q) if counts is None else counts * q * (1.0 - q)
        nq = q if counts is None else counts * q
        g = np.concatenate([np.bincount(c, weights=y - nq, minlength=sizes[j]) for j, c in enumerate(codes)]) - lam * d
        if total <= dense_limit:
            H = np.zeros((total, total))
            for a, ca in enumerate(codes):
                for b, cb in enumerate(codes[a:], start=a):
                    block = np.bincount(ca * sizes[b] + cb, weights=w, minlength=sizes[a] * sizes[b])
                    H[starts[a]:starts[a + 1], starts[b]:starts[b + 1]] = block.reshape(sizes[a], sizes[b])
                    H[starts[b]:starts[b + 1], starts[a]:starts[a + 1]] = block.reshape(sizes[a], sizes[b]).T
            H[np.diag_indices(total)] += lam + 1e-12
            step = np.linalg.solve(H, g)
        else:
            j = it % len(codes)
            step = np.zeros(total)
            h = np.bincount(codes[j], weights=w, minlength=sizes[j]) + lam
            step[starts[j]:starts[j + 1]] = g[starts[j]:starts[j + 1]] / h
        d += step
        cycle_move = max(cycle_move, float(np.max(np.abs(step))))
        if total <= dense_limit or j == len(codes) - 1:
            if cycle_move <= tol:
                break
            cycle_move = 0.0
    return [d[starts[j]:starts[j + 1]] for j in range(len(codes))]


def _mean_log_loss(z: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(-log_expit(-z) - y * z))


class _FieldCalibrator(_Calibrator):
    """Shared parts of the calibrators that read fields: field checks, the global map, JSON."""

    score_scale = "auto"
    field_types_: dict | None = None

    def _start(self, scores, labels, fields, held_out, training_fingerprint):
        if not self.fields:
            raise LtrError(f"{self.kind} calibration needs at least one field")
        s, y = self._check_fit_data(scores, labels, held_out, training_fingerprint)
        if fields is None:
            raise LtrError(f"{self.kind} calibration needs the field values of every row (fields={{name: values}})")
        codes = field_codes(fields, self.fields, s.shape[0])
        self.field_types_ = {f: words_type(codes[f].keys) for f in self.fields}
        return s, y, codes

    def _global_map(self, s):
        return make_global_map(self.global_method, s, probabilities=_scale_flag(self.score_scale))

    def fitted_values(self, field: str) -> set:
        """The keys of ``field`` the fit saw (any other value takes no offset for this field)."""
        raise NotImplementedError

    def codes_for(self, fields, n: int, vocab: dict) -> dict[str, FieldCodes]:
        """The field values of ``n`` rows to predict, as codes, checked against the fitted types
        (:func:`ltr.calibrate.field_values.check_field_type`; ``vocab``: field -> fitted keys)."""
        codes = field_codes(fields if fields is not None else {}, self.fields, n)
        for f, c in codes.items():
            check_field_type(f, (self.field_types_ or {}).get(f), c.keys, c.raw_kind, vocab.get(f, ()))
        return codes

    def _common_dict(self) -> dict[str, Any]:
        self._require_fitted()
        return {"kind": self.kind, "format_version": _FORMAT_VERSION, "fields": list(self.fields),
                "field_types": self.field_types_, "global_method": self.global_method,
                "prior_clicks": self.prior_clicks, "global": self.global_.to_dict(), "n_fit": self.n_fit_,
                "fit_fingerprint": self.fit_fingerprint_}


def _scale_flag(scale: str):
    """``score_scale`` -> the ``probabilities`` argument of :func:`make_global_map` (None: by the range)."""
    if scale not in ("auto", "probability", "logit"):
        raise LtrError(f"score_scale must be auto, probability or logit, got {scale!r}")
    return None if scale == "auto" else scale == "probability"


def _field_types(d: Mapping[str, Any], fields) -> dict | None:
    """The recorded field types of a calibrator JSON (absent in files written before they were recorded)."""
    t = d.get("field_types")
    if t is None:
        return None
    if not isinstance(t, dict) or set(t) != set(fields) or not all(v in ("int", "float", "text") for v in t.values()):
        raise LtrError("calibrator JSON: 'field_types' needs one of int, float, text per field")
    return dict(t)


def _canonical_table(table: Mapping[str, Any]) -> dict:
    """A stored ``{value: entry}`` table with its keys made canonical (files written before the keys
    were: a float field was stored as "1.0")."""
    return {value_key(k): v for k, v in table.items()}


def _check_common(d: Mapping[str, Any], kind: str) -> None:
    _need(d, ("fields", "global_method", "prior_clicks", "global", "n_fit", "fit_fingerprint"), kind)
    if not isinstance(d["fields"], list) or not d["fields"] or not all(isinstance(f, str) for f in d["fields"]):
        raise LtrError(f"calibrator JSON of kind {kind!r}: 'fields' must be a non-empty list of names")
    _num(d, "prior_clicks", lo=0.0)


class FieldAwareCalibrator(_FieldCalibrator):
    r"""Global map plus per-field-value logit offsets shrunk towards the global map by click count.

    ``p = sigmoid(g(s) + sum_f delta_f[v_f])`` with ``g`` the global map (``global_method``: platt, beta
    or spline, fitted on all fit rows) and the offsets the penalised maximum-likelihood fit

        max  sum_i loglik(y_i, sigmoid(g(s_i) + sum_f delta_f[v_{f,i}])) - (prior_clicks / 2) sum_{f,v} delta_f[v]^2

    by Newton's method on all offsets jointly (:func:`_joint_offsets`, until no offset moves by more
    than ``tol``). For a
    value with ``C`` observed and ``E`` predicted clicks at a low click rate the offset is about
    ``(C - E) / (E + prior_clicks)``: values with few clicks stay near the global map, a value never
    seen in the fit data gets offset 0 (the global map).

    **Invariance:** inside a group of rows that share the values of all the calibrated fields the map
    is ``g`` plus one constant, so the order of the scores there is kept exactly. ``fit`` checks it on
    the fit rows (:func:`check_within_field_order`: no reversed pair, no tie created or broken) and
    refuses the fit otherwise (a saturated logit, for instance); ``order_check_`` holds the counts.
    """

    kind = "field-aware"

    def __init__(self, fields, global_method: str = "spline", prior_clicks: float = 30.0, max_rounds: int = 100,
                 tol: float = 1e-9, score_scale: str = "auto"):
        self.fields, self.score_scale = tuple(fields), score_scale
        _scale_flag(score_scale)
        if global_method not in GLOBAL_MAPS:
            raise LtrError(f"global_method must be one of {', '.join(GLOBAL_MAPS)}, got {global_method!r}")
        if not prior_clicks >= 0:
            raise LtrError(f"prior_clicks must be >= 0, got {prior_clicks!r}")
        self.global_method, self.prior_clicks = global_method, float(prior_clicks)
        self.max_rounds, self.tol = int(max_rounds), float(tol)
        self.global_ = None
        self.offsets_: dict | None = None
        self.order_check_: dict | None = None

    def fit(self, scores, labels, fields=None, *, held_out: bool = True, training_fingerprint: str | None = None):
        s, y, codes = self._start(scores, labels, fields, held_out, training_fingerprint)
        self.global_ = self._global_map(s).fit(s, y, held_out=True)
        z0 = global_logit(self.global_, s)
        d = _joint_offsets([codes[f].codes for f in self.fields], [len(codes[f].keys) for f in self.fields], z0, y,
                           self.prior_clicks, self.max_rounds, self.tol)
        d = dict(zip(self.fields, d))
        self.offsets_ = {f: dict(zip(codes[f].keys, d[f].tolist())) for f in self.fields}
        after = z0 + sum(d[f][codes[f].codes] for f in self.fields)
        self.order_check_ = check_within_field_order(s, after, cell_codes([codes[f] for f in self.fields]))
        if any(self.order_check_.values()):
            bad = self.order_check_
            self.offsets_ = None
            raise LtrError(f"field-aware fit refused: inside groups of equal {', '.join(self.fields)} the calibrated "
                           f"values do not keep the order of the scores ({bad['reversed']} reversed, "
                           f"{bad['ties_created']} ties created, {bad['ties_broken']} ties broken)")
        return self

    def _require_fitted(self):
        if self.offsets_ is None or self.global_ is None:
            raise LtrError("FieldAwareCalibrator is not fitted: call fit(scores, labels, fields) first")

    def fitted_values(self, field: str) -> set:
        self._require_fitted()
        return set(self.offsets_[field])

    def logit(self, scores, fields) -> np.ndarray:
        self._require_fitted()
        s = _as_scores(scores)
        codes = self.codes_for(fields, s.shape[0], self.offsets_)
        z = global_logit(self.global_, s)
        for f in self.fields:
            z = z + codes[f].lookup(self.offsets_[f])[0][:, 0]
        return z

    def predict(self, scores, fields=None) -> np.ndarray:
        """Calibrated probabilities; ``fields``: ``{name: values per row}`` for every calibrated field."""
        return expit(self.logit(scores, fields))

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update({"max_rounds": self.max_rounds, "tol": self.tol, "offsets": self.offsets_,
                  "order_check": self.order_check_})
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FieldAwareCalibrator":
        _check_common(d, "field-aware")
        _need(d, ("offsets", "max_rounds", "tol"), "field-aware")
        cal = cls(d["fields"], global_method=d["global_method"], prior_clicks=d["prior_clicks"],
                  max_rounds=d["max_rounds"], tol=d["tol"])
        cal.global_ = _global_from_dict(d["global"])
        off = d["offsets"]
        if not isinstance(off, dict) or set(off) != set(cal.fields):
            raise LtrError("field-aware calibrator JSON: 'offsets' needs one table per field")
        for f, table in off.items():
            if not isinstance(table, dict) or not all(isinstance(v, (int, float)) and math.isfinite(v)
                                                      for v in table.values()):
                raise LtrError(f"field-aware calibrator JSON: the offsets of field {f!r} must be finite numbers")
        cal.offsets_ = {f: {value_key(k): float(v) for k, v in off[f].items()} for f in cal.fields}
        cal.field_types_ = _field_types(d, cal.fields)
        cal.order_check_ = d.get("order_check")
        cal.n_fit_, cal.fit_fingerprint_ = int(d["n_fit"]), d["fit_fingerprint"]
        return cal


class MulticalibrationCalibrator(_FieldCalibrator):
    r"""Multicalibration over fields: rounds of shrunk logit offsets per (field value, score bin).

    Start: ``z = g(s)``, the global map (``global_method``) fitted on the fitting share of the rows. A
    seeded share ``holdout`` of the fit rows is held out and never fitted on. Round 1 adds one offset
    per field value, all fields jointly (the offsets of :class:`FieldAwareCalibrator`). Round r > 1: cut the current
    ``z`` of the fitting rows into ``n_bins`` equal-mass bins (edges stored); for each field in turn
    add to every row the offset of its cell (value, bin) from one penalised Newton step
    (:class:`FieldAwareCalibrator`'s penalty ``prior_clicks``) times ``learning_rate``. After each round
    the held-out mean log loss is measured; the rounds stop when it has not improved by
    ``min_improvement`` for ``patience`` rounds (or after ``max_rounds``), and only the rounds up to
    the best held-out loss are kept. Values unseen in the fit data get no offset.

    Unlike :class:`FieldAwareCalibrator` the offsets depend on the score bin, so rows inside a field
    value can change order across bin edges: the global and within-field AUC can move (report them).
    """

    kind = "multicalibration"

    def __init__(self, fields, global_method: str = "platt", n_bins: int = 4, prior_clicks: float = 30.0,
                 learning_rate: float = 0.5, max_rounds: int = 30, holdout: float = 0.2, patience: int = 2,
                 min_improvement: float = 1e-7, seed: int = 0, score_scale: str = "auto"):
        self.fields, self.score_scale = tuple(fields), score_scale
        _scale_flag(score_scale)
        if global_method not in GLOBAL_MAPS:
            raise LtrError(f"global_method must be one of {', '.join(GLOBAL_MAPS)}, got {global_method!r}")
        if int(n_bins) != n_bins or n_bins < 1:
            raise LtrError(f"n_bins must be a positive integer, got {n_bins!r}")
        if not 0.0 < holdout < 1.0:
            raise LtrError(f"holdout must be strictly between 0 and 1, got {holdout!r}")
        if not 0.0 < learning_rate <= 1.0 or not prior_clicks >= 0:
            raise LtrError("learning_rate must be in (0, 1] and prior_clicks >= 0")
        self.global_method, self.n_bins, self.prior_clicks = global_method, int(n_bins), float(prior_clicks)
        self.learning_rate, self.max_rounds, self.holdout = float(learning_rate), int(max_rounds), float(holdout)
        self.patience, self.min_improvement, self.seed = int(patience), float(min_improvement), int(seed)
        self.global_ = None
        self.rounds_: list | None = None
        self.history_: list | None = None

    def _round(self, z, y, codes):
        """One round on the fitting rows: returns the round's specification and the new ``z``."""
        edges = np.unique(np.quantile(z, np.arange(1, self.n_bins) / self.n_bins))
        b = np.searchsorted(edges, z, side="right")
        nb = edges.shape[0] + 1
        spec = {"edges": edges.tolist(), "offsets": {}}
        for f in self.fields:
            c = codes[f]
            cell = c.codes * nb + b
            d = self.learning_rate * _offset_newton(cell, len(c.keys) * nb, z, y, self.prior_clicks, iters=1)
            z = z + d[cell]
            table = d.reshape(len(c.keys), nb)
            spec["offsets"][f] = {v: table[i].tolist() for i, v in enumerate(c.keys)}
        return spec, z

    def _first_round(self, z, y, codes):
        """Round 1: one offset per field value (a single bin), all fields jointly, as the field-aware fit."""
        d = _joint_offsets([codes[f].codes for f in self.fields], [len(codes[f].keys) for f in self.fields], z, y,
                           self.prior_clicks, 100, 1e-9)
        for j, f in enumerate(self.fields):
            z = z + d[j][codes[f].codes]
        spec = {"edges": [], "offsets": {f: {v: [float(x)] for v, x in zip(codes[f].keys, d[j])}
                                         for j, f in enumerate(self.fields)}}
        return spec, z

    def _apply_round(self, spec, z, codes):
        edges = np.asarray(spec["edges"], dtype=np.float64)
        b = np.searchsorted(edges, z, side="right")
        out = z.copy()
        for f in self.fields:
            vals, _ = codes[f].lookup(spec["offsets"][f], width=edges.shape[0] + 1)
            out = out + vals[np.arange(z.shape[0]), b]
        return out

    def fit(self, scores, labels, fields=None, *, held_out: bool = True, training_fingerprint: str | None = None):
        s, y, codes = self._start(scores, labels, fields, held_out, training_fingerprint)
        n = s.shape[0]
        hold = np.zeros(n, dtype=bool)
        hold[np.random.default_rng(self.seed).permutation(n)[: int(round(self.holdout * n))]] = True
        tr = ~hold
        for name, m in (("fitting", tr), ("held-out", hold)):
            if m.sum() == 0 or y[m].min() == y[m].max():
                raise LtrError(f"multicalibration: the {name} share of the fit rows needs both classes")
        self.global_ = self._global_map(s).fit(s[tr], y[tr], held_out=True)
        z_tr, z_ho = global_logit(self.global_, s[tr]), global_logit(self.global_, s[hold])
        k_tr = {f: codes[f].subset(tr) for f in self.fields}
        k_ho = {f: codes[f].subset(hold) for f in self.fields}
        rounds, history = [], [_mean_log_loss(z_ho, y[hold])]
        best, best_r = history[0], 0
        for r in range(self.max_rounds):
            spec, z_tr = (self._first_round if r == 0 else self._round)(z_tr, y[tr], k_tr)
            z_ho = self._apply_round(spec, z_ho, k_ho)
            rounds.append(spec)
            history.append(_mean_log_loss(z_ho, y[hold]))
            if history[-1] < best - self.min_improvement:
                best, best_r = history[-1], r + 1
            elif r + 1 - best_r >= self.patience:
                break
        self.rounds_, self.history_ = rounds[:best_r], history
        return self

    def _require_fitted(self):
        if self.rounds_ is None or self.global_ is None:
            raise LtrError("MulticalibrationCalibrator is not fitted: call fit(scores, labels, fields) first")

    def fitted_values(self, field: str) -> set:
        self._require_fitted()
        return set().union(*(spec["offsets"][field] for spec in self.rounds_))

    def logit(self, scores, fields) -> np.ndarray:
        self._require_fitted()
        s = _as_scores(scores)
        codes = self.codes_for(fields, s.shape[0], {f: self.fitted_values(f) for f in self.fields})
        z = global_logit(self.global_, s)
        for spec in self.rounds_:
            z = self._apply_round(spec, z, codes)
        return z

    def predict(self, scores, fields=None) -> np.ndarray:
        """Calibrated probabilities; ``fields``: ``{name: values per row}`` for every calibrated field."""
        return expit(self.logit(scores, fields))

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update({"n_bins": self.n_bins, "learning_rate": self.learning_rate, "max_rounds": self.max_rounds,
                  "holdout": self.holdout, "patience": self.patience, "min_improvement": self.min_improvement,
                  "seed": self.seed, "rounds": self.rounds_, "held_out_log_loss": self.history_})
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MulticalibrationCalibrator":
        _check_common(d, "multicalibration")
        _need(d, ("n_bins", "learning_rate", "max_rounds", "holdout", "patience", "min_improvement", "seed", "rounds"),
              "multicalibration")
        cal = cls(d["fields"], global_method=d["global_method"], n_bins=d["n_bins"], prior_clicks=d["prior_clicks"],
                  learning_rate=d["learning_rate"], max_rounds=d["max_rounds"], holdout=d["holdout"],
                  patience=d["patience"], min_improvement=d["min_improvement"], seed=d["seed"])
        cal.global_ = _global_from_dict(d["global"])
        if not isinstance(d["rounds"], list):
            raise LtrError("multicalibration calibrator JSON: 'rounds' must be a list")
        for i, spec in enumerate(d["rounds"]):
            _check_round(spec, cal.fields, i)
        rounds = [{"edges": spec["edges"], "offsets": {f: _canonical_table(t) for f, t in spec["offsets"].items()}}
                  for spec in d["rounds"]]
        cal.rounds_, cal.history_ = rounds, d.get("held_out_log_loss")
        cal.field_types_ = _field_types(d, cal.fields)
        cal.n_fit_, cal.fit_fingerprint_ = int(d["n_fit"]), d["fit_fingerprint"]
        return cal


def _check_round(spec, fields, i: int) -> None:
    where = f"multicalibration calibrator JSON, round {i}"
    if not isinstance(spec, dict) or "edges" not in spec or "offsets" not in spec:
        raise LtrError(f"{where}: needs 'edges' and 'offsets'")
    edges = np.asarray(spec["edges"], dtype=np.float64)
    if edges.ndim != 1 or (edges.size and (np.any(np.diff(edges) <= 0) or not np.all(np.isfinite(edges)))):
        raise LtrError(f"{where}: 'edges' must be finite and strictly increasing")
    if set(spec["offsets"]) != set(fields):
        raise LtrError(f"{where}: 'offsets' needs one table per field ({', '.join(fields)})")
    for f, table in spec["offsets"].items():
        for v, row in table.items():
            if not isinstance(row, list) or len(row) != edges.shape[0] + 1 or not all(
                    isinstance(x, (int, float)) and math.isfinite(x) for x in row):
                raise LtrError(f"{where}: field {f!r} value {v!r} needs {edges.shape[0] + 1} finite offsets")


def make_field_calibrator(method: str, fields=(), **kwargs):
    """``"beta"``, ``"spline"`` (global maps), ``"field-aware"``, ``"multicalibration"`` (need ``fields``)."""
    if method == "beta":
        return BetaCalibrator(**kwargs)
    if method == "spline":
        return SplineCalibrator(**kwargs)
    if method == "field-aware":
        return FieldAwareCalibrator(fields, **kwargs)
    if method == "multicalibration":
        return MulticalibrationCalibrator(fields, **kwargs)
    raise LtrError(f"unknown calibration method {method!r}; choose one of {', '.join(FIELD_METHODS)}")


def field_calibrator_from_dict(d: Mapping[str, Any]):
    kind = d.get("kind")
    cls = {"beta": BetaCalibrator, "spline": SplineCalibrator, "field-aware": FieldAwareCalibrator,
           "multicalibration": MulticalibrationCalibrator}.get(kind)
    if cls is None:
        raise LtrError(f"unknown calibrator kind {kind!r} in JSON")
    return cls.from_dict(d)
