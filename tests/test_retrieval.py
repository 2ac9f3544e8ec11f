"""metrics.retrieval against hand computations and brute-force oracles."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.retrieval import (
    best_source_at_budget,
    candidate_recall,
    catalogue_coverage,
    linear_cost,
    pareto_front,
    recall_at_budget,
)


def test_coverage_hand_cases():
    assert catalogue_coverage(np.array([[0, 1], [1, 3]]), 8) == pytest.approx(3 / 8)
    assert catalogue_coverage([[10, 30], [30]], np.array([10, 20, 30, 40])) == pytest.approx(0.5)
    assert catalogue_coverage([[-1, 99]], 5) == 0.0  # padding and out-of-catalogue ids ignored
    with pytest.raises(ValueError):
        catalogue_coverage([[1]], 0)


def _recall_loop(cands, rels, depths):
    out = []
    for d in depths:
        vals = []
        for c, r in zip(cands, rels):
            r = {x for x in r if x >= 0}
            if not r:
                continue
            top = {x for x in c[:d] if x >= 0}
            vals.append(len(top & r) / len(r))
        out.append(np.mean(vals))
    return np.array(out)


def test_candidate_recall_equals_loop_with_padding_duplicates_and_empty_queries():
    rng = np.random.default_rng(3)
    cands = rng.integers(-1, 40, size=(60, 25))  # -1 padding and repeated ids included
    rels = [rng.choice(40, size=rng.integers(0, 6), replace=False) for _ in range(60)]
    depths = [1, 2, 5, 10, 25, 40]
    got = candidate_recall(cands, rels, depths)
    np.testing.assert_allclose(got, _recall_loop(cands, rels, [min(d, 25) for d in depths]), atol=1e-12)
    # padded [Q, R] form gives the same
    padded = np.full((60, 6), -1)
    for i, r in enumerate(rels):
        padded[i, :len(r)] = r
    np.testing.assert_allclose(candidate_recall(cands, padded, depths), got, atol=1e-12)


def test_repeated_candidate_counts_once():
    assert candidate_recall([[5, 5, 6]], [[5, 6]], [2, 3]).tolist() == [0.5, 1.0]


def test_recall_at_budget_equals_brute_force():
    rng = np.random.default_rng(0)
    cost = rng.random(30) * 10
    recall = rng.random(30)
    budgets = np.linspace(-1, 11, 50)
    brute = [max([r for c, r in zip(cost, recall) if c <= b], default=0.0) for b in budgets]
    np.testing.assert_allclose(recall_at_budget(cost, recall, budgets), brute)


def test_best_source_changes_with_budget():
    depths = np.array([10, 100, 1000])
    curves = {
        "popular": (linear_cost(depths, 0.01, 1e-5), [0.05, 0.10, 0.15]),
        "ann": (linear_cost(depths, 1.0, 1e-3), [0.20, 0.45, 0.60]),
        "neural": (linear_cost(depths, 10.0, 1e-2), [0.35, 0.70, 0.90]),
    }
    winners, table = best_source_at_budget(curves, [0.005, 0.5, 1.5, 12.0, 25.0])
    assert winners == ["-", "popular", "ann", "neural", "neural"]
    assert table.shape == (3, 5)
    assert table[1, 2] == pytest.approx(0.45)  # ann at 1.5 ms: depth 100 costs 1.1, depth 1000 costs 2.0


def test_pareto_front_equals_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(20):
        c = rng.integers(0, 10, 40).astype(float)  # many ties in cost and recall
        r = rng.integers(0, 10, 40) / 10
        front = pareto_front(c, r)
        dominated = set()
        for i in range(40):
            for j in range(40):
                if c[j] <= c[i] and r[j] >= r[i] and (c[j] < c[i] or r[j] > r[i]):
                    dominated.add(i)
        # of identical undominated points the first is kept
        expected = []
        seen = set()
        for i in range(40):
            if i not in dominated and (c[i], r[i]) not in seen:
                expected.append(i)
                seen.add((c[i], r[i]))
        assert sorted(front.tolist()) == sorted(expected)
        assert np.all(np.diff(c[front]) > 0) and np.all(np.diff(r[front]) > 0)
