"""allRank's own ``lambdaLoss`` function, loaded from its installed file, for the benchmarks.

allRank 1.4.3 pins torch<=1.8, so the benchmarks install it with ``pip install --no-deps allRank==1.4.3``.
Its package ``__init__`` then fails (it imports torchvision and gcsfs), so only
``allrank/models/losses/lambdaLoss.py`` is executed; the two constants it imports get allRank's values
(PADDED_Y_VALUE = -1, DEFAULT_EPS = 1e-10) from stand-in modules. The code that runs is allRank's.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

_LOADED: dict = {}


def load_allrank_lambdaloss():
    """``(lambdaLoss, description)``, or ``(None, reason)`` when allRank is not installed."""
    if "lambdaLoss" not in _LOADED:
        _LOADED["lambdaLoss"] = _load()
    return _LOADED["lambdaLoss"]


def _load():
    spec = importlib.util.find_spec("allrank")
    if spec is None or not spec.submodule_search_locations:
        return None, "allRank is not installed (pip install --no-deps allRank==1.4.3, see `make bench`)"
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "losses" / "lambdaLoss.py"
    if not path.exists():
        return None, f"allRank has no {path}"
    for name in ("allrank", "allrank.data", "allrank.models"):
        sys.modules.setdefault(name, types.ModuleType(name))
    loading = types.ModuleType("allrank.data.dataset_loading")
    loading.PADDED_Y_VALUE = -1
    sys.modules["allrank.data.dataset_loading"] = loading
    losses_pkg = types.ModuleType("allrank.models.losses")
    losses_pkg.DEFAULT_EPS = 1e-10
    sys.modules["allrank.models.losses"] = losses_pkg
    module_spec = importlib.util.spec_from_file_location("allrank.models.losses.lambdaLoss", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.lambdaLoss, f"allRank lambdaLoss from {path}"
