"""Run folders that appear whole or not at all, are marked as ltr's, and the facts every ``summary.json`` records.

:func:`run_folder` yields a hidden temporary folder beside the destination (``.NAME.partial-PID``);
everything is written there, and only when the block finishes without an error is the folder
renamed onto the destination (``os.replace`` of a directory: atomic on POSIX). On an error the
temporary folder is deleted, so a failed run leaves nothing behind.

Marking. Every folder ltr makes this way holds a small :data:`RUN_MARK` file. ``--force`` replaces an
existing destination only when it carries that mark: a folder holding the user's data (or anything
else) is never deleted, and neither is the current folder (``--out .``) or one above it, nor a
folder holding one of the command's inputs. :func:`claim_folder` marks the output folders that
commands fill file by file (``ltr calibrate``, ``ltr ablate``) the same way.

Leftovers. A run that was killed leaves its ``.NAME.partial-PID`` folder; the next run into the same
destination removes those whose process is gone, and says so (an ``.NAME.old-PID`` folder, the
previous run caught mid-replacement, is put back when the destination is missing).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ltr.base import checks
from ltr.base.errors import LtrError

__all__ = ["run_folder", "check_destination", "claim_folder", "clean_stale_partials", "RUN_MARK",
           "versions", "print_run_metrics"]

RUN_MARK = checks.RUN_MARK


def _mark(folder: Path, kind: str) -> None:
    from ltr import __version__

    (folder / RUN_MARK).write_text(json.dumps({"made_by": "ltr", "kind": kind, "ltr": __version__}) + "\n")


def _marked(folder: Path, kind: str | None = None) -> bool:
    try:
        mark = json.loads((folder / RUN_MARK).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(mark, dict) and mark.get("made_by") == "ltr" and (kind is None or mark.get("kind") == kind)


def check_destination(dest: str | os.PathLike, *, overwrite: bool = False, option: str = "--out",
                      inputs: Iterable[tuple[str, Any]] = ()) -> Path:
    """Refuse, before any work, a run-folder destination that would fail or destroy something.

    ``inputs``: ``(option, path)`` pairs of the command's input files, which must not lie inside it.
    """
    dest = checks.output_folder(dest, option, inputs=inputs)
    if dest.is_dir() and any(dest.iterdir()):
        # the hint names what works: --force only where --force would replace the folder
        if not _marked(dest):
            raise LtrError(f"{option} {dest} already exists and is not a run folder made by ltr (it has no {RUN_MARK}), "
                           f"which --force never replaces: choose another {option}, or move the folder away yourself")
        if not overwrite:
            raise LtrError(f"{option} {dest} already exists (a run folder made by ltr); choose another {option} or "
                           "pass --force to replace it")
    return dest


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process: it is alive
    return True


def clean_stale_partials(dest: str | os.PathLike) -> list[Path]:
    """Remove the ``.NAME.partial-PID`` (and ``.NAME.old-PID``) folders of ``dest`` whose process is gone.

    Each removal is reported on stderr. A stale ``.old-PID`` folder is the previous run caught between
    the two renames; it is moved back onto ``dest`` when ``dest`` is missing. Returns what was removed.
    """
    dest = Path(dest)
    pattern = re.compile(re.escape(f".{dest.name}.") + r"(partial|old)-(\d+)$")
    removed = []
    try:
        siblings = list(dest.parent.iterdir())
    except OSError:
        return removed
    for p in siblings:
        m = pattern.match(p.name)
        if not m or not p.is_dir() or _pid_alive(int(m.group(2))):
            continue
        if m.group(1) == "old" and not dest.exists():
            os.replace(p, dest)
            print(f"note: restored {dest} from {p.name}, left by run process {m.group(2)}, which is gone", file=sys.stderr)
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
        print(f"note: removed {p}, left by run process {m.group(2)}, which is gone", file=sys.stderr)
    return removed


@contextlib.contextmanager
def run_folder(dest: str | os.PathLike, *, overwrite: bool = False, kind: str = "run", option: str = "--out",
               inputs: Iterable[tuple[str, Any]] = ()) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``dest`` on success (see the module docstring).

    ``dest`` must not exist (or be an empty folder) unless ``overwrite`` is true, and then it must be
    a run folder made by ltr; the old folder is replaced only once the new one is complete.
    """
    inputs = list(inputs)
    dest = check_destination(dest, overwrite=overwrite, option=option, inputs=inputs)
    dest.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(dest)
    tmp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        _mark(tmp, kind)
        yield tmp
        # the destination may have appeared while the run worked: check it again before replacing
        check_destination(dest, overwrite=overwrite, option=option, inputs=inputs)
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


def claim_folder(dest: str | os.PathLike, kind: str, *, option: str = "--out",
                 inputs: Iterable[tuple[str, Any]] = (), legacy=None, create: bool = True) -> Path:
    """Make (or reuse) an output folder that a command fills file by file, marked with ``kind``.

    A new or empty folder is created and marked; a folder already marked with ``kind`` is reused (a
    re-run, a resumed ablation); ``legacy(folder) -> bool`` may accept folders of older versions,
    which are marked then. Anything else is refused: the command would overwrite someone's files.
    ``create=False`` only checks (call it before the work, and again with ``create=True`` to write).
    """
    dest = checks.output_folder(dest, option, inputs=inputs)
    if dest.is_dir() and any(dest.iterdir()) and not _marked(dest, kind):
        if legacy is None or not legacy(dest):
            raise LtrError(f"{option} {dest} holds files that `ltr {kind}` did not write (no {RUN_MARK} of "
                           f"its kind); choose a new or empty folder for the outputs")
    if not create:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    if not _marked(dest, kind):
        _mark(dest, kind)
    return dest


def versions() -> dict[str, str]:
    """Versions of python, the numeric libraries and ltr, for summaries."""
    import importlib.metadata

    import numpy

    import ltr

    out = {"python": platform.python_version(), "numpy": numpy.__version__}
    # the installed distributions' versions, without importing them (torch: about 3 s; LightGBM pulls
    # scikit-learn and SciPy): a GBDT run never needs torch
    for name in ("torch", "lightgbm"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - both are runtime dependencies
            out[name] = "absent"
    out["ltr"] = ltr.__version__
    out["platform"] = platform.platform()
    return out


def print_run_metrics(out: Path, metrics_out: dict[str, dict[str, float]], best: int | Sequence[int] | None,
                      unit: str = "epoch") -> None:
    """Print where a run folder is, its best ``unit`` (epoch, or a GBDT's boosting round; a list: one per
    ensemble member, in member order) and its metrics, one ``split<TAB>name<TAB>value`` line each.

    >>> print_run_metrics(Path("runs/x"), {"valid": {"ndcg@10": 0.5}}, [4, 7, 3])  # doctest: +NORMALIZE_WHITESPACE
    run folder: runs/x (best epochs of the 3 members: 4, 7, 3)
    valid	ndcg@10	0.500000
    """
    if isinstance(best, (list, tuple)):
        where = f" (best {unit}s of the {len(best)} members: {', '.join(str(b) for b in best)})"
    else:
        where = f" (best {unit} {best})" if best else ""
    print(f"run folder: {out}{where}")
    for split, values in metrics_out.items():
        for name, value in values.items():
            print(f"{split}\t{name}\t{value:.6f}")
