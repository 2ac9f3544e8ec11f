"""ltr.runs: what neural training (:mod:`ltr.train`) and the GBDT engines (:mod:`ltr.gbdt`) both need.

Run folders that appear whole or not at all (:mod:`~ltr.runs.folder`), scoring a data set with the
toolkit's metrics (:mod:`~ltr.runs.scoring`), TensorBoard logging (:mod:`~ltr.runs.tensorboard_log`)
and query shares for several processes (:mod:`~ltr.runs.shares`). Builds on :mod:`ltr.data` and
``metrics``; imports neither training part.
"""

from ltr.base._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr.base._lazy)
_WHERE = {
    "ltr.runs.folder": ("check_destination", "claim_folder", "print_run_metrics", "run_folder", "versions"),
    "ltr.runs.scoring": ("CLASSIFICATION_METRICS", "check_metric_names", "evaluate_scores", "higher_is_better"),
    "ltr.runs.shares": ("query_shares",),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
