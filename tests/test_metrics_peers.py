"""The presets reproduce their evaluators on thousands of random queries, to 1e-9.

Random queries mix: graded labels (0..4), negative labels, unjudged documents, judged documents
that were not retrieved, queries without any relevant item, single-item lists, long lists, K
longer than the list, coarse scores with many ties and queries whose scores are all equal.
Scores are float32-representable (trec_eval compares them in float32).
Run with ``-s`` to see the largest difference against each peer.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import metrics

TOL = 1e-9


def random_queries(seed, n_queries, *, negative=True, unjudged=True, max_len=40):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, n_queries)
    lengths[rng.random(n_queries) < 0.06] = 1
    lengths[:2] = [3 * max_len, 5 * max_len]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    mode = rng.integers(0, 3, n_queries)  # 0: distinct scores, 1: coarse (ties), 2: all equal
    item_mode = np.repeat(mode, lengths)
    scores = rng.normal(size=n)
    scores = np.where(item_mode == 1, np.round(scores * 2) / 2, scores)
    scores = np.where(item_mode == 2, 0.25, scores)
    scores = scores.astype(np.float32).astype(np.float64)
    labels = rng.choice([0, 0, 0, 1, 1, 2, 3, 4], size=n).astype(np.float64)
    no_rel = np.repeat(rng.random(n_queries) < 0.1, lengths)
    labels[no_rel] = 0
    if negative:
        labels[rng.random(n) < 0.05] = -1
    if unjudged:
        labels[rng.random(n) < 0.1] = np.nan
    q = np.repeat(np.arange(n_queries), lengths)
    doc_ids = np.array([f"{rng.integers(0, 10**6):06d}-{i}" for i in range(n)], dtype=object)
    return scores, labels, offsets, doc_ids, q


def _report(peer, diff):
    print(f"\nlargest |difference| vs {peer}: {diff:.3g}")


# --------------------------------------------------------------------------- trec_eval
pytrec_eval = pytest.importorskip("pytrec_eval")

TREC = {  # our (trec spelling) name -> pytrec_eval measure
    "map": "map", "ndcg": "ndcg", "recip_rank": "recip_rank", "Rprec": "Rprec",
    **{f"P_{k}": f"P_{k}" for k in (1, 3, 10, 50)},
    **{f"recall_{k}": f"recall_{k}" for k in (1, 5, 50)},
    **{f"ndcg_cut_{k}": f"ndcg_cut_{k}" for k in (1, 3, 10, 50)},
    **{f"map_cut_{k}": f"map_cut_{k}" for k in (1, 5, 50)},
    **{f"success_{k}": f"success_{k}" for k in (1, 3)},
}
TREC_MEASURES = {"map", "ndcg", "recip_rank", "Rprec", "P.1,3,10,50", "recall.1,5,50", "ndcg_cut.1,3,10,50",
                 "map_cut.1,5,50", "success.1,3"}


@pytest.mark.parametrize("level,judged_only", [(1, False), (2, False), (1, True)])
def test_trec_eval_preset_equals_pytrec_eval(level, judged_only):
    scores, labels, offsets, docs, q = random_queries(10 + level + 5 * judged_only, 1500)
    rng = np.random.default_rng(99)
    n_q = offsets.size - 1
    run, qrels = {}, {}
    extra_labels, extra_offsets = [], [0]
    for j in range(n_q):
        lo, hi = offsets[j], offsets[j + 1]
        qid = f"q{j}"
        run[qid] = {docs[i]: float(scores[i]) for i in range(lo, hi)}
        judged = {docs[i]: int(labels[i]) for i in range(lo, hi) if not np.isnan(labels[i])}
        # judged documents that were not retrieved (some relevant); at least one judgment per query
        for e in range(int(rng.integers(0 if judged else 1, 4))):
            judged[f"unretrieved-{j}-{e}"] = int(rng.choice([-1, 0, 1, 2, 3]))
        qrels[qid] = judged
        extra_labels.extend(judged.values())
        extra_offsets.append(len(extra_labels))
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=level,
                                               judged_docs_only_flag=judged_only)
    want = evaluator.evaluate(run)
    r = metrics.evaluate(scores, labels, offsets, list(TREC), preset="trec_eval", doc_ids=docs, threshold=level,
                         unjudged="remove" if judged_only else "nonrelevant",
                         qrels_labels=np.array(extra_labels, dtype=float), qrels_offsets=extra_offsets)
    worst = 0.0
    for ours, theirs in TREC.items():
        got = r.per_query[r.names[ours]]
        ref = np.array([want[f"q{j}"][theirs] if f"q{j}" in want else np.nan for j in range(n_q)])
        present = ~np.isnan(ref)
        assert present.sum() >= n_q * 0.9
        np.testing.assert_allclose(got[present], ref[present], atol=TOL, rtol=0, err_msg=ours)
        worst = max(worst, float(np.max(np.abs(got[present] - ref[present]))))
    _report(f"pytrec_eval (level {level}, judged_only {judged_only})", worst)


# --------------------------------------------------------------------------- scikit-learn
@pytest.mark.slow
def test_sklearn_preset_equals_ndcg_score_and_dcg_score():
    from sklearn.metrics import _ranking, average_precision_score, dcg_score, ndcg_score

    scores, labels, offsets, _, _ = random_queries(20, 2000, negative=True, unjudged=False)
    lengths = np.diff(offsets)
    nonneg = np.maximum(labels, 0.0)  # ndcg_score rejects negative labels; dcg_score takes them
    # Per-query values: scikit-learn's per-row functions on [queries of one length, length] blocks
    # (its public ndcg_score/dcg_score average them; checked against the public ones below).
    per_row_ndcg = getattr(_ranking, "_ndcg_sample_scores")
    per_row_dcg = getattr(_ranking, "_dcg_sample_scores")
    worst = 0.0
    r_ap = metrics.evaluate(scores, labels, offsets, ["map"], preset="sklearn")
    for k in (1, 3, 10, 50, None):
        suffix = "" if k is None else f"@{k}"
        r_pos = metrics.evaluate(scores, nonneg, offsets, [f"ndcg{suffix}", f"dcg{suffix}"], preset="sklearn")
        r_neg = metrics.evaluate(scores, labels, offsets, [f"dcg{suffix}"], preset="sklearn")
        for length in np.unique(lengths[lengths >= 2]):  # scikit-learn needs two documents or more
            rows = np.flatnonzero(lengths == length)
            idx = offsets[rows][:, None] + np.arange(length)[None, :]
            s, y, y_neg = scores[idx], nonneg[idx], labels[idx]
            want = {
                "ndcg": per_row_ndcg(y, s, k=k),
                "dcg": per_row_dcg(y, s, k=k),
                "dcg_neg": per_row_dcg(y_neg, s, k=k),
            }
            got = {
                "ndcg": r_pos.per_query[r_pos.names[f"ndcg{suffix}"]][rows],
                "dcg": r_pos.per_query[r_pos.names[f"dcg{suffix}"]][rows],
                "dcg_neg": r_neg.per_query[r_neg.names[f"dcg{suffix}"]][rows],
            }
            for name in want:
                np.testing.assert_allclose(got[name], want[name], atol=TOL, rtol=0, err_msg=f"{name} k={k}")
                worst = max(worst, float(np.max(np.abs(got[name] - want[name]))))
            ap = r_ap.per_query[r_ap.names["map"]][rows]
            # average_precision_score, one list at a time: 5 lists of each length (about 130 lists with ties,
            # all-equal scores and lists without a relevant item; each call costs scikit-learn's input checks)
            for i, j in enumerate(rows[:5] if k is None else ()):
                y_bin = labels[offsets[j]:offsets[j + 1]] >= 1
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a list without relevant item: 0 and a warning
                    want_ap = average_precision_score(y_bin, scores[offsets[j]:offsets[j + 1]]) if y_bin.any() else 0.0
                assert abs(ap[i] - want_ap) <= TOL, (j, ap[i], want_ap)
                worst = max(worst, abs(ap[i] - want_ap))
            if length in (2, 7, 40):  # the public functions: means of the same rows
                assert abs(ndcg_score(y, s, k=k) - got["ndcg"].mean()) <= TOL
                assert abs(dcg_score(y_neg, s, k=k) - got["dcg_neg"].mean()) <= TOL
    _report("scikit-learn ndcg_score/dcg_score/average_precision_score", worst)


# --------------------------------------------------------------------------- LightGBM
def _lightgbm_means(scores, labels, lengths, eval_at):
    import lightgbm as lgb

    x = (np.arange(scores.size) % 7).astype(float)[:, None]
    train = lgb.Dataset(x, label=labels, group=lengths, init_score=scores, free_raw_data=False)
    valid = lgb.Dataset(x, label=labels, group=lengths, init_score=scores, reference=train)

    def zero_gradient(preds, data):  # leaves output 0, so the evaluated scores are the init scores
        return np.zeros_like(preds), np.ones_like(preds)

    record: dict = {}
    params = {"objective": zero_gradient, "metric": ["ndcg", "map"], "eval_at": list(eval_at), "verbosity": -1,
              "num_threads": 1, "min_data_in_leaf": 1}
    lgb.train(params, train, num_boost_round=1, valid_sets=[valid], valid_names=["v"],
              callbacks=[lgb.record_evaluation(record)])
    return {name: values[-1] for name, values in record["v"].items()}


def test_lightgbm_preset_equals_lightgbm_metrics():
    pytest.importorskip("lightgbm")
    scores, labels, offsets, _, _ = random_queries(30, 1000, negative=False, unjudged=False)
    eval_at = (1, 3, 10, 50)
    names = [f"{m}@{k}" for m in ("ndcg", "map") for k in eval_at]
    r = metrics.evaluate(scores, labels, offsets, names, preset="lightgbm")
    worst = 0.0
    chunk = 25  # LightGBM reports means: compare them over chunks of queries
    for start in range(0, offsets.size - 1, chunk):
        stop = min(start + chunk, offsets.size - 1)
        lo, hi = offsets[start], offsets[stop]
        want = _lightgbm_means(scores[lo:hi], labels[lo:hi], np.diff(offsets[start:stop + 1]), eval_at)
        for name in names:
            got = float(np.mean(r.per_query[r.names[name]][start:stop]))
            assert abs(got - want[name]) <= TOL, (start, name, got, want[name])
            worst = max(worst, abs(got - want[name]))
    _report("LightGBM ndcg@K/map@K (means of 25 queries)", worst)


# --------------------------------------------------------------------------- ranx
@pytest.mark.xdist_group("ranx")  # with the other ranx test in one worker (make test: --dist loadgroup)
def test_ranx_preset_equals_ranx():
    """ranx runs interpreted in the tests (tests/conftest.py: NUMBA_DISABLE_JIT), its values its own."""
    ranx = pytest.importorskip("ranx")
    scores, labels, offsets, docs, _ = random_queries(40, 1500, negative=True, unjudged=True)
    rng = np.random.default_rng(7)
    n_q = offsets.size - 1
    qrels_d, run_d = {}, {}
    for j in range(n_q):
        lo, hi = offsets[j], offsets[j + 1]
        judged = {docs[i]: int(labels[i]) for i in range(lo, hi) if not np.isnan(labels[i])}
        for e in range(int(rng.integers(0 if judged else 1, 3))):
            judged[f"u{j}-{e}"] = int(rng.choice([0, 1, 2]))
        qrels_d[f"q{j}"] = judged
        run_d[f"q{j}"] = {docs[i]: float(scores[i]) for i in range(lo, hi)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qrels, run = ranx.Qrels.from_dict(qrels_d), ranx.Run.from_dict(run_d)
        pairs = {"ndcg": "ndcg", "ndcg@10": "ndcg@10", "map": "map", "map@5": "map@5", "mrr": "mrr",
                 "mrr@3": "mrr@3", "p@5": "precision@5", "p@50": "precision@50", "recall@10": "recall@10",
                 "hit@3": "hit_rate@3", "rprec": "r-precision"}
        want = ranx.evaluate(qrels, run, list(pairs.values()) + ["ndcg_burges@10", "map-l2", "ndcg@10-l2"],
                             return_mean=False)
    # ranx ranks each query with its own (unstable) sort when the Run is built and keeps that order
    # for equal scores: evaluate the documents in the order ranx stored them.
    keys = list(run.keys())
    label_of = {}
    for j in range(n_q):
        for i in range(offsets[j], offsets[j + 1]):
            label_of[docs[i]] = labels[i]
    s2, l2, o2, ql, qo = [], [], [0], [], [0]
    for key in keys:
        for doc, score in run.run[key].items():
            s2.append(score)
            l2.append(label_of[doc])
        o2.append(len(s2))
        ql.extend(qrels_d[key].values())
        qo.append(len(ql))
    s2, l2, ql = np.array(s2), np.array(l2), np.array(ql, dtype=float)
    common = dict(preset="ranx", qrels_labels=ql, qrels_offsets=qo)
    r = metrics.evaluate(s2, l2, o2, list(pairs), **common)
    worst = 0.0
    for ours, theirs in pairs.items():
        got = r.per_query[r.names[ours]]
        np.testing.assert_allclose(got, want[theirs], atol=TOL, rtol=0, err_msg=ours)
        worst = max(worst, float(np.max(np.abs(got - want[theirs]))))
    burges = metrics.evaluate(s2, l2, o2, ["ndcg@10"], gain="exp2", **common)
    np.testing.assert_allclose(burges.per_query[burges.names["ndcg@10"]], want["ndcg_burges@10"], atol=TOL, rtol=0)
    level2 = metrics.evaluate(s2, l2, o2, ["map", "ndcg@10"], threshold=2, **common)
    np.testing.assert_allclose(level2.per_query[level2.names["map"]], want["map-l2"], atol=TOL, rtol=0)
    np.testing.assert_allclose(level2.per_query[level2.names["ndcg@10"]], want["ndcg@10-l2"], atol=TOL, rtol=0)
    _report("ranx", worst)
