"""Training checkpoints that are written atomically and load without running code.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, saved with ``torch.save``
into a temporary file that is renamed over the destination (:func:`ltr.base.io_utils.atomic_path`), and
read back with ``torch.load(weights_only=True)``, whose unpickler refuses arbitrary objects. Random
number generator states are therefore stored as tensors and lists, never as numpy objects.

>>> import random, tempfile, torch
>>> state = rng_state(); a = (torch.rand(1).item(), random.random())
>>> set_rng_state(state); (torch.rand(1).item(), random.random()) == a
True
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_path

__all__ = ["rng_state", "set_rng_state", "save_checkpoint", "load_checkpoint", "CHECKPOINT_NAME"]

CHECKPOINT_NAME = "last.pt"


def rng_state() -> dict[str, Any]:
    """Snapshot of torch (CPU and CUDA), numpy's global and python's ``random`` generators."""
    np_name, np_keys, np_pos, np_has_gauss, np_cached = np.random.get_state()
    py_version, py_internal, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "name": str(np_name),
            "keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "cached_gaussian": float(np_cached),
        },
        "python": {
            "version": int(py_version),
            "internal": torch.tensor(py_internal, dtype=torch.int64),
            "gauss_next": py_gauss,
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = [s for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured."""
    torch.set_rng_state(state["torch"].cpu())
    n = state["numpy"]
    np.random.set_state(
        (n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    p = state["python"]
    random.setstate((p["version"], tuple(int(v) for v in p["internal"].tolist()), p["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def save_torch(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save(obj)`` into memory, then written atomically: a failed write (a full disk, a
    file-size limit) is the operating system's :class:`OSError` naming ``path``, where torch's own
    file writer turns it into a RuntimeError without errno ("enforce fail at inline_container.cc")."""
    import io

    path = Path(path)
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(buffer.getbuffer())
    return path


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """``torch.save(state)`` atomically: the old checkpoint stays until the new one is complete."""
    return save_torch(state, path)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``torch.load(weights_only=True)``; a bad file is an :class:`LtrError`."""
    from ltr.base.checks import input_file

    path = Path(path)
    if not path.exists():
        raise LtrError(f"{path}: checkpoint not found")
    path = input_file(path, "checkpoint")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # unpickling errors come in many types; the message is what matters
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LtrError(f"{path}: cannot load checkpoint safely ({first[:200]}); delete it to start afresh") from None
    if not isinstance(state, dict):
        raise LtrError(f"{path}: not an ltr checkpoint (it holds a {type(state).__name__}); delete it to start afresh")
    return state
