r"""Pointwise losses: binary cross-entropy on logits (CTR models) and mean squared error.

Per real item i, with optional weight w_i (1 without ``weights``)::

    BCE: w_i * -(y_i log sigmoid(s_i) + (1 - y_i) log(1 - sigmoid(s_i)))    labels in [0, 1]
    MSE: w_i * (s_i - y_i)^2

Reductions: ``"mean"`` (default: the sum over real items divided by their number), ``"sum"``, or
``"none"`` (the ``[B, L]`` per-item terms, 0 on padding).

>>> import torch
>>> s = torch.tensor([[0.0, 2.0]]); y = torch.tensor([[1.0, 0.0]]); m = torch.tensor([[True, False]])
>>> round(float(PointwiseBCE()(s, y, m)), 6), float(PointwiseMSE()(s, y, m))   # log 2, 1.0
(0.693147, 1.0)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from losses._inputs import check_inputs, check_reduction

__all__ = ["PointwiseBCE", "PointwiseMSE"]


class _PointwiseLoss(nn.Module):
    """One term per real item, weighted and reduced alike; subclasses define :meth:`terms`."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = check_reduction(reduction)

    def terms(self, scores, labels, mask) -> torch.Tensor:
        """Per-item terms ``[B, L]`` of checked inputs (anything on padding; it is zeroed)."""
        raise NotImplementedError

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        terms = self.terms(scores, labels, mask)
        if weights is not None:
            terms = terms * weights
        terms = terms.masked_fill(~mask, 0.0)
        if self.reduction == "none":
            return terms
        total = terms.sum()
        if self.reduction == "sum":
            return total
        return total / mask.sum().clamp(min=1)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class PointwiseBCE(_PointwiseLoss):
    """Binary cross-entropy on logits, labels in [0, 1] (a ValueError names anything outside)."""

    def terms(self, scores, labels, mask) -> torch.Tensor:
        if bool(((labels < 0) | (labels > 1)).any()):
            bad = labels[(labels < 0) | (labels > 1)][0].item()
            raise ValueError(f"PointwiseBCE needs labels in [0, 1] (click / no click); got {bad}")
        logits = scores.masked_fill(~mask, 0.0)
        return F.binary_cross_entropy_with_logits(logits, labels, reduction="none")


class PointwiseMSE(_PointwiseLoss):
    """Squared error between scores and labels."""

    def terms(self, scores, labels, mask) -> torch.Tensor:
        return (scores.masked_fill(~mask, 0.0) - labels) ** 2
