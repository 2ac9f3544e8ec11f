"""What the peers' own tests expect (issue 48): fall-out@K (torchmetrics), Judged@K (ir_measures), trec_eval's
summary of its counts, AUC with instance weights and Brier / log loss with ``pos_label`` (scikit-learn).

Each expected value is the peer's number on the same input: from its unit test or docstring where it
prints one, else the peer library run here (scikit-learn, pytrec_eval), else the definition the
peer's code implements, computed by hand in plain Python.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import metrics
from ltr.cli import main
from metrics import classification


# --------------------------------------------------------------------------------------------------
# fall-out@K: torchmetrics' RetrievalFallOut
# --------------------------------------------------------------------------------------------------
def _fallout(s, y, offsets, name, **conv):
    r = metrics.evaluate(s, y, offsets, [name], **conv)
    return r.per_query[r.names[name]].tolist(), r[name]


def test_fallout_reproduces_torchmetrics_docstring_examples():
    # RetrievalFallOut(top_k=2) on two queries: 0.5 (retrieval/fall_out.py's example)
    per_query, mean = _fallout([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], [0, 0, 1, 0, 1, 0, 1], [0, 3, 7], "fallout@2")
    assert per_query == [0.5, 0.5] and mean == 0.5
    # retrieval_fall_out(tensor([0.2, 0.3, 0.5]), tensor([True, False, True]), top_k=2): 1.0
    assert _fallout([0.2, 0.3, 0.5], [1, 0, 1], [0, 3], "fallout@2")[0] == [1.0]


@pytest.mark.parametrize("empty, expected", [("one", 1.0), ("zero", 0.0), ("skip", None)])
def test_fallout_of_a_query_without_non_relevant_item_follows_the_empty_rule(empty, expected):
    """torchmetrics' empty_target_action: 'pos' (its default) 1, 'neg' 0, 'skip' left out of the mean."""
    per_query, mean = _fallout([0.3, 0.2, 0.9, 0.1], [1, 1, 0, 1], [0, 2, 4], "fallout@1", empty=empty)
    assert per_query[1] == 1.0  # the non-relevant item is ranked first: all of the non-relevant shown
    assert (math.isnan(per_query[0]) if expected is None else per_query[0] == expected)
    assert mean == (1.0 if expected is None else (1.0 + expected) / 2)


def _fallout_by_hand(scores, labels, k):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # distinct scores: no tie rule needed
    non_relevant = sum(1 for v in labels if v < 1)
    shown = sum(1 for i in order[:k] if labels[i] < 1)
    return shown / non_relevant if non_relevant else float("nan")


def test_fallout_is_the_share_of_non_relevant_items_shown_on_random_lists():
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 9, 40)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    scores = rng.permutation(offsets[-1]).astype(float)
    labels = rng.integers(0, 3, offsets[-1]).astype(float)
    for k in (1, 3, 10):
        r = metrics.evaluate(scores, labels, offsets, [f"fallout@{k}"])
        got = r.per_query[r.names[f"fallout@{k}"]]
        want = [_fallout_by_hand(scores[a:b].tolist(), labels[a:b].tolist(), k) for a, b in zip(offsets[:-1], offsets[1:])]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    assert not metrics.higher_is_better("fallout@10")


def test_fallout_counts_the_qrels_non_relevant_documents_that_were_not_retrieved(tmp_path, capsys):
    """With qrels, "all non-relevant documents" includes the judged ones the run missed: here 1 shown of 3."""
    (tmp_path / "q.txt").write_text("1 0 a 1\n1 0 b 0\n1 0 c 0\n1 0 d 0\n")
    (tmp_path / "r.run").write_text("1 Q0 b 1 3 t\n1 Q0 a 2 2 t\n")
    assert main(["eval", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.run"), "--metrics",
                 "fallout@1,fallout@5", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mean"] == {"fallout@1": pytest.approx(1 / 3), "fallout@5": pytest.approx(1 / 3)}


# --------------------------------------------------------------------------------------------------
# Judged@K: ir_measures (tests/test_judged.py, run through `ltr eval`)
# --------------------------------------------------------------------------------------------------
JUDGED_QRELS = "0 0 D0 0\n0 0 D1 1\n0 0 D2 1\n0 0 D3 2\n0 0 D4 0\n1 0 D0 1\n1 0 D3 2\n1 0 D5 2\n"
JUDGED_RUN = ("0 0 D0 1 0.8 run\n0 0 D2 2 0.7 run\n0 0 D1 3 0.3 run\n0 0 D3 4 0.4 run\n0 0 D4 5 0.1 run\n"
              "1 0 D1 1 0.8 run\n1 0 D3 2 0.7 run\n1 0 D4 3 0.3 run\n1 0 D2 4 0.4 run\n")


def test_judged_reproduces_ir_measures_test_values(tmp_path, capsys):
    (tmp_path / "q.txt").write_text(JUDGED_QRELS)
    (tmp_path / "r.run").write_text(JUDGED_RUN)
    names = ["judged", "judged@1000", "judged@10", "judged@3", "judged@1"]
    assert main(["eval", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.run"), "--metrics",
                 ",".join(names), "--per-query", "--json", "-"]) == 0
    per_query = json.loads(capsys.readouterr().out)["per_query"]
    # ir_measures' expectations: query 0 is judged throughout; query 1 has 1 judged document of 4 retrieved
    expected = {"judged": (1.0, 1 / 4), "judged@1000": (1.0, 1 / 4), "judged@10": (1.0, 1 / 4),
                "judged@3": (1.0, 1 / 3), "judged@1": (1.0, 0.0)}
    for name, (q0, q1) in expected.items():
        assert per_query["0"][name] == pytest.approx(q0) and per_query["1"][name] == pytest.approx(q1), name


def test_judged_counts_any_qrels_entry_and_not_the_unjudged():
    """NaN labels are unjudged (absent from the qrels); a label of 0 is judged."""
    r = metrics.evaluate([4.0, 3.0, 2.0, 1.0], [0.0, float("nan"), 2.0, float("nan")], [0, 4], ["judged@2", "judged@4"])
    assert [r["judged@2"], r["judged@4"]] == [0.5, 0.5]
    with pytest.raises(ValueError, match="ties='average'"):
        metrics.evaluate([1.0, 1.0], [0.0, 1.0], [0, 2], ["judged@1"], ties="average")


# --------------------------------------------------------------------------------------------------
# trec_eval's summary rule: the counts are summed over the queries
# --------------------------------------------------------------------------------------------------
COUNTS = ["num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"]


def test_count_measures_are_summed_as_trec_eval_summarises_them(tmp_path, capsys):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    qrels = {str(q): {f"d{d}": int(rng.integers(0, 3)) for d in rng.choice(20, 8, replace=False)} for q in range(6)}
    run = {str(q): {f"d{d}": float(rng.random()) for d in rng.choice(20, int(rng.integers(3, 12)), replace=False)}
           for q in range(6)}
    (tmp_path / "q.txt").write_text("".join(f"{q} 0 {d} {v}\n" for q, docs in qrels.items() for d, v in docs.items()))
    (tmp_path / "r.run").write_text("".join(f"{q} Q0 {d} 0 {s} t\n" for q, docs in run.items() for d, s in docs.items()))
    assert main(["eval", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.run"), "--preset", "trec_eval",
                 "--metrics", ",".join(COUNTS + ["map"]), "--per-query", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(COUNTS) | {"map"}).evaluate(run)
    for name in COUNTS:
        assert report["metrics"][name]["aggregate"] == "sum"
        assert report["mean"][name] == sum(v[name] for v in per_query.values()), name
    assert report["mean"]["map"] == pytest.approx(np.mean([v["map"] for v in per_query.values()]), abs=1e-12)
    assert report["metrics"]["map"]["aggregate"] == "mean"


def test_the_table_says_which_measures_are_summed():
    r = metrics.evaluate([3.0, 2.0, 1.0, 2.0, 1.0], [1, 0, 1, 0, 2], [0, 3, 5], ["num_rel_ret", "p@2", "gm_map"])
    assert r["num_rel_ret"] == 3.0 and r["p@2"] == 0.5
    assert r.table().splitlines()[-1] == "(num_rel_ret: the sum over the queries; gm_map: the geometric mean over the queries, as trec_eval summarises them)"
    assert metrics.evaluate([1.0], [1], [0, 1], ["num_rel"], query_weights=[2.0])["num_rel"] == 2.0


# --------------------------------------------------------------------------------------------------
# AUC with instance weights, Brier and log loss with pos_label: scikit-learn
# --------------------------------------------------------------------------------------------------
def test_weighted_auc_equals_scikit_learn_with_ties_and_zero_weights():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(2, 60))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            y[0] = 1 - y[0]
        s = rng.integers(0, 6, n).astype(float)  # many ties
        w = rng.random(n) * (rng.random(n) > 0.2)  # some weights 0
        if w[y == 1].sum() == 0 or w[y == 0].sum() == 0:
            continue
        assert classification.auc(y, s, sample_weight=w) == pytest.approx(roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    # unit weights change nothing; integer weights are repeated rows
    y, s = np.array([0, 1, 0, 1, 1]), np.array([0.1, 0.4, 0.4, 0.8, 0.2])
    assert classification.auc(y, s, sample_weight=np.ones(5)) == classification.auc(y, s)
    assert classification.auc(y, s, sample_weight=[2, 1, 1, 1, 3]) == pytest.approx(
        classification.auc(np.repeat(y, [2, 1, 1, 1, 3]), np.repeat(s, [2, 1, 1, 1, 3])), abs=1e-15)
    assert math.isnan(classification.auc(y, s, sample_weight=[1, 0, 1, 0, 0]))  # no positive weight
    with pytest.raises(ValueError, match="sample_weight"):
        classification.auc(y, s, sample_weight=[1, -1, 1, 1, 1])


def test_brier_and_log_loss_take_pos_label_as_scikit_learn():
    from sklearn.metrics import brier_score_loss
    from sklearn.metrics import log_loss as sk_log_loss

    # scikit-learn's test_brier_score_loss input
    y = np.array([0, 1, 1, 0, 1, 1])
    p = np.array([0.1, 0.8, 0.9, 0.3, 1.0, 0.95])
    true_score = float(np.linalg.norm(y - p) ** 2 / len(y))
    assert classification.brier(y, p) == pytest.approx(true_score, abs=1e-15)
    assert classification.brier(1 + y, p, pos_label=2) == pytest.approx(brier_score_loss(1 + y, p, pos_label=2), abs=1e-15)
    assert classification.brier(2 * y - 1, p) == pytest.approx(brier_score_loss(2 * y - 1, p), abs=1e-15)
    assert classification.brier(1 + y, 1 - p, pos_label=1) == pytest.approx(true_score, abs=1e-15)
    words = np.where(y == 1, "yes", "no")
    assert classification.brier(words, p, pos_label="yes") == pytest.approx(true_score, abs=1e-15)
    # log loss: scikit-learn reads one column of probabilities as the greater label's
    assert classification.log_loss(1 + y, p, pos_label=2) == pytest.approx(sk_log_loss(1 + y, p), abs=1e-12)
    assert classification.log_loss(2 * y - 1, p) == pytest.approx(sk_log_loss(2 * y - 1, p), abs=1e-12)
    with pytest.raises(ValueError, match="without pos_label they must be 0/1 or -1/1"):
        classification.brier(1 + y, p)
    with pytest.raises(ValueError, match="two label values at most"):
        classification.brier([0, 1, 2], [0.1, 0.5, 0.9], pos_label=2)
