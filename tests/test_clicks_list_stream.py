"""DLA and pairwise debiasing from a Parquet log read in record batches: the streamed shown lists and pair
counts equal the whole log's, and so does the model trained on them."""

from __future__ import annotations

import numpy as np
import pytest
from click_log_files import write_backwards_log, write_data_and_scores

from ltr.clicks.simulate.click_models import simulate_click_chunks
from ltr.clicks.logs.list_stream import stream_shown_lists
from ltr.clicks.logs.stream import write_log_stream
from ltr.clicks.logs.table import read_log_parquet
from ltr.clicks.logs.lists import group_sessions, pair_counts
from ltr.data import RankingDataset
from ltr.base.errors import LtrError

# randomized and swapped sessions: several shown lists per query, so the groups really merge across batches
OPTS = dict(model="cascade", top_k=6, sessions_per_query=30, seed=5, randomize_fraction=0.3, swap_fraction=0.2)


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    rng = np.random.default_rng(7)
    lengths = rng.integers(3, 11, 25)  # lists shorter than top_k too: padded cells
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    features = np.column_stack([labels + rng.normal(0, 1, offsets[-1]), rng.normal(size=(offsets[-1], 2))])
    ds = RankingDataset(features, labels, offsets, np.arange(len(lengths)))
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, labels + rng.normal(0, 1, offsets[-1]),
                                         chunk_sessions=97, **OPTS)
    path = tmp_path_factory.mktemp("lists") / "clicks.parquet"
    write_log_stream(chunks, path, meta)
    return ds, path, read_log_parquet(path)


@pytest.mark.parametrize("batch_size", [7, 50, 1_000_000])
def test_streamed_lists_and_pairs_equal_the_whole_log(logged, batch_size):
    ds, path, log = logged
    whole = group_sessions(log)
    lists, pairs, meta = stream_shown_lists(path, ds, batch_size=batch_size, pairs=True)
    assert whole.n_groups > ds.n_queries  # several lists per query
    np.testing.assert_array_equal(lists.docs, whole.docs)
    np.testing.assert_array_equal(lists.query, whole.query)
    np.testing.assert_array_equal(lists.sessions, whole.sessions)
    np.testing.assert_array_equal(lists.clicks, whole.clicks)
    np.testing.assert_array_equal(pairs, pair_counts(log, whole))
    assert lists.sessions.sum() == log.n_sessions and meta["model"] == "cascade"
    assert stream_shown_lists(path, ds, batch_size=batch_size)[1] is None


@pytest.mark.parametrize("estimator", ["dla", "pairwise-debias"])
def test_training_on_the_streamed_lists_equals_training_on_the_log(logged, estimator):
    import torch

    from ltr.clicks.estimators.training import fit_on_clicks, fit_on_lists
    from ltr.train.models import MLPScorer
    from ltr.train.trainer import TrainConfig

    ds, path, log = logged
    cfg = TrainConfig(epochs=3, batch_size=8, lr=0.01, seed=3, progress=False, metrics=("ndcg@10",))

    def make(_):
        return MLPScorer(ds.n_features, hidden=(8,))

    m1, i1 = fit_on_clicks(ds, ds, log, estimator, make, config=cfg, clip=0.05)
    lists, pairs, _ = stream_shown_lists(path, ds, batch_size=13, pairs=estimator == "pairwise-debias")
    m2, i2 = fit_on_lists(ds, ds, lists, estimator, make, pairs=pairs, config=cfg, clip=0.05)
    for a, b in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(i1["propensity"], i2["propensity"])
    assert i2["log_read"] == "streamed per shown list" and len(i2["propensity"]) == 6


def test_a_log_whose_sessions_go_back_is_refused(logged, tmp_path):
    ds, _, log = logged
    path = write_backwards_log(log, tmp_path / "backwards.parquet")  # the last session's rows first
    with pytest.raises(LtrError, match=r"backwards.parquet: row \d+: session .* non-decreasing order"):
        stream_shown_lists(path, ds, batch_size=100)


def test_fit_on_lists_refuses_other_estimators_and_missing_pairs(logged):
    from ltr.clicks.estimators.training import fit_on_lists

    ds, path, _ = logged
    lists, _, _ = stream_shown_lists(path, ds)
    with pytest.raises(LtrError, match="not 'ips'"):
        fit_on_lists(ds, ds, lists, "ips", lambda _: None)
    with pytest.raises(LtrError, match="needs the pair counts"):
        fit_on_lists(ds, ds, lists, "pairwise-debias", lambda _: None)


@pytest.mark.parametrize("batch_size", [7, 1_000_000])
@pytest.mark.parametrize("clip", [None, 0.3])
def test_click_dcg_from_streamed_cells_equals_the_whole_log(logged, batch_size, clip):
    from ltr.clicks.estimators.ips import click_dcg
    from ltr.clicks.estimators.ips_stream import click_dcg_from_cells, stream_click_cells
    from ltr.clicks.propensities.interventions import propensities_from_curve

    ds, path, log = logged
    scores = ds.features[:, 0] * -1.0 + ds.features[:, 1]  # a ranker other than the logger
    cells = stream_click_cells(path, ds, batch_size=batch_size, clip=clip)
    np.testing.assert_array_equal(cells.sessions, log.sessions_per_query(ds.n_queries))
    curve = 1.0 / np.arange(1, 7) ** 0.7
    for name in ("naive", "ips", "snips"):
        whole = click_dcg(log, scores, ds.query_offsets, estimator=name, k=5, clip=clip)
        got = click_dcg_from_cells(cells, scores, ds.query_offsets, estimator=name, k=5)
        np.testing.assert_allclose(got, whole, rtol=1e-12, equal_nan=True)
        assert np.isfinite(got).sum() >= ds.n_queries - 2
        whole = click_dcg(log, scores, ds.query_offsets, estimator=name, k=5, clip=clip,
                          propensity=propensities_from_curve(log, curve))
        got = click_dcg_from_cells(cells, scores, ds.query_offsets, estimator=name, k=5, curve=curve)
        np.testing.assert_allclose(got, whole, rtol=1e-12, equal_nan=True)


def test_clicks_evaluate_streams_the_parquet_log_and_reads_an_unsorted_one_whole(logged, tmp_path, capsys):
    import json

    from ltr.cli import main

    ds, path, log = logged
    data, scores = write_data_and_scores(ds, tmp_path)
    backwards = write_backwards_log(log, tmp_path / "backwards.parquet")
    results = []
    for log_path, rows in ((path, "11"), (backwards, "11"), (path, "1000000")):
        out = tmp_path / f"ev{len(results)}.json"
        assert main(["clicks", "evaluate", "--log", str(log_path), "--data", str(data), "--scores", str(scores),
                     "--k", "5", "--clip", "0.2", "--read-rows", rows, "--json", str(out)]) == 0
        results.append(json.loads(out.read_text()))
    assert capsys.readouterr().err.count("reading the log whole") == 1  # the unsorted log only
    for other in results[1:]:
        assert other.keys() == results[0].keys()
        assert other.pop("propensity_source") == results[0]["propensity_source"] == "logged (simulator's truth)"
        for key in other:
            assert other[key] == pytest.approx(results[0][key], rel=1e-12)
    assert results[0]["ips"] != results[0]["naive"]


def test_clicks_train_dla_streams_a_sorted_log_and_reads_an_unsorted_one_whole(logged, tmp_path, capsys):
    """The same seed on the same sessions: the streamed and the whole read train the same DLA model."""
    import json

    import torch

    from ltr.cli import main
    from ltr.train.models import load_model

    ds, path, log = logged
    data, _ = write_data_and_scores(ds, tmp_path)
    backwards = write_backwards_log(log, tmp_path / "backwards.parquet")
    models = []
    for i, log_path in enumerate((path, backwards)):
        out = tmp_path / f"m{i}"
        assert main(["clicks", "train", "--data", str(data), "--valid", str(data), "--log", str(log_path), "--out",
                     str(out), "--estimator", "dla", "--epochs", "2", "--hidden", "8", "--read-rows", "9"]) == 0
        models.append(load_model(out))
        info = json.loads((out / "clicks_training.json").read_text())
        assert info["n_sessions"] == log.n_sessions
        assert (info.get("log_read") == "streamed per shown list") == (i == 0)
    assert capsys.readouterr().err.count("reading the log whole") == 1
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("batch_size", [7, 1_000_000])
def test_streamed_click_sessions_equal_the_training_set_of_the_whole_log(logged, batch_size):
    """LightGBM's naive / ips / position-bias rows from the log read in batches: click_training_set's, row for row."""
    from ltr.clicks.estimators.ips import click_training_set
    from ltr.clicks.engines.session_stream import session_training_set, stream_click_sessions

    ds, path, log = logged
    curve = 1.0 / np.arange(1, 7) ** 0.7
    for weighting, kw, entry_p in (("none", {}, None), ("ips", {"clip": 0.2}, None),
                                   ("ips", {"clip": 0.05, "curve": curve}, curve[log.position - 1])):
        whole, position = click_training_set(ds, log, weighting=weighting, clip=kw.get("clip"), propensity=entry_p)
        sessions = stream_click_sessions(path, ds, weighting=weighting, batch_size=batch_size, **kw)
        train, streamed_position = session_training_set(ds, sessions)
        assert sessions.n_sessions == log.n_sessions and train.n_queries == whole.n_queries < log.n_sessions
        np.testing.assert_array_equal(train.query_offsets, whole.query_offsets)
        np.testing.assert_array_equal(train.labels, whole.labels)
        np.testing.assert_array_equal(streamed_position, position)
        gathered = np.concatenate([block for _, block in train.feature_blocks(13)])
        np.testing.assert_array_equal(gathered, whole.features)
        if weighting == "none":
            assert train.weights is None and whole.weights is None
        else:  # LightGBM holds weights as float32
            np.testing.assert_array_equal(train.weights, whole.weights.astype(np.float32))


@pytest.mark.parametrize("batch_size", [7, 1_000_000])
def test_xgboost_streamed_sessions_boost_the_booster_of_the_whole_log(logged, batch_size):
    """XGBoost's naive and pairwise-debias from the Parquet log read in batches (every session, each in shown order,
    binned through XGBoost's data iterator) equal fit_xgboost_clicks on the log in memory: trees, biases, counts."""
    pytest.importorskip("xgboost")
    from ltr.clicks.engines.xgboost import fit_xgboost_clicks, fit_xgboost_streamed_sessions

    ds, path, log = logged
    for unbiased in (False, True):
        whole, info_w = fit_xgboost_clicks(ds, log, unbiased=unbiased, rounds=6, seed=2, valid=ds, early_stopping_rounds=3)
        streamed, info_s = fit_xgboost_streamed_sessions(ds, path, batch_size=batch_size, unbiased=unbiased, rounds=6,
                                                         seed=2, valid=ds, early_stopping_rounds=3)
        assert streamed.save_raw("json") == whole.save_raw("json")
        assert info_s["log_read"] == "streamed per session" and info_s["n_groups"] == info_w["n_groups"] == log.n_sessions
        assert (info_s["t_plus"], info_s["t_minus"], info_s["best_iteration"]) == (
            info_w["t_plus"], info_w["t_minus"], info_w["best_iteration"])
        assert (np.array(info_s["t_plus"]) != 1.0).any() == unbiased  # naive leaves the biases at 1


def test_xgboost_streamed_sessions_paged_to_disk_boost_the_same_booster(logged, tmp_path):
    """With external_memory the binned sessions are an ExtMemQuantileDMatrix whose pages are files in a temporary
    folder made in the given one: the same trees and biases as the matrix in RAM, the cache's files counted in
    info, and the folder removed once training returns."""
    pytest.importorskip("xgboost")
    from ltr.clicks.engines.xgboost import fit_xgboost_streamed_sessions

    ds, path, _ = logged
    for unbiased in (False, True):
        kw = dict(batch_size=13, unbiased=unbiased, rounds=5, seed=2, valid=ds, early_stopping_rounds=3)
        in_ram, info_r = fit_xgboost_streamed_sessions(ds, path, **kw)
        paged, info_p = fit_xgboost_streamed_sessions(ds, path, external_memory=tmp_path, **kw)
        assert paged.save_raw("json") == in_ram.save_raw("json")
        assert (info_p["t_plus"], info_p["best_iteration"]) == (info_r["t_plus"], info_r["best_iteration"])
        assert info_r["external_memory"] is None
        cache = info_p["external_memory"]
        assert cache["matrix"] == "ExtMemQuantileDMatrix" and cache["cache_files"] >= 1 and cache["cache_bytes"] > 0
        assert list(tmp_path.iterdir()) == []


def test_xgboost_streamed_sessions_refuse_a_session_that_skips_a_position(logged, tmp_path, monkeypatch):
    """XGBoost reads a position from the place within a session: a Parquet log whose session shows positions 1 and 3
    is refused, naming the session by its place in the file (counted from 1), whatever the blocks of the check."""
    pytest.importorskip("xgboost")
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ltr.clicks.engines import xgboost as unbiased_xgboost
    from ltr.clicks.engines.xgboost import fit_xgboost_streamed_sessions

    ds, path, log = logged
    table = pq.read_table(path)
    session = table.column("session").to_numpy()
    target = int(session[np.flatnonzero(table.column("position").to_numpy() == 3)[0]])
    drop = pc.and_(pc.equal(table.column("session"), target), pc.equal(table.column("position"), 2))
    gap = tmp_path / "gap.parquet"
    pq.write_table(table.filter(pc.invert(drop)).replace_schema_metadata(table.schema.metadata), gap)
    ordinal = int(np.searchsorted(np.unique(session), target)) + 1  # the simulator's ids are 0, 1, 2, ...
    assert ordinal == target + 1
    for block in (1 << 20, 3):
        with monkeypatch.context() as patch:
            patch.setattr(unbiased_xgboost._check_streamed_places, "__defaults__", (block,))
            with pytest.raises(LtrError, match=rf"the log's session number {ordinal} \(in file order\) skips a position "
                                               r"\(it shows position 3 as its item 2\)"):
                fit_xgboost_streamed_sessions(ds, gap, batch_size=11, rounds=2)


def _lightgbm_trees(booster) -> str:
    return booster.model_to_string().split("end of trees")[0]


def _whole_and_saved(engine: str, ds, log, estimator: str, rounds: int):
    """The trees of ``estimator`` fitted on ``log`` in memory, and a reader of those a model folder holds."""
    if engine == "lightgbm":
        from ltr.clicks.engines.lightgbm import fit_lightgbm_clicks
        from ltr.gbdt.lightgbm import load_booster

        whole = fit_lightgbm_clicks(ds, ds, log, estimator, rounds=rounds, seed=0)[0]
        return _lightgbm_trees(whole), lambda out: _lightgbm_trees(load_booster(out)[0])
    import json

    from ltr.clicks.engines.xgboost import fit_xgboost_clicks

    whole = fit_xgboost_clicks(ds, log, unbiased=estimator == "pairwise-debias", rounds=rounds, seed=0, valid=ds,
                               early_stopping_rounds=50)[0]
    return json.loads(whole.save_raw("json").decode()), lambda out: json.loads((out / "xgboost.json").read_text())


@pytest.mark.parametrize("engine, estimators, read", [
    ("lightgbm", ("naive", "ips", "position-bias"), "streamed per session with a click"),
    ("xgboost", ("naive", "pairwise-debias"), "streamed per session"),
])
def test_session_estimators_stream_a_sorted_log_and_read_an_unsorted_one_whole(logged, tmp_path, capsys, engine,
                                                                                estimators, read):
    """ltr clicks train --engine lightgbm|xgboost on a Parquet log: the streamed sessions boost the booster of the
    log read whole, tree for tree; a log whose session ids go back is read whole, with a note."""
    pytest.importorskip(engine)
    import json

    from ltr.cli import main

    ds, path, log = logged
    data, _ = write_data_and_scores(ds, tmp_path)
    backwards = write_backwards_log(log, tmp_path / "backwards.parquet")
    for estimator in estimators:
        whole, saved = _whole_and_saved(engine, ds, log, estimator, 8)
        for log_path in (path, backwards):
            out = tmp_path / f"{estimator}_{log_path.stem}"
            assert main(["clicks", "train", "--engine", engine, "--estimator", estimator, "--data", str(data),
                         "--valid", str(data), "--log", str(log_path), "--out", str(out), "--rounds", "8",
                         "--read-rows", "9", "--quiet"]) == 0
            info = json.loads((out / "clicks_training.json").read_text())
            assert info["n_sessions"] == log.n_sessions
            assert (info.get("log_read") == read) == (log_path == path)
            if log_path == path:
                assert saved(out) == whole
    # the unsorted log, once per estimator
    assert capsys.readouterr().err.count("reading the log whole") == len(estimators)
