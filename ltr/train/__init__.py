"""ltr.train: neural scorers and how they are trained.

Scorers (:mod:`~ltr.train.scorers`, the context-aware :mod:`~ltr.train.attention`, seed ensembles
:mod:`~ltr.train.ensemble`; built, saved and loaded by :mod:`~ltr.train.models`), the trainer and its
steps (:mod:`~ltr.train.trainer`, :mod:`~ltr.train.early_stopping`), several processes
(:mod:`~ltr.train.distributed`), configuration (:mod:`~ltr.train.config`, :mod:`~ltr.train.settings`),
checkpoints (:mod:`~ltr.train.checkpoint`) and the scikit-learn estimator
(:mod:`~ltr.train.sklearn_ranker`). Builds on :mod:`ltr.runs`, :mod:`ltr.data`, ``losses`` and
``metrics``. The GBDT engines are its sibling :mod:`ltr.gbdt`.

The names below are imported on first use (PEP 562), so that a module that needs only the
configuration (``ltr.train.config``, as the command line does to build its parser) does not import torch.
"""

import importlib

_WHERE = {
    "Trainer": "trainer", "FitResult": "trainer", "predict_scores": "trainer", "seed_everything": "trainer",
    "TrainConfig": "config", "DEFAULT_METRICS": "config", "load_toml": "config",
    "ContextAwareScorer": "attention", "EnsembleScorer": "ensemble", "fit_ensemble": "ensemble",
    "LinearScorer": "scorers", "MLPScorer": "scorers", "FeatureTransform": "scorers",
    "build_model": "models", "save_model": "models", "load_model": "models",
}

__all__ = [
    "Trainer", "TrainConfig", "FitResult", "DEFAULT_METRICS", "load_toml",
    "predict_scores", "evaluate_scores", "seed_everything",
    "LinearScorer", "MLPScorer", "ContextAwareScorer", "EnsembleScorer", "fit_ensemble", "FeatureTransform", "build_model", "save_model", "load_model",
]  # fmt: skip


def __getattr__(name: str):
    """The public names, imported on first use; the LightGBM names ltr.train re-exported before 0.2
    (now in :mod:`ltr.gbdt`), with a DeprecationWarning."""
    if name == "evaluate_scores":
        from ltr.runs.scoring import evaluate_scores

        return evaluate_scores
    if name in _WHERE:
        return getattr(importlib.import_module(f"ltr.train.{_WHERE[name]}"), name)
    from ltr._moved import MOVED_FROM_TRAIN, moved

    if name in MOVED_FROM_TRAIN:
        return moved("ltr.train", name, MOVED_FROM_TRAIN[name])
    raise AttributeError(f"module 'ltr.train' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
