"""The estimators of ``ltr clicks train``: corrected clicks by hand, grouping by shown list, the
equivalence of the grouped objective with the per-session one, unbiasedness in expectation, and
the pairwise-debiasing update against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses
from ltr.clicks.simulate.browsing import trust_curves
from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.simulate.click_models import attraction, pbm_examination, simulate_clicks
from ltr.clicks.logs.lists import group_sessions, pair_counts
from ltr.clicks.estimators.unbiased import _update_biases, corrected_clicks, lists_dataset
from ltr.data import RankingDataset
from ltr.base.errors import LtrError


def _log(sessions, docs, clicks, props, meta=None):
    """A log of one query from per-session lists of shown docs / clicks / propensities."""
    s, d, c, p, pos = [], [], [], [], []
    for i, (dd, cc, pp) in enumerate(zip(docs, clicks, props)):
        s += [i] * len(dd)
        d += dd
        c += cc
        p += pp
        pos += list(range(1, len(dd) + 1))
    n = len(s)
    z = np.zeros(n, dtype=np.int64)
    return ClickLog(np.array(s), z, np.array(d), np.array(pos), np.array(pos), np.array(c, np.int8), np.array(p, float),
                    np.zeros(sessions, np.int64), np.zeros(sessions, np.int8), np.zeros(sessions, np.int64), meta or {})


LOG = _log(3, [[0, 1, 2], [0, 1, 2], [2, 0, 1]], [[1, 0, 1], [0, 1, 0], [1, 1, 0]],
           [[1.0, 0.5, 0.005], [1.0, 0.5, 0.005], [1.0, 0.5, 0.005]])


def test_corrected_clicks_by_hand():
    np.testing.assert_array_equal(corrected_clicks(LOG, "naive"), LOG.click)
    # ips: 1/max(p, 0.01) on clicks: 1, 0, 100 | 0, 2, 0 | 1, 2, 0
    np.testing.assert_allclose(corrected_clicks(LOG, "ips", clip=0.01), [1, 0, 100, 0, 2, 0, 1, 2, 0])
    np.testing.assert_allclose(corrected_clicks(LOG, "ips", curve=[1.0, 0.25, 0.2])[:3], [1, 0, 5])
    alpha, beta = np.array([0.8, 0.4, 0.2]), np.array([0.2, 0.1, 0.05])
    v = corrected_clicks(LOG, "affine", affine=(alpha, beta))
    np.testing.assert_allclose(v[:3], [(1 - 0.2) / 0.8, (0 - 0.1) / 0.4, (1 - 0.05) / 0.2])
    with pytest.raises(LtrError, match="trust-bias log"):
        corrected_clicks(LOG, "affine")
    with pytest.raises(LtrError, match="estimator"):
        corrected_clicks(LOG, "snips")


def test_lists_dataset_groups_identical_lists():
    ds = RankingDataset(np.arange(6, dtype=np.float32).reshape(3, 2), np.zeros(3), np.array([0, 3]), np.array([0]))
    v = corrected_clicks(LOG, "ips", clip=0.01)
    train = lists_dataset(ds, LOG, v)
    # Two distinct lists: (2, 0, 1) once, (0, 1, 2) twice; np.unique orders them by their rows.
    assert train.n_queries == 2
    np.testing.assert_array_equal(train.query_offsets, [0, 3, 6])
    np.testing.assert_allclose(train.labels, [0.5, 1.0, 50.0, 1.0, 2.0, 0.0])
    np.testing.assert_allclose(train.weights, [2, 2, 2, 1, 1, 1])
    np.testing.assert_array_equal(train.features[3], ds.features[2])


def test_grouped_softmax_objective_equals_the_sum_over_sessions():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 12).astype(float)
    offsets = np.array([0, 5, 12])
    log = simulate_clicks(labels, offsets, labels + rng.normal(0, 1, 12), top_k=4, sessions_per_query=30,
                          randomize_fraction=0.3, seed=1)
    score = torch.tensor(rng.normal(size=12))
    v = corrected_clicks(log, "ips")
    ds = RankingDataset(np.zeros((12, 1), np.float32), labels, offsets, np.arange(2))
    grouped = lists_dataset(ds, log, v)
    loss = losses.get_loss("softmax", reduction="sum")
    per_session = 0.0
    for s in range(log.n_sessions):
        rows = log.session == s
        sc = score[log.doc[rows]][None, :]
        per_session += float(loss(sc, torch.tensor(v[rows])[None, :]))
    groups = group_sessions(log)
    total = 0.0
    for g in range(groups.n_groups):
        rows = slice(grouped.query_offsets[g], grouped.query_offsets[g + 1])
        docs = groups.docs[g][groups.docs[g] >= 0]
        total += float(loss(score[docs][None, :], torch.tensor(grouped.labels[rows])[None, :],
                            weights=torch.tensor(grouped.weights[rows])[None, :]))
    assert total == pytest.approx(per_session, rel=1e-9)


def test_ips_and_affine_labels_are_unbiased_for_relevance():
    labels = np.array([2.0, 0.0, 1.0, 2.0, 0.0])
    offsets = np.array([0, 5])
    scores = -np.arange(5.0)
    n = 100_000
    pbm = simulate_clicks(labels, offsets, scores, top_k=None, eps=0.1, sessions_per_query=n, seed=3)
    ds = RankingDataset(np.zeros((5, 1), np.float32), labels, offsets, np.arange(1))
    ips = lists_dataset(ds, pbm, corrected_clicks(pbm, "ips"))
    a = attraction(labels, max_label=2, eps=0.1)
    theta = pbm_examination(5, 1.0)
    se = np.sqrt(theta * a * (1 - theta * a) / n) / theta
    assert np.all(np.abs(ips.labels - a) <= 5 * se)
    naive = lists_dataset(ds, pbm, corrected_clicks(pbm, "naive"))
    assert np.abs(naive.labels - a).max() > 0.1  # without correction the bottom items look irrelevant

    trust = simulate_clicks(labels, offsets, scores, model="trust", top_k=None, sessions_per_query=n, seed=4)
    rho = attraction(labels, max_label=2, eps=0.0)
    aff = lists_dataset(ds, trust, corrected_clicks(trust, "affine"))
    plus, minus = trust_curves(5)
    p = theta * (minus + (plus - minus) * rho)
    se = np.sqrt(p * (1 - p) / n) / (theta * (plus - minus))
    assert np.all(np.abs(aff.labels - rho) < 5 * se + 1e-12)
    ips_trust = lists_dataset(ds, trust, corrected_clicks(trust, "ips"))
    # IPS under trust bias: E = eps_minus + (eps_plus - eps_minus) rho, so irrelevant items get credit
    # 0.65/r: the label of the non-relevant item at position 2 is far above 0.
    assert ips_trust.labels[1] > 0.25


def test_pair_counts_by_hand():
    groups = group_sessions(LOG)
    pairs = pair_counts(LOG, groups)
    # Group of (0, 1, 2) [second in np.unique order]: sessions [1,0,1] and [0,1,0].
    g = int(np.flatnonzero(groups.docs[:, 0] == 0)[0])
    expected = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float)
    np.testing.assert_array_equal(pairs[g], expected)


class _Fixed(torch.nn.Module):
    """A 'model' whose score is the first feature."""

    def forward(self, x, mask=None):
        return x[..., 0]


def test_pairwise_debias_update_against_a_hand_computation():
    # One list of two positions; scores 0 (pos 1) and 0 (pos 2): every pair loss is log 2.
    x = torch.zeros(1, 2, 1)
    pos = torch.tensor([[1, 2]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    pairs = torch.tensor([[[0.0, 6.0], [2.0, 0.0]]])  # clicked 1 / unclicked 2: 6 sessions; the reverse: 2
    t_plus = torch.tensor([1.0, 0.5], dtype=torch.float64)
    t_minus = torch.tensor([1.0, 0.8], dtype=torch.float64)
    new_plus, new_minus = _update_biases(_Fixed(), x, pos, mask, pairs, t_plus, t_minus, 0.0, 8)
    l2 = np.log(2)
    # t+_1 numerator: pair (1 -> 2): 6 l2 / t-_2 = 6 l2 / 0.8; t+_2 numerator: pair (2 -> 1): 2 l2 / t-_1 = 2 l2.
    assert float(new_plus[1]) == pytest.approx((2 * l2) / (6 * l2 / 0.8), rel=1e-12)
    # t-_2 numerator: pair (1 -> 2) over t+_1 = 6 l2; t-_1 numerator: pair (2 -> 1) over t+_2 = 2 l2 / 0.5.
    assert float(new_minus[1]) == pytest.approx((6 * l2) / (2 * l2 / 0.5), rel=1e-12)
    # With the regularising power p = 1 each ratio is square-rooted.
    sq_plus, _ = _update_biases(_Fixed(), x, pos, mask, pairs, t_plus, t_minus, 1.0, 8)
    assert float(sq_plus[1]) == pytest.approx(np.sqrt(float(new_plus[1])), rel=1e-12)
