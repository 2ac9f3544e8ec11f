"""Team-draft interleaving: the draft's invariants, a ranker against itself, a better ranker, and
agreement of the interleaving preference with offline NDCG on the true labels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import metrics
from ltr.clicks.interleaving import interleave_sessions, sessions_to_detect, team_draft
from ltr.errors import LtrError


def test_team_draft_invariants_on_random_orders():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        a, b = rng.permutation(n), rng.permutation(n)
        k = int(rng.integers(1, 12))
        items, team = team_draft(a, b, rng.random(n) < 0.5, k)
        assert len(items) == min(n, k) and len(set(items.tolist())) == len(items)
        # At every prefix the teams differ by at most one pick.
        diff = np.cumsum(np.where(team == 0, 1, -1))
        assert np.abs(diff).max() <= 1
        # Each pick is the picking team's best item not shown before it.
        for i, (item, t) in enumerate(zip(items, team)):
            order = a if t == 0 else b
            best = next(x for x in order if x not in set(items[:i].tolist()))
            assert item == best


def test_identical_rankers_show_their_ranking_and_tie_on_average():
    rng = np.random.default_rng(1)
    order = rng.permutation(8)
    for coins in itertools.product((0, 1), repeat=4):
        items, _ = team_draft(order, order, np.array(coins), 8)
        np.testing.assert_array_equal(items, order)
    lengths = rng.integers(5, 20, 300)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    scores = labels + rng.normal(0, 1.0, offsets[-1])
    res = interleave_sessions(labels, offsets, scores, scores, sessions_per_query=40, seed=2)
    decided = res.wins + res.losses
    # A against itself: wins among decided sessions ~ Binomial(decided, 1/2); allow 4 standard errors.
    assert abs(res.wins / decided - 0.5) < 4 * 0.5 / np.sqrt(decided)
    assert res.summary()["sessions"] == 300 * 40


@pytest.fixture(scope="module")
def rankers():
    rng = np.random.default_rng(3)
    lengths = rng.integers(10, 40, 400)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = np.clip(np.round(rng.gamma(1.0, 1.0, offsets[-1])), 0, 4)
    out = {s: labels + rng.normal(0, s, offsets[-1]) for s in (0.5, 1.0, 2.0, 4.0)}
    ndcg = {s: float(metrics.evaluate(v, labels, offsets, ["ndcg@10"]).mean[
        metrics.evaluate(v, labels, offsets, ["ndcg@10"]).names["ndcg@10"]]) for s, v in out.items()}
    return labels, offsets, out, ndcg


def test_a_better_ranker_wins(rankers):
    labels, offsets, out, ndcg = rankers
    assert ndcg[0.5] > ndcg[4.0] + 0.2
    res = interleave_sessions(labels, offsets, out[0.5], out[4.0], sessions_per_query=20, seed=4)
    assert res.preference > 0.55 and res.p_value() < 1e-6 and res.wins > 2 * res.losses


@pytest.mark.parametrize("model", ["pbm", "cascade", "dbn"])
def test_interleaving_agrees_with_offline_ndcg(rankers, model):
    labels, offsets, out, ndcg = rankers
    for s1, s2 in itertools.combinations(sorted(out), 2):
        res = interleave_sessions(labels, offsets, out[s1], out[s2], sessions_per_query=20, model=model, seed=5)
        # Less noise = higher NDCG here; interleaving must prefer the same ranker, significantly.
        assert ndcg[s1] > ndcg[s2]
        assert res.preference > 0.5 and res.p_value() < 0.01, (model, s1, s2, res.summary())


def test_sessions_to_detect():
    # No ties: the sign-test sample size; ties inflate it by 1 / (1 - t).
    assert sessions_to_detect(0.6, 0.5) == pytest.approx(2 * sessions_to_detect(0.6, 0.0), rel=1e-12)
    assert sessions_to_detect(0.55, 0.0) > 3.9 * sessions_to_detect(0.6, 0.0)
    assert sessions_to_detect(0.5, 0.0) == float("inf")
    with pytest.raises(LtrError):
        sessions_to_detect(0.6, 1.0)
