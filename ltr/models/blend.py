"""Blends: trained models of any kind combined with non-negative weights fitted on a validation set.

The blend of members ``m = 1..M`` scores an item ``i`` of query ``q`` as

    blend(i) = sum_m  w_m * z_m(i),      z_m(i) = (s_m(i) - mean_q(s_m)) / std_q(s_m),

where ``s_m`` are member ``m``'s raw scores, ``mean_q`` and ``std_q`` the mean and the population
standard deviation (``ddof = 0``) of its scores over query ``q``'s items, and ``z_m(i) = 0`` for every
item of a query whose scores member ``m`` gives all equal (largest == smallest). Standardising
within each query puts scores of different scales (a booster's sums of leaves, a net's logits) on
one scale without changing any member's ranking of a query. The sum runs in member order, in
float64, the same way when the weights are fitted and when the blend scores new data, so a blend
saved and loaded again gives the same scores bit for bit.

The weights are non-negative and sum to 1; they are multiples of ``1 / DENOMINATOR`` (1/500),
kept as integer units so that the sum is exactly one. They maximise the validation metric
(NDCG@10 by default, :func:`ltr.runs.scoring.evaluate_scores`: the toolkit's metrics and
conventions). The metric is piecewise constant in the weights (only the rankings count), so no
gradient helps; the search is deterministic and evaluates whole weight vectors:

1. start points: every point of the simplex grid of step 1/20 when ``M <= 3`` (21 points for two
   members, 231 for three), else the ``M`` corners (one member alone); equal weights always;
2. pairwise-exchange coordinate ascent, in three stages of steps 1/20, 1/100, 1/500 (the refinement
   of RankLib's coordinate ascent): from the best point, every move of ``k`` steps of weight from one
   member ``j`` to another member ``m`` (``k = 1..`` as far as ``w_j`` allows at the first stage,
   ``k = 1..5`` at the finer ones) is evaluated; the best move is taken if it improves, and the stage
   ends when none does (at most 50 moves per stage).

With the rule ``equal`` (``ltr blend --weights equal``) nothing is searched: every member weighs
``1/M`` (to the nearest 1/500) and the validation set only measures the blend.

With the rule ``cv`` (``ltr blend --weights cv``) the searched weights are shrunk toward equal
weights by an amount chosen by K-fold cross-validation over the validation *queries*
(:func:`fit_cv`): the queries are split into ``K`` folds (:func:`cv_folds`: a permutation of the
query positions by ``numpy.random.default_rng(CV_SEED)``, cut into ``K`` nearly equal parts; ``K =
min(CV_FOLDS, number of queries)``); for each fold ``k`` the search above runs on the other folds'
queries, giving ``w^(-k)``, and for each ``lambda`` of :data:`CV_LAMBDAS` (0, 1/4, 1/2, 3/4, 1)
fold ``k``'s queries are scored with

    w_k(lambda) = round(lambda * w^(-k) + (1 - lambda) * w_equal)        (:func:`shrink_units`),

rounded to the 1/500 grid by largest remainders (non-negative, summing to 1). Each query is scored
once, by the fold that holds it out; ``CV(lambda)`` is the metric's mean over those per-query values
(all folds together). The chosen ``lambda*`` is the one with the largest ``CV(lambda)`` (ties: the
smaller ``lambda``, nearer equal weights); the search is then run on the whole validation set and
the blend's weights are ``w(lambda*) = round(lambda* * w_search + (1 - lambda*) * w_equal)``.
``lambda* = 1`` is the plain search, ``lambda* = 0`` equal weights: the data choose between them by
how well searched weights carried over to queries they were not searched on.

"Best" compares the metric first, then prefers the point nearer to equal weights (smaller
``sum_m (M u_m - D)^2`` in units ``u``), then the earlier point in the order above: among weights
that rank the validation queries equally well, the search keeps the most even blend. Since the
corners (and equal weights) are among the start points and moves are only taken when they improve,
the blend's validation value is at least every member's alone.

A blend folder (``ltr blend``) holds ``blend.json`` (:func:`write_blend`, :func:`read_blend`): the
members' folders (relative to the blend folder, or copied into ``members/<k>``) with a digest of
their model files, the weights, the standardisation, the metric and its validation value, and the
fingerprint of the validation data. :func:`ltr.models.folder.load_scorer` loads it like any model
folder; the scorer needs the query offsets.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["BLEND_FILE", "BLEND_FORMAT", "DENOMINATOR", "STANDARDISATION", "WEIGHT_RULES", "CV_FOLDS", "CV_LAMBDAS",
           "CV_SEED", "DEFAULT_WEIGHT_RULE", "BlendFit", "standardise", "combine", "fit_weights", "equal_weights", "cv_folds", "shrink_units", "blend_scorer", "member_digest", "write_blend", "read_blend", "is_blend"]

BLEND_FILE = "blend.json"
BLEND_FORMAT = "ltr-blend-1"
DENOMINATOR = 500  # weights are multiples of 1/500
STEPS = (25, 5, 1)  # units of the three stages: 1/20, 1/100, 1/500
WINDOW = 5  # moves of k = 1..WINDOW steps at the finer stages
MAX_MOVES = 50  # per stage
CV_FOLDS = 5  # rule cv: folds of the validation queries
CV_SEED = 0  # rule cv: the seed of the permutation that deals the queries into folds
CV_LAMBDAS = (0.0, 0.25, 0.5, 0.75, 1.0)  # rule cv: the shrinkage grid (1 = searched, 0 = equal weights)
STANDARDISATION = ("per-query z-score: (s - mean_q) / std_q with the population std (ddof 0); "
                   "a query whose scores are all equal -> 0")


def standardise(scores, query_offsets, *, what: str = "scores") -> np.ndarray:
    """[N] float64 scores standardised within each query (see the module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    off = np.asarray(query_offsets, dtype=np.int64)
    if s.ndim != 1 or len(off) < 1 or off[0] != 0 or off[-1] != len(s) or np.any(np.diff(off) < 0):
        raise LtrError(f"{what}: {s.shape} scores do not match query offsets rising from 0 to {len(s)}")
    if not np.all(np.isfinite(s)):
        row = int(np.flatnonzero(~np.isfinite(s))[0])
        raise LtrError(f"{what}: row {row} has the score {s[row]} (a blend needs finite scores)")
    lengths = np.diff(off)
    query = np.repeat(np.arange(len(lengths)), lengths)
    n = np.maximum(lengths, 1).astype(np.float64)
    mean = np.bincount(query, weights=s, minlength=len(lengths)) / n
    dev = s - mean[query]
    std = np.sqrt(np.bincount(query, weights=dev * dev, minlength=len(lengths)) / n)
    full = lengths > 0
    constant = np.zeros(len(lengths), dtype=bool)
    if full.any():
        starts = off[:-1][full]
        constant[full] = np.maximum.reduceat(s, starts) == np.minimum.reduceat(s, starts)
    z = np.zeros_like(s)
    varied = ~constant[query]
    z[varied] = dev[varied] / std[query][varied]
    return z


def combine(standardised: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """``sum_m weights[m] * standardised[m]`` in member order (float64): the blend's scores."""
    out = np.zeros(len(standardised[0]), dtype=np.float64)
    for w, z in zip(weights, standardised):
        out += float(w) * z
    return out


@dataclass
class BlendFit:
    """The fitted weights (``units / DENOMINATOR``), the validation values and how the search went."""

    units: tuple[int, ...]
    value: float
    metric: str  # stamped name
    member_values: list[float]
    equal_value: float
    evaluations: int
    search: dict = field(default_factory=dict)

    @property
    def weights(self) -> list[float]:
        return [u / DENOMINATOR for u in self.units]

    @property
    def shrinkage(self) -> float | None:
        """Rule ``cv``: the chosen lambda (1 = the searched weights, 0 = equal weights); else None."""
        return self.search.get("cv", {}).get("lambda")


def _spread(units: tuple[int, ...]) -> int:
    """Distance to equal weights in integer units: sum_m (M u_m - D)^2."""
    m = len(units)
    return sum((m * u - DENOMINATOR) ** 2 for u in units)


def _equal_units(m: int) -> tuple[int, ...]:
    base, extra = divmod(DENOMINATOR, m)
    return tuple(base + (1 if k < extra else 0) for k in range(m))


def equal_weights(m: int) -> list[float]:
    """The search's equal weights for ``m`` members (multiples of 1/500: 0.334, 0.334, 0.332 for three)."""
    return [u / DENOMINATOR for u in _equal_units(m)]


def _simplex(m: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to share ``parts`` among ``m`` members, in lexicographic order of the counts."""
    if m == 1:
        return [(parts,)]
    return [(a,) + rest for a in range(parts + 1) for rest in _simplex(m - 1, parts - a)]


def _start_points(m: int) -> list[tuple[int, ...]]:
    step = STEPS[0]
    if m <= 3:
        points = [tuple(step * c for c in p) for p in _simplex(m, DENOMINATOR // step)]
    else:
        points = [tuple(DENOMINATOR if j == k else 0 for j in range(m)) for k in range(m)]
    return [_equal_units(m)] + [p for p in points if p != _equal_units(m)]


def _moves(units: tuple[int, ...], step: int, window: int | None) -> list[tuple[int, ...]]:
    """Every move of k steps of weight from member j to member m (k up to ``window``, or as far as w_j allows)."""
    out = []
    for m in range(len(units)):
        for j in range(len(units)):
            if j == m:
                continue
            k_max = units[j] // step if window is None else min(window, units[j] // step)
            for k in range(1, k_max + 1):
                new = list(units)
                new[m] += k * step
                new[j] -= k * step
                out.append(tuple(new))
    return out


def _search(value_of: Callable[[tuple[int, ...]], float], m: int) -> tuple[tuple[int, ...], dict]:
    """The start points, then the three stages of pairwise-exchange coordinate ascent (module docstring)."""

    def best_of(points):
        best = None
        for p in points:
            key = (value_of(p), -_spread(p))
            if best is None or key > best[1]:
                best = (p, key)
        return best

    best = best_of(_start_points(m))
    moves_taken = []
    for stage, step in enumerate(STEPS):
        taken = 0
        while taken < MAX_MOVES:
            candidate = best_of(_moves(best[0], step, None if stage == 0 else WINDOW))
            if candidate is None or candidate[1] <= best[1]:
                break
            best, taken = candidate, taken + 1
        moves_taken.append(taken)
    return best[0], {"start_points": len(_start_points(m)), "steps": [s / DENOMINATOR for s in STEPS],
                     "window": WINDOW, "moves": moves_taken}


WEIGHT_RULES = ("search", "equal", "cv", "held-out")
#: the rule of ``ltr blend``, ``fit_weights`` and ``ltr ablate``'s blend variants when none is named: chosen by the
#: best-recipe study (docs/experiments.md, "Weights shrunk toward equal by cross-validation") and kept by the
#: blend-rule study ("Blends that never lose to their members"): at or above the better member on 6 of 8 data
#: sets, both held-out sets included, and the least below it where it missed (``held-out`` -0.0117 on MQ2008)
DEFAULT_WEIGHT_RULE = "cv"
#: rule ``held-out``: the one-sided p-value below which the cross-validated blend is kept over the best member
HELD_OUT_ALPHA = 0.05


def fit_weights(member_scores: Sequence[np.ndarray], ds, metric: str = "ndcg@10", preset: str | None = None,
                rule: str = DEFAULT_WEIGHT_RULE, *, cv_folds: int = CV_FOLDS) -> BlendFit:
    """Fit the blend weights of members whose scores on ``ds`` (the validation set) are given.

    ``member_scores[m]``: member m's raw [N] scores of ``ds``'s rows. The metric must be a ranking
    metric of :func:`ltr.runs.scoring.evaluate_scores` (larger is better). ``rule="search"``: the
    weights that maximise the metric (module docstring); ``rule="equal"``: ``w_m = 1/M`` (in units of
    1/500, :func:`equal_weights`), nothing fitted, the validation set only measured; ``rule="cv"`` (the
    default, :data:`DEFAULT_WEIGHT_RULE`):
    the searched weights shrunk toward equal weights, ``w = lambda * w_search + (1 - lambda) * w_equal``
    with ``lambda`` chosen by ``cv_folds``-fold cross-validation over the validation queries
    (:func:`fit_cv`). The search's weights can follow the noise of a small validation set (a few
    hundred queries); equal weights of standardised scores cannot, and in the best-recipe study
    (docs/experiments.md) they generalised better on the real sets.
    """
    if rule not in WEIGHT_RULES:
        raise LtrError(f"blend weights rule {rule!r}: expected one of {', '.join(WEIGHT_RULES)}")
    from ltr.runs.scoring import CLASSIFICATION_METRICS, evaluate_scores

    if not member_scores:
        raise LtrError("a blend needs at least one member")
    if metric in CLASSIFICATION_METRICS:
        raise LtrError(f"metric {metric!r}: a blend is fitted on a ranking metric (e.g. ndcg@10, map, mrr@10)")
    zs = [standardise(s, ds.query_offsets, what=f"member {k}'s scores") for k, s in enumerate(member_scores)]
    stamped = evaluate_scores(np.zeros(2), _probe(), [metric], preset).names[metric]
    value_of, cache = _value_function(zs, ds, metric, preset, stamped, "the validation set")
    m = len(zs)
    corners = [tuple(DENOMINATOR if j == k else 0 for j in range(m)) for k in range(m)]
    member_values = [value_of(c) for c in corners]
    if rule == "equal":
        units, search = _equal_units(m), {}
    elif rule == "cv":
        units, search = fit_cv(zs, ds, metric, preset, stamped, value_of, cv_folds)
    elif rule == "held-out":
        units, search = fit_held_out(zs, ds, metric, preset, stamped, value_of, cv_folds)
    else:
        units, search = _search_or_single(value_of, m)
    search = {"rule": rule, **search}
    return BlendFit(units=tuple(units), value=value_of(units), metric=stamped, member_values=member_values,
                    equal_value=value_of(_equal_units(m)), evaluations=len(cache), search=search)


def _search_or_single(value_of, m: int) -> tuple[tuple[int, ...], dict]:
    """The search (module docstring) for two or more members; one member weighs 1."""
    return _search(value_of, m) if m > 1 else ((DENOMINATOR,), {"start_points": 1})


def _value_function(zs, ds, metric, preset, stamped, where: str):
    """``value_of(units)``: the metric's mean on ``ds`` of the blend with those weights (cached), and the cache."""
    from ltr.runs.scoring import evaluate_scores

    cache: dict[tuple[int, ...], float] = {}

    def value_of(units: tuple[int, ...]) -> float:
        if units not in cache:
            ev = evaluate_scores(combine(zs, [u / DENOMINATOR for u in units]), ds, [metric], preset)
            v = float(ev.mean[stamped])
            if not np.isfinite(v):
                raise LtrError(f"{stamped} is undefined on {where} (no query it can score): "
                               "the blend weights cannot be fitted on it")
            cache[units] = v
        return cache[units]

    return value_of, cache


def cv_folds(n_queries: int, k: int = CV_FOLDS) -> list[np.ndarray]:
    """The query positions of each cross-validation fold (rule ``cv``): a permutation of
    ``0..n_queries-1`` by ``numpy.random.default_rng(CV_SEED)``, cut by ``numpy.array_split`` into
    ``min(k, n_queries)`` parts, each sorted. Fewer than 2 queries cannot be cross-validated."""
    if n_queries < 2:
        raise LtrError(f"blend weights rule cv: the validation set has {n_queries} "
                       f"quer{'y' if n_queries == 1 else 'ies'}; cross-validating the weights needs at least 2")
    if k < 2:
        raise LtrError(f"blend weights rule cv: {k} folds; cross-validation needs at least 2")
    order = np.random.default_rng(CV_SEED).permutation(n_queries)
    return [np.sort(part) for part in np.array_split(order, min(k, n_queries))]


def shrink_units(units: Sequence[int], lam: float) -> tuple[int, ...]:
    """``lam * units + (1 - lam) * equal units`` on the 1/500 grid: each member gets the floor of its
    exact share, and the units left over go one each to the largest remainders (ties: the earlier
    member); so the result is non-negative, sums to ``DENOMINATOR``, and is ``units`` at ``lam = 1``
    and the equal units at ``lam = 0``."""
    from fractions import Fraction

    lam = Fraction(lam)
    exact = [lam * u + (1 - lam) * e for u, e in zip(units, _equal_units(len(units)))]
    floors = [int(x) for x in exact]  # x >= 0: int() is the floor
    left = DENOMINATOR - sum(floors)
    for j in sorted(range(len(exact)), key=lambda j: (-(exact[j] - floors[j]), j))[:left]:
        floors[j] += 1
    return tuple(floors)


def fit_cv(zs, ds, metric, preset, stamped, value_of, k: int = CV_FOLDS) -> tuple[tuple[int, ...], dict]:
    """Rule ``cv`` (module docstring): the lambda in :data:`CV_LAMBDAS` with the best held-out mean
    ``CV(lambda)`` (ties: the smaller lambda), and the whole set's searched weights shrunk by it.

    ``CV(lambda)`` is the metric's mean over every validation query, each query of fold ``f`` scored
    with ``shrink_units(w^(-f), lambda)``, ``w^(-f)`` the weights searched on the other folds' queries.
    """
    cross = _CrossFit(zs, ds, metric, preset, stamped, k)
    values = [float(cross.held_out(lam).mean[stamped]) for lam in CV_LAMBDAS]
    best = max(range(len(CV_LAMBDAS)), key=lambda i: (values[i], -i))  # ties: the smaller lambda
    searched, search = _search_or_single(value_of, len(zs))
    return shrink_units(searched, CV_LAMBDAS[best]), {**search, "cv": cross.record(values, CV_LAMBDAS[best], searched)}


class _CrossFit:
    """The searched weights of each cross-validation fold (found on the other folds' queries) and the
    held-out per-query values of any shrinkage of them."""

    def __init__(self, zs, ds, metric, preset, stamped, k: int):
        from types import SimpleNamespace

        from ltr.data.dataset import query_rows

        self.ds, self.metric, self.preset, self.stamped = ds, metric, preset, stamped
        off = np.asarray(ds.query_offsets, dtype=np.int64)
        self.folds = cv_folds(len(off) - 1, k)
        labels = np.asarray(ds.labels)
        self.units, self.rows, self.evaluations = [], [], 0
        for f, held_out in enumerate(self.folds):
            rest = np.sort(np.concatenate([q for g, q in enumerate(self.folds) if g != f]))
            rows = query_rows(off, rest)
            lengths = off[rest + 1] - off[rest]
            sub = SimpleNamespace(labels=labels[rows], query_offsets=np.concatenate([[0], np.cumsum(lengths)]))
            sub_value, cache = _value_function([z[rows] for z in zs], sub, metric, preset, stamped,
                                               f"the validation queries outside cross-validation fold {f + 1} of {len(self.folds)}")
            self.units.append(_search_or_single(sub_value, len(zs))[0])
            self.rows.append(query_rows(off, held_out))
            self.evaluations += len(cache)
        self.fold_zs = [[z[rows] for z in zs] for rows in self.rows]  # each held-out fold's scores, gathered once
        self.n_rows = len(labels)

    def held_out(self, lam: float):
        """The metric's evaluation of the validation set, each query scored with its fold's weights shrunk
        by ``lam`` (``.mean[stamped]``: ``CV(lambda)``; ``.per_query[stamped]``: each query's value)."""
        from ltr.runs.scoring import evaluate_scores

        held = np.zeros(self.n_rows, dtype=np.float64)
        for units, rows, held_zs in zip(self.units, self.rows, self.fold_zs):
            held[rows] = combine(held_zs, [u / DENOMINATOR for u in shrink_units(units, lam)])
        return evaluate_scores(held, self.ds, [self.metric], self.preset)

    def record(self, values, lam, searched) -> dict:
        return {"folds": len(self.folds), "seed": CV_SEED, "lambdas": list(CV_LAMBDAS), "values": values, "lambda": lam,
                "searched_units": list(searched), "fold_units": [list(u) for u in self.units],
                "fold_evaluations": self.evaluations}


def fit_held_out(zs, ds, metric, preset, stamped, value_of, k: int = CV_FOLDS,
                 alpha: float = HELD_OUT_ALPHA) -> tuple[tuple[int, ...], dict]:
    """Rule ``held-out``: the ``cv`` blend, kept only when it beats the best member alone on validation
    queries its weights were not fitted on; else that member alone (weight 1).

    The best member ``m*`` has the largest validation mean (ties: the earlier member); nothing is fitted
    for it. The blend's held-out values are ``cv``'s: query ``q`` of fold ``f`` scored with the weights
    searched on the other folds, shrunk by the ``lambda*`` of :func:`fit_cv`. With ``d_q`` = the blend's
    held-out value of ``q`` minus ``m*``'s value (queries the metric scores), the blend is kept when the
    one-sided paired t-test of ``mean(d) > 0`` gives ``p < alpha``:

        t = mean(d) / (sd(d) / sqrt(n)),   p = P(T_{n-1} >= t).

    A blend that only ties its best member, or wins by the noise of a few hundred queries, is not kept.
    Measured (docs/experiments.md, "Blends that never lose to their members"): on validation sets of a
    few hundred queries the member picked this way is often the weaker one on test (MQ2008: 3 folds of
    5), and the rule lost more than ``cv``, which hedges; it is offered, not the default.
    """
    m = len(zs)
    corners = [tuple(DENOMINATOR if j == c else 0 for j in range(m)) for c in range(m)]
    member_values = [value_of(c) for c in corners]
    best_member = max(range(m), key=lambda c: (member_values[c], -c))
    cross = _CrossFit(zs, ds, metric, preset, stamped, k)
    evaluations = [cross.held_out(lam) for lam in CV_LAMBDAS]
    values = [float(ev.mean[stamped]) for ev in evaluations]
    best = max(range(len(CV_LAMBDAS)), key=lambda i: (values[i], -i))
    searched, search = _search_or_single(value_of, m)
    gain, p = _paired_gain(evaluations[best].per_query[stamped], zs[best_member], ds, metric, preset, stamped)
    keep_blend = m > 1 and p < alpha
    units = shrink_units(searched, CV_LAMBDAS[best]) if keep_blend else corners[best_member]
    record = {"cv": cross.record(values, CV_LAMBDAS[best], searched),
              "held_out": {"best_member": best_member, "member_values": member_values, "alpha": alpha, **gain,
                           "p": p, "chosen": "blend" if keep_blend else "best member"}}
    return units, {**search, **record}


def _paired_gain(blend_per_query, member_z, ds, metric, preset, stamped) -> tuple[dict, float]:
    """The blend's per-query gain over a member on the queries the metric scores, and the one-sided
    paired t-test's p-value of a positive mean (1 when the gains do not vary)."""
    from scipy import stats

    from ltr.runs.scoring import evaluate_scores

    member = np.asarray(evaluate_scores(member_z, ds, [metric], preset).per_query[stamped], dtype=np.float64)
    d = np.asarray(blend_per_query, dtype=np.float64) - member
    d = d[~np.isnan(d)]
    p = float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue) if len(d) > 1 and np.ptp(d) > 0 else 1.0
    return {"queries": int(len(d)), "mean_gain": float(d.mean()) if len(d) else 0.0}, p


def _probe():
    from types import SimpleNamespace

    return SimpleNamespace(labels=np.array([1.0, 0.0]), query_offsets=np.array([0, 2]))


def blend_scorer(members: Sequence[Callable], weights: Sequence[float]) -> Callable:
    """``score(features, query_offsets) -> [N]``: the blend of the members' scoring functions."""
    weights = [float(w) for w in weights]

    def score(x, query_offsets=None):
        if query_offsets is None:
            raise LtrError("a blend standardises each member's scores within each query: pass query_offsets")
        zs = [standardise(fn(x, query_offsets), query_offsets, what=f"blend member {k}'s scores")
              for k, fn in enumerate(members)]
        return combine(zs, weights)

    return score


def _model_files(folder: Path) -> list[Path]:
    """The files that make a model folder's model: the top-level files named ``model*``."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.startswith("model"))


def member_digest(folder: str | os.PathLike) -> str:
    """SHA-256 over the names and bytes of a model folder's ``model*`` files (what its scores depend on)."""
    h = hashlib.sha256()
    for p in _model_files(Path(folder)):
        h.update(p.name.encode() + b"\0" + str(p.stat().st_size).encode() + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def is_blend(folder: str | os.PathLike) -> bool:
    return (Path(folder) / BLEND_FILE).is_file()


def _member_entries(tmp: Path, dest: Path, members: Sequence[dict], copy: bool) -> list[dict]:
    """blend.json's member entries; ``copy``: the model files go into ``members/<k>`` of the blend."""
    entries = []
    for k, mem in enumerate(members):
        src = Path(mem["folder"]).resolve()
        if copy:
            target = tmp / "members" / str(k)
            target.mkdir(parents=True)
            for p in _model_files(src):
                shutil.copy2(p, target / p.name)
            path = f"members/{k}"
        else:
            try:
                path = os.path.relpath(src, dest.resolve())
            except ValueError:  # another drive (Windows): no relative path exists
                path = str(src)
        entry = {"path": Path(path).as_posix(), "source": str(src), "kind": mem.get("kind"),
                 "digest": member_digest(src), "valid_value": mem.get("valid_value")}
        entries.append(entry)
    return entries


def write_blend(tmp: Path, dest: Path, members: Sequence[dict], fit: BlendFit, *, valid: dict, n_features: int,
                feature_names=None, preset: str | None = None, copy: bool = False) -> dict:
    """Write ``blend.json`` into ``tmp`` (the run folder that becomes ``dest``); return what it holds.

    ``members``: dicts with ``folder``, ``kind`` and ``valid_value``; ``valid``: facts of the
    validation data (path, fingerprint, sizes).
    """
    from ltr.base.io_utils import atomic_write_json

    doc = {
        "format": BLEND_FORMAT, "type": "blend",
        "members": _member_entries(tmp, dest, members, copy),
        "weights": fit.weights, "weight_units": list(fit.units), "denominator": DENOMINATOR,
        "standardisation": STANDARDISATION, "combination": "sum over members in order of weight * z",
        "metric": {"name": fit.metric.split("[", 1)[0], "stamped": fit.metric, "preset": preset},
        "valid_value": fit.value, "equal_weights_value": fit.equal_value,
        "search": {**fit.search, "evaluations": fit.evaluations},
        "valid": valid, "n_features": int(n_features),
    }
    if feature_names is not None:
        doc["feature_names"] = [str(n) for n in feature_names]
    atomic_write_json(tmp / BLEND_FILE, doc)
    return doc


def read_blend(folder: str | os.PathLike) -> dict:
    """``blend.json`` checked: members resolved to folders (``member_folders``) whose model files are
    still the ones the weights were fitted with, weights non-negative summing to 1."""
    from ltr.base.checks import read_json_object

    folder = Path(folder)
    where = folder / BLEND_FILE
    doc = read_json_object(where)
    if doc.get("format") != BLEND_FORMAT:
        raise LtrError(f"{where}: format {doc.get('format')!r}, expected {BLEND_FORMAT!r} (written by ltr blend)")
    members, weights = doc.get("members"), doc.get("weights")
    if not isinstance(members, list) or not members or not isinstance(weights, list) or len(weights) != len(members):
        raise LtrError(f"{where}: members and weights must be lists of the same length (at least one member)")
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and 0 <= w <= 1 for w in weights) \
            or abs(sum(weights) - 1.0) > 1e-9:
        raise LtrError(f"{where}: the weights must lie in [0, 1] and sum to 1, got {weights}")
    folders = []
    for k, m in enumerate(members):
        path = m.get("path") if isinstance(m, dict) else None
        if not isinstance(path, str) or not path:
            raise LtrError(f"{where}: member {k} has no path")
        member = Path(path) if Path(path).is_absolute() else folder / path
        if not member.is_dir():
            raise LtrError(f"{where}: member {k}'s folder {member} is missing (a blend refers to its members' "
                           "folders; keep them beside it, or make the blend with --copy-members)")
        if member_digest(member) != m.get("digest"):
            raise LtrError(f"{where}: member {k} ({member}) has changed since the blend was fitted (its model "
                           "files differ): fit the blend again with ltr blend")
        folders.append(member)
    return {**doc, "member_folders": folders}
