"""Policy-aware inverse propensity scoring for a logger that shows a top k (Oosterhuis and de Rijke,
"Policy-Aware Unbiased Learning to Rank for Top-k Rankings", SIGIR 2020).

Per-position IPS divides a click at position r by the examination ``theta_r``; its expectation for an
item d is ``a(d) * P(d shown in the top k)``: an item the logger rarely shows looks irrelevant, and
one it never shows is never seen. The policy-aware estimator divides the item's clicks instead by
its expected examination under the logging policy,

    rho(d)   = sum over positions r of P(the logger puts d at r) * theta_r
    label(d) = (1 / S_q) * sum over the query's S_q sessions of c_s(d) / max(rho(d), tau)

whose expectation is ``a(d)`` for every item with ``rho(d) > 0``. Here ``rho`` is read off the log
itself, ``rho_hat(d) = (1 / S_q) * sum_s theta_{r_s(d)}`` (0 in the sessions that do not show d), so
no model of the logger is needed: ``label(d) = C(d) / max(E(d), tau S_q)`` with ``C`` the item's
clicks and ``E`` its expected examinations over the log. ``theta`` is the logged propensity of each
entry, or a curve by position (estimated by regression EM or from interventions). ``rho_hat`` is
floored at ``tau`` (the clip of :mod:`ltr.clicks.estimators.unbiased`): an item with ``rho < tau`` is
under-weighted.

The training list of a query holds all its items, as the estimator's sum runs over every item the
logger can show: an item never shown in the log has no click and label 0. With a stochastic logger
(``simulate_clicks(..., logger_temperature=T)``, a Plackett-Luce logger) every item reaches the top k
now and then, and an item never shown in many sessions had a small rho, so 0 is its estimate. With a
deterministic logger (one shown list per query) the labels of the shown items are per-position IPS
on that list, but the items below its top k were never shown and are taken as non-relevant: use
``ips`` there, which leaves them out.

Four sessions of one query with two items under theta = (1, 0.5): d0 was shown first three times
(two clicks) and second once, d1 first once (one click) and second three times.

>>> import numpy as np
>>> from types import SimpleNamespace
>>> agg = SimpleNamespace(doc=np.array([0, 0, 1, 1]), query=np.array([0, 0, 0, 0]),
...                       position=np.array([1, 2, 1, 2]), n=np.array([3.0, 1.0, 1.0, 3.0]),
...                       clicks=np.array([2.0, 0.0, 1.0, 0.0]), examined=np.array([3.0, 0.5, 1.0, 1.5]))
>>> rows, labels, weights = policy_aware_labels(agg, n_queries=1)   # 2 / (3 + 0.5), 1 / (1 + 1.5)
>>> rows.tolist(), labels.round(4).tolist(), weights.tolist()
([0, 1], [0.5714, 0.4], [4.0, 4.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["policy_aware_labels", "policy_aware_dataset", "item_examinations", "clip_rule"]


def clip_rule(clip: float) -> str:
    """The clip rule a training record states: what ``clip`` bounds."""
    return (f"expected examinations floored at {clip} x the query's sessions: labels at most {1 / clip:g} x the "
            "clicks per session")


def item_examinations(agg, curve: Any = None) -> np.ndarray:
    """Per cell of ``agg`` (:class:`ltr.clicks.logs.stream.LogAggregate`): its expected examinations, the sum of
    the logged propensities, or ``n * curve[position - 1]`` with a curve by position."""
    if curve is None:
        return np.asarray(agg.examined, dtype=np.float64)
    c = np.asarray(curve, dtype=np.float64).ravel()
    if len(agg.position) and agg.position.max() > len(c):
        raise LtrError(f"the propensity curve has {len(c)} positions, the log shows up to {agg.position.max()}")
    return agg.n * c[agg.position - 1]


def policy_aware_labels(agg, *, n_queries: int, clip: float = 0.01,
                        curve: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, label, weight)`` of the distinct items of ``agg`` in ascending row order (module docstring):
    label = C / max(E, clip S_q), weight = S_q, the sessions of its query."""
    from ltr.clicks.logs.stream import query_sessions
    from ltr.clicks.estimators.unbiased import _check_clip

    clip = _check_clip(clip)
    item, inv = np.unique(agg.doc, return_inverse=True)
    inv = inv.ravel()
    clicks = np.bincount(inv, weights=agg.clicks, minlength=len(item))
    examined = np.bincount(inv, weights=item_examinations(agg, curve), minlength=len(item))
    query = np.zeros(len(item), dtype=np.int64)
    query[inv] = agg.query
    sessions = query_sessions(agg, n_queries)[query]
    return item, clicks / np.maximum(examined, clip * sessions), sessions


def policy_aware_dataset(dataset, agg, *, clip: float = 0.01, curve: Any = None):
    """The policy-aware training set: ``(RankingDataset, never_shown)``. One list per query of ``dataset`` with a
    logged session, holding all its items in data-set order: the label of :func:`policy_aware_labels` for the
    items shown at least once, 0 for the ``never_shown`` others (no click; the estimator assumes the logger could
    have shown them, as a stochastic logger can), every item weighted by the query's sessions S_q."""
    from ltr.data import RankingDataset

    if len(agg.n) == 0:
        raise LtrError("the click log is empty")
    rows, labels, weights = policy_aware_labels(agg, n_queries=dataset.n_queries, clip=clip, curve=curve)
    if rows.max() >= dataset.n_items:
        raise LtrError(f"the click log refers to rows beyond the data set ({dataset.n_items} rows): was it simulated on other data?")
    offsets = np.asarray(dataset.query_offsets, dtype=np.int64)
    row_query = np.searchsorted(offsets, rows, side="right") - 1
    queries = np.unique(row_query)
    every = dataset.row_indices(queries)
    label, sessions = np.zeros(dataset.n_items), np.zeros(dataset.n_queries)
    label[rows], sessions[row_query] = labels, weights
    lengths = np.diff(offsets)[queries]
    lists = RankingDataset(
        features=np.ascontiguousarray(dataset.features[every], dtype=np.float32),
        labels=label[every],
        query_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        query_ids=queries.astype(np.int64),
        weights=np.repeat(sessions[queries], lengths),
    )
    return lists, len(every) - len(rows)
