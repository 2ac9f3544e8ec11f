r"""RankNet (Burges et al., 2005) and the pairwise hinge: losses on score differences of pairs.

For one query, over every pair of real items (i, j) with label_i > label_j, with a_ij = w_i (the
item weight, 1 without ``weights``) times ``|y_i - y_j|`` when ``pair_weight="label_diff"``::

    RankNet:        loss_q = sum_{(i, j)} a_ij * log(1 + exp(-sigma * (s_i - s_j)))
    PairwiseHinge:  loss_q = sum_{(i, j)} a_ij * max(0, margin - (s_i - s_j))

With ``lambda_weight`` set (``"ndcg"`` or ``"ndcg2"``, :mod:`losses.lambda_weights`), a_ij is
further multiplied by that metric-aware weight of the current ranking, as TF-Ranking and Rax allow
for any pair loss: ``RankNet(lambda_weight="ndcg")`` is LambdaRank, ``RankNet(lambda_weight=
"ndcg2")`` is NDCG-Loss2 in natural log, ``PairwiseHinge(lambda_weight=...)`` their hinge
versions. ``k`` / ``k_method`` / ``gain`` / ``discount`` apply to the lambda weight only.

RankNet is computed stably as ``-logsigmoid(sigma * (s_i - s_j))``. The hinge is the pairwise
loss of RankSVM (Herbrich, Graepel, Obermayer 1999; Joachims 2002), as in TF-Ranking's and Rax's
``pairwise_hinge_loss``. Cost: O(B * L^2) time over blocks of pairs, O(B * L) memory beyond one
block (see ``losses.pair_engine``).

Reductions: ``"mean"`` (per-query sums averaged over queries), ``"sum"``, ``"none"`` (``[B]``),
and, as peers report pairwise losses, ``"pair_mean"`` (the batch's sum over the number of pairs
in the batch) or ``"weight_mean"`` (over the sum of the a_ij).

>>> import torch
>>> loss = RankNet(reduction="sum")
>>> s = torch.tensor([[0.0, 0.0, 5.0]]); y = torch.tensor([[1.0, 0.0, 9.0]])
>>> round(float(loss(s, y, torch.tensor([[True, True, False]]))), 6)   # one pair, log 2
0.693147
>>> float(PairwiseHinge(margin=1.0, reduction="sum")(torch.tensor([[0.25, 0.0]]), torch.tensor([[1.0, 0.0]])))
0.75
>>> hinge = PairwiseHinge(reduction="sum", lambda_weight="ndcg")   # the pair's |ΔNDCG| = 1 - 1/log2(3)
>>> round(float(hinge(torch.tensor([[0.25, 0.0]]), torch.tensor([[0.0, 1.0]]))), 4)   # 0.3691 * (1 + 0.25)
0.4613
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import PAIR_REDUCTIONS, check_inputs, check_reduction
from losses.lambda_weights import check_lambda_weight, pair_lambda_weights
from losses.pair_engine import BLOCK_ELEMENTS, compact_order, reduced_pairwise
from losses.pair_weights import LabelDiffWeights, check_pair_weight
from metrics.discounts import check_cutoff

__all__ = ["RankNet", "PairwiseHinge"]


class RankNet(nn.Module):
    """RankNet loss module: ``loss(scores [B, L], labels [B, L], mask [B, L], weights=None)``.

    Args:
        sigma: slope of the logistic (default 1).
        reduction: ``"mean"`` (default: per-query sums averaged over the queries of the batch
            that hold at least one real item), ``"sum"`` (over pairs and queries), ``"none"``
            (per-query sums, shape ``[B]``), ``"pair_mean"`` or ``"weight_mean"``.
        pair_weight: None (default) or ``"label_diff"`` (weigh each pair by ``|y_i - y_j|``).
        lambda_weight: None (default), ``"ndcg"`` or ``"ndcg2"`` (:mod:`losses.lambda_weights`).
        k, k_method, gain, discount: the cutoff (None = whole list), ``"truncate"`` or
            ``"jagerman"``, gain and discount of the lambda weight (``"exp2"``, ``"log2"``).
        block_elements: pairs materialised at once (memory only; the value is unchanged).
    """

    _margin = None

    def __init__(self, sigma: float = 1.0, reduction: str = "mean", *, pair_weight: str | None = None,
                 lambda_weight: str | None = None, k: int | None = None, k_method: str = "truncate",
                 gain="exp2", discount="log2", block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        self.sigma = float(sigma)
        self.reduction = check_reduction(reduction, PAIR_REDUCTIONS)
        self.pair_weight = check_pair_weight(pair_weight)
        self.lambda_weight = check_lambda_weight(lambda_weight, k_method)
        self.k = check_cutoff(k)
        if self.k is not None and lambda_weight is None:
            # A TypeError, as for any option a loss does not take (get_loss names the loss).
            raise TypeError("k applies to a lambda_weight only; set lambda_weight='ndcg' or 'ndcg2'")
        self.k_method = k_method
        self.gain = gain
        self.discount = discount
        self.block_elements = int(block_elements)

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        if self.lambda_weight is not None:
            return self._lambda_weighted(scores, labels, mask, weights)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        order = compact_order(mask)
        pair_weight = None if self.pair_weight is None else LabelDiffWeights(labels, mask, order)
        return reduced_pairwise(scores, labels, mask, weights, self.reduction, sigma=self.sigma, order=order,
                                pair_weight=pair_weight, margin=self._margin,
                                block_elements=self.block_elements)

    def _lambda_weighted(self, scores, labels, mask, weights) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        pair_weight, order, top = pair_lambda_weights(self.lambda_weight, scores, labels, mask, k=self.k,
                                                      k_method=self.k_method, gain=self.gain,
                                                      discount=self.discount)
        if self.pair_weight == "label_diff":
            pair_weight = LabelDiffWeights(labels, mask, order, base=pair_weight)
        loss = reduced_pairwise(scores, labels, mask, weights, self.reduction, sigma=self.sigma, order=order,
                                pair_weight=pair_weight, top=top, margin=self._margin,
                                block_elements=self.block_elements)
        return loss.to(out_dtype)

    def _lambda_repr(self) -> str:
        extra = "" if self.pair_weight is None else f", pair_weight={self.pair_weight!r}"
        if self.lambda_weight is not None:
            extra += f", lambda_weight={self.lambda_weight!r}, k={self.k}"
            if self.k_method != "truncate":
                extra += f", k_method={self.k_method!r}"
        return extra

    def extra_repr(self) -> str:
        return f"sigma={self.sigma}, reduction={self.reduction!r}{self._lambda_repr()}"


class PairwiseHinge(RankNet):
    """Pairwise hinge loss ``max(0, margin - (s_i - s_j))`` over pairs with label_i > label_j.

    Args:
        margin: the score gap below which a correctly ordered pair still costs (default 1).
        reduction, pair_weight, lambda_weight, k, k_method, gain, discount, block_elements: as
            :class:`RankNet`.
    """

    def __init__(self, margin: float = 1.0, reduction: str = "mean", *, pair_weight: str | None = None,
                 lambda_weight: str | None = None, k: int | None = None, k_method: str = "truncate",
                 gain="exp2", discount="log2", block_elements: int = BLOCK_ELEMENTS):
        super().__init__(1.0, reduction, pair_weight=pair_weight, lambda_weight=lambda_weight, k=k,
                         k_method=k_method, gain=gain, discount=discount, block_elements=block_elements)
        if not float(margin) >= 0:
            raise ValueError(f"margin must be >= 0, got {margin!r}")
        self.margin = float(margin)
        self._margin = self.margin

    def extra_repr(self) -> str:
        return f"margin={self.margin}, reduction={self.reduction!r}{self._lambda_repr()}"
