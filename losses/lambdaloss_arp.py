r"""ARP-Loss1 and ARP-Loss2 of the LambdaLoss framework (Average Relevance Position).

Reference: Wang, Li, Golbandi, Bendersky, Najork, "The LambdaLoss Framework for Ranking Metric
Optimization", CIKM 2018. ARP = sum_i y_i * rank_i (lower is better), with
rank_i = 1 + sum_{j != i} [s_j > s_i]. Bounding each indicator by log2(1 + exp(-sigma (s_i - s_j)))
gives, over real items with labels y >= 0 and item weights w (1 without ``weights``)::

    ARP-Loss1:  loss_q = sum_i sum_j   y_i * w_i * log2(1 + exp(-sigma (s_i - s_j)))     (all i, j)
    ARP-Loss2:  loss_q = sum_{y_i > y_j} |y_i - y_j| * w_i * log2(1 + exp(-sigma (s_i - s_j)))

ARP-Loss1's j = i term is y_i (the "1 +" of rank_i), so with sigma = 1 the loss is an upper bound of
ARP itself. ARP-Loss2 is RankNet with label-difference pair weights (``RankNet(pair_weight=
"label_diff")``) in base 2. Both go through the block-wise pair engine (``losses.pair_engine``).

>>> import torch
>>> s = torch.zeros(1, 2); y = torch.tensor([[2.0, 0.0]])
>>> float(ARPLoss2(reduction="sum")(s, y)), float(ARPLoss1(reduction="sum")(s, y))   # 2*1; 2*(1+1)
(2.0, 4.0)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from losses._inputs import PAIR_REDUCTIONS, check_inputs, check_reduction
from losses.lambdaloss import item_weighted_all_pairs
from losses.pair_engine import BLOCK_ELEMENTS, compact_order, reduced_pairwise
from losses.pair_weights import LabelDiffWeights

__all__ = ["ARPLoss1", "ARPLoss2"]


class _ARPLoss(nn.Module):
    def __init__(self, sigma: float = 1.0, reduction: str = "mean", *, block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        self.sigma = float(sigma)
        self.reduction = check_reduction(reduction, PAIR_REDUCTIONS)
        self.block_elements = int(block_elements)

    def _checked(self, scores, labels, mask, weights):
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        if bool((labels < 0).any()):
            raise ValueError(f"{type(self).__name__} needs non-negative labels (they weigh rank positions)")
        return scores, labels, mask, weights

    def extra_repr(self) -> str:
        return f"sigma={self.sigma}, reduction={self.reduction!r}"


class ARPLoss1(_ARPLoss):
    """ARP-Loss1: ``loss(scores, labels, mask, weights=None)``; every ordered pair weighted by y_i.

    Args: ``sigma`` (default 1), ``reduction`` (``"mean"``, ``"sum"``, ``"none"``,
    ``"pair_mean"`` over the n^2 ordered pairs, ``"weight_mean"``).
    """

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = self._checked(scores, labels, mask, weights)
        return item_weighted_all_pairs(scores, mask, labels, weights, self.sigma, self.reduction,
                                       self.block_elements)


class ARPLoss2(_ARPLoss):
    """ARP-Loss2: ``loss(scores, labels, mask, weights=None)``; pairs y_i > y_j weighted |y_i - y_j|.

    Args: ``sigma`` (default 1), ``reduction`` (as :class:`losses.RankNet`).
    """

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = self._checked(scores, labels, mask, weights)
        order = compact_order(mask)
        # |y_i - y_j| / ln 2: the engine's natural log becomes the paper's log2.
        pair_weight = LabelDiffWeights(labels / math.log(2.0), mask, order)
        return reduced_pairwise(scores, labels, mask, weights, self.reduction, sigma=self.sigma, order=order,
                                pair_weight=pair_weight, block_elements=self.block_elements, base2=True)
