"""Reading the data file a command was given: one entry point for every command that takes data.

Commands call :func:`load_data_file` with the option the user typed (``--train``, ``--data``...) so
that an error names that option; the file's format is recognised here, in one place.
:func:`add_format_options` gives every data-reading command the same ``--zero-based`` and
``--query-file`` options, and :func:`format_options` turns them into the reader's keywords.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from ltr.checks import input_file
from ltr.errors import DataFormatError, LtrError

__all__ = ["load_data_file", "data_facts", "add_format_options", "format_options"]


def load_data_file(
    path: str | os.PathLike | None,
    option: str,
    n_features: int | None = None,
    *,
    zero_based: bool = False,
    query_file: str | os.PathLike | None = None,
):
    """Read the SVMlight/LETOR file given as ``--<option>``; ``None`` stays ``None``.

    ``n_features`` pads a sparse file to the training data's width (validation, test). Negative
    labels are read as 0 (:mod:`ltr.data.labels`) and a note on stderr says how many; a training
    file without any feature is refused here, before the validation file is blamed for it.
    ``zero_based`` and ``query_file`` are :func:`ltr.data.load_svmlight`'s (``--zero-based``,
    ``--query-file``).
    """
    if path is None:
        return None
    from ltr.data.svmlight import load_svmlight

    path = input_file(path, f"--{option}")
    if query_file is not None:
        query_file = input_file(query_file, f"--query-file (for --{option})")
    ds = load_svmlight(path, n_features=n_features, zero_based=zero_based, query_file=query_file)
    if ds.n_features == 0:
        raise DataFormatError(path, None, f"no features on any line (--{option} needs 'index:value' pairs after the qid)")
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
    """What a run summary records of a data file: its path and its size."""
    return {"path": str(path), "n_queries": int(ds.n_queries), "n_items": int(ds.n_items), "n_features": int(ds.n_features)}
