"""Context-aware scorer (masked self-attention over a query's items), input noise and seed ensembles."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import losses
from ltr.data import RankingDataset
from ltr.base.errors import LtrError
from ltr.train.attention import ContextAwareScorer
from ltr.train.config import TrainConfig
from ltr.train.ensemble import EnsembleScorer, fit_ensemble
from ltr.train.models import FeatureTransform, LinearScorer, MLPScorer, build_model, load_model, save_model
from ltr.train.trainer import Trainer, predict_scores

F = 5


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    return ContextAwareScorer(F, **{"width": 16, "heads": 2, "layers": 2, "dropout": 0.0, **kw})


def test_permuting_a_querys_items_permutes_its_scores():
    m = _model(dropout=0.2).eval()
    x = torch.randn(3, 9, F)
    mask = torch.ones(3, 9, dtype=torch.bool)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(m(x[:, perm], mask)[:, perm.argsort()], m(x, mask), atol=1e-5, rtol=1e-5)
    # and the scores do depend on the other items (it is not a pointwise scorer)
    x2 = x.clone()
    x2[:, 1:] += 3.0
    with torch.no_grad():
        assert float((m(x2, mask)[:, 0] - m(x, mask)[:, 0]).abs().max()) > 1e-3


@pytest.mark.parametrize("train_mode", [False, True])
def test_padding_changes_nothing(train_mode):
    m = _model().train(train_mode)  # dropout 0: train mode is deterministic too
    x = torch.randn(2, 6, F)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    x.requires_grad_(True)
    s1 = m(x, mask)
    (g1,) = torch.autograd.grad((s1 * mask).sum(), x)
    # three more padded columns holding NaN, and garbage in the existing padding
    x2 = torch.cat([x.detach(), torch.full((2, 3, F), float("nan"))], 1)
    x2[1, 4:6] = 1e6
    x2.requires_grad_(True)
    mask2 = torch.cat([mask, torch.zeros(2, 3, dtype=torch.bool)], 1)
    s2 = m(x2, mask2)
    (g2,) = torch.autograd.grad((s2 * mask2).sum(), x2)
    torch.testing.assert_close(s2[mask2], s1[mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(g2[:, :6][mask], g1[mask], atol=1e-5, rtol=1e-5)
    assert bool(torch.isfinite(s2).all()) and float(g2[~mask2].abs().sum()) == 0.0


def test_a_query_of_one_item_works_alone_and_in_a_batch():
    m = _model().eval()
    x = torch.randn(1, F)
    alone = m(x)  # a 2-D input is one list
    assert alone.shape == (1,) and torch.isfinite(alone).all()
    batch = torch.zeros(2, 4, F)
    batch[0, 0] = x[0]
    batch[1] = torch.randn(4, F)
    mask = torch.tensor([[True, False, False, False], [True] * 4])
    torch.testing.assert_close(m(batch, mask)[0, 0], alone[0], atol=1e-5, rtol=1e-5)
    loss = losses.get_loss("softmax")(m.train()(batch, mask), torch.tensor([[1.0, 0, 0, 0], [2.0, 0, 1, 0]]), mask)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)


@pytest.mark.slow
def test_a_list_of_1000_items_at_batch_16_trains_on_cpu():
    m = ContextAwareScorer(F, width=32, heads=2, layers=1, dropout=0.1).train()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 1000, F, generator=g)
    y = torch.randint(0, 3, (16, 1000), generator=g).float()
    mask = torch.ones(16, 1000, dtype=torch.bool)
    mask[5:, 700:] = False
    value = losses.get_loss("softmax")(m(x, mask), y, mask)
    value.backward()
    assert torch.isfinite(value) and all(torch.isfinite(p.grad).all() for p in m.parameters())


def test_predict_scores_goes_query_by_query(tmp_path):
    m = _model().eval()
    rng = np.random.default_rng(0)
    lengths = [3, 1, 7, 4, 2]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], F)).astype(np.float32)
    want = np.concatenate([m(torch.from_numpy(x[a:b])).detach().numpy() for a, b in zip(offsets[:-1], offsets[1:])])
    for rows in (7, 10, 65536):  # batches of one query (the longest alone), a few, all
        np.testing.assert_allclose(predict_scores(m, x, query_offsets=offsets, rows=rows), want, atol=1e-5)
    with pytest.raises(LtrError, match="query_offsets"):
        predict_scores(m, x)


def test_save_load_attention_and_ensemble_without_pickle(tmp_path):
    feats = np.random.default_rng(1).normal(2.0, 3.0, size=(40, F)).astype(np.float32)
    members = []
    for seed in (0, 1, 2):
        member = _model(seed, input_noise=0.1)
        member.set_normalizer(FeatureTransform.fit(feats, "log1p_standard"))
        members.append(member)
    ens = EnsembleScorer(members).eval()
    x = torch.from_numpy(feats).reshape(4, 10, F)
    mask = torch.ones(4, 10, dtype=torch.bool)
    torch.testing.assert_close(ens(x, mask), torch.stack([mm(x, mask) for mm in members]).mean(0))
    save_model(ens, tmp_path)
    config = json.loads((tmp_path / "model.json").read_text())
    assert config["type"] == "ensemble" and len(config["members"]) == 3
    assert config["members"][0] == {"type": "attention", "n_features": F, "width": 16, "heads": 2, "layers": 2,
                                    "dropout": 0.0, "input_noise": 0.1, "normalizer": "log1p_standard"}
    state = torch.load(tmp_path / "model.pt", weights_only=True)
    assert all(k.startswith("members.") for k in state) and all(isinstance(v, torch.Tensor) for v in state.values())
    loaded = load_model(tmp_path)
    assert loaded.listwise and not loaded.training
    torch.testing.assert_close(loaded(x, mask), ens(x, mask), rtol=0, atol=0)


def test_input_noise_is_gaussian_with_its_std_and_only_while_training():
    torch.manual_seed(0)
    m = LinearScorer(3, input_noise=0.5)
    x = torch.zeros(40_000, 3)
    w, b = m.linear.weight[0].detach(), float(m.linear.bias.detach())
    s = m.train()(x).detach()
    assert float(s.mean()) == pytest.approx(b, abs=0.02)
    assert float(s.std()) == pytest.approx(0.5 * float(w.norm()), rel=0.03)
    assert torch.equal(m.eval()(x), torch.full((40_000,), b))
    assert MLPScorer(3, input_noise=0.2).config()["input_noise"] == 0.2
    assert "input_noise" not in MLPScorer(3).config()  # older model.json files read the same
    with pytest.raises(LtrError, match="input_noise"):
        MLPScorer(3, input_noise=-1.0)


def test_bad_configurations_are_clear_errors():
    with pytest.raises(LtrError, match="multiple of heads"):
        ContextAwareScorer(F, width=10, heads=3)
    with pytest.raises(LtrError, match="lists"):
        _model()(torch.zeros(2, 3, 4, F))
    with pytest.raises(LtrError, match="members"):
        build_model({"type": "ensemble", "members": []})
    with pytest.raises(LtrError, match="different feature counts"):
        EnsembleScorer([LinearScorer(3), LinearScorer(4)])


def _ds(n_queries, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 12, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], F)).astype(np.float32)
    y = np.clip(np.round(x @ np.array([1.0, -0.7, 0.5, 0.0, 0.3]) + 1.0), 0, 3)
    return RankingDataset(x, y, offsets, np.arange(n_queries) + 100 * seed)


@pytest.mark.slow
def test_trainer_and_fit_ensemble_with_the_context_aware_scorer():
    train, valid = _ds(40, 1), _ds(12, 2)
    cfg = TrainConfig(epochs=3, batch_size=8, lr=0.01, patience=None, metrics=("ndcg@10",), progress=False)
    fit = Trainer(_model(), losses.get_loss("softmax"), cfg).fit(train, valid)
    assert fit.valid_metrics and fit.epochs_run == 3
    ens = fit_ensemble(lambda seed: _model(seed, input_noise=0.05), losses.get_loss("listmle"), cfg, train, valid,
                       seeds=[3, 4])
    assert [f.model is m for f, m in zip(ens.members, ens.model.members)] == [True, True]
    member_scores = [predict_scores(f.model, valid.features, query_offsets=valid.query_offsets) for f in ens.members]
    np.testing.assert_allclose(predict_scores(ens.model, valid.features, query_offsets=valid.query_offsets),
                               np.mean(member_scores, axis=0), atol=1e-6)
    assert not np.allclose(member_scores[0], member_scores[1])  # the seeds differ
    again = fit_ensemble(lambda seed: _model(seed, input_noise=0.05), losses.get_loss("listmle"), cfg, train, valid,
                         seeds=[3, 4])
    assert again.valid_metrics == ens.valid_metrics  # deterministic given the seeds
