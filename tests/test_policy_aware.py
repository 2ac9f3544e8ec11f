"""A stochastic (Plackett-Luce) logger in the simulator and the policy-aware estimator that learns from it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.cli import main
from ltr.clicks.simulate.click_models import attraction, simulate_click_chunks, simulate_clicks
from ltr.clicks.estimators.cells import cell_values
from ltr.clicks.logs.stream import aggregate_from_log, aggregate_log, write_log_stream
from ltr.clicks.simulate.logging_ranker import plackett_luce_ndcg
from ltr.clicks.estimators.policy_aware import policy_aware_dataset, policy_aware_labels
from ltr.clicks.estimators.unbiased import corrected_clicks, lists_dataset
from ltr.data import RankingDataset
from ltr.base.errors import LtrError


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    lengths = rng.integers(6, 15, 25)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    features = np.column_stack([labels + rng.normal(0, 1, offsets[-1]), rng.normal(size=(offsets[-1], 2))])
    ds = RankingDataset(features.astype(np.float32), labels, offsets, np.arange(len(lengths)))
    scores = labels + rng.normal(0, 1.5, offsets[-1])
    return ds, scores


def _pl_position_probabilities(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(item first) and P(item second) of a Plackett-Luce ranking with weights ``w``, by hand."""
    first = w / w.sum()
    second = np.array([sum(first[i] * w[d] / (w.sum() - w[i]) for i in range(len(w)) if i != d)
                       for d in range(len(w))])
    return first, second


def test_plackett_luce_logger_draws_positions_with_their_closed_form_probabilities():
    scores = np.array([0.0, 1.0, 2.0, 0.5])
    log = simulate_clicks(np.zeros(4), np.array([0, 4]), scores, top_k=2, sessions_per_query=40_000, seed=3,
                          logger_temperature=0.8)
    first, second = _pl_position_probabilities(np.exp(scores / 0.8))
    for position, expect in ((1, first), (2, second)):
        docs = log.doc[log.position == position]
        got = np.bincount(docs, minlength=4) / len(docs)
        # 40,000 draws: the standard error of each share is below 0.0025
        np.testing.assert_allclose(got, expect, atol=0.01)
    assert log.meta["logger_temperature"] == 0.8
    np.testing.assert_array_equal(log.logged_rank, log.position)  # a drawn ranking is the logged one


def test_zero_temperature_is_the_deterministic_logger_and_a_negative_one_is_refused(data):
    ds, scores = data
    base = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=5, sessions_per_query=3, seed=1)
    same = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=5, sessions_per_query=3, seed=1,
                           logger_temperature=0.0)
    np.testing.assert_array_equal(base.doc, same.doc)
    np.testing.assert_array_equal(base.click, same.click)
    drawn = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=5, sessions_per_query=3, seed=1,
                            logger_temperature=1.0)
    assert not np.array_equal(base.doc, drawn.doc)
    with pytest.raises(LtrError, match="logger_temperature"):
        simulate_clicks(ds.labels, ds.query_offsets, scores, logger_temperature=-1.0)


def test_policy_aware_labels_are_unbiased_where_per_position_ips_is_not(data):
    """Under a top-5 Plackett-Luce logger, the policy-aware label of every item estimates its attraction a(rel);
    per-position IPS (the streamed ips list of a query) estimates a(rel) * P(shown), far below for deep items."""
    ds, scores = data
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=5, sessions_per_query=6_000, seed=2,
                          logger_temperature=1.5)
    agg = aggregate_from_log(log, ds)
    rows, labels, weights = policy_aware_labels(agg, n_queries=ds.n_queries)
    assert len(rows) == ds.n_items  # every item reached the top 5 at least once
    a = attraction(ds.labels, max_label=4.0, eps=0.1)[rows]
    shown_share = np.bincount(log.doc, minlength=ds.n_items)[rows] / weights
    often = shown_share > 0.1
    assert np.abs(labels - a)[often].max() < 0.12
    assert abs(np.mean(labels - a)) < 0.01
    rare = shown_share < 0.2
    # per-position IPS (clicks / theta_r summed over the query's sessions, the streamed ips label of
    # aggregate_dataset) shrinks a rarely shown item toward 0; the policy-aware label does not
    ips_sums = np.bincount(agg.doc, weights=cell_values(agg, "ips", clip=0.01), minlength=ds.n_items)[rows] / weights
    assert np.mean(ips_sums[rare]) < 0.5 * np.mean(a[rare])
    assert np.mean(labels[rare]) == pytest.approx(np.mean(a[rare]), rel=0.15)


def test_policy_aware_is_ips_on_the_shown_items_of_a_deterministic_logger_and_zero_elsewhere(data):
    ds, scores = data
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=6, sessions_per_query=30, seed=4)
    pa, never_shown = policy_aware_dataset(ds, aggregate_from_log(log, ds))
    ips = lists_dataset(ds, log, corrected_clicks(log, "ips"))
    np.testing.assert_array_equal(pa.query_ids, ips.query_ids)
    np.testing.assert_array_equal(pa.features, ds.features)  # every item of every logged query, in data-set order
    assert never_shown == ds.n_items - 6 * ds.n_queries  # each list is longer than the top 6 shown
    shown = np.zeros(ds.n_items, dtype=bool)
    shown[log.doc] = True
    assert (pa.labels[~shown] == 0).all()
    for q in range(len(pa.query_ids)):  # on the shown items: the IPS list's labels and weights, in another order
        a, b = slice(*pa.query_offsets[q:q + 2]), slice(*ips.query_offsets[q:q + 2])
        keep = shown[a]
        order_a, order_b = np.lexsort(pa.features[a][keep].T), np.lexsort(ips.features[b].T)
        np.testing.assert_allclose(pa.labels[a][keep][order_a], ips.labels[b][order_b], rtol=1e-12)
        np.testing.assert_array_equal(pa.weights[a][keep], ips.weights[b])


def test_policy_aware_from_a_streamed_parquet_log_equals_the_log_in_memory(data, tmp_path):
    ds, scores = data
    opts = dict(top_k=5, sessions_per_query=50, seed=5, logger_temperature=1.0)
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, **opts)
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, **opts)
    write_log_stream(chunks, tmp_path / "c.parquet", meta)
    whole, _ = policy_aware_dataset(ds, aggregate_from_log(log, ds), clip=0.05)
    streamed, _ = policy_aware_dataset(ds, aggregate_log(tmp_path / "c.parquet", ds, batch_size=333), clip=0.05)
    np.testing.assert_array_equal(streamed.query_offsets, whole.query_offsets)
    np.testing.assert_array_equal(streamed.features, whole.features)
    np.testing.assert_allclose(streamed.labels, whole.labels, rtol=1e-12)
    # a curve by position replaces the logged propensities: theta = 1 everywhere makes the label the CTR
    ctr, _ = policy_aware_dataset(ds, aggregate_from_log(log, ds), curve=np.ones(5))
    shown = np.bincount(log.doc, minlength=ds.n_items)
    clicks = np.bincount(log.doc, weights=log.click, minlength=ds.n_items)
    np.testing.assert_allclose(ctr.labels, clicks / np.maximum(shown, 0.01 * 50), rtol=1e-12)


def test_plackett_luce_ndcg_falls_with_the_temperature(data):
    ds, scores = data
    values = [plackett_luce_ndcg(scores, ds, t, draws=30, seed=0) for t in (0.0, 0.5, 2.0, 50.0)]
    assert values[0] > values[1] > values[2] > values[3]
    random_order = plackett_luce_ndcg(np.zeros(ds.n_items), ds, 1.0, draws=30, seed=0)
    assert values[3] == pytest.approx(random_order, abs=0.03)  # a very hot logger shows a random order


def test_cli_simulates_a_stochastic_logger_and_trains_policy_aware(data, tmp_path, capsys):
    from ltr.data import save_svmlight

    ds, _ = data
    path = tmp_path / "d.txt"
    save_svmlight(ds, path)
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--sessions-per-query", "40",
                 "--top-k", "5", "--logger-temperature", "1", "--quiet"]) == 0
    assert "drawn by Plackett-Luce at temperature 1" in capsys.readouterr().out
    summary = json.loads((sim / "summary.json").read_text())
    assert summary["meta"]["logger_temperature"] == 1.0
    out = tmp_path / "m"
    assert main(["clicks", "train", "--data", str(path), "--valid", str(path), "--log", str(sim / "clicks.npz"),
                 "--estimator", "policy-aware", "--epochs", "2", "--out", str(out), "--quiet"]) == 0
    info = json.loads((out / "clicks_training.json").read_text())
    assert info["estimator"] == "policy-aware"
    np.testing.assert_allclose(info["propensity"], 1.0 / np.arange(1, 6))  # the logged PBM curve
    never = np.bincount(np.load(sim / "clicks.npz")["doc"], minlength=ds.n_items) == 0
    assert info["never_shown"] == int(never.sum())
    assert f"policy-aware: {int(never.sum())} items of the logged queries were never shown" in capsys.readouterr().out
    # another de-biasing estimator on this log: a note that it does not correct for the items' shown shares
    assert main(["clicks", "train", "--data", str(path), "--valid", str(path), "--log", str(sim / "clicks.npz"),
                 "--estimator", "ips", "--epochs", "1", "--out", str(tmp_path / "i"), "--quiet"]) == 0
    assert "--estimator ips corrects the position bias of the sessions that showed it" in capsys.readouterr().err
    assert json.loads((tmp_path / "i" / "clicks_training.json").read_text())["logger_temperature"] == 1.0


@pytest.mark.parametrize("engine", ["lightgbm", "xgboost"])
def test_cli_trains_policy_aware_gbdt_alike_from_the_log_in_memory_and_streamed(data, tmp_path, capsys, engine):
    """--engine lightgbm|xgboost --estimator policy-aware: the labels as their own gain, the same booster whether the
    log is read whole (npz) or its per-cell sums are streamed from Parquet in record batches."""
    from ltr.data import save_svmlight
    from ltr.gbdt.engines import load_gbdt, predict_gbdt

    if engine == "xgboost":
        pytest.importorskip("xgboost")
    ds, scores = data
    path = tmp_path / "d.txt"
    save_svmlight(ds, path)
    opts = dict(top_k=5, sessions_per_query=300, seed=8, logger_temperature=1.0)
    simulate_clicks(ds.labels, ds.query_offsets, scores, **opts).save(tmp_path / "c.npz")
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, **opts)
    write_log_stream(chunks, tmp_path / "c.parquet", meta)
    preds = {}
    for name, log, extra in (("whole", "c.npz", []), ("streamed", "c.parquet", ["--read-rows", "777"])):
        out = tmp_path / name
        assert main(["clicks", "train", "--data", str(path), "--valid", str(path), "--log", str(tmp_path / log),
                     "--estimator", "policy-aware", "--engine", engine, "--rounds", "20", "--out", str(out),
                     "--quiet", *extra]) == 0
        info = json.loads((out / "clicks_training.json").read_text())
        assert info["engine"] == engine and info["estimator"] == "policy-aware" and info["n_groups"] == ds.n_queries
        assert info["log_read"].startswith("streamed") == (name == "streamed")
        if engine == "xgboost":  # each label its own gain, so XGBoost takes the real-valued labels
            assert info["params"]["ndcg_exp_gain"] is False
        preds[name] = predict_gbdt(engine, load_gbdt(out, engine)[0], ds.features)
    printed = capsys.readouterr().out
    assert f"policy-aware ({engine}, " in printed and "items of the logged queries were never shown" in printed
    np.testing.assert_allclose(preds["streamed"], preds["whole"], rtol=1e-9)
    # --propensity randomized: the curve estimated from the log's randomized sessions replaces the logged one
    simulate_clicks(ds.labels, ds.query_offsets, scores, randomize_fraction=0.3, **opts).save(tmp_path / "r.npz")
    assert main(["clicks", "train", "--data", str(path), "--valid", str(path), "--log", str(tmp_path / "r.npz"),
                 "--estimator", "policy-aware", "--engine", engine, "--rounds", "5", "--propensity", "randomized",
                 "--out", str(tmp_path / "rand"), "--quiet"]) == 0
    info = json.loads((tmp_path / "rand" / "clicks_training.json").read_text())
    assert info["propensity_source"] == "estimated from randomized traffic"
    np.testing.assert_allclose(info["propensity"], 1.0 / np.arange(1, 6), rtol=0.3)  # 2,250 randomized sessions


def test_policy_aware_click_dcg_finds_the_truth_of_a_stochastic_log_where_ips_does_not(data, tmp_path):
    from ltr.clicks.estimators.ips import click_dcg, expected_click_dcg
    from ltr.clicks.estimators.ips_stream import click_dcg_from_cells, stream_click_cells

    ds, scores = data
    new = ds.labels + np.random.default_rng(0).normal(0, 1, ds.n_items)  # the ranker judged on the log
    a = attraction(ds.labels, max_label=4.0, eps=0.1)
    fixed = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=5, sessions_per_query=200, seed=6)
    np.testing.assert_allclose(click_dcg(fixed, new, ds.query_offsets, estimator="policy-aware", k=5),
                               click_dcg(fixed, new, ds.query_offsets, estimator="ips", k=5), rtol=1e-12)
    opts = dict(top_k=5, sessions_per_query=4_000, seed=6, logger_temperature=1.5)
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, **opts)
    truth = expected_click_dcg(new, a, ds.query_offsets, k=5).mean()
    pa = click_dcg(log, new, ds.query_offsets, estimator="policy-aware", k=5)
    ips = click_dcg(log, new, ds.query_offsets, estimator="ips", k=5).mean()
    assert pa.mean() == pytest.approx(truth, rel=0.03)
    assert ips < 0.8 * truth  # short by the sessions that did not show each item
    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, **opts)
    write_log_stream(chunks, tmp_path / "e.parquet", meta)
    cells = stream_click_cells(tmp_path / "e.parquet", ds, batch_size=1_000)
    np.testing.assert_allclose(click_dcg_from_cells(cells, new, ds.query_offsets, estimator="policy-aware", k=5), pa,
                               rtol=1e-10)
    curve = 1.0 / np.arange(1, 6)  # the PBM truth as a curve gives the same numbers as the logged propensities
    np.testing.assert_allclose(click_dcg_from_cells(cells, new, ds.query_offsets, estimator="policy-aware", k=5,
                                                    curve=curve), pa, rtol=1e-10)
