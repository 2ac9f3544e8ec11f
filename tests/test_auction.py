"""GSP / second-price auctions against a hand-worked three-ad example, reserves, threshold, the oracle
comparison, and the vectorised path against a per-auction loop."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.calibrate.auction import (
    oracle_comparison,
    pad_groups,
    run_auctions,
    second_price,
)
from ltr.base.errors import LtrError

# The hand-worked example. Three ads, two slots, position effects (1, 0.5).
#   ad   bid   pCTR   true CTR   score = bid * pCTR
#   A    4.0   0.10   0.12       0.40
#   B    3.0   0.20   0.15       0.60
#   C    2.0   0.10   0.10       0.20
# Ranking by score: B (0.60), A (0.40), C (0.20). GSP price per click = next score / own pCTR:
#   B pays 0.40 / 0.20 = 2.00, A pays 0.20 / 0.10 = 2.00.
# Expected clicks use the TRUE CTR and the slot effect: B 0.15 * 1 = 0.15, A 0.12 * 0.5 = 0.06.
# Revenue = 2.00 * 0.15 + 2.00 * 0.06 = 0.30 + 0.12 = 0.42.
# Welfare = bid * expected clicks = 3 * 0.15 + 4 * 0.06 = 0.45 + 0.24 = 0.69.
# Oracle (true CTRs): scores A 0.48, B 0.45, C 0.20 -> A, B. A pays 0.45 / 0.12 = 3.75, B pays
#   0.20 / 0.15 = 1.3333; clicks A 0.12, B 0.15 * 0.5 = 0.075; revenue 3.75 * 0.12 + 1.3333 * 0.075 =
#   0.45 + 0.10 = 0.55; welfare 4 * 0.12 + 3 * 0.075 = 0.48 + 0.225 = 0.705.
BIDS = [4.0, 3.0, 2.0]
PCTR = [0.10, 0.20, 0.10]
TRUE = [0.12, 0.15, 0.10]
THETA = [1.0, 0.5]


def test_hand_worked_gsp_example():
    r = run_auctions(BIDS, PCTR, TRUE, slots=2, position_effects=THETA)
    assert r.winners.tolist() == [[1, 0]]
    np.testing.assert_allclose(r.prices, [[2.0, 2.0]], atol=1e-12)
    np.testing.assert_allclose(r.expected_clicks, [[0.15, 0.06]], atol=1e-12)
    assert r.total_revenue == pytest.approx(0.42, abs=1e-12)
    assert r.total_welfare == pytest.approx(0.69, abs=1e-12)


def test_hand_worked_oracle_comparison():
    c = oracle_comparison(BIDS, PCTR, TRUE, slots=2, position_effects=THETA)
    assert c["oracle_revenue"] == pytest.approx(0.55, abs=1e-12)
    assert c["oracle_welfare"] == pytest.approx(0.705, abs=1e-12)
    assert c["welfare_ratio"] == pytest.approx(0.69 / 0.705, abs=1e-12)
    assert c["revenue_ratio"] == pytest.approx(0.42 / 0.55, abs=1e-12)
    assert c["allocation_agreement"] == 0.0 and c["slot_agreement"] == 0.0  # same two ads, swapped


def test_second_price_is_gsp_with_one_slot():
    # One slot: B wins and pays A's score over its own pCTR, 0.40 / 0.20 = 2.00; revenue 2.00 * 0.15 = 0.30.
    r = second_price(BIDS, PCTR, TRUE)
    assert r.winners.tolist() == [[1]]
    assert r.prices[0, 0] == pytest.approx(2.0)
    assert r.total_revenue == pytest.approx(0.30)
    # With equal pCTRs it is the textbook second-price auction: the winner pays the second bid.
    r2 = second_price([[5.0, 7.0, 6.0]], [[0.1, 0.1, 0.1]])
    assert r2.winners.tolist() == [[1]] and r2.prices[0, 0] == pytest.approx(6.0)


def test_reserves_and_threshold_by_hand():
    # Per-click reserve 2.5: C (bid 2) is out. B pays max(0.40, 2.5 * 0.20) / 0.20 = 2.50; A has no
    # competitor below it and pays the reserve 2.50. Revenue 2.5 * 0.15 + 2.5 * 0.06 = 0.525.
    r = run_auctions(BIDS, PCTR, TRUE, slots=2, position_effects=THETA, reserve=2.5)
    assert r.winners.tolist() == [[1, 0]]
    np.testing.assert_allclose(r.prices, [[2.5, 2.5]], atol=1e-12)
    assert r.total_revenue == pytest.approx(0.525, abs=1e-12)
    # Score reserve 0.30: C (0.20) is out; A pays max(0, 0.30) / 0.10 = 3.00. Revenue 0.30 + 3 * 0.06 = 0.48.
    r = run_auctions(BIDS, PCTR, TRUE, slots=2, position_effects=THETA, score_reserve=0.30)
    np.testing.assert_allclose(r.prices, [[2.0, 3.0]], atol=1e-12)
    assert r.total_revenue == pytest.approx(0.48, abs=1e-12)
    # Threshold pCTR >= 0.15: only B is shown, alone it pays 0; the second slot stays empty.
    r = run_auctions(BIDS, PCTR, TRUE, slots=2, position_effects=THETA, threshold=0.15)
    assert r.winners.tolist() == [[1, -1]]
    assert r.prices.tolist() == [[0.0, 0.0]] and r.total_revenue == 0.0
    assert r.total_welfare == pytest.approx(0.45)


def _loop_reference(bids, pctr, true, mask, slots, theta, reserve, score_reserve, threshold):
    revenue = np.zeros(bids.shape[0])
    welfare = np.zeros(bids.shape[0])
    winners = -np.ones((bids.shape[0], slots), dtype=int)
    for a in range(bids.shape[0]):
        cand = [i for i in range(bids.shape[1]) if mask[a, i] and pctr[a, i] > 0 and pctr[a, i] >= threshold
                and bids[a, i] >= reserve and bids[a, i] * pctr[a, i] >= score_reserve]
        cand.sort(key=lambda i: (-bids[a, i] * pctr[a, i], i))
        for s in range(min(slots, len(cand))):
            i = cand[s]
            nxt = bids[a, cand[s + 1]] * pctr[a, cand[s + 1]] if s + 1 < len(cand) else 0.0
            price = max(nxt, score_reserve, reserve * pctr[a, i]) / pctr[a, i]
            clicks = true[a, i] * theta[s]
            revenue[a] += price * clicks
            welfare[a] += bids[a, i] * clicks
            winners[a, s] = i
    return winners, revenue, welfare


def test_vectorised_equals_loop():
    rng = np.random.default_rng(0)
    a, k, slots = 300, 6, 3
    bids = np.round(rng.lognormal(0, 0.5, size=(a, k)), 2)
    true = rng.beta(1, 20, size=(a, k))
    pctr = np.clip(true * rng.lognormal(0, 0.4, size=(a, k)), 0, 1)
    pctr[:5] = 0.05  # ties in pCTR
    mask = rng.random((a, k)) < 0.85
    theta = np.array([1.0, 0.7, 0.5])
    for kw in ({}, {"reserve": 1.0}, {"score_reserve": 0.05, "threshold": 0.02}):
        r = run_auctions(bids, pctr, true, mask, slots=slots, position_effects=theta, **kw)
        w, rev, wel = _loop_reference(bids, pctr, true, mask, slots, theta, kw.get("reserve", 0.0),
                                      kw.get("score_reserve", 0.0), kw.get("threshold", 0.0))
        assert r.winners.tolist() == w.tolist()
        np.testing.assert_allclose(r.revenue, rev, atol=1e-12)
        np.testing.assert_allclose(r.welfare, wel, atol=1e-12)
        shown = r.winners >= 0
        win_bids = np.take_along_axis(bids, np.maximum(r.winners, 0), axis=1)
        assert np.all(r.prices[shown] <= win_bids[shown] + 1e-12)  # nobody pays more than the bid


def test_oracle_allocation_maximises_expected_value_with_one_slot():
    rng = np.random.default_rng(1)
    bids = rng.lognormal(0, 0.5, size=(500, 5))
    true = rng.beta(1, 20, size=(500, 5))
    noisy = np.clip(true * rng.lognormal(0, 0.6, size=(500, 5)), 0, 1)
    c = oracle_comparison(bids, noisy, true)
    assert c["welfare"] < c["oracle_welfare"]  # noise in pCTR loses welfare
    assert oracle_comparison(bids, true, true)["allocation_agreement"] == 1.0


def test_pad_groups_and_errors():
    v, m = pad_groups(np.arange(6.0), [0, 3, 4, 6])
    assert v.tolist() == [[0, 1, 2], [3, 0, 0], [4, 5, 0]]
    assert m.sum() == 6
    with pytest.raises(LtrError, match="position_effects"):
        run_auctions(BIDS, PCTR, slots=2, position_effects=[1.0])
    with pytest.raises(LtrError, match="pCTRs"):
        run_auctions(BIDS, [0.1, 1.5, 0.2])


# ----------------------------------------------------------------------------- VCG, per-field reserves, regret, winners' PCOC
# The same three ads. VCG: C is ranked 3rd (e_(3) = 0.20), A is in slot 1 (theta 0.5), B in slot 0.
#   A (slot 1) pays per impression (theta_1 - theta_2) e_(3) = (0.5 - 0) * 0.20 = 0.10; per click
#     0.10 / (theta_1 * pCTR_A) = 0.10 / 0.05 = 2.00 (= GSP: the last slot pays the same).
#   B (slot 0) pays (theta_0 - theta_1) e_(2) + (theta_1 - theta_2) e_(3) = 0.5 * 0.40 + 0.5 * 0.20 = 0.30;
#     per click 0.30 / (1 * 0.20) = 1.50 < GSP's 2.00.
# Revenue = 1.50 * 0.15 + 2.00 * 0.06 = 0.225 + 0.12 = 0.345; welfare as GSP, 0.69.
def test_hand_worked_vcg_example():
    r = run_auctions([BIDS], [PCTR], [TRUE], slots=2, position_effects=[1.0, 0.5], mechanism="vcg")
    assert r.winners.tolist() == [[1, 0]]
    assert r.prices[0].tolist() == pytest.approx([1.5, 2.0])
    assert r.total_revenue == pytest.approx(0.345)
    assert r.total_welfare == pytest.approx(0.69)
    assert r.cost_per_click == pytest.approx(0.345 / 0.21)
    # Winners' PCOC: predicted clicks (0.20 * 1 + 0.10 * 0.5 = 0.25) over expected clicks (0.21).
    assert r.winners_pcoc == pytest.approx(0.25 / 0.21)


def test_vcg_never_charges_more_than_gsp_and_equals_it_with_one_slot():
    rng = np.random.default_rng(7)
    b, p = rng.uniform(0.5, 3, (300, 6)), rng.uniform(0.01, 0.3, (300, 6))
    kw = dict(slots=3, position_effects=[1.0, 0.7, 0.4])
    gsp, vcg = run_auctions(b, p, **kw), run_auctions(b, p, mechanism="vcg", **kw)
    assert np.array_equal(gsp.winners, vcg.winners)
    assert np.all(vcg.prices <= gsp.prices + 1e-12) and vcg.total_revenue < gsp.total_revenue
    one_g, one_v = run_auctions(b, p, slots=1), run_auctions(b, p, slots=1, mechanism="vcg")
    assert np.allclose(one_g.prices, one_v.prices, rtol=1e-12)


# Per-candidate reserves (e.g. by site) [2.5, 3.5, 1.5]: B's bid 3.0 < 3.5, B is out. A (0.40), C (0.20).
#   GSP: A pays max(0.20, 2.5 * 0.10) / 0.10 = 2.50; C pays max(0, 1.5 * 0.10) / 0.10 = 1.50.
#   VCG: A pays max((1 - 0.5) * 0.20 / 0.10 = 1.00, 2.50) = 2.50; C (last, nobody below) max(0, 1.50) = 1.50.
def test_per_candidate_reserves_by_hand():
    from ltr.calibrate.auction import field_reserves

    reserve = field_reserves([["s1", "s2", "s3"]], {"s1": 2.5, "s2": 3.5, "s3": 1.5})
    for mech in ("gsp", "vcg"):
        r = run_auctions([BIDS], [PCTR], [TRUE], slots=2, position_effects=[1.0, 0.5], reserve=reserve, mechanism=mech)
        assert r.winners.tolist() == [[0, 2]]
        assert r.prices[0].tolist() == pytest.approx([2.5, 1.5])
    with pytest.raises(LtrError, match="reserve must be a number or one value per candidate"):
        run_auctions([BIDS], [PCTR], reserve=[1.0, 2.0])
    with pytest.raises(LtrError, match="mechanism"):
        run_auctions([BIDS], [PCTR], mechanism="first")


def test_regret_and_winners_pcoc_in_the_oracle_comparison():
    # The hand-worked oracle: welfare 0.705 against the model's 0.69 -> regret 0.015.
    out = oracle_comparison([BIDS], [PCTR], [TRUE], slots=2, position_effects=[1.0, 0.5])
    assert out["regret"] == pytest.approx(0.015)
    assert out["winners_pcoc"] == pytest.approx(0.25 / 0.21)
    assert out["oracle_cost_per_click"] == pytest.approx(0.55 / 0.195)


def test_maximization_bias_unbiased_noise_inflates_winners_pcoc():
    rng = np.random.default_rng(0)
    true = rng.uniform(0.02, 0.1, (4000, 8))
    noisy = np.clip(true * rng.lognormal(-0.125, 0.5, true.shape), 0, 1)  # E[noisy] = true (mean-one noise)
    assert noisy.sum() / true.sum() == pytest.approx(1.0, abs=0.01)
    r = run_auctions(np.ones_like(true), noisy, true, slots=1)
    assert r.winners_pcoc > 1.3  # winners were picked for their high noise


def test_log_winners_rows_and_click_rate():
    from ltr.calibrate.auction import log_winners

    rng = np.random.default_rng(3)
    true = rng.uniform(0.05, 0.3, (20000, 5))
    pctr = true * 1.2
    r = run_auctions(np.ones_like(true), pctr, true, slots=2, position_effects=[1.0, 0.5])
    log = log_winners(r, pctr, seed=0)
    assert log["slot"].shape == (40000,)
    assert np.array_equal(log["pctr"], pctr[log["auction"], log["candidate"]])
    top = log["slot"] == 0
    assert np.allclose(log["expected_clicks"][top], true[log["auction"][top], log["candidate"][top]])
    assert np.allclose(log["expected_clicks"][~top], 0.5 * true[log["auction"][~top], log["candidate"][~top]])
    # clicks follow theta_s * true CTR: the click count is within 4 standard deviations of its mean
    mean = log["expected_clicks"].sum()
    assert abs(log["click"].sum() - mean) < 4 * np.sqrt(mean)
