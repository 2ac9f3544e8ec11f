"""The report of ``ltr calibrate`` on tables, which judges a calibration the way ad systems do:
normalized entropy, PCOC, the per-field table (worst values first, F-RCE per field), and the order
checks (global AUC, AUC within each field, order inside the calibrated cells). Reading the tables:
:mod:`ltr.calibrate.tables`.
"""

from __future__ import annotations

import numpy as np

from metrics.calibration import field_calibration, normalized_entropy, pcoc

__all__ = ["field_report", "field_report_text"]


def _side(y, p, w, codes, min_count, n_boot, seed):
    out = {"normalized_entropy": normalized_entropy(y, p, sample_weight=w), "pcoc": pcoc(y, p, sample_weight=w)}
    if codes:
        fc = field_calibration(y, p, {f: c.codes for f, c in codes.items()}, sample_weight=w, min_count=min_count,
                               n_boot=n_boot, seed=seed)
        for r in fc.rows:  # the codes back to the values' canonical texts
            r["value"] = codes[r["field"]].keys[r["value"]]
        for f, d in fc.fields.items():
            d["worst_value"] = None if d["worst_value"] is None else codes[f].keys[d["worst_value"]]
        out.update({"mean_f_rce": fc.mean_f_rce, "worst_abs_error": fc.worst_abs_error,
                    "fields": fc.fields, "values": fc.rows})
    return out


def field_report(y, before, after, fields: dict, *, scores=None, weights=None, calibrated_fields=(),
                 min_count: float = 0, n_boot: int = 200, seed: int = 0) -> dict:
    """NE, PCOC and the per-field tables before and after, and the order checks.

    Field values are compared as values (:mod:`ltr.calibrate.field_values`) and reported by their
    canonical texts. ``order``: global AUC before / after (of ``scores``, default ``before``), AUC within
    each field (pairs-weighted :func:`metrics.grouped_auc`) before / after, and, with
    ``calibrated_fields``, the order check inside the cells of those fields
    (:func:`ltr.calibrate.field_calibrators.check_within_field_order`).
    """
    from ltr.calibrate.field_calibrators import cell_codes, check_within_field_order, field_codes
    from metrics.classification import auc, grouped_auc

    s = before if scores is None else scores
    codes = field_codes(fields, list(fields), y.shape[0])
    rep = {"before": _side(y, before, weights, codes, min_count, n_boot, seed),
           "after": _side(y, after, weights, codes, min_count, n_boot, seed)}
    order = {"auc_before": auc(y, s), "auc_after": auc(y, after), "within_field_auc": {}}
    for name, c in codes.items():
        b, a = grouped_auc(y, s, c.codes).value, grouped_auc(y, after, c.codes).value
        order["within_field_auc"][name] = {"before": b, "after": a, "unchanged": bool(a == b)}
    if calibrated_fields:
        order["within_cells"] = {"fields": list(calibrated_fields),
                                 **check_within_field_order(s, after, cell_codes([codes[f] for f in calibrated_fields]))}
    rep["order"] = order
    return rep


def field_report_text(rep: dict, top: int = 10) -> str:
    """The human summary of :func:`field_report`: headline numbers, order checks, worst values after."""
    b, a, o = rep["before"], rep["after"], rep["order"]
    lines = [f"{'':<26} {'before':>10} {'after':>10}",
             f"{'normalized entropy':<26} {b['normalized_entropy']:>10.5f} {a['normalized_entropy']:>10.5f}",
             f"{'PCOC':<26} {b['pcoc']:>10.4f} {a['pcoc']:>10.4f}"]
    if "mean_f_rce" in b:
        lines.append(f"{'F-RCE (mean over fields)':<26} {b['mean_f_rce']:>10.4f} {a['mean_f_rce']:>10.4f}")
        for name in b["fields"]:
            lines.append(f"{'  F-RCE ' + name:<26} {b['fields'][name]['f_rce']:>10.4f} {a['fields'][name]['f_rce']:>10.4f}")
        lines.append(f"{'worst |PCOC - 1|':<26} {b['worst_abs_error']:>10.4f} {a['worst_abs_error']:>10.4f}")
    lines.append(f"{'AUC':<26} {o['auc_before']:>10.6f} {o['auc_after']:>10.6f}")
    for name, d in o["within_field_auc"].items():
        lines.append(f"{'  AUC within ' + name:<26} {d['before']:>10.6f} {d['after']:>10.6f}"
                     f"  {'unchanged' if d['unchanged'] else 'changed'}")
    if "within_cells" in o:
        c = o["within_cells"]
        lines.append(f"order inside cells of {', '.join(c['fields'])}: {c['reversed']} reversed, "
                     f"{c['ties_created']} ties created, {c['ties_broken']} ties broken")
    if "values" in a:
        lines += ["", f"worst field values after calibration (PCOC, {top} shown):",
                  f"{'field':<12} {'value':<14} {'count':>10} {'clicks':>9} {'PCOC':>8} {'95% interval':>18}"]
        for r in a["values"][:top]:
            lines.append(f"{r['field']:<12} {str(r['value']):<14} {r['count']:>10.0f} {r['clicks']:>9.0f} "
                         f"{r['pcoc']:>8.4f} [{r['pcoc_low']:>7.4f}, {r['pcoc_high']:>7.4f}]")
    return "\n".join(lines) + "\n"


class BoundFields:
    """A field calibrator with the field values of the rows it will be asked about, so that code written
    for ``predict(scores)`` (the before / after report) can use it."""

    def __init__(self, calibrator, fields: dict):
        self.calibrator, self.fields = calibrator, fields
        self.n_fit_ = calibrator.n_fit_

    def predict(self, scores):
        return self.calibrator.predict(scores, self.fields)

    def to_dict(self):
        return self.calibrator.to_dict()


def reliability_band(y, p, n_bins: int = 10, n_boot: int = 200, level: float = 0.9, seed: int = 0):
    """Equal-mass reliability curve with a bootstrap band: ``(mean_p, rate, low, high)`` per bin.

    Bins: ``n_bins`` equal-count bins of the rows sorted by ``p`` (ties split by position). ``low`` /
    ``high``: the ``(1 -/+ level) / 2`` percentiles of the bin's click rate over ``n_boot`` seeded
    Poisson-bootstrap replicates (each row weighted by a Poisson(1) count), the bins held fixed.
    """
    return reliability_bands(y, [p], n_bins, n_boot, level, seed)[0]


def reliability_bands(y, ps, n_bins: int = 10, n_boot: int = 200, level: float = 0.9, seed: int = 0) -> list:
    """:func:`reliability_band` of each probability vector of ``ps`` for the same rows ``y``.

    The replicates' Poisson weights depend only on ``seed`` and the number of rows, so one draw serves
    every vector: each result equals ``reliability_band(y, p, ...)`` exactly, for half the draws with
    two vectors (a model before and after calibration).
    """
    y = np.asarray(y, dtype=np.float64)
    m = y.shape[0]
    plans = [_equal_mass_bins(y, np.asarray(p, dtype=np.float64), n_bins) for p in ps]
    reps = [np.empty((n_boot, int(keep.sum()))) for _, keep, _, _ in plans]
    rng = np.random.default_rng(seed)
    for b in range(n_boot):
        c = rng.poisson(1.0, m).astype(np.float64)
        for (bins, keep, _, _), rep in zip(plans, reps):
            num = np.bincount(bins, weights=c * y, minlength=n_bins)[keep]
            den = np.bincount(bins, weights=c, minlength=n_bins)[keep]
            rep[b] = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
    a = (1.0 - level) / 2.0
    return [(mean_p, rate, np.nanquantile(rep, a, axis=0), np.nanquantile(rep, 1.0 - a, axis=0))
            for (_, _, mean_p, rate), rep in zip(plans, reps)]


def _equal_mass_bins(y: np.ndarray, p: np.ndarray, n_bins: int):
    """``(bin of each row, non-empty bins, mean p and click rate of those)`` for :func:`reliability_bands`."""
    order = np.argsort(p, kind="stable")
    m = p.shape[0]
    bins = np.empty(m, dtype=np.int64)
    bins[order] = np.minimum((np.arange(m) * n_bins) // max(m, 1), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    keep = count > 0
    mean_p = np.bincount(bins, weights=p, minlength=n_bins)[keep] / count[keep]
    rate = np.bincount(bins, weights=y, minlength=n_bins)[keep] / count[keep]
    return bins, keep, mean_p, rate


def field_reliability_figure(y, series: dict, values, field: str, *, top: int = 4, n_bins: int = 10,
                             n_boot: int = 200, seed: int = 0):
    """One panel per value of ``field`` (the ``top`` values with most rows): for each series
    (name -> probabilities) its :func:`reliability_band` curve with the band shaded."""
    from matplotlib.figure import Figure

    from ltr.base.figures import set_margins
    from ltr.calibrate.field_calibrators import FieldCodes

    y = np.asarray(y, dtype=np.float64)
    v = FieldCodes(values).texts()
    keys, counts = np.unique(v, return_counts=True)
    chosen = keys[np.argsort(-counts, kind="stable")][:top]
    fig = Figure(figsize=(4.2 * len(chosen), 4.0))
    axes = np.atleast_1d(fig.subplots(1, len(chosen)))
    for ax, key in zip(axes, chosen):
        rows = v == key
        top_v = 0.0
        bands = reliability_bands(y[rows], [np.asarray(probs)[rows] for probs in series.values()], n_bins, n_boot,
                                  seed=seed)
        for name, (mp, rate, lo, hi) in zip(series, bands):
            line, = ax.plot(mp, rate, marker="o", ms=3, label=name)
            ax.fill_between(mp, lo, hi, alpha=0.2, color=line.get_color())
            top_v = max(top_v, float(mp.max()), float(np.nanmax(hi)))
        top_v = min(1.0, top_v * 1.05) or 1.0
        ax.plot([0, top_v], [0, top_v], ls="--", color="grey", lw=1)
        ax.set_xlim(0, top_v)
        ax.set_ylim(0, top_v)
        ax.set_title(f"{field} = {key} ({int(rows.sum())} rows)")
        ax.set_xlabel("mean predicted probability")
        ax.set_ylabel("observed click rate")
        ax.legend(fontsize=8)
    # fixed text and short tick labels: margins known in advance (ltr.base.figures), no tight_layout pass
    set_margins(fig, left=0.7, right=0.15, bottom=0.5, top=0.35, wgap=0.75, ncols=len(chosen))
    return fig


def save_field_reliability(path, y, series: dict, values, field: str, **kwargs) -> None:
    """Write :func:`field_reliability_figure` as a PNG, atomically."""
    from ltr.base.io_utils import atomic_path

    fig = field_reliability_figure(y, series, values, field, **kwargs)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
