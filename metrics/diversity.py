"""α-nDCG@K for diversity (Clarke, Kolla, Cormack, Vechtomova, Ashkan, Büttcher & MacKinnon, SIGIR 2008).

Each query has subtopics i = 1..S; J(d, i) = 1 when document d is relevant to subtopic i (a TREC
diversity qrels line ``qid subtopic docno rel`` with rel >= threshold). A document's gain counts
the subtopics it covers, each discounted by how often that subtopic was already covered above::

    G_r        = sum_i J(d_r, i) (1 - α)^{c_{i, r-1}},   c_{i, r-1} = sum_{j<r} J(d_j, i)
    α-DCG@K    = sum_{r<=K} G_r * d(r)          d(r) = 1 / log2(r + 1) by default
    α-nDCG@K   = α-DCG@K / α-DCG@K of the ideal ranking

The discount d is the conventions' ``discount`` (:mod:`metrics.discounts`: ``"log2"``, a callable
of the 1-based ranks, or a table; ``alpha_ndcg(..., discount=...)``), the same for the ranking and
its ideal; TF-Ranking's
``AlphaDCGMetric`` takes a ``rank_discount_fn`` the same way.

The ideal ranking (over every judged document of the query, retrieved or not) is NP-hard to find;
as in the paper and NTCIR/TREC's ndeval it is built greedily: at each rank the document with the
largest G_r given the ones already placed (the first such document on ties). With α = 0 and one
subtopic per relevance grade this is nDCG with linear gain = number of subtopics covered. A query
whose ideal α-DCG is 0 is "empty" (the conventions' ``empty`` rule). Unjudged documents (all-zero
rows) gain nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics.conventions import get_conventions
from metrics.discounts import discount_values
from metrics.ranking import RankedLists, _check_offsets, _numpy

__all__ = ["alpha_ndcg", "alpha_dcg_values"]


def _judgements(j: Any, n: int, what: str) -> np.ndarray:
    m = _numpy(j, np.float64)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or m.shape[0] != n:
        raise ValueError(f"{what} must be [N, S] (one row per document, one column per subtopic), got {m.shape}")
    return m


def _gains_in_order(cover: np.ndarray, starts: np.ndarray, lengths: np.ndarray, alpha: float) -> np.ndarray:
    """[N] G_r of documents already in ranked order (``cover`` [N, S] 0/1, query segments)."""
    c = np.cumsum(cover, axis=0)
    seg_before = np.concatenate([np.zeros((1, cover.shape[1])), c])[starts]
    seen = c - np.repeat(seg_before, lengths, axis=0) - cover  # coverage strictly above each rank
    return (cover * (1.0 - alpha) ** seen).sum(axis=1)


def _greedy_ideal(cover: np.ndarray, k: int, alpha: float) -> np.ndarray:
    """Gains of the greedy ideal ranking of one query's judged documents (at most ``k`` ranks)."""
    left = np.ones(cover.shape[0], dtype=bool)
    seen = np.zeros(cover.shape[1])
    out = []
    for _ in range(min(k, cover.shape[0])):
        g = np.where(left, (cover * (1.0 - alpha) ** seen).sum(axis=1), -np.inf)
        best = int(np.argmax(g))
        if g[best] <= 0:
            break
        out.append(g[best])
        left[best] = False
        seen += cover[best]
    return np.asarray(out)


def alpha_dcg_values(rl: RankedLists, judgements: np.ndarray, k: int | None, alpha: float,
                     qrels_judgements: np.ndarray | None = None, qrels_offsets: Any = None,
                     discount: Any = "log2") -> tuple[np.ndarray, np.ndarray]:
    """([Q] α-DCG@k, [Q] ideal α-DCG@k) of the ranked lists ``rl`` with [N, S] ``judgements``."""
    t = float(rl.conventions.threshold)
    cover = (np.nan_to_num(judgements, nan=0.0) >= t).astype(np.float64)
    ranked = cover[rl.perm]
    g = _gains_in_order(ranked, rl.starts, rl.lengths, alpha)
    kc = rl.max_len if k is None else int(k)
    disc = discount_values(rl.pos + 1.0, discount)
    keep = rl.pos < kc
    dcg = np.bincount(rl.qidx[keep], weights=(g * disc)[keep], minlength=rl.n_queries)
    if qrels_judgements is None:
        pool, pool_off = cover, rl.offsets
    else:
        pool = (np.nan_to_num(qrels_judgements, nan=0.0) >= t).astype(np.float64)
        pool_off = _check_offsets(qrels_offsets, pool.shape[0], "qrels_offsets")
        if pool_off.size != rl.n_queries + 1:
            raise ValueError(f"qrels_offsets describes {pool_off.size - 1} queries, the run {rl.n_queries}")
    ideal = np.zeros(rl.n_queries)
    depth = kc if k is not None else int(np.diff(pool_off).max(initial=0))
    for q in range(rl.n_queries):
        gains = _greedy_ideal(pool[pool_off[q]:pool_off[q + 1]], depth, alpha)
        ideal[q] = float(np.sum(gains * discount_values(np.arange(gains.size) + 1.0, discount)))
    return dcg, ideal


def alpha_ndcg(scores: Any, judgements: Any, query_offsets: Any = None, k: int | None = None, *,
               alpha: float = 0.5, qrels_judgements: Any = None, qrels_offsets: Any = None,
               preset: Any = None, doc_ids: Any = None, **conventions: Any) -> np.ndarray:
    """α-nDCG@k per query (greedy ideal); ``judgements`` [N, S]: subtopic relevance of each document.

    ``qrels_judgements`` [M, S] / ``qrels_offsets`` [Q+1]: every judged document of each query (the
    ideal ranks them all, retrieved or not); None: the retrieved ones. ``alpha`` in [0, 1).
    ``discount`` (a convention, as for every metric): d(r) of the module docstring (``"log2"``, a
    callable of 1-based ranks or a table); before it was honoured here, α-nDCG ignored it.

    >>> # ranked d1 (subtopic 1), d2 (1 and 2), d3 (2): gains 1, 0.5 + 1, 0.5; the ideal starts with d2
    >>> alpha_ndcg([3., 2., 1.], [[1, 0], [1, 1], [0, 1]], alpha=0.5).round(4)
    array([0.8561])
    >>> # d(r) = 1/r: (1 + 1.5/2 + 0.5/3) / (2 + 0.5/2 + 0.5/3), ideal gains 2, 0.5, 0.5
    >>> alpha_ndcg([3., 2., 1.], [[1, 0], [1, 1], [0, 1]], alpha=0.5, discount=lambda r: 1.0 / r).round(4)
    array([0.7931])
    """
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must lie in [0, 1), got {alpha}")
    s = _numpy(scores, np.float64).reshape(-1)
    if query_offsets is None:
        query_offsets = [0, s.size]
    j = _judgements(judgements, s.size, "judgements")
    qj = None if qrels_judgements is None else _judgements(qrels_judgements, np.asarray(qrels_judgements).shape[0],
                                                            "qrels_judgements")
    if qj is not None and qj.shape[1] != j.shape[1]:
        raise ValueError(f"judgements have {j.shape[1]} subtopics, qrels_judgements {qj.shape[1]}")
    conv = get_conventions(preset, **conventions)
    rl = RankedLists(s, np.zeros(s.size), query_offsets, conv.replace(unjudged="nonrelevant"), doc_ids=doc_ids)
    dcg, ideal = alpha_dcg_values(rl, j, k, alpha, qj, qrels_offsets, conv.discount)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = dcg / ideal
    fill = {"skip": np.nan, "zero": 0.0, "one": 1.0}[conv.empty]
    return np.where(ideal > 0, values, fill)
