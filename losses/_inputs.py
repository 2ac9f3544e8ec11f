"""Input checks and reductions shared by every loss (one place, so all losses fail the same way).

Every loss takes padded tensors: ``scores [B, L]`` (float), ``labels [B, L]``, ``mask [B, L]`` (bool,
True = a real item) and optional ``weights [B, L]``. Padded positions may hold anything (NaN
included): they are never read into a value or a gradient.
"""

from __future__ import annotations

import torch

REDUCTIONS = ("mean", "sum", "none")
#: Pairwise losses also average over pairs: ``"pair_mean"`` divides the batch's sum by the number
#: of pairs built, ``"weight_mean"`` by the sum of the pairs' weights (peers report pairwise losses
#: this way: allRank's mean over pairs, TF-Ranking's weighted mean).
PAIR_REDUCTIONS = REDUCTIONS + ("pair_mean", "weight_mean")


def check_reduction(reduction: str, allowed: tuple[str, ...] = REDUCTIONS) -> str:
    """Return ``reduction`` if it is one of ``allowed``, else raise a ValueError naming them."""
    if reduction not in allowed:
        raise ValueError(f"reduction must be one of {allowed}, got {reduction!r}")
    return reduction


def wide_dtype(dtype):
    """The dtype a metric-weighted loss computes in: ``dtype`` promoted to at least float32.

    float16 / bfloat16 scores (mixed precision) are widened: bfloat16 rounds labels above 256
    (1023 becomes 1024), and the |ΔNDCG| of far-apart items fall below half precision's range.
    """
    return torch.promote_types(dtype, torch.float32)


def check_inputs(scores, labels, mask=None, weights=None, *, widen: bool = False):
    """Validate and align the four inputs of a loss; return ``(scores, labels, mask, weights)``.

    ``labels`` and ``weights`` are cast to the dtype of ``scores``; ``mask=None`` means every
    position is a real item. Values at padded positions are replaced by 0 so that nothing
    non-finite there can leak into arithmetic (0 * NaN is NaN). With ``widen=True`` all three
    come back in :func:`wide_dtype` of the scores' dtype (the scores through a differentiable
    cast; the caller casts its result back with ``.to(original dtype)``), the labels cast from
    the tensor given, so never rounded through half precision.
    """
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if scores.dim() != 2:
        raise ValueError(f"scores must have shape [B, L], got {tuple(scores.shape)}")
    if not scores.is_floating_point():
        raise TypeError(f"scores must be a floating-point tensor, got {scores.dtype}")
    labels = torch.as_tensor(labels, device=scores.device)
    if labels.shape != scores.shape:
        raise ValueError(f"labels shape {tuple(labels.shape)} != scores shape {tuple(scores.shape)}")
    if widen:
        scores = scores.to(wide_dtype(scores.dtype))
    labels = labels.to(scores.dtype)
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    else:
        mask = torch.as_tensor(mask, device=scores.device)
        if mask.shape != scores.shape:
            raise ValueError(f"mask shape {tuple(mask.shape)} != scores shape {tuple(scores.shape)}")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = real item), got {mask.dtype}")
    labels = labels.masked_fill(~mask, 0.0)
    if not bool(torch.isfinite(labels).all()):
        raise ValueError("labels contain NaN or inf at unmasked positions")
    if weights is not None:
        weights = torch.as_tensor(weights, device=scores.device)
        if weights.shape != scores.shape:
            raise ValueError(f"weights shape {tuple(weights.shape)} != scores shape {tuple(scores.shape)}")
        weights = weights.to(scores.dtype).masked_fill(~mask, 0.0)
        if not bool(torch.isfinite(weights).all()):
            raise ValueError("weights contain NaN or inf at unmasked positions")
        if bool((weights < 0).any()):
            raise ValueError("weights must be non-negative (they scale terms of the loss)")
    return scores, labels, mask, weights


def reduce_per_query(per_query: torch.Tensor, mask: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce a per-query loss ``[B]``.

    ``"sum"``: the sum; ``"mean"``: the sum divided by the number of queries holding at least one
    real item (rows that are all padding are not queries); ``"none"``: the ``[B]`` vector itself.
    """
    if reduction == "none":
        return per_query
    total = per_query.sum()
    if reduction == "sum":
        return total
    n_queries = mask.any(dim=1).sum().clamp(min=1)
    return total / n_queries


def reduce_pairs(per_query: torch.Tensor, n_pairs: torch.Tensor, weight_sum: torch.Tensor,
                 mask: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce a pairwise loss ``[B]`` given its per-query pair counts and pair-weight sums ``[B]``.

    ``"pair_mean"``: the batch's sum over all pairs divided by the number of pairs in the batch;
    ``"weight_mean"``: divided by the sum of the pair weights; 0 when the batch holds no pair.
    Other reductions as :func:`reduce_per_query`.
    """
    if reduction not in ("pair_mean", "weight_mean"):
        return reduce_per_query(per_query, mask, reduction)
    denominator = (n_pairs if reduction == "pair_mean" else weight_sum).sum()
    # No pair (or no pair weight) means a zero sum: 0 / tiny = 0, without a device sync.
    return per_query.sum() / denominator.clamp(min=torch.finfo(per_query.dtype).tiny)
