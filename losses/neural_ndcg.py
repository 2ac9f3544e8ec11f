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
w multiply the gains (w_i g_i). Computed in at least float32, returned in the dtype of the scores;
the gains enter as g / IDCG@K (:func:`metrics.normalised_gains`), finite for labels up to 1023.

How it is computed (the values are those of the formulas above; :func:`neural_sort` and
:func:`sinkhorn` remain the direct, matrix-at-every-round form of the same thing): each Sinkhorn
round multiplies rows and columns by factors, so after any number of rounds the scaled matrix is
``diag(u) P diag(v)`` and a round needs only the two products ``P^T u`` and ``P v``. P is built
once, in blocks of rows, and the loss ``-(d * u)^T P (v * w g)`` comes from those vectors. The
backward pass runs the rounds in reverse on the same vectors (a custom autograd function), so the
gradient of P is a sum of 2T + 1 outer products, formed block by block and pushed straight
through the softmax into the scores. Memory: P and a row-major copy of P^T plus O(block + T B L),
i.e. 2 B L^2 values instead of the ~2T copies of P that autograd through the matrix rounds kept
(about 7 GB at B = 16, L = 1000; see docs/benchmarks.md); time: 2 matrix-vector products per
round each way. (A_v 1)_j =
sum_k |v_j - v_k| is computed in O(L log L) from a sort, in float64.

>>> import torch
>>> s = torch.tensor([[5.0, 0.0]]); y = torch.tensor([[1.0, 0.0]])
>>> round(float(NeuralNDCG(temperature=0.01, reduction="sum")(s, y)), 6)   # sorted already: -1
-1.0
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

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


#: Entries of P (rows x items x batch) materialised at once outside P itself (4M: 16 MB in float32).
BLOCK_ELEMENTS = 1 << 22


def spread(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(A 1)_j = sum_{real k} |s_j - s_k|`` for real j (0 on padding), from one sort, in float64.

    With the real values sorted ascending, x_p at position p of n: ``x_p p - sum_{q<p} x_q +
    sum_{q>p} x_q - x_p (n - 1 - p)``. Differentiable (through the sort's values).
    """
    x = scores.double().masked_fill(~mask, float("inf"))
    values, index = torch.sort(x, dim=1)
    n = mask.sum(dim=1, keepdim=True)
    pos = torch.arange(x.shape[1], device=x.device)[None, :]
    real = pos < n
    values = values.masked_fill(~real, 0.0)
    csum = values.cumsum(dim=1)
    before = csum - values
    after = csum[:, -1:] - csum
    posf = pos.to(values.dtype)
    out = values * posf - before + after - values * (n.to(values.dtype) - 1.0 - posf)
    out = torch.zeros_like(out).scatter(1, index, out.masked_fill(~real, 0.0))
    return out.to(scores.dtype)


def _bvm(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``x^T m`` = ``m^T x`` for batches ``[B, L]`` and ``[B, L, L]`` (reads m row by row)."""
    return torch.bmm(x[:, None, :], m).squeeze(1)


def _row_blocks(batch: int, length: int, block_elements: int):
    rows = max(1, block_elements // max(1, batch * length))
    return [(r, min(length, r + rows)) for r in range(0, length, rows)]


class _ScaledNeuralNDCG(torch.autograd.Function):
    """Per-query ``-(d * u)^T P (v * h)`` with P = NeuralSort(s) and u, v the Sinkhorn factors."""

    @staticmethod
    def forward(ctx, s, spread_s, mask, h, d, temperature, iterations, tol, block_elements):
        s, spread_s = s.detach(), spread_s.detach()
        real_rows = torch.arange(s.shape[1], device=s.device)[None, :] < mask.sum(dim=1, keepdim=True)
        coef = (mask.sum(dim=1, keepdim=True).to(s.dtype) + 1.0
                - 2.0 * torch.arange(1, s.shape[1] + 1, device=s.device, dtype=s.dtype)[None, :])
        p = torch.empty(s.shape[0], s.shape[1], s.shape[1], dtype=s.dtype, device=s.device)
        for r0, r1 in _row_blocks(s.shape[0], s.shape[1], block_elements):
            logits = (coef[:, r0:r1, None] * s[:, None, :] - spread_s[:, None, :]) / temperature
            logits = logits.masked_fill(~mask[:, None, :], torch.finfo(s.dtype).min)
            p[:, r0:r1] = torch.softmax(logits, dim=2) * real_rows[:, r0:r1, None].to(s.dtype)
        # P and P^T both row-major: x^T M reads M row by row, which measured 2x faster than M x.
        pt = p.transpose(1, 2).contiguous()
        u = torch.ones_like(s)
        rounds = [u]  # u_0, then (v_t, u_t) pairs
        a = _bvm(u, p)
        for _ in range(iterations):
            v = torch.where(mask & (a > 0), 1.0 / torch.where(a > 0, a, torch.ones_like(a)), torch.ones_like(a))
            b = _bvm(v, pt)
            u = torch.where(real_rows & (b > 0), 1.0 / torch.where(b > 0, b, torch.ones_like(b)), torch.ones_like(b))
            rounds += [v, u]
            a = _bvm(u, p)
            if tol > 0 and s.numel() and float(((v * a - 1.0).abs() * mask).max()) < tol:
                break
        v = rounds[-2] if len(rounds) > 1 else torch.ones_like(s)
        ctx.save_for_backward(p, pt, coef, mask, real_rows, h, d, *rounds)
        ctx.temperature, ctx.block_elements = temperature, block_elements
        return -((d * u) * _bvm(v * h, pt)).sum(dim=1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        p, pt, coef, mask, real_rows, h, d, *rounds = ctx.saved_tensors
        go = grad_out[:, None].to(p.dtype)
        u_t = rounds[-1]
        v_t = rounds[-2] if len(rounds) > 1 else torch.ones_like(u_t)
        left, right = [-go * d * u_t], [v_t * h]  # the loss's own dependence on P
        gu = -go * d * _bvm(v_t * h, pt)
        gv = -go * h * _bvm(d * u_t, p)
        for t in range(len(rounds) // 2, 0, -1):  # round t: v_t = 1/(P^T u_{t-1}), u_t = 1/(P v_t)
            u_prev, v_t, u_t = rounds[2 * t - 2], rounds[2 * t - 1], rounds[2 * t]
            gb = torch.where(real_rows, -gu * u_t * u_t, torch.zeros_like(gu))
            left.append(gb)
            right.append(v_t)
            gv = gv + _bvm(gb, p)
            ga = torch.where(mask, -gv * v_t * v_t, torch.zeros_like(gv))
            left.append(u_prev)
            right.append(ga)
            gu = _bvm(ga, pt)
            gv = torch.zeros_like(gv)
        lf, rf = torch.stack(left, dim=2), torch.stack(right, dim=1)  # [B, L, R], [B, R, L]
        grad_s = torch.zeros_like(u_t)
        grad_spread = torch.zeros_like(u_t)
        for r0, r1 in _row_blocks(p.shape[0], p.shape[1], ctx.block_elements):
            g = torch.bmm(lf[:, r0:r1], rf)  # d loss / d P for these rows
            pb = p[:, r0:r1]
            g = pb * (g - (g * pb).sum(dim=2, keepdim=True))  # through the softmax (0 where P is)
            grad_s += (g * coef[:, r0:r1, None]).sum(dim=1) / ctx.temperature
            grad_spread -= g.sum(dim=1) / ctx.temperature
        return grad_s, grad_spread, None, None, None, None, None, None, None


class NeuralNDCG(nn.Module):
    """NeuralNDCG loss module: ``loss(scores, labels, mask, weights=None, item_gain=None)``.

    Args:
        temperature: tau of NeuralSort (default 1, allRank's default).
        k: cutoff of NDCG@K (None = the whole list).
        gain, discount: of :mod:`metrics` (``"exp2"``, ``"log2"`` by default).
        sinkhorn_iters, tol: Sinkhorn scaling rounds (default 50) and the tolerance that ends
            them early (default 1e-6; 0 = always run every round).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``[B]``).
        block_elements: entries of P handled at once beyond P itself (memory only).
    """

    def __init__(self, temperature: float = 1.0, k: int | None = None, gain="exp2", reduction: str = "mean",
                 *, discount="log2", sinkhorn_iters: int = 50, tol: float = 1e-6,
                 block_elements: int = BLOCK_ELEMENTS):
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
        self.block_elements = int(block_elements)

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        if item_gain is not None:
            item_gain = torch.as_tensor(item_gain, device=scores.device).to(scores.dtype).masked_fill(~mask, 0.0)
        # G = g / IDCG@K, formed without 2^label (finite for labels up to 1023); P is linear.
        gains = normalised_gains(labels, self.k, self.gain, self.discount, mask, item_gain).to(scores.dtype)
        weighted = gains if weights is None else gains * weights
        d = discount_values(rank_positions(scores.shape[1], scores), self.discount, self.k)
        s = scores.masked_fill(~mask, 0.0)
        per_query = _ScaledNeuralNDCG.apply(s, spread(s, mask), mask, weighted.detach(), d[None, :].expand_as(s),
                                            self.temperature, self.sinkhorn_iters, self.tol, self.block_elements)
        return reduce_per_query(per_query, mask, self.reduction).to(out_dtype)

    def extra_repr(self) -> str:
        return (f"temperature={self.temperature}, k={self.k}, gain={self.gain!r}, "
                f"reduction={self.reduction!r}")
