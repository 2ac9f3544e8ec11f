r"""Measures that count one kind of item in the top K: fall-out@K and Judged@K.

With n the length of a query's ranked list, k = min(K, n) (k = n without a cutoff), t the relevance
threshold (the conventions' ``threshold``) and rel_r = [label_r >= t]::

    fallout@K = (k - sum_{r <= k} rel_r) / N        (lower is better)
    judged@K  = #{r <= k : item r is judged} / k

**Fall-out** (torchmetrics' ``RetrievalFallOut``; Manning et al., *Introduction to IR*, 8.3) is the
share of the non-relevant items that the top K shows: N is the number of non-relevant items, those
of the list (label below t, and the unjudged ones, which count as non-relevant unless the
conventions drop them) plus, when the qrels are given, the judged non-relevant documents that were
not retrieved. A query with N = 0 (every item relevant) has no fall-out: the conventions' ``empty``
rule decides (``skip``; ``one`` and ``zero`` are torchmetrics' ``empty_target_action="pos"`` (its
default) and ``"neg"``); note it is the opposite of the usual empty case, a query without a
*non*-relevant item.

**Judged** (ir_measures' ``Judged@k``, after OpenNIR) is the share of the top K that the qrels
judge, whatever the label: an item is unjudged when its label is NaN (absent from the qrels, or
below ``unjudged_below``). The denominator is min(K, n), as ir_measures divides by the shorter of
the cutoff and the run; an empty list follows ``empty``.

Both read the shared ordering of a :class:`~metrics.ranking.RankedLists` (so ``ties`` decides equal
scores: ir_measures breaks them by document id ascending, torchmetrics by its sort).

>>> from metrics.conventions import Conventions
>>> from metrics.ranking import RankedLists
>>> rl = RankedLists([4., 3., 2., 1.], [0., 1., 0., float("nan")], [0, 4], Conventions())
>>> fallout_values(rl, 2).tolist(), judged_values(rl, 3).tolist(), judged_values(rl, None).tolist()
([0.3333333333333333], [1.0], [0.75])
"""

from __future__ import annotations

import numpy as np

from metrics.ranking import RankedLists, _per_segment

__all__ = ["fallout_values", "judged_values", "COVERAGE_KINDS"]

COVERAGE_KINDS = ("fallout", "judged")


def _cut(rl: RankedLists, k: int | None) -> np.ndarray:
    """[Q] min(K, n): the items of each list inside the cutoff."""
    return rl.lengths.astype(np.float64) if k is None else np.minimum(k, rl.lengths).astype(np.float64)


def _top_k_count(rl: RankedLists, flag: np.ndarray, k: int | None) -> np.ndarray:
    """[Q] items with ``flag`` (row order) among the top min(K, n) of each ranked list."""
    ranked = flag[rl.perm].astype(np.float64)
    inside = rl.pos < (_cut(rl, k)[rl.qidx])
    return np.bincount(rl.qidx, weights=ranked * inside, minlength=rl.n_queries)


def _non_relevant_total(rl: RankedLists, t: float) -> np.ndarray:
    """[Q] N: the list's non-relevant items, plus the qrels' judged non-relevant ones not retrieved."""
    in_list = rl.lengths - rl._rel_in_list(t)
    if not rl.has_qrels:
        return in_list.astype(np.float64)
    ql = rl.qrels_labels
    qq = _per_segment(np.arange(rl.qrels_offsets.size - 1), np.diff(rl.qrels_offsets))
    judged_nonrel = np.bincount(qq, weights=(ql < t), minlength=rl.n_queries)  # NaN < t is False
    retrieved_judged_nonrel = np.bincount(rl.qidx, weights=(rl.labels < t), minlength=rl.n_queries)
    return in_list + np.maximum(judged_nonrel - retrieved_judged_nonrel, 0.0)


def fallout_values(rl: RankedLists, k: int | None) -> np.ndarray:
    """[Q] fall-out@K (module docstring); the ``empty`` rule where a query has no non-relevant item."""
    t = float(rl.conventions.threshold)
    shown = _cut(rl, k) - rl.hits(k, t)
    total = _non_relevant_total(rl, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        return rl._empty(shown / total, total <= 0)


def judged_values(rl: RankedLists, k: int | None) -> np.ndarray:
    """[Q] Judged@K (module docstring); the ``empty`` rule for an empty list."""
    cut = _cut(rl, k)
    judged = _top_k_count(rl, ~np.isnan(rl.labels), k)
    with np.errstate(divide="ignore", invalid="ignore"):
        return rl._empty(judged / cut, cut <= 0)
