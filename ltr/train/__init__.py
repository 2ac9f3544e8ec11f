"""ltr.train: neural scorers and how they are trained.

Scorers (:mod:`~ltr.train.scorers`, the context-aware :mod:`~ltr.train.attention`, seed ensembles
:mod:`~ltr.train.ensemble`; built, saved and loaded by :mod:`~ltr.train.models`), the trainer and its
steps (:mod:`~ltr.train.trainer`, :mod:`~ltr.train.early_stopping`), several processes
(:mod:`~ltr.train.distributed`), configuration (:mod:`~ltr.train.config`, :mod:`~ltr.train.settings`),
checkpoints (:mod:`~ltr.train.checkpoint`) and the scikit-learn estimator
(:mod:`~ltr.train.sklearn_ranker`). Builds on :mod:`ltr.runs`, :mod:`ltr.data`, ``losses`` and
``metrics``. The GBDT engines are its sibling :mod:`ltr.gbdt`.
"""

from ltr.base._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr.base._lazy)
_WHERE = {
    "ltr.runs.scoring": ("evaluate_scores",),
    "ltr.train.attention": ("ContextAwareScorer",),
    "ltr.train.config": ("DEFAULT_METRICS", "TrainConfig", "load_toml"),
    "ltr.train.ensemble": ("EnsembleScorer", "fit_ensemble",),
    "ltr.train.models": ("build_model", "load_model", "save_model"),
    "ltr.train.scorers": ("FeatureTransform", "LinearScorer", "MLPScorer"),
    "ltr.train.trainer": ("FitResult", "Trainer", "predict_scores", "seed_everything"),
}


def _moved_name(name: str):
    """The LightGBM names ltr.train re-exported before 0.2 (now in :mod:`ltr.gbdt`), with a DeprecationWarning."""
    from ltr.base._moved import MOVED_FROM_TRAIN, moved

    if name in MOVED_FROM_TRAIN:
        return moved("ltr.train", name, MOVED_FROM_TRAIN[name])
    raise AttributeError(f"module 'ltr.train' has no attribute {name!r}")


__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE, _moved_name)
