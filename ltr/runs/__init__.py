"""ltr.runs: what neural training (:mod:`ltr.train`) and the GBDT engines (:mod:`ltr.gbdt`) both need.

Run folders that appear whole or not at all (:mod:`~ltr.runs.folder`), scoring a data set with the
toolkit's metrics (:mod:`~ltr.runs.scoring`), TensorBoard logging (:mod:`~ltr.runs.tensorboard_log`)
and query shares for several processes (:mod:`~ltr.runs.shares`). Builds on :mod:`ltr.data` and
``metrics``; imports neither training part.
"""

from ltr.runs.folder import check_destination, claim_folder, print_run_metrics, run_folder, versions
from ltr.runs.scoring import CLASSIFICATION_METRICS, check_metric_names, evaluate_scores, higher_is_better
from ltr.runs.shares import query_shares

__all__ = [
    "run_folder", "claim_folder", "check_destination", "print_run_metrics", "versions",
    "evaluate_scores", "check_metric_names", "higher_is_better", "CLASSIFICATION_METRICS", "query_shares",
]  # fmt: skip
