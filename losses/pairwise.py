r"""RankNet (Burges et al., 2005) and the pairwise hinge: losses on score differences of pairs.

For one query, over every pair of real items (i, j) with label_i > label_j, with a_ij = w_i (the
item weight, 1 without ``weights``) times ``|y_i - y_j|`` when ``pair_weight="label_diff"``::

    RankNet:        loss_q = sum_{(i, j)} a_ij * log(1 + exp(-sigma * (s_i - s_j)))
    PairwiseHinge:  loss_q = sum_{(i, j)} a_ij * max(0, margin - (s_i - s_j))

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
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import PAIR_REDUCTIONS, check_inputs, check_reduction
from losses.pair_engine import BLOCK_ELEMENTS, compact_order, reduced_pairwise
from losses.pair_weights import LabelDiffWeights, check_pair_weight

__all__ = ["RankNet", "PairwiseHinge"]


class RankNet(nn.Module):
    """RankNet loss module: ``loss(scores [B, L], labels [B, L], mask [B, L], weights=None)``.

    Args:
        sigma: slope of the logistic (default 1).
        reduction: ``"mean"`` (default: per-query sums averaged over the queries of the batch
            that hold at least one real item), ``"sum"`` (over pairs and queries), ``"none"``
            (per-query sums, shape ``[B]``), ``"pair_mean"`` or ``"weight_mean"``.
        pair_weight: None (default) or ``"label_diff"`` (weigh each pair by ``|y_i - y_j|``).
        block_elements: pairs materialised at once (memory only; the value is unchanged).
    """

    _margin = None

    def __init__(self, sigma: float = 1.0, reduction: str = "mean", *, pair_weight: str | None = None,
                 block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        self.sigma = float(sigma)
        self.reduction = check_reduction(reduction, PAIR_REDUCTIONS)
        self.pair_weight = check_pair_weight(pair_weight)
        self.block_elements = int(block_elements)

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        order = compact_order(mask)
        pair_weight = None if self.pair_weight is None else LabelDiffWeights(labels, mask, order)
        return reduced_pairwise(scores, labels, mask, weights, self.reduction, sigma=self.sigma, order=order,
                                pair_weight=pair_weight, margin=self._margin,
                                block_elements=self.block_elements)

    def extra_repr(self) -> str:
        extra = "" if self.pair_weight is None else f", pair_weight={self.pair_weight!r}"
        return f"sigma={self.sigma}, reduction={self.reduction!r}{extra}"


class PairwiseHinge(RankNet):
    """Pairwise hinge loss ``max(0, margin - (s_i - s_j))`` over pairs with label_i > label_j.

    Args:
        margin: the score gap below which a correctly ordered pair still costs (default 1).
        reduction, pair_weight, block_elements: as :class:`RankNet`.
    """

    def __init__(self, margin: float = 1.0, reduction: str = "mean", *, pair_weight: str | None = None,
                 block_elements: int = BLOCK_ELEMENTS):
        super().__init__(1.0, reduction, pair_weight=pair_weight, block_elements=block_elements)
        if not float(margin) >= 0:
            raise ValueError(f"margin must be >= 0, got {margin!r}")
        self.margin = float(margin)
        self._margin = self.margin

    def extra_repr(self) -> str:
        extra = "" if self.pair_weight is None else f", pair_weight={self.pair_weight!r}"
        return f"margin={self.margin}, reduction={self.reduction!r}{extra}"
