"""Reading the data file a command was given: one entry point for every command that takes data.

Commands call :func:`load_data_file` with the option the user typed (``--train``, ``--data``...) so
that an error names that option; the file's format is recognised here, in one place.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ltr.checks import input_file
from ltr.errors import DataFormatError

__all__ = ["load_data_file", "data_facts"]


def load_data_file(path: str | os.PathLike | None, option: str, n_features: int | None = None):
    """Read the SVMlight/LETOR file given as ``--<option>``; ``None`` stays ``None``.

    ``n_features`` pads a sparse file to the training data's width (validation, test). Negative
    labels are read as 0 (:mod:`ltr.data.labels`) and a note on stderr says how many; a training
    file without any feature is refused here, before the validation file is blamed for it.
    """
    if path is None:
        return None
    from ltr.data.svmlight import load_svmlight

    path = input_file(path, f"--{option}")
    ds = load_svmlight(path, n_features=n_features)
    if ds.n_features == 0:
        raise DataFormatError(path, None, f"no features on any line (--{option} needs 'index:value' pairs after the qid)")
    changed = int(ds.meta.get("negative_labels", 0))
    if changed:
        print(f"note: --{option} {path}: {changed} negative label(s) read as 0 (judged non-relevant)", file=sys.stderr)
    return ds


def data_facts(path: str | os.PathLike, ds) -> dict[str, Any]:
    """What a run summary records of a data file: its path and its size."""
    return {"path": str(path), "n_queries": int(ds.n_queries), "n_items": int(ds.n_items), "n_features": int(ds.n_features)}
