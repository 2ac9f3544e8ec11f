"""Gain functions: how much a relevance label is worth when it is shown.

``gain_values(labels, gain)`` maps labels to gains, element-wise:

* ``"exp2"``:   g(rel) = 2^rel - 1   (Burges et al.; LightGBM, XGBoost, Rax, allRank default)
* ``"linear"``: g(rel) = rel          (trec_eval, scikit-learn, ranx ``ndcg``)
* a callable ``f(labels) -> gains`` (it receives the same kind of array it must return)
* per-item values ``item_gain`` (for example a price): these are the gains and the labels are
  only used for their shape.

The functions are array-agnostic: a numpy array in gives a float64 numpy array out; a torch tensor
in gives a floating tensor of the same dtype (float32 for integer tensors) on the same device.
torch is never imported by this module: tensors are recognised by their type's module and handled
with their own methods.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import numpy as np

__all__ = ["GAINS", "gain_values", "is_torch", "gain_name"]

GainSpec = Union[str, Callable[[Any], Any]]

GAINS = ("exp2", "linear")


def is_torch(x: Any) -> bool:
    """True when ``x`` is a torch tensor (checked without importing torch)."""
    return type(x).__module__.startswith("torch")


def _as_float(x: Any) -> Any:
    """numpy -> float64 array; torch -> floating tensor (integer/bool tensors become float32)."""
    if is_torch(x):
        return x if x.is_floating_point() else x.float()
    return np.asarray(x, dtype=np.float64)


def _like(values: Any, reference: Any) -> Any:
    """``values`` converted to the kind (numpy / torch, dtype, device) of ``reference``."""
    if is_torch(reference):
        if is_torch(values):
            return values.to(dtype=reference.dtype, device=reference.device)
        import torch  # lazy: only reached when the caller already uses torch

        return torch.as_tensor(np.asarray(values), dtype=reference.dtype, device=reference.device)
    if is_torch(values):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def gain_name(gain: GainSpec) -> str:
    """Short name of a gain for stamped metric names (``exp2``, ``linear`` or the callable's name)."""
    if isinstance(gain, str):
        return gain
    return getattr(gain, "__name__", "custom")


def gain_values(labels: Any, gain: GainSpec = "exp2", item_gain: Any = None) -> Any:
    """Gain of each label: ``2^rel - 1`` (``"exp2"``), ``rel`` (``"linear"``), ``gain(labels)`` or ``item_gain``.

    Parameters
    ----------
    labels : array or tensor of relevance labels, any shape.
    gain : ``"exp2"``, ``"linear"`` or a callable applied to the (float) labels.
    item_gain : optional per-item gains of the same shape (e.g. a price); when given it *is* the gain
        and ``gain`` is ignored.

    Returns the gains as the same kind of array as ``labels`` (numpy float64, or a floating tensor).

    >>> gain_values(np.array([3, 0, 2]))
    array([7., 0., 3.])
    >>> gain_values(np.array([3, 0, 2]), "linear")
    array([3., 0., 2.])
    >>> gain_values(np.array([1, 2]), lambda r: r ** 2)
    array([1., 4.])
    >>> gain_values(np.array([1, 0]), item_gain=np.array([9.5, 4.0]))
    array([9.5, 4. ])
    """
    x = _as_float(labels)
    if item_gain is not None:
        values = _like(item_gain, x)
        if tuple(values.shape) != tuple(x.shape):
            raise ValueError(f"item_gain has shape {tuple(values.shape)}, labels have {tuple(x.shape)}")
        return values
    if callable(gain):
        return _like(gain(x), x)
    if gain == "exp2":
        return (x.exp2() if is_torch(x) else np.exp2(x)) - 1.0
    if gain == "linear":
        return x.clone() if is_torch(x) else x.copy()
    raise ValueError(f"unknown gain {gain!r}: use 'exp2', 'linear', a callable or item_gain")
