r"""RankNet (Burges et al., 2005): the pairwise logistic loss on score differences.

For one query, over every pair of real items (i, j) with label_i > label_j::

    loss_q = sum_{(i, j)} w_i * log(1 + exp(-sigma * (s_i - s_j)))

(w_i = 1 without ``weights``), computed stably as ``-logsigmoid(sigma * (s_i - s_j))``.
Cost: O(B * L^2) time over blocks of pairs, O(B * L) memory beyond one block
(see ``losses.pair_engine``).

>>> import torch
>>> loss = RankNet(reduction="sum")
>>> s = torch.tensor([[0.0, 0.0, 5.0]]); y = torch.tensor([[1.0, 0.0, 9.0]])
>>> round(float(loss(s, y, torch.tensor([[True, True, False]]))), 6)   # one pair, log 2
0.693147
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from losses.pair_engine import BLOCK_ELEMENTS, pairwise_logistic

__all__ = ["RankNet"]


class RankNet(nn.Module):
    """RankNet loss module: ``loss(scores [B, L], labels [B, L], mask [B, L], weights=None)``.

    Args:
        sigma: slope of the logistic (default 1).
        reduction: ``"mean"`` (default: per-query sums averaged over the queries of the batch
            that hold at least one real item), ``"sum"`` (over pairs and queries) or ``"none"``
            (per-query sums, shape ``[B]``).
        block_elements: pairs materialised at once (memory only; the value is unchanged).
    """

    def __init__(self, sigma: float = 1.0, reduction: str = "mean", *,
                 block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        self.sigma = float(sigma)
        self.reduction = check_reduction(reduction)
        self.block_elements = int(block_elements)

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        per_query = pairwise_logistic(scores, labels, mask, weights, sigma=self.sigma,
                                      block_elements=self.block_elements)
        return reduce_per_query(per_query, mask, self.reduction)

    def extra_repr(self) -> str:
        return f"sigma={self.sigma}, reduction={self.reduction!r}"
