"""The direct method and the doubly-robust estimator: a regression of relevance from the clicks, corrected by
the clicks themselves (after Oosterhuis, "Doubly-Robust Estimation for Correcting Position-Bias in Click
Feedback for Unbiased Learning to Rank", TOIS 41(3), 2023).

Per item d of a query with S_q logged sessions, the log gives its clicks ``C(d)`` and its expected examinations
``E(d)`` (the sum of the propensities of its impressions, 0 when never shown). Under the examination hypothesis
``E[C(d)] = E(d) a(d)``, a(d) the probability that d is clicked once examined.

* The *direct model* ``R(d)``: a regression of a(d) on the item's features, fitted to the clicks by their
  likelihood given the examinations, ``sum_d C log R + (E - C) log(1 - R)``: LightGBM's cross-entropy
  objective with label ``min(C / E, 1)`` and weight ``E`` (items with E = 0 carry no weight), a few shallow
  trees, deterministic under its seed.
* The *doubly-robust* label corrects it with the item's own clicks where the log examined it::

      y_DR(d) = R(d) + (C(d) - E(d) R(d)) / max(E(d), tau S_q)

  For an item examined at least ``tau S_q`` times it is ``C / E``, the policy-aware label
  (:mod:`ltr.clicks.estimators.policy_aware`); for one the log never showed it is R(d), where policy-aware
  says 0; in between the regression fills in what the clicks cannot say. Unbiased when either the
  propensities or the regression is right (for the items the clip does not touch); its variance is the
  clicks' around the regression, not around 0.

For evaluating a new ranker (``ltr clicks evaluate``), with d(rank) the metric's discount::

    DM(q) = sum_d d(rank(d)) R(d)          DR(q) = sum_d d(rank(d)) y_DR(d)

over every item of the query (not only the shown ones): both target ``sum_d a(d) d(rank(d))`` over all items,
``true_click_dcg_all`` of a simulated log. The expected examinations are here the log's, as the policy-aware
estimator reads them; the paper's estimator uses the logging policy's expected examination, which a
Plackett-Luce logger's scores would give. With the log's own, DR gains over policy-aware on the items the
log showed rarely or never, not on the variance of the others.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["item_sums", "fit_direct_model", "dr_labels", "doubly_robust_dataset", "dm_dr_click_dcg"]

#: LightGBM's settings of the direct model: shallow trees, deterministic
DIRECT_MODEL_PARAMS = {"objective": "cross_entropy", "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 20,
                       "verbosity": -1, "num_threads": 1, "deterministic": True, "force_col_wise": True}
DIRECT_MODEL_ROUNDS = 100


def item_sums(doc: np.ndarray, clicks: np.ndarray, examined: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(C [n_rows], E [n_rows])``: per data-set row its clicks and expected examinations over the log's cells."""
    return (np.bincount(doc, weights=clicks, minlength=n_rows)[:n_rows],
            np.bincount(doc, weights=examined, minlength=n_rows)[:n_rows])


def fit_direct_model(features: np.ndarray, clicks: np.ndarray, examined: np.ndarray, *, seed: int = 0,
                     rounds: int = DIRECT_MODEL_ROUNDS) -> np.ndarray:
    """``R [N]``: the direct model's click probability once examined for every row of ``features`` (module
    docstring), fitted on the rows with ``examined > 0``."""
    import lightgbm

    on = examined > 0
    if not on.any():
        raise LtrError("the direct model needs examined items: the click log shows none")
    label = np.clip(clicks[on] / examined[on], 0.0, 1.0)
    data = lightgbm.Dataset(np.asarray(features)[on], label, weight=examined[on] / examined[on].mean())
    booster = lightgbm.train({**DIRECT_MODEL_PARAMS, "seed": seed}, data, rounds)
    return np.clip(booster.predict(np.asarray(features)), 0.0, 1.0)


def dr_labels(r_hat: np.ndarray, clicks: np.ndarray, examined: np.ndarray, sessions: np.ndarray,
              clip: float) -> np.ndarray:
    """``y_DR`` per row (module docstring); ``sessions`` [rows]: the sessions of each row's query."""
    from ltr.clicks.estimators.unbiased import _check_clip

    clip = _check_clip(clip)
    floor = np.maximum(examined, clip * sessions)
    with np.errstate(invalid="ignore", divide="ignore"):
        correction = np.where(floor > 0, (clicks - examined * r_hat) / floor, 0.0)
    return r_hat + correction


def _query_sessions_of_rows(agg, dataset) -> np.ndarray:
    from ltr.clicks.logs.stream import query_sessions

    n_q = query_sessions(agg, dataset.n_queries)
    return np.repeat(n_q, np.diff(np.asarray(dataset.query_offsets)))


def doubly_robust_dataset(dataset, agg, *, clip: float = 0.01, curve: Any = None, seed: int = 0):
    """``(RankingDataset, info)``: one list per query of ``dataset`` with a logged session, all its items, label
    ``y_DR`` (cut at 0), weight the query's sessions; ``agg`` a :class:`ltr.clicks.logs.stream.LogAggregate`,
    ``curve`` propensities by position in place of the logged ones. ``info``: the items never shown (labelled by
    the direct model alone) and the direct model's mean prediction."""
    from ltr.clicks.estimators.policy_aware import item_examinations
    from ltr.data import RankingDataset

    if len(agg.n) == 0:
        raise LtrError("the click log is empty")
    clicks, examined = item_sums(agg.doc, agg.clicks, item_examinations(agg, curve), dataset.n_items)
    r_hat = fit_direct_model(dataset.features, clicks, examined, seed=seed)
    sessions = _query_sessions_of_rows(agg, dataset)
    labels = np.maximum(dr_labels(r_hat, clicks, examined, sessions, clip), 0.0)
    offsets = np.asarray(dataset.query_offsets, dtype=np.int64)
    queries = np.flatnonzero(np.bincount(agg.query, minlength=dataset.n_queries) > 0)
    every = dataset.row_indices(queries)
    lengths = np.diff(offsets)[queries]
    lists = RankingDataset(
        features=np.ascontiguousarray(dataset.features[every], dtype=np.float32), labels=labels[every],
        query_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), query_ids=queries.astype(np.int64),
        weights=sessions[every].astype(np.float64))
    info = {"never_shown": int((examined[every] == 0).sum()), "direct_model_mean": float(r_hat[every].mean()),
            "direct_model": f"LightGBM cross-entropy, {DIRECT_MODEL_ROUNDS} trees, on the clicks given the examinations"}
    return lists, info


def dm_dr_click_dcg(scores, query_offsets, r_hat, clicks, examined, sessions_per_query, *, k: int | None = 10,
                    clip: float | None = None, discount="log2") -> tuple[np.ndarray, np.ndarray]:
    """``(DM [Q], DR [Q])`` click-DCG@k of the ranking by ``scores`` (module docstring); NaN for queries without
    sessions. ``clicks``, ``examined``, ``r_hat`` per row; ``clip`` the floor of E / S_q (none: 1e-12)."""
    from ltr.clicks.estimators.ips import ranks_within_queries
    from metrics.discounts import discount_values

    offsets = np.asarray(query_offsets, dtype=np.int64)
    qidx = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    d = discount_values(ranks_within_queries(scores, offsets), discount, k)
    sessions = np.asarray(sessions_per_query, dtype=np.float64)[qidx]
    y = dr_labels(r_hat, clicks, examined, sessions, clip if clip is not None else 1e-12)
    logged = np.asarray(sessions_per_query) > 0
    dm = np.bincount(qidx, weights=d * r_hat, minlength=len(offsets) - 1)
    dr = np.bincount(qidx, weights=d * y, minlength=len(offsets) - 1)
    return np.where(logged, dm, np.nan), np.where(logged, dr, np.nan)
