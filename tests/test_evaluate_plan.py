"""The evaluation plan (``metrics.plan``): measures that read the top K only rank the top-K candidates
of each query, and give the same values, bit for bit, as the whole ordering.

The oracle is the whole ordering itself (``MAX_SHARE = 0`` turns the plan off), which the peer and
trec_eval tests hold to pytrec_eval, ranx, scikit-learn and LightGBM; and a brute-force top K.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import metrics
from metrics.conventions import get_conventions
from metrics.plan import top_candidates

ev = importlib.import_module("metrics.evaluate")
plan = importlib.import_module("metrics.plan")

TOP = "ndcg@10,ndcg@3,dcg@5,p@10,p@1,recall@10,mrr@10,hit@3"


def workload(seed, n_queries=400, rounding=1):
    """Lists of 0..120 items (empty ones and ones shorter than K included), many tied scores."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 120, n_queries)
    lengths[rng.random(n_queries) < 0.05] = 0
    lengths[rng.random(n_queries) < 0.1] = rng.integers(1, 10)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    labels = rng.choice(5, size=n, p=[0.6, 0.2, 0.1, 0.07, 0.03]).astype(np.float64)
    scores = np.round(labels * 0.3 + rng.normal(size=n), rounding)
    return scores, labels, offsets


def both(monkeypatch, *args, **kwargs):
    """(planned, whole ordering) evaluations of the same call."""
    planned = metrics.evaluate(*args, **kwargs)
    monkeypatch.setattr(plan, "MAX_SHARE", 0.0)
    whole = metrics.evaluate(*args, **kwargs)
    monkeypatch.undo()
    return planned, whole


def assert_same(planned, whole):
    assert planned.names == whole.names
    for name, values in whole.per_query.items():
        assert np.array_equal(planned.per_query[name], values, equal_nan=True), name
        assert planned.mean[name] == whole.mean[name] or np.isnan(whole.mean[name]), name


def test_the_plan_ranks_only_the_candidates():
    scores, labels, offsets = workload(0)
    lists = ev._Lists(scores, labels, offsets, None, None, None, None, {id(get_conventions()): 10})
    ranked = lists.ranked(get_conventions())
    assert ranked.n_items < 0.5 * scores.size and ranked.n_queries == offsets.size - 1
    # a group that needs every rank (MAP) is not planned
    specs = [(ev._parse(n), get_conventions(), "") for n in ("ndcg@10", "map")]
    assert ev._plan(specs, False) == {}
    assert ev._plan(specs[:1], False) == {id(get_conventions()): 10}


@pytest.mark.parametrize("ties", ["stable", "pessimistic", "docid_desc"])
@pytest.mark.parametrize("seed", [0, 1])
def test_plan_equals_the_whole_ordering_under_every_tie_rule(monkeypatch, ties, seed):
    scores, labels, offsets = workload(seed)
    ids = np.random.default_rng(seed).permutation(scores.size)
    planned, whole = both(monkeypatch, scores, labels, offsets, TOP, ties=ties, doc_ids=ids)
    assert_same(planned, whole)


@pytest.mark.parametrize("preset", ["trec_eval", "ranx", "lightgbm", "sklearn", None])
def test_plan_equals_the_whole_ordering_with_the_presets_and_qrels(monkeypatch, preset):
    scores, labels, offsets = workload(3, rounding=2)
    labels[np.random.default_rng(3).random(labels.size) < 0.05] = np.nan  # unjudged
    labels[::17] = -1.0  # trec_eval: negative levels are unjudged
    ids = np.array([f"d{i:05d}" for i in range(scores.size)])
    # qrels: every judged document, some never retrieved (each query's qrels add two relevant ones)
    parts, q_offsets = [], [0]
    for a, b in zip(offsets[:-1], offsets[1:]):
        parts.append(np.concatenate([labels[a:b], [2.0, 1.0]]))
        q_offsets.append(q_offsets[-1] + b - a + 2)
    for qrels in (None, (np.concatenate(parts), np.array(q_offsets))):
        extra = {} if qrels is None else {"qrels_labels": qrels[0], "qrels_offsets": qrels[1]}
        planned, whole = both(monkeypatch, scores, labels, offsets, TOP, preset, doc_ids=ids, **extra)
        assert_same(planned, whole)


def test_plan_with_chunks_threads_and_odd_scores(monkeypatch):
    scores, labels, offsets = workload(5, n_queries=1500)
    scores[::7] = 0.0
    scores[::11] = -0.0  # ties with +0.0
    scores[::97] = np.inf
    scores[::89] = -np.inf
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 4000)
    monkeypatch.setattr(ev, "MIN_ITEMS_PER_THREAD", 1)
    for threads in (1, 2):
        planned, whole = both(monkeypatch, scores, labels, offsets, TOP, threads=threads)
        monkeypatch.setattr(ev, "CHUNK_ITEMS", 4000)
        monkeypatch.setattr(ev, "MIN_ITEMS_PER_THREAD", 1)
        assert_same(planned, whole)
    # float32 scores (trec_eval's) and a linear gain
    planned, whole = both(monkeypatch, scores + 1e-9 * np.arange(scores.size), labels, offsets, TOP,
                          score_dtype="float32", gain="linear")
    assert_same(planned, whole)


def test_candidates_hold_every_top_k_item():
    # brute force: for each query, the k best rows under stable ties are candidates
    rng = np.random.default_rng(7)
    for k in (1, 2, 5, 10):
        lengths = rng.integers(0, 60, 300)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        scores = np.round(rng.normal(size=int(offsets[-1])), 1)
        rows = top_candidates(scores, offsets, k, max_share=1.0)
        kept = set(rows.tolist())
        for a, b in zip(offsets[:-1], offsets[1:]):
            order = sorted(range(a, b), key=lambda i: -scores[i])
            assert set(order[:k]) <= kept
            # and the bound is tight enough to matter: long lists keep far fewer than all rows
        long = np.diff(offsets) >= 40
        share = np.add.reduceat(np.isin(np.arange(scores.size), rows), offsets[:-1][long]) / np.diff(offsets)[long]
        assert k == 10 or share.mean() < 0.6


def test_bad_input_keeps_the_whole_path_error():
    with pytest.raises(ValueError, match="NaN"):
        metrics.evaluate(np.array([1.0, np.nan] * 40), np.zeros(80), [0, 80], "ndcg@3")
    with pytest.raises(ValueError, match="query_offsets"):
        metrics.evaluate(np.ones(80), np.zeros(80), [0, 70], "ndcg@3")


def test_level_counts_one_level_at_a_time_equal_the_bincount():
    from metrics.ranking import _counts_by_bincount, _counts_per_level

    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 30, 200)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for lo, n_levels in ((0.0, 5), (-2.0, 8), (1.0, 3)):
        labels = lo + rng.integers(0, n_levels, int(offsets[-1])).astype(np.float64)
        labels[rng.random(labels.size) < 0.1] = np.nan
        one, two = _counts_per_level(labels, offsets, lo, n_levels), _counts_by_bincount(labels, offsets, lo, n_levels)
        assert np.array_equal(one, two) and one.sum() == np.count_nonzero(~np.isnan(labels))
        q = 3 + int(np.argmax(lengths[3:] > 0))
        assert one[q].tolist() == [int(np.sum(labels[offsets[q]:offsets[q + 1]] == lo + j)) for j in range(n_levels)]
        labels[offsets[q]] = lo + 0.5  # a label between the levels: neither counts
        assert _counts_per_level(labels, offsets, lo, n_levels) is None
        assert _counts_by_bincount(labels, offsets, lo, n_levels) is None
