"""``ties="docid_desc"``: the stable ranking with its ties re-sorted by id, the same permutation as
the three-key ``np.lexsort``.

trec_eval's tie rule (score descending, then document id descending) used ``np.lexsort((-codes,
-s, query))`` over every row; now the fast stable ranking runs and only the runs of equal scores
are re-sorted by id. Both must give the same permutation on every input: ties (rounded and
float32 scores, -0.0 against +0.0), empty queries, negative, equal and 63-bit codes (the packed ids
of ltr.data.trec_tables), string ids, and scores that differ only in bits the fast key truncates.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import metrics

ranking = importlib.import_module("metrics.ranking")


def lexsort_reference(scores, codes, offsets):
    qidx = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    return np.lexsort((-codes, -scores, qidx))


@pytest.mark.parametrize("seed", range(6))
def test_random_inputs_with_ties_and_empty_queries(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        lengths = rng.integers(0, 40, int(rng.integers(1, 25)))
        lengths[rng.random(lengths.size) < 0.25] = 0
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        n = int(offsets[-1])
        scores = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
        if seed % 2:
            scores = scores.astype(np.float32).astype(np.float64)
        scores[rng.random(n) < 0.2] = -0.0
        scores[rng.random(n) < 0.2] = 0.0
        codes = rng.integers(-7, 2 + (1 << int(rng.integers(1, 40))), n)  # equal codes too
        want = lexsort_reference(scores, codes, offsets)
        assert np.array_equal(ranking._order(scores, offsets, "docid_desc", None, codes), want)
        assert np.array_equal(metrics.rank_order(scores, offsets, ties="docid_desc", doc_ids=codes), want)


def test_scores_that_share_the_truncated_key_bits():
    # 1,500 queries x 700 items: the score keeps 43 bits of the key, so neighbours 1 ulp apart
    # collide and go through the exact re-sort, which must keep the (code descending) order of ties
    rng = np.random.default_rng(3)
    n_q, length = 1500, 700
    base = 1.0 + np.arange(length // 2).repeat(2) * np.finfo(float).eps  # pairs of equal scores
    scores = np.concatenate([rng.permutation(base) if i % 2 else rng.normal(size=length) for i in range(n_q)])
    offsets = np.arange(n_q + 1, dtype=np.int64) * length
    codes = rng.integers(0, 10**6, scores.size)
    assert np.array_equal(ranking._order(scores, offsets, "docid_desc", None, codes),
                          lexsort_reference(scores, codes, offsets))


def test_wide_codes_and_no_ties():
    # packed document ids (ltr.data.trec_tables) span up to 2^63
    offsets = np.array([0, 3, 6])
    codes = np.array([-(2**62), 2**62, 5, 5, 1, 2**61])
    scores = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    # query 0: all tie, ids descending 2^62, 5, -2^62; query 1: all tie, ids 2^61, 5, 1
    assert ranking._order(scores, offsets, "docid_desc", None, codes).tolist() == [1, 2, 0, 5, 3, 4]
    rng = np.random.default_rng(9)
    codes = rng.integers(-(2**62), 2**62, 5000)
    codes[::7] = codes[0]
    offsets = np.array([0, 10, 10, 2000, 5000])
    scores = np.round(rng.normal(size=5000), 1)
    assert np.array_equal(ranking._order(scores, offsets, "docid_desc", None, codes),
                          lexsort_reference(scores, codes, offsets))
    distinct = rng.permutation(5000).astype(float)  # no tie: the stable ranking as it is
    assert np.array_equal(ranking._order(distinct, offsets, "docid_desc", None, codes),
                          ranking._order(distinct, offsets, "stable", None, None))
    with pytest.raises(ValueError, match="doc_ids has 4999 entries, expected 5000"):
        ranking._order(scores, offsets, "docid_desc", None, codes[1:])


def test_string_ids_rank_by_code_point_descending():
    scores = np.array([0.5, 0.5, 0.5, 0.9, 0.1])
    ids = np.array(["d10", "d9", "D9", "zz", "a"], dtype=object)
    # among the ties: "d9" > "d10" > "D9" in code point order
    assert metrics.rank_order(scores, [0, 5], ties="docid_desc", doc_ids=ids).tolist() == [3, 1, 0, 2, 4]
