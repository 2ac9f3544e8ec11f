r"""Swap deltas: |metric(ranking) - metric(ranking with the items at two positions swapped)|.

This is the bridge between evaluation and training: LambdaRank weights the pair (i, j) by the
change of the metric when i and j trade places in the ranking induced by the current scores.
The metric is the one ``metrics`` evaluates, built from the same gain, discount and ideal DCG
(:func:`metrics.gain_values`, :func:`metrics.discount_values`, :func:`metrics.ideal_dcg`).

Ranking: a stable descending sort of the scores (ties keep the input order), padding last.
In rank-position coordinates p < q (0-based) of one list:

* NDCG@K:  ``|g_p - g_q| * |d(p+1) - d(q+1)| / IDCG@K``, with d = 0 beyond K; 0 when IDCG = 0.
* RR@K (first relevant position f, second f2; r = label >= threshold; RR(x) = 1/(x+1) if x < K)::

      r_p > r_q and p == f:  RR(f) - RR(min(q, f2))
      r_p < r_q and p <  f:  RR(p) - RR(f)
      otherwise 0
* AP@K, with c the inclusive cumulative count of relevant items, P_x = sum_{i<=x, i<K} r_i/(i+1),
  N = |R| (``map_norm="R"``) or min(|R|, K) (``"min(R,K)"``)::

      [r_p != r_q] [p < K] * | (c_p - r_p + 1)/(p+1) - [q < K] c_q/(q+1) + P_{q-1} - P_p | / N

  (moving a relevant item from p down to q changes its own precision term and takes one hit
  away from every relevant item strictly between them; the reverse move adds them back).

The formulas are written once, array-agnostically, and serve both the numpy functions (one list,
item order) and the batched torch ones (rank order, padding honoured, optionally only the first
``top`` rows, so the cost is ``L * top``). torch is imported lazily, only by the torch functions.

Seed numbers: one relevant item (grade 1) in a slate of 10, moved down one place from rank r:

>>> scores = -np.arange(10.0)                               # item i at rank i + 1
>>> [round(float(ndcg_swap_deltas(scores, np.eye(10)[r - 1])[r - 1, r]), 4) for r in (1, 2, 3, 9)]
[0.3691, 0.1309, 0.0693, 0.012]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.dcg import normalised_gains
from metrics.discounts import check_cutoff, discount_values, rank_positions
from metrics.gains import is_torch

__all__ = [
    "ndcg_swap_deltas",
    "mrr_swap_deltas",
    "ap_swap_deltas",
    "ndcg_swap_deltas_torch",
    "mrr_swap_deltas_torch",
    "ap_swap_deltas_torch",
    "prepare_swap_deltas",
    "ranking_order",
    "SWAP_METRICS",
]

SWAP_METRICS = ("ndcg", "mrr", "ap")
AP_NORMS = ("R", "min(R,K)")  # the values of metrics.Conventions.map_norm


# ---------------------------------------------------------------- array-agnostic helpers
def _where(cond, a, b):
    if is_torch(cond):
        import torch

        return torch.where(cond, a, b)
    return np.where(cond, a, b)


def _minimum(a, b):
    if is_torch(a):
        import torch

        return torch.minimum(a, b)
    return np.minimum(a, b)


def _maximum(a, b):
    if is_torch(a):
        import torch

        return torch.maximum(a, b)
    return np.maximum(a, b)


def _arange(n, like):
    if is_torch(like):
        import torch

        return torch.arange(n, device=like.device)
    return np.arange(n)


def _cumsum(x):
    return x.cumsum(-1) if is_torch(x) else np.cumsum(x, axis=-1)


def _to_float(mask, like):
    return mask.to(like.dtype) if is_torch(like) else mask.astype(like.dtype)


def ranking_order(scores, mask=None):
    """Rank order of each row: stable descending sort of ``scores [B, L]``, padding last.

    Returns ``order [B, L]`` (``order[b, p]`` = the item at 0-based rank position p); numpy or
    torch like the input.

    >>> ranking_order(np.array([[1.0, 3.0, 3.0, 2.0]]), np.array([[True, True, False, True]]))
    array([[1, 3, 0, 2]])
    """
    if is_torch(scores):
        import torch

        s = scores.detach()
        valid = torch.ones_like(s, dtype=torch.bool) if mask is None else mask.bool()
        s = s.masked_fill(~valid, 0.0)
        by_score = torch.sort(s, dim=-1, descending=True, stable=True).indices
        # Second stable pass: real items first, keeping the score order among them.
        valid_first = torch.sort((~valid.gather(-1, by_score)).to(torch.uint8), dim=-1, stable=True).indices
        return by_score.gather(-1, valid_first)
    s = np.asarray(scores, dtype=np.float64)
    valid = np.ones(s.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    # lexsort: the last key is primary (real items first), then descending score, then input order.
    return np.lexsort((-np.where(valid, s, 0.0), ~valid), axis=-1)


# ---------------------------------------------------------------- the three delta definitions
class _SwapDeltas:
    """Deltas for one batch in rank coordinates; ``block`` gives any rectangle of the matrix."""

    order: Any
    valid: Any  # [B, L] bool, in rank order

    def block(self, p0: int, p1: int, q0: int, q1: int):
        """Deltas for rank positions p in [p0, p1) and q in [q0, q1): shape ``[B, p1-p0, q1-q0]``."""
        out = self._block(p0, p1, q0, q1)
        both = self.valid[:, p0:p1, None] & self.valid[:, None, q0:q1]
        return out * _to_float(both, out)

    def unmasked_block(self, p0: int, p1: int, q0: int, q1: int):
        """``block`` without the final masking: entries that involve padding are unspecified.

        For callers that zero those pairs themselves (the loss engine): one pass fewer.
        """
        return self._block(p0, p1, q0, q1)


class NDCGSwapDeltas(_SwapDeltas):
    """|ΔNDCG@K| in rank coordinates (attributes reusable by other NDCG-based weights).

    Attributes: ``normalised`` [B, L] = g / IDCG@K in rank order (0 on padding and when
    IDCG@K <= 0; from :func:`metrics.normalised_gains`, so labels up to 1023 stay finite),
    ``discounts`` [L] (0 beyond K), ``valid`` [B, L], ``order`` [B, L]. Torch tensors are
    computed in at least float32 whatever the dtype of the scores.
    """

    def __init__(self, scores, labels, mask, *, k=None, gain="exp2", discount="log2", item_gain=None):
        self.order = ranking_order(scores, mask)
        self.valid = _take(mask, self.order)
        normalised = normalised_gains(labels, k, gain, discount, mask, item_gain)
        self.normalised = _take(normalised, self.order)
        self.discounts = discount_values(rank_positions(normalised.shape[-1], normalised), discount, k)

    def _block(self, p0, p1, q0, q1):
        g, d = self.normalised, self.discounts
        dg = abs(g[:, p0:p1, None] - g[:, None, q0:q1])
        dd = abs(d[p0:p1, None] - d[None, q0:q1])
        dg *= dd[None]
        return dg


class _BinarySwapDeltas(_SwapDeltas):
    def __init__(self, scores, labels, mask, *, k=None, threshold=1.0):
        self.order = ranking_order(scores, mask)
        self.valid = _take(mask, self.order)
        labels_sorted = _take(labels, self.order)
        self.rel = _to_float(self.valid & (labels_sorted >= threshold), labels_sorted)
        n = labels_sorted.shape[-1]
        self.cut = n if k is None else min(int(k), n)
        pos = _arange(n, labels_sorted)
        self.pos = pos
        self.in_cut = _to_float(pos < self.cut, labels_sorted)  # [L]
        self.recip = self.in_cut / (pos + 1.0)  # 1/(x+1) inside the cutoff, else 0

    def _ab(self, p0, p1, q0, q1):
        rows = self.pos[p0:p1, None] + 0 * self.pos[None, q0:q1]
        cols = self.pos[None, q0:q1] + 0 * self.pos[p0:p1, None]
        return _minimum(rows, cols), _maximum(rows, cols)


class MRRSwapDeltas(_BinarySwapDeltas):
    """|ΔRR@K| in rank coordinates (relevant = label >= threshold)."""

    def __init__(self, scores, labels, mask, *, k=None, threshold=1.0):
        super().__init__(scores, labels, mask, k=k, threshold=threshold)
        count = _cumsum(self.rel)
        # First and second relevant positions (n when absent): count how many prefixes lack them.
        self.first = _to_float(count < 1, count).sum(-1)
        self.second = _to_float(count < 2, count).sum(-1)
        # RR of a first hit at position x = 0..n (n = no hit): 1/(x+1) inside the cutoff.
        self.rr = _concat(self.recip, 0.0 * self.recip[:1])
        self.first_i = _as_index(self.first)
        self.second_i = _as_index(self.second)

    def _block(self, p0, p1, q0, q1):
        a, b = self._ab(p0, p1, q0, q1)
        ra, rb = self.rel[:, a], self.rel[:, b]
        f = self.first_i[:, None, None]
        f2 = self.second_i[:, None, None]
        rr_f = self.rr[f]
        down = (ra > rb) & (a[None] == f)  # the first hit moves down to b
        up = (ra < rb) & (a[None] < f)  # a relevant item from below jumps above the first hit
        zero = 0.0 * ra
        value = _where(down, rr_f - self.rr[_minimum(b[None] + 0 * f, f2 + 0 * b[None])], zero)
        value = _where(up, self.rr[a][None] - rr_f, value)
        return abs(value)


class APSwapDeltas(_BinarySwapDeltas):
    """|ΔAP@K| in rank coordinates (relevant = label >= threshold; divided by |R| or min(|R|, K))."""

    def __init__(self, scores, labels, mask, *, k=None, threshold=1.0, map_norm="R"):
        super().__init__(scores, labels, mask, k=k, threshold=threshold)
        if map_norm not in AP_NORMS:
            raise ValueError(f"map_norm must be one of {AP_NORMS}, got {map_norm!r}")
        self.count = _cumsum(self.rel)
        self.prec_sum = _cumsum(self.rel * self.recip)  # P_x: sum of r_i/(i+1) over i <= x, i < K
        n_rel = self.count[:, -1] if self.rel.shape[-1] else self.rel.sum(-1)
        if map_norm == "min(R,K)":
            n_rel = _minimum(n_rel, 0.0 * n_rel + self.cut)
        self.inv_norm = _where(n_rel > 0, 1.0 / _where(n_rel > 0, n_rel, 1.0 + 0.0 * n_rel), 0.0 * n_rel)

    def _block(self, p0, p1, q0, q1):
        a, b = self._ab(p0, p1, q0, q1)
        ra, rb = self.rel[:, a], self.rel[:, b]
        ca, cb = self.count[:, a], self.count[:, b]
        own = (ca - ra + 1.0) / (a + 1.0)[None]
        other = cb * self.recip[b][None]
        between = self.prec_sum[:, _maximum(b - 1, a)] - self.prec_sum[:, a]
        value = (own * self.in_cut[a][None] - other + between) * self.inv_norm[:, None, None]
        differ = (ra != rb) & (a < self.cut)[None]
        return _where(differ, abs(value), 0.0 * value)


def _take(x, order):
    return x.gather(-1, order) if is_torch(x) else np.take_along_axis(x, order, axis=-1)


def _concat(a, b):
    if is_torch(a):
        import torch

        return torch.cat([a, b])
    return np.concatenate([a, b])


def _as_index(x):
    return x.long() if is_torch(x) else x.astype(np.int64)


# ---------------------------------------------------------------- public entry points
def prepare_swap_deltas(metric, scores, labels, mask=None, *, k=None, gain="exp2", discount="log2",
                        item_gain=None, threshold=1.0, map_norm="R"):
    """Prepare the swap deltas of a batch without materialising them.

    Returns an object with ``order [B, L]`` (the ranking), ``valid [B, L]`` (the mask in rank order)
    and ``block(p0, p1, q0, q1)``: the deltas for rank positions p in [p0, p1), q in [q0, q1) as a
    ``[B, p1-p0, q1-q0]`` array, 0 on padding and on p == q. Losses use it to build the pairs in
    blocks, so the memory stays bounded for long lists. numpy or torch (detached) like ``scores``.

    Torch blocks come in at least float32 (float64 for float64 scores), whatever the dtype of the
    scores, so half-precision scores neither round the labels nor lose small deltas.

    ``metric``: ``"ndcg"`` (uses gain, discount, item_gain), ``"mrr"`` or ``"ap"`` (use threshold;
    AP also ``map_norm``: ``"R"`` = |R| in the list, ``"min(R,K)"`` = min(|R|, K), as in
    :class:`metrics.Conventions`).
    """
    torch_in = is_torch(scores)
    if torch_in:
        import torch

        scores = scores.detach()
        dtype = scores.dtype if scores.is_floating_point() else torch.get_default_dtype()
        # Labels, gains and deltas in at least float32: half precision would round labels above
        # 256 (bfloat16) and lose the small deltas; the caller casts the blocks it uses.
        dtype = torch.promote_types(dtype, torch.float32)
        labels = torch.as_tensor(labels, device=scores.device).detach().to(dtype)
        mask = torch.ones_like(labels, dtype=torch.bool) if mask is None else torch.as_tensor(mask, device=scores.device).bool()
        labels = labels.masked_fill(~mask, 0.0)
        if item_gain is not None:
            item_gain = torch.as_tensor(item_gain, device=scores.device).detach().to(dtype).masked_fill(~mask, 0.0)
    else:
        scores = np.asarray(scores, dtype=np.float64)
        labels = np.asarray(labels, dtype=np.float64)
        mask = np.ones(labels.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        labels = np.where(mask, labels, 0.0)
        if item_gain is not None:
            item_gain = np.where(mask, np.asarray(item_gain, dtype=np.float64), 0.0)
    if tuple(labels.shape) != tuple(scores.shape) or tuple(mask.shape) != tuple(scores.shape):
        raise ValueError(f"scores {tuple(scores.shape)}, labels {tuple(labels.shape)} and mask "
                         f"{tuple(mask.shape)} must have the same shape")
    check_cutoff(k)
    if metric == "ndcg":
        return NDCGSwapDeltas(scores, labels, mask, k=k, gain=gain, discount=discount, item_gain=item_gain)
    if metric == "mrr":
        return MRRSwapDeltas(scores, labels, mask, k=k, threshold=threshold)
    if metric == "ap":
        return APSwapDeltas(scores, labels, mask, k=k, threshold=threshold, map_norm=map_norm)
    raise ValueError(f"unknown swap metric {metric!r}: use one of {SWAP_METRICS}")


def _numpy_matrix(metric, scores, labels, **kw):
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1:
        raise ValueError(f"scores must be one list (1-D), got shape {scores.shape}")
    item_gain = kw.pop("item_gain", None)
    prepared = prepare_swap_deltas(metric, scores[None], np.asarray(labels, dtype=np.float64)[None],
                                   item_gain=None if item_gain is None else np.asarray(item_gain)[None], **kw)
    n = scores.shape[0]
    in_rank = prepared.block(0, n, 0, n)[0]
    rank = np.empty(n, dtype=np.int64)
    rank[prepared.order[0]] = np.arange(n)
    return in_rank[np.ix_(rank, rank)]


def _torch_matrix(metric, scores, labels, mask, top, **kw):
    import torch

    with torch.no_grad():
        prepared = prepare_swap_deltas(metric, scores, labels, mask, **kw)
        n = scores.shape[-1]
        rows = n if top is None else max(0, min(int(top), n))
        deltas = prepared.block(0, rows, 0, n)
        if scores.is_floating_point():
            deltas = deltas.to(scores.dtype)
        return deltas, prepared.order


def ndcg_swap_deltas(scores, labels, *, k=None, gain="exp2", discount="log2", item_gain=None):
    """``[L, L]`` matrix of |ΔNDCG@K| for swapping items i and j of one list (item order, numpy).

    >>> m = ndcg_swap_deltas(np.array([2.0, 1.0, 0.0]), np.array([0, 1, 0]))
    >>> round(float(m[0, 1]), 4), float(m[0, 2]), float(m[1, 1])
    (0.3691, 0.0, 0.0)
    """
    return _numpy_matrix("ndcg", scores, labels, k=k, gain=gain, discount=discount, item_gain=item_gain)


def mrr_swap_deltas(scores, labels, *, k=None, threshold=1.0):
    """``[L, L]`` matrix of |ΔRR@K| for swapping items i and j of one list (item order, numpy).

    >>> m = mrr_swap_deltas(np.array([3.0, 2.0, 1.0]), np.array([0, 1, 0]))
    >>> float(m[0, 1]), round(float(m[1, 2]), 6), float(m[0, 2])    # RR 1/2 -> 1, 1/2 -> 1/3
    (0.5, 0.166667, 0.0)
    """
    return _numpy_matrix("mrr", scores, labels, k=k, threshold=threshold)


def ap_swap_deltas(scores, labels, *, k=None, threshold=1.0, map_norm="R"):
    """``[L, L]`` matrix of |ΔAP@K| for swapping items i and j of one list (item order, numpy).

    >>> m = ap_swap_deltas(np.array([3.0, 2.0, 1.0]), np.array([1, 0, 1]))
    >>> round(float(m[0, 1]), 6)    # AP 5/6 -> (1/2 + 2/3)/2 = 7/12
    0.25
    """
    return _numpy_matrix("ap", scores, labels, k=k, threshold=threshold, map_norm=map_norm)


def ndcg_swap_deltas_torch(scores, labels, mask=None, *, k=None, gain="exp2", discount="log2",
                           item_gain=None, top=None):
    """Batched |ΔNDCG@K| in rank coordinates: ``(deltas [B, T, L], order [B, L])``, no autograd.

    ``order`` is the stable descending sort of ``scores`` with padding last; ``deltas[b, p, q]``
    is the change for swapping the items at rank positions p and q, for p < T (T = L, or
    min(top, L)); 0 on padding and on p == q. Computed in at least float32 (labels up to 1023
    included, see :func:`metrics.normalised_gains`), returned in the dtype of ``scores``.
    """
    return _torch_matrix("ndcg", scores, labels, mask, top, k=k, gain=gain, discount=discount,
                         item_gain=item_gain)


def mrr_swap_deltas_torch(scores, labels, mask=None, *, k=None, top=None, threshold=1.0):
    """Batched |ΔRR@K| in rank coordinates: ``(deltas [B, T, L], order [B, L])`` (see the NDCG one)."""
    return _torch_matrix("mrr", scores, labels, mask, top, k=k, threshold=threshold)


def ap_swap_deltas_torch(scores, labels, mask=None, *, k=None, top=None, threshold=1.0,
                         map_norm="R"):
    """Batched |ΔAP@K| in rank coordinates: ``(deltas [B, T, L], order [B, L])`` (see the NDCG one)."""
    return _torch_matrix("ap", scores, labels, mask, top, k=k, threshold=threshold, map_norm=map_norm)
