"""Calibrators fitted on binned sufficient statistics (:mod:`ltr.calibrate.stream_stats`).

Each entry (cell, score bin) of the fit part stands for ``rows`` rows with ``pos`` clicks at the
entry's mean logit ``xbar = sx / rows``; its representative score is ``r = sigmoid(xbar)`` for probability
scores and ``r = xbar`` for logit scores, and the calibrators' own feature maps are applied to ``r``.
The fits are the in-memory ones with each row replaced by its entry's mean (**approximate**, the bins
are the only error; on the test tables the streamed map is within 1e-3 of the in-memory one):

* Platt: ``argmin sum_e [rows_e softplus(u_e) - pos_e u_e]``, ``u = a xbar + b`` (:func:`ltr.calibrate.logistic.weighted_logistic`);
* beta: the same on ``(ln r, -ln(1 - r))``, with Kull et al.'s rule for a negative coefficient;
* spline: the same on the spline basis of ``xbar``, slopes bounded below by ``min_slope``; knots at
  the quantiles of ``xbar`` over the clicked rows (each at its entry's mean);
* isotonic: scikit-learn's PAV on ``(r_e, pos_e / rows_e)`` with weights ``rows_e``;
* field-aware: the global map on the histogram summed over cells, then the offsets per field value by
  :func:`ltr.calibrate.field_calibrators._joint_offsets` with ``counts = rows``.

Multicalibration needs the rows themselves (bins re-cut on the current logit each round): it is not
offered on streamed tables.
"""

from __future__ import annotations


import numpy as np
from scipy.special import expit

from ltr.calibrate.logistic import weighted_logistic
from ltr.calibrate.stream_stats import BinnedStats, BinnedTable
from ltr.base.errors import LtrError

__all__ = ["STREAM_METHODS", "entry_scores", "entry_fields", "predict_entries", "fit_binned"]

STREAM_METHODS = ("platt", "isotonic", "isotonic-strict", "beta", "spline", "field-aware")


def entry_scores(stats: BinnedStats, table: BinnedTable) -> np.ndarray:
    """The representative score of every entry: ``sigmoid(xbar)`` (probability scores) or ``xbar``, with
    ``xbar`` rounded to 1e-9 so that entries of rows with one same score (in different cells) stay tied
    (``sum x / rows`` of equal ``x`` can differ in the last digit)."""
    xbar = np.round(table.col("sx") / table.col("rows"), 9)
    return expit(xbar) if stats.probabilities else xbar


def entry_fields(stats: BinnedStats, table: BinnedTable) -> dict:
    """``{field: value (text) of every entry}``, the ``fields`` argument of a field calibrator."""
    codes = stats.entry_codes(table)
    return {f: np.asarray(stats.values(j), dtype=object)[codes[:, j]].astype(str) for j, f in enumerate(stats.fields)}


def predict_entries(stats: BinnedStats, table: BinnedTable, calibrator) -> np.ndarray:
    """The calibrated probability of every entry: the map at the entry's representative score; for a
    field-aware calibrator ``sigmoid(g(r) + sum_f offset_f[value])`` looked up by the entries' value codes
    (no per-entry text), a value unseen in the fit part getting offset 0."""
    from ltr.calibrate.field_calibrators import FieldAwareCalibrator, global_logit

    r = entry_scores(stats, table)
    if not isinstance(calibrator, FieldAwareCalibrator):
        return calibrator.predict(r)
    z = global_logit(calibrator.global_, r)
    codes = stats.entry_codes(table)
    for j, f in enumerate(stats.fields):
        table_f = calibrator.offsets_[f]
        z = z + np.array([table_f.get(v, 0.0) for v in stats.values(j)])[codes[:, j]]
    return expit(z)


def _histogram(stats: BinnedStats, table: BinnedTable):
    """The entries summed over cells: ``(r, pos, rows)`` per occupied score bin."""
    b = stats.entry_cells(table)[1]
    rows = np.bincount(b, weights=table.col("rows"), minlength=stats.grid.n)
    keep = rows > 0
    pos = np.bincount(b, weights=table.col("pos"), minlength=stats.grid.n)[keep]
    xbar = np.bincount(b, weights=table.col("sx"), minlength=stats.grid.n)[keep] / rows[keep]
    return (expit(xbar) if stats.probabilities else xbar), pos, rows[keep]


def _stamp(cal, stats: BinnedStats, table: BinnedTable):
    cal.n_fit_, cal.fit_fingerprint_ = int(table.col("rows").sum()), table.digest()
    return cal


def _fit_platt(stats, r, pos, n, table):
    from ltr.calibrate.calibrators import PlattCalibrator

    cal = PlattCalibrator(input="logit" if stats.probabilities else "score")
    x = cal._x(r)
    neg = n - pos
    if x.max() == x.min() or x[neg > 0].max() < x[pos > 0].min():  # an entry holding both classes overlaps them
        raise LtrError("Platt fit is undefined on this table: every score is in one bin, or the classes are separable by the score")
    a, b = weighted_logistic(np.column_stack([x, np.ones_like(x)]), pos, n)
    if not a > 0:
        raise LtrError(f"Platt fit has a non-positive slope ({a:.6g}): the scores do not rank the positives higher")
    cal.slope_, cal.intercept_ = float(a), float(b)
    return _stamp(cal, stats, table)


def _fit_beta(stats, r, pos, n, table):
    from ltr.calibrate.field_calibrators import BetaCalibrator

    cal = BetaCalibrator(input="probability" if stats.probabilities else "logit")
    X = cal._features(r)
    a, b, c = weighted_logistic(np.column_stack([X, np.ones(X.shape[0])]), pos, n)
    if a < 0 or b < 0:
        keep = 1 if a < 0 else 0
        coef, c = weighted_logistic(np.column_stack([X[:, keep], np.ones(X.shape[0])]), pos, n)
        a, b = (0.0, coef) if keep == 1 else (coef, 0.0)
    if not (a >= 0 and b >= 0 and a + b > 0):
        raise LtrError(f"beta calibration fit has non-positive coefficients (a={a:.6g}, b={b:.6g})")
    cal.a_, cal.b_, cal.c_ = float(a), float(b), float(c)
    return _stamp(cal, stats, table)


def _fit_spline(stats, r, pos, n, table):
    from ltr.calibrate.field_calibrators import SplineCalibrator

    cal = SplineCalibrator(input="probability" if stats.probabilities else "score")
    x = cal._x(r)
    # the in-memory rule (np.quantile of x over the clicked rows) with each clicked row at its entry's mean
    clicked = np.repeat(x, np.rint(pos).astype(np.int64))
    t = np.unique(np.quantile(clicked, np.arange(1, cal.n_knots + 1) / (cal.n_knots + 1)))
    B = cal._basis(x, t)
    k = B.shape[1]
    theta = weighted_logistic(np.column_stack([B, np.ones(x.shape[0])]), pos, n,
                              lower=np.r_[np.full(k, cal.min_slope), -np.inf])
    cal.knots_, cal.slopes_, cal.intercept_ = t, theta[:k], float(theta[k])
    return _stamp(cal, stats, table)


def _fit_isotonic(stats, r, pos, n, table, strict: bool):
    from sklearn.isotonic import IsotonicRegression

    from ltr.calibrate.calibrators import IsotonicCalibrator, _strict_levels

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(r, pos / n, sample_weight=n)
    cal = IsotonicCalibrator(strict=strict)
    cal.X_thresholds_ = np.asarray(iso.X_thresholds_, dtype=np.float64)
    cal.y_thresholds_ = np.asarray(iso.y_thresholds_, dtype=np.float64)
    cal.y_strict_, cal.tail_low_, cal.tail_high_ = _strict_levels(cal.y_thresholds_, cal.tie_margin)
    return _stamp(cal, stats, table)


def _fit_global(stats: BinnedStats, method: str, table: BinnedTable):
    r, pos, n = _histogram(stats, table)
    if method in ("isotonic", "isotonic-strict"):
        return _fit_isotonic(stats, r, pos, n, table, method == "isotonic-strict")
    return {"platt": _fit_platt, "beta": _fit_beta, "spline": _fit_spline}[method](stats, r, pos, n, table)


def _fit_field_aware(stats: BinnedStats, table: BinnedTable, global_method: str, prior_clicks: float):
    from ltr.calibrate.field_calibrators import (FieldAwareCalibrator, _joint_offsets, check_within_field_order,
                                                 global_logit)
    from ltr.calibrate.field_values import words_type

    if not stats.fields:
        raise LtrError("field-aware calibration needs --field-columns")
    cal = FieldAwareCalibrator(stats.fields, global_method=global_method, prior_clicks=prior_clicks)
    cal.global_ = _fit_global(stats, global_method, table)
    r = entry_scores(stats, table)
    z0 = global_logit(cal.global_, r)
    codes = stats.entry_codes(table)
    sizes = [len(v) for v in stats.vocab]
    d = _joint_offsets([codes[:, j] for j in range(len(sizes))], sizes, z0, table.col("pos"), cal.prior_clicks,
                       cal.max_rounds, cal.tol, counts=table.col("rows"))
    cal.offsets_ = {f: dict(zip(stats.values(j), d[j].tolist())) for j, f in enumerate(stats.fields)}
    cal.field_types_ = {f: words_type(stats.values(j)) for j, f in enumerate(stats.fields)}
    _stamp(cal, stats, table)
    after = z0 + sum(d[j][codes[:, j]] for j in range(len(sizes)))
    cal.order_check_ = check_within_field_order(r, after, stats.entry_cells(table)[0])
    if any(cal.order_check_.values()):
        raise LtrError(f"field-aware fit refused: the order inside a cell is not kept ({cal.order_check_})")
    return cal


def fit_binned(stats: BinnedStats, method: str, *, global_method: str | None = None, prior_clicks: float = 30.0):
    """Fit ``method`` (one of :data:`STREAM_METHODS`) on the fit part of ``stats``."""
    table = stats.canonical().fit
    if table.keys.shape[0] == 0:
        raise LtrError("the fit part of the table is empty (change --fit-fraction)")
    n_pos, n = float(table.col("pos").sum()), float(table.col("rows").sum())
    if n_pos == 0 or n_pos == n:
        raise LtrError(f"calibration needs both classes in the fit part; got {n_pos:.0f} positives of {n:.0f}")
    if method == "field-aware":
        return _fit_field_aware(stats, table, global_method or "spline", prior_clicks)
    if method not in STREAM_METHODS:
        raise LtrError(f"--stream fits {', '.join(STREAM_METHODS)}; {method!r} needs the rows in memory (drop --stream)")
    return _fit_global(stats, method, table)
