"""Seed ensembles: several scorers trained alike with different seeds, their scores averaged.

DASALC (Qin et al., "Are Neural Rankers still Outperformed by Gradient Boosted Decision Trees?",
ICLR 2021) averages the scores of models trained from different random seeds. An
:class:`EnsembleScorer` is one model: ``model.json`` lists its members' descriptions
(``{"type": "ensemble", "n_features": F, "members": [...]}``) and ``model.pt`` holds all their weights
(``members.<k>.<name>``), so :func:`ltr.train.models.save_model` / ``load_model`` treat it like any
scorer, without pickle.

:func:`fit_ensemble` trains the members one after the other: member k is built and trained with
seed ``seeds[k]`` (initial weights, batch order, dropout and input noise all follow it). Under a
process group (``ltr train --nproc N`` or torchrun) every rank calls it and each member is trained
data-parallel by :class:`~ltr.train.distributed.DistributedTrainer`, so N processes train the same
members as one.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from ltr.base.errors import LtrError
from ltr.train.scorers import _Scorer

__all__ = ["EnsembleScorer", "EnsembleFit", "fit_ensemble"]


class EnsembleScorer(_Scorer):
    """The mean of its members' scores: ``score = (1/M) sum_k member_k(x, mask)``."""

    kind = "ensemble"

    def __init__(self, members: Sequence[nn.Module]):
        members = list(members)
        if not members:
            raise LtrError("an ensemble needs at least one member")
        widths = {int(m.n_features) for m in members}
        if len(widths) != 1:
            raise LtrError(f"ensemble members take different feature counts: {sorted(widths)}")
        super().__init__(widths.pop())
        self.members = nn.ModuleList(members)
        names = {getattr(m, "feature_names", None) for m in members}
        self.feature_names = names.pop() if len(names) == 1 else None

    @property
    def listwise(self) -> bool:  # type: ignore[override]
        return any(getattr(m, "listwise", False) for m in self.members)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.stack([m(x, mask) for m in self.members]).mean(dim=0)

    def config(self) -> dict[str, Any]:
        cfg = {"type": "ensemble", "n_features": self.n_features, "members": [m.config() for m in self.members]}
        if self.feature_names is not None:
            cfg["feature_names"] = list(self.feature_names)
        return cfg


@dataclass
class EnsembleFit:
    """What :func:`fit_ensemble` returns: the ensemble, its members' fits and the ensemble's metrics."""

    model: EnsembleScorer
    members: list  # FitResult of each member, in seed order
    valid_metrics: dict[str, float]
    test_metrics: dict[str, float] | None
    wall_time_s: float


def _duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"1.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def fit_ensemble(make_model: Callable[[int], nn.Module], loss: nn.Module, config, train_ds, valid_ds, test_ds=None,
                 *, seeds: Sequence[int], member_config: Callable[[Any, int], Any] | None = None,
                 trainer_class: type | None = None) -> EnsembleFit:
    """Train one member per seed and average them.

    ``make_model(seed)`` builds an untrained member (called after the seed is set, so its initial
    weights follow it); ``config`` is the :class:`~ltr.train.config.TrainConfig` shared by the
    members, its ``seed`` replaced by each member's; ``member_config(config, k)`` may change it
    further per member (e.g. a log folder each). ``trainer_class`` trains each member
    (:class:`~ltr.train.trainer.Trainer` by default; ``DistributedTrainer`` under a process group,
    where every rank must call this function with the same arguments).
    """
    import time

    from ltr.runs.scoring import evaluate_scores
    from ltr.train.trainer import Trainer, predict_scores, seed_everything

    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise LtrError(f"an ensemble needs distinct seeds, got {seeds}")
    t0 = time.perf_counter()
    fits = []
    for k, seed in enumerate(seeds):
        cfg = dataclasses.replace(config, seed=seed)
        if member_config is not None:
            cfg = member_config(cfg, k)
        seed_everything(seed)
        trainer = (trainer_class or Trainer)(make_model(seed), loss, cfg)
        trainer.progress_label = f"member {k + 1}/{len(seeds)} (seed {seed}) epochs"  # which bar is which
        fits.append(trainer.fit(train_ds, valid_ds))
        left = len(seeds) - k - 1
        if cfg.progress and left:  # a long ensemble says early how long it will take
            took = time.perf_counter() - t0
            print(f"member {k + 1}/{len(seeds)} trained; about {_duration(took / (k + 1) * left)} more for the "
                  f"other {left}", file=sys.stderr)
    model = EnsembleScorer([f.model for f in fits]).eval()

    def judge(ds, where):
        scores = predict_scores(model, ds.features, query_offsets=ds.query_offsets, device=next(model.parameters()).device)
        if not np.all(np.isfinite(scores)):
            raise LtrError(f"the ensemble's {where} scores are not all finite")
        ev = evaluate_scores(scores, ds, config.metrics, config.preset, config.conventions, where=where)
        return {k: float(v) for k, v in ev.mean.items()}

    valid = judge(valid_ds, "validation")
    test = None if test_ds is None else judge(test_ds, "test")
    return EnsembleFit(model, fits, valid, test, time.perf_counter() - t0)
