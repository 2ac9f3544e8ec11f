"""`ltr eval` and ltr.data.trec: TREC file reading/writing, error messages, and trec_eval's own test outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import shared_path

import metrics
from ltr.cli import main
from ltr.data.trec import (
    align,
    read_qrels,
    read_run,
    run_from_arrays,
    write_qrels,
    write_run,
)
from ltr.base.errors import DataFormatError

# trec_eval measure -> our metric name (trec spellings are accepted as they are)
TREC_MEASURES = ["map", "Rprec", "recip_rank", "P_5", "P_10", "P_30", "P_100", "P_1000", "ndcg", "ndcg_cut_10",
                 "ndcg_cut_1000", "recall_10", "recall_100", "recall_1000", "map_cut_10", "map_cut_100", "success_10"]


def _trec_out(path):
    """Parse trec_eval output lines 'measure<TAB>qid<TAB>value' into {(measure, qid): value}."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            try:
                out[(parts[0], parts[1])] = float(parts[2])
            except ValueError:
                pass
    return out


def _eval_json(capsys, *argv):
    assert main(["eval", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _by_short(report_part, short):
    return report_part[short]  # the JSON report is keyed by the names as asked


@pytest.mark.parametrize("qrels,run,expected", [
    ("qrels.test", "results.test", "out.test.a"),
    ("qrels.test.with-comments", "results.test", "out.test"),
    ("qrels.comment.test", "results.comment.test", "out.comment.test"),
])
def test_means_equal_trec_eval_outputs(capsys, qrels, run, expected):
    q, r, e = shared_path("trec_eval-test", qrels), shared_path("trec_eval-test", run), shared_path("trec_eval-test", expected)
    want = _trec_out(e)
    report = _eval_json(capsys, "--qrels", str(q), "--run", str(r), "--preset", "trec_eval", "--metrics", ",".join(TREC_MEASURES))
    compared = 0
    for m in TREC_MEASURES:
        if (m, "all") in want:
            assert _by_short(report["mean"], m) == pytest.approx(want[(m, "all")], abs=5e-5), m
            compared += 1
    assert compared >= 7


def test_complete_flag_equals_trec_eval_c(capsys):
    # trec_eval -c: qrels queries missing from the (truncated) run count as 0
    q = shared_path("trec_eval-test", "qrels.test")
    r = shared_path("trec_eval-test", "results.trunc")
    want = _trec_out(shared_path("trec_eval-test", "out.test.aqc"))
    measures = ["map", "Rprec", "recip_rank", "P_10", "P_100", "ndcg", "ndcg_cut_10", "recall_100"]
    report = _eval_json(capsys, "--qrels", str(q), "--run", str(r), "--preset", "trec_eval", "--complete",
                        "--per-query", "--metrics", ",".join(measures))
    assert set(report["per_query"]) == {"301", "302", "303"}
    for m in measures:
        assert _by_short(report["mean"], m) == pytest.approx(want[(m, "all")], abs=5e-5), m
        for qid in ("301", "302", "303"):
            assert _by_short(report["per_query"][qid], m) == pytest.approx(want[(m, qid)], abs=5e-5), (m, qid)
    plain = _eval_json(capsys, "--qrels", str(q), "--run", str(r), "--preset", "trec_eval", "--metrics", "map")
    assert _by_short(plain["mean"], "map") == pytest.approx((want[("map", "301")] + want[("map", "303")]) / 2, abs=5e-5)


@pytest.mark.parametrize("qrels,expected,level", [("qrels.test", "out.test.aq", None), ("qrels.rel_level", "out.test.aql", 2)])
def test_per_query_equal_trec_eval_outputs(capsys, qrels, expected, level):
    q = shared_path("trec_eval-test", qrels)
    r = shared_path("trec_eval-test", "results.test")
    want = _trec_out(shared_path("trec_eval-test", expected))
    argv = ["--qrels", str(q), "--run", str(r), "--preset", "trec_eval", "--per-query", "--metrics", ",".join(TREC_MEASURES)]
    if level is not None:
        argv += ["--relevance-level", str(level)]
    report = _eval_json(capsys, *argv)
    compared = 0
    for qid, values in report["per_query"].items():
        for m in TREC_MEASURES:
            if (m, qid) in want:
                assert _by_short(values, m) == pytest.approx(want[(m, qid)], abs=5e-5), (m, qid)
                compared += 1
    assert compared >= 30
    assert set(report["per_query"]) == {"301", "302", "303"}


def test_table_output_names_conventions(capsys, tmp_path):
    qrels = tmp_path / "q.txt"
    run = tmp_path / "r.txt"
    qrels.write_text("1 0 a 2\n1 0 b 0\n1 0 z 1\n2 0 a 0\n")
    run.write_text("1 Q0 a 1 0.9 t\n1 Q0 b 2 0.8 t\n1 Q0 c 3 0.7 t\n2 Q0 a 1 0.5 t\n3 Q0 x 1 0.1 t\n")
    assert main(["eval", "--qrels", str(qrels), "--run", str(run), "--metrics", "ndcg@3,map", "--per-query"]) == 0
    text = capsys.readouterr().out
    assert "ndcg@3[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable,R=qrels]" in text
    assert "queries evaluated: 2 (run only: 1, qrels only: 0)" in text
    out = tmp_path / "report.json"
    report = _eval_json(capsys, "--qrels", str(qrels), "--run", str(run), "--metrics", "map,ndcg", "--per-query",
                        "--output", str(out))
    assert json.loads(out.read_text()) == report
    # query 1: relevant a (rank 1) and z (not retrieved): AP = (1/1) / 2; query 2 has no relevant: skipped
    assert _by_short(report["mean"], "map") == pytest.approx(0.5)
    assert _by_short(report["per_query"]["2"], "map") is None
    ideal = 3 + 1 / math.log2(3)
    assert _by_short(report["per_query"]["1"], "ndcg") == pytest.approx(3 / ideal)


@pytest.mark.parametrize("text,where,what", [
    ("1 0 a\n", 1, "expected 4 fields"),
    ("1 0 a 1\n1 0 b x\n", 2, "relevance 'x' is not a number"),
    ("# c\n1 0 a 1\n1 0 a 0\n", 3, "judged twice"),
])
def test_malformed_qrels_name_file_and_line(tmp_path, text, where, what):
    path = tmp_path / "bad.qrels"
    path.write_text(text)
    with pytest.raises(DataFormatError) as info:
        read_qrels(path)
    assert info.value.line == where and what in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("text,where,what", [
    ("1 Q0 a 1\n", 1, "expected 6 fields"),
    ("1 Q0 a 1 0.5 t\n1 Q0 b 2 nan t\n", 2, "not finite"),
    ("1 Q0 a 1 0.5 t\n1 Q0 b 2 high t\n", 2, "score 'high' is not a number"),
    ("1 Q0 a 1 0.5 t\n\n1 Q0 a 2 0.4 t\n", 3, "listed twice"),
])
def test_malformed_run_name_file_and_line(tmp_path, text, where, what):
    path = tmp_path / "bad.run"
    path.write_text(text)
    with pytest.raises(DataFormatError) as info:
        read_run(path)
    assert info.value.line == where and what in str(info.value)


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    qrels = tmp_path / "q"
    run = tmp_path / "r"
    qrels.write_text("1 0 a 1\n")
    run.write_text("1 Q0 a 1 zero t\n")
    assert main(["eval", "--qrels", str(qrels), "--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run}:1: score 'zero' is not a number" in err and "Traceback" not in err
    run.write_text("9 Q0 a 1 0.3 t\n")
    assert main(["eval", "--qrels", str(qrels), "--run", str(run)]) == 2
    assert "nothing to evaluate" in capsys.readouterr().err
    run.write_text("1 Q0 a 1 0.3 t\n")
    assert main(["eval", "--qrels", str(qrels), "--run", str(run), "--metrics", "ndgc@10"]) == 2
    assert "unknown metric 'ndgc@10'" in capsys.readouterr().err
    assert main(["eval", "--qrels", str(tmp_path / "missing"), "--run", str(run)]) == 2
    assert "missing: file not found" in capsys.readouterr().err


def test_write_read_round_trip_and_alignment(tmp_path):
    rng = np.random.default_rng(3)
    scores = rng.normal(size=7)
    scores[3] = scores[2]  # a tie keeps its order through write_run's stable sort
    run = run_from_arrays(["q2", "q1"], [f"d{i}" for i in range(7)], scores, [0, 4, 7])
    write_run(tmp_path / "run.txt", run, tag="mine")
    back = read_run(tmp_path / "run.txt")
    assert {q: dict(v) for q, v in back.items()} == {q: dict(v) for q, v in run.items()}
    ranked_q2 = [d for d, _ in back["q2"]]
    assert ranked_q2 == [f"d{i}" for i in np.argsort(-scores[:4], kind="stable")]
    qrels = {"q1": {"d4": 1.0, "d9": 2.0}, "q2": {"d0": 0.0}, "q3": {"x": 1.0}}
    write_qrels(tmp_path / "qrels.txt", qrels)
    assert read_qrels(tmp_path / "qrels.txt") == qrels
    a = align(back, qrels)
    assert a.query_ids == ["q1", "q2"] and a.dropped_qrels_queries == ["q3"] and a.dropped_run_queries == []
    assert a.query_offsets.tolist() == [0, 3, 7]
    want = [qrels[q].get(d, np.nan) for q, lo, hi in (("q1", 0, 3), ("q2", 3, 7)) for d in a.doc_ids[lo:hi]]
    np.testing.assert_array_equal(a.labels, want)
    assert np.isnan(a.labels).sum() == 5
    assert a.qrels_offsets.tolist() == [0, 2, 3]
    # recall of q1 counts the unretrieved d9
    r = metrics.evaluate(a.scores, a.labels, a.query_offsets, ["recall"], qrels_labels=a.qrels_labels,
                         qrels_offsets=a.qrels_offsets, doc_ids=a.doc_ids)
    assert r.per_query[r.names["recall"]][0] == pytest.approx(0.5)


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = capsys.readouterr().out
    for opt in ("--qrels", "--run", "--metrics", "--preset", "--per-query", "--json", "--gain", "--ties", "--empty",
                "--relevance-level", "--judged-only", "--output", "--complete"):
        assert opt in text
