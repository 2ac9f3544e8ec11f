"""Measures beyond trec_eval: ERR, RBP and its residual, dcg_burges, bpref, OPA, ARP, P@K with the
min(K, n) denominator, query-weighted means and α-nDCG — hand computations, peers and properties."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import metrics

TOL = 1e-12


def _one(name, scores, labels, offsets=None, **kw):
    offsets = [0, len(scores)] if offsets is None else offsets
    r = metrics.evaluate(np.asarray(scores, float), np.asarray(labels, float), offsets, [name], **kw)
    return r.per_query[r.names[name]], r.names[name]


def random_lists(seed, n_queries=60, max_len=12, grades=(0, 0, 1, 2, 3, 4), ties=True):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    scores = rng.normal(size=offsets[-1])
    if ties:
        scores = np.round(scores * 2) / 2
    labels = rng.choice(grades, size=offsets[-1]).astype(float)
    return scores, labels, offsets


# --------------------------------------------------------------------------- ERR
def test_err_hand_computed():
    # grades 4, 0, 2 in rank order: R = 15/16, 0, 3/16
    v, stamped = _one("err@3", [3, 2, 1], [4, 0, 2])
    assert v[0] == pytest.approx(15 / 16 + (1 / 16) * 1.0 * (3 / 16) / 3, abs=TOL)
    assert stamped == "err@3[gmax=4,ties=stable]"
    v1, _ = _one("err@1", [3, 2, 1], [4, 0, 2])
    assert v1[0] == pytest.approx(15 / 16, abs=TOL)
    # g_max is a convention: with max_grade=2 a grade 2 stops the user with probability 3/4
    v2, stamped2 = _one("err", [2, 1], [2, 1], max_grade=2)
    assert v2[0] == pytest.approx(3 / 4 + (1 / 4) * (1 / 4) / 2, abs=TOL) and "gmax=2" in stamped2
    with pytest.raises(ValueError, match="max_grade"):
        _one("err", [2, 1], [5, 1])


def test_err_equals_a_direct_loop_and_is_a_probability():
    scores, labels, offsets = random_lists(1)
    for k in (1, 3, None):
        name = "err" if k is None else f"err@{k}"
        got, _ = _one(name, scores, labels, offsets)
        for q in range(offsets.size - 1):
            s, y = scores[offsets[q]:offsets[q + 1]], labels[offsets[q]:offsets[q + 1]]
            order = np.argsort(-s, kind="stable")
            reach, want = 1.0, 0.0
            for r, i in enumerate(order[:k] if k else order, start=1):
                stop = (2 ** y[i] - 1) / 16
                want += reach * stop / r
                reach *= 1 - stop
            assert got[q] == pytest.approx(want, abs=TOL)
        assert np.all((got >= 0) & (got <= 1))


# --------------------------------------------------------------------------- RBP
def test_rbp_and_residual_hand_computed():
    v, stamped = _one("rbp.0.5", [4, 3, 2, 1], [1, 0, 1, 0])
    assert v[0] == pytest.approx(0.5 * (1 + 0.25), abs=TOL) and stamped.startswith("rbp.0.5[p=0.5,rel>=1")
    res, _ = _one("rbp_resid.0.5", [4, 3, 2, 1], [1, np.nan, 1, 0])
    assert res[0] == pytest.approx(0.5 ** 4 + 0.5 * 0.5, abs=TOL)
    assert _one("rbp.95", [1.0], [1])[1].startswith("rbp.95[p=0.95,")  # ranx's spelling
    assert _one("rbp.p=0.9", [1.0], [1])[0][0] == pytest.approx(0.1, abs=TOL)
    assert _one("rbp", [1.0], [1])[0][0] == pytest.approx(0.2, abs=TOL)  # default p = 0.8
    with pytest.raises(ValueError, match="persistence"):
        _one("rbp.1.5", [1.0], [1])


def test_rbp_plus_residual_bounds_every_completion_of_the_judgements():
    scores, labels, offsets = random_lists(2, grades=(0, 1, np.nan))
    rbp, _ = _one("rbp.0.9", scores, labels, offsets)
    resid, _ = _one("rbp_resid.0.9", scores, labels, offsets)
    best, _ = _one("rbp.0.9", scores, np.nan_to_num(labels, nan=1.0), offsets)  # unjudged all relevant
    assert np.all(best <= rbp + resid + TOL) and np.all(rbp + resid <= 1 + TOL)
    tail = 0.9 ** np.diff(offsets)  # past the list: the rest of the residual
    np.testing.assert_allclose(best + tail, rbp + resid, atol=TOL)


def _ranx_case(seed, n_queries=40):
    rng = np.random.default_rng(seed)
    qrels, run, flat = {}, {}, ([], [], [0], [], [0])
    for j in range(n_queries):
        n = int(rng.integers(2, 15))
        # 12-character ids, as those of test_metrics_peers' ranx test: run compiled (NUMBA_DISABLE_JIT=0), numba
        # compiles ranx's typed dicts once per id width, so the two tests (one worker, xdist_group "ranx") share them
        docs = [f"d{i:011d}" for i in range(n)]
        scores = rng.permutation(n).astype(float) + 1.0  # distinct: ranx's own sort decides no tie
        labels = rng.choice([0, 1, 1, 2, 3], size=n)
        judged = {d: int(y) for d, y in zip(docs, labels) if rng.random() < 0.85}
        judged[f"u{j:011d}"], judged[f"n{j:011d}"] = int(rng.integers(1, 3)), 0  # not retrieved; one judged non-relevant
        qrels[f"q{j:03d}"], run[f"q{j:03d}"] = judged, dict(zip(docs, scores))
        flat[0].extend(scores)
        flat[1].extend(judged.get(d, np.nan) for d in docs)
        flat[2].append(len(flat[0]))
        flat[3].extend(judged.values())
        flat[4].append(len(flat[3]))
    return qrels, run, [np.asarray(x, dtype=float) if i != 2 and i != 4 else np.asarray(x) for i, x in enumerate(flat)]


@pytest.mark.xdist_group("ranx")  # one worker imports ranx for both ranx tests (interpreted: tests/conftest.py)
def test_dcg_burges_bpref_rbp_equal_ranx():
    ranx = pytest.importorskip("ranx")
    qrels, run, (s, y, off, ql, qo) = _ranx_case(3)
    binary = {q: {d: int(v >= 1) for d, v in docs.items()} for q, docs in qrels.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run),
                             ["dcg_burges@5", "ndcg_burges@10", "dcg@5", "bpref"], return_mean=False)
        want_rbp = ranx.evaluate(ranx.Qrels.from_dict(binary), ranx.Run.from_dict(run), ["rbp.8", "rbp.95"],
                                 return_mean=False)
    r = metrics.evaluate(s, y, off, ["dcg_burges@5", "ndcg_burges@10", "dcg@5", "bpref", "rbp.8", "rbp.95"],
                         preset="ranx", qrels_labels=ql, qrels_offsets=qo)
    for name in ("dcg_burges@5", "ndcg_burges@10", "dcg@5", "bpref"):
        np.testing.assert_allclose(r.per_query[r.names[name]], want[name], atol=1e-9, rtol=0, err_msg=name)
    for name in ("rbp.8", "rbp.95"):  # ranx weights a hit by its grade: binary qrels make it RBP proper
        np.testing.assert_allclose(r.per_query[r.names[name]], want_rbp[name], atol=1e-9, rtol=0, err_msg=name)
    assert r.names["dcg_burges@5"].startswith("dcg_burges@5[gain=exp2,")


# --------------------------------------------------------------------------- OPA and ARP
def _opa_brute(s, y, average):
    right = total = 0.0
    order = np.argsort(-s, kind="stable")
    rank = np.empty(len(s), int)
    rank[order] = np.arange(len(s))
    for i, j in itertools.permutations(range(len(s)), 2):
        if np.isnan(y[i]) or np.isnan(y[j]) or not y[i] > y[j]:
            continue
        total += 1
        right += 0.5 if (average and s[i] == s[j]) else float(rank[i] < rank[j])
    return right / total if total else np.nan


@pytest.mark.parametrize("ties", ["stable", "average"])
def test_opa_equals_brute_force_pairs(ties):
    scores, labels, offsets = random_lists(4, grades=(0, 1, 2, 3, np.nan))
    got, stamped = _one("opa", scores, labels, offsets, ties=ties)
    assert stamped == f"opa[empty=skip,ties={ties}]"
    for q in range(offsets.size - 1):
        sl = slice(offsets[q], offsets[q + 1])
        want = _opa_brute(scores[sl], labels[sl], ties == "average")
        assert (np.isnan(got[q]) and np.isnan(want)) or got[q] == pytest.approx(want, abs=TOL)


def test_opa_with_averaged_ties_is_the_roc_auc_of_binary_labels():
    from sklearn.metrics import roc_auc_score

    scores, labels, offsets = random_lists(5, grades=(0, 1))
    got, _ = _one("opa", scores, labels, offsets, ties="average")
    for q in range(offsets.size - 1):
        y, s = labels[offsets[q]:offsets[q + 1]], scores[offsets[q]:offsets[q + 1]]
        if 0 < y.sum() < y.size:
            assert got[q] == pytest.approx(roc_auc_score(y, s), abs=TOL)
        else:
            assert np.isnan(got[q])


def test_arp_hand_computed_and_lower_is_better():
    v, stamped = _one("arp", [5, 4, 3, 2, 1], [0, 1, 0, 0, 2])
    assert v[0] == pytest.approx((2 + 5) / 2, abs=TOL) and stamped == "arp[rel>=1,empty=skip,ties=stable]"
    v, _ = _one("arp", [1, 1, 1, 0], [0, 1, 0, 1], ties="average")  # tie group at ranks 1-3: 2
    assert v[0] == pytest.approx((2 + 4) / 2, abs=TOL)
    assert not metrics.higher_is_better("arp") and metrics.higher_is_better("err@10")
    assert np.isnan(_one("arp", [1, 0], [0, 0])[0][0])


# --------------------------------------------------------------------------- P@K denominator, weights
def test_precision_min_k_n_denominator():
    v, stamped = _one("p@10", [3, 2, 1], [1, 0, 1], p_denominator="min(K,n)")
    assert v[0] == pytest.approx(2 / 3, abs=TOL) and stamped.endswith(",denom=min(K,n)]")
    assert _one("p@10", [3, 2, 1], [1, 0, 1])[0][0] == pytest.approx(0.2, abs=TOL)  # trec_eval's / K
    assert _one("p@2", [3, 2, 1], [1, 0, 1], p_denominator="min(K,n)")[0][0] == pytest.approx(0.5, abs=TOL)
    parsed = metrics.evaluate([3.0, 2.0, 1.0], [1, 0, 1], [0, 3], [stamped])
    assert parsed.per_query[parsed.names["p@10"]][0] == pytest.approx(2 / 3, abs=TOL)  # read back from the stamp


def test_query_weighted_means():
    scores, labels, offsets = random_lists(6)
    w = np.random.default_rng(0).random(offsets.size - 1)
    plain = metrics.evaluate(scores, labels, offsets, ["ndcg@5", "map"])
    weighted = metrics.evaluate(scores, labels, offsets, ["ndcg@5", "map"], query_weights=w)
    for name in ("ndcg@5", "map"):
        v = plain.per_query[plain.names[name]]
        ok = ~np.isnan(v)
        assert weighted[name] == pytest.approx(np.average(v[ok], weights=w[ok]), abs=TOL)
        assert weighted[name] != pytest.approx(plain[name], abs=1e-6)
    with pytest.raises(ValueError, match="query_weights"):
        metrics.evaluate(scores, labels, offsets, "map", query_weights=w[:-1])


# --------------------------------------------------------------------------- α-nDCG
def test_alpha_ndcg_hand_computed():
    # ranked: d1 {1}, d2 {1, 2}, d3 {2}; α = 0.5: gains 1, 0.5 + 1, 0.5; ideal d2, d1 (or d3), d3
    got = metrics.alpha_ndcg([3.0, 2.0, 1.0], [[1, 0], [1, 1], [0, 1]], alpha=0.5)
    dcg = 1 + 1.5 / np.log2(3) + 0.5 / 2
    ideal = 2 + 0.5 / np.log2(3) + 0.5 / 2
    assert got[0] == pytest.approx(dcg / ideal, abs=TOL)
    at1 = metrics.alpha_ndcg([3.0, 2.0, 1.0], [[1, 0], [1, 1], [0, 1]], k=1, alpha=0.5)
    assert at1[0] == pytest.approx(1 / 2, abs=TOL)
    # a judged document that was not retrieved ({3}) raises the ideal
    more = metrics.alpha_ndcg([3.0, 2.0, 1.0], [[1, 0, 0], [1, 1, 0], [0, 1, 0]], alpha=0.5,
                              qrels_judgements=[[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1]], qrels_offsets=[0, 4])
    assert more[0] == pytest.approx(dcg / (2 + 1 / np.log2(3) + 0.5 / 2 + 0.5 / np.log2(5)), abs=TOL)


def test_alpha_zero_is_ndcg_with_the_number_of_subtopics_as_gain():
    rng = np.random.default_rng(7)
    scores, _, offsets = random_lists(8, ties=False)
    cover = (rng.random((scores.size, 4)) < 0.3).astype(float)
    for k in (3, None):
        got = metrics.alpha_ndcg(scores, cover, offsets, k=k, alpha=0.0, empty="zero")
        want = metrics.ndcg(scores, cover.sum(axis=1), offsets, k=k, gain="linear", empty="zero")
        np.testing.assert_allclose(got, want, atol=TOL)
    # α > 0 repeats are worth less: never above the α = 0 value of the same ranking's DCG
    assert np.all(metrics.alpha_ndcg(scores, cover, offsets, alpha=0.9, empty="zero") <= 1 + TOL)
