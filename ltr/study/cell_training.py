"""Training one ablation cell: tune its method on the validation split, build the chosen model (or
seed ensemble), and score the test split.

For each candidate of :func:`ltr.study.methods.tuning_candidates` a model is trained on the training
split with the cell's seed and judged on the validation split by the monitored metric (``[train]
monitor``, ``ndcg@10`` by default; a GBDT engine's model is judged by the same ``metrics.evaluate``
call). The best candidate is kept; with ``ensemble = N`` it becomes member 0 of an ensemble whose
members 1..N-1 are trained with seeds ``seed + 1000 k`` and whose scores are averaged. A blend
method trains each of its members that way and weights their per-query standardised scores on the
validation split (:mod:`ltr.models.blend`); its ``train_info`` holds the weights, each member's
validation value alone and each member's own ``train_info``.

What a cell records about its training (``train_info``): every candidate tried (settings, validation
value, best epoch or round, epochs or rounds run), the chosen one, whether its best epoch was its
last (``hit_cap``: training stopped at the cap while still improving) and the chosen model's
validation curve (``curve``: the value after each epoch; LightGBM: its final value). Wall times go
apart, under ``timing`` (they are the one part of a record that differs between two runs):
``train_seconds`` of the chosen model, ``curve_seconds`` (time since its start at each point of the
curve), ``tuning_seconds`` per candidate and ``ensemble_seconds`` per extra member. The report reads
from them the time a method needs to reach a given validation value.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ltr.base.errors import LtrError
from ltr.study.methods import MethodSpec, tuning_candidates, with_overrides

__all__ = ["train_method"]


def train_method(spec: MethodSpec, train, valid, test, *, seed: int, metrics, monitor: str, budget: int,
                 threads: int) -> tuple[np.ndarray, dict[str, Any]]:
    """Tune ``spec`` (up to ``budget`` candidates), train the chosen model(s); ``(test scores, info)``."""
    kw = dict(seed=seed, metrics=metrics, monitor=monitor, budget=budget, threads=threads)
    if spec.kind == "blend":
        return _train_blend(spec, train, valid, test, **kw)
    predictors, info = _train_chosen(spec, train, valid, **kw)
    return np.mean([p(test) for p in predictors], axis=0), info


def _train_chosen(spec: MethodSpec, train, valid, *, seed: int, metrics, monitor: str, budget: int,
                  threads: int) -> tuple[list, dict[str, Any]]:
    """The chosen candidate's predictor(s) (one per ensemble member) and the cell's ``train_info``."""
    fit_one = {"lightgbm": _fit_lightgbm, "xgboost": _fit_engine, "catboost": _fit_engine}.get(spec.kind, _fit_neural)
    timed = ("seconds", "curve_seconds")
    trials, tuning_seconds, best = [], [], None
    for overrides in tuning_candidates(spec, budget):
        candidate = with_overrides(spec, overrides)
        predictor, facts = fit_one(candidate, train, valid, seed=seed, metrics=metrics, monitor=monitor,
                                   threads=threads)
        trials.append({"params": overrides, **{k: v for k, v in facts.items() if k not in timed + ("curve",)}})
        tuning_seconds.append(facts["seconds"])
        if best is None or facts["valid_best"] > best[2]["valid_best"]:
            best = (candidate, predictor, facts, overrides)
    chosen, predictor, facts, overrides = best
    members, predictors = [facts], [predictor]
    for k in range(1, chosen.ensemble):
        p, f = fit_one(chosen, train, valid, seed=seed + 1000 * k, metrics=metrics, monitor=monitor, threads=threads)
        predictors.append(p)
        members.append(f)
    info = {key: facts[key] for key in ("best_epoch", "epochs_run", "best_iteration", "num_boost_round")
            if key in facts}
    info.update(valid_best=float(facts["valid_best"]), chosen=overrides, tuning=trials, curve=facts["curve"],
                hit_cap=any(m["hit_cap"] for m in members))
    info["timing"] = {"train_seconds": float(facts["seconds"]), "curve_seconds": facts["curve_seconds"],
                      "tuning_seconds": tuning_seconds, "ensemble_seconds": [m["seconds"] for m in members[1:]]}
    if chosen.ensemble > 1:
        from ltr.runs.scoring import evaluate_scores

        valid_scores = np.mean([p(valid) for p in predictors], axis=0)
        ev = evaluate_scores(valid_scores, valid, [monitor])
        info["ensemble"] = {"seeds": [seed + 1000 * k for k in range(chosen.ensemble)],
                            "valid": float(ev.mean[ev.names[monitor]]),
                            "members": [{k: m[k] for k in m if k not in timed + ("curve",)} for m in members]}
    return predictors, info


def _train_blend(spec: MethodSpec, train, valid, test, **kw) -> tuple[np.ndarray, dict[str, Any]]:
    """Each member trained as its own cell would be, then weighted on the validation split
    (:func:`ltr.models.blend.fit_weights` on the monitored metric); the test split's blended scores."""
    from ltr.models.blend import DEFAULT_WEIGHT_RULE, combine, fit_weights, standardise

    valid_scores, test_scores, infos = [], [], {}
    for member in spec.members:
        predictors, infos[member.name] = _train_chosen(member, train, valid, **kw)
        valid_scores.append(np.mean([p(valid) for p in predictors], axis=0))
        test_scores.append(np.mean([p(test) for p in predictors], axis=0))
    try:
        fit = fit_weights(valid_scores, valid, kw["monitor"], rule=spec.blend_weights or DEFAULT_WEIGHT_RULE)
    except LtrError as exc:
        raise LtrError(f"method {spec.name}: {exc}") from None
    scores = combine([standardise(s, test.query_offsets) for s in test_scores], fit.weights)
    seconds = sum(sum(i["timing"]["tuning_seconds"]) + sum(i["timing"]["ensemble_seconds"]) for i in infos.values())
    info = {"valid_best": fit.value, "weights": dict(zip(infos, fit.weights)),
            "member_valid": dict(zip(infos, fit.member_values)), "equal_weights_valid": fit.equal_value,
            "curve": [fit.value], "hit_cap": any(i["hit_cap"] for i in infos.values()), "members": infos,
            "timing": {"train_seconds": seconds, "curve_seconds": [round(seconds, 4)], "tuning_seconds": [],
                       "ensemble_seconds": []}}
    if "cv" in fit.search:  # rules cv and held-out: lambda and the cross-validated values, as blend.json has them
        info["cv"] = fit.search["cv"]
    if "held_out" in fit.search:  # rule held-out: the held-out comparison with the best member, and the choice
        info["held_out"] = fit.search["held_out"]
    return scores, info


def _fit_neural(spec: MethodSpec, train, valid, *, seed, metrics, monitor, threads):
    import torch

    import losses
    from ltr.train.models import FeatureTransform, build_model
    from ltr.train.trainer import TrainConfig, Trainer, predict_scores

    t0 = time.perf_counter()
    model_cfg = dict(spec.model)
    normalize = model_cfg.pop("normalize", None)
    model_cfg.setdefault("type", "mlp")
    torch.manual_seed(seed)  # the same initial weights for every method of a seed
    model = build_model({**model_cfg, "n_features": train.n_features})
    if normalize and normalize != "none":
        model.set_normalizer(FeatureTransform.fit(train.features, normalize))
    try:
        loss = losses.get_loss(spec.loss, **spec.loss_options)
    except (TypeError, ValueError) as exc:
        raise LtrError(f"method {spec.name}: {exc}") from None
    tcfg = TrainConfig(**{"monitor": monitor, **spec.train, "seed": seed, "progress": False, "metrics": tuple(metrics)})
    fit = Trainer(model, loss, tcfg).fit(train, valid)
    facts = {"valid_best": float(fit.best_value), "best_epoch": int(fit.best_epoch), "epochs_run": int(fit.epochs_run),
             "hit_cap": int(fit.best_epoch) == int(fit.epochs_run) and not fit.stopped_early,
             "curve": [float(r["valid"][fit.monitor]) for r in fit.history],
             "seconds": time.perf_counter() - t0,
             "curve_seconds": [round(float(t), 4) for t in np.cumsum([r["seconds"] for r in fit.history])]}
    model = fit.model

    def predict(ds):
        return predict_scores(model, ds.features, query_offsets=ds.query_offsets)

    return predict, facts


def _fit_lightgbm(spec: MethodSpec, train, valid, *, seed, metrics, monitor, threads):
    from ltr.gbdt.lightgbm import predict_booster, train_lightgbm
    from ltr.runs.scoring import evaluate_scores

    t0 = time.perf_counter()
    params = {"num_threads": int(threads), **spec.lightgbm}
    if spec.objective is not None:  # lightgbm:rank_xendcg
        params["objective"] = spec.objective
    booster, ginfo = train_lightgbm(train, valid, params, seed=seed, progress=False, **spec.gbdt)
    seconds = time.perf_counter() - t0
    ev = evaluate_scores(predict_booster(booster, valid.features), valid, [monitor])
    best, rounds = int(ginfo["best_iteration"]), int(ginfo["num_boost_round"])
    ran = len(next(iter(ginfo["evals_result"].get("valid", {}).values()), [])) or best
    facts = {"valid_best": float(ev.mean[ev.names[monitor]]), "best_iteration": best, "num_boost_round": rounds,
             "rounds_run": ran, "hit_cap": best == rounds, "curve": [float(ev.mean[ev.names[monitor]])],
             "seconds": seconds, "curve_seconds": [round(seconds, 4)]}

    def predict(ds):
        return predict_booster(booster, ds.features)

    return predict, facts


def _fit_engine(spec: MethodSpec, train, valid, *, seed, metrics, monitor, threads):
    """XGBoost or CatBoost (:func:`ltr.gbdt.engines.train_gbdt`), judged like LightGBM."""
    from ltr.gbdt.engines import predict_gbdt, train_gbdt
    from ltr.runs.scoring import evaluate_scores

    t0 = time.perf_counter()
    model, ginfo = train_gbdt(spec.kind, train, valid, dict(getattr(spec, spec.kind)), objective=spec.objective,
                              seed=seed, threads=int(threads), progress=False, **spec.gbdt)
    seconds = time.perf_counter() - t0
    ev = evaluate_scores(predict_gbdt(spec.kind, model, valid.features), valid, [monitor])
    best, rounds = int(ginfo["best_iteration"]), int(ginfo["num_boost_round"])
    value = float(ev.mean[ev.names[monitor]])
    facts = {"valid_best": value, "best_iteration": best, "num_boost_round": rounds, "rounds_run": int(ginfo["rounds_run"]),
             "hit_cap": best == rounds, "curve": [value], "seconds": seconds, "curve_seconds": [round(seconds, 4)]}

    def predict(ds):
        return predict_gbdt(spec.kind, model, ds.features)

    return predict, facts
