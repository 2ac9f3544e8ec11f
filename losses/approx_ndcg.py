r"""ApproxNDCG (Qin, Liu, Li, "A General Approximation Framework for Direct Optimization of
Information Retrieval Measures", Information Retrieval 13(4), 2010).

The rank of item i, ``1 + sum_{j != i} [s_j > s_i]``, is smoothed with a logistic of temperature T
(the paper's alpha = 1/T); over the real items of one query, with gains g and item weights w::

    rank~_i  = 1 + sum_{j != i} sigmoid((s_j - s_i) / T)
    loss_q   = -(1 / IDCG) * sum_i w_i * g_i * discount(rank~_i)        (0 when IDCG = 0)

The gain, the discount (``"log2"``: 1 / log2(1 + r), or a callable that torch can differentiate)
and IDCG are those of :mod:`metrics`. A smaller T tracks the true NDCG more closely but gives
steeper, sparser gradients (T -> 0 recovers -NDCG). The whole list counts (no cutoff); the loss is
the negative smoothed NDCG, so it lies in about [-1, 0]. Shifting the scores of a query changes
nothing. Cost: O(B L^2) time and memory (autograd through the pairwise sigmoids). Computed in at least
float32, returned in the dtype of the scores; the gains enter as g / IDCG
(:func:`metrics.normalised_gains`), finite for labels up to 1023.

>>> import torch
>>> s = torch.tensor([[0.0, 0.0]]); y = torch.tensor([[1.0, 0.0]])   # both at rank 1.5
>>> round(float(ApproxNDCG(reduction="sum")(s, y)), 4)   # -(1 / log2(2.5)) / 1
-0.7565
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from metrics.dcg import normalised_gains
from metrics.discounts import discount_values

__all__ = ["ApproxNDCG", "smooth_ranks"]


def smooth_ranks(scores: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """``1 + sum_{j != i, real} sigmoid((s_j - s_i) / T)`` for every item ``[B, L]`` (padding: 1)."""
    s = scores.masked_fill(~mask, 0.0)
    beats = torch.sigmoid((s[:, None, :] - s[:, :, None]) / temperature)  # [b, i, j]: j above i
    both = mask[:, :, None] & mask[:, None, :]
    both = both & ~torch.eye(s.shape[1], dtype=torch.bool, device=s.device)[None]
    return 1.0 + (beats * both.to(s.dtype)).sum(dim=2)


class ApproxNDCG(nn.Module):
    """ApproxNDCG loss module: ``loss(scores, labels, mask, weights=None, item_gain=None)``.

    Args:
        temperature: T of the smoothed rank (default 1; TF-Ranking's default is 0.1).
        gain, discount: of :mod:`metrics` (``"exp2"``, ``"log2"`` by default).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``[B]``).
    """

    def __init__(self, temperature: float = 1.0, gain="exp2", reduction: str = "mean", *, discount="log2"):
        super().__init__()
        if not float(temperature) > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if not (isinstance(discount, str) or callable(discount)):
            raise ValueError("ApproxNDCG needs a smooth discount ('log2' or a callable), not a table")
        self.temperature = float(temperature)
        self.gain = gain
        self.discount = discount
        self.reduction = check_reduction(reduction)

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        if item_gain is not None:
            item_gain = torch.as_tensor(item_gain, device=scores.device).to(scores.dtype).masked_fill(~mask, 0.0)
        # G = g / IDCG, formed without 2^label (finite for labels up to 1023).
        gains = normalised_gains(labels, None, self.gain, self.discount, mask, item_gain).to(scores.dtype)
        ranks = smooth_ranks(scores, mask, self.temperature)
        terms = (gains * discount_values(ranks, self.discount)).masked_fill(~mask, 0.0)
        if weights is not None:
            terms = terms * weights
        return reduce_per_query(-terms.sum(dim=1), mask, self.reduction).to(out_dtype)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, gain={self.gain!r}, reduction={self.reduction!r}"
