"""Compare several runs (systems) query by query against a baseline, with significance tests.

For each metric and each run r other than the baseline b, over the queries both evaluated (pairs
with a NaN on either side dropped), with d_q = v_q(r) - v_q(b):

- the means of every run, and the mean difference mean(d) with its ``confidence`` interval:
  Student-t (``test="t"``; clipped to [-1, 1] for a measure whose values lie in [0, 1], where the
  difference of two means lies) or percentile bootstrap (``"randomization"``, ``"bootstrap"``: inside
  the range of the differences by construction);
- a two-sided p-value of mean(d) = 0: paired t-test (scipy's ``ttest_rel``), sign-flip
  randomization test (exact for small n, seeded Monte Carlo otherwise) or paired bootstrap test;
- p-values adjusted for the number of comparisons *within each metric* (the runs compared to the
  baseline): ``"holm"``, ``"bonferroni"`` or ``"none"``;
- wins / ties / losses: queries where the run is better / equal / worse than the baseline (for
  metrics where lower is better, such as ARP, a win is a lower value).

Inputs are :class:`metrics.evaluate.EvaluationResult` objects (one per run, same metric names
and conventions); with ``query_ids`` the queries are matched by id (those every run has), without
them by position. Randomised procedures are deterministic given ``seed``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping

import numpy as np

from metrics.evaluate import EvaluationResult, higher_is_better, unit_bounded
from metrics.stats import (
    CORRECTIONS,
    adjust_p_values,
    bootstrap_ci,
    paired_bootstrap_test,
    paired_randomization_test,
    paired_t_test,
    t_interval,
)

__all__ = ["compare", "Comparison", "ComparisonRow", "TESTS"]

TESTS = ("t", "randomization", "bootstrap")


@dataclass(frozen=True)
class ComparisonRow:
    """One run on one metric; the difference fields are NaN (and counts 0) for the baseline."""

    metric: str
    stamped: str
    run: str
    is_baseline: bool
    mean: float
    n: int
    difference: float = float("nan")
    low: float = float("nan")
    high: float = float("nan")
    p_value: float = float("nan")
    p_adjusted: float = float("nan")
    wins: int = 0
    ties: int = 0
    losses: int = 0


@dataclass
class Comparison:
    """Every run against the baseline on every metric; ``rows`` metric by metric, runs in order."""

    baseline: str
    runs: list
    metrics: list
    stamped: dict
    rows: list
    test: str
    correction: str
    confidence: float
    query_ids: list | None = None
    differences: dict = field(default_factory=dict)  # (metric, run) -> [Q] per-query d (NaN: no pair)

    def row(self, metric: str, run: str) -> ComparisonRow:
        for r in self.rows:
            if r.metric == metric and r.run == run:
                return r
        raise KeyError((metric, run))

    def as_dict(self) -> dict:
        """JSON-ready: settings, and per metric (short name) its stamped name and each run's row."""
        out: dict = {"baseline": self.baseline, "runs": list(self.runs), "test": self.test,
                     "correction": self.correction, "confidence": self.confidence, "metrics": {}}
        for metric in self.metrics:
            runs = {}
            for r in self.rows:
                if r.metric == metric:
                    d = asdict(r)
                    for key in ("metric", "stamped", "run"):
                        d.pop(key)
                    runs[r.run] = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in d.items()}
            out["metrics"][metric] = {"stamped": self.stamped[metric], "runs": runs}
        return out


def _aligned(results: Mapping[str, EvaluationResult]) -> tuple[list | None, dict]:
    """Common query ids (None: by position) and, per run, the row index of each common query."""
    runs = list(results)
    ids = [results[r].query_ids for r in runs]
    if all(i is not None for i in ids):
        common = set(ids[0]).intersection(*map(set, ids[1:]))
        order = [q for q in ids[0] if q in common]
        index = {}
        for r in runs:
            where = {q: i for i, q in enumerate(results[r].query_ids)}
            index[r] = np.array([where[q] for q in order], dtype=np.int64)
        return [str(q) for q in order], index
    sizes = {len(next(iter(results[r].per_query.values()))) for r in runs}
    if len(sizes) != 1:
        raise ValueError("runs evaluated on different numbers of queries need query_ids to be matched")
    n = sizes.pop()
    return None, {r: np.arange(n) for r in runs}


def _test(d_run, d_base, test, confidence, n_resamples, seed, bounded=False):
    if test == "t":  # a difference of two values in [0, 1] lies in [-1, 1]: so does its interval
        res = paired_t_test(d_run, d_base)
        ci = t_interval(d_run - d_base, confidence=confidence, bounds=(-1.0, 1.0) if bounded else None)
    elif test == "randomization":
        res = paired_randomization_test(d_run, d_base, n_resamples=n_resamples, seed=seed)
        ci = bootstrap_ci(d_run - d_base, confidence=confidence, n_resamples=n_resamples, seed=seed)
    else:
        res = paired_bootstrap_test(d_run, d_base, n_resamples=n_resamples, seed=seed)
        ci = bootstrap_ci(d_run - d_base, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return res, ci


def compare(results: Mapping[str, EvaluationResult], *, baseline: str | None = None, test: str = "t",
            correction: str = "holm", confidence: float = 0.95, n_resamples: int = 10_000,
            seed: int = 0) -> Comparison:
    """Compare runs (name -> EvaluationResult) against ``baseline`` (default: the first run).

    >>> import metrics
    >>> labels, offsets = [1, 0, 0, 1, 1, 0, 0, 1, 0], [0, 3, 6, 9]
    >>> a = metrics.evaluate([3., 2., 1., 3., 2., 1., 3., 2., 1.], labels, offsets, "mrr")
    >>> b = metrics.evaluate([1., 2., 3., 1., 2., 3., 3., 2., 1.], labels, offsets, "mrr")
    >>> c = compare({"a": a, "b": b})
    >>> row = c.row("mrr", "b")
    >>> round(row.difference, 4), (row.wins, row.ties, row.losses)
    (-0.3889, (0, 1, 2))
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}: use one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}: use one of {', '.join(CORRECTIONS)}")
    runs = list(results)
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    baseline = runs[0] if baseline is None else baseline
    if baseline not in results:
        raise ValueError(f"baseline {baseline!r} is not one of the runs ({', '.join(runs)})")
    metric_names = list(results[baseline].names)
    stamped = dict(results[baseline].names)
    for r in runs:
        if dict(results[r].names) != stamped:
            raise ValueError(f"run {r!r} was evaluated with other metrics or conventions than {baseline!r}")
    query_ids, index = _aligned(results)
    others = [r for r in runs if r != baseline]
    out = Comparison(baseline, runs, metric_names, stamped, [], test, correction, confidence, query_ids)
    for metric in metric_names:
        name = stamped[metric]
        values = {r: np.asarray(results[r].per_query[name], dtype=np.float64)[index[r]] for r in runs}
        sign = 1.0 if higher_is_better(name) else -1.0
        tested = [_test(values[r], values[baseline], test, confidence, n_resamples, seed, unit_bounded(metric))
                  for r in others]
        adjusted = adjust_p_values([res.p_value for res, _ in tested], correction) if others else []
        base = values[baseline]
        out.rows.append(ComparisonRow(metric, name, baseline, True, _nanmean(base), int(np.sum(~np.isnan(base)))))
        for r, (res, ci), p_adj in zip(others, tested, adjusted):
            d = values[r] - base
            out.differences[(metric, r)] = d
            ok = d[~np.isnan(d)] * sign
            out.rows.append(ComparisonRow(
                metric, name, r, False, _nanmean(values[r]), res.n, res.mean_difference, ci.low, ci.high,
                res.p_value, float(p_adj), int(np.sum(ok > 0)), int(np.sum(ok == 0)), int(np.sum(ok < 0)),
            ))
    return out


def _nanmean(x: np.ndarray) -> float:
    ok = ~np.isnan(x)
    return float(x[ok].mean()) if ok.any() else float("nan")
