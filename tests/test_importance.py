"""Feature importance: permutation drops by hand, LightGBM's gain finds the informative feature, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import metrics
from ltr.cli import main
from ltr.data import RankingDataset, save_svmlight
from ltr.gbdt.lightgbm import train_lightgbm
from ltr.models.importance import booster_importance, feature_names_of, permutation_importance
from ltr.train.models import LinearScorer, save_model

WEIGHTS = np.array([1.0, -0.5, 0.4, 0.0, 0.2])


def make_ds(n_queries, seed, names=None):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 16, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], 5)).astype(np.float32)
    y = np.clip(np.round(x @ WEIGHTS + 1 + 0.4 * rng.normal(size=len(x))), 0, 3)
    return RankingDataset(x, y, offsets, np.arange(n_queries), meta={} if names is None else {"feature_names": names})


def first_column_scorer(x):
    return np.asarray(x[:, 0], dtype=np.float64)


def test_permutation_drop_by_hand():
    ds = make_ds(40, 0)
    imp = permutation_importance(first_column_scorer, ds, n_repeats=1, seed=7, n_resamples=500)
    # column 0 shuffled once with the generator's first permutation: the drop, query by query
    base = metrics.ndcg(ds.features[:, 0], ds.labels, ds.query_offsets, k=10)
    perm = np.random.default_rng(7).permutation(ds.n_items)
    shuffled = metrics.ndcg(ds.features[perm, 0], ds.labels, ds.query_offsets, k=10)
    assert imp["importance"][0] == pytest.approx(np.nanmean(base - shuffled), abs=1e-12)
    assert imp["low"][0] < imp["importance"][0] < imp["high"][0] and imp["low"][0] > 0
    # the scorer never reads the other columns: their drops are exactly 0, with a zero-width interval
    assert imp["importance"][1:] == [0.0] * 4 and imp["low"][1:] == imp["high"][1:] == [0.0] * 4
    assert imp["base"] == pytest.approx(np.nanmean(base)) and imp["n_queries"] == int(np.sum(~np.isnan(base)))
    assert imp["metric"].startswith("ndcg@10[") and imp["feature"] == ["f1", "f2", "f3", "f4", "f5"]
    # the data set is left as it was
    assert np.array_equal(ds.features, make_ds(40, 0).features)


def test_lightgbm_gain_ranks_the_informative_feature_first_and_keeps_names():
    names = ["bm25", "age", "clicks", "noise", "length"]
    train, valid = make_ds(60, 1, names), make_ds(25, 2, names)
    booster, info = train_lightgbm(train, valid, {"num_leaves": 7, "min_data_in_leaf": 5, "num_threads": 1}, num_boost_round=30)
    imp = info["importance"]
    assert imp["feature"] == names == booster.feature_name()
    assert imp["iteration"] == info["best_iteration"]
    # |weight| 1.0 on bm25, 0 on noise: bm25 carries the most gain, noise the least of the two
    assert int(np.argmax(imp["gain"])) == 0 and imp["gain"][3] < imp["gain"][0] / 5
    assert imp == booster_importance(booster, names, info["best_iteration"])
    assert feature_names_of(train) == names and feature_names_of(make_ds(3, 0)) == ["f1", "f2", "f3", "f4", "f5"]


def test_importance_command_on_a_model_folder(tmp_path, capsys):
    ds = make_ds(30, 3)
    save_svmlight(ds, tmp_path / "valid.txt")
    model = LinearScorer(5)
    with torch.no_grad():
        model.linear.weight.copy_(torch.from_numpy(WEIGHTS[None, :]).float())
        model.linear.bias.zero_()
    save_model(model, tmp_path / "m")
    out = tmp_path / "imp"
    assert main(["importance", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "valid.txt"), "--repeats", "2",
                 "--top", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| 1 | f1 |" in text and "| 4 |" not in text
    saved = json.loads((out / "permutation_importance.json").read_text())
    assert saved["importance"][3] == 0.0 and max(saved["importance"]) == saved["importance"][0]
    assert (out / "permutation_importance.png").stat().st_size > 1000
    assert main(["importance", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "valid.txt"), "--repeats", "2",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["importance"] == saved["importance"]  # the same shuffles: same numbers
    assert main(["importance", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "valid.txt"), "--metric", "auc"]) == 2
