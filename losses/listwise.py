r"""Softmax cross-entropy listwise losses: ListNet (Cao et al., 2007) and the labels-as-given softmax.

For one query with real items i, the model's top-one probability is ``P_s(i) = softmax(s)_i`` and
the target's is ``P_y(i) = softmax(y)_i`` (``target="softmax"``, the original paper's exp
transform of the labels) or ``y_i / sum_j y_j`` (``target="linear"``; needs non-negative labels,
and a query whose labels sum to 0 contributes 0)::

    loss_q = -sum_i w_i * P_y(i) * log(P_s(i) + eps)

(w_i = 1 without ``weights``; ``eps`` = 0 by default, computed then as an exact log-softmax;
allRank's ListNet adds eps = 1e-10 to the probabilities before the logarithm). Padding is excluded from both softmaxes. Shifting every score of
a query by a constant changes nothing. Cost O(B * L).

``SoftmaxCrossEntropy`` takes the labels as given, unnormalised (labels >= 0)::

    loss_q = -sum_i w_i * y_i * log softmax(s)_i

This is the listwise loss of TF-Ranking (``SoftmaxLoss`` normalises the labels into a distribution
and weighs each query by its label sum, which is the same thing), of Rax's ``softmax_loss`` in every
release since its first, v0.1.0 (February 2022; only the code published before it, in January 2022,
divided by the label sum, as ``ListNet(target="linear")`` does) and of Bruch et al., "An Analysis of the Softmax Cross Entropy Loss for
Learning-to-Rank with Binary Relevance" (ICTIR 2019). How it differs from the two ListNet targets:

* ``ListNet(target="linear")`` divides by ``sum_j y_j`` first: every query weighs the same,
  whereas here a query with more (or more relevant) labelled items weighs more, in proportion to
  its label sum.
* ``ListNet(target="softmax")`` (the original paper) takes ``softmax(y)`` as the target: items of
  label 0 still get probability mass ``e^0 / sum_j e^{y_j}``, so the loss also pushes
  non-relevant items up, and a query of all-0 labels still has a uniform target (here it
  contributes 0).

With ``lambda_weight="ndcg"`` (TF-Ranking's ``SoftmaxLoss`` with a normalised ``DCGLambdaWeight``)
the labels are replaced by each item's share of the current NDCG@K, ``G_i / D(r_i)`` (G = g /
IDCG@K, r_i the item's rank under the current scores, D(r) = log2(1 + r); 0 below rank K with
``k_rule="items"``, the default; ``k_rule="ideal"`` is TF-Ranking's ``DCGLambdaWeight(topn=K)``,
which cuts only the ideal DCG at K and keeps every rank; see :mod:`losses.lambda_weights`), a
constant for autograd::

    loss_q = -sum_i w_i * (G_i / D(r_i)) * log softmax(s)_i

>>> import torch
>>> float(SoftmaxCrossEntropy(reduction="sum")(torch.zeros(1, 2), torch.tensor([[2.0, 0.0]])))   # 2 log 2
1.3862943649291992
>>> loss = ListNet(reduction="sum")
>>> s = torch.zeros(1, 4); y = torch.tensor([[1.0, 0.0, 0.0, 7.0]])
>>> round(float(loss(s, y, torch.tensor([[True, True, True, False]]))), 6)   # log 3
1.098612
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from losses.lambda_weights import ITEM_K_RULES, ITEM_LAMBDA_WEIGHTS, check_lambda_weight, item_lambda_weights
from metrics.discounts import check_cutoff

__all__ = ["ListNet", "SoftmaxCrossEntropy"]

TARGETS = ("softmax", "linear")


class ListNet(nn.Module):
    """ListNet loss module: ``loss(scores [B, L], labels [B, L], mask [B, L], weights=None)``.

    Args:
        target: how labels become the target distribution: ``"softmax"`` (default) or ``"linear"``.
        reduction: ``"mean"`` (default: per-query losses averaged over queries with at least
            one real item), ``"sum"`` or ``"none"`` (per-query losses ``[B]``).
        eps: added to the model's probabilities before the logarithm (default 0: exact
            log-softmax; allRank uses 1e-10).
    """

    def __init__(self, target: str = "softmax", reduction: str = "mean", *, eps: float = 0.0):
        super().__init__()
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        if not float(eps) >= 0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        self.target = target
        self.reduction = check_reduction(reduction)
        self.eps = float(eps)

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        neg_inf = torch.finfo(scores.dtype).min  # finite, so empty rows give 0 rather than NaN
        log_p_scores = torch.log_softmax(scores.masked_fill(~mask, neg_inf), dim=1)
        if self.eps > 0:
            log_p_scores = torch.log(log_p_scores.exp() + self.eps)
        if self.target == "softmax":
            p_target = torch.softmax(labels.masked_fill(~mask, neg_inf), dim=1)
        else:
            if bool((labels < 0).any()):
                raise ValueError("ListNet(target='linear') needs non-negative labels")
            total = labels.sum(dim=1, keepdim=True)
            p_target = labels / total.clamp(min=torch.finfo(scores.dtype).tiny)
        p_target = p_target.masked_fill(~mask, 0.0)
        if weights is not None:
            p_target = p_target * weights
        per_query = -(p_target * log_p_scores.masked_fill(~mask, 0.0)).sum(dim=1)
        return reduce_per_query(per_query, mask, self.reduction)

    def extra_repr(self) -> str:
        eps = f", eps={self.eps}" if self.eps else ""
        return f"target={self.target!r}, reduction={self.reduction!r}{eps}"


class SoftmaxCrossEntropy(nn.Module):
    """Softmax cross-entropy with the labels as given: ``loss(scores, labels, mask, weights=None)``.

    ``loss_q = -sum_i w_i y_i log softmax(s)_i`` over real items (labels must be >= 0); see the
    module docstring for how it differs from :class:`ListNet`.

    Args:
        reduction: ``"mean"`` (default: per-query losses averaged over queries with at least
            one real item), ``"sum"`` or ``"none"`` (``[B]``).
        lambda_weight: None (default: the labels) or ``"ndcg"`` (the items' shares of the
            current NDCG@K replace the labels; module docstring).
        k, gain, discount: cutoff (None = whole list), gain and discount of the lambda weight.
        k_rule: what the cutoff cuts: ``"items"`` (default: the items below rank K weigh 0, each
            item's share of NDCG@K) or ``"ideal"`` (only the ideal DCG, as TF-Ranking's
            ``DCGLambdaWeight(topn=K)``).
    """

    def __init__(self, reduction: str = "mean", *, lambda_weight: str | None = None, k: int | None = None,
                 gain="exp2", discount="log2", k_rule: str = "items"):
        super().__init__()
        self.reduction = check_reduction(reduction)
        self.lambda_weight = check_lambda_weight(lambda_weight, allowed=ITEM_LAMBDA_WEIGHTS)
        self.k = check_cutoff(k)
        if self.k is not None and lambda_weight is None:
            raise TypeError("k applies to lambda_weight='ndcg' only")
        if k_rule not in ITEM_K_RULES:
            raise ValueError(f"k_rule must be one of {ITEM_K_RULES}, got {k_rule!r}")
        self.k_rule = k_rule
        self.gain = gain
        self.discount = discount

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights,
                                                     widen=self.lambda_weight is not None)
        if bool((labels < 0).any()):
            raise ValueError("SoftmaxCrossEntropy needs non-negative labels (they weigh log-probabilities)")
        neg_inf = torch.finfo(scores.dtype).min
        log_p = torch.log_softmax(scores.masked_fill(~mask, neg_inf), dim=1).masked_fill(~mask, 0.0)
        target = labels
        if self.lambda_weight is not None:
            target = item_lambda_weights(self.lambda_weight, scores.detach(), labels, mask, k=self.k,
                                         gain=self.gain, discount=self.discount, k_rule=self.k_rule)
        if weights is not None:
            target = target * weights
        per_query = -(target * log_p).sum(dim=1)
        return reduce_per_query(per_query, mask, self.reduction).to(out_dtype)

    def extra_repr(self) -> str:
        extra = "" if self.lambda_weight is None else f", lambda_weight={self.lambda_weight!r}, k={self.k}"
        if self.k_rule != "items":
            extra += f", k_rule={self.k_rule!r}"
        return f"reduction={self.reduction!r}{extra}"
