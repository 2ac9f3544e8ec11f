"""The order in which an ablation's workers take its cells: longest first, so that no worker is left
with one long cell while the others sit idle (longest-processing-time-first scheduling, which is at
most 4/3 of the best possible finishing time; Graham, 1969).

A cell's cost is estimated before it runs, from what its configuration says:

    cost = rows(data set) x models trained (ensemble members x tuning candidates) x scorer factor

with the scorer factor 4 for the context-aware (attention) scorer, whose cost per item grows with the
list length, and 1 for the others and for GBDT engines. Rows: ``n_queries x mean_list_length`` of a
synthetic set, the byte size of the files of a file-based one (a proxy: rows are lines). Only the
order of the estimates matters; ties keep the grid order.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

__all__ = ["cell_cost", "longest_first"]

#: scorer type -> relative cost per row of one model
SCORER_FACTOR = {"attention": 4.0}


def _dataset_rows(spec) -> float:
    options = spec.options
    if spec.kind == "synthetic":
        return float(options.get("n_queries", 1000)) * float(options.get("mean_list_length", 120))
    paths = [options.get(k) for k in ("train", "path") if options.get(k)]
    total = 0.0
    for p in paths:
        try:
            total += sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p)) if os.path.isdir(p) else os.path.getsize(p)
        except OSError:
            total += 1.0
    return max(total, 1.0)


def _models_trained(method, budget: int) -> float:
    candidates = 1
    for values in (method.tune or {}).values():
        candidates *= max(1, len(values))
    return float(max(1, method.ensemble)) * float(min(candidates, max(1, budget)))


def cell_cost(cell, config, resolve_method) -> float:
    """The estimated cost of one cell (arbitrary units; see the module docstring)."""
    spec = next(d for d in config.datasets if d.name == cell.dataset)
    method = resolve_method(cell.method, config)
    factor = 1.0 if method.kind != "neural" else SCORER_FACTOR.get(str(method.model.get("type", "mlp")), 1.0)
    return _dataset_rows(spec) * _models_trained(method, int(config.tuning_budget)) * factor


def longest_first(cells: Sequence[Any], config, resolve_method) -> list[Any]:
    """``cells`` sorted by estimated cost, the most expensive first (stable: ties keep their order)."""
    costs = {c: cell_cost(c, config, resolve_method) for c in cells}
    return sorted(cells, key=lambda c: -costs[c])
