"""Intervention harvesting: exact recovery from expected clicks of several rankers, a simulated log
of three rankers against the truth, and a clear refusal when there is only one ranker."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.simulate.click_models import attraction, pbm_examination, simulate_clicks, top_k_matrix
from ltr.clicks.propensities.harvesting import (
    adjacent_estimate,
    allpairs_estimate,
    counts_from_logs,
    estimate_harvest,
    harvest_counts,
    pair_statistics,
)
from ltr.base.errors import LtrError


def _data(seed=0, n_queries=200):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(12, 30, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    return rng, labels, offsets


def _expected_records(labels, offsets, rankers, theta, sessions):
    """Expected (not sampled) PBM clicks: c = n theta_k a(d) for every ranker's top-K."""
    a = attraction(labels, max_label=4, eps=0.1)
    q_of_row = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    recs = []
    for scores, n in zip(rankers, sessions):
        shown, n_shown = top_k_matrix(scores, offsets, len(theta))
        rows, cols = np.nonzero(shown >= 0)
        d = shown[rows, cols]
        recs.append((q_of_row[d], d, cols + 1, np.full(len(d), float(n)), n * theta[cols] * a[d]))
    return [np.concatenate(x) for x in zip(*recs)]


@pytest.mark.parametrize("eta", [0.5, 1.0, 2.0])
def test_noiseless_pbm_recovers_the_propensities_exactly(eta):
    rng, labels, offsets = _data()
    theta = pbm_examination(10, eta)
    rankers = [labels + rng.normal(0, s, len(labels)) for s in (0.5, 1.0, 2.0)]
    q, d, pos, n, c = _expected_records(labels, offsets, rankers, theta, sessions=(50, 30, 20))
    counts = harvest_counts(q, d, pos, n, c)
    cc, s = pair_statistics(counts)
    np.testing.assert_allclose(adjacent_estimate(cc, s), theta / theta[0], rtol=1e-12)
    np.testing.assert_allclose(allpairs_estimate(cc, s), theta / theta[0], rtol=1e-5)


def test_pair_statistics_by_hand():
    # doc 7 of query 0: 2 clicks in 4 impressions at position 1, 1 in 5 at position 2; doc 8 only at 1.
    counts = harvest_counts([0, 0, 0], [7, 7, 8], [1, 2, 1], [4, 5, 3], [2, 1, 1])
    c, s = pair_statistics(counts)
    np.testing.assert_allclose(c, [[0, 0.5], [0.2, 0]])
    np.testing.assert_allclose(s, [[0, 1], [1, 0]])
    np.testing.assert_allclose(adjacent_estimate(c, s), [1.0, 0.4])


def test_simulated_logs_of_three_rankers():
    rng, labels, offsets = _data(1, n_queries=400)
    logs = [simulate_clicks(labels, offsets, labels + rng.normal(0, s, len(labels)), model="pbm", eta=1.0,
                            max_label=4, top_k=10, sessions_per_query=200, seed=10 + i)
            for i, s in enumerate((0.7, 1.5, 3.0))]
    counts = counts_from_logs(logs)
    truth = pbm_examination(10, 1.0)
    # 240,000 sessions: AllPairs within 3% at every position (seed 1: at most 1.9%); the adjacent chain
    # multiplies nine noisy ratios and drifts (12.1% at position 9 on this seed).
    for method, tol, covered in (("allpairs", 0.03, 8), ("adjacent", 0.15, 6)):
        est = estimate_harvest(counts, method=method, resamples=20, seed=0)
        err = np.abs(est.theta / truth - 1)
        assert err.max() < tol, (method, est.theta)
        rows = est.as_rows(truth)
        assert sum(r["covered"] for r in rows) >= covered, rows
        assert (est.low <= est.theta + 1e-12).all() and (est.theta <= est.high + 1e-12).all()
        assert est.resamples == 20 and est.keys[0] > 0
    ap = estimate_harvest(counts, method="allpairs", resamples=0).theta
    ad = estimate_harvest(counts, method="adjacent", resamples=0).theta
    assert np.abs(ap / truth - 1)[5:].mean() < np.abs(ad / truth - 1)[5:].mean()


def test_a_single_ranker_is_refused():
    rng, labels, offsets = _data(2, n_queries=50)
    scores = labels + rng.normal(0, 1.0, len(labels))
    logs = [simulate_clicks(labels, offsets, scores, max_label=4, sessions_per_query=20, seed=s) for s in (0, 1)]
    for method in ("allpairs", "adjacent"):
        with pytest.raises(LtrError, match="several rankers"):
            estimate_harvest(counts_from_logs(logs), method=method)
    with pytest.raises(LtrError, match="unknown method"):
        estimate_harvest(counts_from_logs(logs), method="em")
    with pytest.raises(LtrError, match="clicks <= impressions"):
        harvest_counts([0], [0], [1], [1], [2])


def test_cli_estimate_harvest(tmp_path, capsys):
    import json

    from ltr.cli import main
    from ltr.data import RankingDataset, save_svmlight

    rng, labels, offsets = _data(3, n_queries=150)
    x = rng.normal(size=(len(labels), 3)).astype(np.float32)
    path = tmp_path / "data.txt"
    save_svmlight(RankingDataset(x, labels, offsets, np.arange(len(offsets) - 1)), path)
    logs = []
    for i, noise in enumerate(("0.5", "1.5", "3")):
        out = tmp_path / f"log{i}"
        assert main(["clicks", "simulate", "--data", str(path), "--out", str(out), "--logger-noise", noise, "--seed", str(i),
                     "--sessions-per-query", "100", "--format", "parquet", "--quiet"]) == 0
        logs.append(str(out / "clicks.parquet"))
    res_path = tmp_path / "harvest.json"
    # only the point estimate is checked here (the interval is in test_simulated_logs_of_three_rankers): a few replicates
    assert main(["clicks", "estimate", "--method", "harvest", "--log", *logs[:2], "--log", logs[2], "--positions", "6",
                 "--resamples", "3", "--json", str(res_path)]) == 0
    res = json.loads(res_path.read_text())
    assert res["method"] == "harvest" and res["pairs"] == "allpairs" and len(res["logs"]) == 3
    theta = np.array([r["theta"] for r in res["rows"]])
    truth = np.array([r["truth"] for r in res["rows"]])
    np.testing.assert_allclose(truth, 1.0 / np.arange(1, 7))
    assert np.abs(theta / truth - 1).max() < 0.15, theta
    capsys.readouterr()
    # one ranker: refused with the reason; several logs for another method: refused
    assert main(["clicks", "estimate", "--method", "harvest", "--log", logs[0]]) == 2
    assert "several rankers" in capsys.readouterr().err
    assert main(["clicks", "estimate", "--method", "em", "--log", *logs[:2]]) == 2
    assert "several logs are for --method harvest" in capsys.readouterr().err


@pytest.mark.parametrize("batch_size", [41, 1_000_000])
def test_streamed_harvest_cells_give_the_counts_of_the_logs_read_whole(tmp_path, batch_size):
    """Three rankers' Parquet logs summed per (query, doc, position) in record batches give exactly the harvested
    counts, the estimate and the session counts of the logs read whole. Sessions hold 6 entries, so batches of 41
    rows (a prime) cut a session at most boundaries: ~260 boundaries per log, each cell and session merged across them."""
    from ltr.clicks.propensities.harvest_stream import cells_of_log, stream_harvest_cells
    from ltr.clicks.propensities.harvesting import counts_from_cells
    from ltr.clicks.logs.table import read_log_parquet, write_log_parquet

    rng, labels, offsets = _data(4, n_queries=60)
    logs, paths = [], []
    for i, noise in enumerate((0.5, 1.5, 3.0)):
        log = simulate_clicks(labels, offsets, labels + rng.normal(0, noise, len(labels)), max_label=4, top_k=6,
                              sessions_per_query=30, seed=i, swap_fraction=0.2 * i)
        paths.append(tmp_path / f"log{i}.parquet")
        write_log_parquet(log, paths[-1])
        logs.append(read_log_parquet(paths[-1]))
    whole = counts_from_logs(logs)
    cells = [stream_harvest_cells(p, batch_size=batch_size) for p in paths]
    streamed = counts_from_cells(cells)
    for name in ("rate", "shown", "query"):
        np.testing.assert_array_equal(getattr(streamed, name), getattr(whole, name))
    assert [c.n_sessions for c in cells] == [log.n_sessions for log in logs] == [60 * 30] * 3
    assert sum(c.n.sum() for c in cells) == sum(log.n_entries for log in logs)
    a = estimate_harvest(streamed, resamples=5, seed=1)
    b = estimate_harvest(counts_from_cells([cells_of_log(log) for log in logs]), resamples=5, seed=1)
    np.testing.assert_array_equal(a.theta, b.theta)


def test_streamed_harvest_refuses_a_doc_row_under_two_queries_and_bad_columns(tmp_path):
    """A log whose doc row appears under two query indices cannot be keyed by row: refused, naming the row; text
    ids and a position below 1 are refused naming the file (and row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.clicks.propensities.harvest_stream import stream_harvest_cells

    table = pa.table({"session": [0, 0, 1, 1], "query": [0, 0, 1, 1], "doc": [3, 4, 3, 5], "position": [1, 2, 1, 2],
                      "click": [1, 0, 0, 1]})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(LtrError, match="doc row 3 is logged under queries 0 and 1"):
        stream_harvest_cells(tmp_path / "bad.parquet", batch_size=3)
    named = table.set_column(2, "doc", pa.array(["d3", "d4", "d3", "d5"]))
    pq.write_table(named, tmp_path / "named.parquet")
    with pytest.raises(LtrError, match="named.parquet: intervention harvesting reads logs whose session, query and doc"):
        stream_harvest_cells(tmp_path / "named.parquet")
    pq.write_table(table.set_column(3, "position", pa.array([1, 2, 0, 2])), tmp_path / "pos.parquet")
    with pytest.raises(LtrError, match=r"pos.parquet: row 3: position 0 is outside 1\.\."):
        stream_harvest_cells(tmp_path / "pos.parquet")


def test_cli_harvest_streams_sorted_logs_and_reads_unsorted_ones_whole(tmp_path, capsys):
    """ltr clicks estimate --method harvest: the same estimate from Parquet logs streamed in batches of 41 rows (6-entry
    sessions cut at most batch boundaries) and
    from the same logs with their session ids going back (read whole, with a note each)."""
    import json

    from click_log_files import write_backwards_log

    from ltr.cli import main
    from ltr.clicks.logs.table import write_log_parquet

    rng, labels, offsets = _data(5, n_queries=60)
    sorted_logs, backwards = [], []
    for i, noise in enumerate((0.5, 1.5, 3.0)):
        log = simulate_clicks(labels, offsets, labels + rng.normal(0, noise, len(labels)), max_label=4, top_k=6,
                              sessions_per_query=30, seed=i)
        sorted_logs.append(str(tmp_path / f"log{i}.parquet"))
        write_log_parquet(log, sorted_logs[-1])
        backwards.append(str(write_backwards_log(log, tmp_path / f"back{i}.parquet")))
    results = []
    for paths in (sorted_logs, backwards):
        out = tmp_path / f"h{len(results)}.json"
        assert main(["clicks", "estimate", "--method", "harvest", "--log", *paths, "--resamples", "5", "--read-rows", "41",
                     "--json", str(out)]) == 0
        results.append(json.loads(out.read_text())["rows"])
    assert results[0] == results[1]
    assert capsys.readouterr().err.count("reading the log whole") == 3


@pytest.mark.parametrize("id_scale", [1, 2**40], ids=["indices", "ids too far apart for one key"])
def test_harvest_counts_equal_the_sums_over_unique_rows(id_scale):
    """The per-(query, doc) cells through one int64 key (or unique rows when the ids are too far apart)
    are the sums the definition gives: unique (query, doc) rows in lexicographic order, np.add.at per
    position, records of one cell summed in order."""
    from ltr.clicks.propensities.harvesting import harvest_counts

    rng = np.random.default_rng(3)
    q, d = rng.integers(0, 30, 5000) * id_scale, rng.integers(0, 200, 5000)
    pos = rng.integers(1, 9, 5000)
    n = rng.integers(1, 5, 5000).astype(float)
    c = np.minimum(n, rng.random(5000) * 3)
    got = harvest_counts(q, d, pos, n, c)
    keys, key_of = np.unique(np.stack([q, d], axis=1), axis=0, return_inverse=True)
    imp, clk = np.zeros((len(keys), 8)), np.zeros((len(keys), 8))
    np.add.at(imp, (key_of.ravel(), pos - 1), n)
    np.add.at(clk, (key_of.ravel(), pos - 1), c)
    assert np.array_equal(got.query, keys[:, 0]) and np.array_equal(got.impressions, imp)
    assert np.array_equal(got.shown, imp > 0)
    assert np.array_equal(got.rate, np.where(imp > 0, clk / np.where(imp > 0, imp, 1.0), 0.0))
