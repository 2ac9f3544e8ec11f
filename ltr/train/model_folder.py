"""Model folders of either kind (a torch scorer from ``ltr train``, a LightGBM booster from ``ltr gbdt``)
behind one function that returns a scoring callable."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ltr.errors import LtrError

__all__ = ["load_scorer"]


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

        booster, meta = load_booster(folder)
        return (lambda x: predict_booster(booster, x)), int(meta["n_features"])
    from ltr.train.models import load_model
    from ltr.train.trainer import predict_scores, resolve_device

    dev = resolve_device(device)
    model = load_model(folder).to(dev)
    return (lambda x: predict_scores(model, x, device=dev)), model.n_features
