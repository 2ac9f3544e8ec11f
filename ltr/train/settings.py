"""From the ``[model]`` and ``[loss]`` tables of a run configuration to a scorer and a loss.

One place for what ``ltr train``, ``ltr tune`` and the ablation read from those tables, so that a
configuration that ``ltr tune`` writes is the one ``ltr train --config`` runs.

``[model]``: ``type`` (mlp, linear, attention), the MLP's ``hidden``, ``activation``, ``dropout``,
``batch_norm``, the context-aware scorer's ``width``, ``heads``, ``layers``, ``dropout``, every
scorer's ``input_noise`` and ``query_norm`` (auto, the MLP's default: :func:`resolve_query_norm`),
``normalize`` (auto (the default), none, standard, log1p, log1p_standard: fitted on the training
split, stored in the model) and ``ensemble`` (seeds averaged; read by ``ltr train``).
A scorer takes the keys of its own type (:data:`ARCH_KEYS`); the others are ignored for it, so one
table can hold the options of several types. ``[loss]``: ``name`` plus the loss's keyword arguments
(``losses.get_loss``).
"""

from __future__ import annotations

from typing import Any

from ltr.base.errors import LtrError
from ltr.train.config import MODEL_RULES, NORMALIZE_CHOICES

__all__ = ["MODEL_KEYS", "NORMALIZE_CHOICES", "MODEL_DEFAULTS", "DEFAULT_LOSS", "DEFAULT_ENSEMBLE", "ARCH_KEYS", "model_defaults", "build_loss",
           "build_scorer", "fit_input_transform", "resolve_query_norm"]

MODEL_KEYS = tuple(MODEL_RULES)
#: normalize "auto" and input_noise 0.1 (with the softmax loss of ltr train): chosen by issue 20's defaults
#: study, experiments/defaults_study.py (docs/experiments.md, "Defaults of ltr train and ltr gbdt")
#: query_norm "auto": see :func:`resolve_query_norm` (same study, its 0.4 part)
MODEL_DEFAULTS = {"type": "mlp", "hidden": [128, 64], "activation": "relu", "dropout": 0.0, "batch_norm": False, "normalize": "auto",
                  "input_noise": 0.1, "query_norm": "auto"}
#: ltr train's default loss (same study)
DEFAULT_LOSS = "softmax"
#: seeds averaged by ltr train and NeuralRanker for an MLP (same study: three seeds beat one on 5 of 6 data
#: sets, and make the result depend far less on the seed); other scorer types train one model
DEFAULT_ENSEMBLE = 3
ARCH_KEYS = {
    "mlp": ("hidden", "activation", "dropout", "batch_norm", "input_noise", "query_norm"),
    "linear": ("input_noise", "query_norm"),
    "attention": ("width", "heads", "layers", "dropout", "input_noise", "query_norm"),
}


def model_defaults(kind: str) -> dict[str, Any]:
    """The defaults of a ``[model]`` table of ``type = kind`` (the other types take their class defaults)."""
    return dict(MODEL_DEFAULTS) if kind == "mlp" else {"type": kind, "normalize": MODEL_DEFAULTS["normalize"]}


def resolve_query_norm(model_cfg: dict[str, Any], train_ds) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``model_cfg`` with ``query_norm = "auto"`` replaced by its choice for ``train_ds``, and the facts behind
    the choice (None when ``query_norm`` was not "auto").

    "auto" is "zscore" (each feature z-scored within its query, after the input transform) when the
    training features are already min-max normalised within each query
    (:func:`ltr.data.query_level.check_query_minmax`: LETOR 4.0's QueryLevelNorm files), else "none".
    Chosen by issue 20's defaults study (docs/experiments.md, "0.4: per-query z-scores on data normalised
    per query"): on MQ2008 the z-score gains over the input transform alone, on the other data sets at hand
    (raw features) per-query normalisation loses.
    """
    if model_cfg.get("query_norm") != "auto":
        return model_cfg, None
    from ltr.data.query_level import check_query_minmax

    check = check_query_minmax(train_ds.features, train_ds.query_offsets)
    chosen = "zscore" if check.normalised else "none"
    return {**model_cfg, "query_norm": chosen}, {"rule": "auto", "chosen": chosen, **check.as_dict()}


def build_loss(loss_cfg: dict[str, Any]):
    """``losses.get_loss(name, **rest)``; an unknown name or option is an :class:`LtrError`."""
    import losses

    cfg = dict(loss_cfg)
    name = cfg.pop("name")
    try:
        return losses.get_loss(name, **cfg)
    except (KeyError, ValueError, TypeError) as exc:
        raise LtrError(f"loss {name!r} with {cfg}: {exc}") from None


def fit_input_transform(model_cfg: dict[str, Any], train_ds):
    """The ``normalize`` input transform of a ``[model]`` table fitted on ``train_ds``'s features (in one
    streaming pass: a store stays on disk), or None for ``normalize = "none"``."""
    from ltr.train.models import FeatureTransform

    kind = model_cfg.get("normalize", "none")
    if kind not in NORMALIZE_CHOICES:
        raise LtrError(f"normalize must be one of {', '.join(NORMALIZE_CHOICES)}, got {kind!r}")
    return None if kind == "none" else FeatureTransform.fit(train_ds.features, kind)


def build_scorer(model_cfg: dict[str, Any], train_ds, transform=None):
    """The scorer of a ``[model]`` table for ``train_ds``'s features, its normaliser fitted on them.

    ``transform``: the input transform already fitted on ``train_ds`` (:func:`fit_input_transform`);
    each scorer gets its own copy. An ensemble's members share one fit this way, so the training
    data is read once, not once per member.
    """
    import copy

    from ltr.train.models import build_model

    if model_cfg.get("normalize", "none") not in NORMALIZE_CHOICES:
        raise LtrError(f"normalize must be one of {', '.join(NORMALIZE_CHOICES)}, got {model_cfg['normalize']!r}")
    model_cfg, _ = resolve_query_norm(model_cfg, train_ds)
    kind = model_cfg.get("type", "mlp")
    if kind not in ARCH_KEYS:
        raise LtrError(f"model type must be one of {', '.join(ARCH_KEYS)}, got {kind!r}")
    arch = {"type": kind, **{k: v for k, v in model_cfg.items() if k in ARCH_KEYS[kind]}}
    model = build_model({**arch, "n_features": train_ds.n_features})
    transform = copy.deepcopy(transform) if transform is not None else fit_input_transform(model_cfg, train_ds)
    if transform is not None:
        model.set_normalizer(transform)
    return model.set_feature_names(getattr(train_ds, "feature_names", None))  # written into model.json
