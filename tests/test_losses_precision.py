"""NDCG-type losses at labels up to 1023 and in float32 / float16 / bfloat16 (issue 25).

The gain 2^y - 1 overflows float32 from y = 128 and a sum of such gains overflows float64 near
y = 1023; before the fix every NDCG-type loss returned NaN (value and gradient) there. The
references below are float64 and built from the evaluation code of ``metrics`` (``metrics.ndcg``
of swapped lists, ``gain_values`` and ``ideal_dcg``), on labels whose float64 ideal DCG is finite.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import losses
import metrics
from losses.approx_ndcg import smooth_ranks
from losses.neural_ndcg import neural_sort, sinkhorn

SCORES = [0.5, -1.25, 2.0, 0.75, 1.5, -0.5]  # exact in float16 and bfloat16
LABELS = [0.0, 128.0, 1023.0, 1000.0, 3.0, 600.0]
# Half precision: the inputs are exact, the loss is computed in float32 and rounded once on return.
RTOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DTYPES = list(RTOL)


def _reference_gains(labels):
    """G = (2^y - 1) / IDCG in float64, straight from metrics (finite for these labels)."""
    g = metrics.gain_values(np.asarray(labels, dtype=np.float64))
    ideal = float(metrics.ideal_dcg(g))
    assert math.isfinite(ideal) and ideal > 0
    return g / ideal


def _ranking(scores):
    return list(np.argsort(-np.asarray(scores), kind="stable"))


def _lambdarank_reference(scores, labels):
    s = np.asarray(scores, dtype=np.float64)
    base = float(metrics.ndcg(s, np.asarray(labels))[0])
    total = 0.0
    for i in range(len(s)):
        for j in range(len(s)):
            if labels[i] > labels[j]:
                swapped = s.copy()
                swapped[[i, j]] = swapped[[j, i]]
                delta = abs(base - float(metrics.ndcg(swapped, np.asarray(labels))[0]))
                total += delta * math.log1p(math.exp(-(s[i] - s[j])))
    return total


def _lambdaloss_reference(scores, labels, kind, mu=10.0):
    """NDCG-Loss2 / 2++ / 1 of the lambdaloss module docstring, in float64 loops."""
    G = _reference_gains(labels)
    order = _ranking(scores)
    rank = {item: r + 1 for r, item in enumerate(order)}
    D = lambda r: math.log2(1.0 + r)  # noqa: E731 (1/discount)
    s = np.asarray(scores, dtype=np.float64)
    total = 0.0
    for i in range(len(s)):
        for j in range(len(s)):
            term = math.log2(1.0 + math.exp(-(s[i] - s[j])))
            if kind == "loss1":
                total += G[i] / D(rank[i]) * term
                continue
            if not labels[i] > labels[j]:
                continue
            ri, rj = rank[i], rank[j]
            dist = abs(ri - rj)
            delta = abs(1.0 / D(dist) - 1.0 / D(dist + 1))
            rho = abs(1.0 / D(ri) - 1.0 / D(rj))
            weight = delta if kind == "loss2" else rho + mu * delta
            total += weight * abs(G[i] - G[j]) * term
    return total


def _approx_reference(scores, labels, temperature=1.0):
    G = _reference_gains(labels)
    s = np.asarray(scores, dtype=np.float64)
    ranks = 1.0 + np.array([sum(1.0 / (1.0 + math.exp(-(s[j] - s[i]) / temperature))
                                for j in range(len(s)) if j != i) for i in range(len(s))])
    return -float(np.sum(G / np.log2(1.0 + ranks)))


def _neural_reference(scores, labels, temperature=1.0):
    G = _reference_gains(labels)
    s = torch.tensor([scores], dtype=torch.float64)
    m = torch.ones_like(s, dtype=torch.bool)
    p = sinkhorn(neural_sort(s, m, temperature), m, 50, 1e-6)[0].numpy()
    d = 1.0 / np.log2(2.0 + np.arange(len(scores)))
    return -float(d @ (p @ G))


CASES = {
    "lambdarank": (lambda: losses.LambdaRank(reduction="sum"), _lambdarank_reference),
    "ndcg_loss2": (lambda: losses.NDCGLoss2(reduction="sum"), lambda s, y: _lambdaloss_reference(s, y, "loss2")),
    "ndcg_loss2pp": (lambda: losses.NDCGLoss2PP(reduction="sum"), lambda s, y: _lambdaloss_reference(s, y, "loss2pp")),
    "ndcg_loss1": (lambda: losses.NDCGLoss1(reduction="sum"), lambda s, y: _lambdaloss_reference(s, y, "loss1")),
    "approx_ndcg": (lambda: losses.ApproxNDCG(reduction="sum"), _approx_reference),
    "neural_ndcg": (lambda: losses.NeuralNDCG(reduction="sum"), _neural_reference),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_large_labels_give_the_float64_reference(name, dtype):
    make, reference = CASES[name]
    expected = reference(SCORES, LABELS)
    s = torch.tensor([SCORES], dtype=dtype, requires_grad=True)
    value = make()(s, torch.tensor([LABELS]))
    value.backward()
    assert value.dtype == dtype
    value = value.detach()
    assert math.isfinite(float(value)) and bool(torch.isfinite(s.grad).all())
    assert float(value) == pytest.approx(expected, rel=RTOL[dtype])
    # The gradient agrees with the float64 run of the same loss (whose value is the reference's).
    s64 = torch.tensor([SCORES], dtype=torch.float64, requires_grad=True)
    make()(s64, torch.tensor([LABELS])).backward()
    scale = float(s64.grad.abs().max())
    np.testing.assert_allclose(s.grad.double().numpy(), s64.grad.numpy(), rtol=0, atol=4 * RTOL[dtype] * scale)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_issue_example_lambdarank_two_items(dtype):
    # Item 1 (label 128) ranks first with score 2; it is the only relevant item, so G = 1 and
    # |ΔNDCG| = 1 - 1/log2(3); loss = |ΔNDCG| * log(1 + e^-(2 - 1)).
    s = torch.tensor([[1.0, 2.0]], dtype=dtype, requires_grad=True)
    value = losses.LambdaRank()(s, torch.tensor([[0.0, 128.0]]))
    value.backward()
    value = value.detach()
    expected = (1.0 - 1.0 / math.log2(3.0)) * math.log1p(math.exp(-1.0))
    assert float(value) == pytest.approx(expected, rel=RTOL[dtype])
    lam = (1.0 - 1.0 / math.log2(3.0)) / (1.0 + math.e)  # |ΔNDCG| * sigmoid(-(s_1 - s_0))
    np.testing.assert_allclose(s.grad.double().numpy(), [[lam, -lam]], rtol=4 * RTOL[dtype])


@pytest.mark.parametrize("name", sorted(CASES))
def test_labels_1023_many_times_are_finite_and_equal_equal_gains(name):
    # Four items at 1023: the float64 ideal DCG itself overflows (4 * 2^1023 > 2^1024), but
    # equal gains are what matters, so the loss equals the one with four labels of 1.
    make, _ = CASES[name]
    s = torch.tensor([SCORES], dtype=torch.float32)
    high = make()(s, torch.tensor([[1023.0, 0.0, 1023.0, 1023.0, 0.0, 1023.0]]))
    low = make()(s, torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0, 1.0]]))
    assert math.isfinite(float(high))
    assert float(high) == pytest.approx(float(low), rel=1e-6)


def test_normalised_gains_match_the_direct_formula_bit_for_bit_on_small_integer_labels():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 5, size=(4, 7)).astype(np.float64)
    mask = rng.random((4, 7)) < 0.8
    for k in (None, 3):
        g = np.where(mask, np.exp2(labels) - 1.0, 0.0)
        ideal = metrics.ideal_dcg(g, k, mask=mask)
        direct = g * np.where(ideal > 0, 1.0 / np.where(ideal > 0, ideal, 1.0), 0.0)[:, None]
        assert np.array_equal(metrics.normalised_gains(labels, k, mask=mask), direct)
        t = metrics.normalised_gains(torch.tensor(labels), k, mask=torch.tensor(mask))
        assert np.array_equal(t.numpy(), direct)


def test_normalised_gains_widen_half_precision_and_keep_large_labels():
    y = torch.tensor([[1023.0, 1022.0, 0.0]])
    out = metrics.normalised_gains(y.to(torch.float16))
    assert out.dtype == torch.float32
    # 2^1023 : 2^1022 = 2 : 1, the label-0 item weighs 0; IDCG = 2 + 1/log2(3).
    np.testing.assert_allclose(out.numpy(), [[2.0 / (2.0 + 1.0 / math.log2(3.0)), 1.0 / (2.0 + 1.0 / math.log2(3.0)), 0.0]],
                               rtol=1e-6)


def test_swap_deltas_of_huge_equal_labels_equal_those_of_label_one():
    scores = np.array([0.3, 2.0, -1.0, 0.7])
    high = metrics.ndcg_swap_deltas(scores, np.array([1023.0, 1023.0, 0.0, 1023.0]))
    low = metrics.ndcg_swap_deltas(scores, np.array([1.0, 1.0, 0.0, 1.0]))
    assert np.isfinite(high).all()
    np.testing.assert_allclose(high, low, rtol=1e-12, atol=0)
    deltas, _ = metrics.ndcg_swap_deltas_torch(torch.tensor(scores[None], dtype=torch.bfloat16),
                                               torch.tensor([[1023.0, 1023.0, 0.0, 1023.0]]))
    assert deltas.dtype == torch.bfloat16 and bool(torch.isfinite(deltas).all())
