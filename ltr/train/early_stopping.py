"""The early-stopping state of a training run: best value, best epoch, best weights, patience.

One small object, so that the trainer (and a distributed trainer built on it) updates it in one
call per epoch and checkpoints it as plain tensors and numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["EarlyStopping"]

_STATE_KEYS = ("best_value", "best_epoch", "best_model", "best_metrics", "bad_epochs", "monitor")


@dataclass
class EarlyStopping:
    """Track the monitored validation value and decide when to stop.

    An epoch improves when its value beats the best so far by more than ``min_delta`` (above it when
    ``higher_is_better``, below it otherwise); a non-finite value never improves. The first epoch is
    always kept as the best one, so a run whose metric is NaN throughout still ends with weights.
    Training stops once ``patience`` epochs in a row did not improve (``patience=None``: never).

    ``monitor`` is the metric's short name until the first validation, then its stamped name.
    """

    monitor: str
    higher_is_better: bool = True
    min_delta: float = 0.0
    patience: int | None = None
    best_value: float = field(init=False)
    best_epoch: int = 0
    best_model: dict[str, torch.Tensor] | None = None
    best_metrics: dict[str, float] = field(default_factory=dict)
    bad_epochs: int = 0

    def __post_init__(self) -> None:
        self.best_value = -math.inf if self.higher_is_better else math.inf

    def improves(self, value: float) -> bool:
        """Whether ``value`` beats the best value by more than ``min_delta``."""
        if not math.isfinite(value):
            return False
        if self.higher_is_better:
            return value > self.best_value + self.min_delta
        return value < self.best_value - self.min_delta

    def update(self, epoch: int, value: float, metrics: dict[str, float], model: torch.nn.Module) -> bool:
        """Record epoch ``epoch``'s validation ``value``; keep a CPU copy of the weights when it is the
        best so far. Returns whether the epoch improved."""
        improved = self.improves(value)
        if improved or self.best_model is None:
            if math.isfinite(value):
                self.best_value = value
            self.best_epoch = epoch
            self.best_model = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            self.best_metrics = metrics
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return improved

    @property
    def should_stop(self) -> bool:
        return self.patience is not None and self.bad_epochs >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _STATE_KEYS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in _STATE_KEYS:
            setattr(self, key, state[key])
