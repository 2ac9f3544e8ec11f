"""Reading the data file a command was given: one entry point for every command that takes data.

Commands call :func:`load_data_file` with the option the user typed (``--train``, ``--data``...) so
that an error names that option; the format is recognised here, in one place (:func:`data_format`):

- a folder holding ``store.json``: a memory-mapped store written by ``ltr convert``
  (:func:`ltr.data.store.open_store`; the features stay on disk);
- a ``.parquet`` / ``.pq`` file, a file starting with Parquet's magic bytes, or a folder of Parquet
  files (partitioned or not): :func:`ltr.data.parquet.load_parquet`, with the column roles of
  :class:`DataOptions` (``--query-column``, ``--label-column``, ...);
- anything else: an SVMlight/LETOR text file (:func:`ltr.data.svmlight.load_svmlight`).

Commands add the column options with :func:`add_data_options` and read them back with
:func:`data_options`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ltr.errors import LtrError

__all__ = ["load_data_file", "data_facts", "data_format", "DataOptions", "add_data_options", "data_options"]


@dataclass(frozen=True)
class DataOptions:
    """Column roles for Parquet data (ignored for SVMlight files and stores, whose layout is fixed)."""

    query_column: str = "qid"
    label_column: str = "label"
    feature_columns: tuple[str, ...] | None = None
    doc_id_column: str | None = None
    weight_column: str | None = None
    sort_by_query: bool = False

    def parquet_kwargs(self, feature_names: Sequence[str] | None = None) -> dict[str, Any]:
        """Keyword arguments of :func:`~ltr.data.parquet.load_parquet`; ``feature_names`` (the
        training data's or the model's) picks the feature columns by name when none were given."""
        features = self.feature_columns if self.feature_columns is not None else feature_names
        return {
            "query_column": self.query_column, "label_column": self.label_column,
            "feature_columns": None if features is None else list(features),
            "doc_id_column": self.doc_id_column, "weight_column": self.weight_column, "sort_by_query": self.sort_by_query,
        }  # fmt: skip


def add_data_options(parser) -> None:
    """The options that say how to read Parquet data (one argument group, shared by every command)."""
    g = parser.add_argument_group("columnar data (Parquet files and folders)")
    g.add_argument("--query-column", default="qid", metavar="NAME", help="query id column; the rows of a query must be contiguous")
    g.add_argument("--label-column", default="label", metavar="NAME", help="relevance label column")
    g.add_argument("--feature-columns", default=None, metavar="A,B,...",
                   help="feature columns, in this order (default: every numeric column that is not the query, label, doc id or weight column, in file order)")
    g.add_argument("--doc-id-column", default=None, metavar="NAME", help="document id column (run files name documents by it)")
    g.add_argument("--weight-column", default=None, metavar="NAME", help="per-item weight column (passed to the loss)")
    g.add_argument("--sort-by-query", action="store_true", help="group each query's rows by a stable sort on the query id instead of refusing non-contiguous rows")


def data_options(args) -> DataOptions:
    """The :class:`DataOptions` of a parsed command line (defaults where the command lacks them)."""
    features = getattr(args, "feature_columns", None)
    if isinstance(features, str):
        features = tuple(c.strip() for c in features.split(",") if c.strip())
    return DataOptions(
        query_column=getattr(args, "query_column", "qid"),
        label_column=getattr(args, "label_column", "label"),
        feature_columns=features,
        doc_id_column=getattr(args, "doc_id_column", None),
        weight_column=getattr(args, "weight_column", None),
        sort_by_query=bool(getattr(args, "sort_by_query", False)),
    )


def data_format(path: str | os.PathLike) -> str:
    """``"store"``, ``"parquet"`` or ``"svmlight"`` (see the module docstring)."""
    from ltr.data.parquet import is_parquet
    from ltr.data.store import is_store

    if is_store(path):
        return "store"
    if is_parquet(path):
        return "parquet"
    return "svmlight"


def load_data_file(
    path: str | os.PathLike | None,
    option: str,
    n_features: int | None = None,
    options: DataOptions | None = None,
    *,
    feature_names: Sequence[str] | None = None,
):
    """Read the data given as ``--<option>`` in whichever format it is; ``None`` stays ``None``.

    ``n_features`` is the width the data must have (the training data's or the model's): a sparse
    SVMlight file is padded to it, a Parquet file or a store must have it. ``feature_names`` (the
    training data's or the model's, when known) selects a Parquet file's feature columns by name and
    must match a store's names.
    """
    if path is None:
        return None
    if not Path(path).exists():
        raise LtrError(f"--{option} {path}: file not found")
    options = options or DataOptions()
    kind = data_format(path)
    if kind == "store":
        from ltr.data.store import open_store

        ds = open_store(path)
    elif kind == "parquet":
        from ltr.data.parquet import load_parquet

        ds = load_parquet(path, **options.parquet_kwargs(feature_names))
    else:
        from ltr.data.svmlight import load_svmlight

        if Path(path).is_dir():
            raise LtrError(f"--{option} {path}: a folder that is neither a store (no store.json) nor holds .parquet files")
        ds = load_svmlight(path, n_features=n_features)
    if n_features is not None and ds.n_features != n_features:
        raise LtrError(f"--{option} {path} has {ds.n_features} features; {n_features} expected (as the training data or the model)")
    if feature_names is not None and ds.feature_names is not None and tuple(ds.feature_names) != tuple(feature_names):
        j = next(j for j, (a, b) in enumerate(zip(ds.feature_names, feature_names)) if a != b)
        raise LtrError(f"--{option} {path}: feature {j} is {ds.feature_names[j]!r}, where the training data or the model has {feature_names[j]!r}")
    return ds


def data_facts(path: str | os.PathLike, ds) -> dict[str, Any]:
    """What a run summary records of a data file: its path, its size and its feature names."""
    facts = {"path": str(path), "n_queries": int(ds.n_queries), "n_items": int(ds.n_items), "n_features": int(ds.n_features)}
    if getattr(ds, "feature_names", None) is not None:
        facts["feature_names"] = list(ds.feature_names)
    return facts
