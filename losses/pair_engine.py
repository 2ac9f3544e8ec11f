r"""The pairwise logistic engine behind RankNet, LambdaRank and the LambdaLoss family.

For one query, with rank positions p < q of the items (in an order chosen by the caller, padding
last) and s, y, w the scores, labels and item weights in that order::

    loss = sum_{p < q, y_p != y_q}  a_pq * log(1 + exp(-sigma * sgn(y_p - y_q) * (s_p - s_q)))
    a_pq = pair_weight[p, q] * w_i       (i = the item of the pair with the larger label)

so every pair (i, j) with y_i > y_j is counted once, as ``log(1 + exp(-sigma (s_i - s_j)))``.
``pair_weight`` is a detached constant (|Δmetric| for LambdaRank, 1 for RankNet), so the gradient
is the classic lambda: ``d loss / d s_i = -sigma * a_ij * sigmoid(-sigma (s_i - s_j))`` and the
opposite for ``s_j``. With ``margin`` set, the pair's term is the hinge
``max(0, margin - sigma (s_i - s_j))`` instead (gradient ``-sigma a_ij`` where it is positive).

The engine can also return, per query, the number of pairs it built and the sum of their weights
a_ij, so that a loss can average over pairs (or over pair weights) as peers report it.

Why a custom autograd Function: autograd through the [B, L, L] pair graph keeps several [B, L, L]
tensors alive until backward. Here the value and the exact gradient are computed together, block
by block over rows p (each block at most ``block_elements`` pairs, columns only q > p), and only the
``[B, L]`` gradient is kept. Cost: time O(B * T * L) with T = the number of rows (L, or K when the
pairs are truncated to those with an item in the top K), memory O(block_elements + B * L).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from losses._inputs import reduce_pairs

#: Default number of pairs materialised at once (4 MB per float32 temporary). Smaller blocks fit
#: the caches better, larger ones mean fewer multi-threaded kernel launches (each costs a thread
#: wake-up, which dominates on a busy machine); 2^20 was the best compromise measured at
#: (16, 1000) with 1 and 2 threads.
BLOCK_ELEMENTS = 1 << 20


def compact_order(mask: torch.Tensor) -> torch.Tensor:
    """A stable permutation putting real items first (RankNet needs no ranking, only compaction)."""
    return torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices


def pairwise_logistic(
    scores: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    sigma: float = 1.0,
    order: torch.Tensor | None = None,
    pair_weight=None,
    top: int | None = None,
    block_elements: int = BLOCK_ELEMENTS,
    margin: float | None = None,
    with_counts: bool = False,
):
    """Per-query pairwise logistic loss ``[B]`` (see the module docstring), differentiable in ``scores``.

    Args:
        scores, labels, mask, weights: checked ``[B, L]`` tensors (see ``losses._inputs``).
        sigma: slope of the logistic.
        order: ``[B, L]`` permutation giving the rank positions, padding after the real items of
            each row (a ValueError otherwise); default: real items first in input order.
        pair_weight: None (all 1) or an object with ``block(p0, p1, q0, q1) -> [B, p1-p0, q1-q0]``
            giving detached non-negative weights for rank positions p in [p0, p1), q in [q0, q1)
            (e.g. :func:`metrics.prepare_swap_deltas`); its ``unmasked_block`` is used if present.
        top: keep only pairs whose better-ranked item is in the first ``top`` positions.
        block_elements: pairs per block (memory knob; does not change the result).
        margin: None (logistic, the default) or the margin of a hinge on ``sigma (s_i - s_j)``.
        with_counts: also return the per-query number of pairs and sum of pair weights a_ij
            (``(per_query, n_pairs, weight_sum)``, the last two ``[B]`` constants).
    """
    if order is None:
        order = compact_order(mask)
    margin = None if margin is None else float(margin)
    per_query, n_pairs, weight_sum = _PairwiseLogistic.apply(
        scores, labels, mask, weights, float(sigma), order, pair_weight, top, int(block_elements), margin,
        bool(with_counts))
    return (per_query, n_pairs, weight_sum) if with_counts else per_query


def reduced_pairwise(scores, labels, mask, weights, reduction: str, *, base2: bool = False,
                     **engine_options) -> torch.Tensor:
    """:func:`pairwise_logistic` reduced by ``reduction`` (counting pairs only when it needs them).

    ``base2``: the pair weights given hold a factor 1/ln 2 (a loss in log2); the sum of the true
    weights, which ``"weight_mean"`` divides by, is then the engine's sum times ln 2.
    """
    counts = reduction in ("pair_mean", "weight_mean")
    out = pairwise_logistic(scores, labels, mask, weights, with_counts=counts, **engine_options)
    per_query, n_pairs, weight_sum = out if counts else (out, None, None)
    if counts and base2:
        weight_sum = weight_sum * math.log(2.0)
    return reduce_pairs(per_query, n_pairs, weight_sum, mask, reduction)


def all_pairs_logistic(scores, mask, item_weight, *, sigma: float = 1.0, order=None,
                       block_elements: int = BLOCK_ELEMENTS) -> torch.Tensor:
    """Per-query ``sum_i a_i sum_{j != i} log(1 + exp(-sigma (s_i - s_j)))`` over real items ``[B]``.

    Every ordered pair, whatever the labels (the "Loss1" bounds of LambdaLoss weigh item i against
    all others). Done as two passes of the engine with stand-in labels that order every pair one
    way (rank position descending, then ascending), so the memory stays O(block + B L).
    ``item_weight`` (``[B, L]``, non-negative) plays the part of a_i.
    """
    if order is None:
        order = compact_order(mask)
    position = torch.empty_like(scores).scatter_(
        1, order, torch.arange(scores.shape[1], dtype=scores.dtype, device=scores.device).expand_as(scores))
    options = dict(sigma=sigma, order=order, block_elements=block_elements)
    # -position: every earlier item is "better" (pairs i before j); +position: the reverse.
    return (pairwise_logistic(scores, -position, mask, item_weight, **options)
            + pairwise_logistic(scores, position, mask, item_weight, **options))


class _PairwiseLogistic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, labels, mask, weights, sigma, order, pair_weight, top, block_elements, margin,
                with_counts):
        per_query, grad, n_pairs, weight_sum = _value_and_grad(
            scores.detach(), labels, mask, weights, sigma, order, pair_weight, top, block_elements, margin,
            with_counts)
        ctx.save_for_backward(grad)
        ctx.mark_non_differentiable(n_pairs, weight_sum)
        return per_query, n_pairs, weight_sum

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, _grad_pairs, _grad_weights):
        (grad,) = ctx.saved_tensors
        return (grad_out[:, None] * grad,) + (None,) * 10


def _value_and_grad(scores, labels, mask, weights, sigma, order, pair_weight, top, block_elements, margin,
                    with_counts):
    n_batch = scores.shape[0]
    per_query = scores.new_zeros(n_batch)
    n_pairs = scores.new_zeros(n_batch)
    weight_sum = scores.new_zeros(n_batch)
    grad_out = torch.zeros_like(scores)
    n_valid = int(mask.sum(dim=1).max()) if mask.numel() else 0
    if n_valid < 2:
        return per_query, grad_out, n_pairs, weight_sum
    # Rank coordinates, cut after the last real item of the longest query.
    # Padded scores may be NaN or inf; 0 * NaN would leak, so they are zeroed first.
    s = (scores.masked_fill(~mask, 0.0) * sigma).gather(1, order)[:, :n_valid]
    y = labels.gather(1, order)[:, :n_valid]
    m = mask.gather(1, order)[:, :n_valid]
    if bool((m[:, 1:] & ~m[:, :-1]).any()):
        raise ValueError("order must put the padding of every row after its real items")
    # With padding last, a pair p < q is real iff q is: one column factor masks both.
    col_valid = m.to(s.dtype)[:, None, :]
    w = None if weights is None else weights.gather(1, order)[:, :n_valid]
    weight_block = None
    if pair_weight is not None:
        # Values at padded positions are irrelevant here (their sign factor is 0).
        weight_block = getattr(pair_weight, "unmasked_block", pair_weight.block)
    n_rows = n_valid - 1 if top is None else min(int(top), n_valid - 1)
    grad = torch.zeros_like(s)
    p0 = 0
    while p0 < n_rows:
        n_cols = n_valid - p0 - 1
        p1 = min(n_rows, p0 + max(1, block_elements // max(1, n_batch * n_cols)))
        q0 = p0 + 1
        # sgn = sign(y_p - y_q) on real pairs with q > p, else 0 (fewest full-size passes: the
        # engine is bound by memory traffic, one pass per elementwise op).
        sgn = torch.sign(y[:, p0:p1, None] - y[:, None, q0:])
        sgn *= col_valid[:, :, q0:]
        if p1 > q0:  # only the first p1 - q0 columns can hold q <= p
            tri = torch.arange(q0, p1, device=s.device)[None, :] > torch.arange(p0, p1, device=s.device)[:, None]
            sgn[:, :, : p1 - q0] *= tri.to(s.dtype)
        # c = sgn * a_pq: the signed pair weight (a_pq = |c|)
        c = sgn if weight_block is None else sgn * weight_block(p0, p1, q0, n_valid)
        if w is not None:
            c = c * torch.where(sgn > 0, w[:, p0:p1, None], w[:, None, q0:])
        # z = -sigma * (s_better - s_worse); the pair's loss is softplus(z) = -logsigmoid(-z).
        z = s[:, None, q0:] - s[:, p0:p1, None]
        z *= sgn
        a = c.abs()
        if margin is None:
            lam = c * torch.sigmoid(z)  # d loss / d (sigma s_q); d loss / d (sigma s_p) is its negative
            log_p = F.logsigmoid(z.neg_())
            per_query -= torch.bmm(a.view(n_batch, 1, -1), log_p.view(n_batch, -1, 1)).view(n_batch)
        else:  # hinge: max(0, margin + z), slope 1 where positive (0 at the kink)
            z += margin
            lam = c * (z > 0).to(z.dtype)
            term = z.clamp_(min=0.0)
            per_query += torch.bmm(a.view(n_batch, 1, -1), term.view(n_batch, -1, 1)).view(n_batch)
        if with_counts:
            n_pairs += (sgn != 0).sum(dim=(1, 2)).to(s.dtype)
            weight_sum += a.sum(dim=(1, 2))
        grad[:, p0:p1] -= lam.sum(dim=2)
        grad[:, q0:] += lam.sum(dim=1)
        p0 = p1
    # Back from rank coordinates to item coordinates (order is a permutation per row).
    grad_out.scatter_(1, order[:, :n_valid], grad * sigma)
    return per_query, grad_out, n_pairs, weight_sum
