"""Reading the data file a command was given: one entry point for every command that takes data.

Commands call :func:`load_data_file` with the option the user typed (``--train``, ``--data``...) so
that an error names that option; the file's format is recognised here, in one place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltr.errors import LtrError

__all__ = ["load_data_file", "data_facts"]


def load_data_file(path: str | os.PathLike | None, option: str, n_features: int | None = None):
    """Read the SVMlight/LETOR file given as ``--<option>``; ``None`` stays ``None``.

    ``n_features`` pads a sparse file to the training data's width (validation, test, prediction).
    """
    if path is None:
        return None
    from ltr.data.svmlight import load_svmlight

    if not Path(path).is_file():
        raise LtrError(f"--{option} {path}: file not found")
    return load_svmlight(path, n_features=n_features)


def data_facts(path: str | os.PathLike, ds) -> dict[str, Any]:
    """What a run summary records of a data file: its path and its size."""
    return {"path": str(path), "n_queries": int(ds.n_queries), "n_items": int(ds.n_items), "n_features": int(ds.n_features)}
