r"""LambdaRank (Burges et al., 2006): RankNet's pairs weighted by |Δmetric| from ``metrics.swap``.

For one query, over pairs of real items (i, j) with label_i > label_j::

    loss_q = sum_{(i, j)} |ΔM_ij| * w_i * log(1 + exp(-sigma * (s_i - s_j)))

where |ΔM_ij| is the change of the metric M (NDCG@K by default) when i and j swap places in the
ranking induced by the current scores (stable descending sort), taken from
:func:`metrics.prepare_swap_deltas`, so the gain, discount, cutoff and ideal DCG are exactly those
of evaluation. |ΔM| is a constant for autograd, so ``d loss / d s_i`` is the classic lambda
``-sigma |ΔM_ij| w_i sigmoid(-sigma (s_i - s_j))`` (summed over i's pairs).

With ``pair_weight="label_diff"`` the weight becomes ``|ΔM_ij| * |y_i - y_j|``
(``losses.pair_weights``). Reductions as :mod:`losses.pairwise` (``"pair_mean"`` and
``"weight_mean"`` included).

With ``k`` set, only pairs with at least one item in the current top K are built (LightGBM's
truncation level): for NDCG, RR and AP a swap of two items both below K changes nothing, so the
loss is unchanged and the cost drops from O(B L^2) to O(B L K). Pairs are built in blocks
(``losses.pair_engine``), so memory stays O(block + B L) for any L.

Precision: the loss is computed in at least float32 and returned in the dtype of the scores, and
the gains enter only as g / IDCG (:func:`metrics.normalised_gains`), so float16 / bfloat16
scores and labels up to 1023 give a finite value and gradient.

>>> import torch
>>> s = torch.tensor([[0.0, 0.0]]); y = torch.tensor([[0.0, 1.0]])   # |ΔNDCG| = 1 - 1/log2(3)
>>> round(float(LambdaRank(reduction="sum")(s, y, torch.ones(1, 2, dtype=torch.bool))), 4)
0.2558
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import PAIR_REDUCTIONS, check_inputs, check_reduction
from losses.pair_engine import BLOCK_ELEMENTS, reduced_pairwise
from losses.pair_weights import LabelDiffWeights, check_pair_weight
from metrics.discounts import check_cutoff
from metrics.swap import SWAP_METRICS, prepare_swap_deltas

__all__ = ["LambdaRank"]


class _CallableDeltas:
    """Adapter: a user swap function ``f(scores, labels, mask, k=, top=) -> (deltas, order)``."""

    def __init__(self, fn, scores, labels, mask, k, top):
        with torch.no_grad():
            deltas, order = fn(scores.detach(), labels, mask, k=k, top=top)
        self.deltas, self.order = deltas.detach().to(scores.dtype), order

    def block(self, p0, p1, q0, q1):
        return self.deltas[:, p0:p1, q0:q1]


class LambdaRank(nn.Module):
    """LambdaRank loss module: ``loss(scores, labels, mask, weights=None, item_gain=None)``.

    Args:
        sigma: slope of the logistic (default 1).
        k: cutoff of the metric (NDCG@K, RR@K, AP@K) and truncation of the pairs; None = whole list.
        gain: gain of ``metrics`` (``"exp2"`` default, ``"linear"`` or a callable of the labels);
            per-item gains such as a price go to ``forward(..., item_gain=[B, L])``.
        discount: discount of ``metrics`` (``"log2"`` default, a callable or a table).
        metric: ``"ndcg"`` (default), ``"mrr"``, ``"ap"``, or a callable with the signature of
            :func:`metrics.ndcg_swap_deltas_torch` minus the NDCG options
            (``f(scores, labels, mask, k=, top=) -> (deltas [B, T, L], order [B, L])``).
        threshold: relevance threshold for MRR and AP (label >= threshold).
        reduction: ``"mean"`` (default: per-query sums averaged over queries with at least one
            real item), ``"sum"`` (over pairs and queries), ``"none"`` (``[B]``), ``"pair_mean"``
            or ``"weight_mean"``.
        pair_weight: None (default) or ``"label_diff"`` (also multiply by ``|y_i - y_j|``).
        block_elements: pairs materialised at once (memory only; the value is unchanged).
    """

    def __init__(self, sigma: float = 1.0, k: int | None = None, gain="exp2", metric="ndcg",
                 reduction: str = "mean", *, discount="log2", threshold: float = 1.0,
                 pair_weight: str | None = None, block_elements: int = BLOCK_ELEMENTS):
        super().__init__()
        if not callable(metric) and metric not in SWAP_METRICS:
            raise ValueError(f"metric must be one of {SWAP_METRICS} or a callable, got {metric!r}")
        self.k = check_cutoff(k)
        self.sigma = float(sigma)
        self.gain = gain
        self.discount = discount
        self.metric = metric
        self.threshold = float(threshold)
        self.reduction = check_reduction(reduction, PAIR_REDUCTIONS)
        self.pair_weight = check_pair_weight(pair_weight)
        self.block_elements = int(block_elements)

    def swap_deltas(self, scores, labels, mask, item_gain=None):
        """The prepared |Δmetric| of this batch (``order`` and ``block(...)``), detached."""
        if callable(self.metric):
            return _CallableDeltas(self.metric, scores, labels, mask, self.k, self.k)
        if self.metric == "ndcg":
            return prepare_swap_deltas("ndcg", scores, labels, mask, k=self.k, gain=self.gain,
                                       discount=self.discount, item_gain=item_gain)
        if item_gain is not None:
            raise ValueError(f"item_gain applies to metric='ndcg', not {self.metric!r}")
        return prepare_swap_deltas(self.metric, scores, labels, mask, k=self.k, threshold=self.threshold)

    def forward(self, scores, labels, mask=None, weights=None, item_gain=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        deltas = self.swap_deltas(scores, labels, mask, item_gain)
        pair_weight = deltas
        if self.pair_weight == "label_diff":
            pair_weight = LabelDiffWeights(labels, mask, deltas.order, base=deltas)
        loss = reduced_pairwise(scores, labels, mask, weights, self.reduction, sigma=self.sigma,
                                order=deltas.order, pair_weight=pair_weight, top=self.k,
                                block_elements=self.block_elements)
        return loss.to(out_dtype)

    def extra_repr(self) -> str:
        metric = getattr(self.metric, "__name__", "custom") if callable(self.metric) else self.metric
        extra = "" if self.pair_weight is None else f", pair_weight={self.pair_weight!r}"
        return (f"sigma={self.sigma}, k={self.k}, gain={self.gain!r}, metric={metric!r}, "
                f"reduction={self.reduction!r}{extra}")
