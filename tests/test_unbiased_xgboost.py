"""Unbiased LambdaMART with XGBoost's lambdarank_unbiased on simulated PBM clicks (skipped without xgboost)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("xgboost")

from ltr.cli import main  # noqa: E402
from ltr.clicks.simulate.click_models import simulate_clicks  # noqa: E402
from ltr.clicks.engines.xgboost import fit_xgboost_clicks, session_groups  # noqa: E402
from ltr.data import RankingDataset, save_svmlight  # noqa: E402
from ltr.base.errors import LtrError  # noqa: E402


@pytest.fixture(scope="module")
def pbm():
    rng = np.random.default_rng(0)
    n_q, length = 150, 12
    offsets = np.arange(n_q + 1) * length
    labels = rng.integers(0, 5, n_q * length).astype(float)
    x = np.column_stack([labels + rng.normal(0, 1, n_q * length), rng.normal(size=(n_q * length, 2))]).astype(np.float32)
    ds = RankingDataset(x, labels, offsets, np.arange(n_q))
    log = simulate_clicks(labels, offsets, labels + rng.normal(0, 1.5, n_q * length), top_k=8, sessions_per_query=20,
                          seed=1, eta=1.0)
    return ds, log


def test_session_groups_put_each_session_in_shown_order():
    from ltr.clicks.logs.click_log import ClickLog

    # two sessions given out of order: rows must come back by (session, position)
    log = ClickLog(np.array([1, 0, 0, 1]), np.zeros(4, np.int64), np.array([5, 2, 3, 4]), np.array([2, 2, 1, 1]),
                   np.array([2, 2, 1, 1]), np.array([1, 0, 1, 0], np.int8), np.ones(4), np.zeros(2, np.int64),
                   np.zeros(2, np.int8), np.zeros(2, np.int64))
    rows, clicks, group = session_groups(log)
    assert rows.tolist() == [3, 2, 4, 5] and clicks.tolist() == [1, 0, 0, 1] and group.tolist() == [0, 0, 1, 1]
    gap = ClickLog(np.array([0, 0]), np.zeros(2, np.int64), np.array([0, 1]), np.array([1, 3]), np.array([1, 3]),
                   np.array([1, 0], np.int8), np.ones(2), np.zeros(1, np.int64), np.zeros(1, np.int8), np.zeros(1, np.int64))
    with pytest.raises(LtrError, match="skips a position"):
        session_groups(gap)


def test_learned_position_biases_fall_with_position_and_are_deterministic(pbm):
    ds, log = pbm
    booster, info = fit_xgboost_clicks(ds, log, rounds=60, seed=3)
    t_plus = np.array(info["t_plus"])
    assert len(t_plus) == 8 and t_plus[0] == 1.0
    # PBM with eta = 1: theta_r = 1 / r. The learned t+ must fall with the position ...
    assert (np.diff(t_plus[:5]) < 0).all() and t_plus[-1] < 0.3
    # ... and track 1 / r within a factor of two at every position.
    assert np.all(np.abs(np.log(t_plus * np.arange(1, 9))) < np.log(2.0))
    again, info2 = fit_xgboost_clicks(ds, log, rounds=60, seed=3)
    assert info2["t_plus"] == info["t_plus"] and info2["t_minus"] == info["t_minus"]
    np.testing.assert_array_equal(booster.predict(__import__("xgboost").DMatrix(ds.features)),
                                  again.predict(__import__("xgboost").DMatrix(ds.features)))
    naive = fit_xgboost_clicks(ds, log, rounds=5, seed=3, unbiased=False)[1]
    assert naive["params"]["lambdarank_unbiased"] is False
    assert fit_xgboost_clicks(ds, log, rounds=5, bias_norm=0.5)[1]["lambdarank_bias_norm"] == 0.5


def test_cli_engine_xgboost_records_the_biases(pbm, tmp_path, capsys):
    ds, _ = pbm
    data = tmp_path / "d.txt"
    save_svmlight(ds, data)
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(data), "--out", str(sim), "--top-k", "8",
                 "--sessions-per-query", "20", "--seed", "1", "--quiet"]) == 0
    out = tmp_path / "m"
    assert main(["clicks", "train", "--engine", "xgboost", "--estimator", "pairwise-debias", "--data", str(data),
                 "--valid", str(data), "--log", str(sim / "clicks.npz"), "--out", str(out), "--rounds", "30"]) == 0
    info = json.loads((out / "clicks_training.json").read_text())
    assert info["engine"] == "xgboost" and info["params"]["lambdarank_unbiased"] is True
    assert info["propensity"] == info["t_plus"] and info["t_plus"][0] == 1.0 and info["t_plus"][3] < info["t_plus"][1]
    assert json.loads((out / "model.json").read_text())["type"] == "xgboost"
    printed, bars = capsys.readouterr()
    assert "position biases t+" in printed and f"(xgboost, {info['best_iteration']} of at most 30 rounds)" in printed
    # the rounds bar (stderr) notes the toolkit's validation NDCG@10 and the best round so far
    assert "boosting rounds" in bars and f"at round {info['best_iteration']}" in bars and "valid ndcg@10 0." in bars
    assert info["early_stopping_rounds"] == 50 and 1 <= info["best_iteration"] <= info["rounds_run"] <= 30
    # The model folder ranks like any other.
    assert main(["clicks", "evaluate", "--log", str(sim / "clicks.npz"), "--data", str(data), "--ranker", str(out)]) == 0
    assert main(["clicks", "train", "--engine", "xgboost", "--estimator", "ips", "--data", str(data), "--valid",
                 str(data), "--log", str(sim / "clicks.npz"), "--out", str(tmp_path / "x")]) == 2
    assert "pairwise-debias" in capsys.readouterr().err


def test_early_stopping_keeps_the_best_validation_round_and_its_biases(pbm):
    """With a validation set, the kept round is the first with the best toolkit NDCG@10 among the rounds
    up to the stop; the booster and the position biases are those of an unstopped run at that round.
    Half-grade labels: XGBoost's own ndcg would refuse them, the toolkit's monitor judges the rounds."""
    import metrics
    import xgboost as xgb

    ds, log = pbm
    valid = RankingDataset(ds.features, ds.labels / 2, ds.query_offsets, ds.query_ids)
    params = {"eta": 0.5, "max_depth": 4}
    stopped, info = fit_xgboost_clicks(ds, log, rounds=200, seed=3, params=params, valid=valid, early_stopping_rounds=5)
    kept, run = info["best_iteration"], info["rounds_run"]
    # the unstopped run up to the stop: its first rounds are a longer run's (rounds do not look ahead)
    full, at_run = fit_xgboost_clicks(ds, log, rounds=run, seed=3, params=params)
    x = xgb.DMatrix(ds.features)

    def ndcg10(rounds):
        ev = metrics.evaluate(full.predict(x, output_margin=True, iteration_range=(0, rounds)), valid.labels,
                              valid.query_offsets, ["ndcg@10"])
        return ev.mean[ev.names["ndcg@10"]]

    assert 1 < kept < run == kept + 5 < 200  # it stopped five rounds after the best
    curve = [ndcg10(r) for r in range(1, run + 1)]
    assert curve[kept - 1] == max(curve) and max(curve[: kept - 1]) < curve[kept - 1]
    np.testing.assert_array_equal(stopped.predict(x), full.predict(x, iteration_range=(0, kept)))
    at_kept = fit_xgboost_clicks(ds, log, rounds=kept, seed=3, params=params)[1]
    assert info["t_plus"] == at_kept["t_plus"] and info["t_minus"] == at_kept["t_minus"]
    assert info["t_plus"] != at_run["t_plus"]
