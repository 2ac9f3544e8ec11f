r"""NeuralNDCG (Pobrotyn, Białobrzeski, "NeuralNDCG: Direct Optimisation of a Ranking Metric via
Differentiable Relaxation of Sorting", arXiv:2102.07831, 2021).

NDCG sorts; NeuralSort (Grover, Wang, Zweig, Ermon, ICLR 2019) relaxes the sort into a unimodal
row-stochastic matrix. For one query with n real items, scores s and A_jk = |s_j - s_k|::

    P[i, :] = softmax( ((n + 1 - 2i) * s - A 1) / tau )        i = 1..n  (row i ~ "item at rank i")

As the paper does, P is then made doubly stochastic by Sinkhorn scaling (columns, then rows,
repeated until every sum is within ``tol`` of 1, at most ``sinkhorn_iters`` rounds). With gains g
and the discount d of :mod:`metrics` (d(i) = 1/log2(1 + i))::

    NeuralNDCG@K = (1 / IDCG@K) * sum_{i=1..K} d(i) * (P g)_i          loss_q = -NeuralNDCG@K

(0 when IDCG@K = 0). As tau -> 0, P tends to the sorting permutation and the loss to -NDCG@K.
Padding is left out of n, A, the softmax and the scaling, so it changes nothing; shifting the
scores of a query adds a constant to each row of logits and changes nothing either. Item weights
w multiply the gains (w_i g_i). Cost: O(B L^2) time and memory per Sinkhorn round. Computed in
at least float32, returned in the dtype of the scores; the gains enter as g / IDCG@K
(:func:`metrics.normalised_gains`), finite for labels up to 1023.

>>> import torch
>>> s = torch.tensor([[5.0, 0.0]]); y = torch.tensor([[1.0, 0.0]])
>>> round(float(NeuralNDCG(temperature=0.01, reduction="sum")(s, y)), 6)   # sorted already: -1
-1.0
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from metrics.dcg import normalised_gains
from metrics.discounts import check_cutoff, discount_values, rank_positions

__all__ = ["NeuralNDCG", "neural_sort", "sinkhorn"]


def neural_sort(scores: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """NeuralSort's relaxed permutation ``[B, L, L]`` (row i: rank i; rows beyond n and padding 0)."""
    s = scores.masked_fill(~mask, 0.0)
    both = (mask[:, :, None] & mask[:, None, :]).to(s.dtype)
    spread = ((s[:, :, None] - s[:, None, :]).abs() * both).sum(dim=2)  # (A 1)_j over real k
    n = mask.sum(dim=1, keepdim=True).to(s.dtype)  # [B, 1]
    rank = rank_positions(s.shape[1], s)  # 1..L
    coef = n + 1.0 - 2.0 * rank[None, :]  # [B, L]: (n + 1 - 2i)
    logits = (coef[:, :, None] * s[:, None, :] - spread[:, None, :]) / temperature
    logits = logits.masked_fill(~mask[:, None, :], torch.finfo(s.dtype).min)
    return torch.softmax(logits, dim=2) * _real_ranks(mask)[:, :, None].to(s.dtype)


def _real_ranks(mask: torch.Tensor) -> torch.Tensor:
    """``[B, L]`` bool: rank i (1-based) exists in row b when i <= its number of real items."""
    return torch.arange(mask.shape[1], device=mask.device)[None, :] < mask.sum(dim=1, keepdim=True)


def sinkhorn(p: torch.Tensor, mask: torch.Tensor, iterations: int, tol: float) -> torch.Tensor:
    """Alternate column and row normalisation of ``p [B, L, L]`` over the real block.

    Padded columns and rows beyond n are all zero; 1 is added to their (zero) sums instead of a
    clamp, so they stay zero and their gradient stays finite (0 / tiny^2 would be NaN).
    """
    pad_cols = (~mask).to(p.dtype)[:, None, :]
    pad_rows = (~_real_ranks(mask)).to(p.dtype)[:, :, None]
    for _ in range(iterations):
        p = p / (p.sum(dim=1, keepdim=True) + pad_cols)
        p = p / (p.sum(dim=2, keepdim=True) + pad_rows)
        if tol > 0:
            with torch.no_grad():
                col_err = ((p.sum(dim=1) - 1.0).abs() * mask).max() if p.numel() else p.new_zeros(())
            if float(col_err) < tol:
                break
    return p


class NeuralNDCG(nn.Module):
    """NeuralNDCG loss module: ``loss(scores, labels, mask, weights=None, item_gain=None)``.

    Args:
        temperature: tau of NeuralSort (default 1, allRank's default).
        k: cutoff of NDCG@K (None = the whole list).
        gain, discount: of :mod:`metrics` (``"exp2"``, ``"log2"`` by default).
        sinkhorn_iters, tol: Sinkhorn scaling rounds (default 50) and the tolerance that ends
            them early (default 1e-6; 0 = always run every round).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``[B]``).
    """

    def __init__(self, temperature: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, discount="log2", sinkhorn_iters: int = 50, tol: float = 1e-6):
        super().__init__()
        if not float(temperature) > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        self.temperature = float(temperature)
        self.k = check_cutoff(k)
        self.gain = gain
        self.discount = discount
        self.sinkhorn_iters = int(sinkhorn_iters)
        self.tol = float(tol)
        self.reduction = check_reduction(reduction)

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        if item_gain is not None:
            item_gain = torch.as_tensor(item_gain, device=scores.device).to(scores.dtype).masked_fill(~mask, 0.0)
        # G = g / IDCG@K, formed without 2^label (finite for labels up to 1023); P is linear.
        gains = normalised_gains(labels, self.k, self.gain, self.discount, mask, item_gain).to(scores.dtype)
        p = sinkhorn(neural_sort(scores, mask, self.temperature), mask, self.sinkhorn_iters, self.tol)
        weighted = gains if weights is None else gains * weights
        sorted_gains = torch.bmm(p, weighted[:, :, None]).squeeze(2)  # (P g)_i
        d = discount_values(rank_positions(scores.shape[1], scores), self.discount, self.k)
        return reduce_per_query(-(sorted_gains * d[None, :]).sum(dim=1), mask, self.reduction).to(out_dtype)

    def extra_repr(self) -> str:
        return (f"temperature={self.temperature}, k={self.k}, gain={self.gain!r}, "
                f"reduction={self.reduction!r}")
