"""Load a script of experiments/ as a module, for the tests of its pure functions (statistics, reports,
option parsing): ``load_experiment("best_recipe_study")``. The module is registered in ``sys.modules``
under its name (dataclasses and pickling look it up there)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def load_experiment(name: str):
    """The module of ``experiments/NAME.py``, executed once per call."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
