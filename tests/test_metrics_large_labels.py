"""NDCG with exp2 gains when the ideal DCG overflows float64 (labels near 1023, issue 25).

Before, a query with three items of label 1023 had a finite DCG over an infinite ideal DCG and
reported NDCG 0. NDCG only depends on the ratios of the gains, and (2^1023 - 1) : (2^1023 - 1) is
1 : 1 to float64 precision, so such a query must score as the same query with labels 1.
"""

from __future__ import annotations

import numpy as np
import pytest

import metrics

SCORES = np.array([0.3, 2.0, -1.0, 0.7, 0.7, 1.5])


@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("ties", ["stable", "average", "pessimistic"])
def test_huge_equal_labels_score_as_labels_of_one(k, ties):
    high = np.array([1023.0, 0.0, 1023.0, 1023.0, 1023.0, 0.0])
    low = np.where(high > 0, 1.0, 0.0)
    got = metrics.ndcg(SCORES, high, k=k, ties=ties)
    expected = metrics.ndcg(SCORES, low, k=k, ties=ties)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_huge_graded_labels_follow_the_ratios_of_their_gains():
    # Labels 1023, 1022 (x3) and unjudged: gains 2 : 1 : 1 : 1 up to 2^-1022, the NaN item is worth 0.
    labels = np.array([1022.0, 1023.0, np.nan, 1022.0, 1022.0, 0.0])
    expected = metrics.ndcg(SCORES, np.array([1.0, np.log2(3.0), np.nan, 1.0, 1.0, 0.0]))  # gains 1, 2, 1, 1
    np.testing.assert_allclose(metrics.ndcg(SCORES, labels), expected, rtol=1e-12)
    result = metrics.evaluate(np.array([SCORES, SCORES]), np.array([labels, np.where(np.isnan(labels), 0, 1.0)]),
                              metrics=["ndcg@3"])
    assert np.isfinite(list(result.per_query.values())[0]).all()


def test_judged_but_unretrieved_huge_labels_count_in_the_ideal():
    # The ideal comes from the qrels: one more judged item of label 1023 that the run missed.
    got = metrics.ndcg([2.0, 1.0], [1023.0, 0.0], qrels_labels=np.array([1023.0, 1023.0, 1023.0, 0.0]),
                       qrels_offsets=np.array([0, 4]))
    expected = metrics.ndcg([2.0, 1.0], [1.0, 0.0], qrels_labels=np.array([1.0, 1.0, 1.0, 0.0]),
                            qrels_offsets=np.array([0, 4]))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
