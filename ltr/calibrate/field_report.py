"""Tables of (score, label, fields, weight) rows for ``ltr calibrate``, and the report that judges a
calibration the way ad systems do: normalized entropy, PCOC, the per-field table (worst values
first, F-RCE per field), and the order checks (global AUC, AUC within each field, order inside the
calibrated cells).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ltr.errors import LtrError
from metrics.calibration import field_calibration, normalized_entropy, pcoc

__all__ = ["CalibrationTable", "read_calibration_table", "field_report", "field_report_text"]


@dataclass
class CalibrationTable:
    scores: np.ndarray
    labels: np.ndarray
    fields: dict  # name -> [N] values
    weights: np.ndarray | None
    source: str


def _read_columns(path: Path, columns: list[str], text_columns=()):
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
    frame = pd.read_csv(path, usecols=columns, dtype={c: str for c in text_columns})
    return {c: frame[c].to_numpy() for c in columns}


def _missing(path, wanted, names) -> None:
    absent = [c for c in wanted if c not in names]
    if absent:
        raise LtrError(f"{path}: no column {absent[0]!r}; the columns are {', '.join(map(str, names))}")


def _numbers(path, name, values, allowed=None) -> np.ndarray:
    """A column as float64; refused, naming the row: text, and true/false anywhere but in 0/1 labels
    (a CSV reader reads ``true`` as a boolean, which would silently become a score or weight of 1)."""
    values = np.asarray(values)
    if values.dtype == bool and allowed is None:
        raise LtrError(f"{path}: column {name!r} holds true/false values, not numbers")
    try:
        v = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        i = next(i for i, x in enumerate(values.tolist()) if not _is_number(x))
        raise LtrError(f"{path}: column {name!r}, row {i + 1} holds {values[i]!r}, which is not a number") from None
    bad = ~np.isfinite(v)
    if allowed is not None:
        bad |= ~np.isin(v, allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        need = f"one of {', '.join(map(str, allowed))}" if allowed is not None else "a finite number"
        shown = values[i].item() if isinstance(values[i], np.generic) else values[i]
        raise LtrError(f"{path}: column {name!r}, row {i + 1} holds {shown!r}, which is not {need}")
    return v


def _is_number(x) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def read_calibration_table(path, *, score_column: str, label_column: str, field_columns=(),
                           weight_column: str | None = None) -> CalibrationTable:
    """Read the named columns of a Parquet file, a folder of Parquet files, or a CSV file with a header.

    Scores: finite numbers; labels: 0 / 1; weights: finite and >= 0; fields: any values (compared as
    text). Errors name the file, the column and the first bad row (1-based, data rows).
    """
    path = Path(path)
    if not path.exists():
        raise LtrError(f"{path}: no such file or folder")
    fields = [f for f in field_columns if f]
    cols = [score_column, label_column] + fields + ([weight_column] if weight_column else [])
    if len(set(cols)) != len(cols):
        raise LtrError(f"a column is named twice in --score-column / --label-column / --field-columns / --weight-column: {cols}")
    raw = _read_columns(path, cols, text_columns=fields)
    n = len(raw[score_column])
    if n == 0:
        raise LtrError(f"{path}: the table has no rows")
    weights = None
    if weight_column:
        weights = _numbers(path, weight_column, raw[weight_column])
        if (weights < 0).any():
            i = int(np.flatnonzero(weights < 0)[0])
            raise LtrError(f"{path}: column {weight_column!r}, row {i + 1} holds a negative weight")
    out = {}
    for f in fields:
        v = raw[f]
        if v.dtype == object:
            empty = np.array([x is None or (isinstance(x, float) and x != x) for x in v.tolist()], dtype=bool)
            if empty.any():
                raise LtrError(f"{path}: column {f!r}, row {int(np.flatnonzero(empty)[0]) + 1} is empty")
        out[f] = v
    return CalibrationTable(scores=_numbers(path, score_column, raw[score_column]),
                            labels=_numbers(path, label_column, raw[label_column], allowed=(0, 1)),
                            fields=out, weights=weights, source=str(path))


def _side(y, p, w, fields, min_count, n_boot, seed):
    out = {"normalized_entropy": normalized_entropy(y, p, sample_weight=w), "pcoc": pcoc(y, p, sample_weight=w)}
    if fields:
        fc = field_calibration(y, p, fields, sample_weight=w, min_count=min_count, n_boot=n_boot, seed=seed)
        out.update({"mean_f_rce": fc.mean_f_rce, "worst_abs_error": fc.worst_abs_error,
                    "fields": fc.fields, "values": fc.rows})
    return out


def field_report(y, before, after, fields: dict, *, scores=None, weights=None, calibrated_fields=(),
                 min_count: float = 0, n_boot: int = 200, seed: int = 0) -> dict:
    """NE, PCOC and the per-field tables before and after, and the order checks.

    ``order``: global AUC before / after (of ``scores``, default ``before``), AUC within each field
    (pairs-weighted :func:`metrics.grouped_auc`) before / after, and, with ``calibrated_fields``, the
    order check inside the cells of those fields
    (:func:`ltr.calibrate.field_calibrators.check_within_field_order`).
    """
    from ltr.calibrate.field_calibrators import _cell_codes, check_within_field_order, field_keys
    from metrics.classification import auc, grouped_auc

    s = before if scores is None else scores
    rep = {"before": _side(y, before, weights, fields, min_count, n_boot, seed),
           "after": _side(y, after, weights, fields, min_count, n_boot, seed)}
    order = {"auc_before": auc(y, s), "auc_after": auc(y, after), "within_field_auc": {}}
    for name, v in fields.items():
        b, a = grouped_auc(y, s, v).value, grouped_auc(y, after, v).value
        order["within_field_auc"][name] = {"before": b, "after": a, "unchanged": bool(a == b)}
    if calibrated_fields:
        keys = field_keys(fields, calibrated_fields, y.shape[0])
        order["within_cells"] = {"fields": list(calibrated_fields),
                                 **check_within_field_order(s, after, _cell_codes(keys))}
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
    y = np.asarray(y, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    m = p.shape[0]
    bins = np.empty(m, dtype=np.int64)
    bins[order] = np.minimum((np.arange(m) * n_bins) // max(m, 1), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    keep = count > 0
    mean_p = np.bincount(bins, weights=p, minlength=n_bins)[keep] / count[keep]
    rate = np.bincount(bins, weights=y, minlength=n_bins)[keep] / count[keep]
    rng = np.random.default_rng(seed)
    reps = np.empty((n_boot, int(keep.sum())))
    for b in range(n_boot):
        c = rng.poisson(1.0, m).astype(np.float64)
        num = np.bincount(bins, weights=c * y, minlength=n_bins)[keep]
        den = np.bincount(bins, weights=c, minlength=n_bins)[keep]
        reps[b] = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
    a = (1.0 - level) / 2.0
    return mean_p, rate, np.nanquantile(reps, a, axis=0), np.nanquantile(reps, 1.0 - a, axis=0)


def field_reliability_figure(y, series: dict, values, field: str, *, top: int = 4, n_bins: int = 10,
                             n_boot: int = 200, seed: int = 0):
    """One panel per value of ``field`` (the ``top`` values with most rows): for each series
    (name -> probabilities) its :func:`reliability_band` curve with the band shaded."""
    from matplotlib.figure import Figure

    y = np.asarray(y, dtype=np.float64)
    v = np.asarray(values).astype(str)
    keys, counts = np.unique(v, return_counts=True)
    chosen = keys[np.argsort(-counts, kind="stable")][:top]
    fig = Figure(figsize=(4.2 * len(chosen), 4.0))
    axes = np.atleast_1d(fig.subplots(1, len(chosen)))
    for ax, key in zip(axes, chosen):
        rows = v == key
        top_v = 0.0
        for name, probs in series.items():
            mp, rate, lo, hi = reliability_band(y[rows], np.asarray(probs)[rows], n_bins, n_boot, seed=seed)
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
    fig.tight_layout()
    return fig


def save_field_reliability(path, y, series: dict, values, field: str, **kwargs) -> None:
    """Write :func:`field_reliability_figure` as a PNG, atomically."""
    from ltr.io_utils import atomic_path

    fig = field_reliability_figure(y, series, values, field, **kwargs)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
