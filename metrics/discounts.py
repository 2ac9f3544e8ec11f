"""Discount functions: how much attention a 1-based rank position receives.

``discount_values(ranks, discount, k)`` gives the discount of each rank:

* ``"log2"``: d(r) = 1 / log2(r + 1)  (r = 1, 2, ...; every evaluator uses this one)
* a callable ``f(ranks) -> discounts`` of 1-based ranks (a user's measured examination curve);
  it receives the same kind of array (numpy or torch) it must return
* a 1-D sequence of per-position discounts ``d[0], d[1], ...`` for ranks 1, 2, ...; ranks past
  its end get 0

A cutoff ``k`` sets the discount to 0 beyond rank k, which is what "@K" means for DCG.
Array-agnostic like :mod:`metrics.gains`: numpy in -> float64 numpy out, tensor in -> tensor out.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import numpy as np

from metrics.gains import _like, is_torch

__all__ = ["DISCOUNTS", "discount_values", "rank_positions", "discount_name"]

DiscountSpec = Union[str, Callable[[Any], Any], Sequence[float], np.ndarray]

DISCOUNTS = ("log2",)


def discount_name(discount: DiscountSpec) -> str:
    """Short name of a discount for stamped metric names."""
    if isinstance(discount, str):
        return discount
    if callable(discount):
        return getattr(discount, "__name__", "custom")
    return "table"


def rank_positions(length: int, like: Any = None) -> Any:
    """The 1-based ranks ``1..length`` as float64 numpy, or as a tensor matching ``like``.

    >>> rank_positions(3)
    array([1., 2., 3.])
    """
    if like is not None and is_torch(like):
        import torch  # lazy: the caller already uses torch

        dtype = like.dtype if like.is_floating_point() else torch.get_default_dtype()
        return torch.arange(1, length + 1, dtype=dtype, device=like.device)
    return np.arange(1, length + 1, dtype=np.float64)


def check_cutoff(k: Any) -> int | None:
    """Validate a cutoff: None (no cutoff) or an integer >= 1; returns ``None`` or ``int(k)``.

    >>> check_cutoff(None), check_cutoff(3)
    (None, 3)
    >>> check_cutoff(0)
    Traceback (most recent call last):
    ...
    ValueError: k must be a positive integer or None, got 0
    """
    if k is not None and int(k) < 1:
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    return None if k is None else int(k)


def discount_values(ranks: Any, discount: DiscountSpec = "log2", k: int | None = None) -> Any:
    """Discount of each 1-based rank: ``1/log2(rank+1)``, a user curve, or a table; 0 where rank > k.

    >>> np.round(discount_values(np.array([1, 2, 3, 5, 10])), 2)
    array([1.  , 0.63, 0.5 , 0.39, 0.29])
    >>> discount_values(np.array([1, 2, 3]), k=2)
    array([1.        , 0.63092975, 0.        ])
    >>> discount_values(np.array([1, 2, 3]), discount=[1.0, 0.5])
    array([1. , 0.5, 0. ])
    >>> discount_values(np.array([1, 2, 3]), discount=lambda r: 1.0 / r)
    array([1.        , 0.5       , 0.33333333])
    """
    torch_in = is_torch(ranks)
    if torch_in:
        r = ranks if ranks.is_floating_point() else ranks.to(rank_positions(0, ranks).dtype)
    else:
        r = np.asarray(ranks, dtype=np.float64)
    if isinstance(discount, str):
        if discount != "log2":
            raise ValueError(f"unknown discount {discount!r}: use 'log2', a callable or a table")
        d = 1.0 / (r + 1.0).log2() if torch_in else 1.0 / np.log2(r + 1.0)
    elif callable(discount):
        d = _like(discount(r), r)
    else:
        table = np.asarray(discount, dtype=np.float64).ravel()
        # Look ranks up in the table; ranks past its end are not examined at all (discount 0).
        idx = (r.long() if torch_in else r.astype(np.int64)) - 1
        if torch_in:
            t = _like(np.concatenate([table, [0.0]]), r)
            idx = idx.clamp(0, len(table))
            d = t[idx]
        else:
            d = np.concatenate([table, [0.0]])[np.clip(idx, 0, len(table))]
    if k is not None:
        if torch_in:
            d = d.masked_fill(r > k, 0.0)
        else:
            d = np.where(r > k, 0.0, d)
    return d
