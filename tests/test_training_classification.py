"""The trainer monitoring classification metrics (logloss, brier: lower is better; auc: higher)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score
from torch import nn

import losses
from ltr.data import RankingDataset
from ltr.base.errors import LtrError
from ltr.train.config import TrainConfig
from ltr.train.models import LinearScorer
from ltr.train.trainer import Trainer, evaluate_scores

F = 5
TRUE_W = np.array([1.5, -1.0, 0.8, 0.0, 0.5])


def clicks(n_requests: int, seed: int) -> RankingDataset:
    """Requests of 4..10 impressions; a click is drawn with probability sigmoid(x . TRUE_W - 0.5)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 11, n_requests)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], F)).astype(np.float32)
    p = 1.0 / (1.0 + np.exp(-(x @ TRUE_W - 0.5)))
    y = (rng.uniform(size=len(x)) < p).astype(np.float64)
    return RankingDataset(x, y, offsets, np.arange(n_requests))


@pytest.fixture(scope="module")
def data():
    return clicks(60, 1), clicks(30, 2)


def true_model() -> LinearScorer:
    model = LinearScorer(F)
    with torch.no_grad():
        model.linear.weight.copy_(torch.from_numpy(TRUE_W[None, :].astype(np.float32)))
        model.linear.bias.fill_(-0.5)
    return model


class FlippedBCE(nn.Module):
    """BCE on 1 - label: every step moves the logits away from the truth (validation logloss rises)."""

    def __init__(self):
        super().__init__()
        self.inner = losses.PointwiseBCE()

    def forward(self, scores, labels, mask, weights=None):
        return self.inner(scores, 1.0 - labels, mask)


def cfg(monitor, **kw) -> TrainConfig:
    base = dict(epochs=5, batch_size=8, lr=0.05, patience=None, monitor=monitor, metrics=("ndcg@10", "logloss", "brier", "auc"),
                progress=False, seed=0)
    return TrainConfig(**{**base, **kw})


def sigmoid(s):
    return 1.0 / (1.0 + np.exp(-s))


@pytest.mark.parametrize("monitor", ["logloss", "brier"])
def test_lower_is_better_picks_the_minimum(data, monitor):
    train, valid = data
    torch.manual_seed(0)
    # From zero weights, BCE training lowers the validation loss: the best epoch is a late one.
    learn = Trainer(LinearScorer(F), losses.PointwiseBCE(), cfg(monitor)).fit(train, valid)
    # From the true weights, flipped BCE raises it every epoch: the best epoch is the first.
    unlearn = Trainer(true_model(), FlippedBCE(), cfg(monitor)).fit(train, valid)
    for result in (learn, unlearn):
        assert result.monitor == f"{monitor}[p=sigmoid(score)]" and not result.higher_is_better
        values = [h["valid"][result.monitor] for h in result.history]
        assert result.best_epoch == 1 + int(np.argmin(values))
        assert result.best_value == min(values) == result.valid_metrics[result.monitor]
        assert max(values) > min(values) + 1e-3  # the direction matters in this run
    assert learn.best_epoch > 1 and unlearn.best_epoch == 1
    # the values are sklearn's on sigmoid(score) of the restored (best) model
    trainer = Trainer(unlearn.model, FlippedBCE(), cfg(monitor))
    p = sigmoid(trainer.predict(valid))
    oracle = log_loss(valid.labels, p) if monitor == "logloss" else brier_score_loss(valid.labels, p)
    assert unlearn.best_value == pytest.approx(oracle, abs=1e-9)


def test_auc_higher_is_better_and_matches_sklearn(data):
    train, valid = data
    result = Trainer(true_model(), FlippedBCE(), cfg("auc")).fit(train, valid)
    values = [h["valid"][result.monitor] for h in result.history]
    assert result.monitor == "auc[ties=half]" and result.higher_is_better
    assert result.best_epoch == 1 + int(np.argmax(values)) == 1 and values[-1] < values[0] - 0.05
    scores = Trainer(result.model, FlippedBCE(), cfg("auc")).predict(valid)
    assert result.best_value == pytest.approx(roc_auc_score(valid.labels, scores), abs=1e-12)
    # ranking and classification metrics side by side, in the order asked for
    assert [k.split("[")[0] for k in result.valid_metrics] == ["ndcg@10", "logloss", "brier", "auc"]


def test_logloss_early_stopping(data):
    train, valid = data
    result = Trainer(true_model(), FlippedBCE(), cfg("logloss", epochs=20, patience=2)).fit(train, valid)
    assert result.stopped_early and result.epochs_run == 3 and result.best_epoch == 1


def test_classification_metrics_refuse_graded_labels(data):
    _, valid = data
    graded = RankingDataset(valid.features, valid.labels * 2, valid.query_offsets, valid.query_ids)
    with pytest.raises(LtrError, match=r"logloss needs binary 0/1 labels.*validation set's row \d+ has label 2"):
        Trainer(LinearScorer(F), losses.PointwiseBCE(), cfg("logloss", epochs=1)).fit(valid, graded)
    # unjudged (NaN) rows, which metrics.evaluate accepts, are left out
    y = valid.labels.copy()
    y[:7] = np.nan
    partial = SimpleNamespace(labels=y, query_offsets=valid.query_offsets)
    s = np.linspace(-2, 2, len(y))
    ev = evaluate_scores(s, partial, ["logloss", "auc"])
    assert ev.counted[ev.names["logloss"]] == len(y) - 7
    assert ev["logloss"] == pytest.approx(log_loss(valid.labels[7:], sigmoid(s[7:])), abs=1e-12)
    assert ev["auc"] == pytest.approx(roc_auc_score(valid.labels[7:], s[7:]), abs=1e-12)
