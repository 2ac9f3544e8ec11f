"""Examination propensities from the logs of one ranker: EM and regression EM (Wang et al., WSDM 2018).

Model (position-based): a click at position k on item d needs examination and relevance,
``P(C = 1) = theta_k * gamma_d``, with E and R independent. The log is reduced to observations
o = (item, position, impressions n_o, clicks c_o). One EM step, from the current (theta, gamma):

E-step, the posteriors of an *unclicked* impression (a clicked one is examined and relevant)::

    P(E = 1 | C = 0) = theta (1 - gamma) / (1 - theta gamma)
    P(R = 1 | C = 0) = (1 - theta) gamma / (1 - theta gamma)

M-step::

    theta_k = sum_{o at k} [c_o + (n_o - c_o) P(E = 1 | C = 0)] / sum_{o at k} n_o
    gamma   : per item (``relevance="per-item"``, the classic EM):
              gamma_d = sum_{o of d} [c_o + (n_o - c_o) P(R = 1 | C = 0)] / sum_{o of d} n_o
              by regression (``"logistic"`` or ``"gbdt"``, regression EM): gamma = f(x_d), f fitted to
              the soft targets ``R_o / n_o`` with weights ``n_o`` by cross-entropy

Per-item EM needs every item seen at several positions (interventions or several rankers); a single
deterministic ranker shows each item at one position, and only the regression ties items together
through their features, which is what makes regression EM work on one ranker's logs. The product
``theta gamma`` does not fix the scale, so the estimate is reported relative to position 1
(``theta_k / theta_1``), which is what inverse-propensity weighting needs. The log-likelihood
``sum_o c_o log(theta gamma) + (n_o - c_o) log(1 - theta gamma)`` never decreases under per-item EM.

Intervals: :func:`bootstrap_em` reruns EM on logs resampled by query (percentile interval); each
replicate is a ratio of M-step averages of probabilities, and the interval is cut to [0, 1].
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ltr.clicks.logs.counts import Observations, observations_from_log
from ltr.base.errors import LtrError

__all__ = ["Observations", "observations_from_log", "EMResult", "em_step", "regression_em", "bootstrap_em"]

RELEVANCE = ("per-item", "logistic", "gbdt")
_TINY = 1e-12


@dataclass
class EMResult:
    """``theta`` [K] relative to position 1; ``theta_raw`` the fixed point's own scale; ``gamma`` [O]; NaN at the
    positions the observations do not identify (``identified`` [K] false: shown fewer than ``min_impressions``
    times) and at their observations' gamma."""

    theta: np.ndarray
    theta_raw: np.ndarray
    gamma: np.ndarray
    log_likelihood: list = field(default_factory=list)
    iterations: int = 0
    relevance: str = "per-item"
    predict: Any = None  # logistic / gbdt: features [N, F] -> gamma [N] on the scale of ``theta`` (theta_1 = 1)
    identified: np.ndarray | None = None


def _log_likelihood(obs: Observations, p: np.ndarray) -> float:
    p = np.clip(p, _TINY, 1 - _TINY)
    return float((obs.clicks * np.log(p) + (obs.n - obs.clicks) * np.log1p(-p)).sum())


def em_step(obs: Observations, theta: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One E-step and the closed-form M-steps: ``(theta_new [K], exam_targets [O], rel_targets [O])``.

    ``gamma`` is per observation. ``rel_targets / n`` are the soft relevance labels of the
    regression M-step; per-item EM averages them by item (:func:`_per_item`).
    """
    t = theta[obs.position - 1]
    denom = np.maximum(1.0 - t * gamma, _TINY)
    unclicked = obs.n - obs.clicks
    exam = obs.clicks + unclicked * t * (1.0 - gamma) / denom
    rel = obs.clicks + unclicked * (1.0 - t) * gamma / denom
    k = len(theta)
    shown = np.bincount(obs.position - 1, weights=obs.n, minlength=k)
    theta_new = np.where(shown > 0, np.bincount(obs.position - 1, weights=exam, minlength=k) / np.maximum(shown, _TINY), theta)
    return theta_new, exam, rel


def _per_item(obs: Observations, rel: np.ndarray) -> np.ndarray:
    """Per-item M-step: each item's relevance = its soft relevant count over its impressions."""
    _, inv = np.unique(obs.item, return_inverse=True)
    g = np.bincount(inv, weights=rel) / np.bincount(inv, weights=obs.n)
    return g[inv]


def _fit_logistic(x: np.ndarray, target: np.ndarray, weight: np.ndarray, w0: np.ndarray, steps: int = 5,
                  ridge: float = 1e-6) -> np.ndarray:
    """Weighted logistic regression on soft targets by Newton steps from ``w0`` (x carries a 1 column)."""
    w = w0.copy()
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -30, 30)))
        grad = x.T @ (weight * (target - p)) - ridge * w
        h = (x * (weight * p * (1 - p))[:, None]).T @ x + ridge * np.eye(len(w))
        w = w + np.linalg.solve(h, grad)
    return w


def _fit_gbdt(x: np.ndarray, target: np.ndarray, weight: np.ndarray, seed: int, rounds: int, state: dict):
    """LightGBM's cross-entropy objective on soft labels in [0, 1] with weights: the fitted booster.

    The features and weights are the same at every M-step, so LightGBM's binned dataset is built once
    (kept in ``state``) and only its labels change: the same boosters as a dataset built anew at each
    step, without binning the features again (a fit of ``experiments/rem_relevance_study.py`` at 10^6
    sessions: 20.5 s, 29.4 s before)."""
    import lightgbm

    params = {"objective": "cross_entropy", "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 20,
              "verbosity": -1, "seed": seed, "num_threads": 1, "deterministic": True, "force_col_wise": True}
    label = np.clip(target, 0.0, 1.0)
    data = state.get("gbdt_data")
    if data is None:
        data = state["gbdt_data"] = lightgbm.Dataset(x, label, weight=weight, free_raw_data=False)
    else:
        data.set_label(label)
    return lightgbm.train(params, data, rounds)


def _standardize(x: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """Columns standardised by the mean and deviation of ``reference`` (default ``x``), plus a 1 column."""
    x = np.asarray(x, dtype=np.float64)
    ref = x if reference is None else np.asarray(reference, dtype=np.float64)
    sd = ref.std(axis=0)
    z = (x - ref.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return np.concatenate([z, np.ones((len(z), 1))], axis=1)


def _relevance_predictor(relevance, state, train_x, scale):
    """features -> relevance on the relative scale (gamma times theta_raw[0]) for the fitted M-step model."""
    if relevance == "logistic":
        w = state["w"].copy()
        return lambda f: scale / (1.0 + np.exp(-np.clip(_standardize(f, train_x) @ w, -30, 30)))
    if relevance == "gbdt" and state.get("booster") is not None:
        booster = state["booster"]
        return lambda f: scale * booster.predict(_standardize(f, train_x))
    return None


def _m_step_gamma(relevance, obs, rel, x, state, seed, gbdt_rounds) -> np.ndarray:
    target = rel / np.maximum(obs.n, _TINY)
    if relevance == "per-item":
        return _per_item(obs, rel)
    if relevance == "logistic":
        state["w"] = _fit_logistic(x, target, obs.n, state["w"])
        return 1.0 / (1.0 + np.exp(-np.clip(x @ state["w"], -30, 30)))
    state["booster"] = _fit_gbdt(x, target, obs.n, seed, gbdt_rounds, state)
    return state["booster"].predict(x)


def _check_em_args(obs: Observations, relevance: str, features: Any) -> None:
    if relevance not in RELEVANCE:
        raise LtrError(f"unknown relevance model {relevance!r}: use one of {', '.join(RELEVANCE)}")
    if relevance != "per-item" and features is None:
        raise LtrError(f"relevance={relevance!r} needs the items' features")
    if len(obs.n) == 0 or (obs.n <= 0).any() or (obs.clicks < 0).any() or (obs.clicks > obs.n).any():
        raise LtrError("observations need impressions > 0 and 0 <= clicks <= impressions")


def regression_em(
    obs: Observations,
    *,
    relevance: str = "per-item",
    features: Any = None,
    n_positions: int | None = None,
    iterations: int = 100,
    tol: float = 1e-9,
    seed: int = 0,
    gbdt_rounds: int = 50,
    theta0: Any = None,
    min_impressions: int = 1,
    progress: bool = False,
) -> EMResult:
    """EM for ``P(C) = theta_k gamma`` (see the module docstring). ``features``: [N, F] of the data set's
    rows (``obs.item`` indexes them). Starts from ``theta = 1/k`` (or ``theta0``) and ``gamma`` = the
    overall click rate; stops after ``iterations`` or when the log-likelihood gains less than ``tol``
    (relative). ``progress``: a bar over the iterations (on stderr).

    Only what the observations identify: a position shown fewer than ``min_impressions`` times (never, by
    default) gets NaN, and its observations are left out of the fit, so that a handful of impressions deep in
    the list moves no other position's estimate (:mod:`ltr.clicks.propensities.curves`)."""
    from ltr.clicks.propensities.curves import identified_positions

    _check_em_args(obs, relevance, features)
    k = int(n_positions or obs.position.max())
    known = identified_positions(np.bincount(obs.position - 1, weights=obs.n, minlength=k)[:k], min_impressions)
    if not known[0]:
        raise LtrError(f"regression EM: position 1 is shown fewer than {min_impressions} times, and every propensity "
                       "is relative to it: nothing is identified")
    keep = known[np.minimum(obs.position, k) - 1] & (obs.position <= k)
    if keep.all():
        return _fit_em(obs, relevance, features, k, iterations, tol, seed, gbdt_rounds, theta0, progress, known)
    res = _fit_em(obs.subset(np.flatnonzero(keep)), relevance, features, k, iterations, tol, seed, gbdt_rounds, theta0,
                  progress, known)
    gamma = np.full(len(obs.n), np.nan)
    gamma[keep] = res.gamma
    res.gamma = gamma
    return res


# long: the EM loop and its result in one place; the arguments are regression_em's, documented there
def _fit_em(obs, relevance, features, k, iterations, tol, seed, gbdt_rounds, theta0, progress, known) -> EMResult:
    """:func:`regression_em` on the observations of the identified positions ``known`` [K]."""
    from tqdm.auto import tqdm

    theta = 1.0 / np.arange(1, k + 1) if theta0 is None else np.asarray(theta0, dtype=np.float64).copy()
    gamma = np.full(len(obs.n), min(0.5, max(obs.clicks.sum() / obs.n.sum(), 0.01)))
    x = None if relevance == "per-item" else _standardize(np.asarray(features)[obs.item])
    state = {"w": np.zeros(0 if x is None else x.shape[1])}
    history = [_log_likelihood(obs, theta[obs.position - 1] * gamma)]
    it = 0
    with tqdm(total=iterations, desc=f"regression EM ({relevance})", unit="iteration", disable=not progress) as bar:
        for it in range(1, iterations + 1):
            theta, _, rel = em_step(obs, theta, gamma)
            gamma = np.clip(_m_step_gamma(relevance, obs, rel, x, state, seed, gbdt_rounds), _TINY, 1.0)
            history.append(_log_likelihood(obs, theta[obs.position - 1] * gamma))
            bar.update()
            if abs(history[-1] - history[-2]) <= tol * abs(history[-2]):
                break
    predict = None if x is None else _relevance_predictor(relevance, state, np.asarray(features)[obs.item], theta[0])
    theta = np.where(known, theta, np.nan)
    return EMResult(theta / max(theta[0], _TINY), theta, gamma, history, it, relevance, predict, known)


def bootstrap_em(obs: Observations, n_resamples: int = 50, confidence: float = 0.95, seed: int = 0,
                 progress: bool = False, **em_kwargs) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval ``(low [K], high [K])`` of EM's relative propensities, resampling queries
    with replacement (``obs.query`` must be set); cut to [0, 1], NaN at a position no resample identifies.
    ``progress``: a bar over the resamples (each one a fit of EM)."""
    from tqdm.auto import tqdm

    if obs.query is None:
        raise LtrError("bootstrap_em needs the query of every observation")
    queries, inv = np.unique(obs.query, return_inverse=True)
    rng = np.random.default_rng(seed)
    k = int(em_kwargs.pop("n_positions", None) or obs.position.max())
    reps = []
    for _ in tqdm(range(n_resamples), desc="bootstrap resamples (EM fits)", unit="fit", disable=not progress):
        count = np.bincount(rng.integers(0, len(queries), len(queries)), minlength=len(queries))
        rows = np.repeat(np.arange(len(obs.n)), count[inv])
        reps.append(regression_em(obs.subset(rows), n_positions=k, seed=seed, **em_kwargs).theta)
    tail = (1 - confidence) / 2
    with warnings.catch_warnings():  # a position no resample identifies is NaN, as in the point estimate
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanquantile(np.array(reps), [tail, 1 - tail], axis=0)
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
