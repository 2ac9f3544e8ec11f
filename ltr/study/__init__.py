"""ltr.study: the ablation grid (data sets x methods x seeds) and its report.

The grid, its cells and the resumable runner (:mod:`~ltr.study.ablation`), the statistics and outputs
of a finished grid (:mod:`~ltr.study.report`), and the one markdown table layout that every printed
report of the toolkit uses (:mod:`~ltr.study.report_table`).

The names below are imported on first use (PEP 562), so that ``ltr.study.report_table`` (every
printed report's table, used by several commands) does not import torch with the ablation runner.
"""

import importlib

_WHERE = {
    "AblationConfig": "ablation", "DatasetSpec": "ablation", "default_config": "ablation", "quick_config": "ablation",
    "load_config": "ablation", "run_ablation": "ablation", "summarize": "report", "write_report": "report",
    "markdown_table": "report_table", "format_interval": "report_table",
}

__all__ = [
    "AblationConfig", "DatasetSpec", "default_config", "quick_config", "load_config", "run_ablation",
    "summarize", "write_report", "markdown_table", "format_interval",
]  # fmt: skip


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"ltr.study.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'ltr.study' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
