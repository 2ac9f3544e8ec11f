"""DCG of gains already in rank order, and the ideal DCG, over the last axis (numpy or torch).

    DCG@k  = sum_{r=1..L} g_r * d(r) * [r <= k]          (g_r: gain of the item at rank r)
    IDCG@k = DCG@k of the same gains sorted descending    (top min(|R|, k) ideal gains)

Inputs are padded ``[..., L]`` arrays; ``mask`` (same shape, true = a real item) makes padded
positions contribute nothing. In :func:`dcg_in_rank_order` positions keep their rank (padding is
expected at the end); in :func:`ideal_dcg` the valid gains are sorted descending first, so the
padding moves to the end wherever it was. An all-masked row has DCG 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.discounts import discount_values, rank_positions
from metrics.gains import is_torch

__all__ = ["dcg_in_rank_order", "ideal_dcg"]


def _as_float(x: Any) -> Any:
    if is_torch(x):
        return x if x.is_floating_point() else x.float()
    return np.asarray(x, dtype=np.float64)


def dcg_in_rank_order(gains_sorted: Any, k: int | None = None, discount: Any = "log2", mask: Any = None) -> Any:
    """DCG@k of gains given in rank order: ``sum_r gains[..., r-1] * d(r)``, d = 0 beyond k.

    Returns an array (or tensor) of shape ``gains_sorted.shape[:-1]``.

    Seed example (grades [3, 0, 2] in rank order, gains 2^rel - 1 = [7, 0, 3]):
    7/log2(2) + 0 + 3/log2(4) = 8.5.

    >>> float(dcg_in_rank_order(np.array([7.0, 0.0, 3.0]), k=3))
    8.5
    >>> float(dcg_in_rank_order(np.array([7.0, 0.0, 3.0]), k=1))
    7.0
    >>> dcg_in_rank_order(np.array([[7.0, 3.0], [1.0, 5.0]]), mask=np.array([[True, True], [True, False]]))
    array([8.89278926, 1.        ])
    """
    g = _as_float(gains_sorted)
    d = discount_values(rank_positions(g.shape[-1], g), discount, k)
    contrib = g * d
    if mask is not None:
        if is_torch(contrib):
            contrib = contrib.masked_fill(~mask.bool(), 0.0)
        else:
            contrib = np.where(np.asarray(mask, dtype=bool), contrib, 0.0)
    return contrib.sum(-1) if is_torch(contrib) else contrib.sum(axis=-1)


def ideal_dcg(gains: Any, k: int | None = None, discount: Any = "log2", mask: Any = None) -> Any:
    """Ideal DCG@k: the valid positive gains sorted descending, cut at k (top min(|R|, k) of them).

    The ideal ranking holds the relevant items (gain > 0) only, as in :func:`metrics.ndcg`: an item
    with a zero or negative gain never improves the ideal, so non-positive gains are left out.

    >>> round(float(ideal_dcg(np.array([7.0, 0.0, 3.0]), k=3)), 4)
    8.8928
    >>> ideal_dcg(np.array([[0.0, 1.0, 3.0], [2.0, 9.0, 0.0]]), k=1, mask=np.array([[1, 1, 1], [1, 0, 0]]))
    array([3., 2.])
    >>> float(ideal_dcg(np.array([-3.0, 1.0]), k=2))   # the negative gain is not part of the ideal
    1.0
    """
    g = _as_float(gains)
    if is_torch(g):
        g = g.clamp(min=0.0)
        if mask is None:
            ordered = g.sort(dim=-1, descending=True).values
            return dcg_in_rank_order(ordered, k, discount)
        m = mask.bool()
        # Masked gains go to -inf so they sort last; the sorted mask keeps the first n_valid slots.
        ordered = g.masked_fill(~m, float("-inf")).sort(dim=-1, descending=True).values
        n_valid = m.sum(-1, keepdim=True)
        pos = rank_positions(g.shape[-1], g)
        sorted_mask = (pos - 1) < n_valid
        return dcg_in_rank_order(ordered.masked_fill(~sorted_mask, 0.0), k, discount, sorted_mask)
    g = np.maximum(g, 0.0)
    if mask is None:
        ordered = -np.sort(-g, axis=-1)
        return dcg_in_rank_order(ordered, k, discount)
    m = np.asarray(mask, dtype=bool)
    ordered = -np.sort(-np.where(m, g, -np.inf), axis=-1)
    sorted_mask = np.arange(g.shape[-1]) < m.sum(axis=-1, keepdims=True)
    return dcg_in_rank_order(np.where(sorted_mask, ordered, 0.0), k, discount, sorted_mask)
