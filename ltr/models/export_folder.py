"""Any model folder as one serving file: ``ltr export``.

Every kind of model folder exports to ONNX with one interface, ``features [B, L, F] float32`` and
``mask [B, L] bool`` -> ``scores [B, L] float32`` (0 on padding; B and L dynamic):

- a neural run (``ltr train``): :func:`ltr.models.export.export_onnx` (TorchScript too:
  :func:`ltr.models.export.export_torchscript`);
- a GBDT run (``ltr gbdt``, LightGBM, XGBoost or CatBoost): the engine's converter
  (:mod:`ltr.models.onnx_trees`) inside the serving graph (:func:`ltr.models.onnx_graph.serving_model`);
- a blend (``ltr blend``): its members' graphs, the per-query standardisation and the weights in one
  graph (:func:`ltr.models.onnx_graph.blend_model`); each list of a batch is one query. Members must
  share the blend's feature count and names (a blend of members trained on other features is refused).

Each graph is checked before it is written: onnxruntime's scores of random padded batches must equal
the folder's own scorer (:func:`ltr.models.folder.load_scorer`, what ``ltr predict`` runs) to
``1e-5 * (1 + |score|)``. Beside the file, ``<file>.json`` (:func:`serving_facts`) states the interface,
the feature count and names, the model kind and the toolkit's version.

Features: ``ltr predict`` refuses NaN and infinite features where it reads them (each reader names
the row); the graph scores whatever it is given, so a server checks its inputs itself. A padded slot's
features are never read into a score.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ltr.base.errors import LtrError

__all__ = ["SERVING_FORMAT", "folder_kind", "folder_graph", "export_folder", "serving_facts", "facts_path"]

SERVING_FORMAT = "ltr-serving-1"
GBDT_KINDS = ("lightgbm", "xgboost", "catboost")


def folder_kind(folder: Path, option: str = "--model") -> str:
    """``"blend"``, ``"neural"``, or the GBDT engine of a model folder."""
    from ltr.base.checks import read_json_object

    if (folder / "blend.json").is_file():
        return "blend"
    if not (folder / "model.json").is_file():
        raise LtrError(f"{option} {folder}: no model.json or blend.json (not a model folder written by ltr train, ltr gbdt or ltr blend)")
    kind = read_json_object(folder / "model.json").get("type")
    return kind if kind in GBDT_KINDS else "neural"


def _needs(*modules: str) -> None:
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise LtrError(f"ltr export --format onnx needs {module}: pip install 'ltr[export]'") from None


def _neural_graph(folder: Path):
    import onnx

    from ltr.models.export import export_onnx
    from ltr.models.onnx_trees import OPSET
    from ltr.train.models import load_model

    _needs("onnxscript")
    with tempfile.TemporaryDirectory() as tmp:
        export_onnx(load_model(folder), Path(tmp) / "member.onnx", opset=OPSET)
        return onnx.load(str(Path(tmp) / "member.onnx"))


def _gbdt_graph(folder: Path, engine: str):
    from ltr.gbdt.engines import load_gbdt
    from ltr.models.onnx_graph import serving_model
    from ltr.models.onnx_trees import tree_rows_model

    model, meta = load_gbdt(folder, engine)
    n_features = int(meta["n_features"])
    return serving_model(tree_rows_model(engine, model, n_features), n_features, name=f"ltr_{engine}")


def _member_check(folder: Path, doc: dict, k: int, member: Path, option: str) -> None:
    """A member trained on other features than the blend's: refused, naming both."""
    from ltr.models.folder import load_scorer, model_feature_names

    _, n_features = load_scorer(member, "cpu", f"{option} {folder}: member {k}")
    if n_features != doc.get("n_features"):
        raise LtrError(f"{option} {folder}: member {k} ({member}) takes {n_features} features, the blend "
                       f"{doc.get('n_features')}; a blend's graph needs one feature layout: blend members trained on the same features")
    names, blend_names = model_feature_names(member), doc.get("feature_names")
    if names is not None and blend_names is not None and list(names) != list(blend_names):
        j = next((j for j, (a, b) in enumerate(zip(names, blend_names)) if a != b), min(len(names), len(blend_names)))
        raise LtrError(f"{option} {folder}: member {k} ({member}) was trained on other feature names than the blend "
                       f"(feature {j}: {names[j]!r} vs {blend_names[j]!r}); blend members trained on the same features")


def folder_graph(folder: Path, option: str = "--model"):
    """``(onnx.ModelProto, kind, members)`` of a model folder; ``members``: a blend's ``[(path, kind, weight)]``."""
    kind = folder_kind(folder, option)
    if kind == "neural":
        return _neural_graph(folder), kind, []
    if kind in GBDT_KINDS:
        return _gbdt_graph(folder, kind), kind, []
    from ltr.models.blend import read_blend
    from ltr.models.onnx_graph import blend_model

    doc = read_blend(folder)
    graphs, members = [], []
    for k, (member, entry) in enumerate(zip(doc["member_folders"], doc["members"])):
        if (member / "blend.json").exists():
            raise LtrError(f"{option} {folder}: member {k} ({member}) is itself a blend; blend its members instead")
        _member_check(folder, doc, k, member, option)
        graph, member_kind, _ = folder_graph(member, f"{option} {folder}: member {k}")
        graphs.append(graph)
        members.append({"path": entry["path"], "kind": member_kind, "weight": doc["weights"][k]})
    return blend_model(graphs, doc["weights"], int(doc["n_features"])), kind, members


def facts_path(out: str | os.PathLike) -> Path:
    """Where the facts of an exported file go: ``<file>.json`` beside it."""
    return Path(f"{out}.json")


def serving_facts(folder: Path, out, kind: str, n_features: int, info: dict[str, Any], members=()) -> dict[str, Any]:
    """What ``<file>.json`` holds: the interface, the features, the model and the toolkit's version."""
    import ltr
    from ltr.models.folder import model_feature_names

    names = model_feature_names(folder)
    facts = {
        "format": SERVING_FORMAT, "file": Path(out).name, "graph_format": info["format"], "kind": kind, "model": str(folder),
        "inputs": {"features": {"dtype": "float32", "shape": ["batch", "list_length", int(n_features)],
                                "meaning": "raw features, the data file's columns (feature_names order when named); "
                                           "any normalisation is inside the graph"},
                   "mask": {"dtype": "bool", "shape": ["batch", "list_length"], "meaning": "True on real items"}},
        "outputs": {"scores": {"dtype": "float32", "shape": ["batch", "list_length"], "meaning": "score of each item; 0 on padding"}},
        "n_features": int(n_features), "feature_names": None if names is None else list(names),
        "nan_features": "ltr predict refuses NaN and infinite features when it reads the data; the graph does not check them",
        "ltr_version": ltr.__version__,
        **{k: info[k] for k in ("exporter", "opset", "max_abs_difference") if k in info},
    }
    if kind == "blend":
        facts["one_list_is_one_query"] = True  # the standardisation runs over each list
        facts["members"] = list(members)
    return facts


def _write_graph(folder: Path, out, option: str) -> tuple[dict[str, Any], str, list]:
    """A GBDT's or a blend's graph, checked against the folder's scorer in onnxruntime, then written."""
    import onnx
    import onnxruntime as ort

    from ltr.base.io_utils import atomic_path
    from ltr.models.folder import load_scorer
    from ltr.models.onnx_graph import graph_opset, verify_graph

    graph, kind, members = folder_graph(folder, option)
    score, n_features = load_scorer(folder, "cpu", option)
    with atomic_path(Path(out), suffix=".onnx") as tmp:
        onnx.save(graph, str(tmp))
        session = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
        worst = verify_graph(session, score, n_features, str(out))
    exporter = "onnxmltools" if kind in ("lightgbm", "xgboost") else ("CatBoost's own ONNX export" if kind == "catboost" else "the members' graphs joined")
    info = {"format": "onnx", "path": str(out), "exporter": exporter, "opset": graph_opset(graph), "max_abs_difference": worst}
    return info, n_features, members


def export_folder(folder: str | os.PathLike, out: str | os.PathLike, fmt: str, option: str = "--model") -> dict[str, Any]:
    """Write the model of ``folder`` (any kind) as ``fmt`` (``onnx`` or ``torchscript``) to ``out``, and
    its facts to ``<out>.json``; returns what was done (module docstring)."""
    import json

    from ltr.base.io_utils import atomic_write_json
    from ltr.models.export import export_onnx, export_torchscript

    folder = Path(folder)
    kind = folder_kind(folder, option)
    if fmt not in ("onnx", "torchscript"):
        raise LtrError(f"unknown export format {fmt!r}; choose onnx or torchscript")
    if fmt == "torchscript" and kind != "neural":
        raise LtrError(f"{option} {folder}: a {kind} model exports to ONNX only (--format onnx); TorchScript covers "
                       "the neural runs of ltr train")
    members: list = []
    if kind == "neural":
        from ltr.train.models import load_model

        if fmt == "onnx":
            _needs("onnx", "onnxruntime", "onnxscript")
        model = load_model(folder)
        meta = {"ltr.model": json.loads((folder / "model.json").read_text())}
        info = (export_onnx if fmt == "onnx" else export_torchscript)(model, out, metadata=meta)
        n_features = int(model.n_features)
    else:
        _needs("onnx", "onnxruntime")
        info, n_features, members = _write_graph(folder, out, option)
    facts = serving_facts(folder, out, kind, n_features, info, members)
    atomic_write_json(facts_path(out), facts)
    return {**info, "kind": kind, "facts": str(facts_path(out))}
