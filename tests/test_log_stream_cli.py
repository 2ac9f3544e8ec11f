"""``ltr clicks`` on streamed Parquet logs and on logs that name queries and documents by id."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ltr.cli import main
from ltr.data import RankingDataset, save_svmlight


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    rng = np.random.default_rng(2)
    lengths = rng.integers(8, 14, 60)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    labels = rng.integers(0, 3, offsets[-1]).astype(np.float64)
    x = np.column_stack([labels + rng.normal(0, 1, offsets[-1]), rng.normal(size=(offsets[-1], 2))]).astype(np.float32)
    path = tmp_path_factory.mktemp("stream") / "data.txt"
    save_svmlight(RankingDataset(x, labels, offsets, np.arange(60)), path)
    return path


def _simulate(path, out, fmt, *extra):
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(out), "--top-k", "8", "--sessions-per-query",
                 "30", "--seed", "4", "--format", fmt, "--quiet", *extra]) == 0


def test_streamed_simulation_summary_and_estimates_equal_the_in_memory_ones(data_file, tmp_path, capsys):
    extra = ("--randomize-fraction", "0.3", "--swap-fraction", "0.3")
    _simulate(data_file, tmp_path / "n", "npz", *extra)
    _simulate(data_file, tmp_path / "p", "parquet", *extra)
    a = json.loads((tmp_path / "n" / "summary.json").read_text())
    b = json.loads((tmp_path / "p" / "summary.json").read_text())
    for key in ("meta", "n_sessions", "n_entries", "n_clicks", "ctr_by_position", "propensity_randomized", "propensity_swap"):
        assert a[key] == b[key], key
    assert a["n_sessions"] == 60 * 30
    capsys.readouterr()
    got = {}
    for fmt, log in (("npz", tmp_path / "n" / "clicks.npz"), ("parquet", tmp_path / "p" / "clicks.parquet")):
        for method in ("em", "swap"):
            js = tmp_path / f"{fmt}_{method}.json"
            assert main(["clicks", "estimate", "--log", str(log), "--data", str(data_file), "--method", method,
                         "--resamples", "3", "--read-rows", "500", "--json", str(js)]) == 0
            got[fmt, method] = json.loads(js.read_text())
    assert got["npz", "em"] == got["parquet", "em"] and got["npz", "swap"] == got["parquet", "swap"]
    assert got["npz", "em"]["rows"][1]["theta"] < 1.0


def test_train_streams_a_parquet_log_and_matches_the_in_memory_training(data_file, tmp_path, capsys):
    _simulate(data_file, tmp_path / "n", "npz")
    _simulate(data_file, tmp_path / "p", "parquet")
    import torch

    infos = {}
    for fmt, log in (("npz", tmp_path / "n" / "clicks.npz"), ("parquet", tmp_path / "p" / "clicks.parquet")):
        out = tmp_path / f"m_{fmt}"
        torch.manual_seed(0)  # the scorer's initial weights come from torch's global generator (as in a fresh process)
        assert main(["clicks", "train", "--data", str(data_file), "--valid", str(data_file), "--log", str(log),
                     "--out", str(out), "--estimator", "ips", "--epochs", "2", "--model", "linear", "--read-rows", "700"]) == 0
        infos[fmt] = json.loads((out / "clicks_training.json").read_text())
    text = capsys.readouterr().out
    assert infos["parquet"]["log_read"].startswith("streamed") and "log_read" not in infos["npz"]
    assert infos["parquet"]["n_sessions"] == infos["npz"]["n_sessions"] == 1800
    np.testing.assert_allclose(infos["parquet"]["propensity"], 1.0 / np.arange(1, 9))
    assert infos["parquet"]["valid_metrics"] == pytest.approx(infos["npz"]["valid_metrics"], rel=1e-6)
    # The two runs print the same validation NDCG@10.
    lines = [ln for ln in text.splitlines() if ln.startswith("ips: trained on")]
    assert len(lines) == 2 and lines[0] == lines[1]


def _hand_log(path, queries, docs, positions, clicks):
    table = pa.table({"session": pa.array([0, 0, 1, 1], pa.int64()), "query": pa.array(queries),
                      "doc": pa.array(docs), "position": pa.array(positions, pa.int64()),
                      "click": pa.array(clicks, pa.int8())})
    pq.write_table(table, path)


@pytest.fixture()
def id_data(tmp_path):
    """Two queries (qid 17 and 42) of three documents with #docid comments; d2 is judged for both."""
    path = tmp_path / "ids.txt"
    path.write_text("1 qid:17 1:1.0 2:0.0 # docid = d1\n0 qid:17 1:0.0 2:1.0 # docid = d2\n"
                    "2 qid:17 1:2.0 2:0.5 # docid = d3\n0 qid:42 1:0.1 2:0.2 # docid = d2\n"
                    "1 qid:42 1:1.0 2:0.3 # docid = d5\n0 qid:42 1:0.0 2:0.0 # docid = d6\n")
    return path


def test_a_log_with_string_ids_maps_to_the_data_rows(id_data, tmp_path):
    from ltr.clicks.logs.stream import aggregate_log
    from ltr.data.files import load_data_file

    ds = load_data_file(str(id_data), "data", None)
    log = tmp_path / "ext.parquet"
    # session 0: query "17" shows d3, d1; session 1: query "42" shows d2 (the row of query 42, not 17), d5
    _hand_log(log, ["17", "17", "42", "42"], ["d3", "d1", "d2", "d5"], [1, 2, 1, 2], [1, 0, 0, 1])
    agg = aggregate_log(log, ds)  # text columns: read as ids
    assert agg.doc.tolist() == [0, 2, 3, 4] and agg.position.tolist() == [2, 1, 1, 2]
    assert agg.query.tolist() == [0, 0, 1, 1] and agg.clicks.tolist() == [0, 1, 0, 1] and agg.n_sessions == 2
    # Integer ids that are not indices: the same log with qid 17 / 42 as integers needs --log-ids id.
    _hand_log(tmp_path / "int.parquet", [17, 17, 42, 42], ["d3", "d1", "d2", "d5"], [1, 2, 1, 2], [1, 0, 0, 1])
    same = aggregate_log(tmp_path / "int.parquet", ds, ids="id")
    assert same.doc.tolist() == agg.doc.tolist() and same.clicks.tolist() == agg.clicks.tolist()


@pytest.mark.parametrize("queries, docs, message", [
    (["17", "17", "99", "99"], ["d3", "d1", "d2", "d5"], r"ext.parquet: row 3: query id '99' is not a query"),
    (["17", "17", "42", "42"], ["d3", "d1", "d2", "zz"], r"row 4: document id 'zz' is not a document"),
    (["17", "17", "42", "42"], ["d3", "d5", "d2", "d6"], r"row 2: query / document '17 / d5' names no row"),
])
def test_ids_not_in_the_data_set_are_clear_errors(id_data, tmp_path, capsys, queries, docs, message):
    log = tmp_path / "ext.parquet"
    _hand_log(log, queries, docs, [1, 2, 1, 2], [1, 0, 0, 1])
    rc = main(["clicks", "train", "--data", str(id_data), "--valid", str(id_data), "--log", str(log),
               "--out", str(tmp_path / "m"), "--estimator", "naive", "--epochs", "1", "--model", "linear"])
    assert rc == 2
    import re

    assert re.search(message, capsys.readouterr().err)


def test_integer_ids_read_as_indices_outside_the_data_are_refused(id_data, tmp_path, capsys):
    log = tmp_path / "int.parquet"
    _hand_log(log, [17, 17, 42, 42], [0, 1, 3, 4], [1, 2, 1, 2], [1, 0, 0, 1])
    rc = main(["clicks", "estimate", "--method", "em", "--data", str(id_data), "--log", str(log), "--resamples", "2"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "row 1: query index 17 is outside the data set's 0..1" in err and "--log-ids id" in err


def test_evaluate_reads_a_log_with_string_ids(id_data, tmp_path, capsys):
    log = tmp_path / "ext.parquet"
    _hand_log(log, ["17", "17", "42", "42"], ["d3", "d1", "d2", "d5"], [1, 2, 1, 2], [1, 0, 0, 1])
    scores = tmp_path / "s.txt"
    scores.write_text("0.5\n0.1\n0.9\n0.2\n0.8\n0.0\n")  # ranks d3 then d1 (query 17), d5 then d2 (query 42)
    js = tmp_path / "e.json"
    args = ["clicks", "evaluate", "--log", str(log), "--data", str(id_data), "--scores", str(scores), "--k", "2",
            "--json", str(js)]
    assert main(args) == 2  # no propensity column: IPS is not naive under another name
    assert "no propensity column" in capsys.readouterr().err
    (tmp_path / "curve.txt").write_text("1\n0.5\n")
    assert main([*args, "--propensity-file", str(tmp_path / "curve.txt")]) == 0
    out = json.loads(js.read_text())
    # The new ranker shows each clicked item (d3 in session 0, d5 in session 1) first: naive click-DCG@2 = 1 per query.
    assert out["naive"] == pytest.approx(1.0)
    # IPS: d3 was clicked at position 1 (weight 1), d5 at position 2 (weight 1 / 0.5): (1 + 2) / 2
    assert out["ips"] == pytest.approx(1.5)
    assert out["propensity_source"] == f"file {tmp_path / 'curve.txt'}" and "true_click_dcg" not in out
