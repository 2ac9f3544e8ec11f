"""Scorer descriptions and files: build any scorer from its JSON description, save it, load it.

Models are saved as a state dict (``model.pt``, loadable with ``torch.load(weights_only=True)``) plus
a JSON description (``model.json``) from which :func:`build_model` rebuilds the architecture; no
pickled Python objects are involved. ``model.json`` also lists the input features' names when the
training data had them (``feature_names``, from Parquet columns), so a model says what it reads.

The scorers themselves live in :mod:`ltr.train.scorers` (linear, MLP, the input transform),
:mod:`ltr.train.attention` and :mod:`ltr.train.ensemble`; their names are importable from here too.

>>> build_model({"type": "linear", "n_features": 2}).n_features
2
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_write_json
from ltr.train.attention import ContextAwareScorer
from ltr.train.ensemble import EnsembleScorer
from ltr.train.scorers import (
    ACTIVATIONS,
    MODEL_FILE,
    MODEL_JSON,
    MODEL_TYPES,
    FeatureTransform,
    LinearScorer,
    MaskedBatchNorm1d,
    MLPScorer,
    _Scorer,
)

__all__ = [
    "ACTIVATIONS",
    "FeatureTransform",
    "MaskedBatchNorm1d",
    "LinearScorer",
    "MLPScorer",
    "ContextAwareScorer",
    "EnsembleScorer",
    "build_model",
    "model_config",
    "MODEL_TYPES",
    "save_model",
    "load_model",
    "input_transform_report",
]


def model_config(model: nn.Module) -> dict[str, Any]:
    """JSON-able description of a scorer (architecture + normaliser kind)."""
    if not isinstance(model, _Scorer):
        raise LtrError(f"cannot describe a {type(model).__name__}; use a scorer of ltr.train ({', '.join(MODEL_TYPES)})")
    return model.config()


def build_model(config: dict[str, Any]) -> _Scorer:
    """Rebuild an (untrained) scorer from :func:`model_config`'s description.

    >>> build_model({"type": "mlp", "n_features": 3, "hidden": [4]}).hidden
    (4,)
    >>> build_model({"type": "attention", "n_features": 3, "width": 8, "heads": 2}).listwise
    True
    """
    from ltr.base.checks import COUNT
    from ltr.train.config import MODEL_RULES

    cfg = dict(config)
    kind = cfg.pop("type", None)
    norm = cfg.pop("normalizer", None)
    names = cfg.pop("feature_names", None)
    if kind != "ensemble":  # the rules of [model] in TOML: "hidden": "xy" is refused by name, not by a ValueError
        for key, value in cfg.items():
            rule = COUNT if key == "n_features" else MODEL_RULES.get(key)
            if rule is not None:
                rule.check(value, key)
    try:
        if kind == "linear":
            model: _Scorer = LinearScorer(**cfg)
        elif kind == "mlp":
            model = MLPScorer(**cfg)
        elif kind == "attention":
            model = ContextAwareScorer(**cfg)
        elif kind == "ensemble":
            members = cfg.pop("members", None)
            width = cfg.pop("n_features", None)
            if not isinstance(members, list) or not members or cfg or not all(isinstance(m, dict) for m in members):
                raise LtrError(f"an ensemble needs a non-empty list of members and nothing else, got {config}")
            model = EnsembleScorer([build_model(m) for m in members])
            if width is not None and width != model.n_features:
                raise LtrError(f"the ensemble says n_features {width}, its members take {model.n_features}")
            return model if names is None else model.set_feature_names(names)
        else:
            raise LtrError(f"unknown model type {kind!r}; choose one of {', '.join(MODEL_TYPES)}")
    except (TypeError, ValueError) as exc:
        raise LtrError(f"bad model configuration {config}: {exc}") from None
    if norm is not None:
        model.set_normalizer(FeatureTransform(model.n_features, norm))
    return model.set_feature_names(names)


def save_model(model: nn.Module, folder: str | os.PathLike) -> Path:
    """Write ``model.pt`` (state dict) and ``model.json`` (architecture) into ``folder``, atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    from ltr.train.checkpoint import save_torch

    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    save_torch(state, folder / MODEL_FILE)  # a failed write is an OSError naming the file
    atomic_write_json(folder / MODEL_JSON, model_config(model))
    return folder


def load_model(folder: str | os.PathLike, map_location: str = "cpu") -> _Scorer:
    """Load a model saved by :func:`save_model` (no pickle: ``torch.load(weights_only=True)``).

    A hostile or damaged folder is an :class:`LtrError` naming the file: ``model.json`` must describe
    a model whose weights could fit in ``model.pt`` (the architecture is first built on torch's
    ``meta`` device, which allocates nothing, so an absurd width cannot exhaust memory), and
    ``model.pt`` must hold exactly its tensors.
    """
    from ltr.base.checks import input_file, read_json_object

    folder = Path(folder)
    if not (folder / MODEL_JSON).exists():
        raise LtrError(f"{folder}: no {MODEL_JSON} (not a model folder written by ltr)")
    where = folder / MODEL_JSON
    config = read_json_object(where)
    n = config.get("n_features")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LtrError(f"{where}: n_features must be a positive integer, got {n!r}")
    if not (folder / MODEL_FILE).exists():
        raise LtrError(f"{folder}: no {MODEL_FILE}")
    weights = input_file(folder / MODEL_FILE)
    try:
        with torch.device("meta"):
            probe = build_model(config)
    except LtrError as exc:
        raise LtrError(f"{where}: {exc}") from None
    n_values = sum(t.numel() for t in probe.state_dict().values())
    if 4 * n_values > weights.stat().st_size:
        raise LtrError(f"{where} describes {n_values} weights, more than {weights} ({weights.stat().st_size} bytes) "
                       "can hold: the two files do not belong together")
    try:
        state = torch.load(weights, map_location=map_location, weights_only=True)
    except Exception as exc:  # a damaged file fails in many ways (zip, unpickler, EOF); the path is what matters
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LtrError(f"{weights}: not a readable weights file ({first[:160]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise LtrError(f"{weights}: does not hold a state dict of tensors")
    model = build_model(config)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise LtrError(f"{weights}: weights do not match {MODEL_JSON}: {' '.join(str(exc).split())}") from None
    model.eval()
    return model


def input_transform_report(model: nn.Module) -> dict[str, Any] | None:
    """What the model's input transform does with each feature (None when it has none).

    ``{"kind": ..., "counts": {"log": n, "linear": n, "constant": n}, "features": [{"feature", "action",
    "center", "scale"}, ...]}``; for an ensemble, its first member's (every member fits the same
    transform on the same training split). ``ltr train`` writes it into ``summary.json`` and
    ``input_transform.json``.
    """
    first = model.members[0] if isinstance(model, EnsembleScorer) else model
    transform = getattr(first, "normalizer", None)
    if transform is None:
        return None
    features = transform.describe(getattr(first, "feature_names", None))
    counts = {a: sum(f["action"] == a for f in features) for a in ("log", "linear", "constant")}
    return {"kind": transform.kind, "counts": counts, "features": features}
