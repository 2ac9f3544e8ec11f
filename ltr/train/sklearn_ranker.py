"""A scikit-learn-style ranker: the toolkit's scorers and trainer behind ``fit`` / ``predict`` / ``score``.

::

    from ltr import NeuralRanker
    ranker = NeuralRanker(model="mlp", loss="lambdarank", epochs=20)
    ranker.fit(X, y, qid=qid, eval_set=[(X_valid, y_valid, qid_valid)])
    scores = ranker.predict(X_test)                  # one score per row
    ranker.score(X_test, y_test, qid=qid_test)       # NDCG@10, the toolkit's conventions

Query ids follow XGBoost's convention: ``qid`` holds one id per row and the rows of a query are
contiguous (a query split over two runs of rows is an error, never regrouped: row order is the
tie-break of the metrics). ``fit(X, y, group=sizes)`` takes LightGBM's and XGBoost's other form
instead: the number of rows of each query, in row order. ``X`` is a numpy array or a pandas data frame; a data frame may carry the
query ids as a column named ``qid`` instead of the ``qid=`` argument (as XGBoost's ranker allows), which
is what lets scikit-learn's model selection pass them along without metadata routing::

    from sklearn.model_selection import GroupKFold, cross_val_score
    cross_val_score(NeuralRanker(epochs=10), frame_with_qid_column, y, groups=frame["qid"],
                    cv=GroupKFold(5), scoring=ranking_scorer("ndcg@10"))

With ``sklearn.set_config(enable_metadata_routing=True)`` numpy arrays work too: request ``qid`` with
``NeuralRanker().set_fit_request(qid=True)`` and pass ``params={"qid": qid, "groups": qid}``;
:func:`ranking_scorer` requests ``qid`` for scoring by itself.

Training: the model (``"mlp"`` or ``"linear"``, with ``normalize`` fitted on the training rows and
stored inside the model), the loss (any ``losses.get_loss`` name, options in ``loss_params``) and
:class:`ltr.train.trainer.Trainer` with early stopping on ``monitor`` over ``eval_set``. Without an
``eval_set`` the training rows themselves pick the best epoch (no held-out early stopping).
Parameters are stored untouched by ``__init__`` and checked in ``fit``, as scikit-learn requires, so
``get_params`` / ``set_params`` round-trip and ``sklearn.base.clone`` works.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_is_fitted

from ltr.train.config import MODEL_RULES
from ltr.train.settings import DEFAULT_ENSEMBLE, DEFAULT_LOSS, MODEL_DEFAULTS

__all__ = ["NeuralRanker", "RankingScorer", "ranking_scorer", "dataset_from_arrays"]

QID_COLUMN = "qid"


def _split_qid(X, qid, where: str):
    """Take the query ids from ``qid=`` or from a data frame's ``qid`` column (not both)."""
    columns = getattr(X, "columns", None)
    if columns is not None and QID_COLUMN in list(columns):
        if qid is not None:
            raise ValueError(f"{where}: query ids given twice, as qid= and as the column {QID_COLUMN!r} of X; pass one")
        return X.drop(columns=[QID_COLUMN]), np.asarray(X[QID_COLUMN])
    return X, qid


def _one_column(values, where: str) -> np.ndarray:
    """``values`` as a 1-D array: a 2-D array is refused (one value per row; a single column
    [N, 1] is taken, as scikit-learn's ``column_or_1d`` does), never flattened into rows."""
    a = np.asarray(values)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{where} must hold one value per row (a 1-D array), got an array of shape {a.shape}")
    return a


def query_offsets_from_qid(qid, n_rows: int, where: str = "qid") -> tuple[np.ndarray, np.ndarray]:
    """``(query_offsets [Q+1], query_ids [Q])`` from per-row ids whose queries are contiguous runs.

    >>> offsets, ids = query_offsets_from_qid([7, 7, 3, 3, 3, 9], 6)
    >>> offsets.tolist(), ids.tolist()
    ([0, 2, 5, 6], [7, 3, 9])
    """
    q = _one_column(qid, where)
    if q.shape[0] != n_rows:
        raise ValueError(f"{where} has {q.shape[0]} entries for {n_rows} rows of X")
    if n_rows == 0:
        raise ValueError(f"{where}: no rows")
    starts = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]]))
    ids = q[starts]
    if len(np.unique(ids)) != len(ids):
        seen, dup = set(), None
        for value in ids.tolist():
            if value in seen:
                dup = value
                break
            seen.add(value)
        raise ValueError(f"{where}: the rows of query {dup!r} are not contiguous; sort the rows by query id "
                         "(a stable sort keeps each query's row order, which breaks score ties)")
    return np.append(starts, n_rows).astype(np.int64), ids


def qid_from_group(group, n_rows: int, where: str = "group") -> np.ndarray:
    """Per-row query ids ``0, 0, 1, ...`` from LightGBM's and XGBoost's ``group``: the number of rows of
    each query, in row order (positive integers adding up to the rows of X).

    >>> qid_from_group([2, 3, 1], 6).tolist()
    [0, 0, 1, 1, 1, 2]
    """
    sizes = _one_column(group, where)
    if sizes.size == 0 or sizes.dtype.kind not in "iuf" or not np.all(np.isfinite(sizes)):
        raise ValueError(f"{where} must hold the number of rows of each query (positive integers), got {sizes[:5].tolist()}")
    if np.any(sizes != np.round(sizes)) or np.any(sizes < 1):
        i = int(np.flatnonzero((sizes != np.round(sizes)) | (sizes < 1))[0])
        raise ValueError(f"{where}[{i}] = {sizes[i].item()!r}: each query's number of rows must be an integer >= 1")
    total = int(sizes.sum())
    if total != n_rows:
        raise ValueError(f"{where} adds up to {total} rows, X has {n_rows} (group holds the number of rows of each "
                         "query, as LightGBM and XGBoost define it; per-row query ids go to qid=)")
    return np.repeat(np.arange(sizes.size), sizes.astype(np.int64))


def _qid_or_group(X, qid, group, where: str):
    """``qid`` from ``qid=`` or from ``group=`` (sizes): never both."""
    if group is None:
        return qid
    if qid is not None:
        raise ValueError(f"{where}: pass qid= (one id per row) or group= (rows per query), not both")
    return qid_from_group(group, len(X), f"{where}: group")


def dataset_from_arrays(X, y, qid, *, sample_weight=None, where: str = "X"):
    """A :class:`ltr.data.RankingDataset` from scikit-learn-style arrays (see the module docstring)."""
    from ltr.data.dataset import RankingDataset
    from ltr.data.labels import LABEL_LIMIT, label_problem

    X, qid = _split_qid(X, qid, where)
    if qid is None:
        raise ValueError(f"{where}: query ids are needed: pass qid= (one id per row) or a data frame with a {QID_COLUMN!r} column")
    features = check_array(X, dtype=np.float32, order="C")
    labels = _one_column(y, f"{where}: y").astype(np.float64)
    if labels.shape[0] != features.shape[0]:
        raise ValueError(f"{where}: y has {labels.shape[0]} entries for {features.shape[0]} rows")
    bad = np.flatnonzero(~np.isfinite(labels) | (labels >= LABEL_LIMIT))
    if bad.size:  # the readers' rule (ltr.data.labels): a label of 5000 would turn the gains into inf
        raise ValueError(f"{where}: y[{int(bad[0])}]: {label_problem(float(labels[bad[0]]))}")
    offsets, ids = query_offsets_from_qid(qid, features.shape[0], f"{where}: qid")
    weights = None if sample_weight is None else _one_column(sample_weight, f"{where}: sample_weight").astype(np.float64)
    return RankingDataset(features, labels, offsets, ids, weights=weights)


class NeuralRanker(BaseEstimator):
    """Neural learning-to-rank model with the scikit-learn interface (see the module docstring).

    Parameters
    ----------
    model : "mlp" or "linear".
    loss : a ``losses.get_loss`` name (softmax (default), lambdarank, ranknet, ndcg_loss2, ndcg_loss2pp, listnet, bce, mse).
    hidden, activation, dropout, batch_norm : the MLP's layers (ignored by "linear").
    normalize : "auto" (default), "standard", "log1p", "log1p_standard" or "none"; fitted on the training rows, kept
        inside the model.
    input_noise : standard deviation of Gaussian noise on the normalised inputs while training (default 0.1;
        with loss "softmax" and normalize "auto", the defaults study of docs/experiments.md chose it).
    query_norm : "auto" (default), "none", "zscore", "minmax", "append_zscore" or "append_minmax": each feature
        normalised within its query inside the scorer; "auto" is "zscore" when the training features are already
        min-max normalised per query (LETOR 4.0's QueryLevelNorm), else "none" (``ltr.train.settings.resolve_query_norm``).
    loss_params : keyword arguments of the loss (e.g. ``{"k": 10}`` for LambdaRank@10).
    ensemble : number of models trained with seeds seed, seed+1, ... whose scores are averaged (default 3, as
        ``ltr train``; 1 trains one model in a third of the time).
    epochs, batch_size, lr, weight_decay, patience, monitor, seed, device : the trainer's settings
        (:class:`ltr.train.config.TrainConfig`); ``batch_size`` counts queries ("auto": the number of
        training queries // 30, between 4 and 64).
    verbose : progress bars while training.

    Attributes (after ``fit``): ``model_`` (the torch scorer, best epoch's weights), ``query_norm_`` (the per-query
    normalisation used, "auto" resolved), ``n_features_in_``,
    ``feature_names_in_`` (data frames only), ``best_epoch_``, ``best_score_`` (the monitored validation
    value; of the averaged model for an ensemble, whose ``best_epoch_`` and ``history_`` are its first member's), ``history_`` (per-epoch records), ``evals_result_`` (``{"valid": {stamped metric: [per epoch]}}``).
    """

    def __init__(
        self,
        model: str = "mlp",
        loss: str = DEFAULT_LOSS,
        *,
        hidden: Sequence[int] = tuple(MODEL_DEFAULTS["hidden"]),
        activation: str = "relu",
        dropout: float = 0.0,
        batch_norm: bool = False,
        normalize: str = MODEL_DEFAULTS["normalize"],
        input_noise: float = MODEL_DEFAULTS["input_noise"],
        query_norm: str = MODEL_DEFAULTS["query_norm"],
        loss_params: dict[str, Any] | None = None,
        ensemble: int = DEFAULT_ENSEMBLE,
        epochs: int = 30,
        batch_size: int | str = "auto",
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        patience: int | None = 5,
        monitor: str = "ndcg@10",
        seed: int = 0,
        device: str = "cpu",
        verbose: bool = False,
    ):
        self.model = model
        self.loss = loss
        self.hidden = hidden
        self.activation = activation
        self.dropout = dropout
        self.batch_norm = batch_norm
        self.normalize = normalize
        self.input_noise = input_noise
        self.query_norm = query_norm
        self.loss_params = loss_params
        self.ensemble = ensemble
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.patience = patience
        self.monitor = monitor
        self.seed = seed
        self.device = device
        self.verbose = verbose

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, qid=None, *, group=None, eval_set=None, eval_group=None, sample_weight=None) -> "NeuralRanker":
        """Train on ``(X, y, qid)``; ``eval_set=[(X_valid, y_valid, qid_valid)]`` early-stops on ``monitor``.

        ``group`` (and ``eval_group=[sizes]`` for ``eval_set=[(X_valid, y_valid)]``) may stand for
        ``qid``: the number of rows of each query, in row order, as LGBMRanker and XGBRanker take it.
        """
        import losses

        from ltr.base.errors import LtrError
        from ltr.train.config import TrainConfig
        from ltr.train.settings import resolve_query_norm

        names = getattr(X, "columns", None)
        qid = _qid_or_group(X, qid, group, "X")
        if eval_group is not None:
            eval_set = self._grouped_eval_set(eval_set, eval_group)
        train = dataset_from_arrays(X, y, qid, sample_weight=sample_weight, where="X")
        if names is not None:
            self.feature_names_in_ = np.asarray([str(c) for c in names if str(c) != QID_COLUMN], dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_features_in_ = train.n_features
        valid = self._eval_dataset(eval_set) if eval_set is not None else train
        if valid.n_features != train.n_features:
            raise ValueError(f"eval_set has {valid.n_features} features, X has {train.n_features}")
        try:
            config = TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                                 patience=self.patience, monitor=self.monitor, metrics=(self.monitor,), seed=self.seed,
                                 device=self.device, progress=bool(self.verbose), histograms=False)
            loss = losses.get_loss(self.loss, **(self.loss_params or {}))
            # "auto" decided once from the training rows, for every member
            query_norm = resolve_query_norm({"query_norm": self.query_norm}, train)[0]["query_norm"]
            result = self._train(train, valid, loss, config, query_norm)
        except (LtrError, KeyError, TypeError) as exc:
            raise ValueError(f"NeuralRanker: {exc}") from None
        self.model_ = result.model.cpu().eval()
        self.query_norm_ = query_norm
        self.best_epoch_ = result.best_epoch
        self.best_score_ = result.best_value
        self.history_ = result.history
        self.evals_result_ = {"valid": {name: [h["valid"][name] for h in result.history] for name in result.history[0]["valid"]}}
        return self

    def _train(self, train, valid, loss, config, query_norm: str):
        """One model, or ``ensemble`` of them averaged (the first member's history stands for the ensemble's)."""
        import dataclasses

        from ltr.train.ensemble import fit_ensemble
        from ltr.train.trainer import Trainer, seed_everything

        MODEL_RULES["ensemble"].check(self.ensemble, "ensemble")
        if self.ensemble == 1:
            seed_everything(self.seed)
            return Trainer(self._build_model(train, query_norm), loss, config).fit(train, valid)
        fit = fit_ensemble(lambda seed: self._build_model(train, query_norm), loss, config, train, valid,
                           seeds=[self.seed + k for k in range(self.ensemble)])
        (ensemble_value,) = fit.valid_metrics.values()  # the monitor, the one metric of ``config``
        return dataclasses.replace(fit.members[0], model=fit.model, best_value=ensemble_value)

    @staticmethod
    def _grouped_eval_set(eval_set, eval_group):
        """``eval_set=[(X, y)]`` with ``eval_group=[sizes]`` as ``[(X, y, qid)]``."""
        if not isinstance(eval_group, (list, tuple)) or len(eval_group) != 1:
            raise ValueError("eval_group must be a list with one array of query sizes, for the one eval_set")
        if not isinstance(eval_set, (list, tuple)) or len(eval_set) != 1 or len(tuple(eval_set[0])) != 2:
            raise ValueError("eval_group goes with eval_set=[(X_valid, y_valid)] (its query ids come from eval_group)")
        X, y = tuple(eval_set[0])
        return [(X, y, _qid_or_group(X, None, eval_group[0], "eval_set[0]"))]

    def _eval_dataset(self, eval_set):
        if not isinstance(eval_set, (list, tuple)) or len(eval_set) != 1:
            raise ValueError("eval_set must be a list with one (X, y, qid) or (X, y) tuple (a data frame may hold the qid column)")
        item = tuple(eval_set[0])
        if len(item) not in (2, 3):
            raise ValueError(f"eval_set[0] must be (X, y, qid) or (X, y); got {len(item)} items")
        X, y, qid = item if len(item) == 3 else (*item, None)
        return dataset_from_arrays(X, y, qid, where="eval_set[0]")

    def _build_model(self, train, query_norm: str):
        from ltr.train.models import FeatureTransform, build_model

        if self.model == "linear":
            arch = {"type": "linear", "input_noise": self.input_noise}
        elif self.model == "mlp":
            arch = {"type": "mlp", "hidden": list(self.hidden), "activation": self.activation, "dropout": self.dropout,
                    "batch_norm": self.batch_norm, "input_noise": self.input_noise}
        else:
            raise ValueError(f"model must be 'mlp' or 'linear', got {self.model!r}")
        net = build_model({**arch, "query_norm": query_norm, "n_features": train.n_features})
        if self.normalize != "none":
            net.set_normalizer(FeatureTransform.fit(train.features, self.normalize))
        return net

    # ------------------------------------------------------------------ prediction
    def _features(self, X) -> np.ndarray:
        """``X`` (its ``qid`` column already taken out) as float32 rows, checked against what ``fit`` saw."""
        names = getattr(X, "columns", None)
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None and [str(c) for c in names] != list(fitted):
            raise ValueError(f"X has columns {[str(c) for c in names]}, the ranker was fitted on {list(fitted)}")
        features = check_array(X, dtype=np.float32, order="C")
        if features.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {features.shape[1]} features, the ranker was fitted on {self.n_features_in_}")
        return features

    def predict(self, X, qid=None) -> np.ndarray:
        """One score per row of ``X``: higher ranks first.

        A scorer that normalises each feature within its query (``query_norm_`` other than "none", which
        "auto" chooses on data min-max normalised per query) scores whole queries, so it needs the query
        ids: ``qid=`` or the ``qid`` column of a data frame. Otherwise both are ignored.
        """
        from ltr.train.trainer import predict_scores

        check_is_fitted(self, "model_")  # first: NotFittedError before fit, as scikit-learn's estimators raise
        X, qid = _split_qid(X, qid, "X")
        features = self._features(X)
        if not getattr(self.model_, "listwise", False):
            return predict_scores(self.model_, features)
        if qid is None:
            raise ValueError(f"this ranker normalises features within each query (query_norm_={self.query_norm_!r}): "
                             f"pass qid= (one id per row) or a data frame with a {QID_COLUMN!r} column")
        offsets, _ = query_offsets_from_qid(_one_column(qid, "qid"), features.shape[0], "qid")
        return predict_scores(self.model_, features, query_offsets=offsets)

    def score(self, X, y, qid=None) -> float:
        """Mean NDCG@10 over the queries with a relevant item (the toolkit's conventions:
        ``ndcg@10[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]``)."""
        return ranking_scorer("ndcg@10")(self, X, y, qid=qid)


def _predict_takes_qid(estimator) -> bool:
    """Whether ``estimator.predict`` has a ``qid`` parameter (NeuralRanker's does: a scorer that
    normalises within queries needs them; LightGBM's and XGBoost's rankers' do not)."""
    import inspect

    try:
        return "qid" in inspect.signature(estimator.predict).parameters
    except (TypeError, ValueError):
        return False


class RankingScorer:
    """A scikit-learn scorer ``scorer(estimator, X, y, qid=None) -> float``: the mean of a ranking metric
    over queries (``metrics.evaluate`` with the toolkit's conventions, or ``conventions``).

    Query ids come from ``qid`` (metadata routing, which this scorer requests) or from a data frame's
    ``qid`` column. Queries the metric skips (no relevant item) are left out of the mean; NaN when none
    counts.
    """

    def __init__(self, metric: str = "ndcg@10", **conventions: Any):
        self.metric = metric
        self.conventions = conventions

    def __call__(self, estimator, X, y, qid=None) -> float:
        import metrics

        X, qid = _split_qid(X, qid, "X")
        if qid is None:
            raise ValueError("the ranking scorer needs query ids: a data frame with a 'qid' column, or metadata "
                             "routing with params={'qid': ...}")
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        offsets, _ = query_offsets_from_qid(qid, y.shape[0])
        scores = estimator.predict(X, qid=qid) if _predict_takes_qid(estimator) else estimator.predict(X)
        ev = metrics.evaluate(np.asarray(scores, dtype=np.float64), y, offsets, [self.metric], **self.conventions)
        return float(ev.mean[ev.names[self.metric]])

    def get_metadata_routing(self):
        """Ask scikit-learn's metadata routing for ``qid`` when scoring."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=type(self).__name__)
        request.score.add_request(param="qid", alias=True)
        return request

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.conventions.items())
        return f"ranking_scorer({self.metric!r}{extra})"


def ranking_scorer(metric: str = "ndcg@10", **conventions: Any) -> RankingScorer:
    """The scorer to pass as ``scoring=`` to ``cross_val_score``, ``GridSearchCV`` and the like."""
    return RankingScorer(metric, **conventions)
