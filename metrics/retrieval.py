"""Retrieval-stage metrics: catalogue coverage, candidate recall, recall at a latency budget, Pareto fronts.

A candidate source (a popular-items list, an approximate nearest-neighbour index, a neural
retriever) returns a ranked list of candidates per query; taking more candidates costs more
(latency, compute). Sources are compared at an *equal budget*: for each source the recall it can
reach at a cost within the budget, and across all (cost, recall) points the Pareto front.

- :func:`catalogue_coverage`: share of the catalogue that appears in at least one output list.
- :func:`candidate_recall`: mean over queries of ``|relevant in top d| / |relevant|`` at each depth d.
- :func:`linear_cost`: the usual latency model ``fixed + per_candidate * depth``.
- :func:`recall_at_budget`: ``max {recall_i : cost_i <= budget}`` (0 when nothing fits: no
  candidate, no recall).
- :func:`best_source_at_budget`: the winning source at each budget.
- :func:`pareto_front`: the (cost, recall) points no other point beats on both.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = [
    "catalogue_coverage",
    "candidate_recall",
    "linear_cost",
    "recall_at_budget",
    "best_source_at_budget",
    "pareto_front",
]


def _flatten_outputs(outputs) -> np.ndarray:
    if isinstance(outputs, np.ndarray):
        return outputs.reshape(-1)
    parts = [np.asarray(o).reshape(-1) for o in outputs]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def catalogue_coverage(outputs, catalogue) -> float:
    """Share of catalogue items that appear in at least one output: ``|union(outputs) & C| / |C|``.

    ``outputs``: an array of item ids (any shape, for example [Q, K]) or a sequence of per-query
    arrays; ``catalogue``: the number of items (ids ``0..n-1``) or an array of item ids. Output ids
    outside the catalogue (and padding such as -1) are ignored.

    >>> catalogue_coverage([[0, 1, 2], [2, 1, 5], [-1, 0, 0]], 10)
    0.4
    """
    seen = np.unique(_flatten_outputs(outputs))
    if np.isscalar(catalogue) or np.ndim(catalogue) == 0:
        n = int(catalogue)
        if n <= 0:
            raise ValueError(f"catalogue size must be positive, got {n}")
        return float(np.count_nonzero((seen >= 0) & (seen < n)) / n)
    cat = np.unique(np.asarray(catalogue).reshape(-1))
    if cat.shape[0] == 0:
        raise ValueError("empty catalogue")
    return float(np.isin(cat, seen).sum() / cat.shape[0])


def candidate_recall(candidates, relevant, depths=None) -> np.ndarray:
    """Mean candidate recall at each depth: ``mean_q |R_q & top_d(C_q)| / |R_q|``.

    ``candidates``: [Q, D] integer item ids in rank order, ``-1`` for padding; a repeated candidate
    counts once (its first position). ``relevant``: [Q, R] integer ids padded with ``-1``, or a
    sequence of Q arrays. ``depths``: 1-based depths (default ``1..D``), capped at D. Queries without
    a relevant item are left out of the mean. Vectorised over queries (composite keys
    ``q * (max_id + 1) + id``), no Python loop over queries.

    >>> candidate_recall([[3, 1, 7, 2]], [[1, 2]], depths=[1, 2, 4]).tolist()
    [0.0, 0.5, 1.0]
    """
    cand = np.asarray(candidates, dtype=np.int64)
    if cand.ndim != 2:
        raise ValueError(f"candidates must be [Q, D], got shape {cand.shape}")
    q_count, d_count = cand.shape
    if isinstance(relevant, np.ndarray) and relevant.ndim == 2:
        if relevant.shape[0] != q_count:
            raise ValueError(f"relevant has {relevant.shape[0]} rows for {q_count} queries")
        rel = relevant.astype(np.int64)
        rel_q = np.repeat(np.arange(q_count), rel.shape[1])
        rel_ids = rel.reshape(-1)
    else:
        if len(relevant) != q_count:
            raise ValueError(f"relevant has {len(relevant)} lists for {q_count} queries")
        arrays = [np.asarray(r, dtype=np.int64).reshape(-1) for r in relevant]
        rel_q = np.repeat(np.arange(q_count), [a.shape[0] for a in arrays])
        rel_ids = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    keep = rel_ids >= 0
    rel_q, rel_ids = rel_q[keep], rel_ids[keep]
    base = int(max(cand.max(initial=0), rel_ids.max(initial=0))) + 1
    rel_keys = np.unique(rel_q * base + rel_ids)  # duplicates in a relevant list count once
    n_rel = np.bincount(rel_keys // base, minlength=q_count)

    cand_keys = (np.arange(q_count)[:, None] * base + cand).reshape(-1)
    valid = (cand >= 0).reshape(-1)
    first = np.zeros(cand_keys.shape[0], dtype=bool)
    _, first_idx = np.unique(np.where(valid, cand_keys, -1 - np.arange(cand_keys.shape[0])), return_index=True)
    first[first_idx] = True
    hits = (first & valid & np.isin(cand_keys, rel_keys)).reshape(q_count, d_count)
    cum = np.cumsum(hits, axis=1)
    if depths is None:
        depths = np.arange(1, d_count + 1)
    depths = np.minimum(np.asarray(depths, dtype=np.int64), d_count)
    if np.any(depths < 1):
        raise ValueError("depths are 1-based and must be >= 1")
    has = n_rel > 0
    if not has.any():
        return np.full(depths.shape[0], np.nan)
    rec = cum[has][:, depths - 1] / n_rel[has][:, None]
    return rec.mean(axis=0)


def linear_cost(depths, fixed: float, per_candidate: float) -> np.ndarray:
    """Latency (or any cost) of fetching ``depths`` candidates: ``fixed + per_candidate * depth``.

    >>> linear_cost([10, 100], fixed=2.0, per_candidate=0.01).tolist()
    [2.1, 3.0]
    """
    return fixed + per_candidate * np.asarray(depths, dtype=np.float64)


def recall_at_budget(cost, recall, budgets) -> np.ndarray:
    """Best recall reachable within each budget: ``max {recall_i : cost_i <= budget}``, 0 if none.

    ``cost`` and ``recall`` describe one source's operating points (any order). Vectorised: sort by
    cost, running maximum of recall, ``searchsorted`` of the budgets.

    >>> recall_at_budget([1.0, 2.0, 4.0], [0.2, 0.5, 0.4], [0.5, 1.0, 3.0, 10.0]).tolist()
    [0.0, 0.2, 0.5, 0.5]
    """
    c = np.asarray(cost, dtype=np.float64).reshape(-1)
    r = np.asarray(recall, dtype=np.float64).reshape(-1)
    if c.shape != r.shape:
        raise ValueError(f"cost and recall must have equal lengths, got {c.shape} and {r.shape}")
    order = np.argsort(c, kind="stable")
    best = np.maximum.accumulate(r[order]) if r.shape[0] else r
    pos = np.searchsorted(c[order], np.asarray(budgets, dtype=np.float64), side="right")
    padded = np.concatenate([[0.0], best])
    return padded[pos]


def best_source_at_budget(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], budgets,
                          ) -> tuple[list[str], np.ndarray]:
    """The winning source at each budget, and every source's recall at every budget.

    ``curves``: name -> (cost, recall) operating points. Returns ``(winners, table)`` where
    ``table[s, b]`` is source s's :func:`recall_at_budget` at budget b and ``winners[b]`` the
    source with the highest value (the first listed on ties; ``"-"`` when no source fits).

    >>> w, t = best_source_at_budget({"pop": ([0.1], [0.2]), "ann": ([2.0], [0.6])}, [0.05, 1, 5])
    >>> w
    ['-', 'pop', 'ann']
    """
    names = list(curves)
    table = np.stack([recall_at_budget(*curves[n], budgets) for n in names]) if names else np.zeros((0, 0))
    winners = [names[i] if table[i, b] > 0 else "-" for b, i in enumerate(np.argmax(table, axis=0))]
    return winners, table


def pareto_front(cost, recall) -> np.ndarray:
    """Indices of the Pareto-optimal points (lower cost, higher recall), by increasing cost.

    A point is kept when no other point has ``cost <= `` and ``recall >= `` with one strict; of
    identical points the first is kept. Sort by (cost, -recall) and keep each point whose recall
    beats every cheaper point's.

    >>> pareto_front([1, 2, 3, 2, 5], [0.3, 0.2, 0.6, 0.5, 0.6]).tolist()
    [0, 3, 2]
    """
    c = np.asarray(cost, dtype=np.float64).reshape(-1)
    r = np.asarray(recall, dtype=np.float64).reshape(-1)
    if c.shape != r.shape:
        raise ValueError(f"cost and recall must have equal lengths, got {c.shape} and {r.shape}")
    if c.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((np.arange(c.shape[0]), -r, c))
    rs = r[order]
    prev_best = np.concatenate([[-np.inf], np.maximum.accumulate(rs)[:-1]])
    return order[rs > prev_best]
