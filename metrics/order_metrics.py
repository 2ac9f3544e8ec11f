"""Measures of the whole order rather than of its top: ordered-pair accuracy and average relevant position.

Ordered-pair accuracy (OPA), for graded labels: among the pairs of judged items of one list whose
labels differ, the share the ranking puts in the right order (the higher label first)::

    OPA = #{(i, j): y_i > y_j, i ranked above j} / #{(i, j): y_i > y_j}

Under ``ties="average"`` a pair with equal scores counts 1/2 (its expected value over the orders of
the tie); for binary labels OPA is then the per-list ROC AUC. Unjudged items (NaN) are left out; a
list without two different labels is "empty".

Average relevant position (ARP; Joachims, Swaminathan & Schnabel, WSDM 2017), lower is better::

    ARP = (1/|rel|) sum_{i: y_i >= threshold} rank_i

over the relevant items of the list (an empty list of relevant items is "empty"). Under
``ties="average"`` an item of a tie group occupying ranks a..b counts (a + b) / 2.

Cost: OPA is O(N * G) for G distinct label values (graded labels: a handful).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.conventions import get_conventions
from metrics.ranking import RankedLists, _flat_inputs

__all__ = ["ordered_pair_accuracy", "average_relevant_position", "opa_values", "arp_values"]


def _pairs(y: np.ndarray, seg: np.ndarray, n_seg: int) -> tuple[np.ndarray, np.ndarray]:
    """(right, total) per segment for ranked labels ``y`` (NaN excluded) with segment ids ``seg``.

    right: pairs i above j (same segment) with y_i > y_j; total: pairs with different labels.
    """
    ok = ~np.isnan(y)
    y, seg = y[ok], seg[ok]
    right = np.zeros(n_seg)
    if y.size == 0:
        return right, right.copy()
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


def opa_values(rl: RankedLists) -> tuple[np.ndarray, np.ndarray]:
    """([Q] OPA, [Q] number of pairs with different labels) of the ranked lists ``rl``."""
    y = rl.labels[rl.perm]
    right, total = _pairs(y, rl.qidx, rl.n_queries)
    if rl.conventions.ties == "average":
        gid = rl._tie_groups
        if gid.size:
            n_groups = int(gid[-1]) + 1
            right_in, total_in = _pairs(y, gid, n_groups)
            q_of_group = rl.qidx[np.r_[0, np.flatnonzero(gid[1:] != gid[:-1]) + 1]]
            right -= np.bincount(q_of_group, weights=right_in - 0.5 * total_in, minlength=rl.n_queries)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, right / np.where(total > 0, total, 1.0), 0.0), total


def arp_values(rl: RankedLists) -> tuple[np.ndarray, np.ndarray]:
    """([Q] ARP, [Q] number of relevant items) of the ranked lists ``rl``."""
    rel = rl.labels[rl.perm] >= float(rl.conventions.threshold)
    rank = rl.pos + 1.0
    if rl.conventions.ties == "average" and rank.size:
        rank = rl._tie_average(rank)
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
                          preset: Any = None, doc_ids: Any = None, **conventions: Any) -> np.ndarray:
    """OPA per query: share of the differently-labelled pairs ranked in label order.

    >>> ordered_pair_accuracy([3., 2., 1.], [2, 0, 1]).round(4)   # (2>0 ok, 2>1 ok, 1>0 wrong)
    array([0.6667])
    """
    rl = _lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions)
    values, total = opa_values(rl)
    return _empty(values, total <= 0, rl.conventions.empty)


def average_relevant_position(scores: Any, labels: Any, query_offsets: Any = None, *, mask: Any = None,
                              preset: Any = None, doc_ids: Any = None, **conventions: Any) -> np.ndarray:
    """ARP per query: mean rank of the items with label >= threshold (lower is better).

    >>> average_relevant_position([3., 2., 1.], [1, 0, 1])
    array([2.])
    """
    rl = _lists(scores, labels, query_offsets, mask, preset, doc_ids, conventions)
    values, n_rel = arp_values(rl)
    return _empty(values, n_rel <= 0, rl.conventions.empty)
