"""One serving graph for every model kind, built from ONNX ops (``onnx.helper``).

Every graph the toolkit writes has the neural export's interface (:mod:`ltr.models.export`)::

    features [B, L, F] float32, mask [B, L] bool  ->  scores [B, L] float32   (0 on padding)

A GBDT's rows model (:func:`ltr.models.onnx_trees.tree_rows_model`, ``[N, F] -> [N, 1]``) is wrapped
by :func:`serving_model`: ``Reshape(features, [-1, F])``, the trees, ``Reshape`` back to the mask's
shape, ``Where(mask, scores, 0)``.

A blend (:mod:`ltr.models.blend`) is :func:`blend_model`: each member's serving graph (its names
prefixed ``m<k>/``) fed the same two inputs, then, in float64 as :func:`ltr.models.blend.standardise`
computes it, each member's scores standardised within each list over the mask,

    n = sum_l mask,  mean = sum_l mask * s / n,  d = s - mean,  std = sqrt(sum_l mask * d^2 / n),
    z = d / std on real items of a list whose real scores are not all equal (max > min), else 0,

and the blend ``sum_k w_k * z_k`` in member order, cast to float32. One list of the batch is one
query, so a blend's graph scores whole queries (the padded batch's rows must not split one).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["INPUTS", "OUTPUT", "serving_model", "blend_model", "graph_opset", "run_graph", "padded", "verify_graph"]

INPUTS = ("features", "mask")
OUTPUT = "scores"


def _interface(helper, TensorProto, n_features: int):
    """The two inputs and the output of every serving graph (dynamic batch and list length)."""
    return ([helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", "list_length", n_features]),
             helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", "list_length"])],
            [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", "list_length"])])


def _opsets(models) -> dict[str, int]:
    """The opset of each domain any of ``models`` imports (the largest version)."""
    out: dict[str, int] = {}
    for model in models:
        for o in model.opset_import:
            domain = "" if o.domain == "ai.onnx" else o.domain
            out[domain] = max(out.get(domain, 0), int(o.version))
    return out


def _inlined(model, prefix: str):
    """``model`` with its local functions inlined and every name prefixed (so graphs can be joined)."""
    import onnx.compose
    import onnx.inliner

    if len(model.functions):
        model = onnx.inliner.inline_local_functions(model)
    return onnx.compose.add_prefix(model, prefix)


def _const(helper, TensorProto, name: str, value, dtype=None):
    arr = np.asarray(value, dtype=dtype)
    types = {np.dtype(np.int64): TensorProto.INT64, np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE}
    return helper.make_tensor(name, types[arr.dtype], list(arr.shape), arr.reshape(-1).tolist())


def _finish(helper, nodes, inits, inputs, outputs, opsets: dict[str, int], name: str, metadata: dict[str, str]):
    import onnx

    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
                              producer_name="ltr")
    model.ir_version = min(model.ir_version, 10)  # onnxruntime reads IR 10 and below
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    return model


def serving_model(rows_model, n_features: int, *, name: str = "ltr", metadata: dict[str, str] | None = None):
    """The serving graph (module docstring) around a rows model ``[N, F] float32 -> [N, 1] or [N]``."""
    from onnx import TensorProto, helper

    inner = _inlined(rows_model, "trees/")
    rows_in, raw = inner.graph.input[0].name, inner.graph.output[0].name
    nodes = [helper.make_node("Reshape", ["features", "flat_shape"], [rows_in])]
    nodes += list(inner.graph.node)
    nodes += [helper.make_node("Shape", ["mask"], ["mask_shape"]),
              helper.make_node("Cast", [raw], ["raw_float"], to=TensorProto.FLOAT),
              helper.make_node("Reshape", ["raw_float", "mask_shape"], ["padded"]),
              helper.make_node("Where", ["mask", "padded", "zero"], [OUTPUT])]
    inits = list(inner.graph.initializer) + [_const(helper, TensorProto, "flat_shape", [-1, n_features], np.int64),
                                             _const(helper, TensorProto, "zero", 0.0, np.float32)]
    inputs, outputs = _interface(helper, TensorProto, n_features)
    from ltr.models.onnx_trees import OPSET

    opsets = _opsets([rows_model])
    opsets[""] = max(opsets.get("", 0), OPSET)  # the wrapper's own ops (CatBoost's graph imports only ai.onnx.ml)
    return _finish(helper, nodes, inits, inputs, outputs, opsets, name, metadata or {})


def _weighted_z_nodes(helper, TensorProto, k: int, scores: str) -> tuple[list, str]:
    """Nodes computing ``w_k * z_k`` (module docstring) from member ``k``'s [B, L] scores; returns (nodes, output).

    The weight and the division by the deviation are one factor per list, ``w_k / std`` (0 for a list
    whose scores are all equal), so that the [B, L] tensors see one product: ``(d * mask) * factor``."""
    p = f"z{k}/"
    n = helper.make_node
    nodes = [
        n("Cast", [scores], [p + "s"], to=TensorProto.DOUBLE),
        n("Mul", [p + "s", "mask_d"], [p + "sm"]),  # padded slots: 0 (the graphs score them 0 already)
        n("ReduceSum", [p + "sm", "axis1"], [p + "sum"], keepdims=1),
        n("Div", [p + "sum", "count"], [p + "mean"]),
        n("Sub", [p + "s", p + "mean"], [p + "d"]),
        n("Mul", [p + "d", "mask_d"], [p + "dm"]),
        n("Mul", [p + "dm", p + "dm"], [p + "d2"]),
        n("ReduceSum", [p + "d2", "axis1"], [p + "ss"], keepdims=1),
        n("Div", [p + "ss", "count"], [p + "var"]),
        n("Sqrt", [p + "var"], [p + "std"]),
        n("Where", ["mask", p + "s", "minus_inf"], [p + "for_max"]),
        n("Where", ["mask", p + "s", "plus_inf"], [p + "for_min"]),
        n("ReduceMax", [p + "for_max", "axis1"], [p + "max"], keepdims=1),
        n("ReduceMin", [p + "for_min", "axis1"], [p + "min"], keepdims=1),
        n("Greater", [p + "max", p + "min"], [p + "varied"]),  # [B, 1]: not all equal (an empty list: -inf > inf is False)
        n("Where", [p + "varied", p + "std", "one_d"], [p + "std_safe"]),
        n("Div", [f"w{k}", p + "std_safe"], [p + "w_over_std"]),
        n("Where", [p + "varied", p + "w_over_std", "zero_d"], [p + "factor"]),
        n("Mul", [p + "dm", p + "factor"], [p + "wz"]),
    ]
    return nodes, p + "wz"


def blend_model(members: Sequence, weights: Sequence[float], n_features: int, *, name: str = "ltr_blend",
                metadata: dict[str, str] | None = None):
    """The blend's serving graph (module docstring) from its members' serving graphs, in member order."""
    from onnx import TensorProto, helper

    opsets = _opsets(members)
    mains = {int(v) for m in members for o in m.opset_import if o.domain in ("", "ai.onnx") for v in [o.version]}
    if len(mains) > 1:
        raise LtrError(f"the blend's members were exported at different ONNX opsets ({sorted(mains)}); they cannot be joined")
    nodes = [helper.make_node("Cast", ["mask"], ["mask_d"], to=TensorProto.DOUBLE),
             helper.make_node("ReduceSum", ["mask_d", "axis1"], ["n_items"], keepdims=1),
             helper.make_node("Max", ["n_items", "one_d"], ["count"])]
    inits = [_const(helper, TensorProto, "axis1", [1], np.int64), _const(helper, TensorProto, "one_d", 1.0, np.float64),
             _const(helper, TensorProto, "zero_d", 0.0, np.float64),
             _const(helper, TensorProto, "minus_inf", -np.inf, np.float64), _const(helper, TensorProto, "plus_inf", np.inf, np.float64)]
    total = None
    for k, (member, w) in enumerate(zip(members, weights)):
        inner = _inlined(member, f"m{k}/")
        nodes += [helper.make_node("Identity", [x], [f"m{k}/{x}"]) for x in INPUTS]
        nodes += list(inner.graph.node)
        inits += list(inner.graph.initializer)
        z_nodes, wz = _weighted_z_nodes(helper, TensorProto, k, f"m{k}/{OUTPUT}")
        nodes += z_nodes
        inits.append(_const(helper, TensorProto, f"w{k}", float(w), np.float64))
        if total is None:
            total = wz
        else:  # the sum in member order, as ltr.models.blend.combine adds
            nodes.append(helper.make_node("Add", [total, wz], [f"sum{k}"]))
            total = f"sum{k}"
    nodes.append(helper.make_node("Cast", [total], [OUTPUT], to=TensorProto.FLOAT))
    inputs, outputs = _interface(helper, TensorProto, n_features)
    return _finish(helper, nodes, inits, inputs, outputs, opsets, name, metadata or {})


def graph_opset(model) -> int:
    return int(next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0))


def run_graph(session, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``scores [B, L]`` of an onnxruntime session of a serving graph."""
    return session.run([OUTPUT], {"features": np.asarray(features, dtype=np.float32), "mask": np.asarray(mask, dtype=bool)})[0]


def padded(features: np.ndarray, query_offsets) -> tuple[np.ndarray, np.ndarray]:
    """Rows [N, F] of queries ``query_offsets`` as a padded batch ``([Q, L, F], mask [Q, L])``, L the longest query."""
    off = np.asarray(query_offsets, dtype=np.int64)
    lengths = np.diff(off)
    length = int(lengths.max(initial=0))
    mask = np.arange(length)[None, :] < lengths[:, None]
    batch = np.zeros((len(lengths), length, features.shape[1]), dtype=np.float32)
    batch[mask] = features
    return batch, mask


def verify_graph(session, score, n_features: int, what: str, tolerance: float = 1e-5) -> float:
    """Score random padded batches with ``session`` and with ``score(rows, query_offsets)`` (the model
    as ``ltr predict`` scores it); raise :class:`LtrError` when a real item differs by more than
    ``tolerance * (1 + |score|)``. Returns the largest difference."""
    worst = 0.0
    for queries, length, seed in ((3, 7, 1), (1, 19, 2), (5, 1, 3)):
        rng = np.random.default_rng(seed)
        lengths = rng.integers(1, length + 1, queries)
        lengths[0] = length
        off = np.concatenate([[0], np.cumsum(lengths)])
        rows = (rng.normal(size=(int(off[-1]), n_features)) * np.exp(2 * rng.random(n_features))).astype(np.float32)
        expected = np.asarray(score(rows, off), dtype=np.float64)
        batch, mask = padded(rows, off)
        got = run_graph(session, batch, mask)
        if got.shape != mask.shape:
            raise LtrError(f"{what}: the graph returned shape {got.shape} for input {list(batch.shape)}, expected {list(mask.shape)}")
        diff = np.abs(got[mask].astype(np.float64) - expected)
        if np.any(diff > tolerance * (1 + np.abs(expected))) or np.any(got[~mask] != 0):
            raise LtrError(f"{what}: the ONNX graph differs from the model by up to {diff.max():.3g} on a "
                           f"[{queries}, {length}, {n_features}] input; not written")
        worst = max(worst, float(diff.max(initial=0.0)))
    return worst
