"""Position propensities harvested from the logs of several rankers (Agarwal, Zaitsev, Wang, Li, Najork
and Joachims, "Estimating Position Bias without Intrusive Interventions", WSDM 2019).

No session is randomized: several logging rankers (yesterday's and today's production models, an A/B
test) put the same (query, document) at different positions, and under the position-based model
``P(click | d at k) = p_k * rel(q, d)`` those natural swaps are interventions. For every pair of
positions (k, k') the *interventional set* S_{k,k'} holds the (q, d) shown at k in some sessions and
at k' in others. With ``n(q, d, k)`` the impressions of d at k for q and ``c(q, d, k)`` its clicks
there (over all the logs), each (q, d) is weighted by how often it appeared at the position::

    c_k^{k,k'}  = sum_{(q,d) in S_{k,k'}} c(q, d, k)  / n(q, d, k)      (its click rate at k)
    c_k'^{k,k'} = sum_{(q,d) in S_{k,k'}} c(q, d, k') / n(q, d, k')

so that ``E[c_k^{k,k'}] = p_k r_{k,k'}`` and ``E[c_k'^{k,k'}] = p_k' r_{k,k'}`` with the same
``r_{k,k'} = sum_{S_{k,k'}} rel(q, d)``: the ratio is ``p_k / p_k'`` whatever the rankers preferred.

Two estimators of the relative propensities ``p_k / p_1``:

* ``adjacent``: the chain of neighbouring ratios, ``p_k / p_1 = prod_{j<k} c_{j+1}^{j,j+1} / c_j^{j,j+1}``;
* ``allpairs`` (the paper's AllPairs): every pair at once, maximising over p (K values) and the
  symmetric r_{k,k'} the binomial likelihood of the harvested rates, with ``|S_{k,k'}|`` the set size::

      sum_{k != k'} c_k^{k,k'} log(p_k r_{k,k'}) + (|S_{k,k'}| - c_k^{k,k'}) log(1 - p_k r_{k,k'})

  (L-BFGS on logits; the answer is reported relative to position 1).

Intervals: a percentile bootstrap that resamples queries with replacement (a query's documents move
together). A single deterministic ranker shows every (q, d) at one position: nothing is harvested and
the estimate is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["HarvestedCounts", "harvest_counts", "counts_from_logs", "counts_from_cells", "pair_statistics", "adjacent_estimate",
           "allpairs_estimate", "HarvestEstimate", "estimate_harvest"]

METHODS = ("allpairs", "adjacent")


@dataclass
class HarvestedCounts:
    """Per (query, document) key g: ``rate[g, k]`` its click rate at position k + 1 (0 where never shown
    there), ``shown[g, k]`` whether it was shown there, ``query[g]`` its query (for the bootstrap),
    ``impressions[g, k]`` how often (the trust-bias fit weighs the rates by them)."""

    rate: np.ndarray
    shown: np.ndarray
    query: np.ndarray
    impressions: np.ndarray | None = None

    @property
    def n_positions(self) -> int:
        return int(self.rate.shape[1])


def harvest_counts(query: Any, doc: Any, position: Any, impressions: Any, clicks: Any,
                   n_positions: int | None = None) -> HarvestedCounts:
    """Aggregate (query, doc, position, impressions, clicks) records (several per key are summed; clicks
    may be expected values rather than counts) into :class:`HarvestedCounts` for positions 1..K."""
    q, d, pos = (np.asarray(a, dtype=np.int64).ravel() for a in (query, doc, position))
    n, c = np.asarray(impressions, dtype=np.float64).ravel(), np.asarray(clicks, dtype=np.float64).ravel()
    if not len(q) == len(d) == len(pos) == len(n) == len(c):
        raise LtrError(f"harvest: query, doc, position, impressions and clicks differ in length "
                       f"({len(q)}, {len(d)}, {len(pos)}, {len(n)}, {len(c)})")
    if len(q) == 0:
        raise LtrError("harvest: no impressions")
    if (pos < 1).any() or (n < 0).any() or (c < 0).any() or (c > n + 1e-9).any():
        raise LtrError("harvest: positions must be >= 1 and 0 <= clicks <= impressions")
    k = int(n_positions or pos.max())
    keep = pos <= k
    q, d, pos, n, c = q[keep], d[keep], pos[keep], n[keep], c[keep]
    keys, key_of = _unique_pairs(q, d)
    # sums per (key, position) cell, added in record order as np.add.at would (bincount is its fast form)
    cell = key_of * k + (pos - 1)
    imp = np.bincount(cell, weights=n, minlength=len(keys) * k).reshape(len(keys), k)
    clk = np.bincount(cell, weights=c, minlength=len(keys) * k).reshape(len(keys), k)
    shown = imp > 0
    rate = np.where(shown, clk / np.where(shown, imp, 1.0), 0.0)
    return HarvestedCounts(rate, shown, keys[:, 0], imp)


def _unique_pairs(q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (query, doc) pairs [M, 2] in lexicographic order and each record's pair [N]: what
    ``np.unique(np.stack([q, d], 1), axis=0, return_inverse=True)`` gives, through one int64 key
    ``(q - min q) * span(d) + (d - min d)`` (an order-keeping map, about 10x faster than unique rows)."""
    q_low, d_low = int(q.min()), int(d.min())
    span = int(d.max()) - d_low + 1
    if (int(q.max()) - q_low + 1) * span >= 2**62:  # ids too far apart for one key: unique rows
        keys, key_of = np.unique(np.stack([q, d], axis=1), axis=0, return_inverse=True)
        return keys, key_of.ravel()
    _, first, key_of = np.unique((q - q_low) * span + (d - d_low), return_index=True, return_inverse=True)
    return np.stack([q[first], d[first]], axis=1), key_of.ravel()


def counts_from_logs(logs: Sequence[Any], n_positions: int | None = None) -> HarvestedCounts:
    """:class:`HarvestedCounts` from click logs (:class:`ltr.clicks.simulate.click_models.ClickLog`) of the same data
    set, one per logging ranker (any session mode: swapped or randomized sessions are interventions too)."""
    from ltr.clicks.propensities.harvest_stream import cells_of_log

    return counts_from_cells([cells_of_log(log) for log in logs], n_positions)


def counts_from_cells(cells: Sequence[Any], n_positions: int | None = None) -> HarvestedCounts:
    """:class:`HarvestedCounts` from the per-cell sums of several logs (:class:`ltr.clicks.propensities.harvest_stream.HarvestCells`,
    of a log in memory or streamed from Parquet) of the same data set."""
    if not cells:
        raise LtrError("harvest: no click log given")
    rows = {c.meta.get("n_rows") for c in cells} - {None}
    if len(rows) > 1:
        raise LtrError(f"harvest: the logs were simulated on different data sets (rows: {sorted(rows)})")
    cat = {name: np.concatenate([getattr(c, name) for c in cells]) for name in ("query", "doc", "position", "n", "clicks")}
    return harvest_counts(cat["query"], cat["doc"], cat["position"], cat["n"], cat["clicks"], n_positions)


def pair_statistics(counts: HarvestedCounts, weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(C [K, K], S [K, K])``: ``C[k, k'] = c_k^{k,k'}`` (rates at k of the keys also shown at k') and
    ``S[k, k'] = |S_{k,k'}|``; ``weight`` [G] counts each key that many times (the bootstrap)."""
    shown = counts.shown.astype(np.float64)
    w = np.ones(len(shown)) if weight is None else np.asarray(weight, dtype=np.float64)
    c = (counts.rate * w[:, None]).T @ shown
    s = (shown * w[:, None]).T @ shown
    np.fill_diagonal(c, 0.0)
    np.fill_diagonal(s, 0.0)
    return c, s


def linked_positions(c: np.ndarray, s: np.ndarray, adjacent: bool = False) -> np.ndarray:
    """``[K]`` bool: the positions whose propensity the harvested pairs identify. AllPairs: those linked to
    position 1 through pairs with clicks on both sides; the adjacent chain: those before its first break (a
    neighbouring pair without a clicked swap)."""
    k = len(s)
    if adjacent:
        ok = np.ones(k, dtype=bool)
        for j in range(k - 1):
            if s[j, j + 1] <= 0 or c[j, j + 1] <= 0 or c[j + 1, j] <= 0:
                ok[j + 1:] = False
                break
        return ok
    linked = (c > 0) & (c.T > 0)
    reach = np.zeros(k, dtype=bool)
    reach[0] = True
    for _ in range(k):
        reach = reach | (linked[reach].any(axis=0))
    return reach


def _check_harvest(c: np.ndarray, s: np.ndarray, adjacent: bool) -> None:
    if not (s > 0).any():
        raise LtrError("harvest: no (query, document) was shown at two different positions, so nothing can be "
                       "harvested; intervention harvesting needs the logs of several rankers that order the same "
                       "queries differently (a single deterministic ranker shows every document at one position)")
    if not linked_positions(c, s, adjacent)[1:].any():
        raise LtrError("harvest: no clicked swap links position 1 to another position: no propensity is identified")


def adjacent_estimate(c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``p_k / p_1`` by the chain of adjacent ratios ``c[j+1, j] / c[j, j+1]``; NaN after the chain's first break.

    >>> c = np.array([[0, 0.6, 0], [0.3, 0, 0.2], [0, 0.1, 0]]); s = (c > 0) * 5.0
    >>> adjacent_estimate(c, s).tolist()
    [1.0, 0.5, 0.25]
    """
    _check_harvest(c, s, adjacent=True)
    known = linked_positions(c, s, adjacent=True)
    k = int(known.sum())
    steps = [c[j + 1, j] / c[j, j + 1] for j in range(k - 1)]
    out = np.full(len(c), np.nan)
    out[:k] = np.concatenate([[1.0], np.cumprod(steps)])
    return out


def _allpairs_objective(params, c, s, pairs, k):
    """Minus the AllPairs log-likelihood and its gradient; ``params`` = logits of p [K] then of r [pairs]."""
    u, v = params[:k], params[k:]
    p, r = 1.0 / (1.0 + np.exp(-np.clip(u, -50, 50))), 1.0 / (1.0 + np.exp(-np.clip(v, -50, 50)))
    i, j = pairs
    value, gp, gr = 0.0, np.zeros(k), np.zeros(len(v))
    for a, b in ((i, j), (j, i)):  # c_a^{a,b} with the pair's r
        m = p[a] * r
        m = np.clip(m, 1e-12, 1 - 1e-12)
        pos, neg = c[a, b], s[a, b] - c[a, b]
        value -= (pos * np.log(m) + neg * np.log1p(-m)).sum()
        dm = -(pos / m - neg / (1 - m))  # d(-loglik)/dm
        np.add.at(gp, a, dm * r)
        gr += dm * p[a]
    grad = np.concatenate([gp * p * (1 - p), gr * r * (1 - r)])
    return value, grad


def allpairs_estimate(c: np.ndarray, s: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """``p_k / p_1`` by the AllPairs likelihood (module docstring) over every pair with ``S > 0``; NaN at the positions
    no clicked swap links to position 1 (:func:`linked_positions`)."""
    _check_harvest(c, s, adjacent=False)
    known = linked_positions(c, s)
    out = np.full(len(c), np.nan)
    idx = np.flatnonzero(known)
    out[idx] = _allpairs(c[np.ix_(idx, idx)], s[np.ix_(idx, idx)], None if start is None else np.asarray(start)[idx])
    return out


def _allpairs(c: np.ndarray, s: np.ndarray, start) -> np.ndarray:
    """The AllPairs fit on positions all linked to the first (:func:`allpairs_estimate`)."""
    from scipy.optimize import minimize

    k = len(c)
    i, j = np.nonzero(np.triu(s > 0, 1))
    scale = max(float(s.max()), 1.0)  # the likelihood in units of the largest set (well-conditioned steps)
    p0 = np.clip(1.0 / np.arange(1, k + 1) if start is None else np.nan_to_num(np.asarray(start, dtype=np.float64), nan=0.5), 1e-3, 0.999)
    ratio = (c[i, j] + c[j, i]) / np.maximum(s[i, j] * (p0[i] + p0[j]), 1e-12)
    r0 = np.clip(ratio, 1e-3, 0.999)
    x0 = np.concatenate([np.log(p0 / (1 - p0)), np.log(r0 / (1 - r0))])
    res = minimize(_allpairs_objective, x0, args=(c / scale, s / scale, (i, j), k), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-12, "ftol": 1e-15})
    p = 1.0 / (1.0 + np.exp(-res.x[:k]))
    return p / p[0]


@dataclass(frozen=True)
class HarvestEstimate:
    """Relative propensities ``theta`` [K] (``theta[0] = 1``), the percentile bootstrap interval
    ``low``/``high`` at ``confidence``, and per position the number of harvested (q, d) keys and the
    pairs' set sizes ``pairs[k, k']`` (``|S_{k,k'}|``)."""

    positions: np.ndarray
    theta: np.ndarray
    low: np.ndarray
    high: np.ndarray
    keys: np.ndarray
    pairs: np.ndarray
    method: str
    confidence: float
    resamples: int

    def as_rows(self, truth: Any = None) -> list[dict]:
        """Rows of position, estimate, interval, harvested keys (and the truth, relative to position 1,
        with whether the interval covers it)."""
        t = None if truth is None else np.asarray(truth, dtype=np.float64).ravel()
        rows = []
        for r in range(len(self.theta)):
            row = {"position": r + 1, "theta": float(self.theta[r]), "low": float(self.low[r]),
                   "high": float(self.high[r]), "keys": int(self.keys[r])}
            if t is not None and len(t) > r:
                row["truth"] = float(t[r] / t[0])
                if np.isfinite(self.theta[r]):
                    row["covered"] = bool(row["low"] - 1e-12 <= row["truth"] <= row["high"] + 1e-12)
            rows.append(row)
        return rows


def _estimate_once(counts: HarvestedCounts, method: str, weight=None, start=None) -> np.ndarray:
    c, s = pair_statistics(counts, weight)
    return adjacent_estimate(c, s) if method == "adjacent" else allpairs_estimate(c, s, start)


def estimate_harvest(counts: HarvestedCounts, *, method: str = "allpairs", resamples: int = 200,
                     confidence: float = 0.95, seed: int = 0) -> HarvestEstimate:
    """Relative propensities from harvested swaps (``method`` "allpairs" or "adjacent"; NaN at a position the
    harvested pairs do not identify, :func:`linked_positions`), with a percentile bootstrap over queries (``resamples`` replicates; a replicate in which some pair is
    missing is redrawn at most ``resamples`` extra times, then the interval uses what succeeded)."""
    if method not in METHODS:
        raise LtrError(f"harvest: unknown method {method!r}: use one of {', '.join(METHODS)}")
    if not 0 < confidence < 1 or resamples < 0:
        raise LtrError(f"harvest: confidence must be in (0, 1) and resamples >= 0, got {confidence}, {resamples}")
    from ltr.base.threads import one_blas_thread

    with one_blas_thread():  # the fits are small: [K, K] statistics, 2K unknowns
        return _bootstrap_harvest(counts, method, resamples, confidence, seed)


def _bootstrap_harvest(counts: HarvestedCounts, method: str, resamples: int, confidence: float,
                       seed: int) -> HarvestEstimate:
    """:func:`estimate_harvest` once its arguments are checked."""
    theta = _estimate_once(counts, method)
    queries, inv = np.unique(counts.query, return_inverse=True)
    rng = np.random.default_rng(seed)
    reps, tries = [], 0
    while len(reps) < resamples and tries < 2 * resamples:
        tries += 1
        draw = np.bincount(rng.integers(0, len(queries), len(queries)), minlength=len(queries))
        try:
            reps.append(_estimate_once(counts, method, draw[inv.ravel()].astype(np.float64), theta))
        except LtrError:
            continue
    tail = (1 - confidence) / 2
    if reps:
        import warnings

        draws = np.where(np.isfinite(theta)[None, :], np.array(reps), np.nan)  # the positions the estimate identifies
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanquantile(draws, [tail, 1 - tail], axis=0)
    else:
        low, high = np.full(len(theta), np.nan), np.full(len(theta), np.nan)
    _, s = pair_statistics(counts)
    return HarvestEstimate(np.arange(1, len(theta) + 1), theta, low, high,
                           (counts.shown & (counts.shown.sum(axis=1) > 1)[:, None]).sum(axis=0), s, method,
                           confidence, len(reps))
