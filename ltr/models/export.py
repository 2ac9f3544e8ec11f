"""Export a trained neural scorer for serving: ONNX (onnxruntime, any ONNX runtime) or TorchScript.

The exported graph has one signature for every scorer::

    features [B, L, F] float32, mask [B, L] bool  ->  scores [B, L] float32

with dynamic batch (``B``) and list-length (``L``) axes: one request may carry one query of any length
(``B = 1``) or many padded queries. ``mask`` is True on real items; padded slots score 0. The feature
normalisation fitted on the training split (:class:`ltr.train.models.FeatureTransform`) is part of
the model, so the graph takes raw features, exactly the columns of the data file.

Any ``nn.Module`` scorer is exported the same way (:class:`ServingScorer`): one whose ``forward``
takes ``mask`` (the list-aware kind, which looks across the items of a list) is called with
``(features, mask=mask)``; a pointwise one that maps ``[N, F]`` to ``[N]`` gets the rows of every list
flattened. Nothing here knows the architecture.

ONNX goes through ``torch.onnx.export``'s ``torch.export``-based path (``dynamo=True``, dynamic shapes);
a model that path cannot capture falls back to the TorchScript-based exporter with ``dynamic_axes``.
TorchScript goes through ``torch.jit.trace``, checked on a second input of another shape. PyTorch
keeps TorchScript in maintenance only; ONNX is the format to prefer for serving.

Every export is verified before it is written: the exported model and the eager model score two random
padded batches of different shapes, and they must agree to ``atol + rtol * |score|`` (1e-5 each).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_path

__all__ = ["FORMATS", "ServingScorer", "export_model", "export_onnx", "export_torchscript", "verify_export"]

FORMATS = ("onnx", "torchscript")
INPUT_NAMES = ("features", "mask")
OUTPUT_NAME = "scores"
TOLERANCE = 1e-5


class ServingScorer(nn.Module):
    """``(features [B, L, F], mask [B, L]) -> scores [B, L]`` around any scorer (module docstring)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.takes_mask = "mask" in inspect.signature(model.forward).parameters

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.takes_mask:
            scores = self.model(features, mask=mask)
        else:
            flat = features.reshape(-1, features.shape[-1])
            scores = self.model(flat).reshape(mask.shape)
        return torch.where(mask, scores, torch.zeros_like(scores))


def _example(n_features: int, batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random padded batch: features of mixed scale (log1p and standardisation both matter), and a
    mask whose first list is full and whose other lists are cut at random lengths >= 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, n_features, generator=g) * torch.exp(2 * torch.rand(n_features, generator=g))
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return x * mask[..., None], mask


def verify_export(run: Callable[[np.ndarray, np.ndarray], np.ndarray], wrapper: ServingScorer, n_features: int, what: str) -> float:
    """Score two padded batches of different shapes with ``run`` and with the eager model; raise
    :class:`LtrError` if any real item differs by more than the tolerance. Returns the largest difference."""
    worst = 0.0
    for batch, length, seed in ((3, 7, 1), (1, 19, 2)):
        x, mask = _example(n_features, batch, length, seed)
        with torch.no_grad():
            expected = wrapper(x, mask).numpy()
        got = np.asarray(run(x.numpy(), mask.numpy()))
        if got.shape != expected.shape:
            raise LtrError(f"{what}: exported model returned shape {got.shape} for input [{batch}, {length}, {n_features}], expected {expected.shape}")
        m = mask.numpy()
        diff = np.abs(got[m] - expected[m])
        if np.any(diff > TOLERANCE + TOLERANCE * np.abs(expected[m])):
            raise LtrError(f"{what}: exported model differs from the trained one by up to {diff.max():.3g} "
                           f"on a [{batch}, {length}, {n_features}] input; not written")
        worst = max(worst, float(diff.max(initial=0.0)))
    return worst


def _prepared(model: nn.Module) -> tuple[ServingScorer, int]:
    n_features = getattr(model, "n_features", None)
    if n_features is None:
        raise LtrError(f"cannot export a {type(model).__name__} without an n_features attribute (its input width)")
    wrapper = ServingScorer(model.cpu().float().eval()).eval()
    return wrapper, int(n_features)


@contextlib.contextmanager
def _quiet():
    """Silence the exporters' deprecation, tracer and registration notes (not the user's business)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _onnx_dynamo(wrapper, example, path: Path, opset: int | None) -> None:
    batch, length = torch.export.Dim("batch"), torch.export.Dim("list_length")
    shapes = {"features": {0: batch, 1: length}, "mask": {0: batch, 1: length}}
    torch.onnx.export(wrapper, example, str(path), dynamo=True, dynamic_shapes=shapes, input_names=list(INPUT_NAMES),
                      output_names=[OUTPUT_NAME], opset_version=opset, external_data=False, verbose=False)


def _onnx_legacy(wrapper, example, path: Path, opset: int | None) -> None:
    axes = {name: {0: "batch", 1: "list_length"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
    torch.onnx.export(wrapper, example, str(path), dynamo=False, dynamic_axes=axes, input_names=list(INPUT_NAMES),
                      output_names=[OUTPUT_NAME], opset_version=opset or 17)


def export_onnx(model: nn.Module, path: str | os.PathLike, *, metadata: dict[str, Any] | None = None, opset: int | None = None) -> dict[str, Any]:
    """Write ``model`` as an ONNX file (module docstring); returns what was done (exporter, check)."""
    import onnx
    import onnxruntime as ort

    wrapper, n_features = _prepared(model)
    example = _example(n_features, 2, 3, 0)
    path = Path(path)
    with atomic_path(path, suffix=".onnx") as tmp, _quiet():
        try:
            _onnx_dynamo(wrapper, example, tmp, opset)
            exporter = "torch.export"
        except Exception as exc:  # noqa: BLE001 - any capture failure: try the other exporter
            first_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            try:
                _onnx_legacy(wrapper, example, tmp, opset)
            except Exception as exc2:  # noqa: BLE001
                raise LtrError(f"ONNX export failed with both exporters: {first_error}; then {type(exc2).__name__}: {exc2}") from None
            exporter = "torchscript-based (torch.export could not capture the model)"
        proto = onnx.load(str(tmp))
        meta = {"ltr.inputs": "features [B, L, F] float32 (raw), mask [B, L] bool", "ltr.outputs": "scores [B, L] float32 (0 on padding)",
                "ltr.n_features": str(n_features), **{k: json.dumps(v) if not isinstance(v, str) else v for k, v in (metadata or {}).items()}}
        for key, value in meta.items():
            proto.metadata_props.add(key=key, value=value)
        onnx.checker.check_model(proto)
        onnx.save(proto, str(tmp))
        session = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
        worst = verify_export(lambda x, m: session.run([OUTPUT_NAME], {"features": x, "mask": m})[0], wrapper, n_features, str(path))
    return {"format": "onnx", "path": str(path), "exporter": exporter, "opset": _opset(proto), "max_abs_difference": worst}


def _opset(proto) -> int:
    return int(next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0))


def export_torchscript(model: nn.Module, path: str | os.PathLike, *, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``model`` as a TorchScript file (``torch.jit.load(path)(features, mask)``)."""
    wrapper, n_features = _prepared(model)
    example, check = _example(n_features, 2, 3, 0), _example(n_features, 4, 11, 3)
    path = Path(path)
    extra = {"ltr.json": json.dumps({"n_features": n_features, **(metadata or {})})}
    with atomic_path(path, suffix=".pt") as tmp, _quiet():
        try:
            traced = torch.jit.trace(wrapper, example, check_inputs=[check], check_tolerance=TOLERANCE)
        except Exception as exc:  # noqa: BLE001 - tracing failures come in many types
            raise LtrError(f"TorchScript export failed (torch.jit.trace): {type(exc).__name__}: {exc}") from None
        torch.jit.save(traced, str(tmp), _extra_files=extra)
        loaded = torch.jit.load(str(tmp))
        with torch.no_grad():
            worst = verify_export(lambda x, m: loaded(torch.from_numpy(x), torch.from_numpy(m)).numpy(), wrapper, n_features, str(path))
    return {"format": "torchscript", "path": str(path), "exporter": "torch.jit.trace", "max_abs_difference": worst}


def export_model(model: nn.Module, path: str | os.PathLike, fmt: str, *, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`export_onnx` or :func:`export_torchscript` by name."""
    if fmt == "onnx":
        return export_onnx(model, path, metadata=metadata)
    if fmt == "torchscript":
        return export_torchscript(model, path, metadata=metadata)
    raise LtrError(f"unknown export format {fmt!r}; choose {' or '.join(FORMATS)}")
