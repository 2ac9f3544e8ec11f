"""Scoring models: a linear scorer and an MLP, both mapping features [..., F] to scores [...].

A scorer here is pointwise: the score of an item depends on its own feature vector only, so the
same model ranks a padded batch ``[B, L, F]`` (training) and a flat block of rows ``[N, F]``
(prediction). Batch normalisation is the one layer that looks across items while training; it is
computed over the *valid* rows only (``mask``), so padding never shifts the statistics. The
context-aware scorer (:mod:`ltr.train.attention`) looks at the whole list instead (``listwise =
True``): it is scored query by query (:func:`ltr.train.trainer.predict_scores` with the query
offsets). Ensembles of scorers live in :mod:`ltr.train.ensemble`.

``input_noise`` (every scorer): the standard deviation of Gaussian noise added to the (normalised)
input features in training mode only, one of DASALC's ingredients (Qin et al., ICLR 2021). The
trainer draws it, and dropout's masks, per query (:mod:`ltr.train.draws`), so that a run with N
processes trains exactly what one process trains.

An optional :class:`FeatureTransform` (log1p and/or standardisation, fitted on the training split)
runs first inside the model, so a saved model carries its own input normalisation.

Building a scorer from its description, saving and loading it: :mod:`ltr.train.models`.

>>> import torch
>>> m = MLPScorer(4, hidden=(8,), dropout=0.1)
>>> m(torch.zeros(2, 3, 4)).shape
torch.Size([2, 3])
>>> LinearScorer(4)(torch.zeros(5, 4)).shape
torch.Size([5])
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from ltr.base.errors import LtrError
from ltr.train.draws import KeyedDropout, normal_like
from ltr.train.config import QUERY_NORMS  # re-exported: the scorer's choices, defined beside the rules that check them

__all__ = [
    "ACTIVATIONS",
    "FeatureTransform",
    "MaskedBatchNorm1d",
    "LinearScorer",
    "MLPScorer",
    "MODEL_TYPES",
    "QUERY_NORMS",
    "query_normalize",
]

ACTIVATIONS = {
    "relu": nn.ReLU,
    "leaky_relu": nn.LeakyReLU,
    "gelu": nn.GELU,
    "elu": nn.ELU,
    "silu": nn.SiLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
}

MODEL_FILE = "model.pt"
MODEL_JSON = "model.json"
#: The ``type`` names :func:`build_model` knows (``ensemble`` holds members of the others).
MODEL_TYPES = ("mlp", "linear", "attention", "ensemble")


class FeatureTransform(nn.Module):
    """Fixed per-feature input transform inside the model: ``x -> clip((f(x) - shift) / scale) * keep``.

    ``f`` is ``sign(x) * log1p(|x|)`` on the features where ``log1p_mask`` is true and the identity
    elsewhere. The statistics come from :class:`ltr.data.normalize.Normalizer` fitted on the training
    split (kinds ``auto``, ``standard``, ``log1p``, ``log1p_standard``); they are buffers, so they travel
    in the model's state dict (and its ONNX / TorchScript export) and a saved model normalises its own
    inputs. Kind ``auto`` (:mod:`ltr.data.auto_transform`) also clips each feature to its training range
    (buffers ``low``, ``high``) and zeroes the features that were constant in training (``keep``).

    >>> t = FeatureTransform.fit(np.array([[0.0, 1.0], [2.0, 3.0]]), kind="standard")
    >>> t(torch.tensor([[1.0, 2.0]])).tolist()
    [[0.0, 0.0]]
    >>> a = FeatureTransform.fit(np.array([[1.0, 7.0], [3.0, 7.0], [5.0, 7.0]]), kind="auto")
    >>> a(torch.tensor([[4.0, 7.5], [99.0, 0.0]])).tolist()   # (x - 3) / (2 / 1.349), clipped at 5; constant -> 0
    [[0.6744999885559082, 0.0], [1.3489999771118164, 0.0]]
    """

    KINDS = ("auto", "standard", "log1p", "log1p_standard")

    def __init__(self, n_features: int, kind: str = "standard"):
        super().__init__()
        if kind not in self.KINDS:
            raise LtrError(f"unknown normalisation {kind!r}; choose one of {', '.join(self.KINDS)}")
        self.kind = kind
        self.register_buffer("log1p_mask", torch.full((n_features,), kind.startswith("log1p"), dtype=torch.bool))
        self.register_buffer("shift", torch.zeros(n_features))
        self.register_buffer("scale", torch.ones(n_features))
        if kind == "auto":  # only then, so the state dicts of models saved before 0.2 still load
            self.register_buffer("low", torch.full((n_features,), -torch.inf))
            self.register_buffer("high", torch.full((n_features,), torch.inf))
            self.register_buffer("keep", torch.ones(n_features))

    @classmethod
    def from_normalizer(cls, normalizer) -> "FeatureTransform":
        """The in-model equivalent of a fitted :class:`ltr.data.normalize.Normalizer`."""
        if not normalizer.is_fitted:
            raise LtrError("the normaliser must be fitted on the training split first")
        t = cls(normalizer.n_features_, normalizer.kind)
        if normalizer.kind == "auto":
            fit = normalizer.auto_
            for name, values in (("shift", fit.center), ("scale", fit.scale), ("low", fit.low), ("high", fit.high),
                                 ("keep", fit.keep.astype(np.float64))):
                getattr(t, name).copy_(torch.from_numpy(np.asarray(values, dtype=np.float64)))
            t.log1p_mask.copy_(torch.from_numpy(fit.log))
        elif normalizer.mean_ is not None:
            t.shift.copy_(torch.from_numpy(np.asarray(normalizer.mean_, dtype=np.float64)))
            t.scale.copy_(torch.from_numpy(np.asarray(normalizer.scale_, dtype=np.float64)))
        return t

    @classmethod
    def fit(cls, features: np.ndarray, kind: str = "standard") -> "FeatureTransform":
        """Fit a :class:`ltr.data.normalize.Normalizer` of ``kind`` on training features [N, F]."""
        from ltr.data.normalize import Normalizer

        if kind not in cls.KINDS:
            raise LtrError(f"unknown normalisation {kind!r}; choose one of {', '.join(cls.KINDS)}")
        features = features if hasattr(features, "shape") else np.asarray(features)
        return cls.from_normalizer(Normalizer(kind).fit(features))

    def describe(self, names=None) -> list[dict[str, Any]]:
        """Per feature: its name and what the transform does with it (``constant``, ``log``, ``linear``)."""
        names = list(names) if names is not None else [f"f{j + 1}" for j in range(self.shift.numel())]
        keep = self.keep.tolist() if self.kind == "auto" else [1.0] * len(names)
        return [{"feature": str(n), "action": "constant" if not k else ("log" if g else "linear"),
                 "center": float(c), "scale": float(s)}
                for n, k, g, c, s in zip(names, keep, self.log1p_mask.tolist(), self.shift.tolist(), self.scale.tolist())]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The same operations as the formula, in place on one fresh tensor (never on ``x``): the input
        # transform of a training batch otherwise costs as much as the MLP after it.
        if self.kind != "standard":
            out = torch.where(self.log1p_mask, torch.log1p(torch.abs(x)).mul_(torch.sign(x)), x).sub_(self.shift)
        else:
            out = x - self.shift
        out = out.div_(self.scale)
        if self.kind == "auto":
            out = out.clamp_(min=self.low, max=self.high).mul_(self.keep)
        return out


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """Batch norm over the last axis of ``[..., H]``, with statistics from the rows where ``mask`` is true.

    Padded rows are not normalised (they come out as 0) and do not enter the running statistics.
    """

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if mask is None:
            return super().forward(flat).reshape(shape)
        keep = mask.reshape(-1)
        if not self.training and self.running_mean is not None:
            # Running statistics normalise each row on its own, so every row can go through and the
            # padded ones be zeroed after: no data-dependent shapes, which exporters cannot trace.
            return torch.where(keep[:, None], super().forward(flat), torch.zeros_like(flat)).reshape(shape)
        out = torch.zeros_like(flat)
        out[keep] = super().forward(flat[keep])
        return out.reshape(shape)


def query_normalize(x: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """Each feature normalised within its list (LETOR's QueryLevelNorm): over the valid items of a list,
    ``zscore``: ``(x - mean) / std``, ``minmax``: ``(x - min) / (max - min)`` (a divisor of 0 becomes 1,
    so a feature constant within the list becomes 0). ``x`` [..., L, F] (a 2-D ``[L, F]`` is one list),
    ``mask`` [..., L] (None: every item valid); padded items come out 0.

    >>> query_normalize(torch.tensor([[1.0, 5.0], [3.0, 5.0], [9.0, 9.0]]), torch.tensor([True, True, False]), "minmax").tolist()
    [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    """
    valid = torch.ones(x.shape[:-1], dtype=torch.bool, device=x.device) if mask is None else mask
    w = valid.unsqueeze(-1).to(x.dtype)
    count = w.sum(dim=-2, keepdim=True).clamp(min=1.0)
    if how == "zscore":
        mean = (x * w).sum(dim=-2, keepdim=True) / count
        std = (((x - mean) * w) ** 2).sum(dim=-2, keepdim=True).div(count).sqrt()
        out = (x - mean) / torch.where(std > 0, std, torch.ones_like(std))
    else:
        low = torch.where(valid.unsqueeze(-1), x, torch.full_like(x, torch.inf)).amin(dim=-2, keepdim=True)
        high = torch.where(valid.unsqueeze(-1), x, torch.full_like(x, -torch.inf)).amax(dim=-2, keepdim=True)
        span = high - low
        out = (x - low) / torch.where(span > 0, span, torch.ones_like(span))
    return out * w


class _Scorer(nn.Module):
    """Common parts: the optional input transform and the JSON description."""

    kind = "base"

    @property
    def listwise(self) -> bool:
        """True when an item's score depends on the other items of its query (then it is scored by query)."""
        return self.query_norm != "none"

    def __init__(self, n_features: int, input_noise: float = 0.0, query_norm: str = "none"):
        super().__init__()
        if int(n_features) < 1:
            raise LtrError(f"n_features must be >= 1, got {n_features}")
        if query_norm not in QUERY_NORMS:
            raise LtrError(f"query_norm must be one of {', '.join(QUERY_NORMS)}, got {query_norm!r}")
        self.query_norm = query_norm
        #: the width of what the first layer sees: 2F when the list-normalised features are appended
        self.input_width = int(n_features) * (2 if query_norm.startswith("append_") else 1)
        if not float(input_noise) >= 0.0:
            raise LtrError(f"input_noise must be >= 0 (a standard deviation), got {input_noise}")
        self.n_features = int(n_features)
        self.input_noise = float(input_noise)
        self.normalizer: FeatureTransform | None = None
        self.feature_names: tuple[str, ...] | None = None  # the training data's, written into model.json

    def set_normalizer(self, transform: FeatureTransform | None) -> "_Scorer":
        """Attach an input transform (fitted on training features) that runs before the first layer."""
        if transform is not None and transform.shift.numel() != self.n_features:
            raise LtrError(f"normaliser has {transform.shift.numel()} features, model has {self.n_features}")
        self.normalizer = transform
        return self

    def _prepare(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if x.shape[-1] != self.n_features:
            raise LtrError(f"model expects {self.n_features} features, got input with {x.shape[-1]}")
        x = self.normalizer(x) if self.normalizer is not None else x
        if self.query_norm != "none":  # after the transform: the list's statistics of well-scaled values
            per_list = query_normalize(x, mask, self.query_norm.removeprefix("append_"))
            x = torch.cat([x, per_list], dim=-1) if self.query_norm.startswith("append_") else per_list
        if self.training and self.input_noise > 0:  # keyed by query in training: N processes draw as one
            x = normal_like(x).mul_(self.input_noise).add_(x)  # x + noise * sigma, without a third tensor
        return x

    def set_feature_names(self, names) -> "_Scorer":
        """Record the names of the input features (the training data's ``feature_names``, or None)."""
        if names is not None:
            names = tuple(str(n) for n in names)
            if len(names) != self.n_features:
                raise LtrError(f"{len(names)} feature names for a model of {self.n_features} features")
        self.feature_names = names
        return self

    def config(self) -> dict[str, Any]:
        cfg = self._arch()
        if self.input_noise > 0:  # absent = 0, so older model.json files read the same
            cfg["input_noise"] = self.input_noise
        cfg["normalizer"] = None if self.normalizer is None else self.normalizer.kind
        if self.query_norm != "none":  # absent = none, so older model.json files read the same
            cfg["query_norm"] = self.query_norm
        if self.feature_names is not None:
            cfg["feature_names"] = list(self.feature_names)
        return cfg

    def _arch(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


class LinearScorer(_Scorer):
    """``score = w . x + b``."""

    kind = "linear"

    def __init__(self, n_features: int, input_noise: float = 0.0, query_norm: str = "none"):
        super().__init__(n_features, input_noise, query_norm)
        self.linear = nn.Linear(self.input_width, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.linear(self._prepare(x, mask)).squeeze(-1)

    def _arch(self) -> dict[str, Any]:
        return {"type": "linear", "n_features": self.n_features}


class MLPScorer(_Scorer):
    """Feed-forward scorer: ``[Linear -> (BatchNorm) -> activation -> (Dropout)] x len(hidden) -> Linear(1)``.

    ``batch_norm=True`` normalises each hidden layer over the valid items of the batch (``mask``); in
    eval mode it uses the running statistics, so prediction stays pointwise.
    """

    kind = "mlp"

    def __init__(
        self,
        n_features: int,
        hidden: Sequence[int] = (128, 64),
        activation: str = "relu",
        dropout: float = 0.0,
        batch_norm: bool = False,
        input_noise: float = 0.0,
        query_norm: str = "none",
    ):
        super().__init__(n_features, input_noise, query_norm)
        if activation not in ACTIVATIONS:
            raise LtrError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
        if not 0.0 <= float(dropout) < 1.0:
            raise LtrError(f"dropout must be in [0, 1), got {dropout}")
        hidden = tuple(int(h) for h in hidden)
        if any(h < 1 for h in hidden):
            raise LtrError(f"hidden widths must be >= 1, got {hidden}")
        self.hidden, self.activation, self.dropout, self.batch_norm = hidden, activation, float(dropout), bool(batch_norm)
        self.linears = nn.ModuleList()
        self.norms = nn.ModuleList()
        width = self.input_width
        for h in hidden:
            self.linears.append(nn.Linear(width, h))
            if batch_norm:
                self.norms.append(MaskedBatchNorm1d(h))
            width = h
        self.act = ACTIVATIONS[activation]()
        self.drop = KeyedDropout(self.dropout) if self.dropout > 0 else nn.Identity()
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self._prepare(x, mask)
        for i, linear in enumerate(self.linears):
            h = linear(h)
            if self.batch_norm:
                h = self.norms[i](h, mask)
            h = self.drop(self.act(h))
        return self.out(h).squeeze(-1)

    def _arch(self) -> dict[str, Any]:
        return {
            "type": "mlp",
            "n_features": self.n_features,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "dropout": self.dropout,
            "batch_norm": self.batch_norm,
        }
