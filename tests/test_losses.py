"""Losses: exact values and gradients against definitions written out pair by pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from loss_checks import check_shift_changes_nothing

import losses
import metrics
from losses import (
    LambdaRank,
    ListNet,
    NDCGLoss2,
    NDCGLoss2PP,
    PointwiseBCE,
    PointwiseMSE,
    RankNet,
)
from metrics.swap import ranking_order


def _batch(seed, n_lists=4, max_len=9, levels=4, dtype=torch.float64):
    """Random padded batch: graded labels, distinct-ish scores, padding at random places."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_lists, max_len, generator=g, dtype=dtype)
    labels = torch.randint(0, levels, (n_lists, max_len), generator=g).to(dtype)
    mask = torch.rand(n_lists, max_len, generator=g) > 0.25
    mask[0] = True
    weights = torch.rand(n_lists, max_len, generator=g, dtype=dtype) + 0.5
    return scores, labels, mask, weights


def _ranked(scores, mask):
    """Items of one list in rank order (stable descending score; real items only)."""
    idx = [int(i) for i in torch.nonzero(mask).flatten()]
    return sorted(idx, key=lambda i: (-float(scores[i]), i))


def _delta_by_evaluation(kind, scores, labels, mask, i, j, k, item_gain=None):
    """|metric - metric with i and j swapped| from metrics.ranking (independent of metrics.swap)."""
    idx = np.flatnonzero(mask.numpy())
    s, y = scores.detach().numpy()[idx], labels.numpy()[idx].copy()
    ig = None if item_gain is None else item_gain.numpy()[idx].copy()
    a, b = int(np.flatnonzero(idx == i)[0]), int(np.flatnonzero(idx == j)[0])
    fn = {"ndcg": metrics.ndcg, "mrr": metrics.reciprocal_rank, "ap": metrics.average_precision}[kind]
    kw = {} if ig is None else {"item_gain": ig}
    before = fn(s, y, None, k, empty="zero", **kw)[0]
    y[[a, b]] = y[[b, a]]
    if ig is not None:
        ig[[a, b]] = ig[[b, a]]
        kw = {"item_gain": ig}
    after = fn(s, y, None, k, empty="zero", **kw)[0]
    return abs(after - before)


def _lambdarank_by_definition(scores, labels, mask, weights, *, sigma, k, kind="ndcg", item_gain=None):
    """Per-query value and gradient, pair by pair, from the definition in issue 4."""
    n_lists, n = scores.shape
    values = torch.zeros(n_lists, dtype=torch.float64)
    grad = torch.zeros(n_lists, n, dtype=torch.float64)
    for b in range(n_lists):
        ranked = _ranked(scores[b], mask[b])
        pos = {item: p for p, item in enumerate(ranked)}
        for i in ranked:
            for j in ranked:
                if labels[b, i] <= labels[b, j]:
                    continue
                if k is not None and pos[i] >= k and pos[j] >= k:
                    continue  # truncation: at least one item in the top K
                ig = None if item_gain is None else item_gain[b]
                delta = _delta_by_evaluation(kind, scores[b], labels[b], mask[b], i, j, k, ig)
                w = delta * (1.0 if weights is None else float(weights[b, i]))
                diff = float(scores[b, i] - scores[b, j])
                values[b] += w * math.log1p(math.exp(-sigma * diff))
                lam = -sigma * w / (1.0 + math.exp(sigma * diff))  # d/ds_i of the pair's term
                grad[b, i] += lam
                grad[b, j] -= lam
    return values, grad


@pytest.mark.parametrize("k,sigma,with_weights", [(None, 1.0, False), (3, 1.0, True), (1, 2.5, False), (5, 0.7, True)])
def test_lambdarank_gradient_is_the_lambdas_of_the_definition(k, sigma, with_weights):
    scores, labels, mask, weights = _batch(seed=10 + (k or 0))
    scores.requires_grad_(True)
    w = weights if with_weights else None
    value = LambdaRank(sigma=sigma, k=k, reduction="none")(scores, labels, mask, w)
    (grad,) = torch.autograd.grad(value.sum(), scores)
    ref_value, ref_grad = _lambdarank_by_definition(scores.detach(), labels, mask, w, sigma=sigma, k=k)
    torch.testing.assert_close(value.detach(), ref_value, atol=1e-9, rtol=0)
    torch.testing.assert_close(grad, ref_grad, atol=1e-9, rtol=0)
    assert float(grad.abs().sum()) > 0
    assert float(grad[~mask].abs().sum()) == 0.0


@pytest.mark.parametrize("kind,k", [("mrr", None), ("mrr", 3), ("ap", None), ("ap", 4)])
def test_lambdarank_with_mrr_and_ap_deltas(kind, k):
    scores, labels, mask, _ = _batch(seed=20, levels=3)
    scores.requires_grad_(True)
    value = LambdaRank(k=k, metric=kind, reduction="none")(scores, labels, mask)
    (grad,) = torch.autograd.grad(value.sum(), scores)
    ref_value, ref_grad = _lambdarank_by_definition(scores.detach(), labels, mask, None, sigma=1.0, k=k, kind=kind)
    torch.testing.assert_close(value.detach(), ref_value, atol=1e-9, rtol=0)
    torch.testing.assert_close(grad, ref_grad, atol=1e-9, rtol=0)


def test_lambdarank_with_per_item_gain_weights_pairs_by_money():
    scores, labels, mask, _ = _batch(seed=30)
    price = torch.rand(scores.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 50
    scores.requires_grad_(True)
    loss = LambdaRank(k=4, reduction="none")
    value = loss(scores, labels, mask, item_gain=price)
    (grad,) = torch.autograd.grad(value.sum(), scores)
    ref_value, ref_grad = _lambdarank_by_definition(scores.detach(), labels, mask, None, sigma=1.0, k=4, item_gain=price)
    torch.testing.assert_close(value.detach(), ref_value, atol=1e-9, rtol=0)
    torch.testing.assert_close(grad, ref_grad, atol=1e-9, rtol=0)
    # the price changes the weights: a plain exp2 gain gives another loss
    assert float((value.detach() - loss(scores, labels, mask).detach()).abs().max()) > 1e-3


def test_lambdarank_with_all_weights_one_is_ranknet():
    scores, labels, mask, weights = _batch(seed=40, n_lists=5, max_len=12)

    def ones(s, y, m, k=None, top=None):
        n = s.shape[-1] if top is None else min(top, s.shape[-1])
        return torch.ones(s.shape[0], n, s.shape[-1], dtype=s.dtype), ranking_order(s, m)

    for w in (None, weights):
        for reduction in ("mean", "sum", "none"):
            s1 = scores.clone().requires_grad_(True)
            s2 = scores.clone().requires_grad_(True)
            v1 = LambdaRank(sigma=1.3, metric=ones, reduction=reduction)(s1, labels, mask, w)
            v2 = RankNet(sigma=1.3, reduction=reduction)(s2, labels, mask, w)
            torch.testing.assert_close(v1, v2, atol=1e-12, rtol=0)
            (g1,) = torch.autograd.grad(v1.sum(), s1)
            (g2,) = torch.autograd.grad(v2.sum(), s2)
            torch.testing.assert_close(g1, g2, atol=1e-12, rtol=0)


def test_ranknet_equals_autograd_through_all_pairs():
    scores, labels, mask, weights = _batch(seed=50, n_lists=3, max_len=11)
    s1 = scores.clone().requires_grad_(True)
    value = RankNet(sigma=0.8, reduction="sum")(s1, labels, mask, weights)
    s2 = scores.clone().requires_grad_(True)
    diff = s2[:, :, None] - s2[:, None, :]
    pairs = (labels[:, :, None] > labels[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    ref = (F.softplus(-0.8 * diff) * weights[:, :, None])[pairs].sum()
    torch.testing.assert_close(value, ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(value, s1)[0], torch.autograd.grad(ref, s2)[0], atol=1e-12, rtol=0)


def test_ranknet_is_stable_for_huge_score_gaps():
    s = torch.tensor([[-1e4, 1e4]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1.0, 0.0]])
    value = RankNet(reduction="sum")(s, y)
    assert float(value.detach()) == pytest.approx(2e4)
    (g,) = torch.autograd.grad(value, s)
    assert g.tolist() == [[-1.0, 1.0]]


def _lambdaloss_by_definition(scores, labels, mask, *, mu, with_rho, sigma=1.0):
    """NDCG-Loss2 (++) of Wang et al. 2018 written out: D_i = log2(1 + i), G = (2^y - 1)/maxDCG."""
    total = 0.0
    for b in range(scores.shape[0]):
        ranked = _ranked(scores[b], mask[b])
        pos = {item: p + 1 for p, item in enumerate(ranked)}  # 1-based
        ideal = sorted((2.0 ** float(labels[b, i]) - 1 for i in ranked), reverse=True)
        max_dcg = sum(g / math.log2(1 + r) for r, g in enumerate(ideal, start=1))
        for i in ranked:
            for j in ranked:
                if labels[b, i] <= labels[b, j]:
                    continue
                gi = (2.0 ** float(labels[b, i]) - 1) / max_dcg
                gj = (2.0 ** float(labels[b, j]) - 1) / max_dcg
                n = abs(pos[i] - pos[j])
                delta = abs(1 / math.log2(1 + n) - 1 / math.log2(2 + n))
                rho = abs(1 / math.log2(1 + pos[i]) - 1 / math.log2(1 + pos[j]))
                weight = (mu * delta + (rho if with_rho else 0.0)) * abs(gi - gj)
                p = 1 / (1 + math.exp(-sigma * float(scores[b, i] - scores[b, j])))
                total += -weight * math.log2(p)
    return total


def test_ndcg_loss2_and_2pp_match_the_paper_formulas():
    scores, labels, mask, _ = _batch(seed=60, n_lists=4, max_len=10)
    v2 = NDCGLoss2(reduction="sum")(scores, labels, mask)
    v2pp = NDCGLoss2PP(mu=10.0, reduction="sum")(scores, labels, mask)
    v2pp_mu3 = NDCGLoss2PP(mu=3.0, sigma=2.0, reduction="sum")(scores, labels, mask)
    assert float(v2) == pytest.approx(_lambdaloss_by_definition(scores, labels, mask, mu=1.0, with_rho=False), abs=1e-10)
    assert float(v2pp) == pytest.approx(_lambdaloss_by_definition(scores, labels, mask, mu=10.0, with_rho=True), abs=1e-10)
    assert float(v2pp_mu3) == pytest.approx(
        _lambdaloss_by_definition(scores, labels, mask, mu=3.0, with_rho=True, sigma=2.0), abs=1e-10)


def test_ndcg_loss2pp_is_lambdarank_plus_mu_loss2_in_log2():
    scores, labels, mask, weights = _batch(seed=61)
    lam = LambdaRank(reduction="sum")(scores, labels, mask, weights) / math.log(2.0)
    l2 = NDCGLoss2(reduction="sum")(scores, labels, mask, weights)
    l2pp = NDCGLoss2PP(mu=4.0, reduction="sum")(scores, labels, mask, weights)
    torch.testing.assert_close(l2pp, lam + 4.0 * l2, atol=1e-10, rtol=0)


def test_listnet_matches_its_formula():
    scores, labels, mask, weights = _batch(seed=70)
    for target in ("softmax", "linear"):
        value = ListNet(target=target, reduction="none")(scores, labels, mask, weights)
        for b in range(scores.shape[0]):
            idx = torch.nonzero(mask[b]).flatten()
            y, s, w = labels[b, idx], scores[b, idx], weights[b, idx]
            p_y = torch.softmax(y, 0) if target == "softmax" else y / y.sum()
            ref = -(w * p_y * torch.log_softmax(s, 0)).sum() if y.sum() > 0 or target == "softmax" else 0.0
            assert float(value[b]) == pytest.approx(float(ref), abs=1e-12)


def test_pointwise_losses_match_torch_and_hand_values():
    scores, labels, mask, weights = _batch(seed=80, levels=2)
    bce = PointwiseBCE()(scores, labels, mask, weights)
    ref = (F.binary_cross_entropy_with_logits(scores[mask], labels[mask], reduction="none") * weights[mask]).mean()
    torch.testing.assert_close(bce, ref, atol=1e-12, rtol=0)
    mse = PointwiseMSE(reduction="sum")(scores, labels, mask)
    torch.testing.assert_close(mse, ((scores - labels)[mask] ** 2).sum(), atol=1e-12, rtol=0)
    none = PointwiseMSE(reduction="none")(scores, labels, mask)
    assert none.shape == scores.shape and float(none[~mask].abs().sum()) == 0.0


def _all_losses():
    return [RankNet(), LambdaRank(), LambdaRank(k=3), LambdaRank(metric="ap", k=4), LambdaRank(metric="mrr"),
            NDCGLoss2(), NDCGLoss2PP(), ListNet(), ListNet(target="linear"), PointwiseBCE(), PointwiseMSE()]


@pytest.mark.parametrize("loss", _all_losses(), ids=repr)
def test_padding_changes_nothing(loss):
    scores, labels, mask, weights = _batch(seed=90, levels=2 if isinstance(loss, PointwiseBCE) else 4)
    s1 = scores.clone().requires_grad_(True)
    v1 = loss(s1, labels, mask, weights)
    (g1,) = torch.autograd.grad(v1, s1)
    # more padded columns, at the front and the back, holding garbage (NaN, inf, huge labels)
    n_lists = scores.shape[0]
    pad = lambda fill: torch.full((n_lists, 3), fill, dtype=scores.dtype)  # noqa: E731
    s2 = torch.cat([pad(float("nan")), scores, pad(float("inf"))], 1).requires_grad_(True)
    y2 = torch.cat([pad(7.0), labels, pad(float("nan"))], 1)
    m2 = torch.cat([torch.zeros(n_lists, 3, dtype=torch.bool), mask, torch.zeros(n_lists, 3, dtype=torch.bool)], 1)
    w2 = torch.cat([pad(float("nan")), weights, pad(1e9)], 1)
    v2 = loss(s2, y2, m2, w2)
    (g2,) = torch.autograd.grad(v2, s2)
    torch.testing.assert_close(v2, v1, atol=1e-12, rtol=0)
    torch.testing.assert_close(g2[:, 3:-3], g1, atol=1e-12, rtol=0)
    assert float(g2[:, :3].abs().sum()) == 0.0 and float(g2[:, -3:].abs().sum()) == 0.0


@pytest.mark.parametrize("loss", [RankNet(), LambdaRank(), LambdaRank(k=2, metric="ap"), NDCGLoss2(), NDCGLoss2PP(),
                                  ListNet(), ListNet(target="linear")], ids=repr)
def test_constant_shift_changes_nothing(loss):
    check_shift_changes_nothing(loss, _batch(seed=100), [3.0, -7.5, 0.25, 100.0], atol=1e-10)


@pytest.mark.parametrize("loss", [RankNet(sigma=0.7), ListNet(), ListNet(target="linear"), PointwiseBCE(),
                                  PointwiseMSE(), LambdaRank(k=3), NDCGLoss2PP()], ids=repr)
def test_gradcheck_float64(loss):
    scores, labels, mask, weights = _batch(seed=110, n_lists=3, max_len=6, levels=2)
    # well-separated scores: the ranking (hence LambdaRank's constant weights) stays put under eps
    scores = (torch.argsort(torch.randn(3, 6, generator=torch.Generator().manual_seed(0)), 1).double() * 0.5)
    scores.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: loss(s, labels, mask, weights), (scores,), eps=1e-6, atol=1e-7)


def test_weights_reach_the_loss():
    scores, labels, mask, _ = _batch(seed=120, n_lists=1, max_len=8)
    mask[:] = True
    ones = torch.ones_like(scores)
    for loss in (RankNet(reduction="sum"), LambdaRank(reduction="sum"), NDCGLoss2(reduction="sum"),
                 ListNet(reduction="sum"), PointwiseMSE(reduction="sum")):
        base = loss(scores, labels, mask)
        torch.testing.assert_close(loss(scores, labels, mask, ones), base, atol=1e-12, rtol=0)
        torch.testing.assert_close(loss(scores, labels, mask, 3 * ones), 3 * base, atol=1e-12, rtol=0)
    # pairwise: weight on item i scales exactly the pairs where i is the better item
    top = int(torch.argmax(labels[0]))
    w = torch.ones_like(scores)
    w[0, top] = 5.0
    per_pair = RankNet(reduction="sum")
    s_top = scores.clone()
    better = (labels[0, top] > labels[0]).to(scores.dtype)
    pairs_of_top = (F.softplus(-(s_top[0, top] - s_top[0])) * better).sum()
    torch.testing.assert_close(per_pair(scores, labels, mask, w) - per_pair(scores, labels, mask),
                               4.0 * pairs_of_top, atol=1e-12, rtol=0)


def test_reductions():
    scores, labels, mask, weights = _batch(seed=130, n_lists=5)
    mask[4] = False  # a row that is all padding is not a query
    for cls in (RankNet, LambdaRank, NDCGLoss2, ListNet):
        per_query = cls(reduction="none")(scores, labels, mask, weights)
        assert per_query.shape == (5,) and float(per_query[4]) == 0.0
        torch.testing.assert_close(cls(reduction="sum")(scores, labels, mask, weights), per_query.sum())
        torch.testing.assert_close(cls(reduction="mean")(scores, labels, mask, weights), per_query.sum() / 4)


def test_block_size_changes_nothing_on_a_long_list():
    g = torch.Generator().manual_seed(5)
    scores = torch.randn(2, 400, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (2, 400), generator=g).double()
    mask = torch.rand(2, 400, generator=g) > 0.2
    for make in (lambda be: RankNet(block_elements=be), lambda be: LambdaRank(k=10, block_elements=be),
                 lambda be: NDCGLoss2PP(block_elements=be)):
        s1 = scores.clone().requires_grad_(True)
        s2 = scores.clone().requires_grad_(True)
        v1, v2 = make(8000)(s1, labels, mask), make(1 << 22)(s2, labels, mask)  # ~40 blocks vs one
        torch.testing.assert_close(v1, v2, atol=1e-10, rtol=1e-12)
        torch.testing.assert_close(torch.autograd.grad(v1, s1)[0], torch.autograd.grad(v2, s2)[0], atol=1e-12, rtol=1e-10)


def test_float32_is_supported():
    scores, labels, mask, weights = _batch(seed=140)
    for loss in _all_losses():
        y = labels.clamp(max=1) if isinstance(loss, PointwiseBCE) else labels
        s = scores.float().requires_grad_(True)
        v = loss(s, y.float(), mask, weights.float())
        v.backward()
        assert v.dtype == torch.float32 and s.grad.dtype == torch.float32
        v64 = loss(scores, y, mask, weights)
        assert float(v.detach()) == pytest.approx(float(v64), rel=1e-5, abs=1e-6)


def test_registry_builds_every_loss_and_names_the_valid_ones():
    expected = {"ranknet": RankNet, "lambdarank": LambdaRank, "ndcg_loss2": NDCGLoss2, "ndcg_loss2pp": NDCGLoss2PP,
                "listnet": ListNet, "bce": PointwiseBCE, "mse": PointwiseMSE}
    for name, cls in expected.items():
        assert type(losses.get_loss(name)) is cls
    built = losses.get_loss("LambdaRank", k=10, sigma=2.0)
    assert (built.k, built.sigma) == (10, 2.0)
    with pytest.raises(ValueError, match="valid names: approx_ndcg, arp_loss1, arp_loss2, bce, hinge, lambdarank, "
                                         "listmle, listnet, mse, ndcg_loss1, ndcg_loss2, ndcg_loss2pp, neural_ndcg, "
                                         "neural_sort_ce, ranknet, softmax"):
        losses.get_loss("lambdamart")
    with pytest.raises(TypeError, match="'ranknet'"):
        losses.get_loss("ranknet", k=10)


def test_bad_inputs_get_clear_errors():
    s = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="labels shape"):
        RankNet()(s, torch.zeros(2, 4), None)
    with pytest.raises(TypeError, match="bool"):
        RankNet()(s, torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="reduction"):
        RankNet(reduction="avg")
    with pytest.raises(ValueError, match="labels in \\[0, 1\\]"):
        PointwiseBCE()(s, torch.full((2, 3), 3.0), None)
    with pytest.raises(ValueError, match="NaN"):
        ListNet()(s, torch.tensor([[0.0, float("nan"), 1.0], [0, 0, 0]]), None)
    with pytest.raises(ValueError, match="metric"):
        LambdaRank(metric="auc")
    with pytest.raises(ValueError, match="non-negative"):
        LambdaRank()(s, torch.zeros(2, 3), None, -torch.ones(2, 3))
    with pytest.raises(ValueError, match="\\[B, L\\]"):
        LambdaRank()(torch.zeros(3), torch.zeros(3), None)
