"""``metrics.evaluate(..., threads=N)``: the same numbers, bit for bit, as one thread.

Each share of the queries is evaluated as a run of its own, which is exact only if no measure
mixes queries (a cumulative sum over the whole input, a grade count taken over all labels). The
checks below run every metric family and the conventions that take other code paths (tie rules,
unjudged documents, qrels with unretrieved documents, item gains, weights) with the share
threshold lowered so that a few hundred items are split, and compare with ``np.array_equal``.
"""

from __future__ import annotations

import importlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import metrics

ev = importlib.import_module("metrics.evaluate")  # the module (metrics.evaluate is also the function)
ranking = importlib.import_module("metrics.ranking")

RANKED = "ndcg@10,ndcg,dcg@5,map,map@20,mrr@10,p@5,recall@20,hit@3,rprec,err@10,rbp.9,rbp_resid.9,opa,arp,ndcg_burges@10"


def workload(n_queries=37, seed=5, nan_labels=False):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, n_queries)
    lengths[[3, 11]] = [0, 1]  # an empty query and a one-item query inside the shares
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    labels = rng.choice(5, size=n, p=[0.5, 0.25, 0.15, 0.07, 0.03]).astype(np.float64)
    scores = np.round(labels * 0.5 + rng.normal(size=n), 1)  # rounded: many ties
    if nan_labels:
        labels[rng.random(n) < 0.2] = np.nan
    doc_ids = np.array([f"d{rng.integers(0, 10**6)}" for _ in range(n)], dtype=object)
    return scores, labels, offsets, doc_ids


@pytest.fixture(params=[1 << 18, 7], ids=["one-block", "blocks-of-7"])
def split_small_inputs(monkeypatch, request):
    """Shares of a few hundred items; and blocks of 7 items inside the metrics (their large inputs are
    processed in blocks of 2^18 items, whose edges fall elsewhere in a share than in the whole)."""
    monkeypatch.setattr(ev, "MIN_ITEMS_PER_THREAD", 1)
    monkeypatch.setattr(ranking, "_CHUNK", request.param)


def assert_same(one, many):
    assert one.names == many.names
    for name in one.per_query:
        assert np.array_equal(one.per_query[name], many.per_query[name], equal_nan=True), name
        a, b = one.mean[name], many.mean[name]
        assert a == b or (np.isnan(a) and np.isnan(b)), (name, a, b)
        assert one.counted[name] == many.counted[name]


@pytest.mark.parametrize("ties", ["stable", "average", "docid_desc", "pessimistic"])
def test_every_ranked_metric_equals_one_thread(split_small_inputs, ties):
    scores, labels, offsets, ids = workload()
    names = RANKED if ties != "average" else "ndcg@10,ndcg,map,mrr@10,p@5,recall@20,opa,arp"
    one = metrics.evaluate(scores, labels, offsets, names, ties=ties, doc_ids=ids)
    for threads in (2, 3, 8):
        many = metrics.evaluate(scores, labels, offsets, names, ties=ties, doc_ids=ids, threads=threads)
        assert_same(one, many)
    assert len(ev._share_bounds(scores.size, labels, offsets, 3)) == 4  # really split in three


def test_all_of_trec_eval_with_qrels_and_unjudged_documents(split_small_inputs):
    scores, labels, offsets, ids = workload(seed=8, nan_labels=True)
    rng = np.random.default_rng(1)
    # qrels: the judged retrieved documents plus 0..3 unretrieved ones per query
    extra = rng.integers(0, 4, offsets.size - 1)
    q_labels, q_offsets = [], [0]
    for q in range(offsets.size - 1):
        judged = labels[offsets[q]:offsets[q + 1]]
        part = np.concatenate([judged[~np.isnan(judged)], rng.integers(0, 3, extra[q]).astype(float)])
        q_labels.append(part)
        q_offsets.append(q_offsets[-1] + part.size)
    kwargs = dict(doc_ids=ids, qrels_labels=np.concatenate(q_labels), qrels_offsets=np.array(q_offsets))
    one = metrics.evaluate(scores, labels, offsets, "all_trec", preset="trec_eval", **kwargs)
    many = metrics.evaluate(scores, labels, offsets, "all_trec", preset="trec_eval", threads=2, **kwargs)
    assert len(one.names) > 50
    assert_same(one, many)
    for unjudged in ("remove", "nonrelevant"):
        one = metrics.evaluate(scores, labels, offsets, RANKED, unjudged=unjudged, **kwargs)
        assert_same(one, metrics.evaluate(scores, labels, offsets, RANKED, unjudged=unjudged, threads=3, **kwargs))


def test_item_gains_weights_padded_input_and_lists(split_small_inputs):
    scores, labels, offsets, _ = workload(seed=2)
    gains = np.abs(np.random.default_rng(0).normal(size=scores.size))
    weights = np.arange(offsets.size - 1) % 4
    one = metrics.evaluate(scores, labels, offsets, "ndcg@10,dcg,map", item_gain=gains, query_weights=weights)
    assert_same(one, metrics.evaluate(scores, labels, offsets, "ndcg@10,dcg,map", item_gain=gains,
                                      query_weights=weights, threads=2))
    # plain Python lists in, and the padded [Q, L] layout with a mask
    one = metrics.evaluate(scores.tolist(), labels.tolist(), offsets.tolist(), RANKED)
    assert_same(one, metrics.evaluate(scores.tolist(), labels.tolist(), offsets.tolist(), RANKED, threads=2))
    padded = np.zeros((4, 6))
    mask = np.arange(6)[None, :] < np.array([[6], [2], [0], [5]])
    rng = np.random.default_rng(4)
    s, y = rng.normal(size=padded.shape), rng.integers(0, 3, padded.shape)
    assert_same(metrics.evaluate(s, y, None, RANKED, mask=mask),
                metrics.evaluate(s, y, None, RANKED, mask=mask, threads=2))


def test_errors_keep_their_whole_input_wording(split_small_inputs):
    scores, labels, offsets, _ = workload()
    bad = scores.copy()
    bad[-1] = np.nan
    with pytest.raises(ValueError, match="scores contain NaN"):
        metrics.evaluate(bad, labels, offsets, "ndcg@10", threads=2)
    with pytest.raises(ValueError, match=f"scores has {scores.size} items but labels has {scores.size - 1}"):
        metrics.evaluate(scores, labels[:-1], offsets, "ndcg@10", threads=2)
    for threads in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="threads must be a positive integer"):
            metrics.evaluate(scores, labels, offsets, "ndcg@10", threads=threads)


def test_share_bounds_balance_items_and_keep_small_inputs_on_one_thread():
    offsets = np.array([0, 10, 20, 60, 70, 80, 120])
    assert ev._share_bounds(120, [0] * 120, offsets, 2) is None  # 60 items per thread is below the threshold
    old = ev.MIN_ITEMS_PER_THREAD
    try:
        ev.MIN_ITEMS_PER_THREAD = 1
        # cuts at the first query boundary at or after 60 items: 2 shares of 60 items each
        assert ev._share_bounds(120, [0] * 120, offsets, 2).tolist() == [0, 3, 6]
        # targets 40 and 80: boundaries 60 (query 3) and 80 (query 5), shares of 60, 20 and 40 items
        assert ev._share_bounds(120, [0] * 120, offsets, 3).tolist() == [0, 3, 5, 6]
        assert ev._share_bounds(120, [0] * 119, offsets, 2) is None  # malformed: one thread words the error
    finally:
        ev.MIN_ITEMS_PER_THREAD = old


def test_chunks_come_in_a_multiple_of_the_threads(monkeypatch):
    # 13 items' worth of chunks on 2 threads would give one thread 7 chunks and the other 6
    offsets = np.arange(0, 1301, 10)  # 130 queries of 10 items
    monkeypatch.setattr(ev, "MIN_ITEMS_PER_THREAD", 1)
    monkeypatch.setattr(ev, "CHUNK_ITEMS", 100)
    for threads, chunks in [(1, 13), (2, 14), (3, 15), (4, 16), (5, 15)]:
        bounds = ev._chunk_bounds(1300, [0] * 1300, offsets, threads)
        assert bounds.size - 1 == chunks, threads
        items = np.diff(offsets[bounds])
        assert items.max() - items.min() <= 10  # one query at most between the largest and the smallest


def test_ltr_eval_threads_prints_the_same_report(tmp_path, monkeypatch):
    from ltr.cli import main

    monkeypatch.setattr(ev, "MIN_ITEMS_PER_THREAD", 1)
    calls = []
    original = ev._threaded_values
    monkeypatch.setattr(ev, "_threaded_values", lambda *a: calls.append(a[1]) or original(*a))
    from ltr.data.trec import write_qrels, write_run

    rng = np.random.default_rng(0)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 3)) for j in range(0, 30, 3)} for i in range(40)}
    run = {f"q{i}": [(f"d{j}", float(rng.normal())) for j in range(25)] for i in range(40)}
    write_qrels(tmp_path / "qrels", qrels)
    write_run(tmp_path / "run", run)
    reports = []
    for threads in ("1", "3"):
        out = tmp_path / f"report{threads}.json"
        argv = ["eval", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "run"), "--per-query",
                "--metrics", "ndcg@10,map,recall@20", "--threads", threads, "--output", str(out)]
        assert main(argv) == 0
        reports.append(out.read_text())
    assert reports[0] == reports[1]
    assert '"ndcg@10"' in reports[0]
    assert calls == [1, 3]  # --threads reached metrics.evaluate


def test_cached_attributes_of_two_instances_are_computed_at_once():
    # functools.cached_property on Python 3.11 holds one lock per property across all instances:
    # the second thread could not enter its computation while the first waits in its own, and the
    # barrier below would break; metrics' ranked lists (one per chunk of queries) use cached_attribute
    import threading

    from metrics._cached import cached_attribute
    from metrics.ranking import RankedLists
    from metrics.trec_eval import TrecLists

    barrier = threading.Barrier(2, timeout=10)

    class Lists:
        @cached_attribute
        def perm(self):
            barrier.wait()  # both threads are inside a computation at the same time
            return id(self)

    a, b = Lists(), Lists()
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda x: x.perm, [a, b]))
    assert got == [id(a), id(b)] and a.perm == id(a)  # stored: the second read does not wait again
    for cls in (RankedLists, TrecLists):
        lazy = [name for name, v in vars(cls).items() if isinstance(v, cached_attribute)]
        assert lazy and not [n for n, v in vars(cls).items() if type(v).__name__ == "cached_property"], cls
