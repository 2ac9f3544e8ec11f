"""Model folders of either kind (a torch scorer from ``ltr train``, a LightGBM booster from ``ltr gbdt``)
behind one function that returns a scoring callable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ltr.errors import LtrError

__all__ = ["load_scorer", "model_feature_names"]


def load_scorer(folder: str | os.PathLike, device: str = "cpu"):
    """Return ``score(features [N, F]) -> np.ndarray [N]`` and the model's feature count."""
    folder = Path(folder)
    if not folder.is_dir():
        raise LtrError(f"--model {folder}: not a folder")
    try:
        meta = json.loads((folder / "model.json").read_text())
    except FileNotFoundError:
        raise LtrError(f"--model {folder}: no model.json (not a run folder written by ltr train / ltr gbdt)") from None
    except json.JSONDecodeError as exc:
        raise LtrError(f"{folder / 'model.json'}: invalid JSON: {exc}") from None
    if meta.get("type") == "lightgbm":
        from ltr.train.gbdt import load_booster, predict_booster

        from ltr.data.store import row_blocks

        booster, meta = load_booster(folder)

        def score(x):  # in blocks: a memory-mapped store is never read whole
            return np.concatenate([predict_booster(booster, block) for _, block in row_blocks(x, 65536)] or [np.zeros(0)])

        return score, int(meta["n_features"])
    from ltr.train.models import load_model
    from ltr.train.trainer import predict_scores, resolve_device

    dev = resolve_device(device)
    model = load_model(folder).to(dev)
    return (lambda x: predict_scores(model, x, device=dev)), model.n_features


def model_feature_names(folder: str | os.PathLike) -> tuple[str, ...] | None:
    """The feature names a model folder's ``model.json`` records (from the training data), or None."""
    try:
        names = json.loads((Path(folder) / "model.json").read_text()).get("feature_names")
    except (OSError, ValueError, AttributeError):
        return None
    return None if names is None else tuple(str(n) for n in names)
