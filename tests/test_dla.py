"""DLA: on noiseless PBM clicks (expected counts n theta_r a_i, a_i = exp(w.x_i) up to a constant, so
a linear ranker can represent relevance exactly) the learned propensities are the true ones."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
from ltr.clicks.estimators.dla import fit_dla
from ltr.clicks.logs.lists import group_sessions
from ltr.base.errors import LtrError


@pytest.fixture(autouse=True)
def _seeded_torch():
    """Every test's scorer starts from the same initial weights, whatever tests ran before it in the process
    (fit_dla seeds its batches, not the scorer it is given)."""
    import torch

    torch.manual_seed(0)


@pytest.fixture(scope="module")
def noiseless():
    rng = np.random.default_rng(0)
    q, k, f = 600, 8, 3
    x = rng.normal(size=(q * k, f))
    u = x @ np.array([1.0, -0.7, 0.4])
    a = np.exp(u - u.max())
    offsets = np.arange(0, q * k + 1, k)
    logger = u + rng.normal(0, 1.0, q * k)  # a fair logging ranker: relevant items tend to be on top
    log = simulate_clicks(np.zeros(q * k), offsets, logger, top_k=k, sessions_per_query=1, seed=0)
    lists = group_sessions(log)
    theta = pbm_examination(k, 1.0)
    clicks = np.where(lists.mask, 100 * theta[None, :] * a[np.maximum(lists.docs, 0)], 0.0)
    return x, lists, clicks, theta, u


def test_dla_recovers_true_propensities_and_relevance_order(noiseless):
    from ltr.train.models import LinearScorer

    x, lists, clicks, theta, u = noiseless
    res = fit_dla(lists, x, LinearScorer(3), epochs=150, lr=0.05, batch_size=128, max_weight=1e6, clicks=clicks)
    np.testing.assert_allclose(res.theta, theta, rtol=0.01)
    import torch

    w = res.model.linear.weight.detach().double().numpy().ravel()
    # The ranker's weights are the true relevance direction (softmax is shift-invariant: no bias check).
    np.testing.assert_allclose(w, [1.0, -0.7, 0.4], rtol=0.05)
    assert torch.is_tensor(next(res.model.parameters()))


def test_clipping_the_relevance_weights_biases_the_bottom_positions_down(noiseless):
    from ltr.train.models import LinearScorer

    x, lists, clicks, theta, u = noiseless
    res = fit_dla(lists, x, LinearScorer(3), epochs=150, lr=0.05, batch_size=128, max_weight=20, clicks=clicks)
    assert res.theta[-1] < 0.95 * theta[-1]
    with pytest.raises(LtrError, match="max_weight"):
        fit_dla(lists, x, LinearScorer(3), max_weight=0.5)


def test_validation_keeps_the_best_epoch(noiseless):
    from ltr.clicks.estimators.dla import _valid_ndcg
    from ltr.data import RankingDataset
    from ltr.train.models import LinearScorer

    x, lists, clicks, theta, u = noiseless
    # A labelled validation set: the first 100 queries with graded labels from the true relevance.
    rows = np.arange(800)
    labels = np.digitize(u[rows], np.quantile(u, [0.5, 0.8, 0.95])).astype(float)
    valid = RankingDataset(x[rows].astype(np.float32), labels, np.arange(0, 801, 8), np.arange(100))
    res = fit_dla(lists, x, LinearScorer(3), epochs=12, lr=0.5, batch_size=64, max_weight=1e6, clicks=clicks,
                  valid=valid, patience=3)
    assert res.best_epoch == int(np.argmax(res.valid_history))
    assert _valid_ndcg(res.model, valid) == pytest.approx(max(res.valid_history), abs=1e-12)
    assert len(res.valid_history) <= 12


def _true_ranker(x_dim=3):
    """A linear scorer with the true relevance direction: its softmax ratios are the true a_1 / a_i."""
    import torch

    from ltr.train.models import LinearScorer

    model = LinearScorer(x_dim)
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([[1.0, -0.7, 0.4]]))
        model.linear.bias.zero_()
    return model


def test_full_propensity_update_is_the_mm_optimum_on_lists_of_uneven_length(noiseless):
    """With the true relevance the minimiser of loss_exam is the true theta, also when lists are cut
    short (the softmax of a short list runs over its shown positions only); each MM step lowers the loss."""
    import torch

    from ltr.clicks.estimators.dla import _dla_losses, _full_propensity_update, list_tensors

    x, lists, clicks, theta, u = noiseless
    xt, c, pos, mask = list_tensors(lists, x, clicks)
    lengths = np.random.default_rng(1).integers(3, 9, size=len(mask))  # 3..8 shown items per list
    mask = mask & torch.from_numpy(np.arange(mask.shape[1])[None, :] < lengths[:, None])
    c = c * mask
    model = _true_ranker()
    phi = torch.nn.Parameter(torch.zeros(mask.shape[1]))
    losses = []
    for _ in range(5):
        losses.append(float(_dla_losses(model, phi, xt, c, pos, mask, 1e6)[1].detach()))
        _full_propensity_update(model, phi, xt, c, mask, 1e6, iterations=1)
    assert all(b <= a + 1e-7 for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] - 1e-3
    _full_propensity_update(model, phi, xt, c, mask, 1e6, iterations=500)
    np.testing.assert_allclose(torch.exp(phi.detach() - phi.detach()[0]).double().numpy(), theta, rtol=1e-4)


def test_full_propensity_update_recovers_the_true_propensities(noiseless):
    from ltr.train.models import LinearScorer

    x, lists, clicks, theta, u = noiseless
    res = fit_dla(lists, x, LinearScorer(3), epochs=40, lr=0.05, batch_size=128, max_weight=1e6, clicks=clicks,
                  propensity_update="full")
    np.testing.assert_allclose(res.theta, theta, rtol=0.01)
    np.testing.assert_allclose(res.model.linear.weight.detach().double().numpy().ravel(), [1.0, -0.7, 0.4], rtol=0.05)
    with pytest.raises(LtrError, match="propensity_update"):
        fit_dla(lists, x, LinearScorer(3), propensity_update="adam")


class _FixedScores:
    """A 'ranker' whose score is the item's only feature (a log-relevance given by the test)."""

    training = False

    def __call__(self, x, mask):
        return x[..., 0]

    def eval(self):
        return self

    def train(self, mode=True):
        return self


@pytest.mark.parametrize("s", [0.0, 0.5])
def test_geomean_reference_removes_the_bias_of_the_first_items_relevance(noiseless, s):
    """A ranker whose log-relevance is off by independent N(0, s^2) errors: with the first item as the
    reference every theta_r / theta_1 (r >= 2) of the propensity loss's optimum is too high by about
    exp(s^2) = 1.28 at s = 0.5 (Jensen, module docstring of ltr.clicks.estimators.dla); the geometric mean of the list
    as the reference has no such factor. With the true relevance (s = 0) both are exact."""
    import torch

    from ltr.clicks.estimators.dla import _full_propensity_update, list_tensors

    x, lists, clicks, theta, u = noiseless
    log_rel = u + np.random.default_rng(2).normal(0.0, s, u.size)
    xt, c, _, mask = list_tensors(lists, log_rel[:, None], clicks)
    ratio = {}
    for reference in ("first", "geomean"):
        phi = torch.zeros(mask.shape[1])
        _full_propensity_update(_FixedScores(), phi, xt, c, mask, 1e6, iterations=500, reference=reference)
        ratio[reference] = torch.exp(phi - phi[0]).double().numpy() / theta
    if s == 0.0:
        for reference in ratio:
            np.testing.assert_allclose(ratio[reference], 1.0, rtol=1e-6)
        return
    assert ratio["first"][1:].min() > 1.15 and abs(ratio["first"][1:].mean() - np.exp(s**2)) < 0.06
    assert np.abs(ratio["geomean"] - 1).max() < 0.07 and abs(ratio["geomean"][1:].mean() - 1) < 0.02


def test_relevance_reference_is_checked(noiseless):
    from ltr.train.models import LinearScorer

    x, lists, clicks, _, _ = noiseless
    with pytest.raises(LtrError, match="relevance_reference must be one of first, geomean, got 'mean'"):
        fit_dla(lists, x, LinearScorer(3), clicks=clicks, relevance_reference="mean")


def test_best_epoch_keeps_the_first_best_and_stops_after_patience():
    from ltr.clicks.estimators.dla import BestEpoch

    best = BestEpoch(patience=2)
    values = [0.3, 0.5, 0.5, 0.4, 0.6]  # a tie is no gain: epoch 1 stays the best, and epoch 3 is its second miss
    stops = [best.see(v, e, lambda e=e: f"state {e}") for e, v in enumerate(values[:4])]
    assert stops == [False, False, False, True] and best.epoch == 1 and best.saved == "state 1"
    assert best.note(0.4) == "valid NDCG@10 0.4000, best 0.5000 at epoch 2"
    never = BestEpoch(patience=None)
    assert not any(never.see(v, e, lambda: None) for e, v in enumerate([0.5, 0.1, 0.1, 0.1, 0.1]))
    at_once = BestEpoch(patience=0)  # patience 0: the first epoch without a gain stops
    assert [at_once.see(v, e, lambda: None) for e, v in enumerate([0.2, 0.3, 0.1])] == [False, False, True]


def test_refit_sets_the_kept_rankers_propensity_optimum_and_removes_the_minibatch_jitter(noiseless):
    """``propensity_update="refit"`` trains as ``"sgd"`` (the same ranker, bit for bit), then sets the
    propensities to the MM optimum over the whole log at that ranker (geometric-mean reference). On sampled PBM clicks (20,000 sessions
    a list) the minibatch Adam steps leave the sgd curve about 4% off at its worst position; the refit one
    is within 2% of 1/r everywhere."""
    import torch

    from ltr.clicks.estimators.dla import _full_propensity_update, list_tensors
    from ltr.train.models import LinearScorer

    x, lists, _, theta, u = noiseless
    a = np.exp(u - u.max())
    p = np.where(lists.mask, theta[None, :] * a[np.maximum(lists.docs, 0)], 0.0)
    clicks = np.random.default_rng(1).binomial(20_000, p).astype(float)
    fits = {}
    for update in ("sgd", "refit"):
        torch.manual_seed(0)
        fits[update] = fit_dla(lists, x, LinearScorer(3), epochs=10, lr=0.05, batch_size=16, max_weight=1e6,
                               clicks=clicks, propensity_lr=0.05, propensity_update=update)
    sgd, refit = fits["sgd"], fits["refit"]
    assert torch.equal(sgd.model.linear.weight, refit.model.linear.weight)
    assert np.abs(sgd.theta / theta - 1).max() > 0.03
    np.testing.assert_allclose(refit.theta, theta, rtol=0.02)
    xt, c, _, mask = list_tensors(lists, x, clicks)
    phi = torch.log(torch.tensor(sgd.theta, dtype=torch.float32))
    _full_propensity_update(sgd.model, phi, xt, c, mask, 1e6, reference="geomean")
    np.testing.assert_allclose(refit.theta, torch.exp(phi - phi[0]).double().numpy(), rtol=1e-6)
    # relevance_reference="first" refits with the first item as the reference (and trains as the default does)
    torch.manual_seed(0)
    first = fit_dla(lists, x, LinearScorer(3), epochs=10, lr=0.05, batch_size=16, max_weight=1e6, clicks=clicks,
                    propensity_lr=0.05, propensity_update="refit", relevance_reference="first")
    assert torch.equal(first.model.linear.weight, refit.model.linear.weight)
    phi = torch.log(torch.tensor(sgd.theta, dtype=torch.float32))
    _full_propensity_update(sgd.model, phi, xt, c, mask, 1e6, reference="first")
    np.testing.assert_allclose(first.theta, torch.exp(phi - phi[0]).double().numpy(), rtol=1e-6)
    assert not np.allclose(first.theta, refit.theta, rtol=1e-4)
