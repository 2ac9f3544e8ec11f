"""Synthetic impressions, negative down-sampling and its closed-form correction, monotone distortions,
and the pointwise BCE CTR model trained with the project's trainer."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit, logit
from sklearn.linear_model import LogisticRegression

from ltr.calibrate.ctr import (
    correct_downsampling,
    distort,
    downsample_negatives,
    downsampled_rate,
    generate_impressions,
    train_ctr_model,
)
from ltr.calibrate.invariance import count_created_ties
from ltr.base.errors import LtrError
from metrics.classification import auc, ece, log_loss


def test_generator_is_seeded_and_consistent():
    a = generate_impressions(500, 6, seed=3)
    b = generate_impressions(500, 6, seed=3)
    c = generate_impressions(500, 6, seed=4)
    assert np.array_equal(a.features, b.features) and np.array_equal(a.clicks, b.clicks)
    assert not np.array_equal(a.clicks, c.clicks)
    assert a.n == 3000 and a.request_offsets.tolist() == list(range(0, 3001, 6))
    # distinct advertisers inside a request, each with one fixed bid
    per_req = a.advertiser_ids.reshape(500, 6)
    assert all(len(set(r)) == 6 for r in per_req)
    bid_of = {}
    for adv, bid in zip(a.advertiser_ids, a.bids):
        assert bid_of.setdefault(adv, bid) == bid
    # clicks are Bernoulli(true CTR): the totals agree within 4 standard errors
    big = generate_impressions(5000, 8, seed=0)
    se = np.sqrt(np.sum(big.true_ctr * (1 - big.true_ctr)))
    assert abs(big.clicks.sum() - big.true_ctr.sum()) < 4 * se


def test_downsampling_rate_and_correction_are_inverse():
    p = np.linspace(0.0, 1.0, 101)
    for w in (0.01, 0.1, 0.5, 1.0):
        q = downsampled_rate(p, w)
        np.testing.assert_allclose(correct_downsampling(q, w), p, atol=1e-12)
        # on the logit scale down-sampling is a shift by -log(w)
        inner = (p > 0) & (p < 1)
        np.testing.assert_allclose(logit(q[inner]) - logit(p[inner]), -np.log(w), atol=1e-9)
    with pytest.raises(LtrError, match="rate"):
        correct_downsampling(0.5, 0.0)


def test_downsampling_keeps_positives_and_matches_the_expected_rate():
    imps = generate_impressions(20000, 5, seed=1)
    w = 0.1
    ds = downsample_negatives(imps, w, seed=2)
    assert ds.clicks.sum() == imps.clicks.sum()  # every click kept
    n_neg = (imps.clicks == 0).sum()
    kept_neg = (ds.clicks == 0).sum()
    assert abs(kept_neg - w * n_neg) < 4 * np.sqrt(n_neg * w * (1 - w))
    np.testing.assert_allclose(ds.weights[ds.clicks == 0], 1 / w)
    assert ds.negative_rate == w
    # In every decile of the true CTR the click rate among kept rows matches p / (p + (1 - p) w) and the
    # corrected rate matches the true CTR, within 4 standard errors.
    edges = np.quantile(ds.true_ctr, np.linspace(0, 1, 11))
    ids = np.clip(np.searchsorted(edges, ds.true_ctr, side="right") - 1, 0, 9)
    for b in range(10):
        m = ids == b
        q = downsampled_rate(ds.true_ctr[m], w)
        se = np.sqrt(np.sum(q * (1 - q))) / m.sum()
        rate = ds.clicks[m].mean()
        assert abs(rate - q.mean()) < 4 * se
    # (clicks among kept rows) / (clicks + kept negatives / w) estimates the true CTR
    est = ds.clicks.sum() / (ds.clicks.sum() + kept_neg / w)
    assert est == pytest.approx(imps.clicks.mean(), rel=0.03)


def test_model_on_downsampled_data_is_fixed_by_the_correction():
    # A well-specified world (the true logit is linear in the features): a logistic model fitted on
    # down-sampled data predicts q = p / (p + (1 - p) w); the closed form brings it back to p.
    world = dict(interaction=0.0, quality_noise=0.0, dim=3)
    full, test = generate_impressions(30000, 5, seed=5, **world).split_requests((2 / 3, 1 / 3), seed=0)
    train = downsample_negatives(full, 0.1, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = LogisticRegression(C=np.inf, max_iter=2000).fit(train.features, train.clicks)
    q = lr.predict_proba(test.features)[:, 1]
    p = correct_downsampling(q, 0.1)
    assert auc(test.clicks, p) == auc(test.clicks, q)
    assert ece(test.clicks, q, strategy="mass") > 0.05
    assert ece(test.clicks, p, strategy="mass") < 0.01
    assert log_loss(test.clicks, p) < log_loss(test.clicks, q)
    assert np.mean(np.abs(p - test.true_ctr)) < 0.003  # estimation noise only
    assert np.mean(np.abs(q - test.true_ctr)) > 0.05


def test_distortions_are_monotone_and_keep_auc():
    imps = generate_impressions(3000, 5, seed=8)
    p = imps.true_ctr
    base = auc(imps.clicks, p)
    for kind in ("square", "double", "sharpen", "downsample"):
        d = distort(p, kind)
        assert np.all(np.diff(d[np.argsort(p)]) >= 0)
        assert ece(imps.clicks, d, strategy="mass") > 2 * ece(imps.clicks, p, strategy="mass")
        if kind != "double":
            assert auc(imps.clicks, d) == pytest.approx(base, abs=1e-12)
    # Doubling is strictly monotone only below 1/2; above, min(2p, 1) ties everything at 1.
    d = distort(p, "double")
    clipped = int((p >= 0.5).sum())
    assert clipped > 1
    assert count_created_ties(p, d)["tied_pairs_created"] == clipped * (clipped - 1) // 2
    low = p < 0.5
    assert auc(imps.clicks[low], d[low]) == pytest.approx(auc(imps.clicks[low], p[low]), abs=1e-12)
    np.testing.assert_allclose(distort([0.2], "sharpen"), expit(2 * logit(0.2)))
    with pytest.raises(LtrError, match="unknown distortion"):
        distort(p, "cube")


def test_split_requests_keeps_requests_whole():
    imps = generate_impressions(400, 4, seed=9)
    parts = imps.split_requests((0.5, 0.25, 0.25), seed=1)
    sets = [set(p.request_ids.tolist()) for p in parts]
    assert sum(len(s) for s in sets) == 400 and not (sets[0] & sets[1]) and not (sets[1] & sets[2])
    assert [len(s) for s in sets] == [200, 100, 100]
    assert all(np.all(np.diff(p.request_ids) >= 0) for p in parts)


def test_pointwise_bce_model_trained_with_the_trainer():
    imps = generate_impressions(1000, 6, seed=11)
    train, valid, test = imps.split_requests((0.6, 0.2, 0.2), seed=0)
    ds = train.to_ranking_dataset()
    assert ds.n_queries == len(np.unique(train.request_ids)) and ds.weights is None
    assert np.array_equal(ds.labels, train.clicks)
    assert train.to_ranking_dataset(with_weights=True).weights is not None
    runs = [train_ctr_model(train, valid, hidden=(), epochs=3, batch_size=32, lr=0.05, seed=1) for _ in range(2)]
    p = [expit(trainer.predict(test.to_ranking_dataset())) for trainer, _ in runs]
    assert np.array_equal(p[0], p[1])  # seeded, initial weights included
    # The linear BCE model learns the ranking (the true CTR reaches 0.847 on this test split, a constant
    # 0.5) and beats the best constant prediction, the training click rate, in LogLoss.
    assert auc(test.clicks, p[0]) > 0.75
    base = np.full(test.n, train.clicks.mean())
    assert log_loss(test.clicks, p[0]) < log_loss(test.clicks, base)
    assert 1 <= runs[0][1].best_epoch <= 3
