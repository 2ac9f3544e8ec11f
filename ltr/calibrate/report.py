"""The before / after calibration report: LogLoss, Brier, ECE and MCE, the AUC-invariance check,
and the reliability diagram (PNG and TensorBoard figure).
"""


from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ltr.calibrate.calibrators import _as_labels, _as_scores, _Calibrator
from ltr.calibrate.invariance import AucInvarianceReport, check_auc_invariance
from ltr.base.io_utils import atomic_path
from metrics.classification import brier, calibration_curve, ece, log_loss, mce

__all__ = ["calibration_metrics", "CalibrationReport", "reliability_figure", "reliability_figure_from_bins", "reliability_bins", "wilson_interval",
           "save_reliability_diagram", "add_reliability_to_tensorboard"]


def calibration_metrics(labels, probs, n_bins: int = 15) -> dict[str, float]:
    """LogLoss, Brier, ECE and MCE with equal-width and equal-mass bins, mean prediction and base rate."""
    y = np.asarray(labels, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    return {
        "log_loss": log_loss(y, p),
        "brier": brier(y, p),
        "ece_width": ece(y, p, n_bins=n_bins, strategy="width"),
        "ece_mass": ece(y, p, n_bins=n_bins, strategy="mass"),
        "mce_width": mce(y, p, n_bins=n_bins, strategy="width"),
        "mce_mass": mce(y, p, n_bins=n_bins, strategy="mass"),
        "mean_prediction": float(p.mean()),
        "base_rate": float(y.mean()),
    }


@dataclass
class CalibrationReport:
    """Calibration metrics before and after, the AUC-invariance check, and the fitted calibrator."""

    method: str
    n_fit: int
    n_eval: int
    n_bins: int
    before: dict[str, float]
    after: dict[str, float]
    invariance: AucInvarianceReport
    calibrator: dict[str, Any] = field(default_factory=dict)
    before_is: str = "the scores"  # what the "before" column judges, e.g. "sigmoid(scores)"

    @classmethod
    def build(cls, method: str, calibrator: _Calibrator, eval_scores, eval_labels, eval_probs_before=None,
              groups=None, n_bins: int = 15, before_is: str | None = None) -> "CalibrationReport":
        """Apply ``calibrator`` to the evaluation rows and measure. ``eval_probs_before`` are the
        probabilities to judge "before" (default: the scores themselves, which must then lie in [0, 1];
        for raw scores pass e.g. their sigmoid, and say so with ``before_is="sigmoid(scores)"``)."""
        s = _as_scores(eval_scores)
        y = _as_labels(eval_labels, s.shape[0])
        before = s if eval_probs_before is None else np.asarray(eval_probs_before, dtype=np.float64)
        after = calibrator.predict(s)
        return cls(
            method=method,
            n_fit=calibrator.n_fit_,
            n_eval=int(s.shape[0]),
            n_bins=n_bins,
            before=calibration_metrics(y, before, n_bins),
            after=calibration_metrics(y, after, n_bins),
            invariance=check_auc_invariance(s, after, y, groups),
            calibrator=calibrator.to_dict(),
            before_is=before_is or ("the scores" if eval_probs_before is None else "the given probabilities"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "n_fit": self.n_fit,
            "n_eval": self.n_eval,
            "n_bins": self.n_bins,
            "before": self.before,
            "before_is": self.before_is,
            "after": self.after,
            "auc_invariance": self.invariance.to_dict(),
            "calibrator": self.calibrator,
        }

    def to_text(self) -> str:
        rows = [
            ("LogLoss", "log_loss"), ("Brier", "brier"), (f"ECE width ({self.n_bins} bins)", "ece_width"),
            (f"ECE mass ({self.n_bins} bins)", "ece_mass"), ("MCE width", "mce_width"), ("MCE mass", "mce_mass"),
            ("mean prediction", "mean_prediction"), ("base rate", "base_rate"),
        ]
        out = [f"calibration: {self.method}; fitted on {self.n_fit} rows, evaluated on {self.n_eval} held-out rows", "",
               f"before = {self.before_is}; after = the calibrated probabilities", "",
               f"{'metric':<22} {'before':>12} {'after':>12}"]
        for label, key in rows:
            out.append(f"{label:<22} {self.before[key]:>12.6f} {self.after[key]:>12.6f}")
        out += ["", self.invariance.to_text()]
        return "\n".join(out) + "\n"


def wilson_interval(k, n, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    r"""Wilson score interval of a rate ``k / n`` at ``level``: with ``z`` the normal quantile of
    ``(1 + level) / 2``, ``(k + z^2/2) / (n + z^2) -/+ z sqrt(k (n - k) / n + z^2 / 4) / (n + z^2)``
    (it stays inside [0, 1] and is not empty at 0 or n clicks).

    >>> lo, hi = wilson_interval(10, 100, 0.95)
    >>> round(float(lo), 4), round(float(hi), 4)
    (0.0552, 0.1744)
    """
    from scipy.special import ndtri

    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    z = float(ndtri(0.5 + level / 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = (k + z * z / 2.0) / (n + z * z)
        half = z * np.sqrt(k * (n - k) / n + z * z / 4.0) / (n + z * z)
    return centre - half, centre + half


def reliability_bins(labels, probs, n_bins: int = 15, strategy: str = "width", level: float = 0.9) -> dict:
    """The reliability curve with what a reader needs to trust it: per non-empty bin (as
    :func:`metrics.calibration_curve`) its ``count``, ``mean_predicted``, observed ``rate`` and the
    :func:`wilson_interval` of the rate at ``level`` (``low``, ``high``), and the bin's ``edges``."""
    c = calibration_curve(labels, probs, n_bins=n_bins, strategy=strategy)
    clicks = np.rint(c.fraction_positive * c.counts)
    low, high = wilson_interval(clicks, c.counts, level)
    return {"strategy": c.strategy, "level": level, "count": c.counts.astype(int).tolist(),
            "mean_predicted": c.mean_predicted.tolist(), "rate": c.fraction_positive.tolist(),
            "low": low.tolist(), "high": high.tolist(),
            "lower_edge": c.edges[c.bin_index].tolist(), "upper_edge": c.edges[c.bin_index + 1].tolist()}


def reliability_figure(labels, series: Mapping[str, Any], n_bins: int = 15, title: str | None = None,
                       level: float = 0.9):
    """A matplotlib figure: reliability curves with equal-width (left) and equal-mass (right) bins.

    ``series`` maps a name (e.g. "before", "after") to probabilities. Each curve carries its
    :func:`reliability_bins` band (the Wilson interval of every bin's rate, shaded) and, below it, the
    rows per bin (log scale), so that a point far from the diagonal on a handful of rows reads as
    such. The axes span the range the curves use, not [0, 1], so that low click rates are visible.
    """
    y = np.asarray(labels, dtype=np.float64)
    curves = {name: {s: reliability_bins(y, probs, n_bins=n_bins, strategy=s, level=level) for s in ("width", "mass")}
              for name, probs in series.items()}
    return reliability_figure_from_bins(curves, n_bins=n_bins, title=title, level=level)


def reliability_figure_from_bins(curves: Mapping[str, Any], n_bins: int = 15, title: str | None = None,
                                 level: float = 0.9):
    """:func:`reliability_figure` drawn from bins already computed: ``{name: {"width": bins, "mass":
    bins}}`` with ``bins`` as :func:`reliability_bins` returns them (or the streamed
    :func:`ltr.calibrate.stream_report.binned_reliability`)."""
    # A bare Figure (no pyplot): no GUI backend is touched and nothing global is registered.
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from ltr.base.figures import set_margins

    plain = FuncFormatter(lambda v, _: f"{v:g}")  # log-axis labels without mathtext (its parser costs seconds)
    fig = Figure(figsize=(10, 6))
    grid = fig.add_gridspec(2, 2, height_ratios=(3, 1))
    for col, strategy in enumerate(("width", "mass")):
        ax, axc = fig.add_subplot(grid[0, col]), fig.add_subplot(grid[1, col])
        top = 0.0
        for name, by_strategy in curves.items():
            r = by_strategy[strategy]
            line, = ax.plot(r["mean_predicted"], r["rate"], marker="o", ms=3, label=name)
            ax.fill_between(r["mean_predicted"], r["low"], r["high"], color=line.get_color(), alpha=0.2)
            axc.plot(r["mean_predicted"], r["count"], marker="o", ms=3, color=line.get_color())
            top = max(top, max(r["mean_predicted"]), max(r["rate"]))
        top = min(1.0, top * 1.05) or 1.0
        ax.plot([0, top], [0, top], ls="--", color="grey", lw=1, label="perfect")
        for a in (ax, axc):
            a.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_ylabel("observed positive rate")
        ax.set_title(f"equal-{strategy} bins ({n_bins}), {level:.0%} Wilson band")
        ax.legend(fontsize=8)
        axc.set_yscale("log")
        axc.yaxis.set_major_formatter(plain)
        axc.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        axc.set_xlabel("mean predicted probability")
        axc.set_ylabel("rows per bin")
    if title:
        fig.suptitle(title)
    # fixed text and short tick labels: margins known in advance (ltr.base.figures), no tight_layout pass
    set_margins(fig, left=0.9, right=0.2, bottom=0.55, top=0.75 if title else 0.45, wgap=0.95, hgap=0.35,
                ncols=2, nrows=2)
    return fig


def save_reliability_diagram(path, labels, series: Mapping[str, Any], n_bins: int = 15,
                             title: str | None = None, dpi: int = 110) -> None:
    """Write :func:`reliability_figure` as a PNG, atomically."""
    fig = reliability_figure(labels, series, n_bins=n_bins, title=title)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)


def add_reliability_to_tensorboard(writer_or_dir, tag: str, labels, series: Mapping[str, Any],
                                   n_bins: int = 15, step: int = 0) -> None:
    """Log the reliability figure with ``SummaryWriter.add_figure``.

    ``writer_or_dir`` is an open ``torch.utils.tensorboard.SummaryWriter`` or a log directory (a writer
    is opened and closed). TensorBoard event files are append-only streams read while they grow,
    so they are not written through a temporary file.
    """
    fig = reliability_figure(labels, series, n_bins=n_bins, title=tag)
    own = isinstance(writer_or_dir, (str, bytes)) or hasattr(writer_or_dir, "__fspath__")
    if own:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(log_dir=str(writer_or_dir))
    else:
        writer = writer_or_dir
    try:
        writer.add_figure(tag, fig, global_step=step, close=True)
    finally:
        if own:
            writer.close()
