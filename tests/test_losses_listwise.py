"""Listwise losses (softmax CE, ListMLE, ApproxNDCG, NeuralNDCG) against their published formulas
written out item by item in plain Python/numpy, plus gradients, padding and shift invariance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from loss_checks import check_padding_changes_nothing, check_shift_changes_nothing, random_batch

import metrics
from losses import (
    ApproxNDCG,
    ListMLE,
    ListNet,
    NeuralNDCG,
    SoftmaxCrossEntropy,
    get_loss,
)


def _batch(seed, n_lists=4, max_len=7, levels=4, dtype=torch.float64):
    return random_batch(seed, n_lists, max_len, levels, scale=1.5, dtype=dtype)


def _real(b, *tensors, mask):
    idx = [int(i) for i in torch.nonzero(mask[b]).flatten()]
    return [[float(t[b, i]) for i in idx] for t in tensors]


def _idcg(gains, k=None):
    ideal = sorted((g for g in gains if g > 0), reverse=True)[:k]
    return sum(g / math.log2(r + 1) for r, g in enumerate(ideal, start=1))


# ------------------------------------------------------------------ references, one query at a time
def softmax_ce_ref(s, y, w):
    lse = math.log(sum(math.exp(v) for v in s))
    return -sum(wi * yi * (si - lse) for si, yi, wi in zip(s, y, w))


def listmle_ref(s, y, w, ties):
    items = range(len(s))
    key = (lambda i: (-y[i], -s[i], i)) if ties == "score" else (lambda i: (-y[i], i))
    perm = sorted(items, key=key)
    total = 0.0
    for pos, i in enumerate(perm):
        tail = math.log(sum(math.exp(s[j]) for j in perm[pos:]))
        total += w[i] * (tail - s[i])
    return total


def approx_ndcg_ref(s, y, w, temperature):
    gains = [2.0**v - 1 for v in y]
    idcg = _idcg(gains)
    if idcg == 0:
        return 0.0
    dcg = 0.0
    for i in range(len(s)):
        rank = 1.0 + sum(1.0 / (1.0 + math.exp(-(s[j] - s[i]) / temperature)) for j in range(len(s)) if j != i)
        dcg += w[i] * gains[i] / math.log2(1.0 + rank)
    return -dcg / idcg


def neural_ndcg_ref(s, y, w, temperature, k, iterations):
    s, n = np.array(s), len(s)
    gains = (2.0 ** np.array(y) - 1.0) * np.array(w)
    idcg = _idcg(list(2.0 ** np.array(y) - 1.0), k)
    if idcg == 0:
        return 0.0
    a_one = np.array([sum(abs(s[j] - s[m]) for m in range(n)) for j in range(n)])
    p = np.zeros((n, n))
    for i in range(1, n + 1):
        row = ((n + 1 - 2 * i) * s - a_one) / temperature
        row = np.exp(row - row.max())
        p[i - 1] = row / row.sum()
    for _ in range(iterations):
        p = p / p.sum(axis=0, keepdims=True)
        p = p / p.sum(axis=1, keepdims=True)
    cut = n if k is None else min(k, n)
    return -sum((p[i] @ gains) / math.log2(i + 2) for i in range(cut)) / idcg


def _per_query(loss, ref, seed, **kw):
    scores, labels, mask, weights = _batch(seed, **kw)
    got = loss(scores, labels, mask, weights)
    want = [ref(*_real(b, scores, labels, weights, mask=mask)) for b in range(scores.shape[0])]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    return got


def test_softmax_ce_matches_its_formula_and_differs_from_listnet_by_the_label_sum():
    got = _per_query(SoftmaxCrossEntropy(reduction="none"), softmax_ce_ref, seed=1)
    scores, labels, mask, weights = _batch(1)
    linear = ListNet(target="linear", reduction="none")(scores, labels, mask, weights)
    label_sum = labels.masked_fill(~mask, 0).sum(1)
    torch.testing.assert_close(got, linear * label_sum, atol=1e-12, rtol=0)
    assert float((got - ListNet(reduction="none")(scores, labels, mask, weights)).abs().max()) > 1e-3


@pytest.mark.parametrize("ties", ["score", "input"])
def test_listmle_matches_plackett_luce_with_its_tie_rule(ties):
    _per_query(ListMLE(ties=ties, reduction="none"), lambda s, y, w: listmle_ref(s, y, w, ties), seed=2, levels=3)


def test_listmle_is_minus_log_likelihood_and_score_ties_do_not_depend_on_input_order():
    # distinct labels: the loss is -log of the Plackett-Luce probability of the label order
    s = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 2.0, 0.0]], dtype=torch.float64)
    p = math.exp(-1.2) / (math.exp(0.3) + math.exp(-1.2) + math.exp(2.0)) * math.exp(0.3) / (math.exp(0.3) + math.exp(2.0))
    assert float(ListMLE(reduction="sum")(s, y)) == pytest.approx(-math.log(p), abs=1e-12)
    scores, labels, mask, _ = _batch(3, levels=2)
    perm = torch.randperm(scores.shape[1], generator=torch.Generator().manual_seed(0))
    for ties, invariant in (("score", True), ("input", False)):
        loss = ListMLE(ties=ties, reduction="none")
        a, b = loss(scores, labels, mask), loss(scores[:, perm], labels[:, perm], mask[:, perm])
        assert bool(torch.allclose(a, b, atol=1e-12)) is invariant


@pytest.mark.parametrize("temperature", [1.0, 0.3])
def test_approx_ndcg_matches_its_formula(temperature):
    _per_query(ApproxNDCG(temperature=temperature, reduction="none"),
               lambda s, y, w: approx_ndcg_ref(s, y, w, temperature), seed=4)


@pytest.mark.parametrize("temperature,k", [(1.0, None), (0.5, 3)])
def test_neural_ndcg_matches_neuralsort_plus_sinkhorn(temperature, k):
    loss = NeuralNDCG(temperature=temperature, k=k, sinkhorn_iters=20, tol=0.0, reduction="none")
    _per_query(loss, lambda s, y, w: neural_ndcg_ref(s, y, w, temperature, k, 20), seed=5)


def test_smooth_losses_tend_to_minus_ndcg_at_low_temperature():
    scores, labels, mask, _ = _batch(6, n_lists=3, max_len=6)
    for b in range(3):
        s, y = _real(b, scores, labels, mask=mask)
        for k in (None, 3):
            exact = metrics.ndcg(np.array(s), np.array(y), None, k, empty="zero")[0]
            neural = NeuralNDCG(temperature=1e-3, k=k, reduction="sum")(torch.tensor([s]), torch.tensor([y]))
            assert float(neural) == pytest.approx(-exact, abs=1e-6)
        exact = metrics.ndcg(np.array(s), np.array(y), None, None, empty="zero")[0]
        approx = ApproxNDCG(temperature=1e-3, reduction="sum")(torch.tensor([s]), torch.tensor([y]))
        assert float(approx) == pytest.approx(-exact, abs=1e-6)


def _losses():
    return [SoftmaxCrossEntropy(), ListMLE(), ListMLE(ties="input"), ApproxNDCG(), ApproxNDCG(temperature=0.2),
            NeuralNDCG(), NeuralNDCG(k=3, temperature=0.5)]


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_padding_changes_nothing(loss):
    check_padding_changes_nothing(loss, _batch(7), n_pad=2, label_fill=9.0)


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_constant_shift_changes_nothing(loss):
    check_shift_changes_nothing(loss, _batch(8), [3.0, -7.5, 0.25, 40.0])


@pytest.mark.parametrize("loss", [SoftmaxCrossEntropy(), ListMLE(), ApproxNDCG(temperature=0.5),
                                  NeuralNDCG(temperature=0.7, k=3, sinkhorn_iters=10, tol=0.0)], ids=repr)
def test_gradcheck_float64(loss):
    _, labels, mask, weights = _batch(9, n_lists=2, max_len=5)
    # distinct scores: ListMLE's tie order (by score) stays put under eps
    scores = torch.argsort(torch.randn(2, 5, generator=torch.Generator().manual_seed(1)), 1).double() * 0.4
    scores.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: loss(s, labels, mask, weights), (scores,), eps=1e-6, atol=1e-7)


def test_reductions_and_one_item_queries():
    scores, labels, mask, weights = _batch(10, n_lists=5)
    mask[4] = False
    mask[3] = False
    mask[3, 2] = True  # a query of one item
    for cls in (SoftmaxCrossEntropy, ListMLE, ApproxNDCG, NeuralNDCG):
        per_query = cls(reduction="none")(scores, labels, mask, weights)
        assert per_query.shape == (5,) and float(per_query[4]) == 0.0 and math.isfinite(float(per_query[3]))
        torch.testing.assert_close(cls(reduction="mean")(scores, labels, mask, weights), per_query.sum() / 4)
    # one item: ListMLE and softmax cost nothing; the NDCG losses are -1 (if relevant)
    one = torch.tensor([[0.7]], dtype=torch.float64)
    assert float(ListMLE()(one, torch.ones(1, 1))) == 0.0 and float(SoftmaxCrossEntropy()(one, torch.ones(1, 1))) == 0.0
    assert float(NeuralNDCG()(one, torch.ones(1, 1))) == pytest.approx(-1.0)
    assert float(ApproxNDCG()(one, torch.ones(1, 1))) == pytest.approx(-1.0)


def test_registry_and_clear_errors():
    assert isinstance(get_loss("softmax"), SoftmaxCrossEntropy)
    assert get_loss("listmle", ties="input").ties == "input"
    assert get_loss("approx_ndcg", temperature=0.1).temperature == 0.1
    assert get_loss("neural_ndcg", k=5).k == 5
    with pytest.raises(ValueError, match="ties"):
        ListMLE(ties="random")
    with pytest.raises(ValueError, match="temperature"):
        ApproxNDCG(temperature=0)
    with pytest.raises(ValueError, match="non-negative"):
        SoftmaxCrossEntropy()(torch.zeros(1, 2), torch.tensor([[-1.0, 0.0]]))
    with pytest.raises(ValueError, match="smooth discount"):
        ApproxNDCG(discount=[1.0, 0.5])


def test_float32_matches_float64():
    scores, labels, mask, weights = _batch(11)
    for loss in _losses():
        v32 = loss(scores.float(), labels.float(), mask, weights.float())
        assert v32.dtype == torch.float32
        assert float(v32) == pytest.approx(float(loss(scores, labels, mask, weights)), rel=1e-5, abs=1e-6)


def test_listmle_permutations_sum_to_one():
    # exp(-ListMLE) over all orderings of distinct labels is a probability distribution
    s = torch.tensor([[0.4, -0.3, 1.1, 0.0]], dtype=torch.float64)
    total = 0.0
    for perm in itertools.permutations(range(4)):
        y = torch.zeros(1, 4, dtype=torch.float64)
        y[0, list(perm)] = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=torch.float64)
        total += math.exp(-float(ListMLE(reduction="sum")(s, y)))
    assert total == pytest.approx(1.0, abs=1e-12)
