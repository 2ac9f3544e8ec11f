"""The default logging ranker of ``ltr clicks simulate``: a weak production ranker on the features.

A log is only as informative as the ranker that produced it. Click estimators that learn relevance
from the features (regression EM, DLA) assume the logger saw nothing the features do not show: a
logger that ranks by the true labels puts at the top items more relevant than their features tell,
and the estimators read that surplus as examination (regression EM is then 40-50% off on
``theta_10``; docs/guide/clicks.md, "Estimating position bias"). Real logs come from a ranker on
the features, so the simulator's default is one: a ridge regression fitted on the labels of a few
queries, as in the unbiased-LTR studies (``experiments/unbiased_ltr_study.py``).

The fit, with ``x`` the features of the sampled queries standardised by their own mean ``mu`` and
standard deviation ``sd`` (plus 1e-9), ``z = [x, 1]`` and ``y`` their labels::

    w = (z^T z + 10 I)^-1 z^T y,        score(features) = [(features - mu) / sd, 1] . w
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["ridge_logger", "plackett_luce_ndcg", "RIDGE_PENALTY"]

#: ridge penalty of the fit (on standardised features, the intercept included)
RIDGE_PENALTY = 10.0
#: rows scored per block, so that scoring a large file never makes a float64 copy of it whole
SCORE_BLOCK_ROWS = 1 << 16


def ridge_logger(train: Any, n_queries: int, seed: Any) -> Callable[[Any], np.ndarray]:
    """Fit the ridge logging ranker on the labels of ``n_queries`` queries of ``train`` drawn without
    replacement under ``seed`` (all of them when there are fewer); return a function that scores any
    data set with the same features (one float64 score per row).

    >>> from ltr.data.synthetic import make_mslr_like
    >>> ds = make_mslr_like(n_queries=30, n_features=5, seed=0)
    >>> score = ridge_logger(ds, 10, seed=0)
    >>> score(ds).shape == (ds.n_items,)
    True
    """
    if isinstance(n_queries, bool) or not isinstance(n_queries, (int, np.integer)) or n_queries < 1:
        raise ValueError(f"n_queries must be a positive integer, got {n_queries!r}")
    if train.n_queries == 0:
        raise ValueError("the data set has no queries to fit the logging ranker on")
    rng = np.random.default_rng(seed)
    q = rng.choice(train.n_queries, size=min(int(n_queries), train.n_queries), replace=False)
    rows = train.row_indices(q)
    x = train.features[rows].astype(np.float64)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9

    def design(features: np.ndarray) -> np.ndarray:
        return np.concatenate([(features - mu) / sd, np.ones((len(features), 1))], axis=1)

    z = design(x)
    w = np.linalg.solve(z.T @ z + RIDGE_PENALTY * np.eye(z.shape[1]), z.T @ train.labels[rows])

    def score(ds: Any) -> np.ndarray:
        features = ds.features
        return np.concatenate([design(features[i:i + SCORE_BLOCK_ROWS].astype(np.float64)) @ w
                               for i in range(0, len(features), SCORE_BLOCK_ROWS)] or [np.zeros(0)])

    return score


def plackett_luce_ndcg(scores: Any, dataset: Any, temperature: float, *, draws: int = 20, seed: Any = 0,
                       k: int = 10) -> float:
    """The mean NDCG@k that users see from a Plackett-Luce logger (``simulate_clicks(...,
    logger_temperature=temperature)``): the mean over ``draws`` rankings per query, each by
    ``scores / temperature + G`` (G standard Gumbel), of the toolkit's NDCG@k on the labels of ``dataset``.
    ``temperature`` 0 is the deterministic ranking by ``scores``. What stochastic logging costs users.

    >>> from ltr.data.synthetic import make_mslr_like
    >>> ds = make_mslr_like(n_queries=20, n_features=5, seed=0)
    >>> plackett_luce_ndcg(ds.labels, ds, 0.0) == 1.0   # ranking by the labels: the ideal order
    True
    >>> 0 < plackett_luce_ndcg(ds.labels, ds, 1.0) < 1.0
    True
    """
    import metrics

    s = np.asarray(scores, dtype=np.float64)
    if temperature < 0 or draws < 1:
        raise ValueError(f"need temperature >= 0 and draws >= 1, got {temperature}, {draws}")

    def ndcg(keys: np.ndarray) -> float:
        ev = metrics.evaluate(keys, dataset.labels, dataset.query_offsets, [f"ndcg@{k}"])
        return float(ev.mean[ev.names[f"ndcg@{k}"]])

    if temperature == 0:
        return ndcg(s)
    rng = np.random.default_rng(seed)
    return float(np.mean([ndcg(s / temperature + rng.gumbel(size=len(s))) for _ in range(draws)]))
