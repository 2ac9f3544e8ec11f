"""Every number of ../shared/reference/seed_examples.json, recomputed by the package.

The numbers are copied here (they are facts from the two seed chapters); a last test checks the
copy against the JSON file when it is present.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import REFERENCE, ROOT

import metrics

ARRANGEMENTS = {
    # labels in ranked order: (P@10, R@10, RR, AP, NDCG@10)
    "1110000000": (0.3, 1.0, 1.0, 1.0, 1.0),
    "0001110000": (0.3, 1.0, 0.25, 0.3833, 0.5508),
    "0000000111": (0.3, 1.0, 0.125, 0.2157, 0.425),
}
GAIN_TABLE = {  # labels in ranked order: (NDCG@5 linear, NDCG@5 exp2)
    (3, 0, 0, 1, 1): (0.9241, 0.9615),
    (1, 1, 0, 0, 3): (0.6758, 0.5336),
}
GAPS = (0.2484, 0.4278)
DISCOUNTS = {1: 1.0, 2: 0.63, 3: 0.5, 5: 0.39, 10: 0.29}
SWAPS = [  # (rank before, rank after), NDCG before, after, delta; one relevant item in 10
    ((1, 2), 1.0, 0.6309, 0.3691),
    ((2, 3), 0.6309, 0.5, 0.1309),
    ((3, 4), 0.5, 0.4307, 0.0693),
    ((9, 10), 0.301, 0.2891, 0.012),
]
MRR = 0.4444
NDCG3 = {"dcg@3": 8.5, "ideal_dcg@3": 8.8928, "ndcg@3": 0.9558}
RECALL300, PRECISION5 = 0.7, 0.6


def _ranked(labels):
    """Scores that put the labels in the given order (descending scores)."""
    labels = np.asarray(labels, dtype=float)
    return np.arange(labels.size, 0, -1, dtype=float), labels


@pytest.mark.parametrize("slate", sorted(ARRANGEMENTS))
def test_three_arrangements(slate):
    scores, labels = _ranked([int(c) for c in slate])
    r = metrics.evaluate(scores, labels, [0, 10], ["p@10", "recall@10", "rr", "ap", "ndcg@10"], gain="linear")
    got = [r["p@10"], r["recall@10"], r["rr"], r["ap"], r["ndcg@10"]]
    assert [round(v, 4) for v in got] == list(ARRANGEMENTS[slate])
    # binary labels: the gain family does not matter
    assert metrics.ndcg(scores, labels, k=10, gain="exp2")[0] == pytest.approx(got[4], abs=1e-12)


def test_gain_table_and_gaps():
    values = {}
    for labels, (lin, exp) in GAIN_TABLE.items():
        scores, y = _ranked(labels)
        values[labels] = (metrics.ndcg(scores, y, k=5, gain="linear")[0], metrics.ndcg(scores, y, k=5, gain="exp2")[0])
        assert round(values[labels][0], 4) == lin
        assert round(values[labels][1], 4) == exp
    good, bad = values[(3, 0, 0, 1, 1)], values[(1, 1, 0, 0, 3)]
    assert round(good[0] - bad[0], 4) == GAPS[0]
    assert round(good[1] - bad[1], 4) == GAPS[1]


def test_discounts():
    ranks = np.array(sorted(DISCOUNTS))
    got = metrics.discount_values(ranks)
    assert [round(float(v), 2) for v in got] == [DISCOUNTS[r] for r in ranks]


@pytest.mark.parametrize("swap,before,after,delta", SWAPS)
def test_four_swaps(swap, before, after, delta):
    r0, r1 = swap
    labels_before = np.zeros(10)
    labels_before[r0 - 1] = 1
    labels_after = np.zeros(10)
    labels_after[r1 - 1] = 1
    scores = np.arange(10, 0, -1, dtype=float)
    nb = metrics.ndcg(scores, labels_before, k=10)[0]
    na = metrics.ndcg(scores, labels_after, k=10)[0]
    assert round(nb, 4) == round(before, 4)
    assert round(na, 4) == after
    assert round(nb - na, 4) == delta


def test_swap_ratio_about_31():
    scores = np.arange(10, 0, -1, dtype=float)

    def n(rank):
        y = np.zeros(10)
        y[rank - 1] = 1
        return metrics.ndcg(scores, y, k=10)[0]

    ratio = (n(1) - n(2)) / (n(9) - n(10))
    assert round(ratio) == 31


def test_mrr_example():
    # three queries: first hit at 1, first hit at 3, a miss (its relevant item was not retrieved)
    scores = np.tile([3.0, 2.0, 1.0], 3)
    labels = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0], dtype=float)
    offsets = [0, 3, 6, 9]
    # the miss counted through qrels (one judged relevant document not in the list) ...
    qrels_labels = np.array([1, 1, 1], dtype=float)
    rr = metrics.reciprocal_rank(scores, labels, offsets, qrels_labels=qrels_labels, qrels_offsets=[0, 1, 2, 3])
    assert round(rr.mean(), 4) == MRR
    # ... or by counting queries without a relevant item as 0
    assert round(metrics.reciprocal_rank(scores, labels, offsets, empty="zero").mean(), 4) == MRR
    # the toolkit default skips the empty query and says so
    r = metrics.evaluate(scores, labels, offsets, ["mrr"])
    assert r.names["mrr"].endswith("empty=skip,ties=stable]")
    assert r["mrr"] == pytest.approx((1 + 1 / 3) / 2)


def test_ndcg3_example():
    scores, labels = _ranked([3, 0, 2])
    assert metrics.dcg(scores, labels, k=3)[0] == pytest.approx(NDCG3["dcg@3"], abs=1e-12)
    assert round(float(metrics.ideal_dcg(metrics.gain_values(labels), k=3)), 4) == NDCG3["ideal_dcg@3"]
    assert round(metrics.ndcg(scores, labels, k=3)[0], 4) == NDCG3["ndcg@3"]
    # "a library that takes gains directly reproduces this when passed [7, 0, 3]"
    assert metrics.ndcg(scores, labels, k=3, item_gain=[7.0, 0.0, 3.0])[0] == pytest.approx(8.5 / (7 + 3 / math.log2(3)))


def test_recall_and_precision_examples():
    # 10 judged relevant, 7 of them in a shortlist of 300
    labels = np.zeros(300)
    labels[[0, 10, 50, 99, 150, 200, 299]] = 1
    scores = np.arange(300, 0, -1, dtype=float)
    qrels = np.r_[np.ones(10), np.zeros(5)]
    got = metrics.recall(scores, labels, k=300, qrels_labels=qrels, qrels_offsets=[0, 15])
    assert got[0] == pytest.approx(RECALL300)
    # 3 relevant among 5 displayed
    assert metrics.precision(np.arange(5, 0, -1.0), [1, 0, 1, 1, 0], k=5)[0] == pytest.approx(PRECISION5)


def test_seed_tables_script_prints_the_numbers():
    out = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "seed_tables.py")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for number in ("0.5508", "0.2157", "0.3833", "0.9241", "0.9615", "0.6758", "0.5336", "0.2484", "0.4278",
                   "0.3691", "0.1309", "0.0693", "0.0120", "0.4444", "8.5000", "8.8928", "0.9558", "0.7000", "0.6000"):
        assert number in text, number


def test_copied_numbers_match_the_reference_file():
    path = REFERENCE / "seed_examples.json"
    if not path.exists():
        pytest.skip(f"reference file not present: {path}")
    cases = json.loads(path.read_text())["cases"]
    arrangements = [c for c in cases if "three arrangements" in c["source"]]
    for case in arrangements:
        slate = "".join(str(x) for x in case["labels_in_ranked_order"])
        e = case["expected"]
        assert ARRANGEMENTS[slate] == (
            e["precision@10"], e["recall@10"], e["reciprocal_rank"], e["average_precision"], e["ndcg@10"])
    gains = [c for c in cases if c["source"].startswith("000, table 'Gain' (")]
    for case in gains:
        e = case["expected"]
        assert GAIN_TABLE[tuple(case["labels_in_ranked_order"])] == (e["ndcg@5 linear gain"], e["ndcg@5 exponential gain 2^rel-1"])
    gap = next(c for c in cases if "gap column" in c["source"])["expected"]
    assert GAPS == (gap["linear gap"], gap["exponential gap"])
    disc = next(c for c in cases if "discount" in c["source"])["expected"]
    assert {int(k): v for k, v in disc.items()} == DISCOUNTS
    swaps = next(c for c in cases if "grow out of" in c["source"])["expected"]
    assert [(tuple(s["swap"]), s["ndcg_before"], s["ndcg_after"], s["delta"]) for s in swaps] == SWAPS
    assert next(c for c in cases if "MRR" in c["source"])["expected"]["mrr"] == MRR
    ndcg3 = next(c for c in cases if "NDCG example" in c["source"])["expected"]
    assert ndcg3 == NDCG3
    rp = next(c for c in cases if "recall and precision" in c["source"])["expected"]
    assert (rp["recall@300"], rp["precision@5"]) == (RECALL300, PRECISION5)
    assert len(cases) == 11  # every case of the file is covered above
