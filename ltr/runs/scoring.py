"""Scoring a data set with the toolkit's metrics: what neural and GBDT training both judge by.

:func:`evaluate_scores` runs ``metrics.evaluate`` on a data set's labels and query offsets, and adds the
classification metrics (:data:`CLASSIFICATION_METRICS`) that click / CTR models are judged by. They are
computed over all judged rows at once (not per query), with :mod:`metrics.classification` on binary 0/1
labels (NaN labels, i.e. unjudged rows, are left out): ``logloss`` and ``brier`` judge
``p = sigmoid(score)``, so they suit models whose scores are **logits**; ``auc`` uses the raw scores.
Their stamped names say so: ``logloss[p=sigmoid(score)]``, ``brier[p=sigmoid(score)]``, ``auc[ties=half]``.
"""

from __future__ import annotations

import math

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["CLASSIFICATION_METRICS", "evaluate_scores", "check_metric_names", "higher_is_better"]


# Classification metrics the trainer understands besides metrics.evaluate's ranking metrics:
# short name -> (stamped name, higher is better).
CLASSIFICATION_METRICS: dict[str, tuple[str, bool]] = {
    "logloss": ("logloss[p=sigmoid(score)]", False),
    "brier": ("brier[p=sigmoid(score)]", False),
    "auc": ("auc[ties=half]", True),
}


def higher_is_better(metric: str) -> bool:
    """Whether larger values of a metric (short or stamped name) are better: False only for the
    classification losses ``logloss`` and ``brier``.

    >>> higher_is_better("ndcg@10"), higher_is_better("logloss"), higher_is_better("auc[ties=half]")
    (True, False, True)
    """
    short = metric.split("[", 1)[0]
    return CLASSIFICATION_METRICS[short][1] if short in CLASSIFICATION_METRICS else True


def _classification_value(name: str, scores: np.ndarray, labels: np.ndarray, where: str) -> tuple[float, int]:
    import metrics

    judged = ~np.isnan(labels)
    y, s = labels[judged], np.asarray(scores, dtype=np.float64)[judged]
    bad = (y != 0) & (y != 1)
    if bad.any():
        row = int(np.flatnonzero(judged)[np.flatnonzero(bad)[0]])
        raise LtrError(f"{name} needs binary 0/1 labels (clicks); the {where} set's row {row} has label {float(labels[row])}")
    if name == "auc":
        return float(metrics.auc(y, s)), int(y.size)
    p = 0.5 * (1.0 + np.tanh(0.5 * s))  # sigmoid without overflow warnings for large |s|
    fn = metrics.log_loss if name == "logloss" else metrics.brier
    return float(fn(y, p)) if y.size else math.nan, int(y.size)


def evaluate_scores(scores: np.ndarray, ds, metric_names, preset=None, conventions=None, *, where: str = "evaluated"):
    """``metrics.evaluate`` on a data set's labels and query offsets -> EvaluationResult.

    Names in :data:`CLASSIFICATION_METRICS` are computed over all judged rows instead (see the module
    docstring); they appear in ``mean``, ``names`` and ``counted`` (rows) but not in ``per_query``.
    """
    import metrics

    names = list(metric_names)
    ranking = [m for m in names if m not in CLASSIFICATION_METRICS]
    if ranking:
        ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, ranking, preset=preset, **(conventions or {}))
    else:
        from metrics.evaluate import EvaluationResult

        ev = EvaluationResult()
    if len(ranking) == len(names):
        return ev
    labels = np.asarray(ds.labels, dtype=np.float64)
    for m in names:
        if m in CLASSIFICATION_METRICS:
            stamped = CLASSIFICATION_METRICS[m][0]
            ev.mean[stamped], ev.counted[stamped] = _classification_value(m, scores, labels, where)
            ev.names[m] = stamped
    order = [ev.names[m] for m in names]  # the order asked for
    ev.mean = {k: ev.mean[k] for k in order}
    return ev


def check_metric_names(metric_names, preset=None, conventions=None) -> None:
    """Raise :class:`LtrError` now if a metric name, the preset or a convention is unknown.

    The names are evaluated once on a two-item list, through the same :func:`evaluate_scores` the
    run will use, so a typo fails before training rather than after the first epoch.
    """
    from types import SimpleNamespace

    probe = SimpleNamespace(labels=np.array([1.0, 0.0]), query_offsets=np.array([0, 2]))
    try:
        evaluate_scores(np.array([0.5, -0.5]), probe, list(metric_names), preset, conventions, where="probe")
    except (ValueError, KeyError, TypeError) as exc:
        raise LtrError(f"invalid metrics {list(metric_names)} / preset {preset!r} / conventions {conventions or {}}: {exc}") from None
