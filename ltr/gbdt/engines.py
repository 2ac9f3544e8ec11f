"""The three GBDT engines behind one interface: names, objectives, early stopping, model folders.

``ltr gbdt --engine lightgbm|xgboost|catboost`` and the study's methods go through
:func:`train_gbdt`, :func:`predict_gbdt`, :func:`save_gbdt` and :func:`load_gbdt`. Each engine trains
on the same :class:`~ltr.data.RankingDataset` (queries from ``query_offsets``) and is judged by the
same :func:`ltr.runs.scoring.evaluate_scores`.

What each engine optimises (``OBJECTIVES``; the first is the default):

- LightGBM ``lambdarank`` (NDCG-weighted pairs, ``label_gain`` built from the toolkit's gain, see
  :mod:`ltr.gbdt.lightgbm`) and ``rank_xendcg`` (XE-NDCG: a cross-entropy between each query's
  softmax of the scores and targets proportional to ``2^label - u``, u drawn from [0, 1) each round;
  it reads the integer labels LightGBM is given, not ``label_gain``);
- XGBoost ``rank:ndcg`` (LambdaMART, NDCG-weighted pairs) and ``rank:pairwise`` (RankNet pairs,
  unweighted). XGBoost reads the gain of an item from its label (``ndcg_exp_gain=false``) and is
  given the toolkit's gain of each label as the label, so ``rank:ndcg`` optimises the NDCG the
  metrics compute (for integer labels and ``exp2`` this is exactly XGBoost's default
  ``ndcg_exp_gain=true`` on the raw labels; a test checks the predictions agree);
- CatBoost ``YetiRank``, ``YetiRankPairwise`` (pairs weighted from randomly perturbed rankings)
  and ``QuerySoftMax`` (a softmax over each query, the labels as its targets): they read the raw
  labels and weigh them their own way; the toolkit's gain does not reach them.

Early stopping is the same rule for every engine: the validation ``ndcg@monitor_k`` is the
toolkit's own (``metrics.evaluate`` with the run's gain; queries without a relevant item are left
out), computed on the engine's validation scores after every round; training stops when it has not
improved for ``early_stopping_rounds`` rounds and the model keeps the first round with the best value
(LightGBM: its own NDCG with the same gains, where such queries score 1: the same ranking of rounds
up to ties in the scores). The engines' own per-round NDCG is recorded beside it (``own_metrics``).

Queries without a relevant item are passed to every engine as they are, as on the LightGBM path
(the pairwise objectives and QuerySoftMax draw no gradient from them; XE-NDCG's random targets do),
and skipped by the metrics. Labels must be finite and >= 0.
Threads: ``threads`` (``LTR_THREADS`` when None, else the library's default); with one thread each
engine is deterministic given ``seed``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ltr.base.errors import FeatureCountError, LtrError
from ltr.gbdt.common import ValidationMonitor, checked_labels, engine_threads, query_ids

__all__ = ["ENGINES", "OBJECTIVES", "MODEL_FILES", "import_engine", "resolve_objective", "take_objective", "query_ids",
           "checked_labels", "engine_threads", "ValidationMonitor", "train_gbdt", "predict_gbdt", "model_n_features",
           "save_gbdt", "load_gbdt", "write_model_meta", "model_file_path"]

ENGINES = ("lightgbm", "xgboost", "catboost")
OBJECTIVES: dict[str, tuple[str, ...]] = {
    "lightgbm": ("lambdarank", "rank_xendcg"),
    "xgboost": ("rank:ndcg", "rank:pairwise"),
    "catboost": ("YetiRank", "YetiRankPairwise", "QuerySoftMax"),
}
MODEL_FILES = {"lightgbm": "model.txt", "xgboost": "xgboost.json", "catboost": "catboost.cbm"}


def import_engine(engine: str):
    """Import and return an engine's library, or an :class:`LtrError` saying how to install it.

    >>> import_engine("lightgbm").__name__
    'lightgbm'
    """
    import importlib

    check_engine(engine)
    try:
        return importlib.import_module(engine)
    except ImportError:
        extra = "" if engine == "lightgbm" else f"[{engine}]"
        raise LtrError(f"the {engine} engine needs the {engine} package, which is not installed: "
                       f"pip install 'ltr{extra}'") from None


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise LtrError(f"unknown GBDT engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return engine


def resolve_objective(engine: str, objective: str | None) -> str:
    """An engine's objective by name, case-insensitive, ``_`` standing for ``:`` (default: the first).

    >>> resolve_objective("xgboost", "rank_pairwise"), resolve_objective("catboost", "querysoftmax")
    ('rank:pairwise', 'QuerySoftMax')
    """
    choices = OBJECTIVES[check_engine(engine)]
    if objective is None:
        return choices[0]
    key = str(objective).lower().replace(":", "_")
    for name in choices:
        if name.lower().replace(":", "_") == key:
            return name
    raise LtrError(f"{engine} objective {objective!r} is not one of {', '.join(choices)}")


def take_objective(engine: str, params: dict[str, Any], objective: str | None = None) -> tuple[str, dict[str, Any]]:
    """``(objective, params without it)``: ``objective``, else the one the parameters name (XGBoost's
    ``objective``, CatBoost's ``loss_function`` or ``objective``, as in a ``[xgboost]`` table), else
    the engine's default. LightGBM keeps ``objective`` in its parameters.

    >>> take_objective("catboost", {"depth": 4, "loss_function": "QuerySoftMax"})
    ('QuerySoftMax', {'depth': 4})
    """
    params = dict(params)
    keys = {"lightgbm": (), "xgboost": ("objective",), "catboost": ("loss_function", "objective")}[check_engine(engine)]
    named = [params.pop(k) for k in keys if k in params]
    if objective is None and named:
        objective = named[0]
    if engine == "lightgbm" and objective is None and "objective" in params:
        return str(params["objective"]), params  # any of LightGBM's names: LightGBM judges it
    return resolve_objective(engine, objective), params


# --- one interface over the engines ---------------------------------------------------------

def train_gbdt(engine: str, train_ds, valid_ds=None, params: dict[str, Any] | None = None, *, objective: str | None = None,
               gain: Any = "exp2", num_boost_round: int = 1000, early_stopping_rounds: int | None = 50,
               eval_at: Sequence[int] = (1, 3, 5, 10), monitor_k: int = 10, seed: int = 0,
               threads: int | None = None, progress: bool = False, record_train: bool = False,
               external_memory: str | os.PathLike | None = None):  # fmt: skip
    """Train ``engine`` with ``objective``; ``(model, info)`` with ``info["best_iteration"]`` (rounds
    kept) and ``info["params"]`` (what the library was given). See each engine's ``train_*``;
    ``external_memory`` (a folder for XGBoost's page cache) is XGBoost's only."""
    if external_memory is not None and engine != "xgboost":
        raise LtrError(f"external memory (a page cache on disk) is an option of the xgboost engine, not of {engine}: "
                       "train with --engine xgboost, or leave --external-memory out")  # fmt: skip
    if engine != "lightgbm" and getattr(train_ds, "weights", None) is not None:
        raise LtrError(f"the training set has per-item weights, which {engine}'s ranking objectives do not take (they "
                       "weigh whole query groups): train with --engine lightgbm, which scales each item's gradient by "
                       "its weight, or drop the weights")
    objective, params = take_objective(engine, dict(params or {}), objective)
    common = dict(gain=gain, num_boost_round=num_boost_round, early_stopping_rounds=early_stopping_rounds,
                  eval_at=eval_at, monitor_k=monitor_k, seed=seed, progress=progress)
    if engine == "lightgbm":
        from ltr.gbdt.lightgbm import train_lightgbm

        params["objective"] = objective
        n = engine_threads(threads)
        if n is not None:
            params.setdefault("num_threads", n)
        return train_lightgbm(train_ds, valid_ds, params, record_train=record_train, **common)
    import_engine(engine)
    if engine == "xgboost":
        from ltr.gbdt.xgboost import train_xgboost

        return train_xgboost(train_ds, valid_ds, params, objective=objective, threads=threads,
                             external_memory=external_memory, **common)  # fmt: skip
    from ltr.gbdt.catboost import train_catboost

    return train_catboost(train_ds, valid_ds, params, objective=objective, threads=threads, **common)


def model_n_features(engine: str, model) -> int:
    """The number of feature columns a trained (or loaded) model of ``engine`` reads."""
    if engine == "lightgbm":
        return int(model.num_feature())
    if engine == "xgboost":
        return int(model.num_features())
    return int(len(model.feature_names_))


def predict_gbdt(engine: str, model, features: np.ndarray) -> np.ndarray:
    """Scores [N] float64 of a trained (or loaded) model of ``engine`` at its kept rounds.

    ``features`` [N, F] must have the model's F columns, for every engine: XGBoost would take the
    missing columns of a narrower array as missing values and score it, LightGBM and CatBoost raise
    their own exceptions; here all three raise :class:`~ltr.base.errors.FeatureCountError` naming both
    counts (as ``ltr predict`` refuses such a file)."""
    check_engine(engine)
    features = np.asarray(features)
    expected = model_n_features(engine, model)
    if features.ndim != 2 or features.shape[1] != expected:
        got = f"{features.shape[1]} columns" if features.ndim == 2 else f"shape {features.shape} (not [rows, features])"
        raise FeatureCountError(f"features have {got}, the {engine} model expects {expected}")
    if engine == "lightgbm":
        from ltr.gbdt.lightgbm import predict_booster

        return predict_booster(model, features)
    if engine == "xgboost":
        from ltr.gbdt.xgboost import predict_xgboost

        return predict_xgboost(model, features)
    from ltr.gbdt.catboost import predict_catboost

    return predict_catboost(model, features)


def save_gbdt(engine: str, model, folder: str | os.PathLike, info: dict[str, Any], *, n_features: int,
              feature_names: Sequence[str] | None = None) -> Path:  # fmt: skip
    """Write the engine's model file and ``model.json`` (``type`` = the engine) into ``folder``."""
    if engine == "lightgbm":
        from ltr.gbdt.lightgbm import save_booster

        return save_booster(model, folder, n_features=n_features, best_iteration=info["best_iteration"],
                            feature_names=feature_names)  # fmt: skip
    from ltr.base.io_utils import atomic_path, atomic_write_bytes

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if engine == "xgboost":  # JSON whatever the file's name (save_model picks the format from it)
        atomic_write_bytes(folder / MODEL_FILES[engine], bytes(model.save_raw(raw_format="json")))
    else:
        with atomic_path(folder / MODEL_FILES[engine]) as tmp:
            model.save_model(str(tmp), format="cbm")
    write_model_meta(folder, engine, n_features=n_features, feature_names=feature_names,
                     objective=info.get("objective"), best_iteration=info["best_iteration"])
    return folder


def write_model_meta(folder: Path, engine: str, *, n_features: int, feature_names=None, **extra) -> None:
    from ltr.base.io_utils import atomic_write_json

    meta: dict[str, Any] = {"type": engine, "file": MODEL_FILES[engine], "n_features": int(n_features), **extra}
    if feature_names is not None:
        meta["feature_names"] = [str(n) for n in feature_names]
    atomic_write_json(folder / "model.json", meta)


def model_file_path(folder: str | os.PathLike, engine: str) -> tuple[Path, dict[str, Any]]:
    """``(model file, model.json)`` of an ``engine`` model folder, checked (:func:`ltr.gbdt.common.model_folder_file`)."""
    from ltr.gbdt.common import model_folder_file

    return model_folder_file(folder, engine, MODEL_FILES[engine], engine)


def load_gbdt(folder: str | os.PathLike, engine: str):
    """``(model, model.json)`` of a folder written by :func:`save_gbdt`."""
    if engine == "lightgbm":
        from ltr.gbdt.lightgbm import load_booster

        return load_booster(folder)
    import_engine(engine)
    path, meta = model_file_path(folder, engine)
    if engine == "xgboost":
        from ltr.gbdt.xgboost import load_xgboost as load
    else:
        from ltr.gbdt.catboost import load_catboost as load
    model = load(path, int(meta["n_features"]))
    return model, meta
