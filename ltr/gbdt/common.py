"""What the GBDT engines share below their dispatcher (:mod:`ltr.gbdt.engines`): query ids, label
checks, thread counts, refused parameters, and the toolkit's early stopping (:class:`ValidationMonitor`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["query_ids", "checked_labels", "engine_threads", "refuse_keys", "ValidationMonitor", "progress_bar",
           "model_folder_file"]


def query_ids(ds) -> np.ndarray:
    """[N] the position of each row's query (0..Q-1), the ``qid`` / ``group_id`` the libraries take."""
    offsets = np.asarray(ds.query_offsets, dtype=np.int64)
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def checked_labels(ds, where: str) -> np.ndarray:
    """The labels [N] as float64, or an :class:`LtrError` naming the first negative or non-finite one."""
    y = np.asarray(ds.labels, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(y) | (y < 0))
    if bad.size:
        i = int(bad[0])
        raise LtrError(f"{where}: the GBDT engines need finite, non-negative labels; row {i} has label "
                       f"{float(y[i])} ({bad.size} such rows). Shift or clip the labels first.")
    return y


def engine_threads(threads: int | None) -> int | None:
    """The thread count to give an engine: ``threads``, else ``LTR_THREADS``, else None (its default)."""
    from ltr.base.threads import configured_threads

    return int(threads) if threads is not None else configured_threads()


def refuse_keys(params: dict[str, Any], keys: dict[str, str], engine: str) -> None:
    """Refuse parameters the toolkit sets itself; ``keys`` maps each to what to use instead."""
    for key, instead in keys.items():
        if key in params:
            raise LtrError(f"{engine} parameter {key!r} is set by the toolkit: use {instead}")


class ValidationMonitor:
    """The toolkit's validation ``ndcg@k`` after each round, and the early-stopping rule.

    ``update(scores)`` (or ``record(value)`` of a value computed elsewhere) appends the next round
    (1-based) and returns True when training should stop: ``rounds`` rounds without a value above the
    best (None or 0: never). ``best_round`` is the first round with the best value; ``curve`` holds
    every round's value; ``name`` is the metric's stamped name.
    """

    def __init__(self, valid_ds, monitor_k: int = 10, gain: Any = "exp2", rounds: int | None = 50):
        from types import SimpleNamespace

        self.valid, self.rounds, self.gain = valid_ds, (int(rounds) if rounds else None), gain
        self.metric = f"ndcg@{int(monitor_k)}"
        self.curve: list[float] = []
        self.best_value, self.best_round = -np.inf, 0
        probe = SimpleNamespace(labels=np.array([1.0, 0.0]), query_offsets=np.array([0, 2]))
        self.name = self._evaluate(np.zeros(2), probe)[0]

    def _evaluate(self, scores, ds) -> tuple[str, float]:
        from ltr.runs.scoring import evaluate_scores

        ev = evaluate_scores(np.asarray(scores, dtype=np.float64), ds, [self.metric], None, {"gain": self.gain})
        return ev.names[self.metric], float(ev.mean[ev.names[self.metric]])

    def update(self, scores: np.ndarray) -> bool:
        return self.record(self._evaluate(scores, self.valid)[1])

    def record(self, value: float) -> bool:
        self.curve.append(float(value))
        if value > self.best_value:  # NaN (no query with a relevant item) never improves
            self.best_value, self.best_round = float(value), len(self.curve)
        return self.rounds is not None and len(self.curve) - max(self.best_round, 1) >= self.rounds


def rounds_note(metric: str, value: float, best: float, best_round: int) -> str:
    """A rounds bar's note after a round: the validation value and the best so far (1-based round), as the
    neural trainers' epoch bars show theirs."""
    return f"valid {metric} {value:.4f}, best {best:.4f} at round {best_round}"


def progress_bar(total: int, enabled: bool):
    """A tqdm bar over boosting rounds, or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=int(total), desc="boosting rounds")


def model_folder_file(folder, engine: str, default_file: str, label: str):
    """``(model file, model.json)`` of an ``engine`` model folder, checked: ``model.json`` says this
    engine, the file it names lies inside the folder (a name such as ``../../etc/passwd`` or an absolute
    path is refused) and exists, and ``n_features`` is a positive integer. ``label`` names the engine in
    the message about a missing file."""
    from pathlib import Path

    from ltr.base.checks import input_file, read_json_object

    folder = Path(folder)
    where = folder / "model.json"
    if not where.exists():
        raise LtrError(f"{folder}: no readable model.json (not a model folder written by ltr)")
    meta = read_json_object(where)
    if meta.get("type") != engine:
        raise LtrError(f"{folder}: model.json describes a {meta.get('type')!r} model, not {engine}")
    name = meta.get("file", default_file)
    if not isinstance(name, str) or not name:
        raise LtrError(f"{where}: file must be a file name, got {name!r}")
    path = (folder / name).resolve()
    if Path(name).is_absolute() or path.parent != folder.resolve():
        raise LtrError(f"{where}: file {name!r} must name a file inside the model folder")
    n = meta.get("n_features")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LtrError(f"{where}: n_features must be a positive integer, got {n!r}")
    if not path.exists():
        raise LtrError(f"{path}: {label} model file missing")
    return input_file(path), meta
