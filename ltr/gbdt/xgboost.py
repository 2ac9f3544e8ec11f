"""XGBoost ranking (``rank:ndcg`` / ``rank:pairwise``) on the same :class:`~ltr.data.RankingDataset`.

``pip install 'ltr[xgboost]'`` (the ``xgboost-cpu`` wheel); the library is imported inside the functions.

Gains. XGBoost's ``rank:ndcg`` and its ``ndcg`` metric take the gain of an item from its label:
``2^label - 1`` with ``ndcg_exp_gain=true`` (its default, integer labels below 32 only) or the label
itself with ``ndcg_exp_gain=false``. Here XGBoost always gets ``ndcg_exp_gain=false`` and, as labels,
the toolkit's gains ``metrics.gains.gain_values(labels, gain)``: the lambda weights then use
``|Δ NDCG|`` with exactly the gains the metrics use, for any label (non-integer, 31 and above) and
either gain convention. Gains keep the order of the labels, so ``rank:pairwise`` (which only
compares labels) forms the same pairs as on the raw labels.

Early stopping (see :mod:`ltr.gbdt.engines`): after each round the validation scores (XGBoost's
cached predictions of the validation matrix) are judged by the toolkit's ``ndcg@monitor_k``; the
returned booster is cut to the best round (``booster[:best]``), so it predicts, and is saved, at
that round. XGBoost's own ``ndcg@k`` on the validation set (a query without a relevant item
scores 1 there) is kept per round in ``info["own_metrics"]``.

Defaults: XGBoost's own (``eta`` 0.3, ``max_depth`` 6, ``tree_method`` hist, pairs
``lambdarank_pair_method=topk``), plus ``seed`` and ``nthread``.

External memory (``external_memory=FOLDER``, ``ltr gbdt --external-memory``): a streamed training
set becomes an ``ExtMemQuantileDMatrix`` whose quantised pages are files in a temporary folder made
in FOLDER (:func:`page_cache`), removed when training returns or fails; a streamed validation set
too (cuts from the training matrix, ``ref=``), one in memory a ``QuantileDMatrix`` with those cuts.
RAM then holds the pages being read instead of the whole quantised matrix (N x F bytes of histogram
index and more); each boosting round reads the pages from the cache (or the kernel's page cache).
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["train_xgboost", "predict_xgboost", "load_xgboost", "xgboost_importance", "xgboost_gain_labels", "page_cache"]

_SET_BY_TOOLKIT = {
    "objective": "objective= (ltr gbdt --objective)",
    "ndcg_exp_gain": "gain= (the labels passed are the gains)",
    "eval_metric": "monitor_k= / eval_at= (early stopping uses the toolkit's NDCG)",
}


def xgboost_gain_labels(ds, gain: Any, where: str) -> np.ndarray:
    """[N] float32 the toolkit's gain of each label, XGBoost's labels under ``ndcg_exp_gain=false``.

    >>> from types import SimpleNamespace
    >>> xgboost_gain_labels(SimpleNamespace(labels=[0, 1, 2, 3.5]), "exp2", "x").tolist()
    [0.0, 1.0, 3.0, 10.313708305358887]
    """
    from ltr.gbdt.common import checked_labels
    from metrics.gains import gain_values

    with np.errstate(over="ignore"):
        gains = np.asarray(gain_values(checked_labels(ds, where), gain), dtype=np.float64)
    if not np.all(np.isfinite(gains)) or (gains.size and gains.max() > np.finfo(np.float32).max):
        raise LtrError(f"{where}: a label's gain under gain={gain!r} does not fit XGBoost's float32 labels")
    return gains.astype(np.float32)


def _matrix(ds, gain: Any, where: str, *, quantile: bool = False, ref=None, params: dict[str, Any] | None = None,
            cache_prefix: str | None = None):  # fmt: skip
    """XGBoost's matrix of a data set: features, gains as labels, queries as ``qid`` (feature names stay
    in ``model.json``: XGBoost refuses some characters in them). ``quantile``: a ``QuantileDMatrix``
    (cuts from ``ref``), built block by block when ``ds`` is streamed (:mod:`ltr.gbdt.streaming`);
    ``cache_prefix``: an ``ExtMemQuantileDMatrix`` with its pages in files of that prefix."""
    from ltr.gbdt.streaming import xgboost_matrix

    params = params or {}
    return xgboost_matrix(ds, xgboost_gain_labels(ds, gain, where), quantile=quantile, ref=ref,
                          max_bin=params.get("max_bin"), nthread=params.get("nthread"), cache_prefix=cache_prefix)  # fmt: skip


@contextlib.contextmanager
def page_cache(parent: str | os.PathLike | None) -> Iterator[Path | None]:
    """A new folder in ``parent`` for XGBoost's external-memory pages, removed with its files when the
    block ends, normally or by an exception (None, and nothing made, when ``parent`` is None)."""
    import shutil
    import tempfile

    if parent is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="xgboost-pages-", dir=str(parent)))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_external(train_ds, external_memory) -> None:
    from ltr.data.streamed import is_streamed

    if external_memory is not None and not is_streamed(train_ds):
        raise LtrError("external memory: the training set is in memory (an SVMlight file, or Parquet read whole with "
                       "--sort-by-query); XGBoost's external memory pages a training set read in row blocks: give a "
                       "store (`ltr convert DATA --out DATA.store`) or Parquet data, or train without --external-memory")  # fmt: skip


def _matrices(train_ds, valid_ds, gain, merged: dict[str, Any], cache: Path | None):
    """``(dtrain, dvalid or None)``: QuantileDMatrix when a set is streamed, ExtMemQuantileDMatrix
    (pages under ``cache``) for a streamed set when ``cache`` is given, DMatrix otherwise."""
    from ltr.data.streamed import is_streamed
    from ltr.gbdt.streaming import any_streamed

    quantile = any_streamed(train_ds, valid_ds)  # a streamed set: QuantileDMatrix, never the float matrix

    def prefix(ds, name):
        return None if cache is None or not is_streamed(ds) else str(cache / name)

    dtrain = _matrix(train_ds, gain, "training set", quantile=quantile, params=merged, cache_prefix=prefix(train_ds, "train"))
    if valid_ds is None:
        return dtrain, None
    return dtrain, _matrix(valid_ds, gain, "validation set", quantile=quantile, ref=dtrain, params=merged,
                           cache_prefix=prefix(valid_ds, "valid"))  # fmt: skip


def cache_facts(cache: Path | None) -> dict[str, Any] | None:
    """What ``info["external_memory"]`` records: how many files the page cache holds once the matrices are
    built, and their bytes (the quantised pages: the histogram index, one byte a value up to 256 bins,
    with XGBoost's other per-page structures)."""
    if cache is None:
        return None
    sizes = {p.name: p.stat().st_size for p in cache.iterdir() if p.is_file()}
    return {"matrix": "ExtMemQuantileDMatrix", "cache_files": len(sizes), "cache_bytes": int(sum(sizes.values())),
            "note": "the quantised pages were written to a temporary folder, removed after training"}  # fmt: skip


def train_xgboost(train_ds, valid_ds=None, params: dict[str, Any] | None = None, *, objective: str = "rank:ndcg",
                  gain: Any = "exp2", num_boost_round: int = 1000, early_stopping_rounds: int | None = 50,
                  eval_at: Sequence[int] = (1, 3, 5, 10), monitor_k: int = 10, seed: int = 0,
                  threads: int | None = None, progress: bool = False, external_memory: str | os.PathLike | None = None):  # fmt: skip
    """Train XGBoost; ``(booster cut to the best round, info)``.

    params: XGBoost parameters (``objective``, ``ndcg_exp_gain`` and ``eval_metric`` are set here);
        ``seed`` and ``nthread`` default to ``seed`` and ``threads`` (``LTR_THREADS``).
    external_memory: a folder; the streamed training (and validation) set is then paged to a
        temporary cache folder made in it and removed at the end (see the module docstring). A
        training set in memory is refused.
    info: ``best_iteration`` (rounds kept), ``rounds_run``, ``best_score`` (toolkit's validation
        ``ndcg@monitor_k``), ``curve`` (its value after each round), ``monitor`` (its stamped name),
        ``own_metrics`` (XGBoost's validation ``ndcg@k`` per round), ``params`` (exactly what
        ``xgb.train`` got), ``objective``, ``importance``, ``external_memory`` (None, or the cache's
        file count and bytes).
    """
    from ltr.data.dataset import feature_names_of
    from ltr.gbdt.common import ValidationMonitor, engine_threads, progress_bar, refuse_keys

    params = dict(params or {})
    refuse_keys(params, _SET_BY_TOOLKIT, "xgboost")
    _check_external(train_ds, external_memory)
    merged: dict[str, Any] = {"seed": int(seed), **params, "objective": objective, "ndcg_exp_gain": False}
    n = engine_threads(threads)
    if n is not None:
        merged.setdefault("nthread", n)
    names = feature_names_of(train_ds)
    monitor = None
    if valid_ds is not None:
        merged["eval_metric"] = [f"ndcg@{int(k)}" for k in sorted({int(k) for k in eval_at} | {int(monitor_k)})]
        monitor = ValidationMonitor(valid_ds, monitor_k, gain, early_stopping_rounds)
    bar = progress_bar(num_boost_round, progress)
    try:
        with page_cache(external_memory) as cache:
            booster, evals_log, external = _fit(merged, train_ds, valid_ds, gain, cache, monitor, bar, num_boost_round)
    finally:
        if bar is not None:
            bar.close()
    booster, best, rounds_run = cut_to_best_round(booster, monitor)
    info = {
        "best_iteration": int(best), "rounds_run": int(rounds_run), "objective": objective,
        "best_score": None if monitor is None else monitor.best_value,
        "monitor": None if monitor is None else monitor.name, "curve": [] if monitor is None else monitor.curve,
        "own_metrics": {"convention": "XGBoost's ndcg@k with the toolkit's gains; a query without a relevant "
                        "item scores 1 (empty=one)", "per_round": {s: dict(v) for s, v in evals_log.items()}},
        "params": merged, "num_boost_round": int(num_boost_round), "early_stopping_rounds": early_stopping_rounds,
        "importance": xgboost_importance(booster, names, best), "external_memory": external,
    }  # fmt: skip
    return booster, info


def _fit(merged, train_ds, valid_ds, gain, cache: Path | None, monitor, bar, num_boost_round: int):
    """``(booster, XGBoost's evals log, info["external_memory"])``: the matrices built (their pages
    under ``cache`` when given) and ``xgb.train`` run; an error of XGBoost's becomes an LtrError.
    The matrices are freed before returning or raising, so that the cache's files can be removed
    while no matrix holds them open (XGBoost would then warn when it frees them): nothing else refers
    to them once training returns (see :func:`round_callback`), so deleting the names frees them."""
    import xgboost as xgb

    evals_log: dict[str, Any] = {}
    dtrain = dvalid = evals = booster = external = None
    error = None
    try:
        dtrain, dvalid = _matrices(train_ds, valid_ds, gain, merged, cache)
        evals = [] if dvalid is None else [(dvalid, "valid")]
        external = cache_facts(cache)
        booster = xgb.train(merged, dtrain, num_boost_round=int(num_boost_round), evals=evals, evals_result=evals_log,
                            verbose_eval=False, callbacks=[round_callback(evals, monitor, bar)])  # fmt: skip
    except xgb.core.XGBoostError as exc:  # raised below, once this traceback (and its hold on the matrices) is gone
        error = " ".join(str(exc).split())[:500]
    del dtrain, dvalid, evals
    if error is not None:
        raise LtrError(f"XGBoost refused the data or parameters: {error}")
    return booster, evals_log, external


def cut_to_best_round(booster, monitor) -> tuple[Any, int, int]:
    """``(booster, best round, rounds run)``: the booster cut to the monitor's best round (1-based), whole
    when there is no monitor or no round improved on it."""
    rounds_run = booster.num_boosted_rounds()
    best = monitor.best_round if monitor is not None and monitor.best_round > 0 else rounds_run
    return (booster[:best] if best < rounds_run else booster), best, rounds_run


def round_callback(evals, monitor, bar, on_round=None):
    """An XGBoost callback: progress, ``on_round(booster)`` after each round, and the toolkit's early
    stopping (a :class:`~ltr.gbdt.common.ValidationMonitor`) on the first evaluation matrix.

    The callback is an instance of one class made once per process: a class made per call is a
    reference cycle (a class refers to itself), which would hold ``evals``'s matrices past training
    until a full pass of the garbage collector (0.1-0.3 s with torch loaded)."""
    return _round_callback_class()(evals, monitor, bar, on_round)


@functools.cache
def _round_callback_class():
    import xgboost as xgb

    from ltr.gbdt.common import rounds_note

    class RoundCallback(xgb.callback.TrainingCallback):
        def __init__(self, evals, monitor, bar, on_round) -> None:
            super().__init__()
            self.evals, self.monitor, self.bar, self.on_round = evals, monitor, bar, on_round

        def after_iteration(self, model, epoch, evals_log) -> bool:
            if self.on_round is not None:
                self.on_round(model)
            monitor = self.monitor
            stop = monitor is not None and monitor.update(model.predict(self.evals[0][0], output_margin=True))
            if self.bar is not None:
                if monitor is not None:
                    self.bar.set_postfix_str(rounds_note(monitor.metric, monitor.curve[-1], monitor.best_value,
                                                         monitor.best_round), refresh=False)
                self.bar.update(1)
            return stop

    return RoundCallback


def predict_xgboost(booster, features: np.ndarray) -> np.ndarray:
    """Scores [N] float64 of every tree of ``booster`` (a trained booster is already cut to its best round)."""
    import xgboost as xgb

    return np.asarray(booster.predict(xgb.DMatrix(np.asarray(features)), output_margin=True), dtype=np.float64)


def load_xgboost(path: str | os.PathLike, n_features: int):
    """A booster from an XGBoost JSON model file (data only: nothing is executed)."""
    import xgboost as xgb

    booster = xgb.Booster()
    try:
        booster.load_model(str(path))
    except xgb.core.XGBoostError as exc:
        raise LtrError(f"{path}: not an XGBoost model XGBoost can read ({' '.join(str(exc).split())[:300]})") from None
    if booster.num_features() != n_features:
        raise LtrError(f"{path}: model.json says {n_features} features but the booster has {booster.num_features()}")
    return booster


def xgboost_importance(booster, names: Sequence[str], iteration: int) -> dict[str, Any]:
    """XGBoost's total gain and split count of every feature (0 for unused ones), in column order."""
    gain = booster.get_score(importance_type="total_gain")
    split = booster.get_score(importance_type="weight")
    keys = [f"f{i}" for i in range(booster.num_features())]
    return {
        "kind": "xgboost",
        "feature": list(names),
        "gain": [float(gain.get(k, 0.0)) for k in keys],
        "split": [int(split.get(k, 0)) for k in keys],
        "iteration": int(iteration),
        "note": "gain: total loss reduction of the splits on the feature; split: how many splits use it",
    }
