"""Unbiased LambdaMART with XGBoost's lambdarank_unbiased on simulated PBM clicks (skipped without xgboost)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("xgboost")

from ltr.cli import main  # noqa: E402
from ltr.clicks.click_models import simulate_clicks  # noqa: E402
from ltr.clicks.unbiased_xgboost import fit_xgboost_clicks, session_groups  # noqa: E402
from ltr.data import RankingDataset, save_svmlight  # noqa: E402
from ltr.errors import LtrError  # noqa: E402


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
    from ltr.clicks.click_models import ClickLog

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
    assert "position biases t+" in capsys.readouterr().out
    # The model folder ranks like any other.
    assert main(["clicks", "evaluate", "--log", str(sim / "clicks.npz"), "--data", str(data), "--ranker", str(out)]) == 0
    assert main(["clicks", "train", "--engine", "xgboost", "--estimator", "ips", "--data", str(data), "--valid",
                 str(data), "--log", str(sim / "clicks.npz"), "--out", str(tmp_path / "x")]) == 2
    assert "pairwise-debias" in capsys.readouterr().err
