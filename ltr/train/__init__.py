"""ltr.train: neural scorers and how they are trained.

Scorers (:mod:`~ltr.train.scorers`, the context-aware :mod:`~ltr.train.attention`, seed ensembles
:mod:`~ltr.train.ensemble`; built, saved and loaded by :mod:`~ltr.train.models`), the trainer and its
steps (:mod:`~ltr.train.trainer`, :mod:`~ltr.train.early_stopping`), several processes
(:mod:`~ltr.train.distributed`), configuration (:mod:`~ltr.train.config`, :mod:`~ltr.train.settings`),
checkpoints (:mod:`~ltr.train.checkpoint`) and the scikit-learn estimator
(:mod:`~ltr.train.sklearn_ranker`). Builds on :mod:`ltr.runs`, :mod:`ltr.data`, ``losses`` and
``metrics``. The GBDT engines are its sibling :mod:`ltr.gbdt`.
"""

from ltr.runs.scoring import evaluate_scores
from ltr.train.attention import ContextAwareScorer
from ltr.train.config import DEFAULT_METRICS, TrainConfig, load_toml
from ltr.train.ensemble import EnsembleScorer, fit_ensemble
from ltr.train.models import build_model, load_model, save_model
from ltr.train.scorers import FeatureTransform, LinearScorer, MLPScorer
from ltr.train.trainer import FitResult, Trainer, predict_scores, seed_everything

__all__ = [
    "Trainer", "TrainConfig", "FitResult", "DEFAULT_METRICS", "load_toml",
    "predict_scores", "evaluate_scores", "seed_everything",
    "LinearScorer", "MLPScorer", "ContextAwareScorer", "EnsembleScorer", "fit_ensemble", "FeatureTransform", "build_model", "save_model", "load_model",
]  # fmt: skip


def __getattr__(name: str):
    """The LightGBM names ltr.train re-exported before 0.2 (now in :mod:`ltr.gbdt`), with a DeprecationWarning."""
    from ltr._moved import MOVED_FROM_TRAIN, moved

    if name in MOVED_FROM_TRAIN:
        return moved("ltr.train", name, MOVED_FROM_TRAIN[name])
    raise AttributeError(f"module 'ltr.train' has no attribute {name!r}")
