"""ltr.study: the ablation grid (data sets x methods x seeds) and its report.

The grid, its cells and the resumable runner (:mod:`~ltr.study.ablation`), the statistics and outputs
of a finished grid (:mod:`~ltr.study.report`), and the one markdown table layout that every printed
report of the toolkit uses (:mod:`~ltr.study.report_table`).
"""

from ltr.base._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr.base._lazy)
_WHERE = {
    "ltr.study.ablation": ("AblationConfig", "DatasetSpec", "default_config", "load_config", "quick_config", "run_ablation"),
    "ltr.study.report": ("summarize", "write_report",),
    "ltr.study.report_table": ("format_interval", "markdown_table",),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
