"""Ablation grids: data sets x methods x seeds, each cell trained, evaluated, stored, then reported.

A *cell* is one (data set, method, seed[, fold]) triple: the model is trained with the trainer (or
LightGBM), early-stopped on the validation split, and judged on the test split by
``metrics.evaluate`` with the configured metrics (conventions-stamped names). Its per-query test
values are written to ``OUT/cells/<dataset>/<method>/seed<k>[-fold<f>].json`` the moment it
finishes (atomically), so a killed ablation restarted on the same folder re-runs only the missing
cells. A cell file carries a fingerprint of everything that determines its result (data set, method,
seed, fold, training, model and LightGBM settings, metrics); a file whose fingerprint differs from
the current configuration is stale and is run again. The fingerprint ignores the code itself, so a
resumed run keeps cells computed by an older version of the toolkit; each cell records a hash of the
code (:func:`code_version`) and the report warns when a table mixes versions.

Determinism. A cell's result is a function of its configuration only: the trainer seeds torch,
numpy and python from the seed, torch and LightGBM run with ``threads_per_cell`` threads (1 by
default) in every process, and the data are generated / split from their own fixed seed (the same
for every method and seed, so that the test queries are the same everywhere and the paired tests
over queries are well defined). ``workers`` only changes where a cell runs, never its result.

Methods (:mod:`ltr.study.methods`): every ``losses.get_loss`` name (``name@K`` adds a cutoff
``k=K``), on the ``[model]`` scorer or on a named one (``attention/softmax``), ``lightgbm``, and
``[variants.NAME]`` tables with their own settings, seed ensemble and tuning grid (``[ablation]
tuning_budget`` candidates per cell, chosen on the validation split). Data sets: ``synthetic`` (``ltr.data.synthetic``), ``svmlight``
(train / valid / test files; a missing valid file is split off the training file by query), ``files``
(the same with each file in any format the commands read: SVMlight, a Parquet file or folder with
the column options ``query_column``, ``label_column``, ``feature_columns``, ``doc_id_column``,
``weight_column``, ``sort_by_query``, or a store from ``ltr convert``) and
``folds`` (``S1..Sn`` parts with the LETOR rotation: fold f trains on S_f, S_f+1, S_f+2, validates on
S_f+3 and tests on S_f+4, indices modulo n; the per-query values of the folds are concatenated, so
every query of the data set is tested exactly once per seed).

The report (:mod:`ltr.study.report`) turns the cells into ``results.json``, ``results.md``, a
plot and TensorBoard HParams runs.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_write_json, json_safe
from ltr.study.methods import check_variant, known_losses, resolve_method, split_method

__all__ = [
    "DatasetSpec",
    "AblationConfig",
    "Cell",
    "KNOWN_METHODS",
    "DEFAULT_METRICS",
    "default_config",
    "quick_config",
    "load_config",
    "enumerate_cells",
    "cell_path",
    "run_cell",
    "run_ablation",
    "load_cells",
    "fold_parts",
    "load_splits",
    "parse_method",
    "cell_fingerprint",
    "read_cell",
    "config_copy",
    "code_version",
    "AblationRun",
]

DEFAULT_METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "mrr")
KNOWN_LOSSES = known_losses()
KNOWN_METHODS = KNOWN_LOSSES + ("lightgbm",)
ALL_METHODS = ("ranknet", "lambdarank", "lambdarank@10", "ndcg_loss2pp", "listnet", "mse", "lightgbm")
CELL_FORMAT = "ltr-ablation-cell-1"
# Trainer settings that the ablation controls itself (per cell), so a config may not set them.
_TRAIN_RESERVED = ("seed", "progress", "log_dir", "checkpoint_dir", "resume", "metrics")


# --------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class DatasetSpec:
    """One data set of the grid: ``kind`` is ``synthetic``, ``svmlight``, ``files`` or ``folds``."""

    name: str
    kind: str
    options: dict = field(default_factory=dict)

    def folds(self) -> list[int | None]:
        if self.kind != "folds":
            return [None]
        return [int(f) for f in self.options.get("folds", range(1, int(self.options.get("n_parts", 5)) + 1))]

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, **self.options}


@dataclass
class AblationConfig:
    """Everything an ablation needs; built from TOML by :func:`load_config` or by the presets."""

    datasets: list[DatasetSpec]
    methods: list[str] = field(default_factory=lambda: list(ALL_METHODS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    reference: str = "ranknet"
    primary: str = "ndcg@10"
    confidence: float = 0.95
    n_resamples: int = 10_000
    train: dict = field(default_factory=dict)  # TrainConfig fields (not seed / progress / paths)
    model: dict = field(default_factory=lambda: {"type": "mlp", "hidden": [64, 32], "normalize": "auto"})
    lightgbm: dict = field(default_factory=dict)  # LightGBM parameters
    gbdt: dict = field(default_factory=dict)  # train_lightgbm / ltr.gbdt.engines.train_gbdt keyword arguments
    loss_options: dict = field(default_factory=dict)  # method name -> extra loss kwargs
    threads_per_cell: int = 1
    models: dict = field(default_factory=dict)  # scorer type -> its options, for MODEL/LOSS methods
    variants: dict = field(default_factory=dict)  # method name -> its [variants.NAME] table
    tuning_budget: int = 1  # candidates tried per cell (on the validation split) for a method with a tune grid
    quality_reference: str | None = None  # method whose validation value the time-to-quality table targets
    source: str = "built-in"
    xgboost: dict = field(default_factory=dict)  # XGBoost parameters (methods xgboost[:OBJECTIVE])
    catboost: dict = field(default_factory=dict)  # CatBoost parameters (methods catboost[:OBJECTIVE])

    def __post_init__(self) -> None:
        if not self.datasets:
            raise LtrError(f"{self.source}: no data sets")
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise LtrError(f"{self.source}: data set names must be unique, got {names}")
        for d in self.datasets:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", d.name):
                raise LtrError(f"{self.source}: data set name {d.name!r} may hold only letters, digits, _ . -")
        if not self.methods:
            raise LtrError(f"{self.source}: no methods")
        if len(set(self.methods)) != len(self.methods):
            raise LtrError(f"{self.source}: methods repeat: {self.methods}")
        for name, variant in self.variants.items():
            check_variant(name, variant, where=self.source, variants=self.variants)
        for m in self.methods:
            if m not in self.variants:
                parse_method(m, where=self.source)
        bad_models = sorted(set(self.models) - {"mlp", "linear", "attention"})
        if bad_models:
            raise LtrError(f"{self.source}: [models] names unknown scorers {bad_models}; use mlp, linear, attention")
        if int(self.tuning_budget) < 1:
            raise LtrError(f"{self.source}: tuning_budget must be >= 1, got {self.tuning_budget}")
        if self.quality_reference is not None and self.quality_reference not in self.methods:
            raise LtrError(f"{self.source}: quality_reference {self.quality_reference!r} is not among the methods")
        if self.reference not in self.methods:
            raise LtrError(f"{self.source}: reference method {self.reference!r} is not among the methods {self.methods}")
        if isinstance(self.seeds, int):
            self.seeds = list(range(self.seeds))
        self.seeds = [int(s) for s in self.seeds]
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise LtrError(f"{self.source}: seeds must be a positive count or a list of distinct integers")
        if self.primary not in self.metrics:
            raise LtrError(f"{self.source}: primary metric {self.primary!r} is not among the metrics {self.metrics}")
        if not 0.0 < float(self.confidence) < 1.0:
            raise LtrError(f"{self.source}: confidence must lie in (0, 1), got {self.confidence}")
        for key in self.train:
            if key in _TRAIN_RESERVED:
                raise LtrError(f"{self.source}: [train] {key} is set by the ablation per cell; remove it")
        unknown = set(self.loss_options) - set(self.methods)
        if unknown:
            raise LtrError(f"{self.source}: [loss_options] names methods not in the grid: {sorted(unknown)}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["datasets"] = [ds.as_dict() for ds in self.datasets]
        return d


def parse_method(name: str, *, where: str = "config") -> tuple[str, int | None]:
    """``"lambdarank@10"`` -> ``("lambdarank", 10)``; ``"attention/softmax"`` -> ``("attention/softmax", None)``;
    an unknown method is an :class:`LtrError` (names as in :func:`ltr.study.methods.split_method`).

    >>> parse_method("lambdarank@10"), parse_method("ranknet"), parse_method("attention/listmle@5")
    (('lambdarank', 10), ('ranknet', None), ('attention/listmle', 5))
    """
    model, base, k = split_method(name, where=where)
    return (base if model is None else f"{model}/{base}"), k


# LightGBM with its defaults is deterministic: the seed would change nothing and its interval over
# seeds would be a point. Row and feature sub-sampling make the seed matter, as it does for the nets.
_LGB_SEEDED = {"bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8}


def default_config() -> AblationConfig:
    """The full study on the synthetic default: every method, 5 seeds."""
    return AblationConfig(
        datasets=[DatasetSpec("synthetic", "synthetic", {"n_queries": 1000, "seed": 0})],
        # the epoch cap is a safety net: cells stop by early stopping (the report lists any that hit it)
        train={"epochs": 300, "batch_size": 32, "lr": 1e-3, "patience": 6, "monitor": "ndcg@10"},
        lightgbm=dict(_LGB_SEEDED),
        gbdt={"num_boost_round": 500, "early_stopping_rounds": 30},
        source="built-in default",
    )


def quick_config() -> AblationConfig:
    """The quick study (``ltr ablate --quick``, ``make demo``): small synthetic data, 4 methods x 5 seeds.

    Each neural cell trains until early stopping (patience 5; 14 to 46 epochs here); the cap of 200
    epochs is only a safety net. About a minute and a half on 2 cores.
    """
    return AblationConfig(
        datasets=[DatasetSpec("synthetic", "synthetic", {"n_queries": 500, "mean_list_length": 40, "seed": 0})],
        methods=["ranknet", "lambdarank", "lambdarank@10", "lightgbm"],
        seeds=[0, 1, 2, 3, 4],
        train={"epochs": 200, "batch_size": 32, "lr": 2e-3, "patience": 5, "monitor": "ndcg@10"},
        model={"type": "mlp", "hidden": [32], "normalize": "standard"},
        lightgbm={"num_leaves": 15, "learning_rate": 0.1, **_LGB_SEEDED},
        gbdt={"num_boost_round": 100, "early_stopping_rounds": 15},
        n_resamples=5000,
        source="built-in quick",
    )


_CONFIG_TABLES = ("ablation", "train", "model", "models", "lightgbm", "xgboost", "catboost", "gbdt", "loss_options",
                  "variants", "datasets")
_ABLATION_KEYS = ("methods", "seeds", "metrics", "reference", "primary", "confidence", "n_resamples", "threads_per_cell",
                  "tuning_budget", "quality_reference")


def _ablation_rules():
    from ltr.base.checks import COUNT, SEED, Rule, list_of, number, text

    rules = {"methods": list_of(text(), min_len=1), "seeds": Rule("any"), "metrics": list_of(text(), min_len=1),
             "reference": text(), "primary": text(), "confidence": number(above=0, below=1),
             "n_resamples": COUNT, "threads_per_cell": COUNT, "tuning_budget": COUNT, "quality_reference": text()}
    return rules, COUNT, list_of(SEED, min_len=1)


_ABLATION_RULES, _SEEDS_COUNT, _SEEDS_LIST = _ablation_rules()
_DATASET_KEYS = {
    "synthetic": None,  # passed to the generator (checked there), plus split / split_seed
    "svmlight": ("train", "valid", "test", "query_file", "valid_fraction", "split_seed", "zero_based"),
    "folds": ("path", "folds", "n_parts", "pattern", "zero_based"),
    "files": ("train", "valid", "test", "query_file", "valid_fraction", "split_seed", "zero_based",
              "query_column", "label_column", "feature_columns", "doc_id_column", "weight_column", "sort_by_query"),
}
_COLUMN_KEYS = ("query_column", "label_column", "doc_id_column", "weight_column")


def _check_tables(data: dict, path: Path) -> None:
    """Every table of an ablation TOML against the rules of its values (ltr.base.checks), before any work."""
    from ltr.base import checks
    from ltr.gbdt.params import check_param_values
    from ltr.train.config import GBDT_RULES, LOSS_RULES, MODEL_RULES, TRAIN_RULES

    for name in ("ablation", "train", "model", "models", "lightgbm", "xgboost", "catboost", "gbdt", "loss_options", "variants"):
        if name in data and not isinstance(data[name], dict):
            raise LtrError(f"{path}: [{name}] must be a table")
    for kind, opts in data.get("models", {}).items():
        if not isinstance(opts, dict):
            raise LtrError(f"{path} [models.{kind}] must be a table")
        checks.check_table(opts, MODEL_RULES, where=f"{path} [models.{kind}]")
    for name, variant in data.get("variants", {}).items():
        for table, rules in (("model", MODEL_RULES), ("train", TRAIN_RULES), ("loss", LOSS_RULES)):
            values = variant.get(table, {}) if isinstance(variant, dict) else {}
            if isinstance(values, dict):
                checks.check_table({k: v for k, v in values.items() if k in rules or table == "model"}, rules,
                                   where=f"{path} [variants.{name}] {table}")
    ab = data.get("ablation", {})
    checks.check_table(ab, _ABLATION_RULES, where=f"{path} [ablation]")
    seeds = ab.get("seeds")
    if seeds is not None and _SEEDS_COUNT.problem(seeds) and _SEEDS_LIST.problem(seeds):
        raise LtrError(f"{path} [ablation] seeds must be a count >= 1 or a list of seeds (integers >= 0), got {seeds!r}")
    checks.check_table({k: v for k, v in data.get("train", {}).items() if k in TRAIN_RULES}, TRAIN_RULES,
                       where=f"{path} [train]")
    checks.check_table(data.get("model", {}), MODEL_RULES, where=f"{path} [model]")
    gbdt_rules = {k: v for k, v in GBDT_RULES.items() if k not in ("seed", "metrics", "preset")}
    checks.check_table(data.get("gbdt", {}), gbdt_rules, where=f"{path} [gbdt]")
    for engine in ("lightgbm", "xgboost", "catboost"):
        check_param_values(data.get(engine, {}), where=f"{path} [{engine}]")
    for method, opts in data.get("loss_options", {}).items():
        if not isinstance(opts, dict):
            raise LtrError(f"{path} [loss_options.{method}] must be a table")
        for key, value in opts.items():
            if key in LOSS_RULES:
                LOSS_RULES[key].check(value, f"{path} [loss_options.{method}] {key}")
    if "datasets" in data and not isinstance(data["datasets"], list):
        raise LtrError(f"{path}: datasets must be [[datasets]] tables, got {type(data['datasets']).__name__}")


def _check_dataset_paths(kind: str, opts: dict, where: str) -> None:
    from ltr.base import checks

    for key in ("train", "valid", "test", "path", "query_file"):
        if key in opts and not isinstance(opts[key], str):
            raise LtrError(f"{where}: {key} must be a path (text), got {opts[key]!r}")
    if kind == "svmlight":
        for key in ("train", "valid", "test", "query_file"):
            if opts.get(key):
                checks.input_file(opts[key], f"{where}: {key}")
    elif kind == "files":
        _check_files_dataset(opts, where)
    elif kind == "folds":
        checks.input_folder(opts["path"], f"{where}: path")


def _check_files_dataset(opts: dict, where: str) -> None:
    """A ``files`` data set: paths that exist (files, Parquet folders, stores) and column options of the right types."""
    for key in ("train", "valid", "test"):
        if opts.get(key) and not os.path.exists(os.path.expanduser(opts[key])):
            raise LtrError(f"{where}: {key} {opts[key]!r} does not exist")
    for key in _COLUMN_KEYS:
        if key in opts and not (isinstance(opts[key], str) and opts[key]):
            raise LtrError(f"{where}: {key} must be a column name, got {opts[key]!r}")
    columns = opts.get("feature_columns")
    if columns is not None and (not isinstance(columns, list) or not columns
                                or not all(isinstance(c, str) and c for c in columns)):
        raise LtrError(f"{where}: feature_columns must be a list of column names, got {columns!r}")
    if "sort_by_query" in opts and not isinstance(opts["sort_by_query"], bool):
        raise LtrError(f"{where}: sort_by_query must be true or false, got {opts['sort_by_query']!r}")


def load_config(path: str | os.PathLike, only: Sequence[str] | None = None) -> AblationConfig:
    """Read an ablation TOML file (see ``experiments/ablate_pairwise_vs_lambda.toml``).

    Top level: ``[ablation]`` (methods, seeds, metrics, reference, primary, confidence,
    n_resamples, threads_per_cell), ``[train]`` (TrainConfig fields), ``[model]``, ``[lightgbm]``,
    ``[xgboost]``, ``[catboost]``, ``[gbdt]``, ``[loss_options."<method>"]``, ``[models.<mlp|linear|attention>]`` (options of a
    named scorer), ``[variants.<name>]`` (see :mod:`ltr.study.methods`; also ``tuning_budget`` and
    ``quality_reference`` in ``[ablation]``) and one ``[[datasets]]`` table per data set
    (``name``, ``kind`` and the kind's options). Relative data paths are taken from the current
    working directory. Unknown keys are errors naming the file and the key. ``only``: the names of
    the data sets that will run (``--datasets``); the files of the others are not looked for.
    """
    from ltr.train.config import check_keys, read_toml

    path = Path(path)
    data = read_toml(path)
    check_keys(data, _CONFIG_TABLES, where=str(path))
    _check_tables(data, path)
    ab = dict(data.get("ablation", {}))
    raw_datasets = data.get("datasets")
    if not isinstance(raw_datasets, list) or not raw_datasets:
        raise LtrError(f"{path}: at least one [[datasets]] table is needed (name, kind, ...)")
    datasets = []
    for i, raw in enumerate(raw_datasets):
        where = f"{path} [[datasets]] #{i + 1}"
        if not isinstance(raw, dict) or "name" not in raw or "kind" not in raw:
            raise LtrError(f"{where}: needs name and kind")
        opts = {k: v for k, v in raw.items() if k not in ("name", "kind")}
        kind = raw["kind"]
        if kind not in _DATASET_KEYS:
            raise LtrError(f"{where}: unknown kind {kind!r}; choose synthetic, svmlight, files or folds")
        if _DATASET_KEYS[kind] is not None:
            check_keys(opts, _DATASET_KEYS[kind], where=where)
        if kind in ("svmlight", "files") and not {"train", "test"} <= set(opts):
            raise LtrError(f"{where}: a{'n' if kind == 'svmlight' else ''} {kind} data set needs train and test "
                           "(valid is optional)")
        if kind == "folds" and "path" not in opts:
            raise LtrError(f"{where}: a folds data set needs path (a folder with S1.txt .. S5.txt)")
        if only is None or str(raw["name"]) in only:
            _check_dataset_paths(kind, opts, where)
        datasets.append(DatasetSpec(str(raw["name"]), kind, opts))
    base = default_config()
    kwargs: dict[str, Any] = {"datasets": datasets, "source": str(path)}
    for key in _ABLATION_KEYS:
        if key in ab:
            kwargs[key] = ab[key]
    if "metrics" in kwargs and "primary" not in kwargs and base.primary not in kwargs["metrics"]:
        kwargs["primary"] = kwargs["metrics"][0]
    kwargs["train"] = dict(data.get("train", base.train))
    kwargs["model"] = dict(data.get("model", base.model))
    kwargs["lightgbm"] = dict(data.get("lightgbm", base.lightgbm))
    kwargs["gbdt"] = dict(data.get("gbdt", base.gbdt))
    kwargs["xgboost"] = dict(data.get("xgboost", {}))
    kwargs["catboost"] = dict(data.get("catboost", {}))
    kwargs["loss_options"] = {k: dict(v) for k, v in data.get("loss_options", {}).items()}
    kwargs["models"] = {k: dict(v) for k, v in data.get("models", {}).items()}
    kwargs["variants"] = {k: dict(v) for k, v in data.get("variants", {}).items()}
    return AblationConfig(**kwargs)


# --------------------------------------------------------------------------- cells
@dataclass(frozen=True)
class Cell:
    """One point of the grid."""

    dataset: str
    method: str
    seed: int
    fold: int | None = None

    @property
    def key(self) -> str:
        f = "" if self.fold is None else f" fold {self.fold}"
        return f"{self.dataset} / {self.method} / seed {self.seed}{f}"

    @property
    def stem(self) -> str:
        return f"seed{self.seed}" + ("" if self.fold is None else f"-fold{self.fold}")


def enumerate_cells(config: AblationConfig) -> list[Cell]:
    """All cells, ordered by seed first (so a partial run covers every method early), then data set,
    fold and method."""
    cells = []
    for seed in config.seeds:
        for ds in config.datasets:
            for fold in ds.folds():
                for method in config.methods:
                    cells.append(Cell(ds.name, method, seed, fold))
    return cells


def cell_path(out: str | os.PathLike, cell: Cell) -> Path:
    """``OUT/cells/<dataset>/<method>/seed<k>[-fold<f>].json``."""
    return Path(out) / "cells" / cell.dataset / cell.method / f"{cell.stem}.json"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def cell_fingerprint(cell: Cell, config: AblationConfig) -> str:
    """Hash of everything that determines a cell's result (not the reporting settings)."""
    ds = next(d for d in config.datasets if d.name == cell.dataset)
    spec = resolve_method(cell.method, config)
    parts = {
        "format": CELL_FORMAT,
        "dataset": ds.as_dict(),
        "method": cell.method,
        "seed": cell.seed,
        "fold": cell.fold,
        "metrics": list(config.metrics),
        "threads": config.threads_per_cell,
    }
    if cell.method in config.variants or "/" in cell.method:
        # what the method resolves to (plain methods keep the older layout: their stored cells stay valid)
        parts["spec"] = spec.as_dict()
        if spec.tune or any(m.tune for m in spec.members):
            parts["tuning_budget"] = int(config.tuning_budget)
    elif spec.kind == "lightgbm":
        parts.update(lightgbm=config.lightgbm, gbdt=config.gbdt)
    elif spec.kind in ("xgboost", "catboost"):
        parts.update({spec.kind: getattr(spec, spec.kind), "gbdt": config.gbdt})
    else:
        parts.update(train=config.train, model=config.model, loss=config.loss_options.get(cell.method, {}))
    return hashlib.sha256(_canonical(parts).encode()).hexdigest()[:16]


# NaN and infinities become null so the files are strict JSON (read back as NaN): the one rule of ltr.base.io_utils
_json_safe = json_safe


def read_cell(path: Path, fingerprint: str | None = None) -> dict | None:
    """A finished cell's record, or None when the file is missing, unreadable or stale."""
    try:
        rec = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict) or rec.get("format") != CELL_FORMAT:
        return None
    if fingerprint is not None and rec.get("fingerprint") != fingerprint:
        return None
    return rec


# --------------------------------------------------------------------------- data
_DATA_CACHE: dict[str, tuple] = {}


def _resolve(p: str) -> Path:
    path = Path(p).expanduser()
    if not path.exists():
        raise LtrError(f"data file or folder not found: {path} (relative paths are taken from {Path.cwd()})")
    return path


def fold_parts(fold: int, n_parts: int = 5) -> tuple[list[int], int, int]:
    """LETOR rotation: fold f -> (train parts, valid part, test part), parts numbered from 1.

    >>> fold_parts(1), fold_parts(2), fold_parts(5)
    (([1, 2, 3], 4, 5), ([2, 3, 4], 5, 1), ([5, 1, 2], 3, 4))
    """
    if not 1 <= fold <= n_parts:
        raise LtrError(f"fold {fold} is outside 1..{n_parts}")
    idx = [(fold - 1 + i) % n_parts + 1 for i in range(n_parts)]
    return idx[: n_parts - 2], idx[n_parts - 2], idx[n_parts - 1]


def _load_svmlight(path, **kwargs):
    # caches go to the user cache folder, never beside the data (shared data folders stay untouched)
    from ltr import data as ltr_data

    return ltr_data.load_svmlight(_resolve(str(path)), cache_dir=ltr_data.default_cache_dir(), **kwargs)


def load_splits(spec: DatasetSpec, fold: int | None):
    """(train, valid, test) RankingDatasets of a data set (and fold), cached per process."""
    key = _canonical([spec.as_dict(), fold])
    if key in _DATA_CACHE:
        return _DATA_CACHE[key]
    from ltr import data as ltr_data

    opts = dict(spec.options)
    if spec.kind == "synthetic":
        from ltr.data import synthetic

        split = tuple(opts.pop("split", (0.6, 0.2, 0.2)))
        split_seed = int(opts.pop("split_seed", 0))
        try:
            full = synthetic.generate(**opts)
        except (TypeError, ValueError) as exc:
            raise LtrError(f"data set {spec.name!r}: bad synthetic option: {exc}") from None
        splits = ltr_data.split_by_query(full, split, seed=split_seed)
    elif spec.kind == "svmlight":
        zb = bool(opts.get("zero_based", False))
        train = _load_svmlight(opts["train"], query_file=opts.get("query_file"), zero_based=zb)
        test = _load_svmlight(opts["test"], n_features=train.n_features, zero_based=zb)
        if opts.get("valid"):
            valid = _load_svmlight(opts["valid"], n_features=train.n_features, zero_based=zb)
        else:
            frac = float(opts.get("valid_fraction", 0.2))
            train, valid, _ = ltr_data.split_by_query(train, (1.0 - frac, frac, 0.0), seed=int(opts.get("split_seed", 0)))
        nf = max(train.n_features, valid.n_features, test.n_features)
        splits = tuple(_pad_features(d, nf) for d in (train, valid, test))
    elif spec.kind == "files":
        splits = _load_files(opts)
    elif spec.kind == "folds":
        folder = _resolve(opts["path"])
        n_parts = int(opts.get("n_parts", 5))
        pattern = str(opts.get("pattern", "S{}.txt"))
        tr, va, te = fold_parts(int(fold), n_parts)
        zb = bool(opts.get("zero_based", False))
        parts = {i: _load_svmlight(folder / pattern.format(i), zero_based=zb) for i in sorted({*tr, va, te})}
        nf = max(p.n_features for p in parts.values())
        parts = {i: _pad_features(p, nf) for i, p in parts.items()}
        splits = (ltr_data.concat_datasets([parts[i] for i in tr]), parts[va], parts[te])
    else:  # pragma: no cover - refused by the config
        raise LtrError(f"unknown data set kind {spec.kind!r}")
    _DATA_CACHE[key] = splits
    return splits


def _load_files(opts: dict):
    """(train, valid, test) of a ``files`` data set: each an SVMlight file, a Parquet file or folder
    (with the column options) or a store, read as the commands read ``--train`` (ltr.data.files)."""
    from ltr import data as ltr_data
    from ltr.data.files import DataOptions, load_data_file

    columns = {k: opts[k] for k in (*_COLUMN_KEYS, "sort_by_query") if k in opts}
    if "feature_columns" in opts:
        columns["feature_columns"] = tuple(opts["feature_columns"])
    options = DataOptions(**columns)
    zb = bool(opts.get("zero_based", False))
    train = load_data_file(_resolve(opts["train"]), "train", options=options, zero_based=zb,
                           query_file=opts.get("query_file"))
    names = train.feature_names
    test = load_data_file(_resolve(opts["test"]), "test", options=options, feature_names=names, zero_based=zb)
    if opts.get("valid"):
        valid = load_data_file(_resolve(opts["valid"]), "valid", options=options, feature_names=names, zero_based=zb)
    else:
        frac = float(opts.get("valid_fraction", 0.2))
        train, valid, _ = ltr_data.split_by_query(train, (1.0 - frac, frac, 0.0), seed=int(opts.get("split_seed", 0)))
    nf = max(train.n_features, valid.n_features, test.n_features)  # sparse SVMlight files may stop short
    return tuple(_pad_features(d, nf) for d in (train, valid, test))


def _pad_features(ds, n_features: int):
    if ds.n_features == n_features:
        return ds
    extra = np.zeros((ds.n_items, n_features - ds.n_features), dtype=np.float32)
    return ds.with_features(np.ascontiguousarray(np.hstack([ds.features, extra]), dtype=np.float32))


# --------------------------------------------------------------------------- one cell
_CODE_VERSION: str | None = None


def code_version() -> str:
    """Short hash of the source files a cell's result depends on (``metrics/``, ``losses/``, ``ltr/``
    except the command line and the report), taken once per process. Stored in every cell so that the
    report can warn when the cells of one table were computed by different versions of the code (a
    resumed ablation keeps the cells of the old code; the fingerprint deliberately ignores the code)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        _CODE_VERSION = source_hash(Path(__file__).resolve().parents[2])
    return _CODE_VERSION


# Files that shape how results are shown or asked for, not what a cell computes.
_NOT_RESULT_CODE = ("ltr/commands/", "ltr/cli.py", "ltr/study/report.py", "ltr/study/report_table.py",
                    "ltr/study/compare_report.py")


def source_hash(root: Path) -> str:
    """12 hex digits of SHA-256 over the path and bytes of every ``.py`` file under ``root``'s
    ``metrics``, ``losses`` and ``ltr`` folders, in sorted order, less :data:`_NOT_RESULT_CODE`."""
    h = hashlib.sha256()
    for pkg in ("metrics", "losses", "ltr"):
        for f in sorted((root / pkg).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if not rel.startswith(_NOT_RESULT_CODE):
                h.update(rel.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def run_cell(cell: Cell, config: AblationConfig) -> dict:
    """Train and evaluate one cell; return its record (per-query test values keyed by stamped names)."""
    import torch

    from ltr.study.cell_training import train_method
    from ltr.runs.scoring import evaluate_scores

    t0 = time.perf_counter()
    code_version()
    torch.set_num_threads(int(config.threads_per_cell))
    spec = next(d for d in config.datasets if d.name == cell.dataset)
    train, valid, test = load_splits(spec, cell.fold)
    method = resolve_method(cell.method, config)
    monitor = str(config.train.get("monitor", "ndcg@10"))
    scores, info = train_method(method, train, valid, test, seed=cell.seed, metrics=config.metrics, monitor=monitor,
                                budget=config.tuning_budget, threads=int(config.threads_per_cell))
    ev = evaluate_scores(scores, test, config.metrics)
    names = {short: ev.names[short] for short in config.metrics}
    return {
        "format": CELL_FORMAT,
        "dataset": cell.dataset,
        "method": cell.method,
        "seed": cell.seed,
        "fold": cell.fold,
        "metric_names": names,
        "mean": {names[s]: float(ev.mean[names[s]]) for s in config.metrics},
        "per_query": {names[s]: np.asarray(ev.per_query[names[s]], dtype=np.float64) for s in config.metrics},
        "query_ids": [str(q) for q in np.asarray(test.query_ids).tolist()],
        "train_info": info,
        "code": code_version(),
        "wall_time_s": time.perf_counter() - t0,
    }


def _cell_worker(cell_fn: Callable, cell: Cell, config: AblationConfig) -> dict:
    # runs in a worker process; run_cell itself pins torch / LightGBM to threads_per_cell threads,
    # so a cell computes the same numbers here as in the main process
    return cell_fn(cell, config)


# --------------------------------------------------------------------------- the grid
@dataclass
class AblationRun:
    """What :func:`run_ablation` did: the records of every cell and how many were (re-)run."""

    records: list[dict]
    n_cells: int
    n_run: int
    n_reused: int
    n_stale: int
    wall_time_s: float
    ran: list[str] = field(default_factory=list)


_MAIN_GUARD_HINT = ("run_ablation was called while a worker process was starting: worker processes import "
                    "the calling script again, so put the call under `if __name__ == \"__main__\":` (or use workers=1)")


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run_ablation(config: AblationConfig, out: str | os.PathLike, *, workers: int | None = 1, progress: bool = True,
                 cell_fn: Callable[[Cell, AblationConfig], dict] = run_cell,
                 on_cell: Callable[[Cell, dict], None] | None = None) -> AblationRun:
    """Run every missing or stale cell of the grid into ``out/cells`` and return all records.

    ``workers``: processes running cells at once (None or 0: one per CPU core); 1 runs them in this
    process. ``cell_fn(cell, config) -> record`` trains one cell (tests pass a cheap stand-in; with
    workers > 1 it must be a module-level function). ``on_cell(cell, record)`` is called in this
    process after each cell is stored (the tests use it to simulate a kill).

    Worker processes start from a forkserver that has imported torch and LightGBM once (spawned where
    the platform has none: :mod:`ltr.base.processes`); each one imports the calling script again, so in a script the
    call must sit under ``if __name__ == "__main__":``. Without it a worker would start the whole
    ablation again; that is refused with an :class:`LtrError` saying so.
    """
    import multiprocessing as mp

    from tqdm.auto import tqdm

    if getattr(mp.current_process(), "_inheriting", False):
        raise LtrError(_MAIN_GUARD_HINT)

    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cells = enumerate_cells(config)
    prints = {c: cell_fingerprint(c, config) for c in cells}
    done, todo, stale = _stored_cells(out, cells, prints)
    n_reused = len(done)
    workers = _default_workers() if not workers else int(workers)
    workers = max(1, min(workers, len(todo))) if todo else 1

    def store(c: Cell, rec: dict) -> None:
        rec = dict(rec)
        rec["fingerprint"] = prints[c]
        atomic_write_json(cell_path(out, c), _json_safe(rec))
        done[c] = read_cell(cell_path(out, c))  # the stored form (NaN as null) is the one reported
        if on_cell is not None:
            on_cell(c, rec)

    ran: list[str] = []
    bar = tqdm(total=len(todo), desc="ablation cells", unit="cell", disable=not progress or not todo)
    try:
        if workers == 1:
            for c in todo:
                bar.set_postfix_str(c.key)
                store(c, cell_fn(c, config))
                ran.append(c.key)
                bar.update(1)
        else:  # longest first, so that no worker is left alone with a long cell at the end
            from ltr.study.scheduling import longest_first

            _run_cells_in_pool(longest_first(todo, config, resolve_method), config, cell_fn, workers, store, ran, bar)
    finally:
        bar.close()
    records = [done[c] for c in cells]
    return AblationRun(records, len(cells), len(ran), n_reused, stale, time.perf_counter() - t0, ran)


def _stored_cells(out: Path, cells: list[Cell], prints: dict[Cell, str]) -> tuple[dict[Cell, dict], list[Cell], int]:
    """``(done, todo, stale)``: the current stored records, the cells to run (in grid order), and how
    many of those have a stored record that is out of date."""
    done: dict[Cell, dict] = {}
    todo: list[Cell] = []
    stale = 0
    for c in cells:
        path = cell_path(out, c)
        rec = read_cell(path, prints[c])
        if rec is None:
            stale += int(path.exists())
            todo.append(c)
        else:
            done[c] = rec
    return done, todo, stale


def _run_cells_in_pool(todo: list[Cell], config: AblationConfig, cell_fn: Callable, workers: int,
                       store: Callable[[Cell, dict], None], ran: list[str], bar) -> None:  # fmt: skip
    """Run ``todo`` on ``workers`` worker processes, storing each record (and appending its key to
    ``ran``) as soon as it arrives; on any error the cells not yet started are cancelled."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from concurrent.futures.process import BrokenProcessPool

    from ltr.base.processes import worker_start_method

    # torch._dynamo: a neural cell's optimizer imports it (torch.optim's own guard), 1.3 CPU s per worker
    modules = ["torch", "torch._dynamo", "lightgbm", __name__, getattr(cell_fn, "__module__", None)]
    ctx = mp.get_context(worker_start_method(modules))
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending = {pool.submit(_cell_worker, cell_fn, c, config): c for c in todo}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    c = pending.pop(fut)
                    try:
                        rec = fut.result()
                    except BrokenProcessPool:
                        raise LtrError(f"a worker process of the ablation died ({_MAIN_GUARD_HINT}; "
                                       "or it ran out of memory: try fewer --workers)") from None
                    store(c, rec)
                    ran.append(c.key)
                    bar.set_postfix_str(c.key)
                    bar.update(1)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise


def load_cells(out: str | os.PathLike, config: AblationConfig) -> list[dict]:
    """The stored, current records of every cell of ``config`` (an error lists the missing ones)."""
    recs, missing = [], []
    for c in enumerate_cells(config):
        rec = read_cell(cell_path(out, c), cell_fingerprint(c, config))
        (recs.append(rec) if rec is not None else missing.append(c.key))
    if missing:
        raise LtrError(f"{out}: {len(missing)} cells are missing or stale, e.g. {missing[:3]}; run the ablation first")
    return recs


def estimate(records: Iterable[dict]) -> dict[str, float]:
    """Mean wall time of the stored cells per method (seconds), for runtime estimates."""
    by: dict[str, list[float]] = {}
    for r in records:
        by.setdefault(r["method"], []).append(float(r.get("wall_time_s", float("nan"))))
    return {m: float(np.mean(v)) for m, v in by.items()}


def config_copy(config: AblationConfig, **changes) -> AblationConfig:
    """A modified copy (the dataclass is mutable; keep the original untouched)."""
    c = copy.deepcopy(config)
    for k, v in changes.items():
        setattr(c, k, v)
    c.__post_init__()
    return c
