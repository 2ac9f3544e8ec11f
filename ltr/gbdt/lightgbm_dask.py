"""LightGBM lambdarank on a Dask cluster (``lightgbm.DaskLGBMRanker``), judged as the single-machine baseline.

::

    with dask_client(workers=2) as client:                 # or dask_client(scheduler="tcp://host:8786")
        train = read_parquet_for_ranking("train_parquet/")   # a Dask frame: never in one process's memory
        booster, info = train_lightgbm_dask(train, valid_ds, client=client)

What is the same as :func:`ltr.gbdt.lightgbm.train_lightgbm`: the parameters (``DEFAULT_PARAMS`` merged
with the caller's), ``label_gain`` built from the metrics' gain over the distinct training and
validation labels (:func:`~ltr.gbdt.lightgbm.label_table`, so non-integer labels map the same way), and
early stopping on validation ``ndcg@monitor_k`` with the same rule (stop after ``rounds`` rounds
without improvement, keep the best round).

Partitions never split a query. LightGBM's Dask interface gives each worker whole partitions and
``group`` sizes per partition; a query cut by a partition boundary would become two queries. An
in-memory data set is cut at query boundaries; a Parquet folder is read by Dask and its partition
boundaries are moved forward to the end of the query they cut (:func:`align_partitions_to_queries`:
a first pass measures each partition on the workers, then only the rows of cut queries move, worker
to worker).

Early stopping. LightGBM's Dask interface has no early stopping of its own: each worker would judge
only its share of the validation set, and workers deciding differently would hang the job. Here the
validation set goes whole to every worker inside a callback (:class:`ValidationStopping`) that adds
each new tree's scores and computes NDCG with ``metrics`` (LightGBM's conventions: empty query = 1,
ties in input order); every worker holds the same trees, so every worker computes the same numbers
and stops at the same round. The validation set must therefore fit in one worker's memory; the
training set never has to.

Dask is an optional dependency (``pip install ltr[dask]``); it is imported only here, on first use.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from ltr.base.errors import LtrError
from ltr.gbdt.lightgbm import DEFAULT_PARAMS, histogram_choice, label_table

__all__ = [
    "require_dask",
    "dask_client",
    "DaskRankingData",
    "from_dataset",
    "read_parquet_for_ranking",
    "align_partitions_to_queries",
    "ValidationStopping",
    "train_lightgbm_dask",
]


def require_dask():
    """Import dask's data frames and distributed, or raise an :class:`LtrError` saying how to get them."""
    try:
        import dask.array  # noqa: F401
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise LtrError(f"LightGBM on Dask needs dask[dataframe] and distributed ({exc}); install them with: pip install 'ltr[dask]'") from None


def check_scheduler_address(address: str, timeout: float = 5.0) -> None:
    """Refuse a ``--dask-scheduler`` address that is malformed or where nothing accepts a connection
    within ``timeout`` seconds: a plain TCP connect, so a wrong address fails in seconds, not after
    Dask's own retries. Schemes other than tcp:// and tls:// (ucx://, inproc://) are left to Dask."""
    scheme, _, rest = address.rpartition("://")
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LtrError(f"--dask-scheduler {address!r}: not an address; give one like tcp://host:8786")
    if scheme not in ("", "tcp", "tls"):
        return
    import socket

    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise LtrError(f"--dask-scheduler {address}: nothing answers there ({exc.strerror or exc}); start the "
                       "scheduler (dask scheduler) or check the address") from None


#: seconds to wait for Dask workers to register (a busy machine starts processes slowly)
WORKER_WAIT_S = 120


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, *, threads_per_worker: int = 1) -> Iterator[Any]:
    """A ``distributed.Client``: to ``scheduler`` (an existing cluster) or to a local cluster of
    ``workers`` processes (each LightGBM worker needs a process of its own: its network is per process)."""
    require_dask()
    from distributed import Client, LocalCluster

    if (workers is None) == (scheduler is None):
        raise LtrError("give either a number of local Dask workers or the address of a Dask scheduler")
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise LtrError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        except (MemoryError, ValueError, TypeError, KeyError, EOFError) as exc:
            # something listens there but speaks another protocol: Dask read its first bytes as a frame
            # length (an HTTP reply is ~3e18 bytes long read that way) or as a message it cannot decode
            raise LtrError(f"--dask-scheduler {scheduler}: something answers there, but not as a Dask scheduler "
                           f"(its reply is not Dask's protocol: {type(exc).__name__}); check the address and the port "
                           "(a scheduler listens on 8786 unless told otherwise)") from None
        with client:
            yield client
        return
    if int(workers) < 1:
        raise LtrError(f"the number of Dask workers must be >= 1, got {workers}")
    with LocalCluster(n_workers=int(workers), threads_per_worker=threads_per_worker, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:  # fmt: skip
        # on a loaded machine a worker process may not have registered yet when the data is placed
        client.wait_for_workers(int(workers), timeout=WORKER_WAIT_S)
        yield client


@dataclass
class DaskRankingData:
    """Training data as Dask arrays whose chunks are whole queries: ``X`` [N, F], ``y`` [N] (labels as
    read), ``group`` [Q] (query sizes, chunk i holding the sizes of X's chunk i), the distinct labels."""

    X: Any
    y: Any
    group: Any
    label_values: np.ndarray
    feature_names: list[str] | None = None

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_items(self) -> int:
        return int(sum(self.X.chunks[0]))

    @property
    def n_queries(self) -> int:
        return int(sum(self.group.chunks[0]))


def from_dataset(ds, n_parts: int, client=None) -> DaskRankingData:
    """An in-memory :class:`~ltr.data.RankingDataset` cut at query boundaries into ``n_parts`` chunks of
    about equal rows. With a ``client`` the chunks are sent to its workers now (chunk i to worker i mod
    W, in address order) instead of travelling inside the task graph."""
    require_dask()
    import dask.array as da

    from ltr.runs.shares import query_shares

    offsets = np.asarray(ds.query_offsets, dtype=np.int64)
    cuts = np.unique(query_shares(offsets, max(1, min(int(n_parts), ds.n_queries))))
    columns = (np.asarray(ds.features, dtype=np.float32), np.asarray(ds.labels, dtype=np.float64), np.diff(offsets).astype(np.int64))
    if client is None:
        rows = tuple(int(r) for r in np.diff(offsets[cuts]))
        chunks = ((rows, ds.n_features), (rows,), (tuple(int(q) for q in np.diff(cuts)),))
        X, y, group = (da.from_array(c, chunks=ch) for c, ch in zip(columns, chunks))
    else:
        workers = sorted(client.scheduler_info()["workers"])
        blocks: list[list[Any]] = [[], [], []]
        for i, (qa, qb) in enumerate(zip(cuts[:-1], cuts[1:])):
            ra, rb = offsets[qa], offsets[qb]
            parts = (columns[0][ra:rb], columns[1][ra:rb], columns[2][qa:qb])
            futures = client.scatter(list(parts), workers=[workers[i % len(workers)]])
            for j, (part, future) in enumerate(zip(parts, futures)):
                blocks[j].append(da.from_delayed(future, shape=part.shape, dtype=part.dtype))
        X, y, group = (da.concatenate(b) for b in blocks)
    return DaskRankingData(X=X, y=y, group=group, label_values=np.unique(ds.labels), feature_names=getattr(ds, "feature_names", None))


def _partition_edges(frame, query_column: str, label_column: str):
    """One row per partition: its rows, its runs of one query, first and last query, the rows of its
    first run, its distinct labels."""
    import pandas as pd

    q = frame[query_column].to_numpy()
    if len(q) == 0:
        return pd.DataFrame({"n": [0], "runs": [0], "first": [None], "last": [None], "first_run": [0], "labels": [np.zeros(0)]})
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    run_ids = pd.Series(q[starts])
    if run_ids.duplicated().any():
        raise LtrError(f"the rows of query {run_ids[run_ids.duplicated()].iloc[0]!r} are not contiguous in the Parquet data")
    first_run = int(starts[1]) if len(starts) > 1 else len(q)
    labels = np.unique(frame[label_column].to_numpy(dtype=np.float64))
    return pd.DataFrame({"n": [len(q)], "runs": [len(starts)], "first": [q[0]], "last": [q[-1]], "first_run": [first_run], "labels": [labels]})


def _query_cuts(edges) -> tuple[np.ndarray, np.ndarray]:
    """Global row cuts that keep each query in one partition (a boundary inside a query moves to the
    query's end), and for each partition whether its first run continues the previous one's query.

    >>> import pandas as pd   # partitions [a a b] [b c] [c]
    >>> e = pd.DataFrame({"n": [3, 2, 1], "first": list("abc"), "last": list("bcc"), "first_run": [2, 1, 1]})
    >>> [c.tolist() for c in _query_cuts(e)]
    [[0, 4, 6], [False, True, True]]
    >>> e = pd.DataFrame({"n": [2, 1, 2], "first": list("abb"), "last": list("bbc"), "first_run": [1, 1, 1]})
    >>> [c.tolist() for c in _query_cuts(e)]    # [a b] [b] [b c]: one query across three partitions
    [[0, 4, 5], [False, True, True]]
    """
    n = edges["n"].to_numpy(dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(n)])
    cuts, continues, last = [0], np.zeros(len(n), dtype=bool), None
    for i in range(len(n)):
        if n[i] == 0:
            continue
        cut = starts[i]
        if last is not None and edges["first"].iloc[i] == last:
            continues[i] = True
            cut += edges["first_run"].iloc[i]  # the query that started before goes whole to the left
        last = edges["last"].iloc[i]
        if continues[i] and edges["first_run"].iloc[i] == n[i]:
            continue  # the whole partition continues a query: its end is no boundary either
        cuts.append(max(cut, cuts[-1]))
    cuts.append(starts[-1])
    return np.unique(np.asarray(cuts, dtype=np.int64)), continues


def _slice_rows(parts, bounds, lengths):
    import pandas as pd

    if [len(p) for p in parts] != list(lengths):  # the partitions read now are not those measured
        raise LtrError(f"Parquet partitions changed between two reads: {[len(p) for p in parts]} rows, expected {list(lengths)}")
    pieces = [p.iloc[lo:hi] for p, (lo, hi) in zip(parts, bounds)]
    return pd.concat(pieces) if len(pieces) > 1 else pieces[0]


def align_partitions_to_queries(frame, query_column: str, label_column: str):
    """``(pieces, rows, queries, labels)``: ``frame`` re-cut so that no query spans two partitions, as
    delayed pandas frames, the rows and queries of each, and the distinct labels. Rows keep their
    order; the rows of a query must be contiguous. A first pass over the partitions (on the workers)
    measures them; the pieces read them again when computed."""
    import dask

    import pandas as pd

    # Edges and pieces come from the same delayed partitions: Dask may fuse the partitions of a read
    # of fewer columns differently, so a lighter first pass would not see the same boundaries.
    parts = frame.to_delayed()
    edges = pd.concat(dask.compute(*[dask.delayed(_partition_edges)(p, query_column, label_column) for p in parts]), ignore_index=True)
    n, runs, first_run = (edges[c].to_numpy(dtype=np.int64) for c in ("n", "runs", "first_run"))
    starts = np.concatenate([[0], np.cumsum(n)])
    cuts, continues = _query_cuts(edges)
    pieces, queries = [], []
    for a, b in zip(cuts[:-1], cuts[1:]):
        ks, bounds, count = [], [], 0
        for k in range(len(n)):
            lo, hi = max(a, starts[k]) - starts[k], min(b, starts[k + 1]) - starts[k]
            if hi <= lo:
                continue
            ks.append(k)
            bounds.append((int(lo), int(hi)))
            # local cuts are 0, first_run or n: count the runs that start in [lo, hi) as new queries
            count += (runs[k] if hi == n[k] else 1) if lo == 0 else runs[k] - 1
            count -= int(lo == 0 and continues[k])
        pieces.append(dask.delayed(_slice_rows)([parts[k] for k in ks], bounds, [int(n[k]) for k in ks]))
        queries.append(count)
    labels = np.unique(np.concatenate(edges["labels"].tolist())) if len(edges) else np.zeros(0)
    return pieces, np.diff(cuts), np.asarray(queries, dtype=np.int64), labels


def _run_lengths(frame, query_column: str) -> np.ndarray:
    q = frame[query_column].to_numpy()
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if len(q) else np.zeros(0, dtype=np.int64)
    return np.diff(np.r_[starts, len(q)]).astype(np.int64)


def _column_block(frame, columns, dtype) -> np.ndarray:
    return frame[columns].to_numpy(dtype=dtype)


def read_parquet_for_ranking(path, query_column: str = "qid", label_column: str = "label",
                             feature_columns: Sequence[str] | None = None, exclude: Sequence[str] = ()) -> DaskRankingData:
    """A Parquet file or folder as :class:`DaskRankingData`, read by the cluster's workers.

    Features: ``feature_columns``, or every numeric column that is not the query, the label or in
    ``exclude`` (document id, weight), in file order. The rows of a query must be contiguous.
    """
    require_dask()
    import dask
    import dask.array as da
    import dask.dataframe as dd

    try:
        frame = dd.read_parquet(str(path))
    except (OSError, ValueError) as exc:
        raise LtrError(f"{path}: cannot read as Parquet: {exc}") from None
    columns = list(frame.columns)
    for role, name in (("query", query_column), ("label", label_column)):
        if name not in columns:
            raise LtrError(f"{path}: no {role} column {name!r} (columns: {', '.join(columns)})")
    if feature_columns is None:
        skip = {query_column, label_column, *exclude}
        feature_columns = [c for c in columns if c not in skip and frame[c].dtype.kind in "iufb"]
    missing = [c for c in feature_columns if c not in columns]
    if missing or not feature_columns:
        raise LtrError(f"{path}: feature columns missing: {missing or 'none numeric'}")
    pieces, rows, queries, labels = align_partitions_to_queries(frame[[query_column, label_column, *feature_columns]], query_column, label_column)
    features = list(feature_columns)

    def stack(fn, args, shapes, dtype):
        blocks = [da.from_delayed(dask.delayed(fn)(p, *args), shape=shape, dtype=dtype) for p, shape in zip(pieces, shapes)]
        return da.concatenate(blocks)

    return DaskRankingData(
        X=stack(_column_block, (features, np.float32), [(int(r), len(features)) for r in rows], np.float32),
        y=stack(_column_block, (label_column, np.float64), [(int(r),) for r in rows], np.float64),
        group=stack(_run_lengths, (query_column,), [(int(q),) for q in queries], np.int64),
        label_values=labels,
        feature_names=features,
    )


class ValidationStopping:
    """LightGBM callback: NDCG@``eval_at`` of the whole validation set after every round, and early
    stopping on ``ndcg@monitor_k`` by the single-machine baseline's rule.

    Each round adds the newest tree's raw scores to a running sum (one tree's prediction, not the
    whole model's), so a round costs one pass of one tree over the validation rows. NDCG follows
    LightGBM's conventions (gain from ``gain``, empty query = 1, ties in input order), so on one
    machine the values equal LightGBM's own ``ndcg@k``. ``history`` holds one dict per round.
    """

    order = 30  # after LightGBM's own evaluation callbacks

    def __init__(self, valid_ds, *, gain: Any = "exp2", eval_at: Sequence[int] = (1, 3, 5, 10), monitor_k: int = 10,
                 rounds: int | None = 50):
        self.features = np.asarray(valid_ds.features, dtype=np.float32)
        self.labels = np.asarray(valid_ds.labels, dtype=np.float64)
        self.offsets = np.asarray(valid_ds.query_offsets, dtype=np.int64)
        self.gain, self.rounds = gain, rounds
        self.eval_at = sorted({int(k) for k in eval_at} | {int(monitor_k)})
        self.monitor = f"ndcg@{int(monitor_k)}"
        self._reset()

    def _reset(self) -> None:
        self.scores = np.zeros(len(self.labels))
        self.history: list[dict[str, float]] = []
        self.best, self.best_iteration, self.best_results = -math.inf, 0, None

    def values(self, scores: np.ndarray) -> dict[str, float]:
        import metrics

        names = [f"ndcg@{k}" for k in self.eval_at]
        ev = metrics.evaluate(scores, self.labels, self.offsets, names, preset="lightgbm", gain=self.gain)
        return {name: float(ev.mean[ev.names[name]]) for name in names}

    def __call__(self, env) -> None:
        import lightgbm as lgb

        if env.iteration == env.begin_iteration:
            self._reset()
        self.scores += env.model.predict(self.features, start_iteration=env.iteration, num_iteration=1, raw_score=True)
        values = self.values(self.scores)
        self.history.append(values)
        results = [("valid", name, value, True) for name, value in values.items()]
        if values[self.monitor] > self.best:
            self.best, self.best_iteration, self.best_results = values[self.monitor], env.iteration, results
        elif self.rounds is not None and env.iteration - self.best_iteration >= self.rounds:
            raise lgb.callback.EarlyStopException(self.best_iteration, self.best_results)
        if env.iteration == env.end_iteration - 1:
            raise lgb.callback.EarlyStopException(self.best_iteration, self.best_results)


def _label_codes(data: DaskRankingData, valid_ds, gain):
    """LightGBM's integer labels for the Dask training labels, and ``label_gain`` / the value table,
    from the same :func:`~ltr.gbdt.lightgbm.label_table` as the single-machine baseline."""
    values = data.label_values
    bad = values[~np.isfinite(values) | (values < 0)]
    if bad.size:
        raise LtrError(f"training set: LightGBM needs finite, non-negative labels; found label {float(bad[0])}")
    seen = values if valid_ds is None else np.concatenate([values, np.asarray(valid_ds.labels, dtype=np.float64)])
    _, label_gain, table = label_table(np.unique(seen), gain, where="train/valid labels")
    if table is None:
        return data.y.astype(np.int32), label_gain, None
    return data.y.map_blocks(np.searchsorted, np.asarray(table), dtype=np.int64).astype(np.int32), label_gain, table


def _pin_chunks(client, arrays):
    """Compute chunk i of every array on worker i mod W (workers in address order) and keep it there.

    LightGBM's Dask interface trains each worker on the chunks it holds; Dask would otherwise place
    them wherever it likes, and the model (bin boundaries come from each worker's rows) would change
    with the placement. Pinned, each worker holds the same rows in every run. (Which LightGBM rank a
    worker gets still follows the order Dask reports, so with continuous features two runs can
    still differ; see DESIGN_NOTES.)
    """
    import dask.array as da

    workers = sorted(client.scheduler_info()["workers"])
    if not workers:  # a worker missed its heartbeat under load and is being re-registered: wait for one
        client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        workers = sorted(client.scheduler_info()["workers"])
    blocks = [a.to_delayed().ravel() for a in arrays]
    out: list[list[Any]] = [[] for _ in arrays]
    for i in range(len(blocks[0])):
        futures = client.compute([b[i] for b in blocks], workers=[workers[i % len(workers)]])
        for j, (a, future) in enumerate(zip(arrays, futures)):
            out[j].append(da.from_delayed(future, shape=(a.chunks[0][i], *a.shape[1:]), dtype=a.dtype))
    return [da.concatenate(o) for o in out]


def train_lightgbm_dask(
    train,
    valid_ds=None,
    params: dict[str, Any] | None = None,
    *,
    client,
    gain: Any = "exp2",
    num_boost_round: int = 1000,
    early_stopping_rounds: int | None = 50,
    eval_at: Sequence[int] = (1, 3, 5, 10),
    monitor_k: int = 10,
    seed: int = 0,
):
    """Train ``lightgbm.DaskLGBMRanker`` on ``client``'s cluster; returns ``(booster, info)`` as
    :func:`ltr.gbdt.lightgbm.train_lightgbm` does (``info["dask"]``: workers and partitions).

    ``train``: :class:`DaskRankingData` (e.g. :func:`read_parquet_for_ranking`) or an in-memory
    :class:`~ltr.data.RankingDataset` (cut into one partition per worker). ``valid_ds``: an in-memory
    data set, judged whole by every worker (see the module docstring).
    """
    require_dask()
    import lightgbm as lgb

    params = dict(params or {})
    if "label_gain" in params:
        raise LtrError("params must not set label_gain: it is built from gain= so that LightGBM and the metrics agree")
    n_workers = len(client.scheduler_info()["workers"])
    data = train if isinstance(train, DaskRankingData) else from_dataset(train, n_workers, client=client)
    y, label_gain, values = _label_codes(data, valid_ds, gain)
    merged = {**DEFAULT_PARAMS, "seed": int(seed), **params, "label_gain": label_gain}
    histogram_choice(merged, params)
    merged.pop("metric", None)  # validation is judged by the callback, not by LightGBM's metric
    callbacks = []
    stopper = None
    if valid_ds is not None:
        stopper = ValidationStopping(valid_ds, gain=gain, eval_at=eval_at, monitor_k=monitor_k, rounds=early_stopping_rounds)
        callbacks.append(stopper)
    ranker = lgb.DaskLGBMRanker(client=client, n_estimators=int(num_boost_round), **merged)
    X, y, group = _pin_chunks(client, [data.X, y, data.group])
    try:
        with warnings.catch_warnings():  # Dask sets each worker's threads itself, and says so
            warnings.filterwarnings("ignore", message="Parameter n_jobs will be ignored")
            ranker.fit(X, y, group=group, callbacks=callbacks)
    except lgb.basic.LightGBMError as exc:
        raise LtrError(f"LightGBM refused the data or parameters: {exc}") from None
    booster = ranker.to_local().booster_
    best_iteration = int(booster.best_iteration) if booster.best_iteration > 0 else booster.current_iteration()
    evals: dict[str, Any] = {}
    if stopper is not None:  # the workers' per-round values, recomputed here from the same trees
        curve = ValidationStopping(valid_ds, gain=gain, eval_at=eval_at, monitor_k=monitor_k, rounds=None)
        evals["valid"] = _replay(curve, booster)
    info = {
        "best_iteration": best_iteration,
        "best_score": {k: dict(v) for k, v in booster.best_score.items()},
        "evals_result": evals,
        "label_gain": label_gain,
        "label_values": values,
        "params": {k: v for k, v in merged.items() if k != "label_gain"},
        "num_boost_round": int(num_boost_round),
        "early_stopping_rounds": early_stopping_rounds,
        "dask": {"workers": n_workers, "partitions": int(data.X.numblocks[0]), "n_items": data.n_items, "n_queries": data.n_queries},
    }
    return booster, info


def _replay(curve: ValidationStopping, booster) -> dict[str, list[float]]:
    from types import SimpleNamespace

    total = booster.current_iteration()
    for i in range(total):
        curve(SimpleNamespace(model=booster, iteration=i, begin_iteration=0, end_iteration=total + 1))
    return {name: [h[name] for h in curve.history] for name in (curve.history[0] if curve.history else {})}
