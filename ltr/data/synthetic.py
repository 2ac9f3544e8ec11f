"""Seeded MSLR-like ranking data with a hidden non-linear teacher, empty queries and users.

How a data set is made (every draw comes from one ``numpy.random.Generator(seed)``):

1. **List lengths** ``n_q = clip(round(LogNormal(mu, sigma)), 1, max_list_length)``, with ``sigma``
   = ``length_sigma`` (1.0: heavy right tail) and ``mu`` solved numerically so that the mean of the
   clipped, rounded law is ``mean_list_length`` (MSLR-WEB10K: about 120 documents per query, 1 to
   about 1000).
2. **Latent item vectors** ``z_i = 0.6 * c_q + e_i`` in R^8 (``c_q`` a query centre, ``e_i`` item
   noise, both standard normal).
3. **Teacher** (hidden, non-linear): ``t_i = w2 . tanh(W1 z_i + b1) + 0.5 z_i1 z_i2 - 0.6 z_i3^2``
   (24 hidden units, ``w2 ~ N(0, 1/24)``; the last term makes a middle value of ``z3`` best, as for
   document length), scaled to unit variance. The grade score is ``s_i = t_i + d_q + label_noise * eps_i``,
   where ``d_q ~ N(0, 0.5^2)`` shifts a whole query (some queries have many relevant documents,
   some few).
4. **Grades 0..4** by global quantiles of ``s`` at the MSLR-WEB10K label shares
   (0: 52%, 1: 32%, 2: 13.4%, 3: 1.8%, 4: 0.8%). Then exactly ``round(empty_query_share * Q)``
   queries (chosen at random) get all grades 0, and every other query that came out without a
   relevant document gets grade 1 on its best-scored one, so the share of queries with no relevant
   item is the asked one.
5. **Features** (``n_features``, 136 by default), in a shuffled column order: 40% informative ones,
   each a noisy projection ``u = z . a_j + noise_j * N(0, 1)`` of the latent vector through one of
   three monotone transforms, like MSLR's mix of feature kinds: counts ``round(exp(0.9 u + 1))``,
   scores ``softplus(2 u)`` and ratios ``sigmoid(u)``; 10% query-level ones (equal within a query, as
   MSLR's query-length or IDF features); the rest are noise of the same kinds. Non-count values are
   rounded to 4 decimals, as in LETOR files.
6. **Users** with heavy-tailed activity: when ``n_users`` is None, per-user query counts are drawn
   from a Zipf law (``P(k) ~ k^-2``: about 60% of users are newcomers with one query, a few are
   very active), capped at ``max(1, Q // 10)``, and dealt to the queries in random order; with
   ``n_users`` given, each query picks user ``u`` with probability ``~ (u + 1)^-1.1``.
7. **Query-relative scores** (only with ``query_relative = r > 0``; drawn after everything else, so
   every other array is the one the same seed gives without it): each informative column of the
   score kind (``softplus``, a retrieval-score stand-in) gets a per-query location and scale,
   ``x'_ij = round(r * sd_j * eta_qj + exp(r * eta_qj / 4) * x_ij, 4)`` with
   ``eta_qj = 0.8 g_q + 0.6 nu_qj`` (``g_q ~ N(0, 1)`` shared by the query's columns, as a query's
   length or popularity moves all its BM25-like scores; ``nu_qj ~ N(0, 1)`` per column) and ``sd_j``
   the column's standard deviation over all rows before the shift. The map is increasing within a
   query, so each query's order of the column (and its agreement with the grades) is kept, while its
   absolute level now mostly tells which query a row is from: with ``r = 2`` 80-85% of the
   column's variance lies between queries, 10-20% without (tests/test_synthetic_query_relative.py).
   The count columns are heavy-tailed already (step 5: ``round(exp(0.9 u + 1))`` is log-normal, its
   maximum hundreds of times its median).

Because the grades come from ``tanh`` units, a product and a square of latent coordinates seen only
through noisy monotone non-linear feature transforms, a linear scorer cannot rank as well as the
teacher while a non-linear one (MLP, gradient-boosted trees) gets closer: better models truly score
higher (tests/test_synthetic.py measures chance < linear < non-linear < teacher).
"""

from __future__ import annotations

import math
import numbers
from types import MappingProxyType

import numpy as np

from ltr.data.dataset import RankingDataset, split_by_query

__all__ = ["make_mslr_like", "make_synthetic_splits", "generate", "DEFAULT", "LABEL_SHARES", "GENERATOR_VERSION"]

GENERATOR_VERSION = 1
LABEL_SHARES = (0.52, 0.32, 0.134, 0.018, 0.008)  # MSLR-WEB10K grade shares, rounded
_LATENT = 8
_HIDDEN = 24

#: The small size used by the README demo and ``ltr synth`` when no size is given.
DEFAULT = MappingProxyType({"n_queries": 300, "n_features": 136, "mean_list_length": 120, "seed": 0})


def _lognormal_mu(mean: float, sigma: float, max_length: int) -> float:
    """mu such that E[clip(round(LogNormal(mu, sigma)), 1, max_length)] = mean (bisection on a grid)."""
    if mean <= 1.0:
        return -10.0
    p = (np.arange(4000) + 0.5) / 4000
    from scipy.special import ndtri

    z = ndtri(p)

    def clipped_mean(mu):
        return float(np.clip(np.round(np.exp(mu + sigma * z)), 1, max_length).mean())

    lo, hi = -5.0, math.log(max_length) + 5.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if clipped_mean(mid) < mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _check(name, value, lo=None, hi=None, integer=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {value!r}")
    if integer and int(value) != value:
        raise ValueError(f"{name} must be an integer; got {value!r}")
    if lo is not None and value < lo:
        raise ValueError(f"{name} must be >= {lo}; got {value!r}")
    if hi is not None and value > hi:
        raise ValueError(f"{name} must be <= {hi}; got {value!r}")


def _check_mslr_args(n_queries, n_features, mean_list_length, max_list_length, empty_query_share, n_users, label_noise, length_sigma):
    _check("n_queries", n_queries, lo=1, integer=True)
    _check("n_features", n_features, lo=1, integer=True)
    _check("max_list_length", max_list_length, lo=1, integer=True)
    _check("mean_list_length", mean_list_length, lo=1, hi=max_list_length)
    _check("empty_query_share", empty_query_share, lo=0.0, hi=1.0)
    _check("label_noise", label_noise, lo=0.0)
    _check("length_sigma", length_sigma, lo=0.0)
    if n_users is not None:
        _check("n_users", n_users, lo=1, integer=True)


def _list_lengths(rng, n_queries, mean_list_length, max_list_length, length_sigma):
    """Step 1: ``n_q = clip(round(LogNormal(mu, sigma)), 1, max_list_length)``.

    Returns ``(mu, lengths [Q], offsets [Q+1], qidx [N])``, ``qidx`` being each item's query index.
    """
    mu = _lognormal_mu(float(mean_list_length), float(length_sigma), max_list_length)
    lengths = np.clip(np.round(rng.lognormal(mu, length_sigma, size=n_queries)), 1, max_list_length).astype(np.int64)
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    qidx = np.repeat(np.arange(n_queries), lengths)
    return mu, lengths, offsets, qidx


def _latent_vectors(rng, n_queries, qidx):
    """Step 2: ``z_i = 0.6 c_q + e_i`` in R^8. Returns ``(centres [Q, 8], z [N, 8])``."""
    centres = rng.standard_normal((n_queries, _LATENT))
    z = 0.6 * centres[qidx] + rng.standard_normal((len(qidx), _LATENT))
    return centres, z


def _teacher_and_scores(rng, z, qidx, n_queries, label_noise):
    """Step 3: the unit-variance teacher ``t`` and the grade score ``s = t + d_q + label_noise * eps``."""
    w1 = rng.standard_normal((_LATENT, _HIDDEN)) / math.sqrt(_LATENT) * 1.5
    b1 = rng.standard_normal(_HIDDEN) * 0.5
    w2 = rng.standard_normal(_HIDDEN) / math.sqrt(_HIDDEN)
    # tanh units, one interaction and one non-monotone effect (a middle value of z3 is best, as for
    # document length): a linear scorer over monotone views of z cannot express the last two
    teacher = np.tanh(z @ w1 + b1) @ w2 + 0.5 * z[:, 0] * z[:, 1] - 0.6 * z[:, 2] ** 2
    teacher = (teacher - teacher.mean()) / (teacher.std() + 1e-12)
    difficulty = 0.5 * rng.standard_normal(n_queries)
    score = teacher + difficulty[qidx] + label_noise * rng.standard_normal(len(qidx))
    return teacher, score


def _grades(rng, score, offsets, qidx, empty_query_share):
    """Step 4: grades 0..4 by global quantiles at :data:`LABEL_SHARES`, then the asked share of empty queries."""
    n_queries = len(offsets) - 1
    cuts = np.quantile(score, np.cumsum(LABEL_SHARES)[:-1])
    labels = np.searchsorted(cuts, score, side="right").astype(np.float64)
    n_empty = int(round(empty_query_share * n_queries))
    empty = np.zeros(n_queries, dtype=bool)
    empty[rng.choice(n_queries, size=n_empty, replace=False)] = True
    labels[empty[qidx]] = 0.0
    best_grade = np.maximum.reduceat(labels, offsets[:-1])
    lacking = np.flatnonzero((best_grade == 0) & ~empty)
    if lacking.size:
        # the best-scored item of each such query becomes grade 1
        order = np.lexsort((-score, qidx))  # by query, then score descending
        first_in_query = order[offsets[:-1]]
        labels[first_in_query[lacking]] = 1.0
    return labels


def _feature_counts(n_features):
    """``(n_informative, n_query_level, n_noise)``: 40% informative, 10% query-level, the rest noise."""
    n_informative = max(1, int(round(0.4 * n_features)))
    n_query_level = int(round(0.1 * n_features)) if n_features - n_informative >= 2 else 0
    return n_informative, n_query_level, n_features - n_informative - n_query_level


def _raw_features(rng, z, centres, qidx, n_informative, n_query_level, n_noise):
    """The untransformed feature columns [N, F] (float32), in generated order: informative, query-level, noise.

    Informative column j is ``z . a_j + noise_j * N(0, 1)``; a query-level column is a noisy
    projection of the query centre, equal within a query.
    """
    n, n_features = len(qidx), n_informative + n_query_level + n_noise
    n_queries = len(centres)
    directions = rng.standard_normal((_LATENT, n_informative)) * (rng.random((_LATENT, n_informative)) < 0.4)
    directions[rng.integers(0, _LATENT, size=n_informative), np.arange(n_informative)] += 1.0
    directions /= np.linalg.norm(directions, axis=0, keepdims=True)
    noise_level = rng.uniform(0.3, 1.5, size=n_informative)
    # float32 throughout: the features are float32 anyway and this halves the generator's time
    raw = np.empty((n, n_features), dtype=np.float32)
    raw[:, :n_informative] = (z @ directions).astype(np.float32)
    raw[:, :n_informative] += noise_level.astype(np.float32) * rng.standard_normal((n, n_informative), dtype=np.float32)
    if n_query_level:
        per_query = centres @ rng.standard_normal((_LATENT, n_query_level)) / math.sqrt(_LATENT)
        raw[:, n_informative : n_informative + n_query_level] = (
            per_query + 0.5 * rng.standard_normal((n_queries, n_query_level))
        )[qidx]
    raw[:, n_features - n_noise :] = rng.standard_normal((n, n_noise), dtype=np.float32)
    return raw


def _feature_kinds(raw, kinds):
    """Each column through its kind's transform: 0 count ``round(exp(0.9 u + 1))``, 1 score
    ``softplus(2 u)``, 2 ratio ``sigmoid(u)`` (scores and ratios rounded to 4 decimals)."""
    features = np.empty(raw.shape, dtype=np.float32)
    for kind in range(3):
        cols = np.flatnonzero(kinds == kind)
        if not cols.size:
            continue
        u = raw[:, cols]
        if kind == 0:
            values = np.round(np.exp(np.minimum(np.float32(0.9) * u + np.float32(1.0), np.float32(12.0))))
        elif kind == 1:
            values = np.round(np.log1p(np.exp(np.minimum(np.float32(2.0) * u, np.float32(30.0)))), 4)
        else:
            values = np.round(np.float32(1.0) / (np.float32(1.0) + np.exp(-u)), 4)
        features[:, cols] = values
    return features


def _features(rng, z, centres, qidx, n_features):
    """Step 5: the feature matrix [N, F] in shuffled column order.

    Returns ``(features, kinds, informative_columns, query_level_columns)``, all in the output
    (shuffled) column order; the column lists are 0-based and sorted.
    """
    n_informative, n_query_level, n_noise = _feature_counts(n_features)
    kinds = rng.integers(0, 3, size=n_features)  # 0 count, 1 score, 2 ratio
    raw = _raw_features(rng, z, centres, qidx, n_informative, n_query_level, n_noise)
    features = _feature_kinds(raw, kinds)
    del raw
    permutation = rng.permutation(n_features)  # column c of the output is generated column permutation[c]
    features = np.ascontiguousarray(features[:, permutation])
    position = np.argsort(permutation)  # where generated column j ended up
    informative_columns = np.sort(position[:n_informative])
    query_level_columns = np.sort(position[n_informative : n_informative + n_query_level])
    return features, kinds[permutation], informative_columns, query_level_columns


def _users(rng, n_queries, n_users):
    """Step 6: the user of each query [Q] (int64), Zipf(2) queries per user or ``p(u) ~ (u + 1)^-1.1``."""
    if n_users is None:
        cap = max(1, n_queries // 10)
        counts = np.minimum(rng.zipf(2.0, size=n_queries), cap)
        covered = np.cumsum(counts)
        n_used = int(np.searchsorted(covered, n_queries) + 1)
        counts = counts[:n_used]
        counts[-1] -= int(covered[n_used - 1] - n_queries)
        user_of_query = rng.permutation(np.repeat(np.arange(n_used), counts))
    else:
        weights = (np.arange(n_users) + 1.0) ** -1.1
        user_of_query = rng.choice(n_users, size=n_queries, p=weights / weights.sum())
    return user_of_query.astype(np.int64)


def _query_relative(rng, features, offsets, kinds, informative_columns, strength):
    """Step 7, in place: ``x'_ij = round(r sd_j eta_qj + exp(r eta_qj / 4) x_ij, 4)`` on the informative
    score columns, ``eta_qj = 0.8 g_q + 0.6 nu_qj``, ``r = strength``. Returns those columns (0-based, sorted)."""
    columns = informative_columns[kinds[informative_columns] == 1]
    n_queries = len(offsets) - 1
    eta = 0.8 * rng.standard_normal((n_queries, 1)) + 0.6 * rng.standard_normal((n_queries, len(columns)))
    if not columns.size:
        return columns
    lengths = np.diff(offsets)
    x = features[:, columns].astype(np.float64)
    level = np.repeat(strength * x.std(axis=0) * eta, lengths, axis=0)
    scale = np.repeat(np.exp(0.25 * strength * eta), lengths, axis=0)
    features[:, columns] = np.round(level + scale * x, 4).astype(np.float32)
    return columns


def _description(args, mu, lengths, offsets, labels, user_ids, kinds, informative_columns, query_level_columns):
    """The JSON-able description: the arguments ``args`` (as given), the recipe as realised and a few statistics."""
    label_counts = np.bincount(labels.astype(np.int64), minlength=5)
    has_relevant = np.maximum.reduceat(labels, offsets[:-1]) > 0
    floats = ("mean_list_length", "empty_query_share", "label_noise", "length_sigma")
    return {
        "generator": "ltr.data.synthetic.make_mslr_like",
        "version": GENERATOR_VERSION,
        "parameters": {name: float(value) if name in floats else value for name, value in args.items()},
        "recipe": {
            "lengths": f"clip(round(lognormal(mu={mu:.6f}, sigma={args['length_sigma']})), 1, {args['max_list_length']})",
            "teacher": f"w2 . tanh(W1 z + b1) + 0.5 z1 z2 - 0.6 z3^2, z in R^{_LATENT}, {_HIDDEN} hidden units, "
            "scaled to unit variance",
            "grade_score": f"teacher + N(0, 0.5^2) per query + N(0, {args['label_noise']}^2) per item",
            "label_shares": list(LABEL_SHARES),
            "informative_features": (informative_columns + 1).tolist(),
            "query_level_features": (query_level_columns + 1).tolist(),
            "feature_kinds": {"count": int((kinds == 0).sum()), "score": int((kinds == 1).sum()), "ratio": int((kinds == 2).sum())},
            "users": "zipf(2) queries per user, capped at Q // 10"
            if args["n_users"] is None
            else f"p(u) ~ (u + 1)^-1.1 over {args['n_users']} users",
        },
        "statistics": {
            "n_items": int(offsets[-1]),
            "mean_list_length": float(lengths.mean()),
            "min_list_length": int(lengths.min()),
            "max_list_length": int(lengths.max()),
            "label_counts": label_counts.tolist(),
            "share_without_relevant": float(1.0 - has_relevant.mean()),
            "n_users": int(len(np.unique(user_ids))),
            "users_with_one_query": int((np.bincount(user_ids) == 1).sum()),
        },
    }


def make_mslr_like(
    n_queries: int = 1000,
    n_features: int = 136,
    *,
    mean_list_length: float = 120,
    max_list_length: int = 1000,
    empty_query_share: float = 0.05,
    n_users: int | None = None,
    label_noise: float = 0.6,
    length_sigma: float = 1.0,
    query_relative: float = 0.0,
    seed: int = 0,
    return_teacher: bool = False,
):
    """A seeded MSLR-like data set (see the module docstring for the recipe).

    With ``return_teacher=True`` the result is ``(ds, teacher)``, ``teacher`` [N] being the hidden
    noise-free teacher score of each item (the ranking an ideal model would approach).

    The description (all parameters, the seed, the generator version and a few realised statistics)
    is in ``ds.meta["description"]``; it is JSON-able.

    ``query_relative = r > 0`` gives the informative score columns a per-query location and scale
    (step 7 of the module docstring); with 0 (the default) nothing of step 7 is drawn, so the data
    set and its description are the ones of earlier versions.

    >>> ds = make_mslr_like(50, 10, mean_list_length=20, seed=1)
    >>> ds.n_queries, ds.n_features, int(ds.labels.max()) <= 4
    (50, 10, True)
    >>> bool(np.array_equal(ds.features, make_mslr_like(50, 10, mean_list_length=20, seed=1).features))
    True
    """
    _check_mslr_args(n_queries, n_features, mean_list_length, max_list_length, empty_query_share, n_users, label_noise, length_sigma)
    _check("query_relative", query_relative, lo=0.0)
    n_queries, n_features, max_list_length = int(n_queries), int(n_features), int(max_list_length)
    # One generator for every step, called in this order: the same seed gives the same data set.
    rng = np.random.default_rng(seed)
    mu, lengths, offsets, qidx = _list_lengths(rng, n_queries, mean_list_length, max_list_length, length_sigma)
    centres, z = _latent_vectors(rng, n_queries, qidx)
    teacher, score = _teacher_and_scores(rng, z, qidx, n_queries, label_noise)
    labels = _grades(rng, score, offsets, qidx, empty_query_share)
    features, kinds, informative_columns, query_level_columns = _features(rng, z, centres, qidx, n_features)
    user_ids = _users(rng, n_queries, n_users)
    if query_relative > 0:
        relative_columns = _query_relative(rng, features, offsets, kinds, informative_columns, float(query_relative))

    args = {
        "n_queries": n_queries,
        "n_features": n_features,
        "mean_list_length": mean_list_length,
        "max_list_length": max_list_length,
        "empty_query_share": empty_query_share,
        "n_users": n_users,
        "label_noise": label_noise,
        "length_sigma": length_sigma,
        "seed": seed,
    }
    description = _description(args, mu, lengths, offsets, labels, user_ids, kinds, informative_columns, query_level_columns)
    if query_relative > 0:  # recorded only when used: a default run's description stays byte for byte the same
        description["parameters"]["query_relative"] = float(query_relative)
        description["recipe"]["query_relative"] = (
            f"informative score columns: x' = round({float(query_relative)} sd_j eta_qj + exp({float(query_relative)} eta_qj / 4) x, 4), "
            "eta_qj = 0.8 g_q + 0.6 nu_qj, g_q and nu_qj ~ N(0, 1)")
        description["recipe"]["query_relative_features"] = (relative_columns + 1).tolist()
    ds = RankingDataset(
        features=features,
        labels=labels,
        query_offsets=offsets,
        query_ids=np.arange(1, n_queries + 1, dtype=np.int64),
        user_ids=user_ids,
        meta={"description": description},
    )
    return (ds, teacher) if return_teacher else ds


#: Alias used by the ablation runner.
generate = make_mslr_like


def make_synthetic_splits(
    n_queries: int = 1000,
    n_features: int = 136,
    *,
    valid_share: float = 0.1,
    test_share: float = 0.1,
    split_seed: int | None = None,
    by_user: bool = False,
    seed: int = 0,
    **kwargs,
) -> tuple[RankingDataset, RankingDataset, RankingDataset]:
    """(train, valid, test) of one :func:`make_mslr_like` data set, split by query.

    ``split_seed`` defaults to ``seed``. Each part's ``meta["description"]`` is the generator's
    description plus the split.
    """
    _check("valid_share", valid_share, lo=0.0, hi=1.0)
    _check("test_share", test_share, lo=0.0, hi=1.0)
    if valid_share + test_share >= 1.0:
        raise ValueError(f"valid_share + test_share must be below 1; got {valid_share} + {test_share}")
    ds = make_mslr_like(n_queries, n_features, seed=seed, **kwargs)
    split_seed = seed if split_seed is None else split_seed
    fractions = (1.0 - valid_share - test_share, valid_share, test_share)
    parts = split_by_query(ds, fractions, seed=split_seed, by_user=by_user)
    description = dict(ds.meta["description"])
    description["split"] = {
        "fractions": list(fractions),
        "seed": split_seed,
        "by_user": by_user,
        "queries": [p.n_queries for p in parts],
        "items": [p.n_items for p in parts],
    }
    for part in parts:
        part.meta = {"description": description, "split": part.meta.get("split")}
    return parts
