r"""ListMLE (Xia, Liu, Wang, Zhang, Li, "Listwise Approach to Learning to Rank: Theory and
Algorithm", ICML 2008): the negative log-likelihood of the labels' ranking under Plackett-Luce.

For one query, with pi the ranking of the real items by label (descending) and n their number::

    loss_q = -log P(pi | s) = sum_{i=1..n} w_{pi(i)} * ( log sum_{k=i..n} exp(s_{pi(k)}) - s_{pi(i)} )

(w = 1 without ``weights``). Shifting every score of a query by a constant changes nothing.

Ties in the labels: the paper assumes one correct permutation; with graded labels many exist.
The rule is ``ties``:

* ``"score"`` (default): tied items are ordered by the current scores, descending (then input
  order): of the permutations consistent with the labels, the one the model makes most likely
  step by step. The loss is deterministic, does not depend on the order the items are given
  in, and stays continuous (where two tied scores cross, both orders give the same value).
* ``"input"``: tied items keep their input order (allRank instead shuffles them at random).

Cost O(B L log L) (two sorts and a cumulative log-sum-exp).

>>> import torch
>>> s = torch.tensor([[0.0, 0.0]]); y = torch.tensor([[1.0, 0.0]])
>>> round(float(ListMLE(reduction="sum")(s, y)), 6)   # log 2 for the first step, 0 for the last
0.693147
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from metrics.swap import ranking_order

__all__ = ["ListMLE", "TIE_RULES"]

TIE_RULES = ("score", "input")


def label_order(scores, labels, mask, ties: str = "score") -> torch.Tensor:
    """``[B, L]`` permutation: labels descending, ties by ``ties``, padding last."""
    if ties == "score":
        first = ranking_order(scores.detach(), mask)
    else:
        first = torch.arange(scores.shape[1], device=scores.device).expand_as(scores)
    keyed = labels.gather(1, first).masked_fill(~mask.gather(1, first), float("-inf"))
    return first.gather(1, torch.sort(keyed, dim=1, descending=True, stable=True).indices)


class ListMLE(nn.Module):
    """ListMLE loss module: ``loss(scores [B, L], labels [B, L], mask [B, L], weights=None)``.

    Args:
        ties: ``"score"`` (default) or ``"input"``: the order of items with equal labels.
        reduction: ``"mean"`` (default: per-query losses averaged over queries with at least
            one real item), ``"sum"`` or ``"none"`` (``[B]``).
    """

    def __init__(self, ties: str = "score", reduction: str = "mean"):
        super().__init__()
        if ties not in TIE_RULES:
            raise ValueError(f"ties must be one of {TIE_RULES}, got {ties!r}")
        self.ties = ties
        self.reduction = check_reduction(reduction)

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        order = label_order(scores, labels, mask, self.ties)
        m = mask.gather(1, order)
        # Padding sits last and holds the lowest finite value: it adds exp(min) = 0 to every tail sum.
        s = scores.gather(1, order).masked_fill(~m, torch.finfo(scores.dtype).min)
        tail = torch.logcumsumexp(s.flip(1), dim=1).flip(1)  # log sum_{k >= i} exp(s_k)
        terms = (tail - s).masked_fill(~m, 0.0)
        if weights is not None:
            terms = terms * weights.gather(1, order)
        return reduce_per_query(terms.sum(dim=1), mask, self.reduction)

    def extra_repr(self) -> str:
        return f"ties={self.ties!r}, reduction={self.reduction!r}"
