"""trec_eval's whole per-query measure set (``-m all_trec``) equals pytrec_eval's values to 1e-9.

Random queries mix what trips evaluators up: graded and negative judgements (negative = in the pool
but not judged), documents absent from the qrels, judged documents that were not retrieved, queries
without any relevant document, single-document lists, K longer than the list, and coarse scores
with many ties (broken by docno descending). Scores are float32-representable (trec_eval 9.0.x
compares them in float32). Every query keeps one non-negative judgement: trec_eval reads a
query whose judgements are all negative with a stale level count from the previous query.
"""

from __future__ import annotations

import numpy as np
import pytest

import metrics
from metrics.trec_eval import ALL_TREC, expand_trec_name, parse_trec_name

pytrec_eval = pytest.importorskip("pytrec_eval")

TOL = 1e-9

# our name -> pytrec_eval's key, for measures whose parameters trec_eval keeps out of the name
PARAM_MEASURES = {
    "set_F.0.5": "set_F",
    "11pt_avg.0.2,0.5,0.8": "11pt_avg",
}
CUTOFF_MEASURES = ["P.3,7", "relative_P.2,50", "iprec_at_recall.0.05,0.25,0.33", "Rprec_mult.0.5,0.33",
                   "success.2,20", "map_cut.3", "ndcg_cut.4"]


def random_case(seed: int, n_queries: int, max_len: int = 25):
    """A run and qrels as pytrec_eval dicts, and the same in the flat layout of metrics.evaluate."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    scores, labels, docs, offsets = [], [], [], [0]
    q_labels, q_offsets = [], [0]
    for j in range(n_queries):
        n = int(rng.integers(1, max_len + 1)) if j > 1 else [1, 3 * max_len][j]
        mode = rng.integers(0, 3)  # distinct scores, coarse (ties), all equal
        s = rng.normal(size=n)
        s = np.round(s * 2) / 2 if mode == 1 else (np.full(n, 0.25) if mode == 2 else s)
        s = s.astype(np.float32).astype(np.float64)
        ids = [f"d{int(i):04d}" for i in rng.choice(10 * max_len, size=n, replace=False)]
        grade = rng.choice([0, 0, 0, 1, 1, 2, 3, 4], size=n) * (rng.random() > 0.12)  # some queries: no relevant
        judged = {}
        for d, g in zip(ids, grade):
            u = rng.random()
            if u < 0.15:
                continue  # not in the qrels
            judged[d] = -1 if u < 0.22 else int(g)
        for e in range(int(rng.integers(0, 4))):  # judged but not retrieved
            judged[f"u{e}"] = int(rng.choice([-1, 0, 1, 2, 3]))
        judged["zz-judged-nonrel"] = 0  # (one non-negative judgement per query; see the module doc)
        qid = f"q{j:03d}"
        run[qid] = {d: float(v) for d, v in zip(ids, s)}
        qrels[qid] = judged
        scores.extend(s)
        labels.extend(judged.get(d, np.nan) for d in ids)
        docs.extend(ids)
        offsets.append(len(scores))
        q_labels.extend(judged.values())
        q_offsets.append(len(q_labels))
    flat = dict(scores=np.array(scores), labels=np.array(labels, dtype=float), query_offsets=np.array(offsets),
                doc_ids=np.array(docs, dtype=object), qrels_labels=np.array(q_labels, dtype=float),
                qrels_offsets=np.array(q_offsets))
    return run, qrels, flat


def _ours(flat, names, level, judged_only):
    return metrics.evaluate(flat["scores"], flat["labels"], flat["query_offsets"], names, preset="trec_eval",
                            doc_ids=flat["doc_ids"], qrels_labels=flat["qrels_labels"],
                            qrels_offsets=flat["qrels_offsets"], threshold=level,
                            unjudged="remove" if judged_only else None)


def _check(result, want, pairs, n_queries):
    worst = 0.0
    num_ret = np.array([want[f"q{j:03d}"].get("num_ret", 1) for j in range(n_queries)])
    for ours, theirs in pairs:
        got = result.per_query[result.names[ours]]
        ref = np.array([want[f"q{j:03d}"][theirs] for j in range(n_queries)])
        if theirs.startswith(("iprec_at_recall", "11pt_avg")):
            # -J leaving no document: trec_eval divides 0 retrieved by 0 (NaN); ours is 0
            assert np.all(num_ret[np.isnan(ref)] == 0), ours
            ref = np.where(np.isnan(ref), 0.0, ref)
        np.testing.assert_allclose(got, ref, atol=TOL, rtol=0, err_msg=ours)
        worst = max(worst, float(np.max(np.abs(got - ref))))
    return worst


@pytest.mark.parametrize("seed,level,judged_only", [(1, 1, False), (2, 2, False), (3, 1, True), (4, 3, True)])
def test_all_trec_equals_pytrec_eval(seed, level, judged_only):
    run, qrels, flat = random_case(seed, 120)
    want = pytrec_eval.RelevanceEvaluator(qrels, pytrec_eval.supported_measures, relevance_level=level,
                                          judged_docs_only_flag=judged_only).evaluate(run)
    assert len(want) == 120
    r = _ours(flat, "all_trec", level, judged_only)
    assert list(r.names) == ALL_TREC
    worst = _check(r, want, [(n, n) for n in ALL_TREC], 120)
    print(f"\nlargest |difference| vs pytrec_eval over {len(ALL_TREC)} measures: {worst:.3g}")


@pytest.mark.parametrize("seed,level", [(5, 1), (6, 2)])
def test_parameter_syntax_equals_pytrec_eval(seed, level):
    # (pytrec_eval cannot parse gain pairs or utility's four coefficients: those are checked on
    # trec_eval's own test outputs below)
    run, qrels, flat = random_case(seed, 80)
    asked = CUTOFF_MEASURES + list(PARAM_MEASURES)
    want = pytrec_eval.RelevanceEvaluator(qrels, set(asked), relevance_level=level).evaluate(run)
    r = _ours(flat, ",".join(asked), level, False)
    expanded = [n for m in CUTOFF_MEASURES for n in expand_trec_name(m)]
    assert "P_3" in r.names and "iprec_at_recall_0.05" in r.names and "Rprec_mult_0.33" in r.names
    _check(r, want, [(n, n) for n in expanded] + list(PARAM_MEASURES.items()), 80)


def test_gm_means_are_trec_eval_geometric_means_with_its_floor():
    run, qrels, flat = random_case(7, 60)
    r = _ours(flat, ["gm_map", "map", "gm_bpref"], 1, False)
    ap = r.per_query[r.names["map"]]
    logs = r.per_query[r.names["gm_map"]]
    np.testing.assert_allclose(logs, np.log(np.maximum(ap, 1e-5)), atol=1e-12)
    assert (ap == 0).any() and np.isclose(logs.min(), np.log(1e-5))  # the floor is used
    assert r["gm_map"] == pytest.approx(float(np.exp(np.mean(logs))), abs=1e-15)
    # trec_eval's summary line: `trec_eval -m gm_map` prints exp(mean(log(max(AP, 1e-5))))
    assert r["gm_map"] < r["map"]


def test_hand_computed_bpref_infap_bing_g_rndcg():
    # ranked: d1 (rel 2), x (absent from qrels), d2 (judged 0), d4 (in the pool, unjudged), d3 (rel 1);
    # qrels also hold d9 (rel 3, not retrieved) and d5 (judged 0): R = 3, N = 2
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    labels = np.array([2, np.nan, 0, -1, 1])
    docs = np.array(["d1", "x", "d2", "d4", "d3"], dtype=object)
    q_labels = np.array([2, 0, -1, 1, 3, 0], dtype=float)
    r = metrics.evaluate(scores, labels, [0, 5], ["bpref", "infAP", "binG", "G", "Rndcg", "ndcg_rel",
                                                   "num_nonrel_judged_ret", "set_F", "utility"],
                         preset="trec_eval", doc_ids=docs, qrels_labels=q_labels, qrels_offsets=[0, 6])
    v = {short: float(r.per_query[stamped][0]) for short, stamped in r.names.items()}
    # bpref: d1 no non-relevant above -> 1; d3 one above -> 1 - min(1, 3)/min(2, 3) = 1/2; / R
    assert v["bpref"] == pytest.approx((1 + 0.5) / 3, abs=1e-15)
    # infAP: d1 at rank 1 -> 1; d3 at 0-based j = 4, with 1 relevant, 1 judged non-relevant and 1 pool
    # unjudged above: 1/5 + (4/5) * ((1 + 1 + 1)/4) * ((1 + e)/(1 + 1 + 2e))
    e = 1e-5
    assert v["infAP"] == pytest.approx((1 + 1 / 5 + (4 / 5) * (3 / 4) * ((1 + e) / (2 + 2 * e))) / 3, abs=1e-15)
    # binG: 1/log2(2 + non-relevant above): d1 -> 1, d3 -> 1/log2(5)
    assert v["binG"] == pytest.approx((1 + 1 / np.log2(5)) / 3, abs=1e-15)
    # G: ideal 3, 2, 1 then 0; cost = cumsum(max(ideal, 1)) = 3, 5, 6, 7, 8; got = 2, 2, 2, 2, 3
    assert v["G"] == pytest.approx((2 / np.log2(2 + 3 - 2) + 1 / np.log2(2 + 8 - 3)) / 6, abs=1e-15)
    dcg = np.cumsum(np.array([2, 0, 0, 0, 1]) / np.log2(np.arange(2, 7)))
    idcg = np.cumsum(np.array([3, 2, 1]) / np.log2(np.arange(2, 5)))
    # Rndcg: the ideal changes gain after positions 1, 2, 3; n = 5 > |I| + 1 adds DCG@5 / IDCG
    want = (dcg[0] / idcg[0] + dcg[1] / idcg[1] + dcg[2] / idcg[2] + dcg[4] / idcg[2]) / 4
    assert v["Rndcg"] == pytest.approx(want, abs=1e-15)
    # ndcg_rel: d1 (rank 1) DCG@1/IDCG@1, d3 (rank 5) DCG@5/IDCG@3, one relevant not retrieved DCG/IDCG
    assert v["ndcg_rel"] == pytest.approx((dcg[0] / idcg[0] + 2 * dcg[4] / idcg[2]) / 3, abs=1e-15)
    assert v["num_nonrel_judged_ret"] == 1.0
    p, rc = 2 / 5, 2 / 3
    assert v["set_F"] == pytest.approx(2 * p * rc / (p + rc), abs=1e-15)
    assert v["utility"] == 2 - 3


def test_names_expand_and_refuse_clearly():
    assert expand_trec_name("Rprec_mult")[0] == "Rprec_mult_0.20" and len(expand_trec_name("ndcg_cut")) == 9
    assert expand_trec_name("P") is None  # P keeps the toolkit's meaning (precision over the whole list)
    assert parse_trec_name("set_F").params == (1.0,)
    with pytest.raises(ValueError, match="4 coefficients"):
        parse_trec_name("utility.1,2")
    with pytest.raises(ValueError, match="integer cutoffs"):
        expand_trec_name("P.2.5")
    with pytest.raises(ValueError, match="integer relevance levels"):
        metrics.evaluate([1.0, 0.5], [1.5, 0.0], [0, 2], "bpref")
    with pytest.raises(ValueError, match="ties='average'"):
        metrics.evaluate([1.0, 0.5], [1, 0], [0, 2], "bpref", ties="average")


def test_toolkit_conventions_apply_to_trec_measures():
    # empty=skip: a query without relevant documents is NaN and left out; counts are never empty
    r = metrics.evaluate([2.0, 1.0, 2.0, 1.0], [1, 0, 0, 0], [0, 2, 4], ["bpref", "num_ret", "gm_map"])
    assert np.isnan(r.per_query[r.names["bpref"]][1]) and r["bpref"] == 1.0
    assert r.per_query[r.names["num_ret"]].tolist() == [2.0, 2.0]
    assert r.names["bpref"] == "bpref[rel>=1,empty=skip,ties=stable]"
    assert r.names["num_ret"] == "num_ret[rel>=1]"
    assert r["gm_map"] == 1.0


# --------------------------------------------------------------------------- trec_eval's own test outputs
def _read_trec(qrels_file, run_file):
    from conftest import shared_path

    qrels: dict = {}
    for line in open(shared_path("trec_eval-test", qrels_file)):
        if line.strip() and not line.startswith("#"):
            q, _, d, rel = line.split()[:4]
            qrels.setdefault(q, {})[d] = float(rel)
    run: dict = {}
    for line in open(shared_path("trec_eval-test", run_file)):
        if line.strip():
            f = line.split()
            run.setdefault(f[0], []).append((f[2], float(f[4])))
    qids = sorted(set(run) & set(qrels))
    scores, labels, docs, offsets, q_labels, q_offsets = [], [], [], [0], [], [0]
    for q in qids:
        for d, s in run[q]:
            scores.append(s)
            labels.append(qrels[q].get(d, np.nan))
            docs.append(d)
        offsets.append(len(scores))
        q_labels.extend(qrels[q].values())
        q_offsets.append(len(q_labels))
    flat = dict(scores=np.array(scores), labels=np.array(labels), query_offsets=np.array(offsets),
                doc_ids=np.array(docs, dtype=object), qrels_labels=np.array(q_labels),
                qrels_offsets=np.array(q_offsets))
    return qids, flat


def _expected(out_file):
    from conftest import shared_path

    want: dict = {}
    for line in open(shared_path("trec_eval-test", out_file)):
        name, qid, value = line.split()
        if qid != "all" and not name.startswith(("runid", "relstring")):
            want.setdefault(name, {})[qid] = float(value)
    return want


@pytest.mark.parametrize("qrels_file,out_file,level", [("qrels.test", "out.test.aq", 1),
                                                       ("qrels.rel_level", "out.test.aql", 2)])
def test_trec_eval_test_suite_outputs(qrels_file, out_file, level):
    """trec_eval's own expected outputs (printed to 4 decimals) on its test qrels and run.

    They come from trec_eval 10 (its repository's head), which turns a recall level x into
    lround(x R) relevant documents where 9.0.x (pytrec_eval, and this module) takes (long)(x R + 0.9):
    iprec_at_recall and 11pt_avg are checked against pytrec_eval instead.
    """
    qids, flat = _read_trec(qrels_file, "results.test")
    want = _expected(out_file)
    r = _ours(flat, "all_trec", level, False)
    for name in ALL_TREC:
        if name.startswith(("iprec_at_recall", "11pt_avg", "gm_")):
            continue  # (trec_eval prints gm_ measures in the summary only)
        got = r.per_query[r.names[name]]
        ref = np.array([want[name][q] for q in qids])
        np.testing.assert_allclose(got, ref, atol=5.1e-5, rtol=0, err_msg=name)


def test_trec_eval_parameter_outputs():
    """`trec_eval -m utility.2,-1,0,0 -m 11pt_avg..25,.5,.75 -m ndcg.1=3,2=9,4=4.5 ...` (out.test.meas_params)."""
    qids, flat = _read_trec("qrels.test", "results.test")
    want = _expected("out.test.meas_params")
    asked = {"utility.2,-1,0,0": "utility_2,-1,0,0", "ndcg.1=3,2=9,4=4.5": "ndcg_1=3,2=9,4=4.5", "P_7": "P_7",
             "Rprec_mult_0.35": "Rprec_mult_0.35"}
    r = _ours(flat, ",".join(asked) + ",11pt_avg..25,.5,.75", 1, False)
    for ours, theirs in asked.items():
        ref = np.array([want[theirs][q] for q in qids])
        np.testing.assert_allclose(r.per_query[r.names[ours]], ref, atol=5.1e-5, rtol=0, err_msg=ours)
    # trec_eval's "..25" is ".25" (the dot after the name, then the number); pytrec_eval needs 0.25
    from conftest import shared_path

    run = pytrec_eval.parse_run(open(shared_path("trec_eval-test", "results.test")))
    qrels = pytrec_eval.parse_qrel(open(shared_path("trec_eval-test", "qrels.test")))
    want = pytrec_eval.RelevanceEvaluator(qrels, {"11pt_avg.0.25,0.5,0.75"}).evaluate(run)
    np.testing.assert_allclose(r.per_query[r.names["11pt_avg..25,.5,.75"]], [want[q]["11pt_avg"] for q in qids],
                               atol=TOL, rtol=0)


def test_custom_gains_follow_the_default_ones():
    """Gains equal to the levels change nothing; scaled gains leave the ratio measures unchanged."""
    run, qrels, flat = random_case(8, 60)
    same = _ours(flat, "ndcg,ndcg.1=1,2=2,ndcg_rel,ndcg_rel.3=3,Rndcg,Rndcg.1=1,G,G.4=4", 1, False)
    for a, b in [("ndcg", "ndcg.1=1,2=2"), ("ndcg_rel", "ndcg_rel.3=3"), ("Rndcg", "Rndcg.1=1"), ("G", "G.4=4")]:
        np.testing.assert_allclose(same.per_query[same.names[a]], same.per_query[same.names[b]], atol=1e-12)
    scaled = _ours(flat, "ndcg.1=3,2=6,3=9,4=12,ndcg_rel.1=3,2=6,3=9,4=12,G.1=3,2=6,3=9,4=12", 1, False)
    for a in ("ndcg", "ndcg_rel"):
        np.testing.assert_allclose(scaled.per_query[scaled.names[f"{a}.1=3,2=6,3=9,4=12"]],
                                   same.per_query[same.names[a]], atol=1e-12)
    assert not np.allclose(scaled.per_query[scaled.names["G.1=3,2=6,3=9,4=12"]], same.per_query[same.names["G"]])
