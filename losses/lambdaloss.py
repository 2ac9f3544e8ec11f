r"""NDCG-Loss2 and NDCG-Loss2++ of the LambdaLoss framework.

Reference: Xuanhui Wang, Cheng Li, Nadav Golbandi, Michael Bendersky, Marc Najork, "The
LambdaLoss Framework for Ranking Metric Optimization", CIKM 2018 (DOI 10.1145/3269206.3271784).

With the ranking induced by the current scores (stable descending sort; i, j are 1-based rank
positions), G_i = gain_i / IDCG (the normalised gain), D_i = 1/discount(i) (= log2(1 + i) for the
default discount), and, over pairs of real items with label_i > label_j::

    rho_ij   = |1/D_i - 1/D_j|                              (LambdaRank's position term)
    delta_ij = |1/D_{|i-j|} - 1/D_{|i-j|+1}|                (NDCG-Loss2's position term)

    NDCG-Loss2:    loss_q = sum  delta_ij |G_i - G_j|               * w_i * log2(1 + exp(-sigma (s_i - s_j)))
    NDCG-Loss2++:  loss_q = sum (rho_ij + mu delta_ij) |G_i - G_j|  * w_i * log2(1 + exp(-sigma (s_i - s_j)))

The logarithm is base 2 as in the paper (the framework's loss is -log2 of a likelihood).
``rho_ij |G_i - G_j|`` is exactly |ΔNDCG_ij| and is taken from :mod:`metrics.swap`; gains,
discounts and the ideal DCG come from :mod:`metrics` (no second definition here). The weights
are constants for autograd (the paper's hard assignment of the ranking), so the loss goes through
the same block-wise pair engine as LambdaRank (``losses.pair_engine``): O(B L^2) time (O(B L K)
with ``k``), O(block + B L) memory.

``k`` is an extension, not in the paper: IDCG and rho are cut at K and only pairs with at least
one item in the current top K are built (LightGBM's truncation); ``k=None`` is the paper's loss.

>>> import torch
>>> s = torch.zeros(1, 3); y = torch.tensor([[0.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
>>> loss2 = float(NDCGLoss2(reduction="sum")(s, y, m))
>>> round(loss2, 4)   # two pairs at distance 1: 2 * (1 - 1/log2(3)) * log2(2)
0.7381
"""

from __future__ import annotations

import math

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from losses.pair_engine import BLOCK_ELEMENTS, pairwise_logistic
from metrics.discounts import check_cutoff, discount_values, rank_positions
from metrics.swap import prepare_swap_deltas

__all__ = ["NDCGLoss2", "NDCGLoss2PP"]


class _LambdaLossWeights:
    """Pair weights (rho_weight * rho + mu * delta) * |G_i - G_j| / ln 2 in rank coordinates."""

    def __init__(self, ndcg_deltas, discount, mu: float, with_rho: bool):
        self.ndcg = ndcg_deltas
        self.order = ndcg_deltas.order
        g = ndcg_deltas.gains
        n = g.shape[-1]
        # 1/D at ranks 1..n (uncut: delta depends on the distance |i - j| only).
        self.inv_d = discount_values(rank_positions(n + 1, g), discount)
        self.g = g * ndcg_deltas.inv_ideal[:, None]
        self.mu = float(mu)
        self.with_rho = with_rho
        self.to_log2 = 1.0 / math.log(2.0)

    def block(self, p0, p1, q0, q1):
        out = self.unmasked_block(p0, p1, q0, q1)
        both = self.ndcg.valid[:, p0:p1, None] & self.ndcg.valid[:, None, q0:q1]
        return out * both.to(out.dtype)

    def unmasked_block(self, p0, p1, q0, q1):
        dist = (torch.arange(q0, q1, device=self.g.device)[None, :]
                - torch.arange(p0, p1, device=self.g.device)[:, None]).abs()
        # delta at distance n >= 1 is |d(n) - d(n + 1)|; distance 0 (the diagonal) weighs 0.
        delta = (self.inv_d[(dist - 1).clamp(min=0)] - self.inv_d[dist]).abs() * (dist > 0)
        weight = self.mu * delta[None] * (self.g[:, p0:p1, None] - self.g[:, None, q0:q1]).abs()
        if self.with_rho:
            weight = weight + self.ndcg.unmasked_block(p0, p1, q0, q1)
        return weight * self.to_log2


class NDCGLoss2(nn.Module):
    """NDCG-Loss2 (Wang et al., 2018): ``loss(scores, labels, mask, weights=None, item_gain=None)``.

    Args:
        sigma: slope of the logistic (default 1).
        k: optional truncation (see the module docstring); None = the paper's loss.
        gain, discount: of ``metrics`` (``"exp2"``, ``"log2"`` by default); per-item gains go to
            ``forward(..., item_gain=...)``.
        reduction: ``"mean"`` (default: per-query sums averaged over queries with a real item),
            ``"sum"`` or ``"none"`` (``[B]``).
    """

    _with_rho = False

    def __init__(self, sigma: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, discount="log2", block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        self.k = check_cutoff(k)
        self.sigma = float(sigma)
        self.gain = gain
        self.discount = discount
        self.reduction = check_reduction(reduction)
        self.block_elements = int(block_elements)
        self.mu = 1.0

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights)
        ndcg = prepare_swap_deltas("ndcg", scores, labels, mask, k=self.k, gain=self.gain,
                                   discount=self.discount, item_gain=item_gain)
        pair_weight = _LambdaLossWeights(ndcg, self.discount, self.mu, self._with_rho)
        per_query = pairwise_logistic(scores, labels, mask, weights, sigma=self.sigma, order=ndcg.order,
                                      pair_weight=pair_weight, top=self.k,
                                      block_elements=self.block_elements)
        return reduce_per_query(per_query, mask, self.reduction)

    def extra_repr(self) -> str:
        return f"sigma={self.sigma}, k={self.k}, gain={self.gain!r}, reduction={self.reduction!r}"


class NDCGLoss2PP(NDCGLoss2):
    """NDCG-Loss2++ (Wang et al., 2018): LambdaRank's weight plus ``mu`` times NDCG-Loss2's.

    Args: those of :class:`NDCGLoss2`, plus ``mu`` (default 10.0, allRank's default; the paper
    tunes it per data set).
    """

    _with_rho = True

    def __init__(self, sigma: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, mu: float = 10.0, discount="log2", block_elements: int = BLOCK_ELEMENTS):
        super().__init__(sigma, k, gain, reduction, discount=discount, block_elements=block_elements)
        self.mu = float(mu)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", mu={self.mu}"
