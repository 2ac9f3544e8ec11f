"""CatBoost ranking (``YetiRank``, ``YetiRankPairwise``, ``QuerySoftMax``) on the same
:class:`~ltr.data.RankingDataset`.

``pip install 'ltr[catboost]'``; the library is imported inside the functions.

Labels and gains. CatBoost gets the raw labels (finite, >= 0) with each row's query as ``group_id``.
Its ranking objectives weigh the labels their own way: YetiRank and YetiRankPairwise weight pairs by
how often randomly perturbed rankings put them near the top, QuerySoftMax fits a softmax over each
query to the labels. The toolkit's ``gain`` does not reach the objective; it sets the NDCG that
early stopping watches and that the run reports, as for the other engines.

Early stopping (see :mod:`ltr.gbdt.engines`): the validation set's ``eval_metric`` is
:class:`ToolkitNDCG`, the toolkit's ``ndcg@monitor_k`` on CatBoost's validation scores, and a
callback applies the common patience rule to it; the model is then cut to the best round
(``shrink``). CatBoost's own ``NDCG:top=k;type=Exp`` (``type=Base`` under the linear gain) is
recorded per round in ``info["own_metrics"]``. CatBoost writes no files (``allow_writing_files``
is false) and prints nothing.

Defaults: CatBoost's own (depth 6, learning rate 0.03 for these objectives, 10 permutations for
YetiRank), plus ``random_seed`` and ``thread_count``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["train_catboost", "predict_catboost", "load_catboost", "catboost_importance", "ToolkitNDCG"]

_SET_BY_TOOLKIT = {
    "loss_function": "objective= (ltr gbdt --objective)",
    "objective": "objective= (ltr gbdt --objective)",
    "iterations": "num_boost_round=",
    "num_boost_round": "num_boost_round=",
    "n_estimators": "num_boost_round=",
    "eval_metric": "monitor_k= (early stopping uses the toolkit's NDCG)",
    "use_best_model": "early_stopping_rounds= (the model is cut to the best round)",
    "od_type": "early_stopping_rounds=",
    "od_wait": "early_stopping_rounds=",
    "early_stopping_rounds": "early_stopping_rounds=",
}


class ToolkitNDCG:
    """CatBoost ``eval_metric``: the toolkit's ``ndcg@k`` (with its gain) on the validation scores.

    CatBoost also calls it on the training set (a different row count), where it answers 0: only
    the validation value is read.
    """

    def __init__(self, labels: np.ndarray, query_offsets: np.ndarray, k: int, gain: Any):
        self.labels, self.query_offsets, self.k, self.gain = labels, query_offsets, int(k), gain

    def is_max_optimal(self) -> bool:
        return True

    def evaluate(self, approxes, target, weight):
        from types import SimpleNamespace

        from ltr.runs.scoring import evaluate_scores

        scores = np.asarray(approxes[0], dtype=np.float64)
        if scores.shape[0] != self.labels.shape[0]:
            return 0.0, 1.0
        ds = SimpleNamespace(labels=self.labels, query_offsets=self.query_offsets)
        ev = evaluate_scores(scores, ds, [f"ndcg@{self.k}"], None, {"gain": self.gain})
        return float(ev.mean[ev.names[f"ndcg@{self.k}"]]), 1.0

    def get_final_error(self, error, weight):
        return error


#: the fit parameters that say how features are cut into bins: a pool quantized before the fit must get them
_QUANTIZATION_KEYS = ("border_count", "max_bin", "feature_border_type", "nan_mode", "per_float_feature_quantization",
                      "input_borders", "sparse_features_conflict_fraction", "dev_efb_max_buckets")


def _pool(ds, where: str):
    import catboost

    from ltr.gbdt.common import checked_labels, query_ids

    return catboost.Pool(np.asarray(ds.features), label=checked_labels(ds, where), group_id=query_ids(ds))


def _quantized_training_pool(ds, params: dict[str, Any]):
    """The training set as a quantized ``catboost.Pool``: CatBoost's one-byte bins instead of its float copy.

    ``fit`` on raw features holds the float32 copy and the bins together for the whole fit; quantizing
    first frees the copy, and the pages of a memory-mapped store are released before the quantization.
    ``ltr gbdt --engine catboost`` at WEB30K size (2.17M training rows, 136 features, a store): peak RSS
    3.46 GiB instead of 5.26 (the validation pool is made after this one). The bins follow the fit's
    parameters (border count, border type, NaN rule: forwarded from ``params``). On small sets the model is the one CatBoost fits on the raw
    features (tests/test_gbdt_engines.py; the same predictions on 181,205 rows too); on large ones
    CatBoost builds the borders from a random sample of 200,000 rows, drawn by the quantization (with
    ``random_seed``) and by a fit on raw features in different ways, so the models differ (they did
    from 209,864 rows on).
    """
    from ltr.data.store import release_pages

    pool = _pool(ds, "training set")
    release_pages(ds.features)
    pool.quantize(random_seed=params["random_seed"], **{k: params[k] for k in _QUANTIZATION_KEYS if k in params})
    return pool


def _own_metric_names(eval_at, monitor_k, gain) -> list[str]:
    """CatBoost's own NDCG at each cut-off, with the gain of the run (none for a callable gain)."""
    kind = {"exp2": "Exp", "linear": "Base"}.get(gain) if isinstance(gain, str) else None
    if kind is None:
        return []
    return [f"NDCG:top={k};type={kind}" for k in sorted({int(k) for k in eval_at} | {int(monitor_k)})]


# long: one call of the library with its parameters, callbacks, error wording and info, read top to bottom
def train_catboost(train_ds, valid_ds=None, params: dict[str, Any] | None = None, *, objective: str = "YetiRank",
                   gain: Any = "exp2", num_boost_round: int = 1000, early_stopping_rounds: int | None = 50,
                   eval_at: Sequence[int] = (1, 3, 5, 10), monitor_k: int = 10, seed: int = 0,
                   threads: int | None = None, progress: bool = False):  # fmt: skip
    """Train CatBoost; ``(model cut to the best round, info)``.

    params: CatBoost parameters (objective, rounds, evaluation and early stopping are set here);
        ``random_seed`` and ``thread_count`` default to ``seed`` and ``threads`` (``LTR_THREADS``).
    info: as :func:`ltr.gbdt.xgboost.train_xgboost`'s; ``params`` holds what ``catboost.CatBoost``
        got except the evaluation metrics, with the learning rate CatBoost chose.
    """
    import warnings

    import catboost

    from ltr.data.dataset import feature_names_of
    from ltr.gbdt.common import ValidationMonitor, checked_labels, engine_threads, progress_bar, refuse_keys

    params = dict(params or {})
    refuse_keys(params, _SET_BY_TOOLKIT, "catboost")
    merged: dict[str, Any] = {"random_seed": int(seed), "allow_writing_files": False, "verbose": False, **params,
                              "loss_function": objective, "iterations": int(num_boost_round)}
    n = engine_threads(threads)
    if n is not None:
        merged.setdefault("thread_count", n)
    evaluation: dict[str, Any] = {"use_best_model": False}
    monitor = None
    if valid_ds is not None:
        monitor = ValidationMonitor(valid_ds, monitor_k, gain, early_stopping_rounds)
        metric = ToolkitNDCG(checked_labels(valid_ds, "validation set"), np.asarray(valid_ds.query_offsets, dtype=np.int64), monitor_k, gain)
        evaluation.update(eval_metric=metric, custom_metric=_own_metric_names(eval_at, monitor_k, gain) or None)
    bar = progress_bar(num_boost_round, progress)
    own: dict[str, list[float]] = {}
    model = catboost.CatBoost({**merged, **{k: v for k, v in evaluation.items() if v is not None}})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "can't optimize method evaluate": CatBoost's numba attempt
            # the training pool first: its float copy is gone before the validation set's is made
            train_pool = _quantized_training_pool(train_ds, merged)
            eval_set = None if valid_ds is None else _pool(valid_ds, "validation set")
            model.fit(train_pool, eval_set=eval_set, callbacks=[_Callback(monitor, own, bar)])
    except catboost.CatBoostError as exc:
        raise LtrError(f"CatBoost refused the data or parameters: {' '.join(str(exc).split())[:500]}") from None
    finally:
        if bar is not None:
            bar.close()
    rounds_run = int(model.tree_count_)
    best = monitor.best_round if monitor is not None and monitor.best_round > 0 else rounds_run
    if best < rounds_run:
        model.shrink(ntree_end=best)
    merged["learning_rate"] = float(model.get_all_params().get("learning_rate", merged.get("learning_rate", np.nan)))
    names = feature_names_of(train_ds)
    return model, {
        "best_iteration": int(best), "rounds_run": rounds_run, "objective": objective,
        "best_score": None if monitor is None else monitor.best_value,
        "monitor": None if monitor is None else monitor.name, "curve": [] if monitor is None else monitor.curve,
        "own_metrics": {"convention": "CatBoost's NDCG:top=k (type=Exp: 2^label - 1, type=Base: the label)",
                        "per_round": {"valid": own} if own else {}},
        "params": merged, "num_boost_round": int(num_boost_round), "early_stopping_rounds": early_stopping_rounds,
        "importance": catboost_importance(model, names, best),
    }  # fmt: skip


class _Callback:
    """After each round: progress, CatBoost's own validation metrics, the toolkit's early stopping."""

    def __init__(self, monitor, own: dict[str, list[float]], bar):
        self.monitor, self.own, self.bar = monitor, own, bar

    def after_iteration(self, info) -> bool:  # True: go on
        if self.bar is not None:
            self.bar.update(1)
        if self.monitor is None:
            return True
        valid = info.metrics.get("validation", {})
        for name, values in valid.items():
            if name.startswith("NDCG"):
                self.own.setdefault(name, []).append(float(values[-1]))
        return not self.monitor.record(float(valid[ToolkitNDCG.__name__][-1]))


def predict_catboost(model, features: np.ndarray) -> np.ndarray:
    """Scores [N] float64 (CatBoost's raw values) of every tree of ``model``."""
    return np.asarray(model.predict(np.asarray(features), prediction_type="RawFormulaVal"), dtype=np.float64)


def load_catboost(path: str | os.PathLike, n_features: int):
    """A model from a CatBoost ``.cbm`` file (a flat-buffer model: nothing is executed)."""
    import catboost

    model = catboost.CatBoost()
    try:
        model.load_model(str(path), format="cbm")
    except catboost.CatBoostError as exc:
        raise LtrError(f"{path}: not a CatBoost model CatBoost can read ({' '.join(str(exc).split())[:300]})") from None
    if len(model.feature_names_) != n_features:
        raise LtrError(f"{path}: model.json says {n_features} features but the model has {len(model.feature_names_)}")
    return model


def catboost_importance(model, names: Sequence[str], iteration: int) -> dict[str, Any]:
    """CatBoost's PredictionValuesChange of every feature (how much the predictions move, on
    average, when the feature's split goes the other way), in column order."""
    values = model.get_feature_importance(type="PredictionValuesChange")
    return {
        "kind": "catboost",
        "feature": list(names),
        "prediction_values_change": [float(v) for v in values],
        "iteration": int(iteration),
        "note": "prediction_values_change: CatBoost's average change of the prediction when the feature changes",
    }
