"""Team-draft interleaving: the draft's invariants, a ranker against itself, a better ranker, and
agreement of the interleaving preference with offline NDCG on the true labels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import metrics
from ltr.clicks.interleaving import interleave_sessions, sessions_to_detect, team_draft
from ltr.base.errors import LtrError


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


def test_probabilistic_assignment_of_a_three_item_list_by_hand():
    # A ranks x, y, z = items 0, 1, 2; B ranks y, z, x. tau = 3: weights 1, 1/8, 1/27 by rank.
    # Shown list x, y, z. Position 1: P_A(x) = 1 / (1 + 1/8 + 1/27) = 216/251, P_B(x) = (1/27) / (251/216) = 8/251,
    # q_1 = 216 / 224 = 27/28. Position 2 (y, z left): P_A(y) = (1/8) / (1/8 + 1/27) = 27/35,
    # P_B(y) = 1 / (1 + 1/8) = 8/9, q_2 = (27/35) / (27/35 + 8/9) = 243/523. Position 3: one item left, q_3 = 1/2.
    from ltr.clicks.interleaving import expected_outcome, probabilistic_lists, softmax_ranker_weights

    wa = softmax_ranker_weights(np.array([0, 1, 2]), 3)[None, :]
    wb = softmax_ranker_weights(np.array([1, 2, 0]), 3)[None, :]
    target, q_seen = np.array([0, 1, 2]), None
    rng = np.random.default_rng(0)
    for _ in range(200):  # draw until the list x, y, z comes up (P = 1/2 (224/251) * 1/2 (27/35 + 8/9) * 1 = 0.370)
        shown, q = probabilistic_lists(rng, wa, wb, 3)
        if (shown[0] == target).all():
            q_seen = q[0]
            break
    np.testing.assert_allclose(q_seen, [27 / 28, 243 / 523, 0.5], rtol=1e-12)
    # Clicks on x and y: A gets both with q1 q2, B both with (1-q1)(1-q2), else a tie.
    e = expected_outcome(np.array([[1, 1, 0]]), q_seen[None, :])[0]
    assert e == pytest.approx(27 / 28 + 243 / 523 - 1, rel=1e-12)
    # A click on z alone is a coin flip: outcome 0.
    assert expected_outcome(np.array([[0, 0, 1]]), q_seen[None, :])[0] == pytest.approx(0.0, abs=1e-15)
    # The frequency of the list x, y, z matches its probability (1/4)(224/251)(27/35 + 8/9): per position the
    # mean of the two rankers' probabilities, the last one 1 (both must take z).
    shown, _ = probabilistic_lists(np.random.default_rng(1), np.repeat(wa, 40000, axis=0), np.repeat(wb, 40000, axis=0), 3)
    freq = (shown == target).all(axis=1).mean()
    p = 0.25 * (224 / 251) * (27 / 35 + 8 / 9)
    assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / 40000)


def test_a_user_who_clicks_only_a_top_item_makes_a_win_in_expectation():
    # Every session's user clicks only the item that A ranks first (labels: 4 on it, 0 elsewhere, eps = 0,
    # no position bias). Wherever it is shown, A's softmax put more mass on it than B's, so each session's
    # expected outcome is > 0 and A wins in expectation.
    from ltr.clicks.interleaving import probabilistic_sessions

    rng = np.random.default_rng(5)
    lengths = rng.integers(4, 12, 200)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    a = rng.normal(size=offsets[-1])
    b = rng.normal(size=offsets[-1])
    labels = np.zeros(offsets[-1])
    for q in range(200):
        labels[offsets[q] + np.argmax(a[offsets[q] : offsets[q + 1]])] = 4.0
    res = probabilistic_sessions(labels, offsets, a, b, sessions_per_query=10, model="pbm", eta=0.0, eps=0.0, seed=1)
    # One click per session, so its outcome is 2 q - 1 at the item's position: at position 1 (both normalisers
    # run over the same ranks) q = 1 / (1 + r_B^-3) >= 1/2, later q depends on what is left; A wins on average.
    same_top = np.array([np.argmax(a[offsets[q] : offsets[q + 1]]) == np.argmax(b[offsets[q] : offsets[q + 1]])
                         for q in range(200)])[res.session_query]
    assert (res.outcome[~same_top] > 0).mean() > 0.9 and (res.outcome < 0).mean() < 0.05
    assert res.mean > 0.3 and res.p_value() < 1e-10
    # The same user against B itself: mirrored.
    res_b = probabilistic_sessions(labels, offsets, b, a, sessions_per_query=10, model="pbm", eta=0.0, eps=0.0, seed=1)
    assert res_b.mean < -0.3


def test_both_methods_agree_with_offline_ndcg(rankers):
    from ltr.clicks.interleaving import compare_interleaving

    labels, offsets, out, ndcg = rankers
    rows = compare_interleaving(labels, offsets, {f"noise {s}": out[s] for s in sorted(out)}, sessions_per_query=10,
                                seed=3)
    assert len(rows) == 6
    for r in rows:
        assert r["delta_ndcg"] > 0 and r["td_agrees"] and r["pi_agrees"], r
        assert r["td_p"] < 0.01 and r["pi_p"] < 0.01
        assert np.isfinite(r["td_sessions"]) and np.isfinite(r["pi_sessions"])
    # a larger NDCG difference needs fewer sessions (noise 0.5 vs 4 against noise 2 vs 4)
    by = {(r["a"], r["b"]): r for r in rows}
    assert by[("noise 0.5", "noise 4.0")]["pi_sessions"] < by[("noise 2.0", "noise 4.0")]["pi_sessions"]


def test_probabilistic_ranker_against_itself_has_mean_outcome_zero(rankers):
    from ltr.clicks.interleaving import probabilistic_sessions, sessions_to_detect_mean

    labels, offsets, out, _ = rankers
    res = probabilistic_sessions(labels, offsets, out[1.0], out[1.0], sessions_per_query=5, seed=2)
    # identical rankers: q = 1/2 everywhere, every outcome is exactly 0
    np.testing.assert_allclose(res.outcome, 0.0, atol=1e-12)
    assert res.p_value() == 1.0 and sessions_to_detect_mean(res.outcome) == float("inf")
    with pytest.raises(LtrError, match="tau"):
        probabilistic_sessions(labels, offsets, out[1.0], out[2.0], tau=0.0)
