"""LightGBM lambdarank baseline on the same :class:`~ltr.data.RankingDataset` the neural models use.

``train_lightgbm(train, valid)`` builds ``lgb.Dataset`` objects from the flat features, labels and
query sizes (``np.diff(query_offsets)``), trains ``objective="lambdarank"`` with early stopping on the
validation set, and returns the booster and a dict of what happened.

Gains. LightGBM's NDCG (metric and lambdarank gradients alike) reads the gain of a label from
``label_gain[label]``. We always pass ``label_gain`` explicitly, built with the same function the
project's metrics use, ``metrics.gains.gain_values(values, gain)``, so LightGBM optimises and reports
the NDCG that ``metrics.evaluate(..., gain=gain)`` computes, and its default table (2^i - 1 for
i < 31, the source of "label 31 is out of range") never applies.

Labels. LightGBM takes only non-negative integer labels. The rule here:

- non-negative integers are passed as they are; ``label_gain`` covers 0..max label
  (so labels of 31 and above are fine);
- non-integer, non-negative labels are replaced by the index of their value among the sorted
  distinct label values of the training and validation sets, and ``label_gain[i]`` is the gain of
  the i-th value. Order and gains are unchanged, so LightGBM's NDCG on the indices equals the
  project's NDCG on the original labels (``info["label_values"]`` holds the table);
- negative or non-finite labels, and labels whose gain overflows (``exp2`` of 1024 and above), are
  refused with an :class:`~ltr.base.errors.LtrError` naming the row;
- ``train_gain`` (a gain for the training labels other than the validation labels'): the training
  values take the codes 0..m-1 with their ``train_gain``, the validation values the codes m.. with
  ``gain``, so the gradients read one gain and the early-stopping NDCG the other. Policy-aware
  click labels (:mod:`ltr.clicks.estimators.policy_aware`) are estimates of a click probability, whose gain is
  the value itself, while the validation set keeps its grades and their ``2^rel - 1``.

LightGBM's own MAP uses a fixed threshold (label > 0.5) on the integers it sees, so only its NDCG is
comparable after a mapping; the project judges the booster's scores with ``metrics.evaluate`` anyway.

>>> label_table(np.array([0.0, 2.0, 1.0]), "exp2")[1]
[0.0, 1.0, 3.0]
>>> codes, gains, values = label_table(np.array([0.5, 0.0, 2.5]), "linear")
>>> codes.tolist(), gains, values
([1, 0, 2], [0.0, 0.5, 2.5], [0.0, 0.5, 2.5])
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_path, atomic_write_json

__all__ = ["train_lightgbm", "label_table", "predict_booster", "save_booster", "load_booster", "booster_importance", "DEFAULT_PARAMS",
           "histogram_choice", "early_stopping_callback", "rounds_progress_callback"]

DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_data_in_leaf": 20,
    "deterministic": True,
    "force_row_wise": True,
    "verbosity": -1,
}


def histogram_choice(merged: dict[str, Any], params: dict[str, Any]) -> None:
    """The user's ``force_col_wise=true`` alone overrides :data:`DEFAULT_PARAMS`' ``force_row_wise=true``
    in ``merged`` (LightGBM refuses the two together) instead of clashing with it."""
    wants_col = params.get("force_col_wise") is True or str(params.get("force_col_wise")).strip().lower() in ("true", "1", "+")
    if wants_col and "force_row_wise" not in params:
        merged["force_row_wise"] = False


def label_table(labels: np.ndarray, gain: Any = "exp2", *, where: str = "labels") -> tuple[np.ndarray, list[float], list[float] | None]:
    """Map labels to LightGBM's integer labels; return ``(codes [N] int32, label_gain, values or None)``.

    ``values`` is None when the labels are integers already (the identity mapping).
    """
    from metrics.gains import gain_values

    y = np.asarray(labels, dtype=np.float64)
    _check_labels(y, where)
    if y.size == 0:
        return np.zeros(0, dtype=np.int32), [0.0], None
    if np.all(y == np.round(y)):
        top = int(y.max())
        values = np.arange(top + 1, dtype=np.float64)
        codes = y.astype(np.int32)
        table_values = None
    else:
        values, codes = np.unique(y, return_inverse=True)
        codes = codes.astype(np.int32)
        table_values = [float(v) for v in values]
    with np.errstate(over="ignore"):  # an overflow becomes inf, refused just below
        gains = np.asarray(gain_values(values, gain), dtype=np.float64)
    if not np.all(np.isfinite(gains)):
        i = int(np.flatnonzero(~np.isfinite(gains))[0])
        raise LtrError(f"{where}: the gain of label {float(values[i])} under gain={gain!r} is not finite")
    return codes, [float(g) for g in gains], table_values


def _check_labels(y: np.ndarray, where: str) -> None:
    bad = np.flatnonzero(~np.isfinite(y) | (y < 0))
    if bad.size:
        i = int(bad[0])
        raise LtrError(
            f"{where}: LightGBM needs finite, non-negative labels; row {i} has label {float(y[i])} "
            f"({bad.size} such rows). Shift or clip the labels first."
        )


def _group_sizes(ds) -> np.ndarray:
    return np.diff(np.asarray(ds.query_offsets, dtype=np.int64))


def train_lightgbm(
    train_ds,
    valid_ds=None,
    params: dict[str, Any] | None = None,
    *,
    gain: Any = "exp2",
    train_gain: Any = None,
    position: np.ndarray | None = None,
    num_boost_round: int = 1000,
    early_stopping_rounds: int | None = 50,
    eval_at: Sequence[int] = (1, 3, 5, 10),
    monitor_k: int = 10,
    seed: int = 0,
    progress: bool = False,
    record_train: bool = False,
    callbacks: Sequence[Any] = (),
):
    """Train LightGBM lambdarank; returns ``(booster, info)``.

    params: LightGBM parameters merged over :data:`DEFAULT_PARAMS` (not ``label_gain``: it comes from ``gain``).
    gain: gain convention of the metrics ("exp2", "linear" or a callable), turned into ``label_gain``;
        ``train_gain``: the training labels' own, when not ``gain`` (module docstring, "Labels").
    position: optional [N] integer shown positions of the training rows, passed to
        ``lgb.Dataset(position=...)`` for LightGBM's unbiased lambdarank (position-bias correction).
    The training set's per-item ``weights``, when it has them (e.g. inverse propensities), go to
    ``lgb.Dataset(weight=...)``: LightGBM multiplies each item's lambda gradient and hessian by its
    weight. The validation metrics are unweighted.
    early_stopping_rounds: stop when validation ``ndcg@monitor_k`` has not improved for this many
        rounds (None: no early stopping); the booster keeps ``best_iteration``.
    eval_at: the cut-offs LightGBM reports (``monitor_k`` is added when missing).
    monitor_k: early stopping watches validation ``ndcg@monitor_k`` only (LightGBM's own callback
        can only watch the first metric, and LightGBM sorts ``eval_at``, so that would be ndcg@1).
    record_train: also record LightGBM's metrics on the training set each round (the training
        curve, ``evals_result["train"]``; costs one evaluation of the training set per round).
    callbacks: extra LightGBM callbacks (e.g. a tuner's pruning callback).
    info: ``best_iteration``, ``best_score``, ``evals_result`` (LightGBM's per-round metrics, with
        LightGBM's conventions: a query without relevant items scores 1), ``label_gain``,
        ``label_values`` (None or the mapping table), ``params``, ``importance`` (:func:`booster_importance`
        at the best iteration, features named from the data set's ``feature_names`` when it has them).
    """
    from ltr.data.dataset import feature_names_of
    from ltr.gbdt.streaming import lightgbm_streamed_defaults, lightgbm_train_set

    import lightgbm as lgb

    params = dict(params or {})
    if "label_gain" in params:
        raise LtrError("params must not set label_gain: it is built from gain= so that LightGBM and the metrics agree")
    codes, label_gain, values = _train_valid_label_table(train_ds, valid_ds, gain, train_gain)
    n_train = train_ds.n_items
    codes = {"train": codes[:n_train].astype(np.float32), "valid": codes[n_train:].copy()}  # LightGBM keeps float32 labels
    eval_at = sorted({int(k) for k in eval_at} | {int(monitor_k)})  # LightGBM sorts them anyway

    # a streamed set (data larger than RAM) trains column-wise unless params say otherwise: see ltr.gbdt.streaming
    merged = {**DEFAULT_PARAMS, **lightgbm_streamed_defaults(train_ds, params), "seed": int(seed), "eval_at": eval_at, **params,
              "label_gain": label_gain}  # fmt: skip
    histogram_choice(merged, params)
    if position is not None:
        position = _checked_position(position, n_train)
    names = feature_names_of(train_ds)
    try:  # built here, not in lgb.train, so that no copy of the training labels outlives it (codes.pop)
        train_set = lightgbm_train_set(train_ds, codes.pop("train"), _group_sizes(train_ds), merged, position=position,
                                       weight=_checked_weights(train_ds), feature_name=names)
    except lgb.basic.LightGBMError as exc:
        raise LtrError(f"LightGBM refused the data or parameters: {exc}") from None
    evals_result: dict[str, Any] = {}
    valid_sets, valid_names, all_callbacks = _valid_sets_and_callbacks(
        train_set, valid_ds, codes.pop("valid"), evals_result,
        record_train=record_train, early_stopping_rounds=early_stopping_rounds, monitor_k=monitor_k,
        extra_callbacks=callbacks, progress=progress, num_boost_round=num_boost_round,
    )  # fmt: skip
    try:
        booster = lgb.train(merged, train_set, num_boost_round=int(num_boost_round), valid_sets=valid_sets, valid_names=valid_names, callbacks=all_callbacks)
    except lgb.basic.LightGBMError as exc:
        raise LtrError(f"LightGBM refused the data or parameters: {exc}") from None
    finally:
        for cb in all_callbacks:
            if hasattr(cb, "bar"):
                cb.bar.close()
    return booster, _booster_info(booster, evals_result, merged, label_gain, values, names, num_boost_round, early_stopping_rounds)


def _train_valid_label_table(train_ds, valid_ds, gain: Any,
                             train_gain: Any = None) -> tuple[np.ndarray, list[float], list[float] | None]:
    """Check the labels of each set, then :func:`label_table` over training rows followed by validation rows;
    with ``train_gain``, one table per set, the validation codes after the training ones."""
    all_labels = np.asarray(train_ds.labels, dtype=np.float64)  # read once (a streamed set's labels are made at each access)
    _check_labels(all_labels, "training set")
    valid_labels = None
    if valid_ds is not None:
        valid_labels = np.asarray(valid_ds.labels, dtype=np.float64)
        _check_labels(valid_labels, "validation set")
    if train_gain is None:
        if valid_labels is not None:
            all_labels = np.concatenate([all_labels, valid_labels])
        return label_table(all_labels, gain, where="train/valid labels")
    codes, gains, values = _table_with_values(all_labels, train_gain, "training labels")
    if valid_labels is None:
        return codes, gains, values
    v_codes, v_gains, v_values = _table_with_values(valid_labels, gain, "validation labels")
    return np.concatenate([codes, v_codes + len(gains)]), gains + v_gains, values + v_values


def _table_with_values(labels: np.ndarray, gain: Any, where: str) -> tuple[np.ndarray, list[float], list[float]]:
    """:func:`label_table` with its values always listed (integer labels map to themselves)."""
    codes, gains, values = label_table(labels, gain, where=where)
    return codes, gains, [float(v) for v in range(len(gains))] if values is None else values


def _checked_weights(train_ds) -> np.ndarray | None:
    """The training set's per-item weights for LightGBM (None when it has none); negative ones refused."""
    weights = getattr(train_ds, "weights", None)
    if weights is None:
        return None
    weights = np.asarray(weights, dtype=np.float64)
    if weights.size and weights.min() < 0:
        raise LtrError(f"the training set has negative item weights (smallest {weights.min():g}): LightGBM needs weights >= 0")
    return weights


def _checked_position(position, n_train: int) -> np.ndarray:
    """``position`` as an array of one non-negative integer per training row, or an :class:`LtrError`."""
    position = np.asarray(position)
    if position.shape != (n_train,):
        raise LtrError(f"position must have one entry per training row ({n_train}), got shape {position.shape}")
    if not np.issubdtype(position.dtype, np.integer) or (position.size and position.min() < 0):
        raise LtrError("position must hold non-negative integers (the shown rank of each training row)")
    return position


def _valid_sets_and_callbacks(
    train_set, valid_ds, valid_codes: np.ndarray, evals_result: dict[str, Any], *,
    record_train: bool, early_stopping_rounds: int | None, monitor_k: int,
    extra_callbacks: Sequence[Any], progress: bool, num_boost_round: int,
) -> tuple[list[Any], list[str], list[Any]]:  # fmt: skip
    """The evaluation sets LightGBM scores each round (train when recorded, then valid) and the
    callbacks in their order: early stopping, recording into ``evals_result``, the caller's, progress."""
    import lightgbm as lgb

    from ltr.gbdt.streaming import lightgbm_data, lightgbm_dataset_class

    extra_callbacks = list(extra_callbacks)
    valid_sets, valid_names, callbacks = [], [], []
    if record_train:
        valid_sets.append(train_set)
        valid_names.append("train")
    if valid_ds is not None:
        valid_sets.append(
            lightgbm_dataset_class(valid_ds)(lightgbm_data(valid_ds), label=valid_codes, group=_group_sizes(valid_ds), reference=train_set,
                        params=dict(train_set.get_params()))  # the bins' parameters (a streamed set's data seed)
        )
        valid_names.append("valid")
        if early_stopping_rounds:
            callbacks.append(early_stopping_callback(f"ndcg@{int(monitor_k)}", int(early_stopping_rounds)))
    if valid_sets:
        callbacks.append(lgb.record_evaluation(evals_result))
    callbacks.extend(extra_callbacks)
    if progress:
        callbacks.append(rounds_progress_callback(num_boost_round, f"ndcg@{int(monitor_k)}" if valid_ds is not None else None))
    return valid_sets, valid_names, callbacks


def _booster_info(booster, evals_result, merged, label_gain, values, names, num_boost_round, early_stopping_rounds) -> dict[str, Any]:
    """The ``info`` dict :func:`train_lightgbm` returns, read from the trained booster."""
    best_iteration = int(booster.best_iteration) if booster.best_iteration > 0 else booster.current_iteration()
    return {
        "best_iteration": best_iteration,
        "best_score": {k: dict(v) for k, v in booster.best_score.items()},
        "evals_result": {k: {m: list(map(float, s)) for m, s in v.items()} for k, v in evals_result.items()},
        "label_gain": label_gain,
        "label_values": values,
        "params": {k: v for k, v in merged.items() if k != "label_gain"},
        "num_boost_round": int(num_boost_round),
        "early_stopping_rounds": early_stopping_rounds,
        "importance": booster_importance(booster, names, best_iteration),
    }


def early_stopping_callback(metric: str, rounds: int):
    """Stop when validation ``metric`` has not improved for ``rounds`` rounds; keep its best round."""
    import lightgbm as lgb

    state: dict[str, Any] = {"best": -np.inf, "iteration": 0, "results": None}

    def callback(env) -> None:
        value = next((v for data, name, v, _ in env.evaluation_result_list if data == "valid" and name == metric), None)
        if value is None:
            raise LtrError(f"early stopping: LightGBM reported no valid {metric}")
        if value > state["best"]:
            state.update(best=value, iteration=env.iteration, results=list(env.evaluation_result_list))
        elif env.iteration - state["iteration"] >= rounds or env.iteration == env.end_iteration - 1:
            raise lgb.callback.EarlyStopException(state["iteration"], state["results"])
        if env.iteration == env.end_iteration - 1:
            raise lgb.callback.EarlyStopException(state["iteration"], state["results"])

    callback.order = 30  # type: ignore[attr-defined]
    return callback


def rounds_progress_callback(total: int, metric: str | None = None):
    """A tqdm bar of boosting rounds (stderr), noting LightGBM's validation ``metric`` and its best
    round when given; the caller closes ``callback.bar``."""
    from tqdm.auto import tqdm

    from ltr.gbdt.common import rounds_note

    bar = tqdm(total=total, desc="boosting rounds")
    best = {"value": -np.inf, "round": 0}

    def callback(env) -> None:
        value = next((v for data, name, v, _ in env.evaluation_result_list if data == "valid" and name == metric), None)
        if value is not None:
            if value > best["value"]:
                best.update(value=value, round=env.iteration + 1)
            # LightGBM's own NDCG scores a query without a relevant item 1 (the toolkit skips it): say so
            bar.set_postfix_str(rounds_note(f"{metric} (LightGBM's) [empty=one]", value, best["value"], best["round"]),
                                refresh=False)
        bar.update(1)

    callback.bar = bar  # type: ignore[attr-defined]
    callback.order = 40  # type: ignore[attr-defined]
    return callback


def predict_booster(booster, features: np.ndarray, num_iteration: int | None = None) -> np.ndarray:
    """Scores [N] of a booster at ``num_iteration`` (default: its best iteration)."""
    if num_iteration is None:
        num_iteration = booster.best_iteration if booster.best_iteration > 0 else None
    return np.asarray(booster.predict(np.asarray(features), num_iteration=num_iteration), dtype=np.float64)


def save_booster(booster, folder: str | os.PathLike, *, n_features: int, best_iteration: int | None = None,
                 feature_names: Sequence[str] | None = None) -> Path:  # fmt: skip
    """Write ``model.txt`` (LightGBM's text format) and ``model.json`` into ``folder``, atomically;
    ``feature_names`` (the training data's, when it has them) go into ``model.json``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "model.txt") as tmp:
        booster.save_model(str(tmp), num_iteration=best_iteration)
    meta: dict[str, Any] = {"type": "lightgbm", "file": "model.txt", "n_features": int(n_features)}
    if feature_names is not None:
        meta["feature_names"] = [str(n) for n in feature_names]
    atomic_write_json(folder / "model.json", meta)
    return folder


def load_booster(folder: str | os.PathLike):
    """Load a booster written by :func:`save_booster` (a text model: nothing is executed).

    The model file that ``model.json`` names must lie inside ``folder`` (a name such as
    ``../../etc/passwd`` or an absolute path is refused), and a file LightGBM cannot read is an
    :class:`LtrError` naming it.
    """
    import lightgbm as lgb

    from ltr.gbdt.common import model_folder_file

    path, meta = model_folder_file(folder, "lightgbm", "model.txt", "LightGBM")
    where, n = Path(folder) / "model.json", meta["n_features"]
    try:
        booster = lgb.Booster(model_file=str(path))
    except lgb.basic.LightGBMError as exc:
        raise LtrError(f"{path}: not a LightGBM model LightGBM can read ({' '.join(str(exc).split())})") from None
    if booster.num_feature() != n:
        raise LtrError(f"{where}: n_features is {n} but {path.name} was trained on {booster.num_feature()} features")
    return booster, meta


def booster_importance(booster, names: Sequence[str], iteration: int | None = None) -> dict[str, Any]:
    """LightGBM's gain and split importances of every feature, up to ``iteration`` (default: best).

    Returns ``{"feature": [...], "gain": [...], "split": [...], "iteration": k}`` in column order.
    """
    if iteration is None:
        iteration = booster.best_iteration if booster.best_iteration > 0 else booster.current_iteration()
    gain = booster.feature_importance(importance_type="gain", iteration=iteration)
    split = booster.feature_importance(importance_type="split", iteration=iteration)
    if len(names) != len(gain):
        raise LtrError(f"{len(names)} feature names for a booster with {len(gain)} features")
    return {
        "kind": "lightgbm",
        "feature": list(names),
        "gain": [float(g) for g in gain],
        "split": [int(s) for s in split],
        "iteration": int(iteration),
        "note": "gain: total loss reduction of the splits on the feature; split: how many splits use it",
    }
