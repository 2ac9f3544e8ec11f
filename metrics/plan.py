"""The evaluation plan: which ordering the requested measures need, and the rows that can reach the top K.

``metrics.evaluate`` groups the requested measures by their conventions; each group shares one
ordering. A group whose measures all read the first K ranks only (``ndcg@K``, ``dcg@K``, ``p@K``,
``recall@K``, ``mrr@K``, ``hit@K``: :data:`TOP_KINDS`, each with a cutoff) needs, per query, only
the K best items in order, and the number of relevant items and the ideal DCG over the whole list.
Such a group ranks only the *candidates* of each query (below) and takes |R| and the ideal DCG
from the whole list (passed as the qrels of the ranked candidates). Every other group (MAP, R-prec,
ERR, RBP, the trec_eval measures, ``ties="average"``, callable gains or discounts, ...) sorts every
item, as before.

Candidates of query q with n >= K items: cut its rows into K contiguous blocks (block j holds rows
``start + floor(j n / K)`` up to the next block), take each block's largest score and the smallest
of those K maxima, tau_q. The K maxima belong to K distinct items, so at least K items score
>= tau_q: the K-th largest score is >= tau_q and every item of the top K, whatever the tie rule,
scores >= tau_q. The candidates are the rows scoring >= tau_q (ties at tau_q all kept), in their
input order, so the tie rules order them as they order the whole list; queries with fewer than K
items keep every row. One ``np.maximum.reduceat`` over the scores and one comparison give them: on
lists of about 120 items and K = 10 about a fifth of the rows remain, and the sort, the largest
step of the evaluation, shrinks with them.

Why the values stay the same bit for bit: the top-K kinds add gains in rank order over the first
K ranks only (DCG@K: left to right, :func:`metrics.ranking.sum_columns_in_order`; the others
count items, integers), and those ranks hold the same items in the same order; |R| and the ideal
DCG are computed from the same labels by the same code (``tests/test_evaluate_plan.py`` holds the
two paths equal on random lists with ties under every tie rule, with the presets, unjudged labels,
empty queries and queries shorter than K).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TOP_KINDS", "top_cutoff", "top_candidates"]

#: measure kinds whose value (with a cutoff K) depends on the first K ranks only, added in rank order
TOP_KINDS = ("ndcg", "dcg", "p", "recall", "rr", "hit")
#: the candidates must be at most this share of the rows for the plan to pay (gathering them costs a pass)
MAX_SHARE = 0.5


def top_cutoff(specs: list, conventions: Any, item_gain: bool) -> int | None:
    """The largest cutoff K of a group of measures sharing ``conventions`` when every one of them
    reads the top K only; None when the group needs the whole ordering.

    ``specs`` are parsed names (``.kind``, ``.k``). The whole ordering is kept for ``ties="average"``
    (its tie groups may straddle the cut), removed unjudged items (removal could lift an item into
    the top K), per-item gains and callable gains or discounts (a function of the whole array may
    not act item by item).

    >>> from types import SimpleNamespace as S
    >>> from metrics.conventions import Conventions
    >>> top_cutoff([S(kind="ndcg", k=10), S(kind="p", k=5)], Conventions(), False)
    10
    >>> top_cutoff([S(kind="ndcg", k=10), S(kind="ap", k=None)], Conventions(), False) is None
    True
    """
    if not specs or item_gain or conventions.ties == "average" or conventions.unjudged != "nonrelevant":
        return None
    if callable(conventions.gain) or callable(conventions.discount):
        return None
    if any(spec.kind not in TOP_KINDS or spec.k is None for spec in specs):
        return None
    return max(int(spec.k) for spec in specs)


def _block_bound(scores: np.ndarray, offsets: np.ndarray, big: np.ndarray, k: int) -> np.ndarray:
    """[len(big)] tau_q of each query in ``big`` (all with >= k items): the smallest of its k block maxima."""
    n = scores.size
    starts = offsets[:-1][big]
    ends = offsets[1:][big]
    lens = ends - starts
    bounds = starts[:, None] + (lens[:, None] * np.arange(k, dtype=np.int64)) // k  # strictly increasing
    # each query's end closes its last block; that slot (rows up to the next big query) is ignored
    idx = np.concatenate([bounds, ends[:, None]], axis=1).reshape(-1)
    last = idx[-1] == n  # reduceat takes no index equal to the length
    maxima = np.maximum.reduceat(scores, idx[:-1] if last else idx)
    if last:
        maxima = np.append(maxima, 0.0)
    return maxima.reshape(big.size, k + 1)[:, :k].min(axis=1)


def top_candidates(scores: Any, offsets: Any, k: int, max_share: float | None = None) -> np.ndarray | None:
    """Rows (ascending) that may rank among the first ``k`` of their query, or None when they would
    be more than ``max_share`` (default :data:`MAX_SHARE`) of the rows (the whole ordering is then as cheap).

    ``scores`` [N] float64 without NaN (the caller checks), ``offsets`` [Q+1] valid query offsets.
    Queries with fewer than ``k`` items keep every row; the others keep the rows scoring at least
    tau_q (module docstring).

    >>> top_candidates(np.array([5., 1., 4., 2., 3., 0., 9.]), np.array([0, 6, 7]), 2, max_share=1.0).tolist()
    [0, 2, 4, 6]
    """
    max_share = MAX_SHARE if max_share is None else max_share
    scores = np.asarray(scores, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if scores.size == 0 or np.minimum(lengths, k).sum() > max_share * scores.size / 2:
        return None  # about two candidates per place in the top k: no saving
    big = np.flatnonzero(lengths >= k)
    tau = np.full(lengths.size, -np.inf)
    if big.size:
        tau[big] = _block_bound(scores, offsets, big, k)
    rows = np.flatnonzero(scores >= np.repeat(tau, lengths))
    return rows if rows.size <= max_share * scores.size else None
