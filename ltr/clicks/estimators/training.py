"""One call per estimator: train a neural scorer on a click log, and say which propensities it used.

``fit_on_clicks(train, valid, log, estimator, make_model, ...)`` returns the trained scorer and an
``info`` dict (estimator, clip rule, propensities by position, their source) that ``ltr clicks
train`` writes into the model folder. The estimators are described in :mod:`ltr.clicks.estimators.unbiased`.
``naive``, ``ips``, ``rem`` and ``affine`` train through :class:`ltr.train.trainer.Trainer`;
``dla`` and ``pairwise-debias`` run their own loops (their propensity models are part of the
objective). All of them keep the epoch with the best NDCG@10 on ``valid`` (labelled) and stop
after ``config.patience`` epochs without improvement. The scorer's initial weights are drawn under
``config.seed`` (as ``ltr train`` draws them), so the same seed gives the same model in any process.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.propensities.curves import EM_ITERATIONS
from ltr.clicks.estimators.unbiased import (
    DEFAULT_CLIP,
    ESTIMATORS,
    corrected_clicks,
    fit_pairwise_debias,
    lists_dataset,
    trust_parameters,
)
from ltr.base.errors import LtrError

__all__ = ["fit_on_clicks", "fit_on_aggregate", "fit_on_lists", "estimate_rem_curve", "simulated_curve", "STREAMED",
           "LISTED"]

# the estimators that train from a log's per-cell sums (ltr.clicks.logs.stream), so from a log larger than memory
STREAMED = ("naive", "ips", "rem", "affine", "policy-aware", "doubly-robust")
# the estimators that train one list per logged query with all its items, from the items' exposure
EXPOSURE_LISTS = ("policy-aware", "doubly-robust")
# the estimators that train from a log's shown lists (ltr.clicks.logs.list_stream), streamed from a Parquet log too
LISTED = ("dla", "pairwise-debias")


def estimate_rem_curve(train, log: ClickLog, *, iterations: int = EM_ITERATIONS, relevance: str = "logistic",
                       seed: int = 0, progress: bool = False, min_impressions: int = 1) -> np.ndarray:
    """Relative propensities by position from regression EM on ``log`` (features of ``train``), NaN at a position
    shown fewer than ``min_impressions`` times; ``progress``: a bar over EM's iterations."""
    from ltr.clicks.propensities.regression_em import observations_from_log, regression_em

    obs = observations_from_log(log)
    return regression_em(obs, relevance=relevance, features=train.features, iterations=iterations, seed=seed,
                         min_impressions=min_impressions, progress=progress).theta


def _rem_curve(theta, n_positions: int, info: dict, em_relevance: str) -> tuple[np.ndarray, str]:
    """Regression EM's curve completed over the log's positions by the rule for unidentified ones
    (:func:`ltr.clicks.propensities.curves.complete_curve`), the positions it left out noted in ``info``."""
    from ltr.clicks.propensities.curves import complete_curve, unidentified_note

    curve, known = complete_curve(theta, n_positions)
    _note_unidentified(info, known)
    note = unidentified_note(known)
    return curve, f"regression EM ({em_relevance})" + (f"; {note}" if note else "")


def _record_propensity(info: dict, curve, curve_source: str | None, logged, meta: dict | None = None) -> None:
    """Write the propensities IPS / regression EM used into ``info``: the given or estimated ``curve`` and its
    source, else ``logged()`` (the per-position propensities the log carries) and where the log's column came
    from (:func:`ltr.clicks.estimators.propensity_source.logged_source`; refused when it has none)."""
    from ltr.clicks.estimators.propensity_source import require_propensity

    if curve is None:
        info["propensity_source"] = require_propensity(meta or {}, info.get("estimator", "the estimator"))
    else:
        info["propensity_source"] = curve_source or "given curve"
    info["propensity"] = [_finite_or_none(v) for v in curve] if curve is not None else logged()


def _exposure_lists(train, agg, estimator: str, clip: float, curve, seed: int, info: dict):
    """One list per logged query with all its items: policy-aware labels, or doubly-robust ones (the direct model
    drawn under ``seed``); what they say of the items never shown goes into ``info``."""
    if estimator == "policy-aware":
        from ltr.clicks.estimators.policy_aware import policy_aware_dataset

        lists, info["never_shown"] = policy_aware_dataset(train, agg, clip=clip, curve=curve)
        return lists
    from ltr.clicks.estimators.doubly_robust import doubly_robust_dataset

    lists, dr_info = doubly_robust_dataset(train, agg, clip=clip, curve=curve, seed=seed)
    info.update(dr_info)
    return lists


def _affine(info: dict, given, source: str | None, simulated) -> tuple[np.ndarray, np.ndarray]:
    """The affine estimator's ``(alpha, beta)`` by position: ``given`` (estimated or from a file, ``source`` says
    which), else ``simulated()`` (the simulator's trust-bias settings of the log), recorded in ``info``."""
    if given is None:
        given, source = simulated(), "the simulator's trust-bias settings (the truth)"
    alpha, beta = (np.asarray(v, dtype=np.float64) for v in given)
    info.update({"alpha": alpha.tolist(), "beta": beta.tolist(), "affine_source": source or "given"})
    return alpha, beta


def _note_unidentified(info: dict, identified) -> None:
    """The positions an estimator left unidentified, into its record (``unidentified_positions``, 1-based)."""
    bad = np.flatnonzero(~np.asarray(identified, dtype=bool)) + 1
    if len(bad):
        info["unidentified_positions"] = bad.tolist()


def _finite_or_none(v) -> float | None:
    """A propensity for a JSON record: None (null) where it is not a number (an unidentified position)."""
    v = float(v)
    return v if np.isfinite(v) else None


def _logged_curve(log: ClickLog) -> list | None:
    """The logged propensity by position when it depends on the position only (PBM, trust), else None."""
    k = int(log.position.max())
    curve = np.full(k, np.nan)
    curve[log.position - 1] = log.propensity
    if np.allclose(curve[log.position - 1], log.propensity):
        return curve.tolist()
    return None


def _seeded_model(make_model, ds, seed: int):
    """``make_model(ds)`` with the initial weights drawn under ``seed``: torch's global generator is seeded
    by :func:`ltr.train.trainer.seed_everything` first, as ``ltr train`` does before building its scorer, so
    two fits with the same seed start from the same weights whatever ran before them in the process."""
    from ltr.train.trainer import seed_everything

    seed_everything(seed)
    return make_model(ds)


def _trainer_fit(train_lists, valid, make_model, loss, config):
    from ltr.train.trainer import Trainer

    model = _seeded_model(make_model, train_lists, config.seed)
    result = Trainer(model, loss, config).fit(train_lists, valid)
    return result.model, {"best_epoch": result.best_epoch, "valid_metrics": result.valid_metrics}


def fit_on_clicks(
    train,
    valid,
    log: ClickLog,
    estimator: str,
    make_model: Callable[[Any], Any],
    *,
    loss=None,
    config=None,
    clip: float = DEFAULT_CLIP,
    curve: Any = None,
    curve_source: str | None = None,
    em_relevance: str = "logistic",
    em_iterations: int = EM_ITERATIONS,
    max_weight: float = 100.0,
    propensity_lr: float = 0.05,
    propensity_update: str = "sgd",
    relevance_reference: str | None = None,
    min_impressions: int = 1,
    affine_given: tuple[Any, Any] | None = None,
    affine_source: str | None = None,
) -> tuple[Any, dict]:
    """Train on ``log`` (simulated on ``train``) with ``estimator``; ``curve`` (theta by position) replaces
    the logged propensities of ``ips``. ``make_model(ds)`` builds an untrained scorer for data ``ds``.
    ``em_relevance`` and ``em_iterations`` (rem only): regression EM's relevance model and its iterations at most.
    ``propensity_update`` (dla only): how DLA's propensity model follows the ranker (``"sgd"``,
    ``"full"`` or ``"refit"``) and ``relevance_reference`` (dla only, ``"first"``, ``"geomean"`` or None for
    each update's default) the reference relevance of its propensity loss's weights (:mod:`ltr.clicks.estimators.dla`)."""
    import losses as loss_lib
    from ltr.train.trainer import TrainConfig

    if estimator not in ESTIMATORS:
        raise LtrError(f"unknown estimator {estimator!r}: use one of {', '.join(ESTIMATORS)}")
    from ltr.clicks.estimators.propensity_source import NEEDS_PROPENSITY, require_clicks, require_propensity

    require_clicks(log.n_clicks, log.n_sessions)
    if estimator in NEEDS_PROPENSITY and curve is None:
        require_propensity(log.meta, estimator)
    config = config or TrainConfig(progress=False)
    loss = loss if loss is not None else loss_lib.get_loss("softmax")
    info: dict = {"estimator": estimator, "clip": clip,
                  "clip_rule": f"propensities floored at {clip}: weights at most {1 / clip:g}"}
    if estimator in ("dla", "pairwise-debias"):
        from ltr.clicks.logs.lists import group_sessions, pair_counts

        lists = group_sessions(log)
        pairs = pair_counts(log, lists) if estimator == "pairwise-debias" else None
        return _fit_lists(train, valid, lists, pairs, estimator, make_model, config, clip, max_weight, propensity_lr, info,
                          propensity_update=propensity_update, relevance_reference=relevance_reference,
                          min_impressions=min_impressions)
    affine = None
    if estimator == "rem":
        theta = estimate_rem_curve(train, log, iterations=em_iterations, relevance=em_relevance, seed=config.seed,
                                   progress=config.progress, min_impressions=min_impressions)
        curve, curve_source = _rem_curve(theta, int(log.position.max()), info, em_relevance)
    elif estimator == "affine":
        affine = _affine(info, affine_given, affine_source, lambda: trust_parameters(log))
    if estimator in ("ips", "rem", "policy-aware", "doubly-robust"):
        _record_propensity(info, curve, curve_source, lambda: _logged_curve(log), log.meta)
    if estimator in EXPOSURE_LISTS:
        from ltr.clicks.logs.stream import aggregate_from_log

        lists = _exposure_lists(train, aggregate_from_log(log, train, clip=clip), estimator, clip, curve, config.seed, info)
    else:
        lists = lists_dataset(train, log, corrected_clicks(log, estimator, clip=clip, curve=curve, affine=affine))
    model, fit_info = _trainer_fit(lists, valid, make_model, loss, config)
    info.update(fit_info)
    return model, info


def _fit_lists(train, valid, lists, pairs, estimator, make_model, config, clip, max_weight, propensity_lr, info,
               propensity_update="sgd", relevance_reference=None, min_impressions=1):
    """DLA or pairwise debiasing on the shown lists (and, for the latter, their pair counts)."""
    model = _seeded_model(make_model, train, config.seed)
    if estimator == "dla":
        from ltr.clicks.estimators.dla import fit_dla, resolved_references

        res = fit_dla(lists, train.features, model, epochs=config.epochs, batch_size=config.batch_size, lr=config.lr,
                      propensity_lr=propensity_lr, propensity_update=propensity_update,
                      relevance_reference=relevance_reference, max_weight=max_weight, seed=config.seed,
                      valid=valid, patience=config.patience, min_impressions=min_impressions, progress=config.progress)
        _note_unidentified(info, res.identified)
        info.update({"propensity": [_finite_or_none(v) for v in res.theta], "propensity_source": "DLA (learned with the ranker)",
                     "max_weight": max_weight, "clip_rule": f"DLA's inverse weights clipped at {max_weight:g}",
                     "propensity_update": propensity_update})
        info["relevance_reference"], refit_reference = resolved_references(relevance_reference)
        if propensity_update == "refit":
            info["refit_reference"] = refit_reference
        return res.model, info
    model, t_plus, t_minus = fit_pairwise_debias(None, lists, train.features, model, epochs=config.epochs,
                                                 batch_size=config.batch_size, lr=config.lr, clip=clip, seed=config.seed,
                                                 valid=valid, patience=config.patience, pairs=pairs,
                                                 progress=config.progress)
    info.update({"propensity": t_plus.tolist(), "propensity_unclicked": t_minus.tolist(),
                 "propensity_source": "pairwise debiasing (t+ of clicks, t- of non-clicks)"})
    return model, info


def fit_on_lists(train, valid, lists, estimator: str, make_model: Callable[[Any], Any], *, pairs=None, config=None,
                 clip: float = DEFAULT_CLIP, max_weight: float = 100.0, propensity_lr: float = 0.05,
                 propensity_update: str = "sgd", relevance_reference: str | None = None,
                 min_impressions: int = 1) -> tuple[Any, dict]:
    """:func:`fit_on_clicks` for ``dla`` and ``pairwise-debias`` from a log's shown lists (and, for the latter,
    their pair counts ``pairs``), as :func:`ltr.clicks.logs.list_stream.stream_shown_lists` reads them from a
    Parquet log in record batches; the same lists give the same model as :func:`fit_on_clicks` on the log."""
    from ltr.train.trainer import TrainConfig

    if estimator not in LISTED:
        raise LtrError(f"fit_on_lists trains {' or '.join(LISTED)}, not {estimator!r}")
    if estimator == "pairwise-debias" and pairs is None:
        raise LtrError("pairwise-debias needs the pair counts of the shown lists (stream_shown_lists(..., pairs=True))")
    from ltr.clicks.estimators.propensity_source import require_clicks

    require_clicks(float(lists.clicks.sum()), int(lists.sessions.sum()))
    config = config or TrainConfig(progress=False)
    info: dict = {"estimator": estimator, "clip": clip, "log_read": "streamed per shown list",
                  "clip_rule": f"propensities floored at {clip}: weights at most {1 / clip:g}"}
    return _fit_lists(train, valid, lists, pairs, estimator, make_model, config, clip, max_weight, propensity_lr, info,
                      propensity_update=propensity_update, relevance_reference=relevance_reference,
                      min_impressions=min_impressions)


def fit_on_aggregate(train, valid, agg, estimator: str, make_model: Callable[[Any], Any], *, loss=None, config=None,
                     clip: float = DEFAULT_CLIP, curve: Any = None, curve_source: str | None = None,
                     em_relevance: str = "logistic", em_iterations: int = EM_ITERATIONS, min_impressions: int = 1,
                     affine_given: tuple[Any, Any] | None = None, affine_source: str | None = None) -> tuple[Any, dict]:
    """:func:`fit_on_clicks` from the per-cell sums of a log (:class:`ltr.clicks.logs.stream.LogAggregate`,
    what :func:`ltr.clicks.logs.stream.aggregate_log` streams from a Parquet log) for the estimators of
    ``STREAMED``; on a log with one shown list per query it trains on the same lists as
    :func:`fit_on_clicks` (see :mod:`ltr.clicks.logs.stream`)."""
    import losses as loss_lib
    from ltr.clicks.estimators.cells import aggregate_dataset, cell_values
    from ltr.train.trainer import TrainConfig

    if estimator not in STREAMED:
        raise LtrError(f"estimator {estimator!r} needs the sessions of the log, not its per-cell sums: "
                       f"streamed logs train with {', '.join(STREAMED)}")
    from ltr.clicks.estimators.propensity_source import NEEDS_PROPENSITY, require_clicks, require_propensity

    require_clicks(float(agg.clicks.sum()), agg.n_sessions)
    if estimator in NEEDS_PROPENSITY and curve is None:
        require_propensity(agg.meta, estimator)
    config = config or TrainConfig(progress=False)
    loss = loss if loss is not None else loss_lib.get_loss("softmax")
    info: dict = {"estimator": estimator, "clip": clip, "log_read": "streamed per (query, document, position)",
                  "clip_rule": f"propensities floored at {clip}: weights at most {1 / clip:g}"}
    affine = None
    if estimator == "rem":
        from ltr.clicks.propensities.regression_em import regression_em

        res = regression_em(agg.observations(), relevance=em_relevance, features=train.features,
                            iterations=em_iterations, seed=config.seed, min_impressions=min_impressions,
                            progress=config.progress)
        curve, curve_source = _rem_curve(res.theta, int(agg.position.max()), info, em_relevance)
    elif estimator == "affine":
        from types import SimpleNamespace

        # without a given (alpha, beta), the simulator's settings in the log's meta
        affine = _affine(info, affine_given, affine_source, lambda: trust_parameters(SimpleNamespace(meta=agg.meta)))
    if estimator in ("ips", "rem", "policy-aware", "doubly-robust"):
        _record_propensity(info, curve, curve_source, lambda: _aggregate_curve(agg), agg.meta)
    if estimator in EXPOSURE_LISTS:
        lists = _exposure_lists(train, agg, estimator, clip, curve, config.seed, info)
    else:
        lists = aggregate_dataset(train, agg, cell_values(agg, estimator, clip=clip, curve=curve, affine=affine))
    model, fit_info = _trainer_fit(lists, valid, make_model, loss, config)
    info.update(fit_info)
    return model, info


def simulated_curve(meta: dict, k: int) -> list | None:
    """The logged propensities by position of a simulated PBM or trust log, its first ``k`` examination
    probabilities (from the log's meta), else None."""
    if meta.get("model") in ("pbm", "trust") and meta.get("examination") is not None:
        return [float(v) for v in meta["examination"][:k]]
    return None


def _aggregate_curve(agg) -> list | None:
    """The logged propensity by position: the simulator's examination curve of a PBM or trust log, else
    clicks / ips where that ratio (max(p, clip)) is the same for every cell of a position, else None."""
    k = int(agg.position.max())
    simulated = simulated_curve(agg.meta, k)
    if simulated is not None:
        return simulated
    clicked = agg.clicks > 0
    if not clicked.any():
        return None
    p = agg.clicks[clicked] / agg.ips[clicked]
    curve = np.full(k, np.nan)
    curve[agg.position[clicked] - 1] = p
    if np.allclose(curve[agg.position[clicked] - 1], p, rtol=1e-9):
        return curve.tolist()
    return None
