"""Ranking metrics: the vectorized engine against a per-query reference, conventions, edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import metrics
from metrics.ranking import RankedLists, rank_order


# ---------------------------------------------------------------- a slow, obvious reference
def _reference(kind, scores, labels, k, *, gain="exp2", threshold=1.0, map_norm="R", empty="skip", ties="stable",
               doc_ids=None):
    """One query at a time, by the textbook formula (Python loops, explicit sort)."""
    n = len(scores)
    if ties == "stable":
        order = sorted(range(n), key=lambda i: -scores[i])
    elif ties == "pessimistic":
        order = sorted(range(n), key=lambda i: (-scores[i], labels[i]))
    elif ties == "docid_desc":
        order = sorted(range(n), key=lambda i: doc_ids[i], reverse=True)
        order = sorted(order, key=lambda i: -scores[i])
    y = [labels[i] for i in order]
    g = [(2.0 ** v - 1) if gain == "exp2" else float(v) for v in y]
    cut = n if k is None else min(k, n)
    rel = [v >= threshold for v in y]
    R = sum(rel)
    fill = {"skip": math.nan, "zero": 0.0, "one": 1.0}[empty]
    disc = [1 / math.log2(r + 2) for r in range(n)]
    if kind == "dcg":
        return sum(g[r] * disc[r] for r in range(cut))
    if kind == "ndcg":
        ideal_gains = sorted([x for x in g if x > 0], reverse=True)[: (n if k is None else k)]
        ideal = sum(x * disc[r] for r, x in enumerate(ideal_gains))
        return fill if ideal <= 0 else sum(g[r] * disc[r] for r in range(cut)) / ideal
    if R == 0:
        return fill
    hits = sum(rel[:cut])
    if kind == "p":
        return hits / (n if k is None else k)
    if kind == "recall":
        return hits / R
    if kind == "hit":
        return float(hits > 0)
    if kind == "rprec":
        return sum(rel[: min(R, n)]) / R
    if kind == "rr":
        for r in range(cut):
            if rel[r]:
                return 1 / (r + 1)
        return 0.0
    if kind == "ap":
        total, seen = 0.0, 0
        for r in range(cut):
            if rel[r]:
                seen += 1
                total += seen / (r + 1)
        norm = R if (map_norm == "R" or k is None) else min(R, k)
        return total / norm


def _random(seed, n_queries=300, max_len=25):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, max_len, n_queries)
    lengths[:3] = [0, 1, 60]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = offsets[-1]
    scores = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
    labels = rng.choice([-1, 0, 0, 0, 1, 2, 3], size=n).astype(float)
    docs = np.array([f"{rng.integers(0, 999):03d}.{i}" for i in range(n)], dtype=object)
    return scores, labels, offsets, docs


@pytest.mark.parametrize("ties", ["stable", "pessimistic", "docid_desc"])
@pytest.mark.parametrize("seed", [0, 1])
def test_vectorized_equals_per_query_reference(seed, ties):
    scores, labels, offsets, docs = _random(seed)
    for conv in ({}, {"gain": "linear", "empty": "zero", "threshold": 2.0}, {"map_norm": "min(R,K)", "empty": "one"}):
        full = {"gain": "exp2", "threshold": 1.0, "map_norm": "R", "empty": "skip", **conv}
        for kind in ("ndcg", "dcg", "ap", "rr", "p", "recall", "hit", "rprec"):
            for k in (None, 1, 3, 10, 100):
                if kind == "rprec" and k is not None:
                    continue
                rl = RankedLists(scores, labels, offsets, metrics.get_conventions(ties=ties, **conv), doc_ids=docs)
                got = rl.metric(kind, k)
                want = np.array([
                    _reference(kind, scores[a:b].tolist(), labels[a:b].tolist(), k, ties=ties,
                               doc_ids=docs[a:b].tolist(), **full)
                    for a, b in zip(offsets[:-1], offsets[1:])
                ])
                np.testing.assert_allclose(got, want, atol=1e-12, rtol=0, err_msg=f"{kind}@{k} {conv} {ties}")


def test_padded_equals_flat_and_torch_inputs_accepted():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    q, length = 40, 12
    s = rng.normal(size=(q, length))
    y = rng.integers(0, 4, size=(q, length)).astype(float)
    mask = rng.random((q, length)) < 0.7
    mask[0] = False
    names = ["ndcg@5", "map", "mrr@3", "p@10", "recall@5", "hit@2", "rprec", "dcg"]
    padded = metrics.evaluate(s, y, None, names, mask=mask)
    flat = metrics.evaluate(s[mask], y[mask], np.concatenate([[0], np.cumsum(mask.sum(1))]), names)
    tensors = metrics.evaluate(torch.tensor(s), torch.tensor(y), None, names, mask=torch.tensor(mask))
    for name in padded.per_query:
        np.testing.assert_array_equal(padded.per_query[name], flat.per_query[name])
        np.testing.assert_array_equal(tensors.per_query[name], flat.per_query[name])
    assert np.isnan(padded.per_query[padded.names["ndcg@5"]][0])  # an all-padding row is an empty query


def test_fast_sort_handles_scores_that_share_truncated_bits():
    # Many queries and long lists leave few key bits for the score: neighbours 1 ulp apart must still
    # be ordered exactly (the collision fix-up), and -0.0 ties with +0.0 (input order kept).
    rng = np.random.default_rng(2)
    n_q, length = 1500, 700
    base = 1.0 + np.arange(length) * np.finfo(float).eps
    scores = np.concatenate([rng.permutation(base) if i % 2 else rng.normal(size=length) for i in range(n_q)])
    scores[:4] = [0.0, -0.0, 0.0, -0.0]
    offsets = np.arange(n_q + 1) * length
    qidx = np.repeat(np.arange(n_q), length)
    want = np.lexsort((np.arange(scores.size), -scores, qidx))
    perm = rank_order(scores, offsets)
    np.testing.assert_array_equal(perm, want)
    where = np.argsort(perm)[:4]  # the four zeros sit together, in input order
    assert np.all(np.diff(where) == 1)


def test_ties_average_is_the_mean_over_all_tie_orders():
    scores = np.array([0.5, 0.5, 0.5, 0.2, 0.2, 0.9])
    labels = np.array([3, 0, 1, 2, 0, 0], dtype=float)
    groups = [[5], [0, 1, 2], [3, 4]]
    for kind, k in (("dcg", 2), ("ndcg", 3), ("p", 2), ("recall", 4), ("ndcg", None), ("rprec", None),
                    ("rr", None), ("rr", 2), ("rr", 3), ("hit", 1), ("hit", 2), ("hit", 3), ("hit", None)):
        values = []
        for p1 in itertools.permutations(groups[1]):
            for p2 in itertools.permutations(groups[2]):
                order = groups[0] + list(p1) + list(p2)
                values.append(metrics.evaluate(-np.arange(6.0), labels[order], [0, 6], [kind if k is None else f"{kind}@{k}"],
                                               gain="linear").per_query.popitem()[1][0])
        got = metrics.evaluate(scores, labels, [0, 6], [kind if k is None else f"{kind}@{k}"], ties="average",
                               gain="linear").per_query.popitem()[1][0]
        assert got == pytest.approx(np.mean(values), abs=1e-12), kind
    with pytest.raises(ValueError, match="ties='average'"):
        metrics.evaluate(scores, labels, [0, 6], ["map@3"], ties="average")
    # AP under tie averaging is scikit-learn's step AP: one step per distinct score
    # groups [0.9: 0 rel], [0.5: 2 rel of 3], [0.2: 1 rel of 2]: (2 * 2/4 + 1 * 3/6) / 3
    got = metrics.evaluate(scores, labels, [0, 6], ["map"], ties="average")["map"]
    assert got == pytest.approx((2 * 2 / 4 + 1 * 3 / 6) / 3)


def test_empty_rules_unjudged_rules_and_means():
    scores = np.array([3.0, 2.0, 1.0, 3.0, 2.0, 9.0, 8.0])
    labels = np.array([0, 1, np.nan, 0, 0, np.nan, 1])
    offsets = [0, 3, 5, 5, 7]  # q1: relevant at 2 after ...; q2: none; q3: no items; q4: unjudged on top
    r = metrics.evaluate(scores, labels, offsets, ["mrr", "ndcg"])
    rr = r.per_query[r.names["mrr"]]
    assert rr[0] == 0.5 and np.isnan(rr[1]) and np.isnan(rr[2]) and rr[3] == 0.5
    assert r["mrr"] == 0.5 and r.counted[r.names["mrr"]] == 2
    removed = metrics.evaluate(scores, labels, offsets, ["mrr"], unjudged="remove")
    assert removed.per_query[removed.names["mrr"]][3] == 1.0  # the unjudged top item is gone
    assert "unjudged=remove" in removed.names["mrr"]
    for rule, fill in (("zero", 0.0), ("one", 1.0)):
        z = metrics.evaluate(scores, labels, offsets, ["mrr", "p@2"], empty=rule)
        assert z.per_query[z.names["mrr"]][1] == fill and z.per_query[z.names["p@2"]][2] == fill
    # DCG is never "empty"
    d = metrics.evaluate(scores, labels, offsets, ["dcg@2"])
    assert d.per_query[d.names["dcg@2"]].tolist()[:3] == [1 / math.log2(3), 0.0, 0.0]


def test_negative_and_non_integer_labels_and_item_gain():
    scores = np.array([4.0, 3.0, 2.0, 1.0])
    labels = np.array([-1.0, 0.5, 2.5, 0.0])
    # gains: exp2 of each label (negative gain for -1); the ideal uses positive gains only
    g = 2.0 ** labels - 1
    d = 1 / np.log2(np.arange(2, 6))
    ideal = np.sort(g[g > 0])[::-1] @ d[:2]
    assert metrics.ndcg(scores, labels)[0] == pytest.approx((g @ d) / ideal)
    assert metrics.ndcg(scores, labels, zero_gain_below=0)[0] == pytest.approx((np.maximum(g, 0) @ d) / ideal)
    price = np.array([10.0, 0.0, 5.0, 1.0])
    got = metrics.evaluate(scores, labels, [0, 4], ["ndcg@2"], item_gain=price)
    assert got.names["ndcg@2"].startswith("ndcg@2[gain=item,")
    assert got["ndcg@2"] == pytest.approx(10.0 / (10.0 + 5.0 / math.log2(3)))


def test_float32_scores_in_the_trec_eval_preset():
    # vectors.json float32_near_tie: d2 (non-relevant) 0.3, d1 (relevant) 0.3 + 1e-9
    scores, labels, docs = np.array([0.3, 0.3 + 1e-9]), np.array([0.0, 1.0]), ["d2", "d1"]
    te = metrics.evaluate(scores, labels, [0, 2], ["recip_rank", "ndcg"], preset="trec_eval", doc_ids=docs)
    assert te["recip_rank"] == 0.5 and te["ndcg"] == pytest.approx(0.63093, abs=1e-5)
    assert metrics.evaluate(scores, labels, [0, 2], ["mrr"], preset="ranx")["mrr"] == 1.0


def test_stamped_names_aliases_and_round_trip():
    s, y, o = np.array([2.0, 1.0, 3.0]), np.array([1.0, 0.0, 2.0]), [0, 3]
    asked = ["ndcg@2", "NDCG", "map@2", "ap", "mrr@1", "rr", "precision@2", "p", "recall", "hit@1", "hitrate",
             "rprec", "r-precision", "P_2", "ndcg_cut_2", "map_cut_2", "recip_rank", "Rprec", "success_1", "dcg"]
    r = metrics.evaluate(s, y, o, asked)
    for name in asked:
        assert r.names[name].startswith(name + "[")
        again = metrics.evaluate(s, y, o, [r.names[name]])
        assert again.names[r.names[name].split("[")[0]] == r.names[name]
        assert again.mean[r.names[name]] == r.mean[r.names[name]]
    assert r["P_2"] == r["precision@2"] and r["ndcg_cut_2"] == r["ndcg@2"] and r["success_1"] == r["hit@1"]
    # a stamped name overrides the call's conventions for that metric only
    mixed = metrics.evaluate(s, y, o, "map@1[rel>=2,norm=min(R,K),empty=zero,ties=stable],map@1")
    assert mixed["map@1"] == 0.5
    assert mixed.mean["map@1[rel>=2,norm=min(R,K),empty=zero,ties=stable]"] == 1.0
    for bad in ("ndgc@10", "ndcg@0", "ndcg@x", "map[gain=cubic]", "ndcg[ideal=all]"):
        with pytest.raises(ValueError):
            metrics.evaluate(s, y, o, [bad])


def test_presets_and_overrides():
    c = metrics.get_conventions("lightgbm", empty="skip")
    assert (c.gain, c.empty, c.map_norm) == ("exp2", "skip", "min(R,K)")
    assert metrics.get_conventions("ranx").gain_floor == 1.0
    assert metrics.get_conventions("ranx", threshold=2).gain_floor == 2.0
    with pytest.raises(ValueError):
        metrics.get_conventions("xgboost")
    with pytest.raises(TypeError):
        metrics.get_conventions(None, gains="exp2")
    with pytest.raises(ValueError):
        metrics.get_conventions(None, empty="drop")


def test_input_validation():
    with pytest.raises(ValueError, match="end at the number of items"):
        metrics.ndcg([1.0, 2.0], [0, 1], [0, 3])
    with pytest.raises(ValueError, match="NaN"):
        metrics.ndcg([1.0, np.nan], [0, 1], [0, 2])
    with pytest.raises(ValueError, match="labels"):
        metrics.ndcg([1.0, 2.0], [0, 1, 1], [0, 2])
    with pytest.raises(ValueError, match="non-decreasing"):
        metrics.ndcg([1.0, 2.0], [0, 1], [0, 2, 1, 2])
    with pytest.raises(ValueError, match="doc_ids"):
        metrics.ndcg([1.0, 2.0], [0, 1], [0, 2], ties="docid_desc")
    with pytest.raises(ValueError, match="qrels_offsets"):
        metrics.recall([1.0], [1], [0, 1], qrels_labels=[1.0])
    # zero queries, zero items
    r = metrics.evaluate(np.zeros(0), np.zeros(0), [0], ["ndcg@10", "map"])
    assert r.per_query[r.names["map"]].shape == (0,) and np.isnan(r["map"])


def test_block_boundaries_do_not_change_results(monkeypatch):
    # the engine works block by block; tiny blocks cut queries, tie runs and collision runs apart
    import metrics.ranking as ranking

    scores, labels, offsets, docs = _random(3)
    names = ["ndcg@5", "ndcg", "dcg", "map", "map@3", "mrr@2", "p@4", "recall@10", "hit@1", "rprec"]
    want = metrics.evaluate(scores, labels, offsets, names)
    rng = np.random.default_rng(4)
    base = 1.0 + np.arange(300) * np.finfo(float).eps  # distinct scores sharing truncated key bits
    tied = np.concatenate([rng.permutation(base) for _ in range(200)])
    tied_offsets = np.arange(201) * 300
    want_order = rank_order(tied, tied_offsets)
    np.testing.assert_array_equal(want_order, np.lexsort((np.arange(tied.size), -tied, np.repeat(np.arange(200), 300))))
    monkeypatch.setattr(ranking, "_CHUNK", 7)
    got = metrics.evaluate(scores, labels, offsets, names)
    for name in want.per_query:
        np.testing.assert_allclose(got.per_query[name], want.per_query[name], atol=1e-12, rtol=0, err_msg=name)
    monkeypatch.setattr(ranking, "_CHUNK", 1000)
    np.testing.assert_array_equal(rank_order(tied, tied_offsets), want_order)


def test_collision_resort_keeps_relevance_positions_right():
    # distinct scores that share truncated key bits force the exact re-sort after the single sort;
    # the relevant positions collected during decoding must then be recomputed
    rng = np.random.default_rng(6)
    base = 1.0 + np.arange(300) * np.finfo(float).eps
    scores = np.concatenate([rng.permutation(base) for _ in range(200)])
    labels = rng.choice([0.0, 0.0, 1.0, 2.0], size=scores.size)
    offsets = np.arange(201) * 300
    r = metrics.evaluate(scores, labels, offsets, ["map", "mrr@5", "p@10", "ndcg@10"])
    for name, kind, k in (("map", "ap", None), ("mrr@5", "rr", 5), ("p@10", "p", 10), ("ndcg@10", "ndcg", 10)):
        want = [_reference(kind, scores[a:b].tolist(), labels[a:b].tolist(), k) for a, b in zip(offsets[:-1], offsets[1:])]
        np.testing.assert_allclose(r.per_query[r.names[name]], want, atol=1e-12, rtol=0, err_msg=name)


def test_inputs_are_never_modified():
    rng = np.random.default_rng(8)
    scores = rng.normal(size=50)
    labels = rng.choice([np.nan, -1.0, 0.0, 1.0, 2.0], size=50)
    price = rng.random(50)
    offsets = [0, 20, 20, 50]
    copies = scores.copy(), labels.copy(), price.copy()
    metrics.evaluate(scores, labels, offsets, ["ndcg@5", "map", "dcg"], gain=lambda r: r, zero_gain_below=0)
    metrics.evaluate(scores, labels, offsets, ["ndcg@5", "dcg"], item_gain=price, zero_gain_below=1)
    metrics.evaluate(scores, labels, offsets, ["ndcg", "p@3"], preset="trec_eval", doc_ids=np.arange(50).astype(str))
    for before, after in zip(copies, (scores, labels, price)):
        np.testing.assert_array_equal(before, after)


def test_user_discount_curves_and_callable_gains():
    # a user's examination curve as a table and as a callable, and a custom gain
    scores, labels = np.array([3.0, 2.0, 1.0, 0.0]), np.array([1.0, 2.0, 0.0, 3.0])
    table = [1.0, 0.5, 0.25]
    r = metrics.evaluate(scores, labels, [0, 4], ["dcg", "ndcg@2"], discount=table, gain="linear")
    assert r["dcg"] == pytest.approx(1.0 + 2 * 0.5)  # rank 4 is past the table: not examined
    assert r["ndcg@2"] == pytest.approx((1.0 + 2 * 0.5) / (3.0 + 2 * 0.5))
    assert r.names["dcg"] == "dcg[gain=linear,discount=table,ties=stable]"
    curve = metrics.evaluate(scores, labels, [0, 4], ["dcg"], discount=lambda rank: 0.9 ** (rank - 1),
                             gain=lambda y: y ** 2)
    assert curve["dcg"] == pytest.approx(1.0 + 4 * 0.9 + 0 + 9 * 0.9 ** 3)


def test_ties_average_equals_brute_force_on_random_small_lists():
    rng = np.random.default_rng(11)
    names = ["dcg@2", "ndcg@3", "ndcg", "p@2", "recall@3", "rprec", "mrr", "mrr@2", "hit@1", "hit@3"]
    for _ in range(25):
        n = int(rng.integers(1, 7))
        scores = rng.integers(0, 3, n).astype(float)
        labels = rng.integers(0, 3, n).astype(float)
        got = metrics.evaluate(scores, labels, [0, n], names, ties="average", empty="zero")
        order = np.argsort(-scores, kind="stable")
        groups = [list(order[scores[order] == v]) for v in sorted(set(scores), reverse=True)]
        values = []
        for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
            ranked = [i for p in perms for i in p]
            r = metrics.evaluate(-np.arange(float(n)), labels[ranked], [0, n], names, empty="zero")
            values.append([r[name] for name in names])
        want = np.mean(values, axis=0)
        for name, w in zip(names, want):
            assert got[name] == pytest.approx(w, abs=1e-12), (name, scores, labels)


@pytest.mark.parametrize("score", [0.3, -2.0, 0.0, -0.0, 1e300, -1e-300])
def test_one_query_of_one_item(score):
    # no query bits and no position bits: the whole 64-bit key is the score
    names = ["ndcg", "ndcg@1", "map", "mrr", "p@1", "p@5", "recall@1", "hit@1", "rprec", "dcg"]
    r = metrics.evaluate([score], [1.0], [0, 1], names)
    assert [r[n] for n in names] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 1.0, 1.0, 1.0, 1.0]
    pair = np.array([score, 7.0])
    assert rank_order(pair, [0, 2]).tolist() == np.argsort(-pair, kind="stable").tolist()
