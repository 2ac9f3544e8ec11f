"""The peers' metric options (issue 25): ARP weighted by the graded label, ordered-pair accuracy
with item weights, α-nDCG with a discount. Hand computations and brute-force definitions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import metrics


def test_graded_arp_is_the_label_weighted_mean_rank():
    # Ranks 1..4 by score; labels 3, 0, 1, 2 (and an unjudged NaN item at rank 5, left out).
    scores = [4.0, 3.0, 2.0, 1.0, 0.0]
    labels = [3.0, 0.0, 1.0, 2.0, np.nan]
    graded = metrics.average_relevant_position(scores, labels, graded=True)
    assert graded.tolist() == pytest.approx([(3 * 1 + 1 * 3 + 2 * 4) / 6.0])
    binary = metrics.average_relevant_position(scores, labels)  # label >= 1: ranks 1, 3, 4
    assert binary.tolist() == pytest.approx([8.0 / 3.0])
    # No positive label: empty, by the conventions' rule.
    assert np.isnan(metrics.average_relevant_position([1.0, 2.0], [0.0, 0.0], graded=True)[0])
    ties = metrics.average_relevant_position([1.0, 1.0, 0.0], [2.0, 0.0, 1.0], graded=True, ties="average")
    assert ties.tolist() == pytest.approx([(2 * 1.5 + 1 * 3) / 3.0])


def _brute_opa(scores, labels, w, ties):
    right = total = 0.0
    for i, j in itertools.permutations(range(len(scores)), 2):
        if np.isnan(labels[i]) or np.isnan(labels[j]) or not labels[i] > labels[j]:
            continue
        total += w[i]
        if scores[i] > scores[j] or (scores[i] == scores[j] and (0.5 if ties == "average" else i < j)):
            right += w[i] * (0.5 if ties == "average" and scores[i] == scores[j] else 1.0)
    return right / total if total else float("nan")


@pytest.mark.parametrize("ties", ["stable", "average"])
def test_weighted_opa_matches_the_pairwise_definition(ties):
    rng = np.random.default_rng(11)
    offsets = np.array([0, 7, 8, 15, 21])
    scores = rng.integers(0, 4, size=21).astype(float)  # many ties
    labels = rng.integers(0, 3, size=21).astype(float)
    labels[3] = np.nan
    weights = rng.uniform(0.0, 2.0, size=21)
    got = metrics.ordered_pair_accuracy(scores, labels, offsets, weights=weights, ties=ties)
    for q in range(4):
        a, b = offsets[q], offsets[q + 1]
        expected = _brute_opa(scores[a:b], labels[a:b], weights[a:b], ties)
        if math.isnan(expected):
            assert math.isnan(got[q])
        else:
            assert got[q] == pytest.approx(expected, rel=1e-12)
    unit = metrics.ordered_pair_accuracy(scores, labels, offsets, weights=np.ones(21), ties=ties)
    np.testing.assert_array_equal(unit, metrics.ordered_pair_accuracy(scores, labels, offsets, ties=ties))


def test_weighted_opa_hand_case_and_bad_weights():
    # Pairs (higher label first): 2>0 right (w 1), 2>1 right (w 1), 1>0 wrong (w 3) -> 2 / 5.
    assert metrics.ordered_pair_accuracy([3.0, 2.0, 1.0], [2, 0, 1], weights=[1.0, 5.0, 3.0]).tolist() == [0.4]
    padded = metrics.ordered_pair_accuracy(np.array([[3.0, 2.0, 1.0, 0.0]]), np.array([[2, 0, 1, 9]]),
                                           mask=np.array([[True, True, True, False]]),
                                           weights=np.array([[1.0, 5.0, 3.0, 100.0]]))
    assert padded.tolist() == [0.4]
    with pytest.raises(ValueError, match="weights must be 3 finite non-negative"):
        metrics.ordered_pair_accuracy([3.0, 2.0, 1.0], [2, 0, 1], weights=[1.0, -1.0, 1.0])


def test_alpha_ndcg_takes_the_discount_convention():
    scores, judged = [3.0, 2.0, 1.0], [[1, 0], [1, 1], [0, 1]]
    # alpha = 0.5: ranked gains 1, 0.5 + 1, 0.5; greedy ideal gains 2, 0.5, 0.5.
    for discount, d in (("log2", lambda r: 1.0 / math.log2(r + 1.0)), (lambda r: 1.0 / r, lambda r: 1.0 / r),
                        ([1.0, 0.5], lambda r: [1.0, 0.5, 0.0][r - 1])):
        expected = (1 * d(1) + 1.5 * d(2) + 0.5 * d(3)) / (2 * d(1) + 0.5 * d(2) + 0.5 * d(3))
        got = metrics.alpha_ndcg(scores, judged, alpha=0.5, discount=discount)
        assert got.tolist() == pytest.approx([expected], rel=1e-12)


def test_evaluate_knows_arp_graded():
    scores, labels = np.array([3.0, 2.0, 1.0]), np.array([2.0, 0.0, 1.0])
    result = metrics.evaluate(scores, labels, metrics=["arp_graded", "arp"])
    assert result.mean == {"arp_graded[empty=skip,ties=stable]": pytest.approx(5.0 / 3.0),
                           "arp[rel>=1,empty=skip,ties=stable]": 2.0}
    assert not metrics.higher_is_better("arp_graded")
    with pytest.raises(ValueError, match="takes no @K"):
        metrics.evaluate(scores, labels, metrics=["arp_graded@3"])
