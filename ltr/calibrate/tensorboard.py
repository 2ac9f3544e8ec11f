"""What ``ltr calibrate --tensorboard DIR`` writes, through :class:`ltr.runs.tensorboard_log.TensorBoardLogger`.

In memory (rows at hand):

* ``calibration/<method>/reliability``: the reliability diagram before / after (equal-width and
  equal-mass bins), :func:`ltr.calibrate.report.reliability_figure`;
* ``calibration/<method>/reliability_<field>``: one image per field, the reliability curves with
  bootstrap bands of its most frequent values (:func:`ltr.calibrate.field_report.field_reliability_figure`);
* ``calibration/<method>/f_rce_<field>/before`` and ``/after``: scalars.

Streamed (``--stream``, only the binned report): per field an image of PCOC per value (the values with
most rows) before and after, with the delta-method intervals, and the same F-RCE scalars.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["log_calibration", "log_binned_calibration", "field_tag", "pcoc_figure"]


def field_tag(method: str, field: str) -> str:
    """The image tag of a field's diagram (characters other than ``A-Za-z0-9_.-`` as ``_``)."""
    return f"calibration/{method}/reliability_{re.sub(r'[^A-Za-z0-9_.-]', '_', field)}"


def _f_rce_scalars(logger, method: str, rep: dict) -> None:
    for side in ("before", "after"):
        for name, d in rep[side].get("fields", {}).items():
            logger.scalar(f"calibration/{method}/f_rce_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}/{side}", d["f_rce"], 0)


def log_calibration(log_dir, method: str, labels, series: dict, fields: dict, rep: dict, *, n_bins: int = 15,
                    seed: int = 0) -> None:
    """The in-memory images and scalars listed in the module docstring."""
    from ltr.calibrate.field_report import field_reliability_figure
    from ltr.calibrate.report import reliability_figure
    from ltr.runs.tensorboard_log import TensorBoardLogger

    logger = TensorBoardLogger(log_dir)
    try:
        logger.figure(f"calibration/{method}/reliability", reliability_figure(labels, series, n_bins=n_bins,
                                                                                title=f"calibration/{method}"), 0)
        for name, values in fields.items():
            fig = field_reliability_figure(labels, series, values, name, n_bins=min(n_bins, 10), seed=seed)
            logger.figure(field_tag(method, name), fig, 0)
        _f_rce_scalars(logger, method, rep)
    finally:
        logger.close()


def pcoc_figure(rep: dict, field: str, top: int = 8):
    """PCOC per value of ``field`` (the ``top`` values with most rows) before and after, with intervals."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    for k, side in enumerate(("before", "after")):
        rows = sorted((r for r in rep[side]["values"] if r["field"] == field), key=lambda r: -r["count"])[:top]
        x = np.arange(len(rows)) + (k - 0.5) * 0.35
        y = np.array([r["pcoc"] for r in rows])
        err = np.array([[r["pcoc"] - r["pcoc_low"] for r in rows], [r["pcoc_high"] - r["pcoc"] for r in rows]])
        ax.bar(x, y, width=0.35, label=side)
        ax.errorbar(x, y, yerr=np.nan_to_num(err), fmt="none", color="black", lw=1)
        ax.set_xticks(np.arange(len(rows)), [str(r["value"]) for r in rows], rotation=45, fontsize=8)
    ax.axhline(1.0, ls="--", color="grey", lw=1)
    ax.set_ylabel("PCOC (predicted / observed clicks)")
    ax.set_title(f"{field}: PCOC per value")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def log_binned_calibration(log_dir, method: str, rep: dict) -> None:
    """The streamed images and scalars listed in the module docstring."""
    from ltr.runs.tensorboard_log import TensorBoardLogger

    logger = TensorBoardLogger(log_dir)
    try:
        for name in rep["before"].get("fields", {}):
            logger.figure(field_tag(method, name), pcoc_figure(rep, name), 0)
        _f_rce_scalars(logger, method, rep)
    finally:
        logger.close()
