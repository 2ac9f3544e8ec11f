"""The methods of an ablation, by name, resolved into everything a cell needs to train them.

Names (``[ablation] methods``):

- ``LOSS[@K]``: any ``losses.get_loss`` name (``@K`` sets its cutoff ``k``) on the ``[model]`` scorer;
- ``MODEL/LOSS[@K]``: the same loss on another scorer, ``MODEL`` one of ``mlp``, ``linear``,
  ``attention`` (the context-aware scorer); its options come from ``[models.MODEL]`` (and the input
  normalisation from ``[model]``);
- ``lightgbm``: LightGBM lambdarank with ``[lightgbm]`` and ``[gbdt]``; ``xgboost`` (rank:ndcg) and
  ``catboost`` (YetiRank) with ``[xgboost]`` / ``[catboost]`` and ``[gbdt]``; ``ENGINE:OBJECTIVE``
  (or ``ENGINE/OBJECTIVE``) picks another objective of the engine, case-insensitive, ``_`` for ``:``
  (``xgboost:rank_pairwise``, ``catboost:QuerySoftMax``, ``lightgbm:rank_xendcg``; see
  :mod:`ltr.gbdt.engines`);
- the name of a ``[variants.NAME]`` table, which sets ``method`` (one of the names above) and may
  override ``model``, ``train``, ``loss``, ``lightgbm``, ``xgboost``, ``catboost`` and ``gbdt`` settings, average a seed
  ensemble (``ensemble = N``) and give a search space (``tune = {"train.lr" = [...], ...}``);
- the name of a blend variant, ``[variants.NAME] blend = ["lightgbm", "attention/softmax"]``: each
  member (a method name or a non-blend variant) is trained in the cell as if it were the cell's
  method (its own tuning and ensemble, the same seed, so the same model as its own cell), and the
  members' scores are combined with the weights that maximise the monitored metric on the cell's
  validation split (:func:`ltr.models.blend.fit_weights`: per-query z-scores, non-negative weights
  summing to 1), or with ``weights = "equal"`` 1/M each, or ``weights = "cv"`` (the searched weights
  shrunk toward equal ones by cross-validation over the validation queries; the default), or
  ``weights = "held-out"`` (cv's blend when it beats the best member alone on held-out validation
  queries, else that member); the test split is scored with those weights.

Tuning (``[ablation] tuning_budget = N``): a method's candidates are the combinations of its
``tune`` lists, shuffled with a fixed seed (0, the same for every cell) and cut to the first N; each
is trained on the training split and the one with the best validation value of the primary metric
is kept (ties: the earlier candidate). Every method gets the same N (fewer only if its grid is
smaller); a method without ``tune`` trains its one configuration.

>>> split_method("attention/softmax@10"), split_method("lightgbm"), split_engine("catboost/querysoftmax")
(('attention', 'softmax', 10), (None, 'lightgbm', None), ('catboost', 'QuerySoftMax'))
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
import re
from dataclasses import dataclass, field
from typing import Any

from ltr.base.errors import LtrError

__all__ = ["MODEL_NAMES", "VARIANT_KEYS", "TUNE_SECTIONS", "MethodSpec", "split_method", "split_engine", "known_losses",
           "check_variant", "resolve_method", "tuning_candidates", "with_overrides"]

MODEL_NAMES = ("mlp", "linear", "attention")
ENGINE_NAMES = ("lightgbm", "xgboost", "catboost")  # = ltr.gbdt.engines.ENGINES
VARIANT_KEYS = ("method", "model", "train", "loss", "lightgbm", "xgboost", "catboost", "gbdt", "ensemble", "tune", "blend")
TUNE_SECTIONS = ("model", "train", "loss", "lightgbm", "xgboost", "catboost", "gbdt")
_NAME_RE = re.compile(r"^(?:([a-z_0-9]+)/)?([a-z_0-9]+?)(?:@(\d+))?$")
_ENGINE_RE = re.compile(r"^(lightgbm|xgboost|catboost)(?:[:/]([A-Za-z_:]+))?$")


def split_engine(name: str, *, where: str = "config") -> tuple[str, str | None] | None:
    """``"ENGINE[:OBJECTIVE]"`` -> ``(engine, objective or None)``; None when ``name`` names no engine."""
    m = _ENGINE_RE.match(str(name))
    if not m:
        return None
    if m.group(2) is None:
        return m.group(1), None
    from ltr.gbdt.engines import resolve_objective

    try:
        return m.group(1), resolve_objective(m.group(1), m.group(2))
    except LtrError as exc:
        raise LtrError(f"{where}: method {name!r}: {exc}") from None


def known_losses() -> tuple[str, ...]:
    """Every loss name of the ``losses`` registry."""
    from losses.registry import loss_names

    return tuple(loss_names())


def split_method(name: str, *, where: str = "config") -> tuple[str | None, str, int | None]:
    """``"[MODEL/]LOSS[@K]"`` or ``"ENGINE[:OBJECTIVE]"`` -> ``(model or None, loss or engine, K or None)``."""
    engine = split_engine(name, where=where)
    if engine is not None:
        return None, engine[0], None
    m = _NAME_RE.match(str(name))
    valid = known_losses() + ("lightgbm",)
    if not m or m.group(2) not in valid or (m.group(1) is not None and m.group(1) not in MODEL_NAMES):
        raise LtrError(f"{where}: unknown method {name!r}; use LOSS, LOSS@K, MODEL/LOSS[@K] (MODEL: "
                       f"{', '.join(MODEL_NAMES)}), lightgbm, xgboost, catboost (ENGINE:OBJECTIVE) or a [variants] name; "
                       f"losses: {', '.join(valid[:-1])}")
    model, base, k = m.group(1), m.group(2), m.group(3)
    if base == "lightgbm" and (model is not None or k is not None):
        raise LtrError(f"{where}: method {name!r}: lightgbm takes no model and no cutoff @K")
    if k is not None and int(k) < 1:
        raise LtrError(f"{where}: method {name!r}: the cutoff @K must be >= 1")
    return model, base, (int(k) if k is not None else None)


@dataclass(frozen=True)
class MethodSpec:
    """A method resolved against a configuration: what one cell trains (before tuning)."""

    name: str
    kind: str  # "neural", a GBDT engine ("lightgbm", "xgboost", "catboost") or "blend"
    loss: str | None = None
    loss_options: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    lightgbm: dict = field(default_factory=dict)
    gbdt: dict = field(default_factory=dict)
    ensemble: int = 1
    tune: dict = field(default_factory=dict)
    objective: str | None = None  # a GBDT engine's objective (None: the engine's default)
    xgboost: dict = field(default_factory=dict)
    catboost: dict = field(default_factory=dict)
    members: tuple = ()  # a blend's member MethodSpecs
    blend_weights: str | None = None  # a blend's weights rule (ltr.models.blend.WEIGHT_RULES), set by resolve_method

    def as_dict(self) -> dict:
        """The fields; the engine and blend fields only when set (a fingerprint of an older spec is unchanged)."""
        d = dataclasses.asdict(self)
        optional = ("objective", "xgboost", "catboost", "members", "blend_weights")
        return {k: v for k, v in d.items() if k not in optional or v}


def check_variant(name: str, variant: Any, *, where: str, variants: dict | None = None) -> None:
    """Refuse a malformed ``[variants.NAME]`` table with a message naming it (``variants``: all of
    them, to check a blend's members)."""
    if isinstance(variant, dict) and "blend" in variant:
        return _check_blend(name, variant, where=where, variants=variants or {})
    where = f"{where} [variants.{name}]"
    if not isinstance(variant, dict) or "method" not in variant:
        raise LtrError(f"{where}: a variant is a table with at least method = \"LOSS\", \"MODEL/LOSS@K\" or an engine (\"lightgbm\", \"xgboost:rank_ndcg\")")
    unknown = sorted(set(variant) - set(VARIANT_KEYS))
    if unknown:
        raise LtrError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(VARIANT_KEYS)})")
    split_method(str(variant["method"]), where=where)
    for key in ("model", "train", "loss", "lightgbm", "xgboost", "catboost", "gbdt", "tune"):
        if not isinstance(variant.get(key, {}), dict):
            raise LtrError(f"{where}: {key} must be a table")
    ensemble = variant.get("ensemble", 1)
    if not isinstance(ensemble, int) or ensemble < 1:
        raise LtrError(f"{where}: ensemble must be a whole number >= 1, got {ensemble!r}")
    for key, values in variant.get("tune", {}).items():
        if "." not in key or key.split(".", 1)[0] not in TUNE_SECTIONS:
            raise LtrError(f"{where}: tune key {key!r} must be SECTION.KEY with SECTION one of {', '.join(TUNE_SECTIONS)}")
        if not isinstance(values, list) or not values:
            raise LtrError(f"{where}: tune {key!r} must be a non-empty list of values")


def _check_blend(name: str, variant: dict, *, where: str, variants: dict) -> None:
    """A blend variant: ``blend = [two or more distinct method or variant names]``, optionally
    ``weights = "cv"`` (the default, :data:`ltr.models.blend.DEFAULT_WEIGHT_RULE`), ``"held-out"``, ``"search"``
    or ``"equal"``, and nothing else."""
    from ltr.models.blend import DEFAULT_WEIGHT_RULE, WEIGHT_RULES

    where = f"{where} [variants.{name}]"
    extra = sorted(set(variant) - {"blend", "weights"})
    if extra:
        raise LtrError(f"{where}: a blend variant takes only blend = [METHOD, ...] and weights = \"search\", "
                       f"\"equal\" or \"cv\" (its members carry the settings), not {extra[0]!r}")
    if variant.get("weights", DEFAULT_WEIGHT_RULE) not in WEIGHT_RULES:
        raise LtrError(f"{where}: weights must be one of {', '.join(map(repr, WEIGHT_RULES))}, got {variant['weights']!r}")
    members = variant["blend"]
    if not isinstance(members, list) or len(members) < 2 or not all(isinstance(m, str) for m in members):
        raise LtrError(f"{where}: blend must list two or more method names, got {members!r}")
    if len(set(members)) != len(members):
        raise LtrError(f"{where}: blend lists a member twice: {members}")
    for m in members:
        if m in variants:
            if isinstance(variants[m], dict) and "blend" in variants[m]:
                raise LtrError(f"{where}: member {m!r} is itself a blend; list its members instead")
        else:
            split_method(m, where=f"{where} blend member")


def resolve_method(name: str, config) -> MethodSpec:
    """The :class:`MethodSpec` of method ``name`` under an :class:`~ltr.study.ablation.AblationConfig`."""
    variant = dict(config.variants.get(name, {}))
    if "blend" in variant:
        from ltr.models.blend import DEFAULT_WEIGHT_RULE

        # the rule is written into the spec, so a cell fitted under an earlier default (None in its
        # fingerprint) is not taken for one fitted under this one
        return MethodSpec(name, "blend", members=tuple(resolve_method(m, config) for m in variant["blend"]),
                          blend_weights=variant.get("weights", DEFAULT_WEIGHT_RULE))
    model_name, base, k = split_method(variant.get("method", name), where=config.source)
    common = {"ensemble": int(variant.get("ensemble", 1)), "tune": dict(variant.get("tune", {}))}
    if base in ENGINE_NAMES:
        objective = split_engine(variant.get("method", name), where=config.source)[1]
        params = {**getattr(config, base, {}), **variant.get(base, {})}
        return MethodSpec(name, base, gbdt={**config.gbdt, **variant.get("gbdt", {})}, objective=objective,
                          **{base: params}, **common)
    model = copy.deepcopy(dict(config.model))
    if model_name is not None and model_name != model.get("type", "mlp"):
        model = {"type": model_name, "normalize": model.get("normalize", "auto"),
                 **copy.deepcopy(config.models.get(model_name, {}))}
    model.update(variant.get("model", {}))
    loss = {**config.loss_options.get(name, {}), **variant.get("loss", {})}
    if k is not None:
        loss["k"] = k
    return MethodSpec(name, "neural", loss=base, loss_options=loss, model=model,
                      train={**config.train, **variant.get("train", {})}, **common)


def tuning_candidates(spec: MethodSpec, budget: int) -> list[dict]:
    """The first ``budget`` combinations of the tune grid in a fixed shuffled order (``[{}]`` without one).

    >>> spec = MethodSpec("m", "neural", tune={"train.lr": [0.1, 0.01], "model.width": [8, 16, 32]})
    >>> len(tuning_candidates(spec, 4)), len(tuning_candidates(spec, 100))
    (4, 6)
    """
    if not spec.tune:
        return [{}]
    keys = sorted(spec.tune)
    grid = [dict(zip(keys, values)) for values in itertools.product(*(spec.tune[k] for k in keys))]
    random.Random(0).shuffle(grid)
    return grid[: max(1, int(budget))]


def with_overrides(spec: MethodSpec, overrides: dict) -> MethodSpec:
    """A copy of ``spec`` with ``{"section.key": value}`` applied (the settings of one candidate).

    >>> with_overrides(MethodSpec("m", "neural", train={"lr": 0.1}), {"train.lr": 0.01}).train
    {'lr': 0.01}
    """
    parts = {s: copy.deepcopy(getattr(spec, s)) for s in TUNE_SECTIONS if s != "loss"}
    parts["loss_options"] = copy.deepcopy(spec.loss_options)
    for key, value in overrides.items():
        section, sub = key.split(".", 1)
        parts["loss_options" if section == "loss" else section][sub] = value
    return dataclasses.replace(spec, **parts)
