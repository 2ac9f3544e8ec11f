"""LightGBM on click logs: lambdarank on the sessions with raw clicks, inverse-propensity weights or
LightGBM's own position-bias model, and Unbiased LambdaMART on the shown lists.

For the first three, every logged session with a click becomes one query group of the training set
(its shown items, labelled by their clicks 0 / 1; :func:`ltr.clicks.estimators.ips.click_training_set`):

* ``naive``: lambdarank on the raw clicks;
* ``ips``: each clicked item weighs ``1 / max(p_r, clip)`` (the logged propensity of its position,
  or an estimated curve), the others 1; LightGBM multiplies an item's lambda gradient and hessian by
  its weight;
* ``position-bias``: the shown position of every row goes to ``lgb.Dataset(position=...)``, and
  LightGBM (4.1 and later) learns one bias per position jointly with the trees: inside the lambdas a
  row at position r scores ``f(x) + b_r``, and the model kept is ``f`` alone. LightGBM does not
  expose the learned ``b_r``, so no propensities are recorded for it.

* ``pairwise-debias``: Hu et al.'s Unbiased LambdaMART as a LightGBM custom objective
  (:mod:`ltr.clicks.engines.lambdamart`) on the distinct shown lists and their click-pair counts,
  so its cost does not grow with the sessions (:func:`fit_pairwise_debias_on_lists` takes the lists
  streamed from a Parquet log); it learns the position biases t+ (recorded as the
  propensities, those of the kept round) and t-, at learning rate 0.05;
* ``policy-aware``: for a stochastic top-k logger, lambdarank on one list per query holding all its
  items, each labelled by its clicks over its expected examinations in the log
  (:mod:`ltr.clicks.estimators.policy_aware`; 0 for an item never shown), its gain the label itself
  (``train_lightgbm(..., train_gain="linear")``: LightGBM's ``label_gain`` table lists every
  distinct label), each item weighted by its query's sessions over their mean; built from the log's
  per-cell sums (:func:`fit_policy_aware_lightgbm` takes those streamed from a Parquet log), so its
  cost does not grow with the sessions.

All five stop early on the validation set's NDCG@10 (true labels; ``early_stopping_rounds``, 50 by
default, as ``train_lightgbm``'s), as the other ``ltr clicks train`` estimators do, and keep the best
round: Unbiased LambdaMART overfits when boosted too long (docs/experiments.md, "LightGBM on the
clicks"). The first three boost on one row per shown item of every session with a click: from a log in
memory, rows of float features (:func:`fit_lightgbm_clicks`); from a Parquet log read in record batches,
their data-set rows only, the features gathered block by block as LightGBM bins them
(:func:`fit_lightgbm_streamed_sessions`, the same booster).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.base.errors import LtrError

__all__ = ["LIGHTGBM_ESTIMATORS", "fit_lightgbm_clicks", "fit_lightgbm_on_sessions", "fit_lightgbm_streamed_sessions",
           "fit_pairwise_debias_on_lists", "fit_policy_aware_lightgbm"]

#: the estimators of ``ltr clicks train --engine lightgbm``
LIGHTGBM_ESTIMATORS = ("naive", "ips", "position-bias", "pairwise-debias", "policy-aware", "doubly-robust")
#: the estimators of ``--engine lightgbm`` that take a propensity curve in place of the logged propensities
WITH_CURVE = ("ips", "policy-aware", "doubly-robust")
#: Unbiased LambdaMART's learning rate (the unbiased-LTR study's)
PAIRWISE_LEARNING_RATE = 0.05


def fit_lightgbm_clicks(dataset, valid, log: ClickLog, estimator: str, *, clip: float = 0.01, curve: Any = None,
                        curve_source: str | None = None, rounds: int = 1000, early_stopping_rounds: int | None = 50,
                        seed: int = 0, progress: bool = False) -> tuple[Any, dict]:
    """Boost at most ``rounds`` rounds on the sessions of ``log`` (features of ``dataset``; ``pairwise-debias``:
    on the shown lists), stopping early on ``valid``'s NDCG@10; ``(booster, info)``.
    ``curve`` (``ips`` and ``policy-aware``): propensities by position (θ_1 first) in place of the logged ones. ``info``:
    LightGBM's training record plus the estimator, the clip rule and the propensities used."""
    from ltr.clicks.estimators.ips import click_training_set
    from ltr.clicks.estimators.training import _logged_curve

    if estimator not in LIGHTGBM_ESTIMATORS:
        raise LtrError(f"--engine lightgbm trains --estimator {', '.join(LIGHTGBM_ESTIMATORS)}, not {estimator}")
    if curve is not None and estimator not in WITH_CURVE:
        raise LtrError(f"estimated propensities apply to --estimator {_listed(WITH_CURVE)} only")
    from ltr.clicks.estimators.propensity_source import require_clicks, require_propensity

    require_clicks(log.n_clicks, log.n_sessions)
    if estimator in WITH_CURVE and curve is None:
        require_propensity(log.meta, estimator)
    if estimator == "pairwise-debias":
        from ltr.clicks.logs.lists import group_sessions, pair_counts

        lists = group_sessions(log)
        return fit_pairwise_debias_on_lists(dataset, valid, lists, pair_counts(log, lists), rounds=rounds,
                                            early_stopping_rounds=early_stopping_rounds, seed=seed, progress=progress)
    if estimator in ("policy-aware", "doubly-robust"):
        from ltr.clicks.logs.stream import aggregate_from_log

        return fit_policy_aware_lightgbm(dataset, valid, aggregate_from_log(log, dataset), clip=clip, curve=curve,
                                         curve_source=curve_source, rounds=rounds,
                                         early_stopping_rounds=early_stopping_rounds, seed=seed, progress=progress,
                                         estimator=estimator)
    entry_p = None if curve is None else _curve_per_entry(log, curve)
    train_set, position = click_training_set(dataset, log, weighting="ips" if estimator == "ips" else "none",
                                             clip=clip, propensity=entry_p)
    return fit_lightgbm_on_sessions(train_set, position, valid, estimator, clip=clip, curve=curve,
                                    curve_source=curve_source, logged_curve=lambda: _logged_curve(log), rounds=rounds,
                                    early_stopping_rounds=early_stopping_rounds, seed=seed, progress=progress,
                                    meta=log.meta)


def fit_lightgbm_on_sessions(train_set, position, valid, estimator: str, *, clip: float, curve: Any,
                             curve_source: str | None, logged_curve, rounds: int, early_stopping_rounds: int | None,
                             seed: int, progress: bool, meta: dict | None = None) -> tuple[Any, dict]:
    """``naive``, ``ips`` or ``position-bias`` on the sessions with a click (``train_set`` and the shown
    ``position`` of its rows: :func:`ltr.clicks.estimators.ips.click_training_set`'s, or
    :func:`ltr.clicks.engines.session_stream.session_training_set`'s for a Parquet log read in record batches);
    ``logged_curve()``: the log's propensities by position, recorded when ``ips`` used them; ``meta``: the log's,
    which says where its propensity column came from."""
    from ltr.clicks.estimators.training import _record_propensity
    from ltr.gbdt.lightgbm import train_lightgbm

    booster, info = train_lightgbm(train_set, valid, position=position if estimator == "position-bias" else None,
                                   num_boost_round=int(rounds), early_stopping_rounds=early_stopping_rounds, seed=seed,
                                   progress=progress)
    info.update({"engine": "lightgbm", "estimator": estimator, "n_groups": int(train_set.n_queries)})
    if estimator == "ips":
        info.update({"clip": clip, "clip_rule": f"propensities floored at {clip}: weights at most {1 / clip:g}"})
        _record_propensity(info, curve, curve_source, logged_curve, meta)
    elif estimator == "position-bias":
        info.update({"propensity": None,
                     "propensity_source": "LightGBM's position biases, learned with the trees (not exposed)"})
    else:
        info.update({"propensity": None, "propensity_source": "none (raw clicks)"})
    return booster, info


def fit_lightgbm_streamed_sessions(dataset, valid, path, estimator: str, *, clip: float = 0.01, curve: Any = None,
                                   curve_source: str | None = None, ids: str = "auto", batch_size: int = 1_000_000,
                                   rounds: int = 1000, early_stopping_rounds: int | None = 50, seed: int = 0,
                                   progress: bool = False) -> tuple[Any, dict, int]:
    """``naive``, ``ips`` or ``position-bias`` on the Parquet log at ``path`` read in record batches
    (:mod:`ltr.clicks.engines.session_stream`): the booster of :func:`fit_lightgbm_clicks` on the same log read whole,
    without the log or the training rows' float features held; ``(booster, info, sessions read)``."""
    from ltr.clicks.logs.stream import read_log_meta
    from ltr.clicks.engines.session_stream import session_training_set, stream_click_sessions
    from ltr.clicks.estimators.training import simulated_curve

    if estimator not in ("naive", "ips", "position-bias"):
        raise LtrError(f"the sessions of a streamed log train --estimator naive, ips or position-bias, not {estimator}")
    if curve is not None and estimator != "ips":
        raise LtrError(f"estimated propensities apply to --estimator {_listed(WITH_CURVE)} only")
    from ltr.clicks.estimators.propensity_source import require_clicks, require_propensity

    meta = read_log_meta(path)
    if estimator == "ips" and curve is None:
        require_propensity(meta, estimator)
    sessions = stream_click_sessions(path, dataset, weighting="ips" if estimator == "ips" else "none", clip=clip,
                                     curve=curve, ids=ids, batch_size=batch_size, progress=progress)
    require_clicks(float(sessions.click.sum()), sessions.n_sessions)
    train_set, position = session_training_set(dataset, sessions)
    k = int(sessions.position.max())
    booster, info = fit_lightgbm_on_sessions(train_set, position, valid, estimator, clip=clip, curve=curve,
                                             curve_source=curve_source, logged_curve=lambda: simulated_curve(meta, k),
                                             rounds=rounds, early_stopping_rounds=early_stopping_rounds, seed=seed,
                                             progress=progress, meta=meta)
    info["log_read"] = "streamed per session with a click"
    return booster, info, sessions.n_sessions


def fit_pairwise_debias_on_lists(dataset, valid, lists, pairs, *, rounds: int = 1000,
                                 early_stopping_rounds: int | None = 50, seed: int = 0,
                                 progress: bool = False) -> tuple[Any, dict]:
    """``pairwise-debias`` on a log's distinct shown lists and their click-pair counts (those of
    :func:`ltr.clicks.logs.list_stream.stream_shown_lists` for a Parquet log read in record batches):
    the booster and its record (t+ of the kept round as the propensities)."""
    from ltr.clicks.engines.lambdamart import fit_unbiased_lambdamart_on_lists
    from ltr.clicks.estimators.propensity_source import require_clicks

    require_clicks(float(lists.clicks.sum()), int(lists.sessions.sum()))
    fit = fit_unbiased_lambdamart_on_lists(dataset, lists, pairs, rounds=int(rounds), seed=seed, valid=valid,
                                           params={"learning_rate": PAIRWISE_LEARNING_RATE},
                                           early_stopping_rounds=early_stopping_rounds, progress=progress)
    info = {"engine": "lightgbm", "estimator": "pairwise-debias", "best_iteration": len(fit.history),
            "num_boost_round": int(rounds), "early_stopping_rounds": early_stopping_rounds,
            "learning_rate": PAIRWISE_LEARNING_RATE, "n_lists": int(lists.n_groups),
            "propensity": [float(v) for v in fit.t_plus], "propensity_unclicked": [float(v) for v in fit.t_minus],
            "propensity_source": "Unbiased LambdaMART (t+ of clicked items, learned with the trees)"}
    return fit.booster, info


def fit_policy_aware_lightgbm(dataset, valid, agg, *, clip: float = 0.01, curve: Any = None,
                              curve_source: str | None = None, rounds: int = 1000,
                              early_stopping_rounds: int | None = 50, seed: int = 0,
                              progress: bool = False, estimator: str = "policy-aware") -> tuple[Any, dict]:
    """``policy-aware`` (or ``doubly-robust``: :mod:`ltr.clicks.estimators.doubly_robust`'s lists, the direct model
    drawn under ``seed``) on a log's per-cell sums (:class:`ltr.clicks.logs.stream.LogAggregate`, in memory or
    streamed from a Parquet log): lambdarank on :func:`ltr.clicks.estimators.policy_aware.policy_aware_dataset`'s
    lists with the labels as their own gain, ``(booster, info)``; ``info["never_shown"]`` counts the items
    labelled 0 because the log never showed them."""
    from ltr.clicks.estimators.policy_aware import clip_rule
    from ltr.clicks.estimators.training import _aggregate_curve, _exposure_lists, _record_propensity
    from ltr.gbdt.lightgbm import train_lightgbm

    from ltr.clicks.estimators.propensity_source import require_clicks, require_propensity

    require_clicks(float(agg.clicks.sum()), agg.n_sessions)
    if curve is None:
        require_propensity(agg.meta, estimator)
    about: dict = {}
    lists = _exposure_lists(dataset, agg, estimator, clip, curve, seed, about)
    # S_q over its mean: the queries keep their relative weight, and LightGBM's hessian floors their scale
    lists = lists.with_weights(lists.weights / lists.weights.mean())
    booster, info = train_lightgbm(lists, valid, gain="exp2", train_gain="linear", num_boost_round=int(rounds),
                                   early_stopping_rounds=early_stopping_rounds, seed=seed, progress=progress)
    info.update({"engine": "lightgbm", "estimator": estimator, "n_groups": int(lists.n_queries), **about,
                 "log_read": "per (query, document, position)", "clip": clip, "clip_rule": clip_rule(clip)})
    # the label table of every distinct policy-aware label stays in the booster's parameters, not in the record
    info["label_gain"], info["label_values"] = None, None
    _record_propensity(info, curve, curve_source, lambda: _aggregate_curve(agg), agg.meta)
    return booster, info


def _curve_per_entry(log: ClickLog, curve: Any) -> np.ndarray:
    """The propensity of every log entry from a curve by position (θ_1 first)."""
    curve = np.asarray(curve, dtype=np.float64)
    if log.n_entries and log.position.max() > len(curve):
        raise LtrError(f"the propensity curve covers {len(curve)} positions, the log shows {int(log.position.max())}")
    return curve[log.position - 1]


def _listed(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
