"""ltr.train: scorers and how they are trained.

Scorers (:mod:`~ltr.train.models`, the context-aware :mod:`~ltr.train.attention`, seed ensembles
:mod:`~ltr.train.ensemble`), the trainer and its steps (:mod:`~ltr.train.trainer`,
:mod:`~ltr.train.early_stopping`), configuration (:mod:`~ltr.train.config`), checkpoints
(:mod:`~ltr.train.checkpoint`), TensorBoard logging (:mod:`~ltr.train.tensorboard_log`), run folders
(:mod:`~ltr.train.run_folder`), model folders of either kind (:mod:`~ltr.train.model_folder`) and the
LightGBM lambdarank baseline (:mod:`~ltr.train.gbdt`). Builds on :mod:`ltr.data`, ``losses`` and
``metrics``.
"""

from ltr.train.attention import ContextAwareScorer
from ltr.train.config import DEFAULT_METRICS, TrainConfig, load_toml
from ltr.train.ensemble import EnsembleScorer, fit_ensemble
from ltr.train.gbdt import load_booster, predict_booster, save_booster, train_lightgbm
from ltr.train.models import (
    FeatureTransform,
    LinearScorer,
    MLPScorer,
    build_model,
    load_model,
    save_model,
)
from ltr.train.trainer import (
    FitResult,
    Trainer,
    evaluate_scores,
    predict_scores,
    seed_everything,
)

__all__ = [
    "Trainer", "TrainConfig", "FitResult", "DEFAULT_METRICS", "load_toml",
    "predict_scores", "evaluate_scores", "seed_everything",
    "LinearScorer", "MLPScorer", "ContextAwareScorer", "EnsembleScorer", "fit_ensemble", "FeatureTransform", "build_model", "save_model", "load_model",
    "train_lightgbm", "predict_booster", "save_booster", "load_booster",
]  # fmt: skip
