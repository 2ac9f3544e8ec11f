"""The early-stopping state: best value / epoch / weights and patience, as the trainer uses it."""

from __future__ import annotations

import math

import torch

from ltr.train.early_stopping import EarlyStopping


def _model(value: float) -> torch.nn.Module:
    m = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(value)
    return m


def test_higher_is_better_with_min_delta_and_patience():
    es = EarlyStopping("ndcg@10", higher_is_better=True, min_delta=0.01, patience=2)
    seq = [0.50, 0.505, 0.52, 0.525, 0.529]  # improvements: yes, no (< delta), yes, no, no
    got = [es.update(e, v, {"m": v}, _model(e)) for e, v in enumerate(seq, 1)]
    assert got == [True, False, True, False, False]
    assert es.best_epoch == 3 and es.best_value == 0.52 and es.best_metrics == {"m": 0.52}
    assert es.bad_epochs == 2 and es.should_stop
    assert float(es.best_model["weight"]) == 3.0  # the weights of epoch 3, copied at the time


def test_lower_is_better_and_non_finite_values():
    es = EarlyStopping("logloss", higher_is_better=False, patience=None)
    assert es.best_value == math.inf
    assert es.update(1, math.nan, {}, _model(1)) is False
    assert es.best_epoch == 1 and es.best_model is not None  # the first epoch is kept even when NaN
    assert es.best_value == math.inf
    assert es.update(2, 0.7, {}, _model(2)) is True
    assert es.update(3, 0.8, {}, _model(3)) is False
    assert es.best_epoch == 2 and not es.should_stop  # patience None never stops


def test_state_round_trip():
    es = EarlyStopping("map", patience=3)
    es.update(1, 0.3, {"map": 0.3}, _model(1))
    es.update(2, 0.2, {"map": 0.2}, _model(2))
    other = EarlyStopping("map", patience=3)
    other.load_state_dict(es.state_dict())
    assert (other.best_value, other.best_epoch, other.bad_epochs, other.best_metrics) == (0.3, 1, 1, {"map": 0.3})
