"""LightGBM on click sessions (``ltr clicks train --engine lightgbm``) and item weights in ``train_lightgbm``."""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import pytest

from ltr.cli import main
from ltr.clicks.simulate.click_models import simulate_clicks
from ltr.clicks.estimators.ips import click_training_set
from ltr.clicks.engines.lightgbm import fit_lightgbm_clicks
from ltr.data import save_svmlight
from ltr.data.synthetic import make_mslr_like
from ltr.base.errors import LtrError
from ltr.gbdt.engines import train_gbdt
from ltr.gbdt.lightgbm import DEFAULT_PARAMS, train_lightgbm


@pytest.fixture(scope="module")
def data():
    train = make_mslr_like(n_queries=60, n_features=5, mean_list_length=15, max_list_length=30, seed=1)
    valid = make_mslr_like(n_queries=20, n_features=5, mean_list_length=15, max_list_length=30, seed=2)
    log = simulate_clicks(train.labels, train.query_offsets, train.labels + np.random.default_rng(0).normal(size=train.n_items),
                          model="pbm", eta=1.0, top_k=8, sessions_per_query=20, seed=0)
    return train, valid, log


def _direct(train_set, rounds, **dataset_kwargs):
    """The same lambdarank as train_lightgbm's, called on LightGBM directly: the oracle."""
    params = {**DEFAULT_PARAMS, "seed": 0, "label_gain": [0.0, 1.0], "verbosity": -1}
    ds = lgb.Dataset(np.asarray(train_set.features), label=train_set.labels, group=np.diff(train_set.query_offsets),
                     params=params, **dataset_kwargs)
    return lgb.train(params, ds, num_boost_round=rounds)


def test_item_weights_reach_lightgbm(data):
    train, _, log = data
    weighted, _ = click_training_set(train, log, weighting="ips", clip=0.05)
    ours, _ = train_lightgbm(weighted, None, num_boost_round=5, early_stopping_rounds=None, seed=0)
    x = np.asarray(weighted.features)
    np.testing.assert_allclose(ours.predict(x), _direct(weighted, 5, weight=weighted.weights).predict(x), rtol=0, atol=1e-12)
    plain, _ = train_lightgbm(weighted.with_weights(None), None, num_boost_round=5, early_stopping_rounds=None, seed=0)
    assert not np.allclose(ours.predict(x), plain.predict(x))  # the weights changed the trees


def test_negative_weights_are_refused(data):
    train, _, log = data
    weighted, _ = click_training_set(train, log, weighting="ips", clip=0.05)
    with pytest.raises(LtrError, match="negative item weights"):
        train_lightgbm(weighted.with_weights(-weighted.weights), None, num_boost_round=2)


@pytest.mark.parametrize("engine", ["xgboost", "catboost"])
def test_engines_without_item_weights_refuse_them(data, engine):
    train, _, log = data
    weighted, _ = click_training_set(train, log, weighting="ips", clip=0.05)
    with pytest.raises(LtrError, match="per-item weights.*--engine lightgbm"):
        train_gbdt(engine, weighted, None, num_boost_round=2)


def test_position_bias_is_lightgbms_position_column(data):
    train, _, log = data
    booster, info = fit_lightgbm_clicks(train, None, log, "position-bias", rounds=6)
    sessions, position = click_training_set(train, log, weighting="none")
    x = np.asarray(train.features)
    np.testing.assert_allclose(booster.predict(x), _direct(sessions, 6, position=position).predict(x), rtol=0, atol=1e-12)
    naive, _ = fit_lightgbm_clicks(train, None, log, "naive", rounds=6)
    assert not np.allclose(booster.predict(x), naive.predict(x))
    assert info["propensity"] is None and "position biases" in info["propensity_source"]
    assert info["n_groups"] == sessions.n_queries


def test_ips_records_its_curve_and_refuses_one_elsewhere(data):
    train, _, log = data
    _, info = fit_lightgbm_clicks(train, None, log, "ips", rounds=3, clip=0.05)
    np.testing.assert_allclose(info["propensity"], 1.0 / np.arange(1, 9))  # the logged (true) θ_r
    assert "at most 20" in info["clip_rule"]
    curve = np.linspace(1.0, 0.3, 8)
    _, info = fit_lightgbm_clicks(train, None, log, "ips", rounds=3, curve=curve, curve_source="a test curve")
    np.testing.assert_allclose(info["propensity"], curve)
    assert info["propensity_source"] == "a test curve"
    with pytest.raises(LtrError, match="ips, policy-aware and doubly-robust only"):
        fit_lightgbm_clicks(train, None, log, "naive", curve=curve)
    with pytest.raises(LtrError, match="covers 3 positions"):
        fit_lightgbm_clicks(train, None, log, "ips", curve=curve[:3])


def test_cli_engine_lightgbm_writes_a_model_folder(data, tmp_path, capsys):
    train, valid, _ = data
    save_svmlight(train, tmp_path / "train.txt")
    save_svmlight(valid, tmp_path / "valid.txt")
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(tmp_path / "train.txt"), "--out", str(sim), "--top-k", "8",
                 "--sessions-per-query", "20", "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "m"
    assert main(["clicks", "train", "--engine", "lightgbm", "--estimator", "position-bias", "--data",
                 str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"), "--log", str(sim / "clicks.npz"),
                 "--out", str(out), "--rounds", "20", "--quiet"]) == 0
    printed = capsys.readouterr().out
    info = json.loads((out / "clicks_training.json").read_text())
    assert info["engine"] == "lightgbm" and info["estimator"] == "position-bias" and 1 <= info["best_iteration"] <= 20
    assert f"{info['best_iteration']} of at most 20 rounds" in printed
    assert json.loads((out / "model.json").read_text())["type"] == "lightgbm"
    # the folder scores data like any model folder
    assert main(["clicks", "evaluate", "--log", str(sim / "clicks.npz"), "--data", str(tmp_path / "train.txt"),
                 "--ranker", str(out)]) == 0
    # pairwise-debias by default: at most 1000 rounds, stopped early on --valid
    common = ["--data", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"), "--log", str(sim / "clicks.npz"),
              "--quiet"]
    capsys.readouterr()
    assert main(["clicks", "train", "--engine", "lightgbm", "--estimator", "pairwise-debias", "--out", str(tmp_path / "pd"),
                 *common]) == 0
    info = json.loads((tmp_path / "pd" / "clicks_training.json").read_text())
    assert info["num_boost_round"] == 1000 and 1 <= info["best_iteration"] < 1000 - 50
    assert f"(lightgbm, {info['best_iteration']} of at most 1000 rounds)" in capsys.readouterr().out
    # without --quiet, the rounds bar (stderr) notes LightGBM's validation NDCG@10 and the kept round
    assert main(["clicks", "train", "--engine", "lightgbm", "--estimator", "pairwise-debias", "--out", str(tmp_path / "pd2"),
                 *common[:-1]]) == 0
    bars = capsys.readouterr().err
    assert "boosting rounds" in bars and "valid ndcg@10 (LightGBM's)" in bars and f"at round {info['best_iteration']}" in bars
    # --rounds means nothing to the neural engine: refused, not ignored
    assert main(["clicks", "train", "--estimator", "naive", "--rounds", "5", "--out", str(tmp_path / "nn"), *common]) == 2
    assert "--rounds applies to --engine xgboost and lightgbm" in capsys.readouterr().err


def test_pairwise_debias_is_unbiased_lambdamart_on_the_shown_lists(data):
    from ltr.clicks.engines.lambdamart import fit_unbiased_lambdamart

    train, _, log = data
    booster, info = fit_lightgbm_clicks(train, None, log, "pairwise-debias", rounds=5, seed=2)
    direct = fit_unbiased_lambdamart(train, log, rounds=5, params={"learning_rate": 0.05}, seed=2)
    x = np.asarray(train.features)
    np.testing.assert_array_equal(booster.predict(x), direct.predict(x))
    np.testing.assert_array_equal(info["propensity"], direct.t_plus)
    assert info["propensity"][0] == 1.0 and info["best_iteration"] == 5 and booster.current_iteration() == 5


def test_pairwise_debias_stops_early_at_the_best_validation_round(data):
    """The kept round is the best validation NDCG@10 (recomputed by the toolkit) of an unstopped run's
    rounds up to the stop, with that run's trees and the position biases of that round."""
    import metrics
    from ltr.clicks.engines.lambdamart import fit_unbiased_lambdamart

    train, valid, log = data
    patience = 5
    full = fit_unbiased_lambdamart(train, log, rounds=80, params={"learning_rate": 0.1, "num_leaves": 3}, seed=1)
    stopped = fit_unbiased_lambdamart(train, log, rounds=80, params={"learning_rate": 0.1, "num_leaves": 3}, seed=1, valid=valid,
                                      early_stopping_rounds=patience)
    x = np.asarray(valid.features)
    def ndcg10(scores):
        ev = metrics.evaluate(scores, valid.labels, valid.query_offsets, ["ndcg@10"])
        return ev.mean[ev.names["ndcg@10"]]

    curve = [ndcg10(full.booster.predict(x, num_iteration=i)) for i in range(1, 81)]
    kept = len(stopped.history)
    assert 1 < kept < 80 - patience  # it stopped: the check below is about early stopping, not the last round
    best = max(curve[: kept + patience])  # no better round within the patience after the kept one
    assert curve[kept - 1] == best and max(curve[: kept - 1]) < best  # the first round that reached it
    np.testing.assert_array_equal(stopped.predict(x), full.booster.predict(x, num_iteration=kept))
    np.testing.assert_array_equal(stopped.t_plus, full.history[kept - 1][0])
    assert not np.array_equal(stopped.t_plus, full.t_plus)  # the biases of the kept round, not of the last


def test_pairwise_debias_streams_a_parquet_log_and_equals_the_log_in_memory(data, tmp_path, capsys):
    """On a Parquet log, --engine lightgbm's pairwise-debias reads the shown lists in record batches (a few
    rows each here) and trains the same booster as on the same log held whole (the .npz)."""
    train, valid, _ = data
    save_svmlight(train, tmp_path / "train.txt")
    save_svmlight(valid, tmp_path / "valid.txt")
    base = ["--data", str(tmp_path / "train.txt"), "--top-k", "8", "--sessions-per-query", "20", "--seed", "4", "--quiet"]
    assert main(["clicks", "simulate", "--out", str(tmp_path / "npz"), *base]) == 0
    assert main(["clicks", "simulate", "--out", str(tmp_path / "pq"), "--format", "parquet", *base]) == 0
    models = {}
    for name, log in (("whole", tmp_path / "npz" / "clicks.npz"), ("streamed", tmp_path / "pq" / "clicks.parquet")):
        out = tmp_path / f"m_{name}"
        assert main(["clicks", "train", "--engine", "lightgbm", "--estimator", "pairwise-debias", "--data",
                     str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"), "--log", str(log),
                     "--out", str(out), "--rounds", "30", "--read-rows", "37", "--quiet"]) == 0
        models[name] = (lgb.Booster(model_file=str(out / "model.txt")), json.loads((out / "clicks_training.json").read_text()))
    (whole, info_w), (streamed, info_s) = models["whole"], models["streamed"]
    assert info_s["log_read"] == "streamed per shown list" and "log_read" not in info_w
    assert info_s["n_sessions"] == info_w["n_sessions"] == 20 * train.n_queries
    np.testing.assert_array_equal(info_s["propensity"], info_w["propensity"])
    x = np.asarray(valid.features)
    np.testing.assert_array_equal(streamed.predict(x), whole.predict(x))


def test_a_large_session_matrix_is_announced_before_it_is_built(data, tmp_path, capsys, monkeypatch):
    """Above SESSION_MATRIX_NOTE_BYTES the session estimators say on stderr how many rows x features they
    hold (counted by hand here: the shown items of the sessions with a click); pairwise-debias says nothing."""
    from ltr.commands.clicks import train_gbdt as clicks_cli

    train, valid, log = data
    save_svmlight(train, tmp_path / "train.txt")
    save_svmlight(valid, tmp_path / "valid.txt")
    log.save(tmp_path / "clicks.npz")
    rows = sum(int((log.session == s).sum()) for s in np.unique(log.session[log.click > 0]))
    common = ["clicks", "train", "--engine", "lightgbm", "--data", str(tmp_path / "train.txt"), "--valid",
              str(tmp_path / "valid.txt"), "--log", str(tmp_path / "clicks.npz"), "--rounds", "3", "--quiet"]
    monkeypatch.setattr(clicks_cli, "SESSION_MATRIX_NOTE_BYTES", rows * train.n_features * 4 - 1)
    assert main([*common, "--estimator", "naive", "--out", str(tmp_path / "n")]) == 0
    assert f"{rows:,} rows x {train.n_features} features" in capsys.readouterr().err
    assert main([*common, "--estimator", "pairwise-debias", "--out", str(tmp_path / "p")]) == 0
    assert "rows x" not in capsys.readouterr().err
    monkeypatch.setattr(clicks_cli, "SESSION_MATRIX_NOTE_BYTES", rows * train.n_features * 4)
    assert main([*common, "--estimator", "ips", "--out", str(tmp_path / "i")]) == 0
    assert "rows x" not in capsys.readouterr().err  # at the threshold: no note
