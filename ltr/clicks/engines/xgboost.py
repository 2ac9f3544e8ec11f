"""Unbiased LambdaMART with the XGBoost engine: ``rank:ndcg`` with ``lambdarank_unbiased`` on click sessions.

XGBoost (2.0 and later) implements Hu et al.'s Unbiased LambdaMART (WWW 2019, the objective of
:mod:`ltr.clicks.engines.lambdamart`) inside its ``rank:ndcg`` / ``rank:pairwise`` objectives:
with ``lambdarank_unbiased=True`` a pair (clicked i at position r_i, unclicked j at r_j) has its
lambda divided by ``t+_{r_i} t-_{r_j}``, and after each round the position biases are re-estimated,
relative to position 1, with the exponent ``1 / (p + 1)``, ``p = lambdarank_bias_norm``.

XGBoost takes an item's *position* from its place within its query group, so every logged session
is one group, its items in shown order (position 1 first), labelled by their clicks (0 / 1). The
learned ``t+`` ("ti+") and ``t-`` ("tj-") are read from the booster's saved configuration and cut
to the shown positions; ``t+`` is the examination propensity estimate. With a validation set the
booster stops early on the toolkit's NDCG@10 and keeps the best round and its biases. Needs ``pip
install 'ltr[xgboost]'``. A log in memory becomes a matrix of sessions x shown items float rows; a Parquet
log is read in record batches (:func:`fit_xgboost_streamed_sessions`), keeping 9 bytes per shown item, and
XGBoost bins the features gathered block by block; with ``external_memory`` the binned sessions are pages on disk
(an ``ExtMemQuantileDMatrix``, ``ltr clicks train --external-memory``).

``policy-aware`` (:func:`fit_xgboost_policy_aware`, for a stochastic top-k logger) trains ``rank:ndcg``
with ``ndcg_exp_gain=False`` on the policy-aware lists of :mod:`ltr.clicks.estimators.policy_aware` instead, built
from the log's per-cell sums (streamed from a Parquet log).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.base.errors import LtrError

__all__ = ["session_groups", "fit_xgboost_clicks", "fit_xgboost_streamed_sessions", "fit_xgboost_policy_aware"]


def session_groups(log: ClickLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows [M], clicks [M], group [M])``: the log's entries sorted by (session, position), one group
    per session (XGBoost's ``qid``, non-decreasing), so an entry's place in its group is its position."""
    if log.n_entries == 0:
        raise LtrError("the click log is empty")
    order = np.lexsort((log.position, log.session))
    pos = log.position[order]
    sess = log.session[order]
    first = np.r_[True, sess[1:] != sess[:-1]]
    _check_places(pos, first, lambda i: f"session {int(sess[i])}")
    return log.doc[order], log.click[order].astype(np.float32), sess


def _check_places(pos: np.ndarray, first: np.ndarray, name) -> None:
    """Refuse a session whose shown positions are not 1, 2, 3, ... in order (``first``: where each session's
    rows begin; ``name(i)``: how the message names the session of row i)."""
    index = np.arange(len(pos))
    place = index - np.maximum.accumulate(np.where(first, index, 0)) + 1
    if (pos != place).any():
        i = int(np.argmax(pos != place))
        raise LtrError(f"{name(i)} skips a position (it shows position {int(pos[i])} as its item "
                       f"{int(place[i])}): XGBoost reads positions from the order within a session")


def _check_streamed_places(sessions, block: int = 1 << 20) -> None:
    """:func:`_check_places` on streamed sessions, ``block`` sessions at a time (a few bytes a row, not 24)."""
    starts = sessions.offsets[:-1]
    for a in range(0, len(starts), block):
        lo, hi = int(sessions.offsets[a]), int(sessions.offsets[min(a + block, len(starts))])
        first = np.zeros(hi - lo, dtype=bool)
        first[starts[a : a + block] - lo] = True
        ordinal = lambda i: a + int(np.searchsorted(starts[a : a + block] - lo, i, side="right"))  # noqa: E731
        _check_places(sessions.position[lo:hi], first, lambda i: f"the log's session number {ordinal(i)} (in file order)")


def fit_xgboost_clicks(dataset, log: ClickLog, *, unbiased: bool = True, bias_norm: float | None = None,
                       rounds: int = 100, params: dict | None = None, seed: int = 0, threads: int = 1,
                       objective: str = "rank:ndcg", valid=None, early_stopping_rounds: int | None = None,
                       progress: bool = False) -> tuple[Any, dict]:
    """Boost ``rounds`` rounds on the sessions of ``log`` (features of ``dataset``); ``(booster, info)`` with
    ``info["t_plus"]`` / ``["t_minus"]`` the position biases XGBoost learned (all 1 when ``unbiased`` is
    false: plain LambdaMART on raw clicks, the naive baseline) and ``info["params"]`` what ``xgb.train`` got.

    valid: a labelled data set; with ``early_stopping_rounds``, boosting stops when the toolkit's
    NDCG@10 on it (gain 2^rel - 1) has not improved for that many rounds, and the booster is cut to the
    best round, whose position biases ``info`` holds. ``progress``: a bar of boosting rounds on stderr.
    """
    from ltr.gbdt.engines import import_engine

    from ltr.clicks.estimators.propensity_source import require_clicks

    require_clicks(log.n_clicks, log.n_sessions)
    xgb = import_engine("xgboost")
    rows, clicks, group = session_groups(log)
    if rows.max() >= dataset.n_items:
        raise LtrError(f"the click log refers to rows beyond the data set ({dataset.n_items} rows)")
    matrix = xgb.DMatrix(np.asarray(dataset.features)[rows], label=clicks, qid=group)
    fit = _SessionFit(unbiased, bias_norm, rounds, params, seed, threads, objective, valid, early_stopping_rounds, progress)
    return _fit_session_matrix(xgb, matrix, int(log.position.max()), int(log.n_sessions), fit)


def fit_xgboost_streamed_sessions(dataset, path, *, ids: str = "auto", batch_size: int = 1_000_000,
                                  unbiased: bool = True, bias_norm: float | None = None, rounds: int = 100,
                                  params: dict | None = None, seed: int = 0, threads: int = 1,
                                  objective: str = "rank:ndcg", valid=None, early_stopping_rounds: int | None = None,
                                  progress: bool = False, external_memory=None) -> tuple[Any, dict]:
    """:func:`fit_xgboost_clicks` on the Parquet log at ``path`` read ``batch_size`` rows at a time: every session
    (:func:`ltr.clicks.engines.session_stream.stream_click_sessions` with ``every_session``) keeps per shown item its
    data-set row, click and position, and XGBoost's ``QuantileDMatrix`` sketches and bins the sessions' features
    from blocks gathered out of ``dataset`` (:func:`ltr.gbdt.streaming.xgboost_matrix`), so neither the log nor
    the float matrix is held. The same booster as the log read whole. Raises
    :class:`ltr.clicks.logs.list_stream.UnsortedSessionsError` when the log's session ids go back.

    external_memory: a folder; XGBoost's page cache is then a temporary folder made in it (removed when training
    returns or fails), and the binned sessions an ``ExtMemQuantileDMatrix`` whose pages are files there, read back
    every round, instead of a matrix in RAM; ``info["external_memory"]`` records the files' count and bytes."""
    from ltr.clicks.engines.session_stream import session_training_set, stream_click_sessions
    from ltr.gbdt.engines import import_engine
    from ltr.gbdt.xgboost import page_cache

    xgb = import_engine("xgboost")
    sessions = stream_click_sessions(path, dataset, ids=ids, batch_size=batch_size, progress=progress,
                                     every_session=True)
    from ltr.clicks.estimators.propensity_source import require_clicks

    require_clicks(float(sessions.click.sum()), sessions.n_sessions)
    _check_streamed_places(sessions)
    train_set, _ = session_training_set(dataset, sessions)
    fit = _SessionFit(unbiased, bias_norm, rounds, params, seed, threads, objective, valid, early_stopping_rounds, progress)
    with page_cache(external_memory) as cache:
        booster, info, cached = _fit_streamed_matrix(xgb, train_set, sessions, cache, fit)
    info.update(log_read="streamed per session", external_memory=cached)
    return booster, info


def _fit_streamed_matrix(xgb, train_set, sessions, cache: Path | None, fit) -> tuple[Any, dict, dict | None]:
    """:func:`_fit_session_matrix` on the sessions' ``QuantileDMatrix`` (an ``ExtMemQuantileDMatrix`` with its pages
    under ``cache`` when given); ``(booster, info, the cache's file count and bytes or None)``. The matrix is freed
    before returning, so that the cache's files can be removed while nothing holds them open."""
    from ltr.gbdt.streaming import xgboost_matrix
    from ltr.gbdt.xgboost import cache_facts

    prefix = None if cache is None else str(cache / "sessions")
    matrix = xgboost_matrix(train_set, sessions.click, quantile=True, nthread=fit.threads,  # labels made float per block
                            cache_prefix=prefix)
    facts = cache_facts(cache)
    booster, info = _fit_session_matrix(xgb, matrix, int(sessions.position.max()), int(sessions.n_sessions), fit)
    del matrix  # the last reference: training leaves no cycle that holds it (ltr.gbdt.xgboost.round_callback)
    return booster, info, facts


class _SessionFit(NamedTuple):
    """How :func:`fit_xgboost_clicks` and :func:`fit_xgboost_streamed_sessions` boost (their arguments)."""

    unbiased: bool
    bias_norm: float | None
    rounds: int
    params: dict | None
    seed: int
    threads: int
    objective: str
    valid: Any
    early_stopping_rounds: int | None
    progress: bool


def _fit_session_matrix(xgb, matrix, k: int, n_sessions: int, fit: _SessionFit) -> tuple[Any, dict]:
    """Boost on one group per session (``matrix``, positions 1..``k``); ``(booster, info)`` with the position
    biases of the kept round."""
    merged = _merged_params(fit.params, fit.seed, fit.threads, fit.objective, fit.unbiased, fit.bias_norm)
    biases: list = []  # (t+, t-) after each round
    booster, best, rounds_run, monitor = _boost(xgb, merged, matrix, fit.valid, fit.rounds, fit.early_stopping_rounds,
                                                fit.progress, lambda b: biases.append(_biases(b, k)))
    bias_norm_used = _objective_config(booster)["lambdarank_param"]["lambdarank_bias_norm"]
    t_plus, t_minus = biases[best - 1]
    info = {"engine": "xgboost", "objective": fit.objective, "best_iteration": int(best), "rounds_run": int(rounds_run),
            "num_boost_round": int(fit.rounds), "early_stopping_rounds": fit.early_stopping_rounds if monitor else None,
            "params": merged, "lambdarank_bias_norm": float(bias_norm_used),
            "t_plus": t_plus, "t_minus": t_minus, "xgboost_version": xgb.__version__, "n_groups": n_sessions}
    return booster, info


def fit_xgboost_policy_aware(dataset, valid, agg, *, clip: float = 0.01, curve: Any = None, rounds: int = 1000,
                             seed: int = 0, threads: int = 1, early_stopping_rounds: int | None = 50,
                             progress: bool = False) -> tuple[Any, dict]:
    """``policy-aware`` with XGBoost: ``rank:ndcg`` with ``ndcg_exp_gain=False`` (each label its own gain, which
    lets XGBoost take real-valued labels) on :func:`ltr.clicks.estimators.policy_aware.policy_aware_dataset`'s lists, one per
    logged query with all its items, each weighted by its sessions over their mean (XGBoost's ranking weights
    are per query); early stopping on the toolkit's NDCG@10 of ``valid`` (gain 2^rel - 1). ``(booster, info)``."""
    from ltr.clicks.estimators.policy_aware import clip_rule, policy_aware_dataset
    from ltr.gbdt.engines import import_engine

    from ltr.clicks.estimators.propensity_source import require_clicks, require_propensity

    require_clicks(float(agg.clicks.sum()), agg.n_sessions)
    if curve is None:
        require_propensity(agg.meta, "policy-aware")
    xgb = import_engine("xgboost")
    lists, never_shown = policy_aware_dataset(dataset, agg, clip=clip, curve=curve)
    offsets = np.asarray(lists.query_offsets)
    group_weight = lists.weights[offsets[:-1]]
    merged = {**_merged_params(None, seed, threads, "rank:ndcg", False, None), "ndcg_exp_gain": False}
    matrix = xgb.DMatrix(np.asarray(lists.features), label=lists.labels.astype(np.float32),
                         qid=np.repeat(np.arange(lists.n_queries), np.diff(offsets)),
                         weight=group_weight / group_weight.mean())
    booster, best, rounds_run, monitor = _boost(xgb, merged, matrix, valid, rounds, early_stopping_rounds, progress,
                                                None)
    info = {"engine": "xgboost", "objective": "rank:ndcg", "estimator": "policy-aware", "best_iteration": int(best),
            "rounds_run": int(rounds_run), "num_boost_round": int(rounds),
            "early_stopping_rounds": early_stopping_rounds if monitor else None, "params": merged,
            "xgboost_version": xgb.__version__, "n_groups": int(lists.n_queries), "never_shown": int(never_shown),
            "clip": clip, "clip_rule": clip_rule(clip)}
    return booster, info


def _boost(xgb, merged: dict, matrix, valid, rounds: int, early_stopping_rounds: int | None, progress: bool,
           after_round) -> tuple[Any, int, int, Any]:
    """``xgb.train`` for at most ``rounds`` rounds, ``after_round(booster)`` after each; with ``valid`` and
    ``early_stopping_rounds``, stopped on the toolkit's NDCG@10 of ``valid`` and cut to its best round.
    ``(booster, best round, rounds run, monitor or None)``."""
    from ltr.gbdt.common import ValidationMonitor, progress_bar
    from ltr.gbdt.xgboost import cut_to_best_round, round_callback

    evals, monitor = [], None
    if valid is not None and early_stopping_rounds:
        # registered as an evaluation matrix so that XGBoost caches its predictions from round to round
        qid = np.repeat(np.arange(valid.n_queries), np.diff(valid.query_offsets))
        evals = [(xgb.DMatrix(np.asarray(valid.features), label=np.asarray(valid.labels, dtype=np.float32), qid=qid),
                  "valid")]
        monitor = ValidationMonitor(valid, 10, "exp2", early_stopping_rounds)
        merged["disable_default_eval_metric"] = 1  # the monitor judges the rounds (any label, the toolkit's NDCG)
    bar = progress_bar(int(rounds), progress)
    try:
        booster = xgb.train(merged, matrix, num_boost_round=int(rounds), evals=evals, verbose_eval=False,
                            callbacks=[round_callback(evals, monitor, bar, after_round)])
    except xgb.core.XGBoostError as exc:
        raise LtrError(f"XGBoost refused the data or parameters: {' '.join(str(exc).split())[:500]}") from None
    finally:
        if bar is not None:
            bar.close()
    booster, best, rounds_run = cut_to_best_round(booster, monitor)
    return booster, best, rounds_run, monitor


def _merged_params(params, seed: int, threads: int, objective: str, unbiased: bool, bias_norm) -> dict[str, Any]:
    """What ``xgb.train`` gets: the caller's ``params`` under the seed, threads, objective and bias settings."""
    merged: dict[str, Any] = {"seed": int(seed), "nthread": int(threads), **(params or {}), "objective": objective,
                              "lambdarank_unbiased": bool(unbiased)}
    if bias_norm is not None:
        if bias_norm < 0:
            raise LtrError(f"lambdarank_bias_norm must be >= 0, got {bias_norm}")
        merged["lambdarank_bias_norm"] = float(bias_norm)
    return merged


def _objective_config(booster) -> dict:
    """The booster's objective section of its saved configuration (parameters and learned biases)."""
    return json.loads(booster.save_config())["learner"]["objective"]


def _biases(booster, k: int) -> tuple[list, list]:
    """The position biases ``(t+, t-)`` of the booster's objective now, cut to ``k`` positions (all 1 when
    the objective learns none)."""
    config = _objective_config(booster)
    return ([float(v) for v in config.get("ti+", [1.0] * k)[:k]], [float(v) for v in config.get("tj-", [1.0] * k)[:k]])
