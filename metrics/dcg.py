"""DCG of gains already in rank order, and the ideal DCG, over the last axis (numpy or torch).

    DCG@k  = sum_{r=1..L} g_r * d(r) * [r <= k]          (g_r: gain of the item at rank r)
    IDCG@k = DCG@k of the same gains sorted descending    (top min(|R|, k) ideal gains)

Inputs are padded ``[..., L]`` arrays; ``mask`` (same shape, true = a real item) makes padded
positions contribute nothing. In :func:`dcg_in_rank_order` positions keep their rank (padding is
expected at the end); in :func:`ideal_dcg` the valid gains are sorted descending first, so the
padding moves to the end wherever it was. An all-masked row has DCG 0.

:func:`normalised_gains` gives each item's share of the ideal, ``g_i / IDCG@k``, without ever
forming ``2^rel`` itself: labels up to 1023 overflow float32 (2^128 > its largest value) and sums
of such gains overflow float64, while the ratio is always at most 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.discounts import discount_values, rank_positions
from metrics.gains import gain_values, is_torch

__all__ = ["dcg_in_rank_order", "ideal_dcg", "normalised_gains"]


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


def normalised_gains(labels: Any, k: int | None = None, gain: Any = "exp2", discount: Any = "log2",
                     mask: Any = None, item_gain: Any = None) -> Any:
    """Each item's gain over the ideal DCG@k of its row: ``G_i = g_i / IDCG@k`` (0 when IDCG@k <= 0).

    NDCG is a sum of ``G_i * d(rank_i)``; the losses built on NDCG use these ratios. The ratio
    does not change when every gain of a row is multiplied by the same positive factor, so for
    the ``"exp2"`` gain the gains are computed as ``2^(rel - m) - 2^(-m)`` = ``(2^rel - 1) / 2^m``
    with ``m = max(0, largest real label of the row)``: no intermediate exceeds the list length,
    whatever the labels (2^rel itself overflows float32 from rel = 128 and a sum of gains
    overflows float64 from rel ~ 1023). For integer labels the factor 2^m is exact, so the
    ratios are bit-identical to the direct formula where that does not overflow. Other gains
    (``"linear"``, callables, ``item_gain``) are used as given.

    numpy in -> float64 out; a tensor in -> a tensor of at least float32 (half-precision labels
    are widened first, so the ratios keep float32's precision under mixed precision).

    >>> normalised_gains(np.array([1.0, 0.0, 2.0]), k=2)            # gains 1, 0, 3; IDCG@2 = 3 + 1/log2(3)
    array([0.27541155, 0.        , 0.82623466])
    >>> normalised_gains(np.array([1023.0, 1023.0, 1023.0, 0.0]))   # 1 / (1 + 1/log2(3) + 1/2)
    array([0.46927873, 0.46927873, 0.46927873, 0.        ])
    """
    torch_in = is_torch(labels)
    if torch_in:
        import torch  # lazy: the caller already uses torch

        x = labels if labels.is_floating_point() else labels.float()
        x = x.to(torch.promote_types(x.dtype, torch.float32))
        valid = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.bool()
    else:
        x = np.asarray(labels, dtype=np.float64)
        valid = np.ones(x.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if isinstance(gain, str) and gain == "exp2" and item_gain is None:
        if torch_in:
            real = x.masked_fill(~valid, 0.0)
            m = real.amax(-1, keepdim=True).clamp(min=0.0) if x.shape[-1] else real.sum(-1, keepdim=True)
            g = (real - m).exp2() - (-m).exp2()
        else:
            real = np.where(valid, x, 0.0)
            m = np.max(real, axis=-1, keepdims=True, initial=0.0)
            g = np.exp2(real - m) - np.exp2(-m)
    else:
        g = gain_values(x, gain, item_gain)
        if torch_in:
            g = g.to(x.dtype)
    if torch_in:
        g = g.masked_fill(~valid, 0.0)
        ideal = ideal_dcg(g, k, discount, valid)
        inv = torch.where(ideal > 0, 1.0 / torch.where(ideal > 0, ideal, torch.ones_like(ideal)),
                          torch.zeros_like(ideal))
        return g * inv[..., None]
    g = np.where(valid, g, 0.0)
    ideal = ideal_dcg(g, k, discount, valid)
    inv = np.where(ideal > 0, 1.0 / np.where(ideal > 0, ideal, 1.0), 0.0)
    return g * inv[..., None]
