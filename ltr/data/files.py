"""Reading the data file a command was given: one entry point for every command that takes data.

Commands call :func:`load_data_file` with the option the user typed (``--train``, ``--data``...) so
that an error names that option; the format is recognised here, in one place (:func:`data_format`):

- a folder holding ``store.json``: a memory-mapped store written by ``ltr convert``
  (:func:`ltr.data.store.open_store`; the features stay on disk);
- a ``.parquet`` / ``.pq`` file, a file starting with Parquet's magic bytes, or a folder of Parquet
  files (partitioned or not): :func:`ltr.data.parquet.load_parquet`, with the column roles of
  :class:`DataOptions` (``--query-column``, ``--label-column``, ...);
- a ``.csv`` file (a header line, then one row per item): read with Arrow's CSV reader and the
  same column roles as Parquet (:func:`ltr.data.parquet.dataset_from_frame`);
- anything else: an SVMlight/LETOR text file (:func:`ltr.data.svmlight.load_svmlight`).

Scoring needs no labels: with ``DataOptions(labels="optional")`` a Parquet or CSV table without the
label column is read with placeholder labels 0 and :func:`is_labelled` is False (an SVMlight line
always starts with its label field, which scoring ignores).

Commands add the column options with :func:`add_data_options` and read them back with
:func:`data_options`.

:func:`add_format_options` gives every data-reading command the same ``--zero-based`` and
``--query-file`` options (SVMlight), and :func:`format_options` turns them into the reader's keywords.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ltr.base.checks import input_file, input_folder
from ltr.base.errors import DataFormatError, LtrError

__all__ = ["load_data_file", "check_loaded", "data_facts", "data_format", "DataOptions", "add_data_options", "data_options",
           "add_format_options", "format_options", "is_labelled"]


@dataclass(frozen=True)
class DataOptions:
    """Column roles for Parquet data (ignored for SVMlight files and stores, whose layout is fixed)."""

    query_column: str = "qid"
    label_column: str = "label"
    feature_columns: tuple[str, ...] | None = None
    doc_id_column: str | None = None
    weight_column: str | None = None
    sort_by_query: bool = False
    labels: str = "required"  # "optional": a table without the label column is read for scoring

    def parquet_kwargs(self, feature_names: Sequence[str] | None = None) -> dict[str, Any]:
        """Keyword arguments of :func:`~ltr.data.parquet.load_parquet`; ``feature_names`` (the
        training data's or the model's) picks the feature columns by name when none were given."""
        features = self.feature_columns if self.feature_columns is not None else feature_names
        return {
            "query_column": self.query_column, "label_column": self.label_column,
            "feature_columns": None if features is None else list(features),
            "doc_id_column": self.doc_id_column, "weight_column": self.weight_column, "sort_by_query": self.sort_by_query,
            "labels": self.labels,
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
        if not features:
            raise LtrError("--feature-columns: give the feature column names, separated by commas (or leave the option out)")
    return DataOptions(
        query_column=getattr(args, "query_column", "qid"),
        label_column=getattr(args, "label_column", "label"),
        feature_columns=features,
        doc_id_column=getattr(args, "doc_id_column", None),
        weight_column=getattr(args, "weight_column", None),
        sort_by_query=bool(getattr(args, "sort_by_query", False)),
    )


def is_labelled(ds) -> bool:
    """False for a data set read without its labels (``labels="optional"``, no label column), whose
    labels are placeholders: nothing may be measured on it."""
    return bool(getattr(ds, "meta", {}).get("labelled", True))


def data_format(path: str | os.PathLike) -> str:
    """``"store"``, ``"parquet"``, ``"csv"`` or ``"svmlight"`` (see the module docstring)."""
    from ltr.data.parquet import is_parquet
    from ltr.data.store import is_store

    if is_store(path):
        return "store"
    if is_parquet(path):
        return "parquet"
    if Path(path).suffix.lower() == ".csv" and not Path(path).is_dir():
        return "csv"
    return "svmlight"


def load_csv(path: str | os.PathLike, options: DataOptions, feature_names: Sequence[str] | None = None):
    """A CSV file with a header line, read by Arrow's CSV reader, with the column roles of Parquet."""
    from pyarrow import ArrowInvalid, csv

    from ltr.data.parquet import dataset_from_frame

    kwargs = options.parquet_kwargs(feature_names)
    types = {kwargs["doc_id_column"]: "string"} if kwargs["doc_id_column"] else {}
    try:  # document ids stay text ("007" is not 7); query ids are numbers or text, as Arrow infers them
        table = csv.read_csv(str(path), convert_options=csv.ConvertOptions(column_types=types))
    except ArrowInvalid as exc:
        raise LtrError(f"{path}: not a CSV file with a header line Arrow can read ({' '.join(str(exc).split())[:200]})") from None
    if table.num_rows == 0:
        raise DataFormatError(path, None, "no rows (a header line only)")
    ds = dataset_from_frame(table, name=str(path), **kwargs)
    ds.meta["format"] = "csv"
    return ds


def load_data_file(
    path: str | os.PathLike | None,
    option: str,
    n_features: int | None = None,
    options: DataOptions | None = None,
    *,
    feature_names: Sequence[str] | None = None,
    zero_based: bool = False,
    query_file: str | os.PathLike | None = None,
):
    """Read the data given as ``--<option>`` in whichever format it is; ``None`` stays ``None``.

    ``n_features`` is the width the data must have (the training data's or the model's): a sparse
    SVMlight file is padded to it, a Parquet file or a store must have it. ``feature_names`` (the
    training data's or the model's, when known) selects a Parquet file's feature columns by name and
    must match a store's names. ``zero_based`` and ``query_file`` are
    :func:`ltr.data.load_svmlight`'s (``--zero-based``, ``--query-file``). Negative labels are read as
    0 (:mod:`ltr.data.labels`) and a note on stderr says how many; a training file without any
    feature is refused here, before the validation file is blamed for it.
    """
    if path is None:
        return None
    options = options or DataOptions()
    if Path(os.path.expanduser(str(path))).is_dir():
        path = input_folder(path, f"--{option}")
        kind = data_format(path)
        if kind == "svmlight":
            raise LtrError(f"--{option} {path}: is a folder, but neither a store written by ltr convert (no store.json) nor a folder of .parquet files")
    else:
        path = input_file(path, f"--{option}")
        kind = data_format(path)
    if kind == "store":
        from ltr.data.store import open_store

        ds = open_store(path)
    elif kind == "parquet":
        from ltr.data.parquet import load_parquet

        ds = load_parquet(path, **options.parquet_kwargs(feature_names))
    elif kind == "csv":
        ds = load_csv(path, options, feature_names)
    else:
        from ltr.data.svmlight import load_svmlight

        if query_file is not None:
            query_file = input_file(query_file, f"--query-file (for --{option})")
        ds = load_svmlight(path, n_features=n_features, zero_based=zero_based, query_file=query_file)
    return check_loaded(ds, path, option, n_features, feature_names)


def check_loaded(ds, path, option: str, n_features: int | None = None, feature_names: Sequence[str] | None = None):
    """The checks of :func:`load_data_file` on a data set read from ``path`` (in memory or streamed,
    :mod:`ltr.data.streamed`): some feature, the expected width and names; a note on stderr on
    negative labels read as 0. Returns ``ds``."""
    if ds.n_features == 0:
        raise DataFormatError(path, None, f"no features on any line (--{option} needs 'index:value' pairs after the qid)")
    if n_features is not None and ds.n_features != n_features:
        raise LtrError(f"--{option} {path} has {ds.n_features} features; {n_features} expected (as the training data or the model)")
    if feature_names is not None and ds.feature_names is not None and tuple(ds.feature_names) != tuple(feature_names):
        j = next(j for j, (a, b) in enumerate(zip(ds.feature_names, feature_names)) if a != b)
        raise LtrError(f"--{option} {path}: feature {j} is {ds.feature_names[j]!r}, where the training data or the model has {feature_names[j]!r}")
    changed = int(ds.meta.get("negative_labels", 0))
    if changed:
        print(f"note: --{option} {path}: {changed} negative label(s) read as 0 (judged non-relevant)", file=sys.stderr)
    return ds


def add_format_options(parser, data_options: Sequence[str] = ("data",)) -> None:
    """Add ``--zero-based`` and ``--query-file`` to a command that reads the files ``data_options``.

    With one data option ``--query-file FILE`` names its group-size file; with several it takes
    ``OPTION=FILE`` and may be repeated (``--query-file train=train.grp --query-file valid=valid.grp``).
    """
    parser.add_argument("--zero-based", action="store_true",
                        help="feature indices in the data files start at 0 (default: 1, as in LETOR files)")
    files = ", ".join(f"--{o}" for o in data_options)
    if len(data_options) == 1:
        parser.add_argument("--query-file", default=None, metavar="FILE",
                            help=f"group sizes of {files}, one per line, for a file without qid "
                            "(default: FILE.query beside the data file when it exists)")
    else:
        parser.add_argument("--query-file", action="append", default=None, metavar="OPTION=FILE",
                            help=f"group sizes of one of {files}, one per line, for a file without qid, e.g. "
                            f"--query-file {data_options[0]}=FILE; repeat for each file "
                            "(default: FILE.query beside each data file when it exists)")


def format_options(args, option: str, data_options: Sequence[str] = ("data",)) -> dict[str, Any]:
    """``zero_based`` and ``query_file`` keywords for reading ``--<option>`` from parsed ``args``.

    >>> from types import SimpleNamespace
    >>> args = SimpleNamespace(zero_based=True, query_file=["valid=v.grp"])
    >>> format_options(args, "valid", ("train", "valid")), format_options(args, "train", ("train", "valid"))
    ({'zero_based': True, 'query_file': 'v.grp'}, {'zero_based': True, 'query_file': None})
    """
    zero_based = bool(getattr(args, "zero_based", False))
    given = getattr(args, "query_file", None)
    if given is None or isinstance(given, str):
        return {"zero_based": zero_based, "query_file": given if option == data_options[0] else None}
    files: dict[str, str] = {}
    for item in given:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or key not in data_options or not value:
            choices = ", ".join(f"{o}=FILE" for o in data_options)
            raise LtrError(f"--query-file {item!r}: expected one of {choices}")
        files[key] = value
    return {"zero_based": zero_based, "query_file": files.get(option)}


def data_facts(path: str | os.PathLike, ds) -> dict[str, Any]:
    """What a run summary records of a data file: its path, its size and its feature names."""
    facts = {"path": str(path), "n_queries": int(ds.n_queries), "n_items": int(ds.n_items), "n_features": int(ds.n_features)}
    if getattr(ds, "feature_names", None) is not None:
        facts["feature_names"] = list(ds.feature_names)
    return facts
