"""Inverse-propensity weights reach the losses, the trainer and LightGBM's position option."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses
from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
from ltr.clicks.estimators.ips import click_training_set, inverse_propensity_weights
from ltr.data import RankingDataset


def _one_list(weight_a: float):
    """Scores, labels (clicks), mask and weights for a list with clicked items A (0) and B (2)."""
    scores = torch.tensor([[0.3, 1.2, -0.4, 0.8, 0.1]], requires_grad=True)
    labels = torch.tensor([[1.0, 0.0, 1.0, 0.0, 0.0]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    weights = torch.tensor([[weight_a, 1.0, 2.5, 1.0, 1.0]])
    return scores, labels, mask, weights


@pytest.mark.parametrize("name", ["ranknet", "lambdarank"])
def test_gradient_of_a_clicked_item_scales_with_its_weight(name):
    loss = losses.get_loss(name, reduction="sum")
    grads = {}
    for c in (0.0, 1.0, 3.0):
        s, y, m, w = _one_list(c)
        loss(s, y, m, weights=w).backward()
        grads[c] = s.grad.detach().clone()[0].double().numpy()
    # A (index 0) is only ever the higher-labelled item of its pairs, so d loss / d s_A = w_A * (...).
    assert abs(grads[1.0][0]) > 1e-3
    assert grads[3.0][0] == pytest.approx(3.0 * grads[1.0][0], rel=1e-6)
    assert grads[0.0][0] == 0.0  # zero weight removes A's pairs
    # B's gradient does not depend on A's weight (A and B are tied, so they form no pair).
    assert grads[3.0][2] == pytest.approx(grads[1.0][2], rel=1e-6)


def test_zero_weight_equals_removing_the_item_for_ranknet():
    loss = losses.get_loss("ranknet", reduction="sum")
    s, y, m, w = _one_list(0.0)
    weighted = loss(s, y, m, weights=w).detach()
    m_without_a = m.clone()
    m_without_a[0, 0] = False
    w_no_a = w.clone()
    assert float(weighted) == pytest.approx(float(loss(s, y, m_without_a, weights=w_no_a).detach()), rel=1e-6)


@pytest.fixture(scope="module")
def clicks_setup():
    rng = np.random.default_rng(0)
    n_q, n_f = 60, 6
    lengths = rng.integers(6, 14, n_q)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    x = rng.normal(size=(offsets[-1], n_f)).astype(np.float32)
    labels = np.clip(np.round(x[:, 0] + 0.5 * x[:, 1] + rng.normal(0, 0.5, len(x)) + 1), 0, 4)
    ds = RankingDataset(x, labels, offsets, np.arange(n_q))
    logger = x[:, 1] + rng.normal(0, 1.0, len(x))  # a weak production ranker
    log = simulate_clicks(labels, offsets, logger, eta=1.0, top_k=8, sessions_per_query=5, seed=1)
    return ds, log


def test_click_training_set_structure(clicks_setup):
    ds, log = clicks_setup
    train, position = click_training_set(ds, log, weighting="ips", clip=0.2)
    has_click = np.bincount(log.session, weights=log.click, minlength=log.n_sessions) > 0
    rows = has_click[log.session]
    assert train.n_queries == int(has_click.sum()) and train.n_items == int(rows.sum())
    np.testing.assert_array_equal(train.labels, log.click[rows])
    np.testing.assert_array_equal(train.features, ds.features[log.doc[rows]])
    np.testing.assert_array_equal(position, log.position[rows])
    expected_w = np.where(log.click[rows] == 1, 1.0 / np.maximum(pbm_examination(8)[log.position[rows] - 1], 0.2), 1.0)
    np.testing.assert_allclose(train.weights, expected_w, rtol=1e-15)
    assert train.weights.max() <= 5.0  # clip 0.2 bounds the weights by 1/0.2
    raw, _ = click_training_set(ds, log, weighting="none")
    assert raw.weights is None and raw.n_items == train.n_items
    np.testing.assert_allclose(inverse_propensity_weights(np.array([0.25, 1.0])), [4.0, 1.0])


def _fit(train, valid, seed=0):
    from ltr.train.models import LinearScorer
    from ltr.train.trainer import TrainConfig, Trainer

    torch.manual_seed(seed)
    model = LinearScorer(train.n_features)
    cfg = TrainConfig(epochs=1, batch_size=16, lr=0.05, patience=None, seed=seed, progress=False, metrics=("ndcg@10",))
    result = Trainer(model, losses.get_loss("lambdarank"), cfg).fit(train, valid)
    return np.concatenate([p.detach().numpy().ravel() for p in result.model.parameters()]), result


def test_weights_change_training_through_the_trainer(clicks_setup):
    ds, log = clicks_setup
    ips, _ = click_training_set(ds, log, weighting="ips")
    raw, _ = click_training_set(ds, log, weighting="none")
    ones = RankingDataset(ips.features, ips.labels, ips.query_offsets, ips.query_ids, weights=np.ones(ips.n_items))
    p_ips, _ = _fit(ips, ds)
    p_raw, _ = _fit(raw, ds)
    p_ones, _ = _fit(ones, ds)
    # Unit weights are the unweighted loss: same parameters; IPS weights move them.
    np.testing.assert_allclose(p_ones, p_raw, rtol=1e-5, atol=1e-6)
    assert np.abs(p_ips - p_raw).max() > 1e-3


def test_lightgbm_position_option_is_used(clicks_setup):
    from ltr.gbdt.lightgbm import predict_booster, train_lightgbm

    ds, log = clicks_setup
    train, position = click_training_set(ds, log, weighting="none")
    params = {"num_leaves": 4, "min_data_in_leaf": 5, "learning_rate": 0.2, "verbosity": -1,
              "num_threads": 1}
    plain, _ = train_lightgbm(train, None, params, num_boost_round=10, early_stopping_rounds=None)
    biased, _ = train_lightgbm(train, None, params, position=position, num_boost_round=10, early_stopping_rounds=None)
    a = predict_booster(plain, ds.features)
    b = predict_booster(biased, ds.features)
    assert np.abs(a - b).max() > 1e-6
