"""Calibration metrics of click-through-rate models, overall and per field value.

What ad systems read off a CTR model besides AUC (numpy only):

* :func:`normalized_entropy` (NE): the mean log loss divided by the entropy of the background CTR,
  He et al., "Practical Lessons from Predicting Clicks on Ads at Facebook" (ADKDD 2014). Below 1 the
  model beats always predicting the click rate; it is the log loss made comparable across traffic
  with different click rates.
* :func:`pcoc`: predicted clicks over observed clicks, ``sum p / sum y`` (the "calibration ratio" of
  He et al.); 1 is calibrated on average, 1.2 over-predicts by 20 %.
* :func:`ece_debiased`: the debiased binned estimate of the squared (L2) calibration error of Kumar,
  Liang and Ma, "Verified Uncertainty Calibration" (NeurIPS 2019), beside the plain binned ECE of
  :func:`metrics.ece` (equal-width / equal-mass bins).
* :func:`field_calibration`: for each field (advertiser, site, device, position...) and each of its
  values: count, clicks, predicted clicks, PCOC with a bootstrap interval, the value's ECE; per field
  the field-level relative calibration error (F-RCE, :func:`field_rce`) and the field ECE; the worst
  values first.

Conventions: labels are 0/1; predictions are probabilities in [0, 1]; optional ``sample_weight``
weights every sum (a row of weight 2 counts as two rows).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from metrics.classification import _binary_labels, _scores, _weights, log_loss

__all__ = [
    "normalized_entropy",
    "pcoc",
    "ece_debiased",
    "field_rce",
    "field_ece",
    "f_rce_from_sums",
    "field_ece_from_sums",
    "field_calibration",
    "FieldCalibration",
    "poisson_bootstrap_ratio",
]


def _binary_entropy(q: float) -> float:
    """``-(q ln q + (1 - q) ln(1 - q))`` in nats, 0 at q = 0 or 1."""
    if q <= 0.0 or q >= 1.0:
        return 0.0
    return float(-(q * np.log(q) + (1.0 - q) * np.log1p(-q)))


def normalized_entropy(y_true, y_prob, *, sample_weight=None) -> float:
    r"""Normalized entropy (He et al. 2014): mean log loss over the entropy of the background CTR.

    ::

        NE = [-(1/N) sum_i (y_i ln p_i + (1 - y_i) ln(1 - p_i))] / [-(q ln q + (1 - q) ln(1 - q))]

    with ``q = (1/N) sum_i y_i`` the click rate of the judged data itself (weighted means with
    ``sample_weight``). NE = 1 for the constant prediction ``p_i = q``; lower is better. The log loss is
    :func:`metrics.log_loss` (clipped at float64 epsilon). NaN when every label is the same (the
    entropy is 0).

    >>> round(normalized_entropy([1, 0, 0, 0], [0.5, 0.2, 0.2, 0.1]), 6)   # 0.311199 / 0.562335
    0.553404
    """
    y = _binary_labels(y_true)
    w = _weights(sample_weight, y.shape[0])
    q = float(np.average(y, weights=w))
    h = _binary_entropy(q)
    if h == 0.0:
        return float("nan")
    return log_loss(y, y_prob, sample_weight=w) / h


def pcoc(y_true, y_prob, *, sample_weight=None) -> float:
    r"""Predicted clicks over observed clicks: ``PCOC = sum_i w_i p_i / sum_i w_i y_i``.

    1 is calibrated in total; ``PCOC - 1`` is the relative over-prediction. Infinite when there are
    predictions but no clicks, NaN when both sums are 0.

    >>> round(pcoc([1, 0, 0, 1], [0.5, 0.2, 0.2, 0.1]), 12)   # 1.0 / 2
    0.5
    """
    y = _binary_labels(y_true)
    p = _scores(y_prob, y.shape[0], "y_prob", probability=True)
    w = _weights(sample_weight, y.shape[0])
    sp = float(np.sum(p if w is None else w * p))
    sy = float(np.sum(y if w is None else w * y))
    if sy == 0.0:
        return float("inf") if sp > 0 else float("nan")
    return sp / sy


def ece_debiased(y_true, y_prob, n_bins: int = 15, strategy: str = "mass") -> float:
    r"""Debiased binned estimate of the L2 calibration error (Kumar, Liang and Ma, NeurIPS 2019).

    The plug-in ``sum_b (n_b / n) (pbar_b - ybar_b)^2`` is biased upwards by the sampling noise of
    each bin's click rate, whose variance is about ``ybar_b (1 - ybar_b) / (n_b - 1)``. The debiased
    estimate subtracts it::

        CE_2^2 = sum_b (n_b / n) [ (pbar_b - ybar_b)^2 - ybar_b (1 - ybar_b) / (n_b - 1) ]

    and the function returns ``sqrt(max(CE_2^2, 0))`` (same unit as a probability, comparable to ECE).
    Bins as :func:`metrics.calibration_curve` (``"width"`` or ``"mass"``); bins with one item have no
    variance estimate and contribute their plug-in term.

    >>> y, p = [0, 0, 1, 1, 1, 1], [0.1, 0.1, 0.1, 0.5, 0.5, 0.5]
    >>> round(ece_debiased(y, p, n_bins=4, strategy="width"), 6)   # sqrt(0.5 (0.054444 - 0.111111) + 0.5 (0.25 - 0))
    0.310913
    """
    from metrics.classification import calibration_curve

    c = calibration_curve(y_true, y_prob, n_bins=n_bins, strategy=strategy)
    n_b = c.counts.astype(np.float64)
    gap2 = (c.mean_predicted - c.fraction_positive) ** 2
    var = np.where(n_b > 1, c.fraction_positive * (1.0 - c.fraction_positive) / np.maximum(n_b - 1.0, 1.0), 0.0)
    value = float(np.sum(c.shares * (gap2 - var)))
    return float(np.sqrt(max(value, 0.0)))


# ----------------------------------------------------------------------------- per field value
def _codes(values, n: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values)
    if v.shape != (n,):
        raise ValueError(f"field {name!r} must have one value per row ({n}), got shape {v.shape}")
    keys, codes = np.unique(v, return_inverse=True)
    return keys, codes.reshape(-1)


def _value_sums(codes, k, y, p, w):
    ww = np.ones_like(y) if w is None else w
    n = np.bincount(codes, weights=ww, minlength=k)
    sy = np.bincount(codes, weights=ww * y, minlength=k)
    sp = np.bincount(codes, weights=ww * p, minlength=k)
    return n, sy, sp


def _field_sums(y_true, y_prob, field, sample_weight) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per value of ``field``: (weighted) rows, clicks and predicted clicks, inputs checked."""
    y = _binary_labels(y_true)
    p = _scores(y_prob, y.shape[0], "y_prob", probability=True)
    w = _weights(sample_weight, y.shape[0])
    keys, codes = _codes(field, y.shape[0], "field")
    return _value_sums(codes, keys.shape[0], y, p, w)


def field_rce(y_true, y_prob, field, *, sample_weight=None, without_clicks: str = "count") -> float:
    r"""Field-level relative calibration error (F-RCE) of one field, after Pan et al., "Field-aware
    Calibration: A Simple and Empirically Strong Method for Reliable Probabilistic Predictions"
    (WWW 2020, arXiv:1905.10713)::

        F-RCE = (1/N) sum_{v in values of the field} N_v |sum_{i in v} (y_i - p_i)| / sum_{i in v} y_i

    the relative error of the predicted click count of each value, ``|1 - PCOC_v|``, averaged with
    the value's share of the rows ``N_v / N`` as weight. A value with no clicks has no relative error.
    ``without_clicks="count"`` (default): it contributes 0 and its rows still count in ``N`` (see
    ``FieldCalibration.n_without_clicks``); ``"drop"``: it is left out of both sums, so ``N`` is the rows of
    the values with clicks.

    Where it was checked (2026-12): the search tool's copies of the paper (arXiv 1905.10713 / ar5iv,
    docslib) gave only its abstract, which names "field-level calibration error" but not the formula;
    the formula above was checked against an independent implementation of the same metric, the
    evaluation script of Yang et al., "Deep Ensemble Shape Calibration" (github.com/HaoYang0123/DESC,
    ``eval/eval_res.py``, ``getFieldRCE``): per value ``N_v |sum p - sum y| / sum y``, summed and divided by
    the rows. It agrees term by term; it skips values without clicks in the denominator too, which is
    ``without_clicks="drop"`` here (both agree when every value has a click).

    >>> round(field_rce([1, 0, 1, 1], [0.5, 0.5, 0.3, 0.3], ["a", "a", "b", "b"]), 6)   # (2*0 + 2*0.7) / 4
    0.35
    >>> round(field_rce([1, 0, 0, 0], [0.5, 0.5, 0.3, 0.3], ["a", "a", "b", "b"], without_clicks="drop"), 6)   # 2*0 / 2
    0.0
    """
    return f_rce_from_sums(*_field_sums(y_true, y_prob, field, sample_weight), without_clicks=without_clicks)


def f_rce_from_sums(count, clicks, predicted, *, without_clicks: str = "count") -> float:
    """F-RCE from per-value sums (rows ``N_v``, clicks, predicted clicks): the formula of :func:`field_rce`."""
    if without_clicks not in ("count", "drop"):
        raise ValueError(f"without_clicks must be 'count' or 'drop', got {without_clicks!r}")
    n, sy, sp = (np.asarray(v, dtype=np.float64) for v in (count, clicks, predicted))
    has = sy > 0
    denominator = n.sum() if without_clicks == "count" else n[has].sum()
    return float(np.sum(n[has] * np.abs(sy[has] - sp[has]) / sy[has]) / denominator)


def field_ece_from_sums(count, clicks, predicted) -> float:
    """Field ECE from per-value sums: ``sum_v |predicted_v - clicks_v| / sum_v count_v`` (:func:`field_ece`)."""
    n, sy, sp = (np.asarray(v, dtype=np.float64) for v in (count, clicks, predicted))
    return float(np.sum(np.abs(sp - sy)) / n.sum())


def field_ece(y_true, y_prob, field, *, sample_weight=None) -> float:
    r"""Field ECE: the ECE whose bins are the values of the field,
    ``sum_v (N_v / N) |mean_{i in v} p_i - mean_{i in v} y_i| = (1/N) sum_v |sum_{i in v} (p_i - y_i)|``.

    >>> round(field_ece([1, 0, 1, 1], [0.5, 0.5, 0.3, 0.3], ["a", "a", "b", "b"]), 6)   # (0 + 1.4) / 4
    0.35
    """
    return field_ece_from_sums(*_field_sums(y_true, y_prob, field, sample_weight))


def poisson_bootstrap_ratio(codes, k: int, num, den, n_boot: int = 200, level: float = 0.95, seed: int = 0):
    r"""Percentile bootstrap interval of ``sum_{i in g} num_i / sum_{i in g} den_i`` for every group g.

    Poisson bootstrap (each row weighted by an independent Poisson(1) count per replicate, the
    large-data approximation of resampling rows with replacement inside each group), seeded; returns
    ``(low, high)`` arrays of length ``k`` with the ``(1 - level)/2`` and ``(1 + level)/2`` percentiles.
    Replicates whose denominator is 0 are left out of the percentiles.
    """
    rng = np.random.default_rng(seed)
    reps = np.empty((n_boot, k))
    for b in range(n_boot):
        c = rng.poisson(1.0, size=codes.shape[0]).astype(np.float64)
        s_num = np.bincount(codes, weights=c * num, minlength=k)
        s_den = np.bincount(codes, weights=c * den, minlength=k)
        with np.errstate(divide="ignore", invalid="ignore"):
            reps[b] = np.where(s_den > 0, s_num / s_den, np.nan)
    a = (1.0 - level) / 2.0
    with warnings.catch_warnings():  # a group without clicks in every replicate: all-NaN column, NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        low = np.nanquantile(reps, a, axis=0)
        high = np.nanquantile(reps, 1.0 - a, axis=0)
    return low, high


@dataclass
class FieldCalibration:
    """Calibration of a model per field value, and per field (see :func:`field_calibration`).

    ``rows``: one dict per (field, value) with ``field, value, count, clicks, predicted, pcoc,
    pcoc_low, pcoc_high, abs_error`` (``|PCOC - 1|``), ``ece`` (equal-mass ECE inside the value); sorted
    worst first: values with at least ``min_count`` rows by ``abs_error`` descending, then the rest
    the same way. ``fields``: per field ``{"f_rce", "field_ece", "n_values", "n_without_clicks",
    "worst_value", "worst_abs_error"}`` (worst among values with ``count >= min_count``).
    """

    rows: list
    fields: dict
    min_count: float
    overall: dict

    @property
    def mean_f_rce(self) -> float:
        """F-RCE averaged over the fields (each field counts once)."""
        return float(np.mean([f["f_rce"] for f in self.fields.values()]))

    @property
    def worst_abs_error(self) -> float:
        """The largest ``|PCOC - 1|`` over all values with ``count >= min_count`` (NaN if none)."""
        vals = [r["abs_error"] for r in self.rows if r["count"] >= self.min_count and np.isfinite(r["abs_error"])]
        return float(max(vals)) if vals else float("nan")

    def worst(self, k: int = 10) -> list:
        """The ``k`` worst rows (values with ``count >= min_count`` first)."""
        return self.rows[:k]


def _plain(x):
    """A numpy scalar as the Python value (JSON-friendly); other values as they are."""
    return x.item() if isinstance(x, np.generic) else x


def _value_ece(codes, k, y, p, n_bins):
    """Equal-mass ECE inside each value (bins from that value's own predictions)."""
    order = np.lexsort((p, codes))
    c_s, p_s, y_s = codes[order], p[order], y[order]
    starts = np.searchsorted(c_s, np.arange(k), side="left")
    ends = np.searchsorted(c_s, np.arange(k), side="right")
    out = np.full(k, np.nan)
    for v in range(k):
        a, b = starts[v], ends[v]
        if b - a == 0:
            continue
        m = b - a
        bins = np.minimum((np.arange(m) * n_bins) // m, n_bins - 1)
        sp = np.bincount(bins, weights=p_s[a:b], minlength=n_bins)
        sy = np.bincount(bins, weights=y_s[a:b], minlength=n_bins)
        out[v] = float(np.sum(np.abs(sp - sy)) / m)
    return out


def field_calibration(y_true, y_prob, fields: dict, *, sample_weight=None, min_count: float = 0,
                      n_boot: int = 200, level: float = 0.95, n_bins: int = 10, seed: int = 0) -> FieldCalibration:
    r"""Per field and per value: count, clicks, predicted clicks, PCOC with a bootstrap interval, ECE.

    ``fields``: ``{name: values per row}``. For value ``v`` of a field: ``count = sum w``,
    ``clicks = sum w y``, ``predicted = sum w p``, ``pcoc = predicted / clicks`` (inf without clicks),
    ``[pcoc_low, pcoc_high]`` its ``level`` percentile interval from a seeded Poisson bootstrap of
    ``n_boot`` replicates (:func:`poisson_bootstrap_ratio`), ``abs_error = |pcoc - 1|``, and ``ece`` the
    equal-mass ECE of the value's own rows (``n_bins`` bins of equal count by rank, unweighted). Per
    field: F-RCE (:func:`field_rce`) and the field ECE (:func:`field_ece`). The rows come worst first
    (see :class:`FieldCalibration`); ``min_count`` keeps small, noisy values from heading the list.
    """
    y = _binary_labels(y_true)
    p = _scores(y_prob, y.shape[0], "y_prob", probability=True)
    w = _weights(sample_weight, y.shape[0])
    if not fields:
        raise ValueError("field_calibration needs at least one field")
    rows, per_field = [], {}
    for i, (name, values) in enumerate(fields.items()):
        keys, codes = _codes(values, y.shape[0], name)
        k = keys.shape[0]
        n, sy, sp = _value_sums(codes, k, y, p, w)
        ww = np.ones_like(y) if w is None else w
        low, high = poisson_bootstrap_ratio(codes, k, ww * p, ww * y, n_boot=n_boot, level=level, seed=seed + i)
        eces = _value_ece(codes, k, y, p, n_bins)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(sy > 0, sp / np.where(sy > 0, sy, 1.0), np.inf)
        err = np.abs(ratio - 1.0)
        big = n >= min_count
        worst = int(np.argmax(np.where(big, err, -1.0))) if big.any() else -1
        per_field[name] = {
            "f_rce": field_rce(y, p, codes, sample_weight=w),
            "field_ece": field_ece(y, p, codes, sample_weight=w),
            "n_values": int(k),
            "n_without_clicks": int(np.sum(sy == 0)),
            "worst_value": _plain(keys[worst]) if worst >= 0 else None,
            "worst_abs_error": float(err[worst]) if worst >= 0 else float("nan"),
        }
        for v in range(k):
            rows.append({"field": name, "value": _plain(keys[v]), "count": float(n[v]), "clicks": float(sy[v]),
                         "predicted": float(sp[v]), "pcoc": float(ratio[v]), "pcoc_low": float(low[v]),
                         "pcoc_high": float(high[v]), "abs_error": float(err[v]), "ece": float(eces[v])})
    rows.sort(key=lambda r: (r["count"] < min_count, -r["abs_error"] if np.isfinite(r["abs_error"]) else -np.inf))
    overall = {"count": float(len(y) if w is None else w.sum()), "clicks": float(np.sum(y if w is None else w * y)),
               "pcoc": pcoc(y, p, sample_weight=w), "normalized_entropy": normalized_entropy(y, p, sample_weight=w)}
    return FieldCalibration(rows=rows, fields=per_field, min_count=float(min_count), overall=overall)
