"""``metrics.evaluate`` in chunks of whole queries: the same per-query values as the whole input at once.

Large inputs are cut into chunks of about ``CHUNK_ITEMS`` items, each evaluated as a run of its own
(one thread after another, or on ``threads`` threads). Here the chunk size is lowered so that a few
thousand random queries (ties, empty queries, queries without a relevant item) fall into dozens of
chunks; the values must equal the whole-input path bit for bit, and a per-query hand computation.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import metrics

ev = importlib.import_module("metrics.evaluate")

NAMES = "ndcg@10,ndcg,map,map@20,mrr@10,p@10,recall@100,hit@3,rprec,dcg@5,err@10,rbp.8,opa,arp"


def workload(seed=0, n_queries=3000):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 80, n_queries)
    lengths[rng.random(n_queries) < 0.05] = 0  # empty queries
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    labels = rng.choice(4, size=n, p=[0.6, 0.2, 0.15, 0.05]).astype(np.float64)
    query = np.repeat(np.arange(n_queries), lengths)
    labels[np.isin(query, np.flatnonzero(rng.random(n_queries) < 0.1))] = 0.0  # all-zero queries
    scores = np.round(labels * 0.4 + rng.normal(size=n), 1)  # rounded: many ties
    return scores, labels, offsets


def whole(scores, labels, offsets, names, monkeypatch, **kwargs):
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 1 << 40)
    out = metrics.evaluate(scores, labels, offsets, names, **kwargs)
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_chunks_equal_the_whole_input_bit_for_bit(monkeypatch, threads):
    scores, labels, offsets = workload()
    want = whole(scores, labels, offsets, NAMES, monkeypatch)
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 1500)
    monkeypatch.setattr(ev, "MIN_ITEMS_PER_THREAD", 1)
    bounds = ev._chunk_bounds(scores.size, labels, offsets, threads)
    assert bounds.size - 1 >= 50 and bounds[-1] == offsets.size - 1  # really in many chunks
    got = metrics.evaluate(scores, labels, offsets, NAMES, threads=threads)
    assert got.names == want.names
    for name in want.per_query:
        assert np.array_equal(got.per_query[name], want.per_query[name], equal_nan=True), name
        assert got.mean[name] == want.mean[name] and got.counted[name] == want.counted[name]


@pytest.mark.parametrize("ties", ["docid_desc", "pessimistic"])
def test_chunks_with_other_tie_rules_and_qrels(monkeypatch, ties):
    scores, labels, offsets = workload(seed=4, n_queries=800)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 10**9, scores.size)
    q_labels = np.concatenate([labels[a:b] for a, b in zip(offsets[:-1], offsets[1:])] + [np.ones(0)])
    kwargs = dict(ties=ties, doc_ids=ids, qrels_labels=q_labels, qrels_offsets=offsets)
    want = whole(scores, labels, offsets, NAMES, monkeypatch, **kwargs)
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 700)
    for threads in (1, 2):
        got = metrics.evaluate(scores, labels, offsets, NAMES, threads=threads, **kwargs)
        for name in want.per_query:
            assert np.array_equal(got.per_query[name], want.per_query[name], equal_nan=True), name


def by_hand(scores, labels):
    """NDCG@10 (exp2 gains), AP, RR@10, P@10, Recall@100 of one query; ties in input order."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # sorted() is stable
    y = [labels[i] for i in order]
    rel = [v >= 1 for v in y]
    r = sum(rel)
    dcg = sum((2**v - 1) / math.log2(i + 2) for i, v in enumerate(y[:10]))
    ideal = sum((2**v - 1) / math.log2(i + 2) for i, v in enumerate(sorted(y, reverse=True)[:10]))
    if r == 0:
        return [math.nan] * 5
    ap = sum(sum(rel[:i + 1]) / (i + 1) for i in range(len(y)) if rel[i]) / r
    rr = next((1 / (i + 1) for i in range(min(10, len(y))) if rel[i]), 0.0)
    return [dcg / ideal, ap, rr, sum(rel[:10]) / 10, sum(rel[:100]) / r]


def test_chunks_against_a_hand_computation(monkeypatch):
    scores, labels, offsets = workload(seed=7, n_queries=1200)
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 2000)
    names = ["ndcg@10", "map", "mrr@10", "p@10", "recall@100"]
    got = metrics.evaluate(scores, labels, offsets, names, threads=2)
    want = np.array([by_hand(scores[a:b].tolist(), labels[a:b].tolist()) for a, b in zip(offsets[:-1], offsets[1:])])
    for j, name in enumerate(names):
        np.testing.assert_allclose(got.per_query[got.names[name]], want[:, j], rtol=0, atol=1e-12, err_msg=name)
    empty = (np.diff(offsets) == 0) | (np.add.reduceat(labels, offsets[:-1]) * (np.diff(offsets) > 0) == 0)
    assert empty.sum() > 100 and np.all(np.isnan(got.per_query[got.names["map"]][empty]))


def test_an_error_in_a_chunk_is_worded_for_the_whole_input(monkeypatch):
    scores, labels, offsets = workload(seed=3, n_queries=400)
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 500)
    bad = scores.copy()
    bad[-3] = np.nan  # in the last chunk
    for threads in (1, 2):
        with pytest.raises(ValueError, match="scores contain NaN"):
            metrics.evaluate(bad, labels, offsets, "ndcg@10", threads=threads)
    with pytest.raises(ValueError, match="doc_ids has 5 entries, expected"):
        metrics.evaluate(scores, labels, offsets, "ndcg@10", ties="docid_desc", doc_ids=np.arange(5))
