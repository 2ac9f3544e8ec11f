"""Pairwise and LambdaLoss-family losses (NDCG-Loss1, ARP-Loss1/2, LambdaLoss@K of Jagerman et al.,
pairwise hinge, label-difference pair weights, pair reductions) against the published formulas
written out pair by pair in plain Python, plus gradients, padding and shift invariance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from loss_checks import check_padding_changes_nothing, check_shift_changes_nothing, random_batch

import metrics
from losses import (
    ARPLoss1,
    ARPLoss2,
    LambdaRank,
    NDCGLoss1,
    NDCGLoss2,
    NDCGLoss2PP,
    PairwiseHinge,
    RankNet,
    get_loss,
)


def _batch(seed, n_lists=4, max_len=8, levels=4, dtype=torch.float64):
    return random_batch(seed, n_lists, max_len, levels, dtype=dtype)


def _query(scores, labels, mask, weights, b):
    """Real items of query b as python lists, with their 1-based rank (stable descending score)."""
    idx = [int(i) for i in torch.nonzero(mask[b]).flatten()]
    s = [float(scores[b, i]) for i in idx]
    y = [float(labels[b, i]) for i in idx]
    w = [1.0] * len(idx) if weights is None else [float(weights[b, i]) for i in idx]
    ranked = sorted(range(len(idx)), key=lambda i: (-s[i], i))
    rank = {item: r for r, item in enumerate(ranked, start=1)}
    return s, y, w, rank


def _log2_logistic(x, sigma=1.0):
    return math.log2(1.0 + math.exp(-sigma * x))


def _max_dcg(y, k=None):
    ideal = sorted((2.0**v - 1 for v in y if v > 0), reverse=True)[:k]
    return sum(g / math.log2(1 + r) for r, g in enumerate(ideal, start=1))


def ndcg_loss1_ref(s, y, w, rank, sigma=1.0, k=None):
    max_dcg = _max_dcg(y, k)
    total = 0.0
    for i in range(len(s)):
        g = (2.0 ** y[i] - 1) / max_dcg if max_dcg > 0 else 0.0
        d = math.log2(1 + rank[i])
        weight = g / d if (k is None or rank[i] <= k) else 0.0
        total += sum(w[i] * weight * _log2_logistic(s[i] - s[j], sigma) for j in range(len(s)))
    return total


def arp_loss1_ref(s, y, w, rank, sigma=1.0):
    return sum(w[i] * y[i] * _log2_logistic(s[i] - s[j], sigma) for i in range(len(s)) for j in range(len(s)))


def arp_loss2_ref(s, y, w, rank, sigma=1.0):
    return sum(w[i] * abs(y[i] - y[j]) * _log2_logistic(s[i] - s[j], sigma)
               for i in range(len(s)) for j in range(len(s)) if y[i] > y[j])


def lambdaloss_at_k_ref(s, y, w, rank, k, mu, with_rho):
    """NDCG-Loss2(++) with the top-K weighting of Jagerman et al. 2022 (all pairs kept)."""
    max_dcg = _max_dcg(y, k)
    inv_d = lambda r: 1.0 / math.log2(1 + r)  # noqa: E731
    total = 0.0
    for i in range(len(s)):
        for j in range(len(s)):
            if y[i] <= y[j] or max_dcg == 0:
                continue
            gi, gj = (2.0 ** y[i] - 1) / max_dcg, (2.0 ** y[j] - 1) / max_dcg
            n = abs(rank[i] - rank[j])
            delta = abs(inv_d(n) - inv_d(n + 1))
            top = max(rank[i], rank[j])
            if top > k:
                delta /= 1.0 - inv_d(top)
            cut = lambda r: inv_d(r) if r <= k else 0.0  # noqa: E731
            rho = abs(cut(rank[i]) - cut(rank[j]))
            total += w[i] * (mu * delta + (rho if with_rho else 0.0)) * abs(gi - gj) * _log2_logistic(s[i] - s[j])
    return total


def hinge_ref(s, y, w, rank, margin):
    return sum(w[i] * max(0.0, margin - (s[i] - s[j])) for i in range(len(s)) for j in range(len(s)) if y[i] > y[j])


def _check_per_query(loss, ref, seed, with_weights=True, **kw):
    scores, labels, mask, weights = _batch(seed, **kw)
    w = weights if with_weights else None
    got = loss(scores, labels, mask, w)
    want = [ref(*_query(scores, labels, mask, w, b)) for b in range(scores.shape[0])]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sigma,k", [(1.0, None), (2.0, None), (1.0, 3)])
def test_ndcg_loss1_matches_the_paper(sigma, k):
    _check_per_query(NDCGLoss1(sigma=sigma, k=k, reduction="none"),
                     lambda *q: ndcg_loss1_ref(*q, sigma=sigma, k=k), seed=1)


@pytest.mark.parametrize("sigma", [1.0, 0.5])
def test_arp_losses_match_the_paper(sigma):
    _check_per_query(ARPLoss1(sigma=sigma, reduction="none"), lambda *q: arp_loss1_ref(*q, sigma=sigma), seed=2)
    _check_per_query(ARPLoss2(sigma=sigma, reduction="none"), lambda *q: arp_loss2_ref(*q, sigma=sigma), seed=3)


def test_arp_loss1_bounds_arp_and_arp_loss2_is_label_diff_ranknet_in_log2():
    scores, labels, mask, _ = _batch(4)
    bound = ARPLoss1(reduction="none")(scores, labels, mask)
    for b in range(scores.shape[0]):
        s, y, _, rank = _query(scores, labels, mask, None, b)
        assert float(bound[b]) >= sum(yi * rank[i] for i, yi in enumerate(y)) - 1e-12  # ARP
    ranknet = RankNet(pair_weight="label_diff", reduction="none")(scores, labels, mask)
    torch.testing.assert_close(ARPLoss2(reduction="none")(scores, labels, mask), ranknet / math.log(2.0),
                               atol=1e-12, rtol=0)


@pytest.mark.parametrize("k,mu,with_rho", [(2, 1.0, False), (4, 1.0, False), (3, 10.0, True), (1, 5.0, True)])
def test_jagerman_top_k_weighting_matches_lambdaloss_at_k(k, mu, with_rho):
    loss = (NDCGLoss2PP(k=k, mu=mu, k_method="jagerman", reduction="none") if with_rho
            else NDCGLoss2(k=k, k_method="jagerman", reduction="none"))
    _check_per_query(loss, lambda *q: lambdaloss_at_k_ref(*q, k=k, mu=mu, with_rho=with_rho), seed=5)


def test_jagerman_keeps_the_pairs_below_k_that_truncation_drops():
    # the only relevant item is ranked last, far below K: truncation builds only its pairs with the
    # top K; LambdaLoss@K also pulls it past the items between, so its gradient is larger
    scores = torch.linspace(2.0, -2.0, 8, dtype=torch.float64)[None].clone().requires_grad_(True)
    labels = torch.zeros(1, 8, dtype=torch.float64)
    labels[0, -1] = 1.0
    g = {}
    for method in ("truncate", "jagerman"):
        (g[method],) = torch.autograd.grad(NDCGLoss2(k=2, k_method=method)(scores, labels), scores)
    assert float(g["truncate"][0, 3]) == 0.0 and float(g["jagerman"][0, 3]) > 0.0  # an item between
    assert float(g["jagerman"][0, -1]) < float(g["truncate"][0, -1]) < 0.0
    # without k the two methods are the same loss
    s, y, m, w = _batch(6)
    torch.testing.assert_close(NDCGLoss2PP(k_method="jagerman")(s, y, m, w), NDCGLoss2PP()(s, y, m, w))


@pytest.mark.parametrize("margin", [1.0, 0.3, 0.0])
def test_pairwise_hinge_matches_its_formula(margin):
    _check_per_query(PairwiseHinge(margin=margin, reduction="none"), lambda *q: hinge_ref(*q, margin=margin), seed=7)


def _delta_ndcg(s, y, i, j, k=None):
    before = metrics.ndcg(np.array(s), np.array(y), None, k, empty="zero")[0]
    y2 = list(y)
    y2[i], y2[j] = y2[j], y2[i]
    return abs(metrics.ndcg(np.array(s), np.array(y2), None, k, empty="zero")[0] - before)


def test_label_diff_pair_weights_for_ranknet_and_lambdarank():
    def ranknet_ref(s, y, w, rank):
        return sum(w[i] * abs(y[i] - y[j]) * math.log1p(math.exp(-(s[i] - s[j])))
                   for i in range(len(s)) for j in range(len(s)) if y[i] > y[j])

    def lambdarank_ref(s, y, w, rank, k=4):
        return sum(w[i] * abs(y[i] - y[j]) * _delta_ndcg(s, y, i, j, k) * math.log1p(math.exp(-(s[i] - s[j])))
                   for i in range(len(s)) for j in range(len(s))
                   if y[i] > y[j] and min(rank[i], rank[j]) <= k)

    _check_per_query(RankNet(pair_weight="label_diff", reduction="none"), ranknet_ref, seed=8)
    _check_per_query(LambdaRank(k=4, pair_weight="label_diff", reduction="none"), lambdarank_ref, seed=9)


def _pair_stats(scores, labels, mask, weights, pair_weight=None, top=None):
    n_pairs, weight_sum = 0, 0.0
    for b in range(scores.shape[0]):
        s, y, w, rank = _query(scores, labels, mask, weights, b)
        for i in range(len(s)):
            for j in range(len(s)):
                if y[i] > y[j] and (top is None or min(rank[i], rank[j]) <= top):
                    n_pairs += 1
                    weight_sum += w[i] * (1.0 if pair_weight is None else pair_weight(s, y, rank, i, j))
    return n_pairs, weight_sum


def test_pair_reductions_average_over_pairs_or_pair_weights():
    scores, labels, mask, weights = _batch(10)
    mask[3] = False  # a row of padding holds no pair
    for loss_cls, kwargs, pw, top in (
            (RankNet, {}, None, None),
            (RankNet, {"pair_weight": "label_diff"}, lambda s, y, r, i, j: abs(y[i] - y[j]), None),
            (PairwiseHinge, {"margin": 0.5}, None, None),
            (LambdaRank, {"k": 3}, lambda s, y, r, i, j: _delta_ndcg(s, y, i, j, 3), 3),
            (ARPLoss2, {}, lambda s, y, r, i, j: abs(y[i] - y[j]), None)):
        total = loss_cls(reduction="sum", **kwargs)(scores, labels, mask, weights)
        n_pairs, weight_sum = _pair_stats(scores, labels, mask, weights, pw, top)
        pair_mean = loss_cls(reduction="pair_mean", **kwargs)(scores, labels, mask, weights)
        weight_mean = loss_cls(reduction="weight_mean", **kwargs)(scores, labels, mask, weights)
        assert float(pair_mean) == pytest.approx(float(total) / n_pairs, rel=1e-12)
        assert float(weight_mean) == pytest.approx(float(total) / weight_sum, rel=1e-10)
    # the Loss1 bounds count every ordered pair (n^2 per query)
    n2 = int((mask.sum(1) ** 2).sum())
    total = ARPLoss1(reduction="sum")(scores, labels, mask)
    assert float(ARPLoss1(reduction="pair_mean")(scores, labels, mask)) == pytest.approx(float(total) / n2)
    assert float(ARPLoss1(reduction="weight_mean")(scores, labels, mask)) == pytest.approx(
        float(total) / float((labels * mask).sum(1).mul(mask.sum(1)).sum()))
    # no pair at all: 0, not NaN
    same = torch.ones(2, 3, dtype=torch.float64)
    assert float(RankNet(reduction="pair_mean")(scores[:2, :3], same)) == 0.0


def _losses():
    return [NDCGLoss1(), NDCGLoss1(k=3), ARPLoss1(), ARPLoss2(), NDCGLoss2(k=3, k_method="jagerman"),
            NDCGLoss2PP(k=2, k_method="jagerman"), PairwiseHinge(), PairwiseHinge(margin=0.2, pair_weight="label_diff"),
            RankNet(pair_weight="label_diff", reduction="pair_mean"), LambdaRank(pair_weight="label_diff"),
            LambdaRank(k=3, reduction="weight_mean")]


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_padding_changes_nothing(loss):
    check_padding_changes_nothing(loss, _batch(11), n_pad=3, label_fill=7.0)


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_constant_shift_changes_nothing(loss):
    check_shift_changes_nothing(loss, _batch(12), [3.0, -7.5, 0.25, 100.0])


@pytest.mark.parametrize("loss", [NDCGLoss1(sigma=0.7), ARPLoss1(), ARPLoss2(sigma=1.5),
                                  NDCGLoss2PP(k=2, k_method="jagerman"), PairwiseHinge(margin=0.3),
                                  RankNet(pair_weight="label_diff", reduction="pair_mean"),
                                  LambdaRank(k=3, pair_weight="label_diff", reduction="weight_mean")], ids=repr)
def test_gradcheck_float64(loss):
    _, labels, mask, weights = _batch(13, n_lists=2, max_len=5, levels=3)
    # well-separated scores (0.5 apart): the ranking stays put under eps and no hinge sits on its kink
    scores = torch.argsort(torch.randn(2, 5, generator=torch.Generator().manual_seed(0)), 1).double() * 0.5
    scores.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: loss(s, labels, mask, weights), (scores,), eps=1e-6, atol=1e-7)


def test_long_list_blocks_change_nothing():
    g = torch.Generator().manual_seed(5)
    scores = torch.randn(2, 300, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (2, 300), generator=g).double()
    mask = torch.rand(2, 300, generator=g) > 0.2
    for make in (lambda be: NDCGLoss1(block_elements=be), lambda be: ARPLoss1(block_elements=be),
                 lambda be: PairwiseHinge(block_elements=be),
                 lambda be: NDCGLoss2PP(k=10, k_method="jagerman", block_elements=be)):
        s1, s2 = scores.clone().requires_grad_(True), scores.clone().requires_grad_(True)
        v1, v2 = make(5000)(s1, labels, mask), make(1 << 22)(s2, labels, mask)
        torch.testing.assert_close(v1, v2, atol=1e-10, rtol=1e-12)
        torch.testing.assert_close(torch.autograd.grad(v1, s1)[0], torch.autograd.grad(v2, s2)[0],
                                   atol=1e-12, rtol=1e-10)


def test_registry_and_clear_errors():
    for name, cls in (("ndcg_loss1", NDCGLoss1), ("arp_loss1", ARPLoss1), ("arp_loss2", ARPLoss2),
                      ("hinge", PairwiseHinge)):
        assert type(get_loss(name)) is cls
    assert get_loss("ndcg_loss2pp", k=5, k_method="jagerman").k_method == "jagerman"
    assert get_loss("ranknet", pair_weight="label_diff", reduction="pair_mean").pair_weight == "label_diff"
    with pytest.raises(ValueError, match="k_method"):
        NDCGLoss2(k_method="lightgbm")
    with pytest.raises(ValueError, match="pair_weight"):
        RankNet(pair_weight="ndcg")
    with pytest.raises(ValueError, match="reduction"):
        get_loss("listnet", reduction="pair_mean")  # listwise: no pairs to average over
    with pytest.raises(ValueError, match="non-negative labels"):
        ARPLoss1()(torch.zeros(1, 2), torch.tensor([[-1.0, 0.0]]))
    with pytest.raises(ValueError, match="margin"):
        PairwiseHinge(margin=-1.0)
    with pytest.raises(ValueError, match="discount below 1"):
        NDCGLoss2(k=1, k_method="jagerman", discount=[1.0, 1.0, 1.0])(torch.zeros(1, 3), torch.tensor([[1.0, 0, 0]]))
