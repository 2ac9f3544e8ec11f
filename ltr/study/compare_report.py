"""How ``ltr compare`` shows a :class:`metrics.compare.Comparison`: markdown, LaTeX, and a plot.

One row per metric and run: the run's mean, its mean difference from the baseline with the
interval, the (corrected) p-value and wins / ties / losses over the queries. The baseline's row
shows its mean only. The plot draws, for each metric (rows) and each compared run (columns), the
per-query differences from the baseline sorted from worst to best, the way TREC overviews show
per-topic differences.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ltr.base.io_utils import atomic_path
from ltr.study.report_table import markdown_table

__all__ = ["comparison_markdown", "comparison_latex", "plot_differences"]

_TEST_NAMES = {"t": "paired t-test", "randomization": "randomization test", "bootstrap": "bootstrap test"}


def _num(x: float, spec: str = ".4f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _p(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.2e}" if x < 1e-3 else f"{x:.4f}"


def _cells(comparison) -> list[list[str]]:
    rows = []
    for r in comparison.rows:
        if r.is_baseline:
            rows.append([r.metric, f"{r.run} (baseline)", _num(r.mean), "", "", ""])
            continue
        diff = f"{r.difference:+.4f} [{_num(r.low, '+.4f')}, {_num(r.high, '+.4f')}]"
        rows.append([r.metric, r.run, _num(r.mean), diff, _p(r.p_adjusted), f"{r.wins}/{r.ties}/{r.losses}"])
    return rows


def _header(comparison) -> list[str]:
    level = f"{comparison.confidence:.0%}"
    return ["metric", "run", "mean", f"difference vs {comparison.baseline} [{level} CI]",
            f"p ({comparison.correction})", "wins/ties/losses"]


def queries_used(comparison) -> str:
    """How many queries the statistics use: the common queries less those a metric skips (no
    relevant item: NaN per-query values), e.g. ``50 queries, 3 without relevant items skipped``."""
    n = len(comparison.query_ids) if comparison.query_ids is not None else max(r.n for r in comparison.rows)
    skipped = sorted({n - r.n for r in comparison.rows})
    if skipped == [0]:
        return f"{n} queries"
    if len(skipped) == 1:
        return f"{n} queries, {skipped[0]} without relevant items skipped"
    return f"{n} queries, {skipped[0]} to {skipped[-1]} without relevant items skipped (by metric)"


def _summary(comparison) -> str:
    m = len(comparison.runs) - 1
    interval = ("t-intervals, clipped to [-1, 1] for measures in [0, 1]" if comparison.test == "t"
                else "percentile bootstrap intervals")
    return (f"{queries_used(comparison)}; {_TEST_NAMES[comparison.test]}, p-values corrected ({comparison.correction}) for "
            f"{m} comparison{'s' if m != 1 else ''} per metric; {interval}")


def comparison_markdown(comparison) -> str:
    """The comparison as a markdown table, with the settings above and the stamped names below."""
    lines = [_summary(comparison), "", markdown_table(_header(comparison), _cells(comparison), align="llrrrr"), ""]
    lines += [f"- {m}: `{comparison.stamped[m]}`" for m in comparison.metrics]
    return "\n".join(lines) + "\n"


_TEX = {"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$", "{": r"\{", "}": r"\}",
        "^": r"\^{}", "~": r"\~{}", "\\": r"\textbackslash{}"}


def _tex(text: str) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_TEX.get(c, c) for c in text)


def comparison_latex(comparison) -> str:
    """The comparison as a LaTeX ``table`` (booktabs rules) with the settings as its caption."""
    header = _header(comparison)
    body = [" & ".join(_tex(c) for c in row) + r" \\" for row in _cells(comparison)]
    return "\n".join([
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{llrrrr}",
        r"\toprule",
        " & ".join(_tex(h) for h in header) + r" \\",
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_tex(_summary(comparison))}.}}",
        r"\end{table}",
        "",
    ])


def plot_differences(comparison, path: str | os.PathLike) -> Path:
    """Per-query differences from the baseline, sorted, one panel per (metric, compared run); PNG."""
    from matplotlib.figure import Figure  # a bare Figure: no GUI backend, nothing global

    others = [r for r in comparison.runs if r != comparison.baseline]
    n_rows, n_cols = len(comparison.metrics), len(others)
    fig = Figure(figsize=(4.5 * n_cols + 1, 2.8 * n_rows + 0.6))
    axes = np.asarray(fig.subplots(n_rows, n_cols, squeeze=False))
    for i, metric in enumerate(comparison.metrics):
        for j, run in enumerate(others):
            ax = axes[i, j]
            d = comparison.differences[(metric, run)]
            d = np.sort(d[~np.isnan(d)])
            colors = np.where(d > 0, "tab:green", np.where(d < 0, "tab:red", "grey"))
            ax.bar(np.arange(d.size), d, width=1.0, color=colors)
            ax.axhline(0.0, color="black", lw=0.6)
            row = comparison.row(metric, run)
            ax.set_title(f"{run} - {comparison.baseline}: {metric}\nmean {row.difference:+.4f}, "
                         f"p={_p(row.p_adjusted)}", fontsize=9)
            ax.set_xlabel("queries (sorted)")
            ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    return path
