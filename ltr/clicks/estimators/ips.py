"""Counterfactual evaluation and training from logged clicks: naive, IPS and self-normalised IPS.

Setting: a click log (:class:`ltr.clicks.simulate.click_models.ClickLog`) recorded on the lists a logging ranker
showed; each entry carries the examination propensity ``p`` of its position. A new ranker with
scores ``s`` is judged by a click-based DCG, with the discount ``d`` of :mod:`metrics.discounts`
(``1/log2(rank+1)`` cut at k by default; the rank is the item's rank under ``s`` in its query)::

    naive(q) = 1/n_q * sum_{sessions of q} sum_{clicked i} d(rank_s(i))
    IPS(q)   = 1/n_q * sum_{sessions of q} sum_{clicked i} d(rank_s(i)) * w_i,   w_i = 1 / max(p_i, tau)
    SNIPS(q) = sum_{sessions} sum_{clicked} d(rank_s(i)) w_i  /  sum_{sessions} sum_{clicked} w_i
    policy-aware(q) = 1/n_q * sum_{sessions of q} sum_{clicked i} d(rank_s(i)) / max(rho_i, tau),
               rho_i = 1/n_q * sum over the impressions of i of their propensity p

Under the position-based model ``E[click_i] = p_i a_i``, so without clipping (``tau = 0``) IPS is
unbiased for the attraction-weighted DCG ``sum_i a_i d(rank_s(i))`` over the items that can be
shown (p_i > 0); :func:`expected_click_dcg` computes that target from the labels. With
``a = eps + (1-eps) g(rel) / g(max)`` this target is an increasing affine function of the label DCG,
so it orders rankers as DCG with the toolkit's gain does. The naive estimate instead weights each
item by how often the *logging* ranker let it be seen. SNIPS divides by the estimated total
attraction, so it targets ``sum_i a_i d(rank_s(i)) / sum_i a_i`` (consistent, slightly biased for
few sessions) and is unchanged when all propensities are scaled by a constant, which is what
relative propensities from :mod:`ltr.clicks.propensities.interventions` give. Clipping at ``tau`` bounds the weights by
``1/tau``: less variance, a downward bias on items with ``p < tau``.

A stochastic logger (``simulate_clicks(..., logger_temperature=T)``) shows an item in some sessions
only; IPS then targets ``sum_i a_i P(i shown) d(rank_s(i))``, short of the target above by the share
of sessions that did not show each item. The policy-aware estimate (Oosterhuis and de Rijke, SIGIR
2020) divides by the item's expected examination over all the query's sessions, ``rho_i``, and
targets ``sum_i a_i d(rank_s(i))`` over every item the logger can show; under a deterministic logger
``rho_i`` is the propensity of the item's one position and it equals IPS.

Training (:func:`click_training_set`): each session becomes a list with labels = clicks and
per-item weights ``w_i`` on clicked items (1 elsewhere); a pairwise loss multiplies the pair
(clicked i, unclicked j) by ``weights[i]`` (the ``losses`` contract). Since ``E[click_i w_i] = a_i``,
the clicked side of every pair is de-biased as in the propensity-weighted pairwise objective of
Joachims et al. (2017); the unclicked side is taken from the log as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.clicks.logs.click_log import ClickLog, query_index
from ltr.base.errors import LtrError
from metrics.discounts import discount_values

__all__ = [
    "ESTIMATORS",
    "ranks_within_queries",
    "inverse_propensity_weights",
    "click_weights",
    "click_dcg",
    "expected_click_dcg",
    "logged_support",
    "click_training_set",
    "sessions_with_click",
]

ESTIMATORS = ("naive", "ips", "snips", "policy-aware")


def ranks_within_queries(scores: Any, query_offsets: Any) -> np.ndarray:
    """1-based rank of every row within its query by descending score (ties: input order).

    >>> ranks_within_queries(np.array([0.2, 0.9, 0.2, 5.0, 1.0]), np.array([0, 3, 5]))
    array([2, 1, 3, 1, 2])
    """
    s = np.asarray(scores, dtype=np.float64)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    if len(s) != offsets[-1]:
        raise ValueError(f"scores has {len(s)} entries, query_offsets covers {offsets[-1]} rows")
    qidx = query_index(offsets)
    order = np.lexsort((-s, qidx))  # stable: equal scores keep input order
    ranks = np.empty(len(s), dtype=np.int64)
    ranks[order] = np.arange(len(s)) - offsets[qidx[order]] + 1
    return ranks


def inverse_propensity_weights(propensity: Any, clip: float | None = None) -> np.ndarray:
    """``1 / max(p, clip)``: inverse propensities, bounded by ``1/clip`` when ``clip`` is given.

    >>> inverse_propensity_weights(np.array([1.0, 0.5, 0.01]), clip=0.1)
    array([ 1.,  2., 10.])
    """
    p = np.asarray(propensity, dtype=np.float64)
    if clip is not None:
        if not 0.0 < clip <= 1.0:
            raise LtrError(f"clip must be in (0, 1], got {clip}")
        p = np.maximum(p, clip)
    with np.errstate(divide="ignore"):
        return 1.0 / p


def click_weights(click: np.ndarray, propensity: np.ndarray, clip: float | None) -> np.ndarray:
    """Per log entry, the ``ips`` item weight of a session's training list: ``1 / max(p, clip)`` on a clicked
    entry, 1 on the others (they carry no click to correct).

    >>> click_weights(np.array([1.0, 0.0, 1.0]), np.array([0.5, 0.5, 0.001]), clip=0.01)
    array([  2.,   1., 100.])
    """
    weights = np.where(click > 0, inverse_propensity_weights(propensity, clip), 1.0)
    if not np.isfinite(weights).all():
        raise LtrError("a clicked entry has propensity 0: IPS weights are undefined (clip them)")
    return weights


def _entry_propensity(log: ClickLog, propensity: Any) -> np.ndarray:
    if propensity is None:
        return log.propensity
    p = np.asarray(propensity, dtype=np.float64)
    if p.shape != (log.n_entries,):
        raise ValueError(f"propensity must have one value per log entry ({log.n_entries}), got shape {p.shape}")
    return p


def _item_examination(log: ClickLog, propensity: Any, offsets: np.ndarray) -> np.ndarray:
    """rho per row: the sum of its impressions' propensities over its query's sessions (0 for a row never shown)."""
    n_queries = len(offsets) - 1
    examined = np.bincount(log.doc, weights=_entry_propensity(log, propensity), minlength=offsets[-1])
    sessions = log.sessions_per_query(n_queries).astype(np.float64)
    row_query = query_index(offsets)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(examined > 0, examined / sessions[row_query], 0.0)


def _check_log_fits(log: ClickLog, offsets: np.ndarray) -> None:
    """The log must refer to this data set: doc rows inside it and each doc inside its query."""
    if not log.n_entries:
        return
    if log.doc.max() >= offsets[-1] or log.query.max() >= len(offsets) - 1:
        raise LtrError(f"the click log refers to rows/queries beyond the data set "
                       f"({offsets[-1]} rows, {len(offsets) - 1} queries): was it simulated on other data?")
    if np.any((log.doc < offsets[log.query]) | (log.doc >= offsets[log.query + 1])):
        raise LtrError("the click log's documents do not belong to its queries in this data set")


def click_dcg(
    log: ClickLog,
    scores: Any,
    query_offsets: Any,
    *,
    estimator: str = "ips",
    k: int | None = 10,
    discount: Any = "log2",
    clip: float | None = None,
    propensity: Any = None,
) -> np.ndarray:
    """Per-query click-based DCG@k of the ranking by ``scores``: ``"naive"``, ``"ips"`` or ``"snips"``.

    ``propensity``: per-entry propensities to use instead of the logged ones (e.g. an estimated
    curve through :func:`ltr.clicks.propensities.interventions.propensities_from_curve`). Returns ``[Q]``: NaN for queries
    without sessions (and, for SNIPS, without clicks).
    """
    if estimator not in ESTIMATORS:
        raise LtrError(f"unknown estimator {estimator!r}: use one of {', '.join(ESTIMATORS)}")
    offsets = np.asarray(query_offsets, dtype=np.int64)
    n_queries = len(offsets) - 1
    _check_log_fits(log, offsets)
    ranks = ranks_within_queries(scores, offsets)
    clicked = log.click.astype(bool)
    doc = log.doc[clicked]
    gain = discount_values(ranks[doc], discount, k)
    if estimator == "naive":
        w = np.ones(len(doc))
    else:
        if propensity is None:
            from ltr.clicks.estimators.propensity_source import require_propensity

            require_propensity(log.meta, estimator)
        p = (_item_examination(log, propensity, offsets)[doc] if estimator == "policy-aware"
             else _entry_propensity(log, propensity)[clicked])
        w = inverse_propensity_weights(p, clip)
        if not np.isfinite(w).all():
            raise LtrError("a clicked entry has propensity 0: IPS is undefined (clip the propensities)")
    q = log.query[clicked]
    num = np.bincount(q, weights=gain * w, minlength=n_queries)
    with np.errstate(invalid="ignore", divide="ignore"):
        if estimator == "snips":
            return num / np.bincount(q, weights=w, minlength=n_queries)
        n_sessions = log.sessions_per_query(n_queries).astype(np.float64)
        return np.where(n_sessions > 0, num / n_sessions, np.nan)


def logged_support(log: ClickLog, n_rows: int) -> np.ndarray:
    """``[n_rows]`` bool: rows shown at least once in the log (where IPS has support)."""
    support = np.zeros(n_rows, dtype=bool)
    support[log.doc] = True
    return support


def expected_click_dcg(
    scores: Any,
    attraction: Any,
    query_offsets: Any,
    *,
    k: int | None = 10,
    discount: Any = "log2",
    support: Any = None,
    normalize: bool = False,
) -> np.ndarray:
    """The target of IPS: ``sum_i a_i d(rank_s(i))`` per query, over ``support`` rows (all by default).

    ``normalize=True`` gives the SNIPS target ``sum_i a_i d(rank_s(i)) / sum_i a_i``.

    >>> expected_click_dcg(np.array([3.0, 2.0, 1.0]), np.array([0.5, 1.0, 0.0]), np.array([0, 3]))
    array([1.13092975])
    """
    offsets = np.asarray(query_offsets, dtype=np.int64)
    a = np.asarray(attraction, dtype=np.float64)
    if support is not None:
        a = np.where(np.asarray(support, dtype=bool), a, 0.0)
    qidx = query_index(offsets)
    d = discount_values(ranks_within_queries(scores, offsets), discount, k)
    num = np.bincount(qidx, weights=a * d, minlength=len(offsets) - 1)
    if not normalize:
        return num
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / np.bincount(qidx, weights=a, minlength=len(offsets) - 1)


def sessions_with_click(log: ClickLog) -> np.ndarray:
    """[S] bool: the sessions of ``log`` with at least one click (the ones that carry a pair)."""
    return np.bincount(log.session, weights=log.click, minlength=log.n_sessions) > 0


def click_training_set(
    dataset,
    log: ClickLog,
    *,
    weighting: str = "ips",
    clip: float | None = None,
    propensity: Any = None,
    drop_no_click: bool = True,
):
    """Turn a click log into a training set: one list per session, labels = clicks.

    ``weighting="ips"``: ``weights = 1/max(p, clip)`` on clicked items, 1 on the others;
    ``"none"``: no weights (training on raw clicks). Sessions without a click carry no pair and are
    dropped unless ``drop_no_click=False``. Returns ``(train_set, position)``: a
    :class:`ltr.data.RankingDataset` (``query_ids`` = session ids; ``log.session_query[query_ids]``
    gives each list's query) and the shown position of each row (for LightGBM's position bias).
    """
    from ltr.data import (
        RankingDataset,  # lazy: keeps the estimators importable on their own
    )

    if weighting not in ("ips", "none"):
        raise LtrError(f"unknown weighting {weighting!r}: use 'ips' or 'none'")
    if log.n_entries and np.any(np.diff(log.session) < 0):
        raise ValueError("the log's entries must be grouped by session (as the simulator writes them)")
    keep = sessions_with_click(log) if drop_no_click else np.ones(log.n_sessions, dtype=bool)
    if not keep.any():
        raise LtrError("the click log has no session with a click")
    p = _entry_propensity(log, propensity)
    rows = keep[log.session]
    sess = log.session[rows]
    kept_ids = np.flatnonzero(keep)
    counts = np.bincount(sess, minlength=log.n_sessions)[kept_ids]
    clicks = log.click[rows].astype(np.float64)
    weights = click_weights(clicks, p[rows], clip) if weighting == "ips" else None
    ds = RankingDataset(
        features=np.ascontiguousarray(dataset.features[log.doc[rows]], dtype=np.float32),
        labels=clicks,
        query_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        query_ids=kept_ids.astype(np.int64),
        weights=weights,
    )
    return ds, log.position[rows].astype(np.int64)
