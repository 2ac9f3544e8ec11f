"""The peers' loss options (issue 25): lambda weights on the hinge and on softmax cross-entropy,
NeuralSort cross-entropy, BCE on graded labels, ListNet's eps. Each value is the docstring's formula
computed by hand (plain Python / numpy) on a small case."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import losses
from losses import (LambdaRank, ListNet, NDCGLoss2, NeuralSortCrossEntropy, PairwiseHinge, PointwiseBCE, RankNet,
                    SoftmaxCrossEntropy)

# Three items: scores rank item 2 first, then item 0, then item 1.
S = [0.5, 0.0, 1.0]
Y = [2.0, 0.0, 1.0]
RANK = {2: 1, 0: 2, 1: 3}
d = lambda r: 1.0 / math.log2(1.0 + r)  # noqa: E731  (discount; D(r) = 1/d(r))
IDCG = 3.0 + 1.0 / math.log2(3.0)  # gains 2^y - 1 = 3, 0, 1
G = [3.0 / IDCG, 0.0, 1.0 / IDCG]
PAIRS = [(0, 1), (0, 2), (2, 1)]  # (better, worse)


def _tensor(values):
    return torch.tensor([values], dtype=torch.float64)


def _hinge(i, j, margin=1.0):
    return max(0.0, margin - (S[i] - S[j]))


def _ndcg_weight(i, j):
    return abs(G[i] - G[j]) * abs(d(RANK[i]) - d(RANK[j]))


def _ndcg2_weight(i, j, g=G, jagerman_k=None):
    dist = abs(RANK[i] - RANK[j])
    w = abs(g[i] - g[j]) * abs(d(dist) - d(dist + 1))
    worst = max(RANK[i], RANK[j])
    if jagerman_k is not None and worst > jagerman_k:
        w /= 1.0 - d(worst)
    return w


def test_hinge_with_ndcg_lambda_weight_is_the_hand_formula():
    expected = sum(_ndcg_weight(i, j) * _hinge(i, j) for i, j in PAIRS)
    value = PairwiseHinge(reduction="sum", lambda_weight="ndcg")(_tensor(S), _tensor(Y))
    assert float(value) == pytest.approx(expected, rel=1e-12)
    assert expected > 0.1  # two of the three pairs are inside the margin


def test_hinge_with_ndcg2_and_jagerman_top_k_are_the_hand_formula():
    expected = sum(_ndcg2_weight(i, j) * _hinge(i, j) for i, j in PAIRS)
    value = PairwiseHinge(reduction="sum", lambda_weight="ndcg2")(_tensor(S), _tensor(Y))
    assert float(value) == pytest.approx(expected, rel=1e-12)
    # Top-1 (Jagerman): IDCG@1 = 3, every pair kept, pairs reaching below rank 1 scaled by 1/(1 - d(max rank)).
    g1 = [1.0, 0.0, 1.0 / 3.0]
    expected_k = sum(_ndcg2_weight(i, j, g1, jagerman_k=1) * _hinge(i, j) for i, j in PAIRS)
    value_k = PairwiseHinge(reduction="sum", lambda_weight="ndcg2", k=1, k_method="jagerman")(_tensor(S), _tensor(Y))
    assert float(value_k) == pytest.approx(expected_k, rel=1e-12)


def test_ranknet_with_lambda_weights_is_lambdarank_and_ndcg_loss2():
    gen = torch.Generator().manual_seed(5)
    s = torch.randn(4, 9, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (4, 9), generator=gen).double()
    mask = torch.rand(4, 9, generator=gen) < 0.85
    for k in (None, 3):
        a = s.clone().requires_grad_(True)
        b = s.clone().requires_grad_(True)
        RankNet(lambda_weight="ndcg", k=k)(a, y, mask).backward()
        LambdaRank(k=k)(b, y, mask).backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-14)
    ranknet2 = float(RankNet(lambda_weight="ndcg2", reduction="sum")(s, y, mask))
    loss2 = float(NDCGLoss2(reduction="sum")(s, y, mask))  # the same weights in log2
    assert ranknet2 == pytest.approx(loss2 * math.log(2.0), rel=1e-12)


def test_softmax_with_ndcg_lambda_weight_replaces_labels_by_ndcg_shares():
    p = np.exp(S) / np.exp(S).sum()
    target = [G[i] * d(RANK[i]) for i in range(3)]
    expected = -sum(t * math.log(pi) for t, pi in zip(target, p))
    value = SoftmaxCrossEntropy(reduction="sum", lambda_weight="ndcg")(_tensor(S), _tensor(Y))
    assert float(value) == pytest.approx(expected, rel=1e-12)
    # Cut at K = 1: only the item at rank 1 (item 2) keeps a target, G_2 = 1 / IDCG@1 = 1/3.
    value_k = SoftmaxCrossEntropy(reduction="sum", lambda_weight="ndcg", k=1)(_tensor(S), _tensor(Y))
    assert float(value_k) == pytest.approx(-(1.0 / 3.0) * math.log(p[2]), rel=1e-12)


def test_softmax_k_rule_ideal_is_tf_rankings_dcg_lambda_weight_with_topn():
    """TF-Ranking's DCGLambdaWeight(topn=K, normalized=True).individual_weights: gain * inverse_max_dcg(topn=K)
    * rank_discount at every rank, the ideal DCG alone cut at K (losses_impl.py, AbstractDCGLambdaWeight)."""
    p = np.exp(S) / np.exp(S).sum()
    idcg_1 = 3.0  # the best gain at rank 1
    target = [(2.0 ** Y[i] - 1.0) / idcg_1 * d(RANK[i]) for i in range(3)]  # every rank kept
    expected = -sum(t * math.log(pi) for t, pi in zip(target, p))
    value = SoftmaxCrossEntropy(reduction="sum", lambda_weight="ndcg", k=1, k_rule="ideal")(_tensor(S), _tensor(Y))
    assert float(value) == pytest.approx(expected, rel=1e-12)
    # the item of label 2 at rank 2 keeps 1 / log2(3) of its gain share, where k_rule="items" gives it 0
    assert target[0] == pytest.approx(1.0 / math.log2(3.0), rel=1e-12)
    items = SoftmaxCrossEntropy(reduction="sum", lambda_weight="ndcg", k=1)(_tensor(S), _tensor(Y))
    assert float(items) == pytest.approx(-(1.0 / 3.0) * math.log(p[2]), rel=1e-12) and float(items) < float(value)
    # without a cutoff the two rules are the same weights
    a, b = (SoftmaxCrossEntropy(reduction="sum", lambda_weight="ndcg", k_rule=r)(_tensor(S), _tensor(Y))
            for r in ("items", "ideal"))
    assert float(a) == float(b)
    with pytest.raises(ValueError, match="k_rule must be one of"):
        SoftmaxCrossEntropy(lambda_weight="ndcg", k=1, k_rule="topn")
    assert "k_rule='ideal'" in repr(SoftmaxCrossEntropy(lambda_weight="ndcg", k=1, k_rule="ideal"))


def test_lambda_weight_options_are_checked():
    with pytest.raises(ValueError, match="lambda_weight must be"):
        PairwiseHinge(lambda_weight="map")
    with pytest.raises(ValueError, match="jagerman"):
        PairwiseHinge(lambda_weight="ndcg", k=3, k_method="jagerman")
    with pytest.raises(ValueError, match="lambda_weight must be"):
        SoftmaxCrossEntropy(lambda_weight="ndcg2")
    with pytest.raises(TypeError, match="'hinge'.*lambda_weight"):
        losses.get_loss("hinge", k=5)
    assert "lambda_weight='ndcg2', k=None" in repr(losses.get_loss("ranknet", lambda_weight="ndcg2"))


def _neural_sort_np(v, tau):
    n = len(v)
    a = np.abs(v[:, None] - v[None, :]).sum(axis=1)
    rows = []
    for i in range(1, n + 1):
        z = ((n + 1 - 2 * i) * v - a) / tau
        e = np.exp(z - z.max())
        rows.append(e / e.sum())
    return np.array(rows)


def test_neural_sort_cross_entropy_is_the_hand_formula_with_padding_and_weights():
    s = np.array([0.3, -1.0, 2.0, 0.7])
    y = np.array([1.0, 0.0, 3.0, 1.0])
    w = np.array([1.0, 2.0, 0.5, 1.5])
    t = 0.5
    target, model = _neural_sort_np(y, 1.0), _neural_sort_np(s, t)
    expected = -np.sum(target * np.log(model + 1e-20) * w[None, :]) / 4.0
    pad = torch.tensor([[True, True, True, True, False]])
    scores = torch.tensor([[*s, 9.0]], dtype=torch.float64)
    labels = torch.tensor([[*y, 7.0]], dtype=torch.float64)
    weights = torch.tensor([[*w, 3.0]], dtype=torch.float64)
    value = NeuralSortCrossEntropy(temperature=t, reduction="sum")(scores, labels, pad, weights)
    assert float(value) == pytest.approx(float(expected), rel=1e-10)
    # A query of all-zero labels contributes 0; the loss is registered under its name.
    zero = losses.get_loss("neural_sort_ce", reduction="none")(scores, torch.zeros_like(labels), pad)
    assert zero.tolist() == [0.0]


def test_neural_sort_cross_entropy_gradient_lowers_the_loss():
    s = torch.tensor([[0.0, 1.0, 2.0]], requires_grad=True)
    y = torch.tensor([[2.0, 1.0, 0.0]])
    loss = NeuralSortCrossEntropy()
    value = loss(s, y)
    value.backward()
    assert s.grad[0, 0] < 0 < s.grad[0, 2]  # pushes the best-labelled item up, the worst down
    assert float(loss(s.detach() - 0.1 * s.grad, y)) < float(value.detach())


def test_bce_label_rules_follow_their_definitions():
    s = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    y = torch.tensor([[3.0, 0.5, 1.0]], dtype=torch.float64)
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731  (= -log(1 - sigmoid(x)))
    # as_given (TF-Ranking): softplus(s) - y s for every label, 3 included.
    as_given = sum(softplus(a) - b * a for a, b in zip([0.5, -1.0, 2.0], [3.0, 0.5, 1.0]))
    assert float(PointwiseBCE("sum", label_rule="as_given")(s, y)) == pytest.approx(as_given, rel=1e-12)
    # binarize (Rax v0.1.0 and v0.2.0): targets 1, 0, 1.
    binarized = sum(softplus(a) - b * a for a, b in zip([0.5, -1.0, 2.0], [1.0, 0.0, 1.0]))
    assert float(PointwiseBCE("sum", label_rule="binarize")(s, y)) == pytest.approx(binarized, rel=1e-12)
    # clip (Rax since v0.3.0, jnp.clip(labels, 0, 1)): targets 1, 0.5, 1; it differs from binarize on the 0.5
    clipped = sum(softplus(a) - b * a for a, b in zip([0.5, -1.0, 2.0], [1.0, 0.5, 1.0]))
    assert float(PointwiseBCE("sum", label_rule="clip")(s, y)) == pytest.approx(clipped, rel=1e-12)
    assert clipped - binarized == pytest.approx(0.5, rel=1e-12)  # -(0.5 * -1.0): the soft target's term
    with pytest.raises(ValueError, match="labels in \\[0, 1\\].*got 3.0.*label_rule"):
        PointwiseBCE()(s, y)
    with pytest.raises(ValueError, match="label_rule must be one of"):
        PointwiseBCE(label_rule="round")


def test_listnet_eps_floors_the_log_probabilities():
    s = torch.zeros(1, 2, dtype=torch.float64)
    y = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    # Target softmax(y) sums to 1 and both model probabilities are 1/2: -log(1/2 + eps).
    assert float(ListNet(reduction="sum", eps=0.1)(s, y)) == pytest.approx(-math.log(0.6), rel=1e-12)
    assert float(ListNet(reduction="sum")(s, y)) == pytest.approx(math.log(2.0), rel=1e-12)
    with pytest.raises(ValueError, match="eps must be >= 0"):
        ListNet(eps=-1.0)
