"""Run folders that appear whole or not at all, and the facts every ``summary.json`` records.

:func:`run_folder` yields a hidden temporary folder beside the destination (``.NAME.partial-PID``);
everything is written there, and only when the block finishes without an error is the folder
renamed onto the destination (``os.replace`` of a directory: atomic on POSIX). On an error the
temporary folder is deleted, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
from pathlib import Path
from typing import Iterator

from ltr.errors import LtrError

__all__ = ["run_folder", "versions", "print_run_metrics"]


@contextlib.contextmanager
def run_folder(dest: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``dest`` on success (see the module docstring).

    ``dest`` must not exist (or be an empty folder) unless ``overwrite`` is true; the old folder is
    then replaced only once the new one is complete.
    """
    dest = Path(dest)
    if dest.exists() and not overwrite:
        if not dest.is_dir() or any(dest.iterdir()):
            raise LtrError(f"{dest} already exists; choose another --out or pass --force to replace it")
    if dest.exists() and not dest.is_dir():
        raise LtrError(f"{dest} exists and is not a folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{os.getpid()}"
        os.replace(dest, old)
    os.replace(tmp, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def versions() -> dict[str, str]:
    """Versions of python, the numeric libraries and ltr, for summaries."""
    import numpy
    import torch

    import ltr

    out = {"python": platform.python_version(), "numpy": numpy.__version__, "torch": torch.__version__, "ltr": ltr.__version__}
    try:
        import lightgbm

        out["lightgbm"] = lightgbm.__version__
    except ImportError:  # pragma: no cover - lightgbm is a runtime dependency
        out["lightgbm"] = "absent"
    out["platform"] = platform.platform()
    return out


def print_run_metrics(out: Path, metrics_out: dict[str, dict[str, float]], best_epoch: int | None) -> None:
    """Print where a run folder is and its metrics, one ``split<TAB>name<TAB>value`` line each."""
    where = f" (best epoch {best_epoch})" if best_epoch else ""
    print(f"run folder: {out}{where}")
    for split, values in metrics_out.items():
        for name, value in values.items():
            print(f"{split}\t{name}\t{value:.6f}")
