"""User-model metrics: Expected Reciprocal Rank and Rank-Biased Precision (with its residual).

Both model a user who scans the ranking from the top and stops at some point; neither is
normalised by an ideal ranking, so neither has an "empty" query (a list without relevant items
scores 0, like DCG).

ERR (Chapelle, Metzler, Zhang & Grinspan, CIKM 2009): the user stops at rank r, satisfied, with
probability R_r = (2^g_r - 1) / 2^g_max (g the graded label, unjudged and negative labels 0, g_max
the conventions' ``max_grade``, 4 by default as in gdeval)::

    ERR@K = sum_{r<=K} (1/r) R_r prod_{i<r} (1 - R_i)

RBP (Moffat & Zobel, TOIS 2008): the user goes from rank i to i+1 with persistence p; with
rel_i = [label_i >= threshold] and n the list length::

    RBP(p)      = (1 - p) sum_{i<=n} rel_i p^(i-1)
    residual(p) = p^n + (1 - p) sum_{i<=n, i unjudged} p^(i-1)

The residual is the most RBP could still grow if every unjudged document (NaN label) and every
document past the end of the list were relevant: the true value lies in [RBP, RBP + residual].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.conventions import get_conventions
from metrics.ranking import RankedLists, _flat_inputs, sum_columns_in_order

__all__ = ["err", "rbp", "rbp_residual", "err_values", "rbp_values"]


def err_values(rl: RankedLists, k: int | None) -> np.ndarray:
    """[Q] ERR@k of the ranked lists ``rl`` (g_max from its conventions' ``max_grade``)."""
    g_max = float(rl.conventions.max_grade)
    kc = rl.max_len if k is None else min(int(k), rl.max_len)
    if kc == 0:
        return np.zeros(rl.n_queries)
    labels = rl.labels
    if np.nanmax(labels, initial=-np.inf) > g_max:
        raise ValueError(f"ERR: a label ({np.nanmax(labels):g}) exceeds max_grade={g_max:g}; pass max_grade=")
    cols = np.arange(kc)
    valid = cols < rl.lengths[:, None]
    rows = rl.perm[np.where(valid, rl.starts[:, None] + cols, 0)]
    g = np.nan_to_num(labels[rows], nan=0.0)
    stop = np.where(valid, (np.exp2(np.maximum(g, 0.0)) - 1.0) / np.exp2(g_max), 0.0)
    # probability of reaching rank r: product of (1 - R_i) over the ranks above, row by row (exact order)
    reach = np.cumprod(np.concatenate([np.ones((rl.n_queries, 1)), 1.0 - stop[:, :-1]], axis=1), axis=1)
    return sum_columns_in_order(reach * stop / (cols + 1.0))


def rbp_values(rl: RankedLists, p: float, residual: bool = False) -> np.ndarray:
    """[Q] RBP with persistence ``p`` (or its residual) of the ranked lists ``rl``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBP persistence p must lie strictly between 0 and 1, got {p}")
    weight = (1.0 - p) * p ** rl.pos.astype(np.float64)  # pos: rank - 1 of each ranked row
    labels = rl.labels[rl.perm]
    if residual:
        flags = np.isnan(labels)
        tail = p ** rl.lengths.astype(np.float64)
        return tail + np.bincount(rl.qidx[flags], weights=weight[flags], minlength=rl.n_queries)
    flags = labels >= float(rl.conventions.threshold)
    return np.bincount(rl.qidx[flags], weights=weight[flags], minlength=rl.n_queries)


def _lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions) -> RankedLists:
    s, labels, query_offsets, doc_ids, _ = _flat_inputs(scores, labels, query_offsets, mask, doc_ids, None)
    return RankedLists(s, labels, query_offsets, get_conventions(preset, **conventions), doc_ids=doc_ids)


def err(scores: Any, labels: Any, query_offsets: Any = None, k: int | None = None, *, mask: Any = None,
        preset: Any = None, doc_ids: Any = None, **conventions: Any) -> np.ndarray:
    """ERR@k per query: sum_{r<=k} (1/r) R_r prod_{i<r} (1 - R_i), R = (2^g - 1) / 2^max_grade.

    >>> err([3., 2., 1.], [4, 0, 2], k=3).round(6)   # 15/16 + (1/16) (3/16) / 3
    array([0.941406])
    """
    return err_values(_lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions), k)


def rbp(scores: Any, labels: Any, query_offsets: Any = None, p: float = 0.8, *, mask: Any = None,
        preset: Any = None, doc_ids: Any = None, **conventions: Any) -> np.ndarray:
    """RBP per query: (1 - p) sum_i [label_i >= threshold] p^(i-1).

    >>> rbp([3., 2., 1.], [1, 0, 1], p=0.5)   # 0.5 (1 + 0.25)
    array([0.625])
    """
    return rbp_values(_lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions), p)


def rbp_residual(scores: Any, labels: Any, query_offsets: Any = None, p: float = 0.8, *, mask: Any = None,
                 preset: Any = None, doc_ids: Any = None, **conventions: Any) -> np.ndarray:
    """RBP residual per query: p^n + (1 - p) sum_{unjudged i} p^(i-1) (NaN labels are unjudged).

    >>> rbp_residual([3., 2., 1.], [1, float("nan"), 0], p=0.5)   # 0.125 + 0.5 * 0.5
    array([0.375])
    """
    return rbp_values(_lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions), p, residual=True)
