r"""NDCG-Loss1, NDCG-Loss2 and NDCG-Loss2++ of the LambdaLoss framework.

Reference: Xuanhui Wang, Cheng Li, Nadav Golbandi, Michael Bendersky, Marc Najork, "The
LambdaLoss Framework for Ranking Metric Optimization", CIKM 2018 (DOI 10.1145/3269206.3271784).

With the ranking induced by the current scores (stable descending sort; i, j are 1-based rank
positions), G_i = gain_i / IDCG (the normalised gain), D_i = 1/discount(i) (= log2(1 + i) for the
default discount), and, over pairs of real items with label_i > label_j::

    rho_ij   = |1/D_i - 1/D_j|                              (LambdaRank's position term)
    delta_ij = |1/D_{|i-j|} - 1/D_{|i-j|+1}|                (NDCG-Loss2's position term)

    NDCG-Loss2:    loss_q = sum  delta_ij |G_i - G_j|               * w_i * log2(1 + exp(-sigma (s_i - s_j)))
    NDCG-Loss2++:  loss_q = sum (rho_ij + mu delta_ij) |G_i - G_j|  * w_i * log2(1 + exp(-sigma (s_i - s_j)))

and NDCG-Loss1, over every ordered pair of real items (i, j) whatever their labels, j = i included
as in the paper (that term is the constant G_i/D_i)::

    NDCG-Loss1:    loss_q = sum_i sum_j (G_i / D_i) * w_i * log2(1 + exp(-sigma (s_i - s_j)))

The logarithm is base 2 as in the paper (the framework's loss is -log2 of a likelihood).
``rho_ij |G_i - G_j|`` is exactly |ΔNDCG_ij| and is taken from :mod:`metrics.swap`; gains,
discounts and the ideal DCG come from :mod:`metrics` (no second definition here). The weights
are constants for autograd (the paper's hard assignment of the ranking), so the losses go through
the same block-wise pair engine as LambdaRank (``losses.pair_engine``): O(B L^2) time, O(block +
B L) memory. All are computed in at least float32 and returned in the dtype of the scores; the
gains enter only as G = g / IDCG (:func:`metrics.normalised_gains`), finite for labels up to 1023.

``k`` (NDCG@K) is an extension of the 2018 paper, with two ways to apply it (``k_method``):

* ``"truncate"`` (default, LightGBM's truncation level): IDCG and rho are cut at K and only pairs
  with at least one item in the current top K are built (O(B L K)); items ranked below K never
  meet each other, so nothing reorders them among themselves.
* ``"jagerman"``: the top-K weighting of Jagerman, Qin, Wang, Bendersky, Najork, "On Optimizing
  Top-K Metrics for Neural Ranking Models", SIGIR 2022 (LambdaLoss@K): every pair is kept,
  IDCG and rho are cut at K, and delta_ij is multiplied by ``1 / (1 - 1/D_max(i,j))`` when
  ``max(i, j) > K`` (Rax's ``dcg2_lambdaweight(topn=K)``), so pairs below K still pull relevant
  items up towards the top K instead of being dropped.

For NDCG-Loss1, ``k`` cuts D at K (items below K weigh 0) and IDCG at K.

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

from losses._inputs import PAIR_REDUCTIONS, check_inputs, check_reduction, reduce_pairs
from losses.pair_engine import BLOCK_ELEMENTS, all_pairs_logistic, reduced_pairwise
from metrics.discounts import check_cutoff, discount_values, rank_positions
from metrics.swap import prepare_swap_deltas

__all__ = ["NDCGLoss1", "NDCGLoss2", "NDCGLoss2PP", "K_METHODS"]

K_METHODS = ("truncate", "jagerman")


class _LambdaLossWeights:
    """Pair weights (rho_weight * rho + mu * delta * topk) * |G_i - G_j| / ln 2 in rank coordinates.

    ``in_log2=False`` leaves out the 1 / ln 2 (the weights of a loss that is not in base 2).
    """

    def __init__(self, ndcg_deltas, discount, mu: float, with_rho: bool, jagerman_k: int | None = None,
                 in_log2: bool = True):
        self.ndcg = ndcg_deltas
        self.order = ndcg_deltas.order
        g = ndcg_deltas.normalised  # G = g / IDCG in rank order
        n = g.shape[-1]
        # 1/D at ranks 1..n (uncut: delta depends on the distance |i - j| only).
        self.inv_d = discount_values(rank_positions(n + 1, g), discount)
        self.g = g
        self.mu = float(mu)
        self.with_rho = with_rho
        self.to_log2 = 1.0 / math.log(2.0) if in_log2 else 1.0
        self.topk = None if jagerman_k is None else _jagerman_factor(self.inv_d[:n], jagerman_k)

    def block(self, p0, p1, q0, q1):
        out = self.unmasked_block(p0, p1, q0, q1)
        both = self.ndcg.valid[:, p0:p1, None] & self.ndcg.valid[:, None, q0:q1]
        return out * both.to(out.dtype)

    def unmasked_block(self, p0, p1, q0, q1):
        rows = torch.arange(p0, p1, device=self.g.device)[:, None]
        cols = torch.arange(q0, q1, device=self.g.device)[None, :]
        dist = (cols - rows).abs()
        # delta at distance n >= 1 is |d(n) - d(n + 1)|; distance 0 (the diagonal) weighs 0.
        delta = (self.inv_d[(dist - 1).clamp(min=0)] - self.inv_d[dist]).abs() * (dist > 0)
        if self.topk is not None:
            delta = delta * self.topk[torch.maximum(rows, cols)]
        weight = self.mu * delta[None] * (self.g[:, p0:p1, None] - self.g[:, None, q0:q1]).abs()
        if self.with_rho:
            weight = weight + self.ndcg.unmasked_block(p0, p1, q0, q1)
        return weight * self.to_log2


def _jagerman_factor(inv_d: torch.Tensor, k: int) -> torch.Tensor:
    """Per 0-based position p: 1 within the top K, else 1 / (1 - 1/D_{p+1}) (Jagerman et al. 2022)."""
    below = torch.arange(inv_d.shape[0], device=inv_d.device) >= k
    if bool((inv_d[below] >= 1).any()):
        raise ValueError("k_method='jagerman' needs a discount below 1 at ranks beyond k")
    return torch.where(below, 1.0 / (1.0 - torch.where(below, inv_d, torch.zeros_like(inv_d))),
                       torch.ones_like(inv_d))


class NDCGLoss2(nn.Module):
    """NDCG-Loss2 (Wang et al., 2018): ``loss(scores, labels, mask, weights=None, item_gain=None)``.

    Args:
        sigma: slope of the logistic (default 1).
        k: optional cutoff (see the module docstring); None = the paper's loss.
        gain, discount: of ``metrics`` (``"exp2"``, ``"log2"`` by default); per-item gains go to
            ``forward(..., item_gain=...)``.
        reduction: ``"mean"`` (default: per-query sums averaged over queries with a real item),
            ``"sum"``, ``"none"`` (``[B]``), ``"pair_mean"`` or ``"weight_mean"``.
        k_method: ``"truncate"`` (default) or ``"jagerman"``: how ``k`` applies (module docstring).
    """

    _with_rho = False

    def __init__(self, sigma: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, discount="log2", k_method: str = "truncate", block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        if k_method not in K_METHODS:
            raise ValueError(f"k_method must be one of {K_METHODS}, got {k_method!r}")
        self.k = check_cutoff(k)
        self.sigma = float(sigma)
        self.gain = gain
        self.discount = discount
        self.reduction = check_reduction(reduction, PAIR_REDUCTIONS)
        self.k_method = k_method
        self.block_elements = int(block_elements)
        self.mu = 1.0

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        ndcg = prepare_swap_deltas("ndcg", scores, labels, mask, k=self.k, gain=self.gain,
                                   discount=self.discount, item_gain=item_gain)
        jagerman = self.k_method == "jagerman" and self.k is not None
        pair_weight = _LambdaLossWeights(ndcg, self.discount, self.mu, self._with_rho,
                                         self.k if jagerman else None)
        loss = reduced_pairwise(scores, labels, mask, weights, self.reduction, sigma=self.sigma,
                                order=ndcg.order, pair_weight=pair_weight, top=None if jagerman else self.k,
                                block_elements=self.block_elements, base2=True)
        return loss.to(out_dtype)

    def extra_repr(self) -> str:
        method = "" if self.k_method == "truncate" else f", k_method={self.k_method!r}"
        return f"sigma={self.sigma}, k={self.k}, gain={self.gain!r}, reduction={self.reduction!r}{method}"


class NDCGLoss2PP(NDCGLoss2):
    """NDCG-Loss2++ (Wang et al., 2018): LambdaRank's weight plus ``mu`` times NDCG-Loss2's.

    Args: those of :class:`NDCGLoss2`, plus ``mu`` (default 10.0, allRank's default; the paper
    tunes it per data set).
    """

    _with_rho = True

    def __init__(self, sigma: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, mu: float = 10.0, discount="log2", k_method: str = "truncate",
                 block_elements: int = BLOCK_ELEMENTS):
        super().__init__(sigma, k, gain, reduction, discount=discount, k_method=k_method,
                         block_elements=block_elements)
        self.mu = float(mu)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", mu={self.mu}"


class NDCGLoss1(nn.Module):
    """NDCG-Loss1 (Wang et al., 2018): each item i against every item j, weighted G_i / D_i.

    ``loss(scores, labels, mask, weights=None, item_gain=None)``; see the module docstring.
    Labels must give non-negative gains (G_i / D_i is an exponent of a likelihood).

    Args:
        sigma: slope of the logistic (default 1).
        k: None (the paper's loss) or a cutoff: D_i = inf (weight 0) below rank K, IDCG@K.
        gain, discount: of ``metrics`` (``"exp2"``, ``"log2"`` by default).
        reduction: ``"mean"``, ``"sum"``, ``"none"``, ``"pair_mean"`` (over the n^2 ordered pairs
            of each query) or ``"weight_mean"``.
    """

    def __init__(self, sigma: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, discount="log2", block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        self.k = check_cutoff(k)
        self.sigma = float(sigma)
        self.gain = gain
        self.discount = discount
        self.reduction = check_reduction(reduction, PAIR_REDUCTIONS)
        self.block_elements = int(block_elements)

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        ndcg = prepare_swap_deltas("ndcg", scores, labels, mask, k=self.k, gain=self.gain,
                                   discount=self.discount, item_gain=item_gain)
        in_rank = ndcg.normalised * ndcg.discounts[None, :]  # G_i / D_i
        if bool((in_rank < 0).any()):
            raise ValueError("NDCG-Loss1 needs non-negative gains (labels >= 0 with the exp2 gain)")
        item_weight = torch.zeros_like(scores).scatter_(1, ndcg.order, in_rank.to(scores.dtype))
        return item_weighted_all_pairs(scores, mask, item_weight, weights, self.sigma, self.reduction,
                                       self.block_elements, order=ndcg.order).to(out_dtype)

    def extra_repr(self) -> str:
        return f"sigma={self.sigma}, k={self.k}, gain={self.gain!r}, reduction={self.reduction!r}"


def item_weighted_all_pairs(scores, mask, item_weight, weights, sigma, reduction, block_elements, order=None):
    """``sum_i a_i sum_j log2(1 + exp(-sigma (s_i - s_j)))`` over all ordered pairs, j = i included.

    a_i = ``item_weight`` times ``weights`` (when given); reduced by ``reduction`` (the pair count
    of a query with n real items is n^2, its weight sum n * sum_i a_i).
    """
    a = item_weight.masked_fill(~mask, 0.0)
    if weights is not None:
        a = a * weights
    off_diagonal = all_pairs_logistic(scores, mask, a, sigma=sigma, order=order, block_elements=block_elements)
    # j = i: log2(1 + exp(0)) = 1, so the diagonal adds sum_i a_i.
    per_query = off_diagonal / math.log(2.0) + a.sum(dim=1)
    n_items = mask.sum(dim=1).to(scores.dtype)
    return reduce_pairs(per_query, n_items**2, n_items * a.sum(dim=1), mask, reduction)
