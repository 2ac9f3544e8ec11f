"""metrics.compare: means, differences with intervals, paired tests and corrections, wins/ties/losses;
scipy's paired t-test to 1e-12 and the randomization test against its enumerated p-value."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import metrics
from metrics.stats import bonferroni, holm, paired_randomization_test


def three_runs(seed=0, n_queries=40, length=15):
    rng = np.random.default_rng(seed)
    offsets = np.arange(n_queries + 1) * length
    labels = rng.choice([0, 0, 1, 2], size=offsets[-1]).astype(float)
    truth = labels + rng.normal(scale=1.5, size=labels.size)
    runs = {
        "bm25": truth + rng.normal(scale=3.0, size=labels.size),
        "better": truth + rng.normal(scale=0.2, size=labels.size),
        "random": rng.normal(size=labels.size),
    }
    ids = [f"q{j:02d}" for j in range(n_queries)]
    results = {name: metrics.evaluate(s, labels, offsets, "ndcg@10,map,arp", query_ids=ids, empty="zero")
               for name, s in runs.items()}
    return results


def test_t_test_and_interval_equal_scipy():
    results = three_runs()
    c = metrics.compare(results, baseline="bm25", test="t", correction="none")
    for metric in ("ndcg@10", "map"):
        name = c.stamped[metric]
        base = results["bm25"].per_query[name]
        for run in ("better", "random"):
            row = c.row(metric, run)
            ref = stats.ttest_rel(results[run].per_query[name], base)
            low, high = ref.confidence_interval(0.95)
            assert abs(row.p_value - ref.pvalue) <= 1e-12
            assert abs(row.low - low) <= 1e-12 and abs(row.high - high) <= 1e-12
            assert row.difference == pytest.approx(np.mean(results[run].per_query[name] - base), abs=1e-15)
            assert row.p_adjusted == row.p_value  # correction "none"
            assert row.mean == pytest.approx(results[run][metric], abs=1e-15)
    assert c.row("ndcg@10", "better").difference > 0 and c.row("ndcg@10", "better").p_value < 0.01


def test_corrections_are_within_each_metric():
    results = three_runs(1)
    raw = metrics.compare(results, correction="none")
    for correction, fn in (("holm", holm), ("bonferroni", bonferroni)):
        c = metrics.compare(results, correction=correction)
        for metric in c.metrics:
            p = [raw.row(metric, r).p_value for r in ("better", "random")]
            np.testing.assert_allclose([c.row(metric, r).p_adjusted for r in ("better", "random")], fn(p), atol=1e-15)
    assert raw.baseline == "bm25"  # the first run by default


def test_wins_ties_losses_follow_the_metric_direction():
    results = three_runs(2)
    c = metrics.compare(results, baseline="bm25")
    for metric in c.metrics:
        name = c.stamped[metric]
        d = results["better"].per_query[name] - results["bm25"].per_query[name]
        sign = -1 if metric == "arp" else 1
        row = c.row(metric, "better")
        assert (row.wins, row.ties, row.losses) == (int(np.sum(sign * d > 0)), int(np.sum(d == 0)),
                                                    int(np.sum(sign * d < 0)))
        assert row.wins + row.ties + row.losses == row.n
    arp = c.row("arp", "better")
    assert arp.difference < 0 and arp.wins > arp.losses  # a lower ARP is a win
    base = c.row("map", "bm25")
    assert base.is_baseline and np.isnan(base.p_value) and base.wins == 0


def _enumerated_p(d):
    observed = abs(np.mean(d))
    flips = [abs(np.mean(np.array(s) * d)) >= observed * (1 - 1e-12) for s in itertools.product([1, -1], repeat=d.size)]
    return np.mean(flips)


def test_randomization_test_exact_and_converging():
    rng = np.random.default_rng(3)
    a, b = rng.random(12), rng.random(12) - 0.15
    want = _enumerated_p(a - b)
    exact = paired_randomization_test(a, b, exact=True)
    assert exact.p_value == pytest.approx(want, abs=1e-15) and exact.method.endswith("exact")
    mc = paired_randomization_test(a, b, n_resamples=40_000, seed=5, exact=False)
    assert abs(mc.p_value - want) < 4 * np.sqrt(want * (1 - want) / 40_000) + 1 / 40_000
    again = paired_randomization_test(a, b, n_resamples=40_000, seed=5, exact=False)
    assert again.p_value == mc.p_value  # seeded
    assert paired_randomization_test(a, a).p_value == 1.0


@pytest.mark.parametrize("test", ["randomization", "bootstrap"])
def test_nonparametric_comparisons(test):
    results = three_runs(4)
    c = metrics.compare(results, test=test, n_resamples=2000, seed=1)
    row = c.row("ndcg@10", "better")
    assert row.low <= row.difference <= row.high and 0 < row.p_value <= 1
    assert c.as_dict()["metrics"]["ndcg@10"]["runs"]["better"]["p_value"] == row.p_value
    assert c.as_dict()["metrics"]["ndcg@10"]["runs"]["bm25"]["difference"] is None


def test_queries_matched_by_id_and_clear_errors():
    labels, offsets = [1, 0, 0, 1, 1, 0], [0, 2, 4, 6]
    a = metrics.evaluate([2.0, 1.0, 1.0, 2.0, 2.0, 1.0], labels, offsets, "mrr", query_ids=["x", "y", "z"])
    b = metrics.evaluate([2.0, 1.0, 2.0, 1.0], [0, 1, 1, 0], [0, 2, 4], "mrr", query_ids=["z", "y"])
    c = metrics.compare({"a": a, "b": b})
    assert c.query_ids == ["y", "z"]  # the queries both runs have, in the baseline's order
    assert c.row("mrr", "a").mean == 1.0 and c.row("mrr", "b").mean == 0.75
    assert c.row("mrr", "b").difference == pytest.approx(-0.25) and c.row("mrr", "b").losses == 1
    with pytest.raises(ValueError, match="baseline"):
        metrics.compare({"a": a, "b": b}, baseline="c")
    other = metrics.evaluate([1.0, 2.0], [1, 0], [0, 2], "mrr@1", query_ids=["y"])
    with pytest.raises(ValueError, match="other metrics"):
        metrics.compare({"a": a, "c": other})
    with pytest.raises(ValueError, match="unknown test"):
        metrics.compare({"a": a, "b": b}, test="wilcoxon")
