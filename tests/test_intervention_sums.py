"""Propensities from the randomized and swap sessions of a Parquet log read in record batches: the streamed
sums give the in-memory log's estimates, and no command reads the intervention sessions into memory."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click_log_files import write_backwards_log, write_data_and_scores

from ltr.clicks.simulate.click_models import simulate_click_chunks
from ltr.clicks.propensities.intervention_sums import stream_intervention_sums, sums_from_rows, sums_of_log
from ltr.clicks.logs.list_stream import UnsortedSessionsError
from ltr.clicks.logs.stream import write_log_stream
from ltr.clicks.logs.table import log_to_table, read_log_parquet
from ltr.clicks.propensities.interventions import estimate_from_randomized, estimate_from_swaps
from ltr.data import RankingDataset
from ltr.base.errors import LtrError

OPTS = dict(model="pbm", eta=1.0, top_k=6, sessions_per_query=40, seed=3, randomize_fraction=0.3, swap_fraction=0.3)
FIELDS = ("theta", "se", "low", "high", "clicks", "sessions")


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    rng = np.random.default_rng(11)
    lengths = rng.integers(3, 12, 40)  # lists shorter than top_k too: sessions showing fewer items
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    ds = RankingDataset(np.column_stack([labels, rng.normal(size=offsets[-1])]), labels, offsets,
                        np.arange(len(lengths)))
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, labels + rng.normal(0, 1, offsets[-1]),
                                         chunk_sessions=113, **OPTS)
    path = tmp_path_factory.mktemp("interventions") / "clicks.parquet"
    write_log_stream(chunks, path, meta)
    return ds, path, read_log_parquet(path)


def _same_estimate(a, b, rtol=1e-12):
    for name in FIELDS:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=rtol, atol=0, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("batch_size", [5, 64, 1_000_000])
def test_streamed_sums_give_the_in_memory_estimates(logged, batch_size):
    _, path, log = logged
    sums = stream_intervention_sums(path, batch_size=batch_size)  # 5 rows: every session split between batches
    whole = sums_of_log(log)
    for name in ("rand_n", "rand_x", "rand_xx", "rand_x1x", "swap_n", "swap_t", "swap_tt"):
        np.testing.assert_array_equal(getattr(sums, name), getattr(whole, name), err_msg=name)
    assert sums.n_randomized == int(np.sum(log.session_mode == 1)) > 100
    assert sums.n_swap == int(np.sum(log.session_mode == 2)) > 100
    for fn in (estimate_from_randomized, estimate_from_swaps):
        for k in (3, 6):
            _same_estimate(fn(sums, k), fn(log, k))
        _same_estimate(fn(sums), fn(log.select_sessions(log.session_mode > 0)))  # default: every shown position


def test_sums_by_hand_on_three_sessions():
    # randomized session 7 shows 3 items (clicks at positions 1 and 3); randomized session 8 shows 2 (click at 2);
    # swap session 9 (k = 2) shows 2, the logger's top item (logged rank 1) now at position 2 and clicked;
    # production session 5 is ignored
    session = np.array([5, 5, 7, 7, 7, 8, 8, 9, 9])
    position = np.array([1, 2, 1, 2, 3, 1, 2, 1, 2])
    click = np.array([1, 1, 1, 0, 1, 0, 1, 0, 1])
    mode = np.array([0, 0, 1, 1, 1, 1, 1, 2, 2])
    swap = np.array([0, 0, 0, 0, 0, 0, 0, 2, 2])
    rank = np.array([1, 2, 1, 2, 3, 1, 2, 2, 1])
    s = sums_from_rows(session, position, click, mode, swap, rank)
    assert s.max_position == 3 and s.rand_n.tolist() == [0, 0, 1, 1]
    assert s.rand_x[3].tolist() == [1, 0, 1] and s.rand_x[2].tolist() == [0, 1, 0]
    assert s.rand_x1x[3].tolist() == [1, 0, 1] and s.rand_x1x[2].tolist() == [0, 0, 0]  # c_1 = 0 in session 8
    assert s.swap_n[2, 2] == 1 and s.swap_t[2, 2] == 1 and s.swap_n.sum() == 1
    # merging the sums of two halves gives the sums of the whole
    half = session <= 7
    merged = sums_from_rows(*(a[half] for a in (session, position, click, mode, swap, rank))).merge(
        sums_from_rows(*(a[~half] for a in (session, position, click, mode, swap, rank))))
    for name in ("rand_n", "rand_x", "rand_xx", "rand_x1x", "swap_n", "swap_t", "swap_tt"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(s, name), err_msg=name)


def test_sessions_that_go_back_and_logs_without_interventions(logged, tmp_path):
    _, _, log = logged
    backwards = write_backwards_log(log, tmp_path / "backwards.parquet")
    with pytest.raises(UnsortedSessionsError, match="session"):
        stream_intervention_sums(backwards, batch_size=50)
    production = tmp_path / "production.parquet"
    pq.write_table(log_to_table(log).drop(["session_mode", "session_swap"]), production)
    with pytest.raises(LtrError, match="no randomized or swap traffic"):
        stream_intervention_sums(production)


def test_cli_estimates_stream_and_fall_back_for_an_unsorted_log(logged, tmp_path, capsys, monkeypatch):
    from ltr.cli import main
    from ltr.clicks.logs import table as log_table

    _, path, log = logged
    backwards = write_backwards_log(log, tmp_path / "backwards.parquet")
    got = {}
    for name, log_path in (("sorted", path), ("backwards", backwards)):
        with monkeypatch.context() as patch:
            if name == "sorted":  # the sorted log never goes through the whole-table reader
                patch.setattr(log_table, "read_log_parquet", _refuse)
            for method in ("randomized", "swap"):
                out = tmp_path / f"{name}-{method}.json"
                assert main(["clicks", "estimate", "--log", str(log_path), "--method", method, "--read-rows", "37",
                             "--json", str(out)]) == 0
                got[name, method] = json.loads(out.read_text())
    assert capsys.readouterr().err.count("reading its randomized and swap sessions whole") == 2
    for method, fn in (("randomized", estimate_from_randomized), ("swap", estimate_from_swaps)):
        want = fn(log.select_sessions(log.session_mode > 0))
        for name in ("sorted", "backwards"):
            rows = got[name, method]["rows"]
            np.testing.assert_allclose([r["theta"] for r in rows], want.theta, rtol=1e-12, equal_nan=True)
            assert [r["truth"] for r in rows][:2] == [1.0, 0.5]  # PBM, eta = 1: theta_2 / theta_1 = 1/2


def _refuse(*args, **kwargs):
    raise AssertionError("the intervention sessions were read whole")


def test_clicks_evaluate_with_estimated_propensities_streams_them(logged, tmp_path, monkeypatch):
    from ltr.cli import main
    from ltr.clicks.logs import table as log_table

    ds, path, log = logged
    data, scores = write_data_and_scores(ds, tmp_path)
    backwards = write_backwards_log(log, tmp_path / "backwards.parquet")
    got = []
    for log_path in (path, backwards):  # streamed, then read whole (session ids go back)
        with monkeypatch.context() as patch:
            if log_path == path:
                patch.setattr(log_table, "read_log_parquet", _refuse)
            out = tmp_path / f"ev{len(got)}.json"
            assert main(["clicks", "evaluate", "--log", str(log_path), "--data", str(data), "--scores", str(scores),
                         "--k", "5", "--propensity", "swap", "--read-rows", "29", "--json", str(out)]) == 0
            got.append(json.loads(out.read_text()))
    assert got[0].keys() == got[1].keys()
    assert got[0].pop("propensity_source") == got[1].pop("propensity_source") == "estimated from swap traffic"
    for key in got[0]:
        assert got[0][key] == pytest.approx(got[1][key], rel=1e-12), key
