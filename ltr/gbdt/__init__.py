"""ltr.gbdt: gradient-boosted tree engines, the baselines beside neural training.

LightGBM lambdarank on one machine (:mod:`~ltr.gbdt.lightgbm`) or on a Dask cluster
(:mod:`~ltr.gbdt.lightgbm_dask`, run folders by :mod:`~ltr.gbdt.dask_run`), XGBoost
(:mod:`~ltr.gbdt.xgboost`) and CatBoost (:mod:`~ltr.gbdt.catboost`) as optional engines, all behind one
interface (:mod:`~ltr.gbdt.engines`). Every engine trains on the
same :class:`~ltr.data.RankingDataset`, takes its label gain from the same gain convention as the
metrics, and is judged by :func:`ltr.runs.evaluate_scores`. Builds on :mod:`ltr.runs` and
:mod:`ltr.data`; imports nothing from :mod:`ltr.train`.
"""

from ltr.base._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr.base._lazy)
_WHERE = {
    "ltr.gbdt.lightgbm": ("DEFAULT_PARAMS", "booster_importance", "histogram_choice", "label_table", "load_booster", "predict_booster", "save_booster", "train_lightgbm"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
