"""The flat ranking data set: one idea, the CSR-style layout every part of the toolkit shares.

A ranking data set is ragged (queries hold different numbers of items), so it is kept flat, CSR style:
``features`` [N, F], ``labels`` [N] and ``query_offsets`` [Q+1], where query ``q`` owns rows
``query_offsets[q]:query_offsets[q + 1]``. Row order inside a query is meaningful: it is the tie-break
of the toolkit's metrics (stable sort), so nothing here reorders rows within a query.
"""


import dataclasses
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["RankingDataset", "concat_datasets", "split_by_query", "feature_names_of", "query_rows"]


# --------------------------------------------------------------------------------------------------
# The data set
# --------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class RankingDataset:
    """A ranking data set kept flat: rows of query ``q`` are ``query_offsets[q]:query_offsets[q+1]``.

    Attributes
    ----------
    features : [N, F] float32, C-contiguous (converted on construction).
    labels : [N] float64 graded relevance (may be non-integer).
    query_offsets : [Q+1] int64, non-decreasing, ``0`` first and ``N`` last.
    query_ids : [Q] query identifiers (int64 or str).
    user_ids : optional [Q] user of each query.
    weights : optional [N] per-item weights (e.g. inverse propensities).
    doc_ids : optional [N] str document ids (used by TREC run files).
    feature_names : optional [F] names of the feature columns (from a Parquet file or a data frame),
        a tuple of distinct strings; kept by ``subset``, ``concat_datasets`` and written into model
        folders.
    meta : free-form dict (where the data came from, generator parameters); not compared.

    >>> ds = RankingDataset(np.zeros((5, 2)), [0, 1, 2, 0, 1], [0, 3, 5], [7, 9])
    >>> ds.n_items, ds.n_queries, ds.n_features, ds.query_lengths.tolist()
    (5, 2, 2, [3, 2])
    >>> ds.query_index.tolist()
    [0, 0, 0, 1, 1]
    >>> ds.subset([1]).labels.tolist()
    [0.0, 1.0]
    """

    features: np.ndarray
    labels: np.ndarray
    query_offsets: np.ndarray
    query_ids: np.ndarray
    user_ids: np.ndarray | None = None
    weights: np.ndarray | None = None
    doc_ids: np.ndarray | None = None
    feature_names: tuple[str, ...] | None = None
    meta: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        x = np.asarray(self.features)
        if x.ndim != 2:
            raise ValueError(f"features must be a 2-D array [N, F]; got shape {x.shape}")
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise ValueError(f"features must be numeric; got dtype {x.dtype}")
        self.features = np.ascontiguousarray(x, dtype=np.float32)
        n = self.features.shape[0]

        y = np.asarray(self.labels)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"labels must have shape [N] = [{n}]; got {y.shape}")
        try:
            y = y.astype(np.float64, copy=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"labels must be numbers: {exc}") from None
        if not np.all(np.isfinite(y)):
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise ValueError(f"labels must be finite; row {bad} holds {y[bad]}")
        self.labels = y

        off = np.asarray(self.query_offsets)
        if off.ndim != 1 or off.shape[0] < 1:
            raise ValueError(f"query_offsets must be a 1-D array [Q+1]; got shape {off.shape}")
        if off.dtype.kind not in "iu":
            if off.dtype.kind == "f" and np.all(off == np.round(off)):
                off = off.astype(np.int64)
            else:
                raise ValueError(f"query_offsets must be integers; got dtype {off.dtype}")
        off = off.astype(np.int64, copy=False)
        if off[0] != 0 or off[-1] != n:
            raise ValueError(f"query_offsets must start at 0 and end at N = {n}; got {off[0]} .. {off[-1]}")
        if np.any(np.diff(off) < 0):
            q = int(np.flatnonzero(np.diff(off) < 0)[0])
            raise ValueError(f"query_offsets must be non-decreasing; query {q} has offsets {off[q]} > {off[q + 1]}")
        self.query_offsets = off
        n_queries = off.shape[0] - 1

        self.query_ids = self._per("query_ids", self.query_ids, n_queries, "Q")
        if self.user_ids is not None:
            self.user_ids = self._per("user_ids", self.user_ids, n_queries, "Q")
        if self.weights is not None:
            w = self._per("weights", self.weights, n, "N").astype(np.float64, copy=False)
            if not np.all(np.isfinite(w)):
                raise ValueError("weights must be finite")
            self.weights = w
        if self.doc_ids is not None:
            self.doc_ids = self._per("doc_ids", self.doc_ids, n, "N").astype(str, copy=False)
        if self.feature_names is not None:
            self.feature_names = _check_feature_names(self.feature_names, self.features.shape[1])
        if self.meta is None:
            self.meta = {}

    @staticmethod
    def _per(name: str, values, size: int, symbol: str) -> np.ndarray:
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.shape[0] != size:
            raise ValueError(f"{name} must have shape [{symbol}] = [{size}]; got {arr.shape}")
        return arr

    # ---- sizes ----------------------------------------------------------------------------------
    @property
    def n_items(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_queries(self) -> int:
        return int(self.query_offsets.shape[0] - 1)

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def query_lengths(self) -> np.ndarray:
        """[Q] int64 number of items of each query."""
        return np.diff(self.query_offsets)

    @property
    def query_index(self) -> np.ndarray:
        """[N] int64 query (0..Q-1) of each row."""
        return np.repeat(np.arange(self.n_queries, dtype=np.int64), self.query_lengths)

    def __len__(self) -> int:
        return self.n_queries

    def __repr__(self) -> str:
        extra = "".join(
            f", {name}" for name in ("user_ids", "weights", "doc_ids") if getattr(self, name) is not None
        )
        return (
            f"RankingDataset(n_queries={self.n_queries}, n_items={self.n_items}, "
            f"n_features={self.n_features}{extra})"
        )

    # ---- derived data sets ----------------------------------------------------------------------
    def row_indices(self, query_indices) -> np.ndarray:
        """[M] rows owned by ``query_indices``, in the order given (rows keep their order inside a query)."""
        return query_rows(self.query_offsets, _as_index_array(query_indices, self.n_queries))

    def subset(self, query_indices) -> "RankingDataset":
        """The queries ``query_indices`` (positions 0..Q-1, or a boolean mask), in the order given."""
        qi = _as_index_array(query_indices, self.n_queries)
        rows = self.row_indices(qi)
        lengths = self.query_lengths[qi]
        offsets = np.zeros(len(qi) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return RankingDataset(
            features=self.features[rows],
            labels=self.labels[rows],
            query_offsets=offsets,
            query_ids=self.query_ids[qi],
            user_ids=None if self.user_ids is None else self.user_ids[qi],
            weights=None if self.weights is None else self.weights[rows],
            doc_ids=None if self.doc_ids is None else self.doc_ids[rows],
            feature_names=self.feature_names,
            meta=dict(self.meta),
        )

    def with_features(self, features, feature_names=None) -> "RankingDataset":
        """The same data set with new features (same number of rows; any number of columns).

        The feature names are kept when the width is unchanged and ``feature_names`` is not given.
        """
        features = np.asarray(features)
        if features.ndim != 2 or features.shape[0] != self.n_items:
            raise ValueError(f"features must have shape [N = {self.n_items}, F]; got {features.shape}")
        if feature_names is None and features.shape[1] == self.n_features:
            feature_names = self.feature_names
        return dataclasses.replace(self, features=features, feature_names=feature_names, meta=dict(self.meta))

    def with_weights(self, weights) -> "RankingDataset":
        """The same data set with per-item ``weights`` [N] (or None to drop them)."""
        return dataclasses.replace(self, weights=weights, meta=dict(self.meta))

    # ---- columnar tables: moved to functions of ltr.data in 0.2 (kept until 0.3) ---------------------
    @classmethod
    def from_frame(cls, frame, *args, **options) -> "RankingDataset":
        """Deprecated since 0.2: use :func:`ltr.data.dataset_from_frame` (same arguments)."""
        from ltr.base._moved import moved_method

        return moved_method("RankingDataset.from_frame")(frame, *args, **options)

    def to_frame(self, **columns):
        """Deprecated since 0.2: use :func:`ltr.data.to_frame` ``(ds, **columns)``."""
        from ltr.base._moved import moved_method

        return moved_method("RankingDataset.to_frame")(self, **columns)

    def to_parquet(self, path, **columns) -> None:
        """Deprecated since 0.2: use :func:`ltr.data.to_parquet` ``(ds, path, **columns)``."""
        from ltr.base._moved import moved_method

        moved_method("RankingDataset.to_parquet")(self, path, **columns)

    def equals(self, other: "RankingDataset") -> bool:
        """True when every array (features bit for bit) is equal; ``meta`` is ignored."""
        if not isinstance(other, RankingDataset):
            return False
        if self.features.shape != other.features.shape:
            return False
        if not np.array_equal(self.features.view(np.uint32), other.features.view(np.uint32)):
            return False
        if self.feature_names != other.feature_names:
            return False
        for name in ("labels", "query_offsets", "query_ids", "user_ids", "weights", "doc_ids"):
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is not None and not np.array_equal(a, b):
                return False
        return True


def _check_feature_names(names, width: int) -> tuple[str, ...]:
    if isinstance(names, str):
        raise ValueError("feature_names must be a sequence of strings, not one string")
    names = tuple(names)
    if len(names) != width:
        raise ValueError(f"feature_names must have F = {width} entries; got {len(names)}")
    if not all(isinstance(n, str) for n in names):
        bad = next(n for n in names if not isinstance(n, str))
        raise ValueError(f"feature_names must be strings; got {bad!r}")
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))
        raise ValueError(f"feature_names must be distinct; {dup!r} appears twice")
    return names


def query_rows(query_offsets: np.ndarray, query_indices: np.ndarray) -> np.ndarray:
    """[M] int64 rows of the flat layout owned by the queries ``query_indices`` (int64 positions), in the
    order given; rows keep their order inside a query."""
    starts = query_offsets[query_indices]
    lengths = query_offsets[query_indices + 1] - starts
    new_starts = np.cumsum(lengths) - lengths
    # row r of the output = starts[q] + (r - new_starts[q]) for its query q: one repeat, one add.
    return np.repeat(starts - new_starts, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def _as_index_array(indices, size: int) -> np.ndarray:
    arr = np.asarray(indices)
    if arr.dtype == bool:
        if arr.shape != (size,):
            raise ValueError(f"a boolean query mask must have shape [{size}]; got {arr.shape}")
        return np.flatnonzero(arr)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"query indices must be integers; got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False).reshape(-1)
    if arr.min() < -size or arr.max() >= size:
        raise IndexError(f"query index out of range for {size} queries")
    return np.where(arr < 0, arr + size, arr)


def concat_datasets(datasets: Sequence[RankingDataset]) -> RankingDataset:
    """Concatenate data sets query-wise (e.g. the parts of a LETOR fold).

    Optional arrays are kept only when every part has them. Feature counts must agree, and so must
    the feature names of the parts that have them (names are kept when every part has them).
    """
    datasets = list(datasets)
    if not datasets:
        raise ValueError("concat_datasets needs at least one data set")
    widths = {d.n_features for d in datasets}
    if len(widths) > 1:
        raise ValueError(f"cannot concatenate data sets with different feature counts {sorted(widths)}")
    named = [d.feature_names for d in datasets if d.feature_names is not None]
    for names in named[1:]:
        if names != named[0]:
            j = next(j for j, (a, b) in enumerate(zip(named[0], names)) if a != b)
            raise ValueError(f"cannot concatenate data sets whose feature {j} is named {named[0][j]!r} in one and {names[j]!r} in another")
    offsets = [np.zeros(1, dtype=np.int64)]
    base = 0
    for d in datasets:
        offsets.append(d.query_offsets[1:] + base)
        base += d.n_items

    def cat(name):
        parts = [getattr(d, name) for d in datasets]
        return None if any(p is None for p in parts) else np.concatenate(parts)

    return RankingDataset(
        features=np.concatenate([d.features for d in datasets]),
        labels=np.concatenate([d.labels for d in datasets]),
        query_offsets=np.concatenate(offsets),
        query_ids=np.concatenate([d.query_ids for d in datasets]),
        user_ids=cat("user_ids"),
        weights=cat("weights"),
        doc_ids=cat("doc_ids"),
        feature_names=named[0] if len(named) == len(datasets) else None,
        meta={"parts": [d.meta for d in datasets]},
    )


# --------------------------------------------------------------------------------------------------
# Splitting
# --------------------------------------------------------------------------------------------------
def split_by_query(
    ds: RankingDataset,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    *,
    by_user: bool = False,
) -> tuple[RankingDataset, ...]:
    """Split queries at random into parts of the given ``fractions`` (no query in two parts).

    Deterministic given ``seed``. Each part keeps the original query order. With ``by_user=True``
    all queries of a user land in the same part (the fractions then hold approximately, counted in
    queries). Part sizes: the cumulative fractions times Q, rounded.
    """
    fractions = np.asarray(fractions, dtype=np.float64)
    if fractions.ndim != 1 or len(fractions) < 1 or np.any(fractions < 0) or not math.isclose(fractions.sum(), 1.0, abs_tol=1e-6):
        raise ValueError(f"fractions must be non-negative and add up to 1; got {fractions.tolist()}")
    rng = np.random.default_rng(seed)
    q = ds.n_queries
    bounds = np.round(np.cumsum(fractions) * q).astype(np.int64)
    bounds[-1] = q
    if not by_user:
        order = rng.permutation(q)
        parts = np.split(order, bounds[:-1])
    else:
        if ds.user_ids is None:
            raise ValueError("by_user=True needs user_ids")
        users, inverse, counts = np.unique(ds.user_ids, return_inverse=True, return_counts=True)
        user_order = rng.permutation(len(users))
        cum = np.cumsum(counts[user_order])  # queries covered after each user
        # a user goes to the part in which the middle of its block of queries falls
        middle = cum - counts[user_order] / 2.0
        part_of_user = np.empty(len(users), dtype=np.int64)
        part_of_user[user_order] = np.searchsorted(bounds, middle, side="right")
        part_of_user = np.minimum(part_of_user, len(fractions) - 1)
        query_part = part_of_user[inverse.reshape(-1)]
        parts = [np.flatnonzero(query_part == k) for k in range(len(fractions))]
    out = []
    for k, part in enumerate(parts):
        sub = ds.subset(np.sort(part))
        sub.meta = dict(ds.meta, split={"part": k, "fractions": fractions.tolist(), "seed": seed, "by_user": by_user})
        out.append(sub)
    return tuple(out)


def feature_names_of(ds, n_features: int | None = None) -> list[str]:
    """The data set's feature names, or ``f1 .. fF``.

    >>> feature_names_of(None, 3)
    ['f1', 'f2', 'f3']
    """
    names = getattr(ds, "feature_names", None)
    if names is None and ds is not None:
        names = (getattr(ds, "meta", None) or {}).get("feature_names")
    n = int(n_features if n_features is not None else ds.n_features)
    if names is not None and len(names) == n:
        return [str(x) for x in names]
    return [f"f{j + 1}" for j in range(n)]
