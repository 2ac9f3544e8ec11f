"""The report of ``ltr calibrate --stream``, computed from the evaluation part's binned statistics.

It has the shape of :func:`ltr.calibrate.field_report.field_report` (``before``, ``after``, ``order``)
plus ``binning`` (what is exact, what is binned). **Exact** (from sums over rows, equal to the in-memory
report up to the order of additions): before calibration, the normalized entropy, PCOC, and per field
value count, clicks, predicted clicks, PCOC; F-RCE and field ECE per field. **Binned**: everything after
calibration (the calibrator applied at each entry's mean score, times the entry's rows), every AUC
(rows of one entry are tied), the value ECE (equal-mass groups made of whole entries) and the PCOC
intervals, which are delta-method normal intervals from the exact sums of squares (not the in-memory
report's bootstrap): ``var(PCOC_v) ~ sum_i w_i^2 (p_i - PCOC_v y_i)^2 / clicks_v^2``.
"""

from __future__ import annotations

import numpy as np

from ltr.calibrate.stream_fit import entry_scores, predict_entries
from ltr.calibrate.stream_stats import BinnedStats
from metrics.calibration import FieldCalibration, f_rce_from_sums, field_ece_from_sums

__all__ = ["binned_auc", "binned_report", "exact_side", "binned_order", "binned_reliability", "EXACT", "BINNED"]

EXACT = ["normalized_entropy before", "pcoc before", "per-value count / clicks / predicted / pcoc before",
         "f_rce before", "field_ece before"]
BINNED = ["every number after calibration", "auc", "within_field_auc", "value ece", "pcoc intervals (delta method)"]


def _order(groups, values, by_value=None) -> np.ndarray:
    """The permutation sorting by ``groups`` (small non-negative ints) then ``values``: a stable sort of the
    groups (a radix sort when they fit 16 bits) after ``by_value``, the argsort of ``values`` (given when
    it is shared by several calls)."""
    o = np.argsort(values, kind="stable") if by_value is None else by_value
    g = groups[o]
    if g.size and g.max() < 2**16:
        g = g.astype(np.uint16)
    return o[np.argsort(g, kind="stable")]


def binned_auc(values, pos, neg, groups=None, by_value=None) -> float:
    """AUC of entries holding ``pos`` positives and ``neg`` negatives at ``values`` (an entry's rows
    tied with each other and with equal values of its group); with ``groups`` the pairs-weighted AUC
    within groups (pairs across groups are not counted). NaN without a pair. ``by_value``: the stable
    argsort of ``values`` when the caller has it."""
    v = np.asarray(values, dtype=np.float64)
    if groups is None:
        g = np.zeros(v.shape[0], dtype=np.int64)
    elif np.issubdtype(np.asarray(groups).dtype, np.integer) and np.asarray(groups).min() >= 0:
        g = np.asarray(groups, dtype=np.int64)  # codes already
    else:
        g = np.unique(groups, return_inverse=True)[1].reshape(-1)
    if by_value is None:
        by_value = np.argsort(v, kind="stable")
    order = _order(g, v, by_value)
    v, g = v[order], g[order]
    p, n = np.asarray(pos, dtype=np.float64)[order], np.asarray(neg, dtype=np.float64)[order]
    new_run = np.r_[True, (v[1:] != v[:-1]) | (g[1:] != g[:-1])]
    run = np.cumsum(new_run) - 1
    rp, rn = np.bincount(run, weights=p), np.bincount(run, weights=n)
    rg = g[new_run]
    cum_n = np.cumsum(rn)
    start = np.r_[True, rg[1:] != rg[:-1]]
    base = np.maximum.accumulate(np.where(start, np.r_[0.0, cum_n[:-1]], -np.inf))
    below = cum_n - rn - base
    concordant = float(np.sum(rp * (below + 0.5 * rn)))
    pairs = float(np.sum(np.bincount(rg, weights=rp) * np.bincount(rg, weights=rn)))
    return concordant / pairs if pairs > 0 else float("nan")


def _value_ece(vcode, k, key, rows, sp, pos, n_bins, by_value=None):
    """Equal-mass ECE inside each value, the groups made of whole entries in order of ``key`` (the side's probability)."""
    order = _order(vcode, key, by_value)
    c, r = vcode[order], rows[order]
    total = np.bincount(c, weights=r, minlength=k)
    cum = np.cumsum(r)
    start = np.r_[0.0, np.cumsum(total)[:-1]][c]
    mid = cum - start - 0.5 * r
    grp = c * n_bins + np.minimum((mid * n_bins // np.maximum(total[c], 1)).astype(np.int64), n_bins - 1)
    gap = np.abs(np.bincount(grp, weights=sp[order], minlength=k * n_bins)
                 - np.bincount(grp, weights=pos[order], minlength=k * n_bins))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, gap.reshape(k, n_bins).sum(axis=1) / total, np.nan)


def _field_rows(name, words, n, sy, sp, var, eces, z, min_count):
    """Rows of the per-value table and the field's summary."""
    from math import inf

    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sy > 0, sp / np.where(sy > 0, sy, 1.0), inf)
        half = z * np.sqrt(np.maximum(var, 0.0)) / np.where(sy > 0, sy, np.nan)
    err = np.abs(ratio - 1.0)
    big = n >= min_count
    worst = int(np.argmax(np.where(big, err, -1.0))) if big.any() else -1
    summary = {"f_rce": f_rce_from_sums(n, sy, sp), "field_ece": field_ece_from_sums(n, sy, sp),
               "n_values": len(words), "n_without_clicks": int(np.sum(sy == 0)),
               "worst_value": words[worst] if worst >= 0 else None,
               "worst_abs_error": float(err[worst]) if worst >= 0 else float("nan")}
    rows = [{"field": name, "value": words[v], "count": float(n[v]), "clicks": float(sy[v]), "predicted": float(sp[v]),
             "pcoc": float(ratio[v]), "pcoc_low": float(ratio[v] - half[v]), "pcoc_high": float(ratio[v] + half[v]),
             "abs_error": float(err[v]), "ece": float(eces[v])} for v in range(len(words))]
    return rows, summary


def _side(stats: BinnedStats, sums: dict, codes, min_count: float, level: float, n_bins: int) -> dict:
    """NE, PCOC and the per-field tables from per-entry sums ``w, wy, wp, wll, wwpp, wwpy, wwy, rows, pos, sp`` and
    ``key``, the entry's probability (its order within a value makes the value ECE's groups)."""
    from statistics import NormalDist

    from metrics.calibration import _binary_entropy

    w, wy, wp = sums["w"].sum(), sums["wy"].sum(), sums["wp"].sum()
    h = _binary_entropy(wy / w)
    out = {"normalized_entropy": float(sums["wll"].sum() / w / h) if h > 0 else float("nan"),
           "pcoc": float(wp / wy) if wy > 0 else (float("inf") if wp > 0 else float("nan"))}
    if not stats.fields:
        return out
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    by_key = np.argsort(sums["key"], kind="stable")
    rows, per_field = [], {}
    for j, name in enumerate(stats.fields):
        words, c = stats.values(j), codes[:, j]
        k = len(words)
        n, sy, sp = (np.bincount(c, weights=sums[key], minlength=k) for key in ("w", "wy", "wp"))
        ratio = np.where(sy > 0, sp / np.where(sy > 0, sy, 1.0), 0.0)
        var = (np.bincount(c, weights=sums["wwpp"], minlength=k) - 2 * ratio * np.bincount(c, weights=sums["wwpy"], minlength=k)
               + ratio ** 2 * np.bincount(c, weights=sums["wwy"], minlength=k))
        eces = _value_ece(c, k, sums["key"], sums["rows"], sums["sp"], sums["pos"], n_bins, by_key)
        r, per_field[name] = _field_rows(name, words, n, sy, sp, var, eces, z, min_count)
        rows += r
    rows.sort(key=lambda r: (r["count"] < min_count, -r["abs_error"] if np.isfinite(r["abs_error"]) else -np.inf))
    fc = FieldCalibration(rows=rows, fields=per_field, min_count=float(min_count), overall={})
    out.update({"mean_f_rce": fc.mean_f_rce, "worst_abs_error": fc.worst_abs_error, "fields": per_field, "values": rows})
    return out


def _after_sums(before: dict, f: np.ndarray, t) -> dict:
    """Per-entry sums after calibration: the calibrated probability ``f`` of the entry for all its rows."""
    e = np.finfo(np.float64).eps
    fc = np.clip(f, e, 1.0 - e)
    out = dict(before)
    out["wp"] = before["w"] * f
    out["wll"] = -(before["wy"] * np.log(fc) + (before["w"] - before["wy"]) * np.log1p(-fc))
    out["wwpp"], out["wwpy"] = t.col("ww") * f * f, before["wwy"] * f
    out["sp"], out["key"] = before["rows"] * f, f
    return out


def binned_report(stats: BinnedStats, calibrator, *, field_method: bool, min_count: float = 0,
                  level: float = 0.95, n_bins: int = 10) -> dict:
    """Before / after / order on the evaluation part (see the module docstring for what is exact)."""
    t = stats.canonical().eval
    if t.keys.shape[0] == 0:
        from ltr.base.errors import LtrError

        raise LtrError("the evaluation part of the table is empty (change --fit-fraction)")
    r = entry_scores(stats, t)
    before = {name: t.col(name) for name in ("w", "wy", "wp", "wll", "wwpp", "wwpy", "wwy", "rows", "pos", "sp")}
    before["xbar"] = before["key"] = np.round(t.col("sx") / t.col("rows"), 9)  # as entry_scores: equal scores stay tied
    f = predict_entries(stats, t, calibrator)
    after = _after_sums(before, f, t)
    codes = stats.entry_codes(t)
    rep = {"before": _side(stats, before, codes, min_count, level, n_bins),
           "after": _side(stats, after, codes, min_count, level, n_bins)}
    pos, neg = before["pos"], before["rows"] - before["pos"]
    ob, oa = np.argsort(before["xbar"], kind="stable"), np.argsort(f, kind="stable")
    order = {"auc_before": binned_auc(before["xbar"], pos, neg, by_value=ob), "auc_after": binned_auc(f, pos, neg, by_value=oa),
             "within_field_auc": {}}
    for j, name in enumerate(stats.fields):
        b = binned_auc(before["xbar"], pos, neg, codes[:, j], by_value=ob)
        a = binned_auc(f, pos, neg, codes[:, j], by_value=oa)
        order["within_field_auc"][name] = {"before": b, "after": a, "unchanged": bool(a == b)}
    if field_method:
        from ltr.calibrate.field_calibrators import check_within_field_order

        order["within_cells"] = {"fields": list(stats.fields), "counted_over": "entries",
                                 **check_within_field_order(r, f, stats.entry_cells(t)[0])}
    rep["order"] = order
    rep["overall"] = {"count": float(before["w"].sum()), "clicks": float(before["wy"].sum()),
                      "rows": int(before["rows"].sum()), "p_at_mean_is": "sigmoid(mean logit)" if stats.probabilities else "mean logit"}
    rep["binning"] = {"bin_width": stats.grid.width, "logit_limit": stats.grid.limit, "entries_fit": int(stats.fit.keys.shape[0]),
                      "entries_eval": int(t.keys.shape[0]), "exact": EXACT, "binned": BINNED, "interval_level": level}
    return rep


def _part_sums(table) -> dict:
    """The per-entry sums :func:`_side` reads, for one part of an accumulator; ``key`` = the entry's mean probability."""
    sums = {name: table.col(name) for name in ("w", "wy", "wp", "wll", "wwpp", "wwpy", "wwy", "rows", "pos", "sp")}
    sums["key"] = sums["sp"] / sums["rows"]
    return sums


def exact_side(stats: BinnedStats, *, min_count: float = 0, level: float = 0.95, n_bins: int = 10) -> dict:
    """NE, PCOC and the per-field tables of the evaluation part of ``stats``, whose scores are the
    probabilities being judged: every number is a sum over rows, so exact (the per-value ECE groups whole
    entries, the intervals are the delta method's)."""
    t = stats.canonical().eval
    return _side(stats, _part_sums(t), stats.entry_codes(t), min_count, level, n_bins)


def binned_order(stats: BinnedStats) -> dict:
    """AUC and AUC within each field of the evaluation part's probabilities (entries' rows tied)."""
    t = stats.canonical().eval
    s = _part_sums(t)
    xbar = np.round(t.col("sx") / t.col("rows"), 9)
    pos, neg = s["pos"], s["rows"] - s["pos"]
    by = np.argsort(xbar, kind="stable")
    codes = stats.entry_codes(t)
    return {"auc": binned_auc(xbar, pos, neg, by_value=by),
            "within_field_auc": {name: binned_auc(xbar, pos, neg, codes[:, j], by_value=by)
                                 for j, name in enumerate(stats.fields)}}


def binned_reliability(stats: BinnedStats, n_bins: int = 15, strategy: str = "width", level: float = 0.9) -> dict:
    """The reliability bins of :func:`ltr.calibrate.report.reliability_bins` from the evaluation part's
    entries (an entry's rows go to the bin of the entry's mean probability): counts, clicks and mean
    predictions are sums over rows, the bin edges are those of the entries."""
    from ltr.calibrate.report import wilson_interval

    t = stats.canonical().eval
    rows, pos, sp = t.col("rows"), t.col("pos"), t.col("sp")
    p = sp / rows
    if strategy == "width":
        b = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    else:
        o = np.argsort(p, kind="stable")
        mid = np.empty(p.shape[0])
        mid[o] = np.cumsum(rows[o]) - 0.5 * rows[o]
        b = np.minimum((mid * n_bins / rows.sum()).astype(np.int64), n_bins - 1)
    count, clicks, pred = (np.bincount(b, weights=v, minlength=n_bins) for v in (rows, pos, sp))
    keep = count > 0
    low, high = wilson_interval(clicks[keep], count[keep], level)
    return {"strategy": strategy, "level": level, "count": count[keep].astype(int).tolist(),
            "mean_predicted": (pred[keep] / count[keep]).tolist(), "rate": (clicks[keep] / count[keep]).tolist(),
            "low": low.tolist(), "high": high.tolist()}
