"""Model folders of every kind (a torch scorer from ``ltr train``, a LightGBM booster from ``ltr gbdt``,
a blend of such folders from ``ltr blend``) behind one function that returns a scoring callable."""

from __future__ import annotations

import os

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["load_scorer", "check_width", "model_feature_names"]


def load_scorer(folder: str | os.PathLike, device: str = "cpu", option: str = "--model"):
    """Return ``score(features [N, F], query_offsets=None) -> np.ndarray [N]`` and the model's feature count.

    ``query_offsets`` is needed by listwise models (the context-aware scorer scores whole queries)
    and by blends (each member's scores are standardised within each query): for them
    ``score.whole_queries`` is True (a caller scoring in blocks gives whole queries); False for
    GBDTs and pointwise neural models, which score any run of rows, 65,536 at a time.
    ``option`` names the command-line option in messages (``--model``, ``--ranker``...).
    """
    from ltr.base.checks import input_folder, read_json_object

    folder = input_folder(folder, option)
    if (folder / "blend.json").exists():
        return _load_blend(folder, device, option)
    if not (folder / "model.json").exists():
        raise LtrError(f"{option} {folder}: no model.json (not a run folder written by ltr train / ltr gbdt)")
    meta = read_json_object(folder / "model.json")
    if meta.get("type") in ("lightgbm", "xgboost", "catboost"):  # ltr.gbdt.engines.ENGINES
        from ltr.data.store import row_blocks
        from ltr.gbdt.engines import load_gbdt, predict_gbdt

        engine = meta["type"]
        booster, meta = load_gbdt(folder, engine)

        def score(x, query_offsets=None):  # in blocks: a memory-mapped store is never read whole
            return np.concatenate([predict_gbdt(engine, booster, block) for _, block in row_blocks(x, 65536)] or [np.zeros(0)])

        score.whole_queries = False  # type: ignore[attr-defined]  # row by row: any rows, the same scores
        return score, int(meta["n_features"])
    from ltr.train.models import load_model
    from ltr.train.trainer import predict_scores, resolve_device

    dev = resolve_device(device)
    model = load_model(folder).to(dev)

    def neural(x, query_offsets=None):
        return predict_scores(model, x, query_offsets=query_offsets, device=dev)

    neural.whole_queries = bool(getattr(model, "listwise", False))  # type: ignore[attr-defined]
    return neural, model.n_features


def _load_blend(folder, device: str, option: str):
    """A blend folder (:mod:`ltr.models.blend`): each member through :func:`load_scorer`, then combined."""
    from ltr.models.blend import blend_scorer, read_blend

    doc = read_blend(folder)
    members = []
    for k, member in enumerate(doc["member_folders"]):
        if (member / "blend.json").exists():
            raise LtrError(f"{option} {folder}: member {k} ({member}) is itself a blend; blend its members instead")
        score, n_features = load_scorer(member, device, f"{option} {folder}: member {k}")
        if n_features != doc.get("n_features"):
            raise LtrError(f"{option} {folder}: member {k} ({member}) expects {n_features} features, "
                           f"blend.json says {doc.get('n_features')}")
        members.append(score)
    return blend_scorer(members, doc["weights"]), int(doc["n_features"])


def check_width(ds, n_features: int, option: str, path) -> None:
    """Refuse data whose feature count is not the model's (a narrower file is never zero-padded:
    the missing features would silently score as 0)."""
    if ds.n_features != n_features:
        raise LtrError(f"{option} {path} has {ds.n_features} features, the model expects {n_features}")


def model_feature_names(folder: str | os.PathLike) -> tuple[str, ...] | None:
    """The feature names a model folder's ``model.json`` (a blend's ``blend.json``) records, or None."""
    import json
    from pathlib import Path

    name = "blend.json" if (Path(folder) / "blend.json").exists() else "model.json"
    try:
        names = json.loads((Path(folder) / name).read_text()).get("feature_names")
    except (OSError, ValueError, AttributeError):
        return None
    return None if not isinstance(names, list) else tuple(str(n) for n in names)
