"""ltr.study: the ablation grid (data sets x methods x seeds) and its report.

The grid, its cells and the resumable runner (:mod:`~ltr.study.ablation`), the statistics and outputs
of a finished grid (:mod:`~ltr.study.report`), and the one markdown table layout that every printed
report of the toolkit uses (:mod:`~ltr.study.report_table`).
"""

from ltr.study.ablation import (
    AblationConfig,
    DatasetSpec,
    default_config,
    load_config,
    quick_config,
    run_ablation,
)
from ltr.study.report import summarize, write_report
from ltr.study.report_table import format_interval, markdown_table

__all__ = [
    "AblationConfig", "DatasetSpec", "default_config", "quick_config", "load_config", "run_ablation",
    "summarize", "write_report", "markdown_table", "format_interval",
]  # fmt: skip
