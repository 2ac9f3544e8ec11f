r"""The pairwise logistic engine behind RankNet, LambdaRank and the LambdaLoss family.

For one query, with rank positions p < q of the items (in an order chosen by the caller, padding
last) and s, y, w the scores, labels and item weights in that order::

    loss = sum_{p < q, y_p != y_q}  a_pq * log(1 + exp(-sigma * sgn(y_p - y_q) * (s_p - s_q)))
    a_pq = pair_weight[p, q] * w_i       (i = the item of the pair with the larger label)

so every pair (i, j) with y_i > y_j is counted once, as ``log(1 + exp(-sigma (s_i - s_j)))``.
``pair_weight`` is a detached constant (|Δmetric| for LambdaRank, 1 for RankNet), so the gradient
is the classic lambda: ``d loss / d s_i = -sigma * a_ij * sigmoid(-sigma (s_i - s_j))`` and the
opposite for ``s_j``.

Why a custom autograd Function: autograd through the [B, L, L] pair graph keeps several [B, L, L]
tensors alive until backward. Here the value and the exact gradient are computed together, block
by block over rows p (each block at most ``block_elements`` pairs, columns only q > p), and only the
``[B, L]`` gradient is kept. Cost: time O(B * T * L) with T = the number of rows (L, or K when the
pairs are truncated to those with an item in the top K), memory O(block_elements + B * L).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

#: Default number of pairs materialised at once (about 2 MB per float64 temporary: cache-sized blocks ran fastest here).
BLOCK_ELEMENTS = 1 << 18


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
) -> torch.Tensor:
    """Per-query pairwise logistic loss ``[B]`` (see the module docstring), differentiable in ``scores``.

    Args:
        scores, labels, mask, weights: checked ``[B, L]`` tensors (see ``losses._inputs``).
        sigma: slope of the logistic.
        order: ``[B, L]`` permutation giving the rank positions (padding last); default: real
            items first in input order.
        pair_weight: None (all 1) or an object with ``block(p0, p1, q0, q1) -> [B, p1-p0, q1-q0]``
            giving detached non-negative weights for rank positions p in [p0, p1), q in [q0, q1).
        top: keep only pairs whose better-ranked item is in the first ``top`` positions.
        block_elements: pairs per block (memory knob; does not change the result).
    """
    if order is None:
        order = compact_order(mask)
    return _PairwiseLogistic.apply(scores, labels, mask, weights, float(sigma), order, pair_weight,
                                   top, int(block_elements))


class _PairwiseLogistic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, labels, mask, weights, sigma, order, pair_weight, top, block_elements):
        per_query, grad = _value_and_grad(scores.detach(), labels, mask, weights, sigma, order,
                                          pair_weight, top, block_elements)
        ctx.save_for_backward(grad)
        return per_query

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad_out[:, None] * grad, None, None, None, None, None, None, None, None


def _value_and_grad(scores, labels, mask, weights, sigma, order, pair_weight, top, block_elements):
    n_batch, n_items = scores.shape
    per_query = scores.new_zeros(n_batch)
    grad_out = torch.zeros_like(scores)
    n_valid = int(mask.sum(dim=1).max()) if n_items else 0
    if n_valid < 2:
        return per_query, grad_out
    # Rank coordinates, cut after the last real item of the longest query (padding is last).
    # Padded scores may be NaN or inf; 0 * NaN would leak, so they are zeroed first.
    s = scores.masked_fill(~mask, 0.0).gather(1, order)[:, :n_valid]
    y = labels.gather(1, order)[:, :n_valid]
    m = mask.gather(1, order)[:, :n_valid]
    w = None if weights is None else weights.gather(1, order)[:, :n_valid]
    n_rows = n_valid - 1 if top is None else min(int(top), n_valid - 1)
    grad = torch.zeros_like(s)
    positions = torch.arange(n_valid, device=s.device)
    p0 = 0
    while p0 < n_rows:
        n_cols = n_valid - p0 - 1
        p1 = min(n_rows, p0 + max(1, block_elements // max(1, n_batch * n_cols)))
        q0 = p0 + 1
        sgn = torch.sign(y[:, p0:p1, None] - y[:, None, q0:])
        keep = (positions[q0:][None, :] > positions[p0:p1, None])[None] & (sgn != 0)
        keep &= m[:, p0:p1, None] & m[:, None, q0:]
        a = keep.to(s.dtype)
        if pair_weight is not None:
            a = a * pair_weight.block(p0, p1, q0, n_valid)
        if w is not None:
            a = a * torch.where(sgn > 0, w[:, p0:p1, None], w[:, None, q0:])
        # z = -sigma * (s_better - s_worse); the pair's loss is softplus(z) = -logsigmoid(-z).
        z = (s[:, None, q0:] - s[:, p0:p1, None]) * (sigma * sgn)
        per_query += (a * -F.logsigmoid(-z)).sum(dim=(1, 2))
        lam = a * torch.sigmoid(z) * (sigma * sgn)  # d loss / d s_q; d loss / d s_p is its negative
        grad[:, p0:p1] -= lam.sum(dim=2)
        grad[:, q0:] += lam.sum(dim=1)
        p0 = p1
    # Back from rank coordinates to item coordinates (order is a permutation per row).
    grad_out.scatter_(1, order[:, :n_valid], grad)
    return per_query, grad_out
