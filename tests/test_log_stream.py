"""Click logs larger than memory: chunked simulation, batched aggregation, training from the aggregate."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.logs.click_log import ClickLog, concat_logs
from ltr.clicks.simulate.click_models import simulate_click_chunks, simulate_clicks
from ltr.clicks.estimators.cells import aggregate_dataset, cell_values
from ltr.clicks.logs.stream import aggregate_from_log, aggregate_log, write_log_stream
from ltr.clicks.logs.table import read_log_parquet
from ltr.data import RankingDataset
from ltr.base.errors import LtrError

OPTS = dict(model="pbm", top_k=6, sessions_per_query=40, seed=9, eta=1.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    lengths = rng.integers(4, 12, 30)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    features = np.column_stack([labels + rng.normal(0, 1, offsets[-1]), rng.normal(size=(offsets[-1], 2))])
    ds = RankingDataset(features, labels, offsets, np.arange(len(lengths)) + 100)
    scores = labels + rng.normal(0, 1, offsets[-1])
    return ds, scores


def _same(a: ClickLog, b: ClickLog) -> None:
    for name in ClickLog._ENTRY + ClickLog._SESSION:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("extra", [{}, {"randomize_fraction": 0.3, "swap_fraction": 0.2, "model": "cascade"}])
def test_chunks_with_the_default_size_are_the_one_shot_log(data, extra, monkeypatch):
    import ltr.clicks.simulate.click_models as cm

    ds, scores = data
    # a small chunk so that the log takes many chunks (both paths read the same constant)
    monkeypatch.setattr(cm, "_CHUNK_CELLS", 6 * 37)
    opts = {**OPTS, **extra}
    one = simulate_clicks(ds.labels, ds.query_offsets, scores, **opts)
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, **opts)
    parts = list(chunks)
    assert len(parts) == -(-one.n_sessions // 37) and [s for s, _ in parts][:3] == [0, 37, 74]
    _same(concat_logs([lg for _, lg in parts], meta), one)
    assert meta == one.meta


def test_other_chunk_sizes_are_deterministic_and_aggregate_alike(data):
    ds, scores = data

    def chunked(size, **extra):
        return concat_logs([lg for _, lg in simulate_click_chunks(ds.labels, ds.query_offsets, scores,
                                                                  chunk_sessions=size, **{**OPTS, **extra})[1]])

    # PBM without interventions draws one uniform per cell in session order: any chunk size, one log.
    _same(chunked(50), chunked(333))
    _same(chunked(50), simulate_clicks(ds.labels, ds.query_offsets, scores, **OPTS))
    # With randomized sessions the order keys interleave with the click draws: another, repeatable draw.
    logs = [chunked(c, randomize_fraction=0.5) for c in (50, 50, 333)]
    _same(logs[0], logs[1])
    assert not np.array_equal(logs[0].click, logs[2].click)
    np.testing.assert_array_equal(logs[0].session_mode, logs[2].session_mode)
    # Same impressions per (row, position) of the production sessions; click rates within sampling noise.
    a, b = (aggregate_from_log(lg, ds, modes=(0,)) for lg in (logs[0], logs[2]))
    np.testing.assert_array_equal(a.n, b.n)
    ca, na = a.ctr_by_position()
    cb, nb = b.ctr_by_position()
    assert np.abs(ca / na - cb / nb).max() < 0.05


def test_stream_file_reads_back_as_the_log_and_aggregates_alike_in_any_batch(data, tmp_path):
    ds, scores = data
    opts = {**OPTS, "randomize_fraction": 0.2, "model": "dbn"}
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, **opts)
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, chunk_sessions=97, **opts)
    write_log_stream(chunks, tmp_path / "c.parquet", meta)
    back = read_log_parquet(tmp_path / "c.parquet")
    expect = concat_logs([lg for _, lg in simulate_click_chunks(ds.labels, ds.query_offsets, scores,
                                                                chunk_sessions=97, **opts)[1]])
    _same(back, expect)
    assert back.meta == log.meta == meta
    # The session modes are one stream whatever the chunks: the same as the one-shot log's.
    np.testing.assert_array_equal(expect.session_mode, log.session_mode)
    whole = aggregate_from_log(expect, ds)
    for batch in (1_000, 10**9, 7):
        agg = aggregate_log(tmp_path / "c.parquet", ds, batch_size=batch)
        for name in ("doc", "query", "position", "n", "clicks"):
            np.testing.assert_array_equal(getattr(agg, name), getattr(whole, name), err_msg=name)
        np.testing.assert_allclose(agg.ips, whole.ips, rtol=1e-12)  # float sums in another order
        assert agg.n_entries == expect.n_entries and agg.n_sessions == expect.n_sessions
    assert aggregate_log(tmp_path / "c.parquet", ds, batch_size=1_000).n_batches == -(-expect.n_entries // 1_000)
    # Production sessions only, as regression EM reads them.
    prod = aggregate_log(tmp_path / "c.parquet", ds, batch_size=1_000, modes=(0,))
    assert prod.n_sessions == int((expect.session_mode == 0).sum())
    assert prod.n.sum() == int((expect.session_mode[expect.session] == 0).sum())


@pytest.mark.parametrize("estimator, model", [("naive", "pbm"), ("ips", "pbm"), ("ips", "cascade"), ("affine", "trust")])
def test_aggregate_lists_equal_the_shown_lists_of_a_one_list_per_query_log(data, estimator, model):
    from ltr.clicks.estimators.unbiased import corrected_clicks, lists_dataset, trust_parameters

    ds, scores = data
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, **{**OPTS, "model": model})
    affine = trust_parameters(log) if estimator == "affine" else None
    ref = lists_dataset(ds, log, corrected_clicks(log, estimator, clip=0.05, affine=affine))
    agg = aggregate_from_log(log, ds, clip=0.05)
    got = aggregate_dataset(ds, agg, cell_values(agg, estimator, clip=0.05, affine=affine))
    np.testing.assert_array_equal(got.query_offsets, ref.query_offsets)
    np.testing.assert_array_equal(got.query_ids, ref.query_ids)
    np.testing.assert_array_equal(got.features, ref.features)
    np.testing.assert_array_equal(got.weights, ref.weights)
    np.testing.assert_allclose(got.labels, ref.labels, rtol=1e-12, atol=1e-15)
    assert ref.labels.max() > 0


def test_training_from_the_streamed_aggregate_equals_training_from_the_log(data, tmp_path):
    import torch

    from ltr.clicks.estimators.training import fit_on_aggregate, fit_on_clicks
    from ltr.train.models import LinearScorer
    from ltr.train.trainer import TrainConfig

    ds, scores = data
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, chunk_sessions=111, **OPTS)
    write_log_stream(chunks, tmp_path / "c.parquet", meta)
    log = read_log_parquet(tmp_path / "c.parquet")
    cfg = TrainConfig(epochs=3, batch_size=8, lr=0.01, seed=3, progress=False, metrics=("ndcg@10",))

    def make(_):
        torch.manual_seed(0)
        return LinearScorer(ds.n_features)

    for est in ("ips", "rem"):
        m1, i1 = fit_on_clicks(ds, ds, log, est, make, config=cfg, clip=0.05)
        agg = aggregate_log(tmp_path / "c.parquet", ds, batch_size=1_000, clip=0.05)
        m2, i2 = fit_on_aggregate(ds, ds, agg, est, make, config=cfg, clip=0.05)
        x = torch.as_tensor(ds.features[:50], dtype=torch.float32)
        with torch.no_grad():
            np.testing.assert_allclose(m2(x).numpy(), m1(x).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(i2["propensity"], i1["propensity"], rtol=1e-9)
        assert i1["best_epoch"] == i2["best_epoch"]
    assert i2["propensity"][1] < i2["propensity"][0] == 1.0  # regression EM's curve falls after position 1


def test_estimators_that_need_sessions_refuse_the_aggregate(data):
    from ltr.clicks.estimators.training import fit_on_aggregate

    ds, scores = data
    agg = aggregate_from_log(simulate_clicks(ds.labels, ds.query_offsets, scores, **OPTS), ds)
    with pytest.raises(LtrError, match="needs the sessions"):
        fit_on_aggregate(ds, ds, agg, "dla", lambda _: None)
