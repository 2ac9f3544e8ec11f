"""Training configuration: the :class:`TrainConfig` dataclass and TOML loading.

A TOML file for ``ltr train`` / ``ltr gbdt`` has one table per part; every key is checked, and an
unknown key is an error that names it (a typo must not silently fall back to a default)::

    [train]                 # TrainConfig fields
    epochs = 50
    lr = 0.001
    metrics = ["ndcg@10", "map"]

    [model]                 # ltr train: MLPScorer / LinearScorer arguments
    type = "mlp"
    hidden = [128, 64]
    normalize = "standard"  # none | standard | log1p | log1p_standard (fitted on the training split)

    [loss]                  # ltr train: losses.get_loss(name, **rest)
    name = "lambdarank"
    sigma = 1.0

    [lightgbm]              # ltr gbdt: LightGBM parameters, passed through
    num_leaves = 31

    [gbdt]                  # ltr gbdt: train_lightgbm keyword arguments
    num_boost_round = 500
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import tomllib

from ltr.base import checks
from ltr.base.checks import COUNT, SEED, boolean, integer, list_of, number, table, text
from ltr.base.errors import LtrError

__all__ = ["DEFAULT_METRICS", "QUERY_NORMS", "QUERY_NORM_CHOICES", "TrainConfig", "auto_batch_size", "AUTO_BATCH", "load_toml", "check_keys", "read_toml",
           "TRAIN_RULES", "MODEL_RULES", "LOSS_RULES", "GBDT_RULES", "LOSS_NAMES"]

#: the names of ``losses.LOSSES`` in its order, without importing torch (the commands' help lists them);
#: tests/test_cli_frictions.py holds it equal to the registry, to ``ltr train --help`` and to README's count
LOSS_NAMES = ("ranknet", "hinge", "lambdarank", "ndcg_loss1", "ndcg_loss2", "ndcg_loss2pp", "arp_loss1", "arp_loss2",
              "listnet", "softmax", "listmle", "approx_ndcg", "neural_ndcg", "neural_sort_ce", "bce", "mse")

DEFAULT_METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "mrr")

# The rules of every value of the tables, shared by the TOML readers, the command-line options
# (``type=TRAIN_RULES["lr"]``) and the Python API (:meth:`TrainConfig.__post_init__`).
_METRIC_NAMES = list_of(text(), min_len=1)
TRAIN_RULES: dict[str, checks.Rule] = {
    "epochs": COUNT, "batch_size": integer(min=1, words=("auto",)), "lr": number(above=0), "weight_decay": number(min=0),
    "patience": integer(min=1, optional=True), "min_delta": number(min=0), "monitor": text(),
    "metrics": _METRIC_NAMES, "preset": text(optional=True), "conventions": table(), "seed": SEED,
    "device": text(), "progress": boolean(), "log_dir": text(optional=True), "checkpoint_dir": text(optional=True),
    "resume": boolean(), "grad_clip": number(above=0, optional=True), "bucket_size": integer(min=1, optional=True),
    "eval_rows": COUNT, "histograms": boolean(),
}
ACTIVATION_NAMES = ("relu", "leaky_relu", "gelu", "elu", "silu", "tanh", "sigmoid")  # = ltr.train.models.ACTIVATIONS
NORMALIZE_CHOICES = ("auto", "none", "standard", "log1p", "log1p_standard")
#: the scorer's per-query normalisation (ltr.train.scorers.query_normalize): none; zscore / minmax: each feature
#: replaced by its value normalised within the list; append_zscore / append_minmax: the list-normalised values
#: appended to the (transformed) features (input width 2F)
QUERY_NORMS = ("none", "zscore", "minmax", "append_zscore", "append_minmax")
#: what a configuration may say: one of QUERY_NORMS, or "auto", chosen from the training data (ltr.train.settings)
QUERY_NORM_CHOICES = ("auto", *QUERY_NORMS)
MAX_WIDTH = 1 << 16  # a hidden layer wider than this is a typo, and would take gigabytes
MODEL_TYPE_NAMES = ("mlp", "linear", "attention")
MODEL_RULES: dict[str, checks.Rule] = {
    "type": text(choices=MODEL_TYPE_NAMES), "hidden": list_of(integer(min=1, max=MAX_WIDTH), min_len=1),
    "activation": text(choices=ACTIVATION_NAMES), "dropout": number(min=0, below=1), "batch_norm": boolean(),
    "normalize": text(choices=NORMALIZE_CHOICES), "query_norm": text(choices=QUERY_NORM_CHOICES),
    # the context-aware scorer, input noise (every scorer) and seed ensembles
    "width": integer(min=1, max=MAX_WIDTH), "heads": integer(min=1, max=1024), "layers": integer(min=1, max=256),
    "input_noise": number(min=0), "ensemble": integer(min=1, max=1000),
}
# [loss]: name, and the keyword arguments of the losses (others go to losses.get_loss, which names
# any it does not take).
LOSS_RULES: dict[str, checks.Rule] = {
    "name": text(), "sigma": number(above=0), "k": integer(min=1, optional=True), "mu": number(min=0),
    "gain": text(choices=("exp2", "linear")), "metric": text(choices=("ndcg", "mrr", "ap")),
    "threshold": number(), "target": text(choices=("softmax", "linear")), "discount": text(choices=("log2",)),
    "reduction": text(choices=("mean", "sum", "pair_mean", "weight_mean")),
    "temperature": number(above=0), "margin": number(min=0), "k_method": text(choices=("truncate", "jagerman")),
    "pair_weight": text(choices=("label_diff",)), "ties": text(choices=("score", "input")),
    "sinkhorn_iters": integer(min=1), "tol": number(min=0),
}
GBDT_RULES: dict[str, checks.Rule] = {
    "gain": text(choices=("exp2", "linear")), "num_boost_round": COUNT,
    "early_stopping_rounds": integer(min=0, optional=True), "eval_at": list_of(integer(min=1), min_len=1),
    "monitor_k": COUNT, "seed": SEED, "metrics": _METRIC_NAMES, "preset": text(optional=True),
}


#: bounds and steps per epoch of the "auto" batch size: chosen by issue 20's defaults study
#: (experiments/defaults_study.py; docs/experiments.md, "Defaults of ltr train and ltr gbdt")
AUTO_BATCH = {"min": 4, "max": 64, "steps_per_epoch": 30}


def auto_batch_size(n_queries: int) -> int:
    """Queries per batch when ``batch_size = "auto"``: about 30 optimiser steps per epoch, between 4 and 64.

    ``B = min(64, max(4, n_queries // 30))``. A fixed 64 gives a data set of 36 training queries one
    step per epoch. In the defaults study, three seeds of the default MLP gained 0.01 to 0.12 NDCG@10
    on the small sets (MSLR sample, TREC News, synthetic 400 queries) from smaller batches; 30 steps
    had the best mean rank against 20 and 40; large sets keep 64.

    >>> [auto_batch_size(n) for n in (36, 320, 470, 800, 8000)]
    [4, 10, 15, 26, 64]
    """
    return min(AUTO_BATCH["max"], max(AUTO_BATCH["min"], int(n_queries) // AUTO_BATCH["steps_per_epoch"]))


@dataclass
class TrainConfig:
    """Everything the trainer needs besides the model, the loss and the data.

    epochs: maximum number of passes over the training queries.
    batch_size: queries per batch (batches are padded to their longest query, length-bucketed), or
        "auto" (the default): :func:`auto_batch_size` of the number of training queries.
    lr, weight_decay: Adam's step size and L2 penalty.
    patience: stop after this many epochs without improvement of ``monitor`` (None: never stop early).
    min_delta: an epoch improves only if it beats the best value by more than this.
    monitor: the validation metric (short name, e.g. "ndcg@10") that picks the best epoch. Ranking
        metrics and "auc" are better when higher; "logloss" and "brier" (computed on sigmoid(score),
        for pointwise BCE / CTR models whose scores are logits) when lower.
    metrics: validation metrics computed each epoch (``metrics.evaluate`` names, plus "logloss",
        "brier", "auc" on binary labels, see ``ltr.train.trainer``); monitor is added if missing.
    preset, conventions: metric conventions passed to ``metrics.evaluate`` (None: the toolkit's own).
    seed: seeds torch, numpy and python at the start of ``fit`` and derives each epoch's batch order.
    device: "cpu", "cuda", "cuda:N" or "auto" (cuda when present).
    progress: tqdm progress bars (False: silent).
    log_dir: TensorBoard folder (None: no TensorBoard logs).
    checkpoint_dir: where ``last.pt`` is written after every epoch (None: no checkpoints).
    resume: continue from ``checkpoint_dir/last.pt`` when it exists.
    grad_clip: clip the gradient norm to this value (None: no clipping).
    bucket_size: queries per length bucket in the batch sampler (None: the sampler's default).
    eval_rows: rows scored at once by ``predict`` and validation.
    histograms: log a histogram of validation scores every epoch.
    """

    epochs: int = 30
    batch_size: int | str = "auto"
    lr: float = 1e-3
    weight_decay: float = 0.0
    patience: int | None = 5
    min_delta: float = 0.0
    monitor: str = "ndcg@10"
    metrics: tuple[str, ...] = DEFAULT_METRICS
    preset: str | None = None
    conventions: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "cpu"
    progress: bool = True
    log_dir: str | None = None
    checkpoint_dir: str | None = None
    resume: bool = False
    grad_clip: float | None = None
    bucket_size: int | None = None
    eval_rows: int = 65536
    histograms: bool = True

    def __post_init__(self) -> None:
        if self.log_dir is not None and isinstance(self.log_dir, os.PathLike):
            self.log_dir = str(self.log_dir)
        if self.checkpoint_dir is not None and isinstance(self.checkpoint_dir, os.PathLike):
            self.checkpoint_dir = str(self.checkpoint_dir)
        for f in dataclasses.fields(self):
            setattr(self, f.name, TRAIN_RULES[f.name].check(getattr(self, f.name), f.name))
        self.metrics = tuple(self.metrics)
        if self.monitor not in self.metrics:
            self.metrics = (self.monitor,) + self.metrics

    @classmethod
    def from_dict(cls, values: dict[str, Any], *, source: str = "config") -> "TrainConfig":
        """Build from a mapping; an unknown key is an :class:`LtrError` naming it."""
        check_keys(values, [f.name for f in dataclasses.fields(cls)], where=source)
        checks.check_table(values, TRAIN_RULES, where=source)
        try:
            return cls(**values)
        except TypeError as exc:
            raise LtrError(f"{source}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["metrics"] = list(self.metrics)
        return d


def check_keys(values: dict[str, Any], allowed: Iterable[str], *, where: str) -> None:
    """Raise :class:`LtrError` naming the first key of ``values`` not in ``allowed``.

    >>> check_keys({"epochs": 3}, ["epochs"], where="x")
    >>> check_keys({"epoch": 3}, ["epochs"], where="cfg.toml [train]")
    Traceback (most recent call last):
    ...
    ltr.base.errors.LtrError: cfg.toml [train]: unknown key 'epoch' (allowed: epochs)
    """
    allowed = list(allowed)
    for key in values:
        if key not in allowed:
            raise LtrError(f"{where}: unknown key {key!r} (allowed: {', '.join(allowed)})")


def read_toml(path: str | os.PathLike) -> dict[str, Any]:
    """The whole TOML file as a dict; a missing file or bad TOML is an LtrError naming the file (and line)."""
    path = checks.input_file(path, "config file")
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte order mark left by some editors
        raw = raw[3:]
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LtrError(f"{path}: invalid TOML: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise LtrError(f"{path}: invalid TOML: {exc}") from None


def load_toml(path: str | os.PathLike, tables: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Read a TOML file whose top level may hold only the given tables; returns {table: dict}.

    Missing tables come back as empty dicts. Errors name the file (and the key or TOML line).
    """
    path = Path(path)
    tables = list(tables)
    data = read_toml(path)
    check_keys(data, tables, where=str(path))
    out: dict[str, dict[str, Any]] = {}
    for name in tables:
        section = data.get(name, {})
        if not isinstance(section, dict):
            raise LtrError(f"{path}: [{name}] must be a table, got {type(section).__name__}")
        out[name] = dict(section)
    return out


def _toml_plain(value: Any, where: str) -> Any:
    """``value`` as the types a TOML writer takes: numpy scalars as Python numbers, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): _toml_plain(v, f"{where}.{k}") for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_plain(v, where) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy scalar
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    raise LtrError(f"{where}: cannot write {type(value).__name__} value {value!r} as TOML")


def toml_text(tables: dict[str, dict[str, Any]], header: str = "") -> str:
    """TOML text of ``{table: {key: value}}`` (values: bool, int, float, str, lists, tables), written by
    tomli-w, a kept TOML writer: any text (control characters, ``\\r``, quotes) and nan / inf read back
    with ``tomllib`` as they were. ``None`` values are left out (TOML has no null, and the readers'
    defaults stand for them). ``header``: comment lines put first.

    >>> print(toml_text({"train": {"lr": 0.01, "metrics": ["ndcg@10"], "grad_clip": None}}, "# best"))
    # best
    <BLANKLINE>
    [train]
    lr = 0.01
    metrics = [
        "ndcg@10",
    ]
    <BLANKLINE>
    """
    try:
        import tomli_w
    except ImportError:  # pragma: no cover - a dependency of ltr tune
        raise LtrError("writing a TOML file needs tomli-w: pip install 'ltr[tune]'") from None
    kept = {name: _toml_plain(values, f"[{name}]") for name, values in tables.items()}
    return (f"{header}\n\n" if header else "") + tomli_w.dumps(kept)
