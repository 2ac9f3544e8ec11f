"""Unbiased LambdaMART (Hu, Wang, Peng and Li, WWW 2019) as a LightGBM custom objective.

The log is grouped by shown list (:mod:`ltr.clicks.logs.lists`); ``P[g, i, j]`` counts the
sessions of list g with a click on item i and none on item j. For such a pair, with scores s,
``rho_ij = 1 / (1 + exp(sigma (s_i - s_j)))`` and the DCG change of swapping the two items in the
list ordered by s (clicks as binary labels, no normalisation)
``Delta_ij = |1/log2(1 + rank_i) - 1/log2(1 + rank_j)|``::

    loss_ij   = P_ij Delta_ij log(1 + exp(-sigma (s_i - s_j)))
    lambda_ij = sigma P_ij Delta_ij rho_ij / (t+_{r_i} t-_{r_j})        (the pair's debiased lambda)
    grad_i   -= lambda_ij,  grad_j += lambda_ij
    hess_i, hess_j += sigma^2 P_ij Delta_ij rho_ij (1 - rho_ij) / (t+_{r_i} t-_{r_j})

After every boosting round the position biases of clicked (t+) and unclicked (t-) items are
re-estimated from the unweighted pair losses, relative to position 1, with regularisation p::

    t+_k = ( sum_{pairs, r_i = k} loss_ij / t-_{r_j}  /  same for k = 1 ) ^ (1 / (p + 1))
    t-_k = ( sum_{pairs, r_j = k} loss_ij / t+_{r_i}  /  same for k = 1 ) ^ (1 / (p + 1))

(XGBoost's ``lambdarank_unbiased`` follows the same paper; ``lambdarank_bias_norm`` is p.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["pair_lambdas", "update_position_biases", "UnbiasedLambdaMART", "fit_unbiased_lambdamart",
           "fit_unbiased_lambdamart_on_lists"]


def _ranks(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """1-based rank of each cell by descending score within its row (padding last)."""
    s = np.where(mask, scores, -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, s.shape[1] + 1)[None, :].repeat(len(s), 0), axis=1)
    return ranks


def pair_lambdas(scores, pairs, positions, mask, t_plus, t_minus, sigma: float = 1.0):
    """``(grad [G, K], hess [G, K], loss [G, K, K])`` of the module docstring (loss without the biases)."""
    s = np.asarray(scores, dtype=np.float64)
    disc = 1.0 / np.log2(1.0 + _ranks(s, mask))
    delta = np.abs(disc[:, :, None] - disc[:, None, :])
    diff = s[:, :, None] - s[:, None, :]
    rho = 1.0 / (1.0 + np.exp(np.clip(sigma * diff, -50, 50)))
    base = pairs * delta
    loss = base * np.logaddexp(0.0, -sigma * diff)
    r = np.maximum(positions - 1, 0)
    bias = t_plus[r][:, :, None] * t_minus[r][:, None, :]
    lam = sigma * base * rho / bias
    h = sigma * sigma * base * rho * (1 - rho) / bias
    grad = -lam.sum(axis=2) + lam.sum(axis=1)
    hess = h.sum(axis=2) + h.sum(axis=1)
    return grad, hess, loss


def update_position_biases(loss, positions, t_plus, t_minus, power: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The closed-form t+ / t- update of the module docstring (floored at 1e-6); each curve keeps its old
    values when no pair has its side at position 1 (its normaliser would be 0)."""
    k = len(t_plus)
    r = np.maximum(positions - 1, 0)
    plus = np.bincount(r.ravel(), weights=(loss / t_minus[r][:, None, :]).sum(axis=2).ravel(), minlength=k)
    minus = np.bincount(r.ravel(), weights=(loss / t_plus[r][:, :, None]).sum(axis=1).ravel(), minlength=k)
    expo = 1.0 / (power + 1.0)
    new_plus = np.maximum(plus / plus[0], 1e-6) ** expo if plus[0] > 0 else t_plus
    new_minus = np.maximum(minus / minus[0], 1e-6) ** expo if minus[0] > 0 else t_minus
    return new_plus, new_minus


@dataclass
class UnbiasedLambdaMART:
    """The booster, the learned position biases and their history (one row per round)."""

    booster: object
    t_plus: np.ndarray
    t_minus: np.ndarray
    history: list

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self.booster.predict(np.asarray(features))


def fit_unbiased_lambdamart(dataset, log, *, rounds: int = 100, params: dict | None = None, sigma: float = 1.0,
                            power: float = 0.0, seed: int = 0, debias: bool = True, valid=None,
                            early_stopping_rounds: int | None = None, progress: bool = False) -> UnbiasedLambdaMART:
    """Boost on the log's shown lists with the debiased lambdas; ``params`` go to ``lightgbm.train``.
    ``debias=False`` keeps t+ = t- = 1: the same objective on raw clicks (the naive baseline).

    valid: a labelled data set (None: boost exactly ``rounds`` rounds); with ``early_stopping_rounds``,
        boosting stops when its NDCG@10 (gain 2^rel - 1) has not improved for that many rounds, and the
        model keeps the best round (at most ``rounds``) with the position biases estimated in that round.
    progress: a bar of boosting rounds on stderr.
    """
    from ltr.clicks.logs.lists import group_sessions, pair_counts

    lists = group_sessions(log)
    return fit_unbiased_lambdamart_on_lists(dataset, lists, pair_counts(log, lists), rounds=rounds, params=params,
                                            sigma=sigma, power=power, seed=seed, debias=debias, valid=valid,
                                            early_stopping_rounds=early_stopping_rounds, progress=progress)


def fit_unbiased_lambdamart_on_lists(dataset, lists, pairs, *, rounds: int = 100, params: dict | None = None,
                                     sigma: float = 1.0, power: float = 0.0, seed: int = 0, debias: bool = True,
                                     valid=None, early_stopping_rounds: int | None = None,
                                     progress: bool = False) -> UnbiasedLambdaMART:
    """:func:`fit_unbiased_lambdamart` on a log's distinct shown lists and their click-pair counts
    (:func:`ltr.clicks.logs.lists.group_sessions` and ``pair_counts``, or
    :func:`ltr.clicks.logs.list_stream.stream_shown_lists` for a Parquet log larger than memory)."""
    import lightgbm

    if pairs is None or pairs.sum() <= 0:
        raise LtrError("unbiased LambdaMART needs sessions with a click and an unclicked item")
    mask, pos = lists.mask, lists.positions
    k = lists.docs.shape[1]
    state = {"t_plus": np.ones(k), "t_minus": np.ones(k), "history": []}

    def objective(preds, _data):
        scores = np.zeros(mask.shape)
        scores[mask] = preds
        grad, hess, loss = pair_lambdas(scores, pairs, pos, mask, state["t_plus"], state["t_minus"], sigma)
        if debias:
            state["t_plus"], state["t_minus"] = update_position_biases(loss, pos, state["t_plus"], state["t_minus"], power)
        state["history"].append((state["t_plus"].copy(), state["t_minus"].copy()))
        return grad[mask], np.maximum(hess[mask], 1e-9)

    base = {"learning_rate": 0.1, "num_leaves": 31, "min_data_in_leaf": 20, "verbosity": -1, "seed": seed,
            "num_threads": 1, "deterministic": True, "force_col_wise": True}
    base.update(params or {})
    base["objective"] = objective
    train = lightgbm.Dataset(np.asarray(dataset.features[lists.docs[mask]]), label=np.zeros(int(mask.sum())),
                             group=mask.sum(axis=1), free_raw_data=False)
    valid_sets, callbacks = _watch_valid(train, valid, base, early_stopping_rounds, progress, rounds)
    try:
        booster = lightgbm.train(base, train, num_boost_round=rounds, valid_sets=valid_sets,
                                 valid_names=["valid"] * len(valid_sets), callbacks=callbacks)
    finally:
        for cb in callbacks:
            if hasattr(cb, "bar"):
                cb.bar.close()
    kept = booster.best_iteration if booster.best_iteration > 0 else booster.current_iteration()
    t_plus, t_minus = state["history"][kept - 1]
    return UnbiasedLambdaMART(booster, t_plus, t_minus, state["history"][:kept])


def _watch_valid(train, valid, base: dict, early_stopping_rounds, progress: bool, rounds: int) -> tuple[list, list]:
    """The validation set LightGBM scores each round (NDCG@10 on its labels, gain 2^rel - 1, set in
    ``base``) and the callbacks: early stopping on it, a progress bar of rounds."""
    import lightgbm

    from ltr.gbdt.lightgbm import early_stopping_callback, label_table, rounds_progress_callback

    valid_sets, callbacks = [], []
    if valid is not None and early_stopping_rounds:
        codes, label_gain, _ = label_table(valid.labels, "exp2", where="validation labels")
        base.update({"metric": "ndcg", "eval_at": [10], "label_gain": label_gain})
        valid_sets.append(lightgbm.Dataset(np.asarray(valid.features), label=codes, group=np.diff(valid.query_offsets),
                                           reference=train))
        callbacks.append(early_stopping_callback("ndcg@10", int(early_stopping_rounds)))
    if progress:
        callbacks.append(rounds_progress_callback(rounds, "ndcg@10" if valid_sets else None))
    return valid_sets, callbacks
