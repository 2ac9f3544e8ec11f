"""LightGBM lambdarank baseline: its own reported NDCG equals the project's under the lightgbm preset."""

from __future__ import annotations

import numpy as np
import pytest

import metrics
from ltr.data import RankingDataset
from ltr.base.errors import LtrError
from ltr.gbdt.lightgbm import (
    label_table,
    load_booster,
    predict_booster,
    save_booster,
    train_lightgbm,
)

F = 5
SMALL = {"num_leaves": 7, "min_data_in_leaf": 5, "num_threads": 1, "learning_rate": 0.1}


def make_ds(n_queries, seed, labels=None):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 16, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], F))
    y = np.clip(np.round(x @ np.array([1.0, -0.5, 0.4, 0.0, 0.2]) + 1 + 0.4 * rng.normal(size=len(x))), 0, 3)
    if labels is not None:
        y = labels(y, rng)
    return RankingDataset(x, y, offsets, np.arange(n_queries))


def lightgbm_matches_project(booster, info, valid, eval_at):
    it = info["best_iteration"]
    scores = predict_booster(booster, valid.features, num_iteration=it)
    ours = metrics.evaluate(scores, valid.labels, valid.query_offsets, [f"ndcg@{k}" for k in eval_at], preset="lightgbm")
    for k in eval_at:
        theirs = info["evals_result"]["valid"][f"ndcg@{k}"][it - 1]
        assert ours.mean[ours.names[f"ndcg@{k}"]] == pytest.approx(theirs, abs=1e-6), k
    return ours


def test_lightgbm_ndcg_equals_project_metric():
    train, valid = make_ds(60, 0), make_ds(25, 1)
    booster, info = train_lightgbm(train, valid, SMALL, num_boost_round=40, early_stopping_rounds=10, seed=3)
    assert 1 <= info["best_iteration"] <= 40
    assert info["label_gain"] == [0.0, 1.0, 3.0, 7.0] and info["label_values"] is None
    # early stopping watches ndcg@10: the best iteration is the first maximum of its curve
    curve = info["evals_result"]["valid"]["ndcg@10"]
    assert info["best_iteration"] == 1 + int(np.argmax(curve))
    assert len(curve) <= info["best_iteration"] + 10
    ours = lightgbm_matches_project(booster, info, valid, (1, 3, 5, 10))
    # and the model ranks: far above a constant scorer (which keeps file order)
    flat = metrics.evaluate(np.zeros(valid.n_items), valid.labels, valid.query_offsets, ["ndcg@10"], preset="lightgbm")
    assert ours.mean[ours.names["ndcg@10"]] > flat.mean[flat.names["ndcg@10"]] + 0.1


def test_labels_31_and_above_use_explicit_gains():
    # LightGBM's default label_gain stops at 30; ours is built from the metric's gain up to max label
    spread = lambda y, rng: y * 12  # labels 0, 12, 24, 36
    train, valid = make_ds(40, 2, spread), make_ds(20, 3, spread)
    booster, info = train_lightgbm(train, valid, SMALL, num_boost_round=15, early_stopping_rounds=None)
    assert len(info["label_gain"]) == 37 and info["label_gain"][36] == 2.0**36 - 1
    lightgbm_matches_project(booster, info, valid, (1, 3, 5, 10))


def test_non_integer_labels_mapped_with_their_gains():
    half = lambda y, rng: y * 0.75  # labels 0, 0.75, 1.5, 2.25
    train, valid = make_ds(40, 4, half), make_ds(20, 5, half)
    booster, info = train_lightgbm(train, valid, SMALL, num_boost_round=15, early_stopping_rounds=None)
    assert info["label_values"] == [0.0, 0.75, 1.5, 2.25]
    np.testing.assert_allclose(info["label_gain"], 2.0 ** np.array([0.0, 0.75, 1.5, 2.25]) - 1)
    # LightGBM sees indices 0..3 with these gains; its NDCG equals ours on the ORIGINAL labels
    lightgbm_matches_project(booster, info, valid, (1, 3, 5, 10))


def test_a_training_gain_of_its_own_keeps_the_validation_grades_gain():
    """train_gain="linear" (policy-aware click labels): the training values keep their value as gain, the validation
    grades their 2^rel - 1, each under codes of its own, so LightGBM's early-stopping NDCG is the project's."""
    rates = lambda y, rng: np.round(y * rng.uniform(0.05, 0.3, len(y)), 4)  # click-rate-like values in [0, 0.9]
    train, valid = make_ds(40, 6, rates), make_ds(20, 7)
    booster, info = train_lightgbm(train, valid, SMALL, train_gain="linear", num_boost_round=15, early_stopping_rounds=None)
    values = np.unique(train.labels)
    m = len(values)
    assert info["label_values"][:m] == values.tolist() and info["label_values"][m:] == [0.0, 1.0, 2.0, 3.0]
    np.testing.assert_allclose(info["label_gain"][:m], values)
    assert info["label_gain"][m:] == [0.0, 1.0, 3.0, 7.0]
    lightgbm_matches_project(booster, info, valid, (1, 3, 5, 10))
    # the gradients read the training gains: the same trees as gain="linear" for both sets, others than exp2
    same, _ = train_lightgbm(train, None, SMALL, gain="linear", num_boost_round=15, early_stopping_rounds=None)
    exp2, _ = train_lightgbm(train, None, SMALL, gain="exp2", num_boost_round=15, early_stopping_rounds=None)
    ours = predict_booster(booster, valid.features, num_iteration=15)
    np.testing.assert_allclose(ours, predict_booster(same, valid.features), rtol=1e-12)
    assert np.abs(ours - predict_booster(exp2, valid.features)).max() > 1e-3


def test_label_table_rules():
    codes, gains, values = label_table(np.array([2.0, 0.0, 1.0]), "linear")
    assert codes.tolist() == [2, 0, 1] and gains == [0.0, 1.0, 2.0] and values is None
    with pytest.raises(LtrError, match=r"row 1 has label -1.0"):
        label_table(np.array([0.0, -1.0, 2.0]))
    with pytest.raises(LtrError, match="not finite"):
        label_table(np.array([0.0, 1100.0]))


def test_refusals():
    train, valid = make_ds(10, 6), make_ds(5, 7)
    with pytest.raises(LtrError, match="label_gain"):
        train_lightgbm(train, valid, {"label_gain": [0, 1, 3, 7]})
    with pytest.raises(LtrError, match="one entry per training row"):
        train_lightgbm(train, valid, SMALL, position=np.zeros(3, dtype=int))
    with pytest.raises(LtrError, match="non-negative integers"):
        train_lightgbm(train, valid, SMALL, position=np.full(train.n_items, 0.5))


def test_position_bias_correction_is_used():
    train, valid = make_ds(40, 8), make_ds(15, 9)
    position = np.concatenate([np.arange(n) for n in train.query_lengths]).astype(np.int64)
    plain, _ = train_lightgbm(train, valid, SMALL, num_boost_round=10, early_stopping_rounds=None)
    biased, info = train_lightgbm(train, valid, SMALL, num_boost_round=10, early_stopping_rounds=None, position=position)
    # LightGBM fits position biases alongside the trees, so the learned scores differ
    assert not np.allclose(predict_booster(plain, valid.features), predict_booster(biased, valid.features))


def test_deterministic_and_save_load(tmp_path):
    train, valid = make_ds(30, 10), make_ds(10, 11)
    b1, i1 = train_lightgbm(train, valid, {**SMALL, "bagging_fraction": 0.7, "bagging_freq": 1}, num_boost_round=20, seed=4)
    b2, _ = train_lightgbm(train, valid, {**SMALL, "bagging_fraction": 0.7, "bagging_freq": 1}, num_boost_round=20, seed=4)
    s1 = predict_booster(b1, valid.features)
    np.testing.assert_array_equal(s1, predict_booster(b2, valid.features))
    save_booster(b1, tmp_path, n_features=F, best_iteration=i1["best_iteration"])
    loaded, meta = load_booster(tmp_path)
    assert meta["n_features"] == F
    np.testing.assert_allclose(predict_booster(loaded, valid.features), s1, rtol=0, atol=1e-12)
