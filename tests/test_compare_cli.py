"""``ltr compare``, ``-`` for standard input and output, ``--json`` keyed by the names as asked,
``ltr eval`` refusing two runs, and ``ltr predict --format trec|tsv|parquet``."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from test_training import make_ds

import metrics
from ltr.cli import main
from ltr.data import load_svmlight, save_svmlight
from ltr.data.trec import align, read_qrels, read_run

QRELS = "1 0 a 2\n1 0 b 0\n1 0 c 1\n1 0 z 1\n2 0 a 1\n2 0 b 0\n3 0 x 1\n3 0 w 0\n4 0 m 1\n4 0 n 0\n"
RUN_A = "1 Q0 a 1 0.9 t\n1 Q0 b 2 0.8 t\n1 Q0 c 3 0.7 t\n2 Q0 a 1 0.5 t\n2 Q0 b 1 0.6 t\n3 Q0 x 1 0.1 t\n3 Q0 w 1 0.05 t\n4 Q0 n 1 0.9 t\n4 Q0 m 1 0.1 t\n"
RUN_B = "1 Q0 a 1 0.1 t\n1 Q0 b 2 0.8 t\n1 Q0 c 3 0.7 t\n2 Q0 a 1 0.9 t\n2 Q0 b 1 0.6 t\n3 Q0 x 1 0.01 t\n3 Q0 w 1 0.05 t\n4 Q0 m 1 0.9 t\n"


@pytest.fixture
def trec_files(tmp_path):
    paths = {}
    for name, text in (("qrels", QRELS), ("a", RUN_A), ("b", RUN_B)):
        paths[name] = tmp_path / (f"{name}.run" if name != "qrels" else "qrels.txt")
        paths[name].write_text(text)
    return paths


def _json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_eval_json_is_keyed_by_the_names_asked(capsys, trec_files):
    report = _json(capsys, "eval", "--qrels", str(trec_files["qrels"]), "--run", str(trec_files["a"]), "--metrics",
                   "ndcg@10,P.1,2,bpref", "--preset", "trec_eval", "--per-query", "--json")
    assert list(report["mean"]) == ["ndcg@10", "P_1", "P_2", "bpref"]
    assert report["metrics"]["ndcg@10"]["stamped"].startswith("ndcg@10[gain=linear,")
    assert report["metrics"]["bpref"]["queries"] == 4 and report["queries"]["evaluated"] == 4
    assert report["per_query"]["3"]["P_1"] == 1.0 and report["per_query"]["4"]["P_1"] == 0.0
    assert report["mean"]["P_2"] == pytest.approx(0.5)  # one relevant document in each top 2


def test_eval_reads_standard_input_and_refuses_two_runs(capsys, monkeypatch, trec_files):
    from_file = _json(capsys, "eval", "--qrels", str(trec_files["qrels"]), "--run", str(trec_files["a"]), "--json")
    monkeypatch.setattr("sys.stdin", io.StringIO(RUN_A))
    from_stdin = _json(capsys, "eval", "--qrels", str(trec_files["qrels"]), "--run", "-", "--json", "-")
    assert from_stdin == from_file
    monkeypatch.setattr("sys.stdin", io.StringIO(QRELS))
    assert _json(capsys, "eval", "--qrels", "-", "--run", str(trec_files["a"]), "--json") == from_file
    assert main(["eval", "--qrels", "-", "--run", "-"]) == 2
    assert "only one input" in capsys.readouterr().err
    assert main(["eval", "--qrels", str(trec_files["qrels"]), "--run", str(trec_files["a"]), "--run",
                 str(trec_files["b"])]) == 2
    err = capsys.readouterr().err
    assert "--run was given 2 times" in err and "ltr compare" in err


def test_eval_json_file_and_text_on_screen(capsys, trec_files, tmp_path):
    out = tmp_path / "r.json"
    assert main(["eval", "--qrels", str(trec_files["qrels"]), "--run", str(trec_files["a"]), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "queries evaluated: 4" in text and json.loads(out.read_text())["queries"]["evaluated"] == 4


def test_compare_equals_metrics_compare(capsys, trec_files, tmp_path):
    argv = ["compare", "--qrels", str(trec_files["qrels"]), "--run", str(trec_files["a"]), "--run",
            str(trec_files["b"]), "--metrics", "ndcg@10,map,arp", "--preset", "trec_eval"]
    report = _json(capsys, *argv, "--json")
    qrels = read_qrels(trec_files["qrels"])
    results = {}
    for name in ("a", "b"):
        al = align(read_run(trec_files[name]), qrels)
        results[name] = metrics.evaluate(al.scores, al.labels, al.query_offsets, "ndcg@10,map,arp", preset="trec_eval",
                                         doc_ids=al.doc_ids, qrels_labels=al.qrels_labels,
                                         qrels_offsets=al.qrels_offsets, query_ids=al.query_ids)
    want = metrics.compare(results)
    assert report["baseline"] == "a" and report["queries"] == 4
    for metric in ("ndcg@10", "map", "arp"):
        row = want.row(metric, "b")
        got = report["metrics"][metric]["runs"]["b"]
        assert got["difference"] == pytest.approx(row.difference, abs=1e-15)
        assert got["p_value"] == pytest.approx(row.p_value, abs=1e-15)
        assert [got["wins"], got["ties"], got["losses"]] == [row.wins, row.ties, row.losses]
        assert report["mean"][metric]["a"] == pytest.approx(results["a"][metric], abs=1e-15)
        assert report["metrics"][metric]["stamped"] == results["a"].names[metric]
    # the markdown table, LaTeX and the plot
    tex, png = tmp_path / "t.tex", tmp_path / "d.png"
    assert main([*argv, "--latex", str(tex), "--plot", str(png), "--test", "randomization", "--baseline", "b"]) == 0
    text = capsys.readouterr().out
    assert "| metric | run | mean | difference vs b [95% CI] | p (holm) | wins/ties/losses |" in text
    assert "| map | b (baseline) |" in text and "randomization test" in text
    assert "\\begin{tabular}{llrrrr}" in tex.read_text() and "ndcg@10" in tex.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_refusals(capsys, trec_files):
    base = ["compare", "--qrels", str(trec_files["qrels"]), "--run", str(trec_files["a"])]
    assert main(base) == 2 and "at least two --run" in capsys.readouterr().err
    assert main([*base, "--run", str(trec_files["b"]), "--baseline", "c"]) == 2
    assert "baseline 'c'" in capsys.readouterr().err
    assert main([*base, "--run", str(trec_files["b"]), "--metrics", "ndgc@10"]) == 2
    assert "unknown metric" in capsys.readouterr().err
    assert main([*base, "--run", str(trec_files["a"])]) == 0  # the same file twice: names a and a#2
    assert "a#2" in capsys.readouterr().out


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("predict")
    for name, (nq, seed) in {"train": (30, 1), "valid": (10, 2)}.items():
        save_svmlight(make_ds(nq, seed), d / f"{name}.txt")
    cfg = d / "g.toml"
    cfg.write_text("[lightgbm]\nnum_leaves = 7\nmin_data_in_leaf = 5\nnum_threads = 1\n[gbdt]\nnum_boost_round = 5\n")
    assert main(["gbdt", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "--config", str(cfg),
                 "--out", str(d / "model"), "--quiet"]) == 0
    return d


def test_predict_formats_agree(capsys, model, tmp_path):
    data = model / "valid.txt"
    run_file, parquet = tmp_path / "v.run", tmp_path / "v.parquet"
    assert main(["predict", "--model", str(model / "model"), "--data", str(data), "--out", str(run_file)]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", str(model / "model"), "--data", str(data), "--out", "-", "--format", "tsv"]) == 0
    captured = capsys.readouterr()
    tsv = np.array([float(x) for x in captured.out.split()])
    assert "wrote" in captured.err  # the message stays off standard output
    ds = load_svmlight(data, n_features=6, cache=False)
    assert tsv.shape == (ds.n_items,)
    run = read_run(run_file)
    by_doc = {(q, d): s for q, docs in run.items() for d, s in docs}
    off = ds.query_offsets
    for j, q in enumerate(ds.query_ids):
        for i in range(off[j], off[j + 1]):
            assert by_doc[(str(q), str(i - off[j]))] == tsv[i]  # same score, same row (repr round-trips)
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["predict", "--model", str(model / "model"), "--data", str(data), "--out", str(parquet),
                 "--format", "parquet"]) == 0
    table = pq.read_table(parquet).to_pydict()
    assert list(table) == ["qid", "docid", "rank", "score"]
    np.testing.assert_array_equal(table["score"], tsv)
    rank_of = {(q, d): r for q, docs in run.items() for r, (d, _) in enumerate(sorted(docs, key=lambda x: -x[1]), 1)}
    assert [rank_of[(q, d)] for q, d in zip(table["qid"], table["docid"])] == table["rank"]


def test_tsv_scores_feed_calibrate_from_standard_input(capsys, monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    labels = tmp_path / "labels.txt"
    y = (rng.random(400) < 0.3).astype(int)
    labels.write_text("".join(f"{v}\n" for v in y))
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{float(v)!r}\n" for v in rng.normal(size=400) + y)))
    assert main(["calibrate", "--scores", "-", "--labels", str(labels), "--method", "platt",
                 "--out", str(tmp_path / "cal")]) == 0
    assert (tmp_path / "cal" / "calibrator.json").exists()
    assert main(["calibrate", "--scores", "-", "--labels", "-", "--method", "platt", "--out", str(tmp_path / "c2")]) == 2


def test_eval_diversity_qrels_alpha_ndcg(capsys, tmp_path):
    qrels, run = tmp_path / "div.qrels", tmp_path / "div.run"
    # query 1: a covers subtopics 1 and 2, b subtopic 1, c subtopic 2, d (not retrieved) subtopic 3
    qrels.write_text("1 1 a 1\n1 2 a 1\n1 1 b 1\n1 2 c 1\n1 3 d 1\n2 1 x 1\n2 2 y 0\n")
    run.write_text("1 Q0 b 1 3 t\n1 Q0 a 2 2 t\n1 Q0 c 3 1 t\n2 Q0 x 1 1 t\n")
    report = _json(capsys, "eval", "--qrels", str(qrels), "--run", str(run), "--diversity", "--alpha", "0.5",
                   "--metrics", "alpha_ndcg@2,alpha_ndcg", "--per-query", "--json")
    dcg = [1, 0.5 + 1, 0.5] / np.log2(np.arange(2, 5))  # ranked b, a, c
    ideal = [2, 1, 0.5, 0.5] / np.log2(np.arange(2, 6))  # greedy: a, d, b, c
    assert report["per_query"]["1"]["alpha_ndcg"] == pytest.approx(dcg.sum() / ideal.sum(), abs=1e-12)
    assert report["per_query"]["1"]["alpha_ndcg@2"] == pytest.approx(dcg[:2].sum() / ideal[:2].sum(), abs=1e-12)
    assert report["per_query"]["2"]["alpha_ndcg"] == 1.0
    assert report["metrics"]["alpha_ndcg"]["stamped"].startswith("alpha_ndcg[alpha=0.5,rel>=1,")
    assert main(["eval", "--qrels", str(qrels), "--run", str(run), "--diversity", "--metrics", "ndcg@10"]) == 2
