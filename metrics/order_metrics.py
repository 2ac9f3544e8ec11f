"""Measures of the whole order rather than of its top: ordered-pair accuracy and average relevant position.

Ordered-pair accuracy (OPA), for graded labels: among the pairs of judged items of one list whose
labels differ, the share the ranking puts in the right order (the higher label first)::

    OPA = #{(i, j): y_i > y_j, i ranked above j} / #{(i, j): y_i > y_j}

Under ``ties="average"`` a pair with equal scores counts 1/2 (its expected value over the orders of
the tie); for binary labels OPA is then the per-list ROC AUC. Unjudged items (NaN) are left out; a
list without two different labels is "empty". With item weights w (TF-Ranking's
``OPAMetric`` with weights), a pair counts with the weight of its higher-labelled item::

    OPA_w = sum_{y_i > y_j} w_i [i ranked above j] / sum_{y_i > y_j} w_i

(empty when the denominator is 0).

Average relevant position (ARP; Joachims, Swaminathan & Schnabel, WSDM 2017), lower is better::

    ARP        = (1/|rel|) sum_{i: y_i >= threshold} rank_i
    ARP_graded = sum_i y_i rank_i / sum_i y_i            (items with y_i > 0; ``graded=True``)

over the relevant items of the list (an empty list of relevant items is "empty"). The graded form
weighs each position by the label, as TF-Ranking's ``ARPMetric`` and pytorchltr's ``arp`` do; its
threshold is not used. Under ``ties="average"`` an item of a tie group occupying ranks a..b
counts (a + b) / 2.

Cost: OPA is O(N * G) for G distinct label values (graded labels: a handful).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.conventions import get_conventions
from metrics.ranking import RankedLists, _flat_inputs

__all__ = ["ordered_pair_accuracy", "average_relevant_position", "opa_values", "arp_values"]


def _pairs(y: np.ndarray, seg: np.ndarray, n_seg: int, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(right, total) per segment for ranked labels ``y`` (NaN excluded) with segment ids ``seg``.

    right: pairs i above j (same segment) with y_i > y_j; total: pairs with different labels.
    With item weights ``w`` (ranked like ``y``) each pair counts w_i, i its higher-labelled item.
    """
    ok = ~np.isnan(y)
    y, seg = y[ok], seg[ok]
    right = np.zeros(n_seg)
    if y.size == 0:
        return right, right.copy()
    if w is not None:
        return _weighted_pairs(y, seg, n_seg, w[ok])
    levels, code = np.unique(y, return_inverse=True)
    code = code.reshape(-1)
    n = np.bincount(seg, minlength=n_seg).astype(np.float64)
    same = np.zeros(n_seg)
    starts = np.concatenate([[0], np.cumsum(np.bincount(seg, minlength=n_seg))])[:-1]
    lengths = np.bincount(seg, minlength=n_seg)
    for level in range(levels.size):
        f = (code == level).astype(np.int64)
        count = np.bincount(seg, weights=f, minlength=n_seg)
        same += count * count
        if level == levels.size - 1:
            break
        c = np.cumsum(f)
        above = c - np.repeat(np.concatenate([[0], c])[starts], lengths)  # this level at ranks <= i
        below = count[seg] - above  # this level strictly below item i (i itself is not of it when higher)
        higher = code > level
        right += np.bincount(seg[higher], weights=below[higher], minlength=n_seg)
    return right, (n * n - same) / 2.0


def _weighted_pairs(y, seg, n_seg, w):
    """:func:`_pairs` with item weights: levels ascending, each item against the lower levels."""
    levels, code = np.unique(y, return_inverse=True)
    code = code.reshape(-1)
    starts = np.concatenate([[0], np.cumsum(np.bincount(seg, minlength=n_seg))])[:-1]
    lengths = np.bincount(seg, minlength=n_seg)
    right, total = np.zeros(n_seg), np.zeros(n_seg)
    lower = np.zeros(n_seg)  # items of the levels already passed, per segment
    lower_above = np.zeros(y.size)  # ... of them at ranks <= each item
    for level in range(levels.size):
        f = code == level
        here = np.flatnonzero(f)
        total += np.bincount(seg[here], weights=w[here] * lower[seg[here]], minlength=n_seg)
        right += np.bincount(seg[here], weights=w[here] * (lower[seg[here]] - lower_above[here]), minlength=n_seg)
        c = np.cumsum(f)
        lower_above += c - np.repeat(np.concatenate([[0], c])[starts], lengths)
        lower += np.bincount(seg, weights=f, minlength=n_seg)
    return right, total


def opa_values(rl: RankedLists, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """([Q] OPA, [Q] number (or weight) of pairs with different labels) of the ranked lists ``rl``.

    ``weights``: None or [N] item weights in the input order of ``rl`` (module docstring).
    """
    y = rl.labels[rl.perm]
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[rl.perm]
    right, total = _pairs(y, rl.qidx, rl.n_queries, w)
    if rl.conventions.ties == "average":
        gid = rl._tie_groups
        if gid.size:
            n_groups = int(gid[-1]) + 1
            right_in, total_in = _pairs(y, gid, n_groups, w)
            q_of_group = rl.qidx[np.r_[0, np.flatnonzero(gid[1:] != gid[:-1]) + 1]]
            right -= np.bincount(q_of_group, weights=right_in - 0.5 * total_in, minlength=rl.n_queries)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, right / np.where(total > 0, total, 1.0), 0.0), total


def arp_values(rl: RankedLists, graded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """([Q] ARP, [Q] number of relevant items, or label sum when ``graded``) of the ranked lists ``rl``."""
    labels = rl.labels[rl.perm]
    rel = labels >= float(rl.conventions.threshold)
    rank = rl.pos + 1.0
    if rl.conventions.ties == "average" and rank.size:
        rank = rl._tie_average(rank)
    if graded:
        rel = labels > 0  # NaN (unjudged) is not > 0
        n_rel = np.bincount(rl.qidx[rel], weights=labels[rel], minlength=rl.n_queries)
        total = np.bincount(rl.qidx[rel], weights=(labels * rank)[rel], minlength=rl.n_queries)
    else:
        n_rel = np.bincount(rl.qidx[rel], minlength=rl.n_queries).astype(np.float64)
        total = np.bincount(rl.qidx[rel], weights=rank[rel], minlength=rl.n_queries)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n_rel > 0, total / np.where(n_rel > 0, n_rel, 1.0), 0.0), n_rel


def _lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions) -> RankedLists:
    s, labels, query_offsets, doc_ids, _ = _flat_inputs(scores, labels, query_offsets, mask, doc_ids, None)
    return RankedLists(s, labels, query_offsets, get_conventions(preset, **conventions), doc_ids=doc_ids)


def _empty(values: np.ndarray, is_empty: np.ndarray, rule: str) -> np.ndarray:
    return np.where(is_empty, {"skip": np.nan, "zero": 0.0, "one": 1.0}[rule], values)


def ordered_pair_accuracy(scores: Any, labels: Any, query_offsets: Any = None, *, mask: Any = None,
                          preset: Any = None, doc_ids: Any = None, weights: Any = None,
                          **conventions: Any) -> np.ndarray:
    """OPA per query: share of the differently-labelled pairs ranked in label order.

    ``weights``: None or item weights laid out like ``labels`` (flat [N], or padded [Q, L]); a pair
    then counts with the weight of its higher-labelled item (module docstring).

    >>> ordered_pair_accuracy([3., 2., 1.], [2, 0, 1]).round(4)   # (2>0 ok, 2>1 ok, 1>0 wrong)
    array([0.6667])
    >>> ordered_pair_accuracy([3., 2., 1.], [2, 0, 1], weights=[1., 5., 3.])   # (1 + 1) / (1 + 1 + 3)
    array([0.4])
    """
    s, labels, query_offsets, doc_ids, w = _flat_inputs(scores, labels, query_offsets, mask, doc_ids, weights)
    rl = RankedLists(s, labels, query_offsets, get_conventions(preset, **conventions), doc_ids=doc_ids)
    if w is not None:
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        if w.shape != (rl.n_items,) or not np.all(np.isfinite(w)) or bool((w < 0).any()):
            raise ValueError(f"weights must be {rl.n_items} finite non-negative values, one per item "
                             f"(got shape {w.shape})")
    values, total = opa_values(rl, w)
    return _empty(values, total <= 0, rl.conventions.empty)


def average_relevant_position(scores: Any, labels: Any, query_offsets: Any = None, *, mask: Any = None,
                              preset: Any = None, doc_ids: Any = None, graded: bool = False,
                              **conventions: Any) -> np.ndarray:
    """ARP per query: mean rank of the items with label >= threshold (lower is better).

    ``graded=True``: the label-weighted mean rank ``sum y_i rank_i / sum y_i`` (module docstring).

    >>> average_relevant_position([3., 2., 1.], [1, 0, 1])
    array([2.])
    >>> average_relevant_position([3., 2., 1.], [2, 0, 1], graded=True).round(4)   # (2*1 + 1*3) / 3
    array([1.6667])
    """
    rl = _lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions)
    values, n_rel = arp_values(rl, graded=graded)
    return _empty(values, n_rel <= 0, rl.conventions.empty)
