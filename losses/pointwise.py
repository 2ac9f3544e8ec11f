r"""Pointwise losses: binary cross-entropy on logits (CTR models) and mean squared error.

Per real item i, with optional weight w_i (1 without ``weights``)::

    BCE: w_i * -(t_i log sigmoid(s_i) + (1 - t_i) log(1 - sigmoid(s_i)))
    MSE: w_i * (s_i - y_i)^2

BCE's target t_i comes from the label by ``label_rule``:

* ``"unit"`` (default): t = y, labels must lie in [0, 1] (clicks, probabilities); anything else
  is refused with a ValueError naming the value.
* ``"clip"``: t = min(max(y, 0), 1) — Rax's ``pointwise_sigmoid_loss`` since v0.3.0 (May 2023),
  which clips the labels to [0, 1]: a label in (0, 1) stays a soft target.
* ``"binarize"``: t = 1 if y >= 1 else 0 — Rax's ``pointwise_sigmoid_loss`` of v0.1.0 and v0.2.0
  (which turned graded relevance into binary relevance before it clipped). The two differ on labels
  in (0, 1) only: for s = 1, y = 0.5 the term is softplus(1) - 0.5 = 0.8133 clipped, softplus(1) =
  1.3133 binarized.
* ``"as_given"``: t = y for any label, the formula taken literally, as TF-Ranking's
  ``SigmoidCrossEntropyLoss`` (``tf.nn.sigmoid_cross_entropy_with_logits``) does; the term is
  ``softplus(s) - y s``, which for y > 1 keeps decreasing as s grows (no minimum), so a label of 2
  pushes its score up without bound.

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


LABEL_RULES = ("unit", "clip", "binarize", "as_given")


class PointwiseBCE(_PointwiseLoss):
    """Binary cross-entropy on logits; ``label_rule`` (``"unit"``, ``"clip"``, ``"binarize"``,
    ``"as_given"``) says how labels become targets (module docstring).

    >>> import torch
    >>> s = torch.tensor([[0.0, 1.0]]); y = torch.tensor([[2.0, 0.5]])
    >>> round(float(PointwiseBCE("sum", label_rule="as_given")(s, y)), 4)   # log 2 + (softplus(1) - 0.5)
    1.5064
    >>> round(float(PointwiseBCE("sum", label_rule="binarize")(s, y)), 4)   # log 2 + softplus(1)
    2.0064
    >>> round(float(PointwiseBCE("sum", label_rule="clip")(s, y)), 4)   # log 2 + (softplus(1) - 0.5)
    1.5064
    """

    def __init__(self, reduction: str = "mean", *, label_rule: str = "unit"):
        super().__init__(reduction)
        if label_rule not in LABEL_RULES:
            raise ValueError(f"label_rule must be one of {LABEL_RULES}, got {label_rule!r}")
        self.label_rule = label_rule

    def terms(self, scores, labels, mask) -> torch.Tensor:
        if self.label_rule == "binarize":
            labels = (labels >= 1).to(scores.dtype)
        elif self.label_rule == "clip":
            labels = labels.clamp(0.0, 1.0)
        elif self.label_rule == "unit" and bool(((labels < 0) | (labels > 1)).any()):
            bad = labels[(labels < 0) | (labels > 1)][0].item()
            raise ValueError(f"PointwiseBCE needs labels in [0, 1] (click / no click); got {bad} "
                             "(label_rule='clip', 'binarize' or 'as_given' take graded labels)")
        logits = scores.masked_fill(~mask, 0.0)
        # torch's stable form, (1 - t) s + log(1 + e^-s), is the formula for any t (no range check).
        return F.binary_cross_entropy_with_logits(logits, labels, reduction="none")

    def extra_repr(self) -> str:
        rule = "" if self.label_rule == "unit" else f", label_rule={self.label_rule!r}"
        return f"reduction={self.reduction!r}{rule}"


class PointwiseMSE(_PointwiseLoss):
    """Squared error between scores and labels."""

    def terms(self, scores, labels, mask) -> torch.Tensor:
        return (scores.masked_fill(~mask, 0.0) - labels) ** 2
