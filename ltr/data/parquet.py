"""Columnar data in and out: Parquet files, partitioned Parquet folders and data frames (pyarrow).

A table holds one row per item, and its columns play roles:

- the query column (default ``"qid"``): integers or strings; the rows of a query must be contiguous
  (the same rule as the SVMlight reader: row order is the metrics' tie-break, so nothing is regrouped
  silently; ``sort_by_query=True`` asks for a stable sort by query id);
- the label column (default ``"label"``): numbers. With ``labels="optional"`` (scoring: ``ltr predict``,
  the ``predict`` functions) a table without it is read with placeholder labels 0 and
  ``ds.meta["labelled"] = False`` (:func:`ltr.data.files.is_labelled`): served data has no labels;
- the feature columns: by default every numeric column (integers, floats, decimals; booleans only
  when named) that plays no other role and is not a partition key, in file order; their names become
  ``ds.feature_names``;
- optional document id, weight and user columns.

Missing values (nulls), NaN and infinite values are refused with the column and the row (0-based, as
pandas and Arrow count; in a folder also the file and its own row); missing columns are named with
the columns that exist. Labels follow :mod:`ltr.data.labels` as in every reader: 1024 and above are
refused, a negative label is read as 0 (judged non-relevant; ``ds.meta["negative_labels"]`` counts them). A partitioned folder (``key=value/part.parquet``, read through
``pyarrow.dataset``) is read file by file in path order, its rows in file order.

Tables written by :func:`to_parquet` carry their column roles in the schema metadata (key
``ltr.columns``), so ``load_parquet(path)`` with default arguments reads back exactly what was
written, weights, user ids and unnamed features included.

>>> ds = dataset_from_frame({"qid": [4, 4, 9], "label": [1, 0, 2], "bm25": [0.5, 0.25, 1.0], "doc": ["a", "b", "c"]},
...                         doc_id_column="doc")
>>> ds.feature_names, ds.query_ids.tolist(), ds.query_offsets.tolist(), ds.doc_ids.tolist()
(('bm25',), [4, 9], [0, 2, 3], ['a', 'b', 'c'])
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ltr.data.blocks import Block, QueryRuns
from ltr.data.dataset import RankingDataset
from ltr.data.labels import LABEL_LIMIT, label_problem
from ltr.base.errors import DataFormatError, LtrError
from ltr.base.io_utils import atomic_path

__all__ = [
    "load_parquet", "dataset_from_frame", "to_arrow", "to_frame", "to_parquet",
    "ParquetSource", "TableSource", "ColumnRoles", "resolve_roles", "is_parquet",
]  # fmt: skip

META_KEY = b"ltr.columns"
BLOCK_ROWS = 65536  # rows per record batch when streaming


# --------------------------------------------------------------------------------------------------
# Column roles
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnRoles:
    """Which column plays which role; ``unnamed``: the features were written without names."""

    query: str
    label: str | None  # None: no label column (read with labels="optional")
    features: tuple[str, ...]
    doc_id: str | None = None
    weight: str | None = None
    user: str | None = None
    unnamed: bool = False

    def columns(self) -> list[str]:
        """The columns to read, each once."""
        names = [self.query, self.label, *self.features, self.doc_id, self.weight, self.user]
        return list(dict.fromkeys(n for n in names if n is not None))


def _is_numeric(t, allow_bool: bool = False) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or (allow_bool and pa.types.is_boolean(t))


def _written_roles(schema) -> dict | None:
    meta = schema.metadata or {}
    if META_KEY not in meta:
        return None
    try:
        return json.loads(meta[META_KEY])
    except ValueError:
        return None


def resolve_roles(
    schema,
    *,
    query_column: str = "qid",
    label_column: str = "label",
    feature_columns: Sequence[str] | None = None,
    doc_id_column: str | None = None,
    weight_column: str | None = None,
    user_column: str | None = None,
    exclude: Sequence[str] = (),
    source: str = "the table",
    labels: str = "required",
) -> ColumnRoles:
    """Check the named columns exist with usable types and pick the default feature columns.

    Roles left as ``None`` are taken from the metadata :func:`to_parquet` writes, when present.
    ``exclude``: columns never taken as default features (partition keys). ``labels="optional"``:
    a missing label column is no error (the roles' ``label`` is then None).
    """
    names = list(schema.names)
    if labels not in ("required", "optional"):
        raise ValueError(f"labels must be 'required' or 'optional', got {labels!r}")
    if labels == "optional" and label_column not in names:
        label_column = None
    written = _written_roles(schema) or {}
    present = lambda c: c is not None and c in names  # noqa: E731

    def given_or_written(given: str | None, role: str) -> str | None:
        if given is not None:
            return given
        return written.get(role) if present(written.get(role)) else None

    doc_id_column = given_or_written(doc_id_column, "doc_id")
    weight_column = given_or_written(weight_column, "weight")
    user_column = given_or_written(user_column, "user")
    unnamed = False
    if feature_columns is None and written.get("features") and all(present(c) for c in written["features"]):
        feature_columns, unnamed = written["features"], bool(written.get("unnamed_features"))

    listing = f"; its columns are: {', '.join(names)}"
    roles = (("query", query_column, "query_column"), ("label", label_column, "label_column"), ("document id", doc_id_column, "doc_id_column"),
             ("weight", weight_column, "weight_column"), ("user", user_column, "user_column"))  # fmt: skip
    for role, name, option in roles:
        if name is not None and name not in names:
            raise LtrError(f"{source}: no {role} column {name!r} (set {option}= or --{option.replace('_', '-')}){listing}")
    taken = {c for _, c, _ in roles if c is not None}
    for role, name in (("label", label_column), ("weight", weight_column)):
        if name is not None and not _is_numeric(schema.field(name).type, allow_bool=True):
            raise LtrError(f"{source}: the {role} column {name!r} has type {schema.field(name).type}; it must hold numbers")

    if feature_columns is None:
        features = [n for n in names if n not in taken and n not in exclude and _is_numeric(schema.field(n).type)]
        if not features:
            raise LtrError(f"{source}: no numeric feature columns besides the query, label, id and weight columns{listing}")
    else:
        if isinstance(feature_columns, str):
            feature_columns = [c.strip() for c in feature_columns.split(",") if c.strip()]
        features = list(feature_columns)
        missing = [c for c in features if c not in names]
        if missing:
            raise LtrError(f"{source}: no feature column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}{listing}")
        if len(set(features)) != len(features):
            dup = next(c for i, c in enumerate(features) if c in features[:i])
            raise LtrError(f"{source}: feature column {dup!r} is named twice")
        clash = [c for c in features if c in taken]
        if clash:
            raise LtrError(f"{source}: column {clash[0]!r} cannot be a feature and the query/label/id/weight/user column at once")
        for c in features:
            if not _is_numeric(schema.field(c).type, allow_bool=True):
                raise LtrError(f"{source}: feature column {c!r} has type {schema.field(c).type}; features must be numbers")
    return ColumnRoles(query_column, label_column, tuple(features), doc_id_column, weight_column, user_column, unnamed)


# --------------------------------------------------------------------------------------------------
# Sources: a table in memory, a Parquet file or folder read in record batches
# --------------------------------------------------------------------------------------------------
class _Source:
    """What readers share: the roles, where a row is (for messages), the conversion of a batch."""

    name: str
    roles: ColumnRoles

    @property
    def n_features(self) -> int:
        return len(self.roles.features)

    @property
    def feature_names(self) -> tuple[str, ...] | None:
        return None if self.roles.unnamed else self.roles.features

    @property
    def labelled(self) -> bool:
        return self.roles.label is not None

    def meta(self) -> dict:
        """What a data set read from this source records: where from, labelled, negative labels read as 0."""
        return {"source": self.name, "labelled": self.labelled, "negative_labels": getattr(self, "n_negative_labels", 0)}

    def describe(self, row: int) -> str:
        return f"row {row}"

    def error_at(self, row: int, message: str) -> DataFormatError:
        return DataFormatError(self.name, None, f"{self.describe(row)}: {message}")

    def block(self, batch, row0: int) -> Block:
        """A record batch (or table) of rows ``row0..`` as a :class:`Block`, every value checked."""
        r = self.roles
        n = batch.num_rows
        positions = np.arange(row0, row0 + n, dtype=np.int64)
        features = np.empty((n, len(r.features)), dtype=np.float32)
        for j, name in enumerate(r.features):
            features[:, j] = self._numbers(batch, name, positions, np.float32)
        return Block(
            features=features,
            labels=np.zeros(n) if r.label is None else self._labels(batch, r.label, positions),
            query_keys=self._ids(batch, r.query, positions),
            positions=positions,
            doc_ids=None if r.doc_id is None else self._strings(batch, r.doc_id, positions),
            weights=None if r.weight is None else self._weights(batch, r.weight, positions),
            user_ids=None if r.user is None else self._ids(batch, r.user, positions),
        )

    def _column(self, batch, name: str, positions):
        import pyarrow.compute as pc

        column = batch.column(name)
        if column.null_count:
            row = int(np.flatnonzero(pc.is_null(column).to_numpy(zero_copy_only=False))[0])
            raise self.error_at(int(positions[row]), f"column {name!r} is missing a value (null, or NaN in a pandas frame)")
        return column

    def _numbers(self, batch, name: str, positions, dtype) -> np.ndarray:
        values = self._column(batch, name, positions).to_numpy(zero_copy_only=False)
        if values.dtype == object:  # decimals
            values = values.astype(np.float64)
        if values.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                r = int(bad[0])
                raise self.error_at(int(positions[r]), f"column {name!r} holds {values[r]}; values must be finite")
        with np.errstate(over="ignore"):  # an overflow to inf is reported just below
            out = values.astype(dtype)
        if dtype == np.float32:
            bad = np.flatnonzero(~np.isfinite(out))
            if bad.size:
                r = int(bad[0])
                raise self.error_at(int(positions[r]), f"column {name!r} holds {values[r]}, beyond the float32 range of features")
        return out

    def _weights(self, batch, name: str, positions) -> np.ndarray:
        """The weight column: finite and >= 0 (a negative weight would turn the loss's gradient around)."""
        weights = self._numbers(batch, name, positions, np.float64)
        bad = np.flatnonzero(weights < 0)
        if bad.size:
            r = int(bad[0])
            raise self.error_at(int(positions[r]), f"column {name!r} holds {weights[r]}; weights must be >= 0")
        return weights

    def _labels(self, batch, name: str, positions) -> np.ndarray:
        """The label column under the rules of :mod:`ltr.data.labels`: below 1024, negative read as 0."""
        labels = self._numbers(batch, name, positions, np.float64)
        bad = np.flatnonzero(labels >= LABEL_LIMIT)
        if bad.size:
            r = int(bad[0])
            raise self.error_at(int(positions[r]), f"column {name!r}: {label_problem(float(labels[r]))}")
        negative = labels < 0
        if negative.any():
            self.n_negative_labels = getattr(self, "n_negative_labels", 0) + int(negative.sum())
            labels[negative] = 0.0
        return labels

    def _ids(self, batch, name: str, positions) -> np.ndarray:
        import pyarrow as pa

        column = self._column(batch, name, positions)
        t = column.type
        if pa.types.is_dictionary(t):
            column, t = column.cast(t.value_type), t.value_type
        if pa.types.is_integer(t):
            return column.to_numpy(zero_copy_only=False).astype(np.int64)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return column.to_numpy(zero_copy_only=False).astype(str)
        if pa.types.is_floating(t):
            values = column.to_numpy(zero_copy_only=False)
            bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
            if bad.size:
                r = int(bad[0])
                raise self.error_at(int(positions[r]), f"column {name!r} holds {values[r]}; ids must be integers or strings")
            return values.astype(np.int64)
        raise LtrError(f"{self.name}: column {name!r} has type {t}; ids must be integers or strings")

    def _strings(self, batch, name: str, positions) -> np.ndarray:
        import pyarrow as pa

        column = self._column(batch, name, positions)
        return column.cast(pa.string()).to_numpy(zero_copy_only=False).astype(str)


class TableSource(_Source):
    """An Arrow table in memory (from a data frame), as one block."""

    def __init__(self, table, *, name: str = "the data frame", **columns):
        self.name, self.table = name, table
        self.roles = resolve_roles(table.schema, source=name, **columns)
        self.n_rows = int(table.num_rows)

    def blocks(self) -> Iterator[Block]:
        yield self.block(self.table.select(self.roles.columns()), 0)


class ParquetSource(_Source):
    """A Parquet file, or a folder of them (hive partitions allowed), read in record batches of
    ``block_rows`` rows: memory stays bounded by one batch whatever the size of the data."""

    def __init__(self, path: str | os.PathLike, *, block_rows: int = BLOCK_ROWS, **columns):
        import pyarrow.dataset as pads

        self.path = Path(path)
        self.name = str(path)
        if not self.path.exists():
            raise LtrError(f"{path}: no such file or folder")
        try:
            self.dataset = pads.dataset(str(self.path), format="parquet", partitioning="hive")
            self.fragments = list(self.dataset.get_fragments())
            counts = [f.count_rows() for f in self.fragments]
        except Exception as exc:  # pyarrow's ArrowInvalid / OSError on a file that is not Parquet
            raise LtrError(f"{path}: not a readable Parquet file or folder ({exc})") from None
        if not self.fragments:
            raise LtrError(f"{path}: the folder holds no Parquet files")
        self.partition_keys = [n for n in self.dataset.schema.names if n not in self.fragments[0].physical_schema.names]
        self.roles = resolve_roles(self.dataset.schema, exclude=self.partition_keys, source=self.name, **columns)
        self._check_files()
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.n_rows = int(self.starts[-1])
        self.block_rows = int(block_rows)

    def _check_files(self) -> None:
        """Every file of a folder has the columns the roles read, of the kind the folder's schema
        (the first file's) gives them: numbers for labels, weights and features, the same kind of
        id (integers or text) for the query, document and user columns. pyarrow checks only the
        first file; a later file without a column, or with text where numbers were, would stop the
        read half-way or be parsed as numbers."""
        if len(self.fragments) < 2:
            return
        import pyarrow as pa

        r = self.roles
        numeric = {*r.features} | ({r.label} if r.label else set()) | ({r.weight} if r.weight else set())
        first = self.dataset.schema
        for fragment in self.fragments:
            schema = fragment.physical_schema
            where = f"{self.name}: file {os.path.relpath(fragment.path, self.path)}"
            for name in r.columns():
                if name in self.partition_keys:
                    continue
                if name not in schema.names:
                    raise LtrError(f"{where} has no column {name!r}, which the folder's first file has; every file of a "
                                   f"folder must hold the same columns (it has: {', '.join(schema.names)})")
                t, t0 = schema.field(name).type, first.field(name).type
                if name in numeric:
                    ok = _is_numeric(t, allow_bool=pa.types.is_boolean(t0))
                else:
                    ok = _is_numeric(t, allow_bool=True) == _is_numeric(t0, allow_bool=True) or pa.types.is_dictionary(t)
                if not ok:
                    raise LtrError(f"{where}: column {name!r} has type {t} where the folder's first file has {t0}; "
                                   f"{'it must hold numbers' if name in numeric else 'ids must be of one kind in every file'}")

    def describe(self, row: int) -> str:
        if len(self.fragments) == 1:
            return f"row {row}"
        f = int(np.searchsorted(self.starts, row, side="right") - 1)
        rel = os.path.relpath(self.fragments[f].path, self.path)
        return f"row {row} (file {rel}, its row {row - int(self.starts[f])})"

    def blocks(self) -> Iterator[Block]:
        import pyarrow.dataset as pads
        import pyarrow.parquet as pq

        columns = self.roles.columns()
        from_path = set(columns) & set(self.partition_keys)  # values that live in folder names, not in files
        for f, fragment in enumerate(self.fragments):
            row = int(self.starts[f])
            if from_path:
                # no read-ahead, no pre-buffered column chunks (pyarrow's defaults held 16 batches)
                batches = fragment.to_batches(schema=self.dataset.schema, columns=columns, batch_size=self.block_rows, batch_readahead=0,
                                              fragment_readahead=0, fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=False))  # fmt: skip
            else:
                # the file reader decodes batch by batch: 0.12 GB of Arrow buffers at the peak converting
                # 1,000,000 x 136 rows, against 0.28 GB for the dataset scanner without read-ahead
                batches = pq.ParquetFile(fragment.path, pre_buffer=False).iter_batches(batch_size=self.block_rows, columns=columns)
            for batch in batches:
                if batch.num_rows:
                    yield self.block(batch, row)
                    row += batch.num_rows


def is_parquet(path: str | os.PathLike) -> bool:
    """A ``.parquet`` / ``.pq`` file, a file starting with Parquet's magic bytes, or a folder holding
    ``.parquet`` files (searched recursively)."""
    path = Path(path)
    if path.is_dir():
        return any(path.rglob("*.parquet"))
    if path.suffix.lower() in (".parquet", ".pq"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


# --------------------------------------------------------------------------------------------------
# Reading into memory
# --------------------------------------------------------------------------------------------------
def load_parquet(
    path: str | os.PathLike,
    query_column: str = "qid",
    label_column: str = "label",
    feature_columns: Sequence[str] | None = None,
    doc_id_column: str | None = None,
    weight_column: str | None = None,
    *,
    user_column: str | None = None,
    sort_by_query: bool = False,
    labels: str = "required",
) -> RankingDataset:
    """Read a Parquet file or a partitioned Parquet folder into a :class:`RankingDataset`.

    See the module docstring for the column roles and the checks. ``feature_columns``: names (or one
    comma-separated string); default every numeric column without another role. ``sort_by_query``:
    group the rows of each query by a stable sort on the query id instead of refusing rows of a
    query that are not contiguous. ``labels="optional"``: a table without the label column is read
    with placeholder labels (module docstring).
    """
    source = ParquetSource(path, query_column=query_column, label_column=label_column, feature_columns=feature_columns,
                           doc_id_column=doc_id_column, weight_column=weight_column, user_column=user_column,
                           labels=labels)  # fmt: skip
    ds = _assemble(source, sort_by_query)
    ds.meta = {**source.meta(), "format": "parquet"}
    return ds


def dataset_from_frame(
    frame,
    query_column: str = "qid",
    label_column: str = "label",
    feature_columns: Sequence[str] | None = None,
    doc_id_column: str | None = None,
    weight_column: str | None = None,
    *,
    user_column: str | None = None,
    sort_by_query: bool = False,
    labels: str = "required",
    name: str = "the data frame",
) -> RankingDataset:
    """A :class:`RankingDataset` from a pandas data frame, an Arrow table, a dict of columns, or any
    object with the Arrow C stream interface (polars, DuckDB results...); the rules of
    :func:`load_parquet` (``labels="optional"`` included). The frame's index is ignored; ``name``
    names the table in messages."""
    source = TableSource(_arrow_table(frame), name=name, query_column=query_column, label_column=label_column,
                         feature_columns=feature_columns, doc_id_column=doc_id_column, weight_column=weight_column,
                         user_column=user_column, labels=labels)  # fmt: skip
    ds = _assemble(source, sort_by_query)
    ds.meta = source.meta()
    return ds


def _arrow_table(frame):
    import pyarrow as pa

    if isinstance(frame, pa.Table):
        return frame
    if isinstance(frame, pa.RecordBatch):
        return pa.Table.from_batches([frame])
    if type(frame).__module__.startswith("pandas"):
        return pa.Table.from_pandas(frame, preserve_index=False)
    try:
        return pa.table(frame)
    except (TypeError, ValueError, pa.ArrowInvalid) as exc:
        raise LtrError(f"cannot read a {type(frame).__name__} as a table: {exc}") from None


def _assemble(source: _Source, sort_by_query: bool) -> RankingDataset:
    """Every block of ``source`` in memory (features filled into one preallocated array)."""
    features = np.empty((source.n_rows, source.n_features), dtype=np.float32)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("labels", "query_keys", "positions", "doc_ids", "weights", "user_ids")}
    row = 0
    for block in source.blocks():
        features[row : row + block.n_rows] = block.features
        row += block.n_rows
        for k, values in parts.items():
            value = getattr(block, k)
            if value is not None:
                values.append(value)
    if row == 0:
        raise DataFormatError(source.name, None, "no rows")
    arrays = {k: (np.concatenate(v) if v else None) for k, v in parts.items()}
    if sort_by_query:
        order = np.argsort(arrays["query_keys"], kind="stable")
        features = features[order]
        arrays = {k: (None if v is None else v[order]) for k, v in arrays.items()}
    runs = QueryRuns(source.error_at, source.describe)
    runs.add(arrays["query_keys"], arrays["positions"], user_ids=arrays["user_ids"])
    offsets, query_ids, per_query = runs.finish()
    return RankingDataset(
        features=features,
        labels=arrays["labels"],
        query_offsets=offsets,
        query_ids=query_ids,
        user_ids=per_query.get("user_ids"),
        weights=arrays["weights"],
        doc_ids=arrays["doc_ids"],
        feature_names=source.feature_names,
    )


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------
def _roles_for(ds, query_column, label_column, doc_id_column, weight_column, user_column) -> ColumnRoles:
    names = ds.feature_names if ds.feature_names is not None else tuple(f"f{j + 1}" for j in range(ds.n_features))
    roles = ColumnRoles(
        query=query_column,
        label=label_column,
        features=tuple(names),
        doc_id=doc_id_column if ds.doc_ids is not None else None,
        weight=weight_column if ds.weights is not None else None,
        user=user_column if ds.user_ids is not None else None,
        unnamed=ds.feature_names is None,
    )
    columns = [roles.query, roles.label, *roles.features, roles.doc_id, roles.weight, roles.user]
    columns = [c for c in columns if c is not None]
    if len(set(columns)) != len(columns):
        dup = next(c for i, c in enumerate(columns) if c in columns[:i])
        raise LtrError(f"two columns would be named {dup!r}; rename the feature or pass another *_column name")
    return roles


def to_arrow(
    ds: RankingDataset,
    *,
    query_column: str = "qid",
    label_column: str = "label",
    doc_id_column: str = "doc_id",
    weight_column: str = "weight",
    user_column: str = "user",
    rows: slice | None = None,
):
    """The data set (or ``rows`` of it) as an Arrow table: query id, label, one column per feature
    (named ``ds.feature_names``, else ``f1..fF``), then doc id, weight and user when present; the
    roles go into the schema metadata, so :func:`load_parquet` reads the file back exactly."""
    import pyarrow as pa

    roles = _roles_for(ds, query_column, label_column, doc_id_column, weight_column, user_column)
    lo, hi, _ = (rows or slice(None)).indices(ds.n_items)
    query_of_row = np.searchsorted(ds.query_offsets, np.arange(lo, hi), side="right") - 1
    block = np.asarray(ds.features[lo:hi])
    columns = {roles.query: ds.query_ids[query_of_row], roles.label: ds.labels[lo:hi]}
    for j, name in enumerate(roles.features):
        columns[name] = np.ascontiguousarray(block[:, j])
    if roles.doc_id:
        columns[roles.doc_id] = ds.doc_ids[lo:hi]
    if roles.weight:
        columns[roles.weight] = ds.weights[lo:hi]
    if roles.user:
        columns[roles.user] = ds.user_ids[query_of_row]
    meta = {"query": roles.query, "label": roles.label, "features": list(roles.features), "unnamed_features": roles.unnamed,
            "doc_id": roles.doc_id, "weight": roles.weight, "user": roles.user}  # fmt: skip
    table = pa.table({k: pa.array(v) for k, v in columns.items()})
    return table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})


def to_frame(ds: RankingDataset, **columns):
    """The data set as a pandas data frame (the columns of :func:`to_arrow`; float32 features stay float32)."""
    return to_arrow(ds, **columns).to_pandas()


def to_parquet(ds: RankingDataset, path: str | os.PathLike, *, row_group_rows: int | None = None, **columns) -> None:
    """Write the data set as one Parquet file (atomically), in row groups written one at a time, so
    a memory-mapped store is written without loading its features. Columns as :func:`to_arrow`."""
    import pyarrow.parquet as pq

    step = row_group_rows or max(1, (64 << 20) // (4 * max(ds.n_features, 1)))
    first = to_arrow(ds, rows=slice(0, min(step, ds.n_items)), **columns)
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(str(tmp), first.schema) as writer:
            writer.write_table(first)
            for lo in range(step, ds.n_items, step):
                writer.write_table(to_arrow(ds, rows=slice(lo, min(lo + step, ds.n_items)), **columns))
