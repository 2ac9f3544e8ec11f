"""Scorers: shapes, pointwise scoring, masked batch norm, input transform, save/load without pickle."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ltr.base.errors import LtrError
from ltr.train.models import (
    FeatureTransform,
    LinearScorer,
    MLPScorer,
    build_model,
    load_model,
    save_model,
)


def test_linear_scorer_is_w_dot_x_plus_b():
    torch.manual_seed(0)
    m = LinearScorer(3)
    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]])
    w, b = m.linear.weight[0], m.linear.bias[0]
    expected = x @ w + b
    torch.testing.assert_close(m(x), expected)
    assert m(x.reshape(1, 2, 3)).shape == (1, 2)


@pytest.mark.parametrize("activation", ["relu", "gelu", "tanh"])
def test_mlp_scores_padded_batch_like_flat_rows(activation):
    torch.manual_seed(1)
    m = MLPScorer(5, hidden=(7, 4), activation=activation, dropout=0.3).eval()
    x = torch.randn(3, 6, 5)
    # a scorer is pointwise: scoring [B, L, F] equals scoring the B*L rows one block at a time
    torch.testing.assert_close(m(x), m(x.reshape(-1, 5)).reshape(3, 6))
    assert [layer.out_features for layer in m.linears] == [7, 4]


def test_dropout_active_only_in_train_mode():
    torch.manual_seed(2)
    m = MLPScorer(4, hidden=(64,), dropout=0.5)
    x = torch.randn(10, 4)
    m.train()
    assert not torch.equal(m(x), m(x))
    m.eval()
    assert torch.equal(m(x), m(x))


def test_batch_norm_ignores_padding():
    torch.manual_seed(3)
    m = MLPScorer(4, hidden=(6,), batch_norm=True).train()
    x = torch.randn(2, 5, 4)
    mask = torch.tensor([[True, True, True, False, False], [True, True, True, True, False]])
    x2 = x.clone()
    x2[~mask] = 1e6  # garbage in the padding must not change anything on the valid items
    m2 = MLPScorer(4, hidden=(6,), batch_norm=True).train()
    m2.load_state_dict(m.state_dict())
    out1, out2 = m(x, mask=mask), m2(x2, mask=mask)
    torch.testing.assert_close(out1[mask], out2[mask])
    # running mean = momentum * mean of the valid rows' pre-normalisation activations
    h = m.linears[0](x[mask])
    torch.testing.assert_close(m.norms[0].running_mean, 0.1 * h.detach().mean(0))
    torch.testing.assert_close(m2.norms[0].running_mean, m.norms[0].running_mean)


def test_feature_transform_standard_and_log1p():
    rng = np.random.default_rng(0)
    x = rng.exponential(5.0, size=(200, 3))
    x[:, 2] = 4.0  # constant feature: scale 1, stays finite
    t = FeatureTransform.fit(x, "standard")
    z = t(torch.from_numpy(x).float()).numpy()
    np.testing.assert_allclose(z[:, :2].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(z[:, :2].std(0), 1.0, atol=1e-4)
    assert np.all(z[:, 2] == 0.0)
    t2 = FeatureTransform.fit(x, "log1p")
    np.testing.assert_allclose(t2(torch.tensor([[-2.0, 0.0, 3.0]])).numpy(), [[-np.log(3.0), 0.0, np.log(4.0)]], rtol=1e-6)
    with pytest.raises(LtrError, match="unknown normalisation"):
        FeatureTransform(3, "minmax")


def test_save_load_roundtrip_without_pickle(tmp_path):
    torch.manual_seed(4)
    rng = np.random.default_rng(1)
    feats = rng.normal(3.0, 2.0, size=(50, 6)).astype(np.float32)
    m = MLPScorer(6, hidden=(8, 3), activation="elu", dropout=0.2, batch_norm=True)
    m.set_normalizer(FeatureTransform.fit(feats, "log1p_standard"))
    m.train()
    m(torch.from_numpy(feats).reshape(5, 10, 6))  # move the batch-norm running stats away from their init
    m.eval()
    save_model(m, tmp_path)
    config = json.loads((tmp_path / "model.json").read_text())
    assert config == {
        "type": "mlp", "n_features": 6, "hidden": [8, 3], "activation": "elu", "dropout": 0.2,
        "batch_norm": True, "normalizer": "log1p_standard",
    }
    state = torch.load(tmp_path / "model.pt", weights_only=True)  # plain tensors only
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    loaded = load_model(tmp_path)
    x = torch.from_numpy(feats)
    torch.testing.assert_close(loaded(x), m(x), rtol=0, atol=0)


def test_build_and_load_errors(tmp_path):
    with pytest.raises(LtrError, match="unknown activation"):
        MLPScorer(3, activation="swishy")
    with pytest.raises(LtrError, match="unknown model type"):
        build_model({"type": "tree", "n_features": 3})
    with pytest.raises(LtrError, match="no model.json"):
        load_model(tmp_path)
    save_model(LinearScorer(3), tmp_path)
    (tmp_path / "model.json").write_text(json.dumps({"type": "linear", "n_features": 4}))
    with pytest.raises(LtrError, match="do not match"):
        load_model(tmp_path)
    with pytest.raises(LtrError, match="expects 3 features"):
        LinearScorer(3)(torch.zeros(2, 4))
