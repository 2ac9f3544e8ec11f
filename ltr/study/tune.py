"""Hyper-parameter search with Optuna: TPE sampling, pruning on the per-epoch validation metric, a
SQLite study that survives an interruption, and the best configuration as a TOML for ``ltr train``.

The search space is a TOML file (example: ``experiments/tune_lambdarank.toml``)::

    [tune]
    kind = "neural"              # neural: the trainer (ltr train); lightgbm, xgboost, catboost: ltr gbdt --engine KIND
    metric = "ndcg@10"           # validation metric to optimise (the trainer's monitor)
    seed = 0                     # TPE sampler seed
    startup_trials = 5           # random trials before TPE models the space
    pruner = "median"            # median | none
    warmup_epochs = 2            # never prune before this many epochs (boosting rounds for lightgbm)

    [data]                       # or --train / --valid on the command line
    train = "data/syn/train.txt"
    valid = "data/syn/valid.txt"

    [train]                      # fixed settings, the tables of `ltr train --config` ([lightgbm] or
    epochs = 20                  # [xgboost] or [catboost], and [gbdt], for the GBDT kinds)
    [model]
    normalize = "log1p_standard"
    [loss]
    name = "lambdarank"

    [space.train]                # searched settings: table.key = a range or a list of choices
    lr = { float = [1e-4, 1e-2], log = true }
    batch_size = { choices = [16, 32, 64] }
    [space.model]
    hidden = { choices = [[64], [128, 64]] }
    dropout = { float = [0.0, 0.3] }
    [space.loss]
    sigma = { float = [0.5, 2.0] }

A range is ``{ float = [low, high] }`` or ``{ int = [low, high] }`` with optional ``log = true`` or
``step = s``; ``{ choices = [...] }`` picks one value (any TOML value, lists included).

Each trial trains with the fixed tables overridden by its sampled values. A neural trial reports its
validation metric to Optuna after every epoch through a trainer callback; when the pruner says the
trial is behind, the callback asks the trainer to stop (:meth:`ltr.train.trainer.Trainer.request_stop`)
and the trial is recorded as pruned. A LightGBM trial reports LightGBM's own validation NDCG per round
(its convention: a query without relevant documents scores 1); both kinds are judged at the end by the
toolkit's metric, which is the trial's value. An XGBoost or CatBoost trial (``kind = "xgboost"`` /
``"catboost"``, ``[space.xgboost]`` e.g. ``max_depth = { int = [3, 8] }``, ``eta = { float = [0.02, 0.3],
log = true }``; the objective as ``[xgboost] objective`` / ``[catboost] loss_function``) stops early on
the toolkit's validation NDCG by itself and is not pruned.

The output folder holds ``study.db`` (Optuna's SQLite storage: run the same command again and the
search resumes; a trial that was running when the process was killed is marked failed and its settings
tried again first), ``best.toml`` (the best trial's full configuration: ``ltr train --config best.toml``
or ``ltr gbdt --config best.toml`` reproduces it), ``trials.json`` (every trial: state, value, settings)
and ``tensorboard/trial-NNNN/`` (each trial's curves and one HParams record with the trial's number,
state and searched values, so TensorBoard's HParams tab lists every trial).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_write_json, atomic_write_text

__all__ = ["TuneConfig", "TuneResult", "load_tune_config", "run_tuning", "sample_settings", "PruningCallback"]

KINDS = {"neural": ("train", "model", "loss"), "lightgbm": ("lightgbm", "gbdt"), "xgboost": ("xgboost", "gbdt"),
         "catboost": ("catboost", "gbdt")}
TUNE_KEYS = ("kind", "metric", "seed", "startup_trials", "pruner", "warmup_epochs")
DATA_KEYS = ("train", "valid", "zero_based", "train_query_file", "valid_query_file")
STUDY_NAME = "ltr-tune"


@dataclass
class TuneConfig:
    """A parsed search-space file (see the module docstring)."""

    kind: str = "neural"
    metric: str = "ndcg@10"
    seed: int = 0
    startup_trials: int = 5
    pruner: str = "median"
    warmup_epochs: int = 2
    data: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, dict[str, Any]] = field(default_factory=dict)
    space: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    source: str = "config"

    def fingerprint(self) -> str:
        """What a resumed study must share with the one on disk (the data paths may move)."""
        what = {"kind": self.kind, "metric": self.metric, "fixed": self.fixed, "space": self.space}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class TuneResult:
    """What :func:`run_tuning` returns."""

    best_value: float
    best_trial: int
    best_settings: dict[str, dict[str, Any]]
    best_toml: Path
    counts: dict[str, int]
    study_path: Path


def _check_spec(where: str, spec: Any) -> None:
    if not isinstance(spec, dict):
        raise LtrError(f"{where}: expected a table such as {{ float = [low, high] }} or {{ choices = [...] }}, got {spec!r}")
    kinds = [k for k in ("float", "int", "choices") if k in spec]
    if len(kinds) != 1:
        raise LtrError(f"{where}: give exactly one of float = [low, high], int = [low, high], choices = [...]")
    extra = set(spec) - {kinds[0], "log", "step"}
    if extra or (kinds[0] == "choices" and set(spec) != {"choices"}):
        raise LtrError(f"{where}: unknown key(s) {', '.join(sorted(extra or set(spec) - {'choices'}))}")
    if kinds[0] == "choices":
        if not isinstance(spec["choices"], list) or not spec["choices"]:
            raise LtrError(f"{where}: choices must be a non-empty list")
        return
    bounds = spec[kinds[0]]
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds) and bounds[0] < bounds[1]):
        raise LtrError(f"{where}: {kinds[0]} must be [low, high] with low < high, got {bounds!r}")
    if spec.get("log") and bounds[0] <= 0:
        raise LtrError(f"{where}: log = true needs low > 0")
    if kinds[0] == "int" and not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
        raise LtrError(f"{where}: int = [low, high] takes whole numbers, got {bounds!r}")
    step = spec.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float)) or not step > 0
                             or (kinds[0] == "int" and not isinstance(step, int))):
        raise LtrError(f"{where}: step must be a number > 0 (a whole number for int), got {step!r}")
    if step is not None and spec.get("log"):
        raise LtrError(f"{where}: give log = true or step, not both")


def _check_space_values(where: str, space: dict[str, Any], rules: dict[str, Any]) -> None:
    """Every choice and both bounds of a searched key obey the key's rule (a trial must not be the
    first to find that ``lr = [-1, -0.1]`` or ``activation = "bogus"`` cannot train)."""
    for key, spec in space.items():
        if key in rules:
            for value in spec.get("choices", spec.get("float", spec.get("int", []))):
                rules[key].check(value, f"{where} {key}")


def _first_value(spec: dict[str, Any]) -> Any:
    """A value a searched key may take (its first choice, or its lower bound): what its name is checked with."""
    return (spec.get("choices") or spec.get("float") or spec.get("int") or [None])[0]


def load_tune_config(path: str | os.PathLike) -> TuneConfig:
    """Read and check a search-space TOML file; errors name the file and the key."""
    from ltr.train.config import check_keys, read_toml

    path = Path(path)
    data = read_toml(path)
    tune = dict(data.get("tune", {}))
    check_keys(tune, TUNE_KEYS, where=f"{path} [tune]")
    kind = tune.get("kind", "neural")
    if kind not in KINDS:
        raise LtrError(f"{path} [tune] kind: {kind!r}; choose neural or lightgbm, xgboost, catboost")
    tables = KINDS[kind]
    check_keys(data, ("tune", "data", "space", *tables), where=str(path))
    space = data.get("space", {})
    check_keys(space, tables, where=f"{path} [space]")
    for table, params in space.items():
        for key, spec in params.items():
            _check_spec(f"{path} [space.{table}] {key}", spec)
    if not any(space.values()):
        raise LtrError(f"{path}: [space] is empty: nothing to search")
    data_table = dict(data.get("data", {}))
    check_keys(data_table, DATA_KEYS, where=f"{path} [data]")
    cfg = TuneConfig(kind=kind, data=data_table, fixed={t: dict(data.get(t, {})) for t in tables},
                     space={t: dict(space.get(t, {})) for t in tables}, source=str(path),
                     **{k: tune[k] for k in TUNE_KEYS if k in tune and k != "kind"})
    if cfg.pruner not in ("median", "none"):
        raise LtrError(f"{path} [tune] pruner: {cfg.pruner!r}; choose median or none")
    _check_fixed(cfg)
    from ltr.runs.scoring import check_metric_names

    try:  # before the data is read and the study opened
        check_metric_names([cfg.metric])
    except LtrError as exc:
        raise LtrError(f"{path} [tune] metric: {exc}") from None
    return cfg


def _check_fixed(cfg: TuneConfig) -> None:
    """Check the fixed tables' keys and values, and the searched keys, before any trial runs."""
    from ltr.base.checks import check_table
    from ltr.gbdt.params import ENGINE_RULES, check_engine_params
    from ltr.train.config import GBDT_RULES, LOSS_RULES, MODEL_RULES, TRAIN_RULES, check_keys

    where = cfg.source
    if cfg.kind == "neural":
        for table, rules in (("train", TRAIN_RULES), ("model", MODEL_RULES)):
            check_table(cfg.fixed[table], rules, where=f"{where} [{table}]")
            check_keys(cfg.space[table], rules, where=f"{where} [space.{table}]")
            _check_space_values(f"{where} [space.{table}]", cfg.space[table], rules)
        _check_space_values(f"{where} [space.loss]", cfg.space["loss"], LOSS_RULES)
        for key, value in cfg.fixed["loss"].items():  # other keys: losses.get_loss names the ones it does not take
            if key in LOSS_RULES:
                LOSS_RULES[key].check(value, f"{where} [loss] {key}")
        for key in ("log_dir", "checkpoint_dir", "resume", "monitor"):
            if key in cfg.fixed["train"] or key in cfg.space["train"]:
                raise LtrError(f"{where} [train] {key}: set by ltr tune (monitor = [tune] metric)")
    else:
        check_table(cfg.fixed["gbdt"], GBDT_RULES, where=f"{where} [gbdt]")
        check_keys(cfg.space["gbdt"], GBDT_RULES, where=f"{where} [space.gbdt]")
        _check_space_values(f"{where} [space.gbdt]", cfg.space["gbdt"], GBDT_RULES)
        check_engine_params(cfg.kind, cfg.fixed[cfg.kind], where=f"{where} [{cfg.kind}]")
        # the searched keys: ranges by the engine's rules (those of ltr gbdt's options), names by the engine
        _check_space_values(f"{where} [space.{cfg.kind}]", cfg.space[cfg.kind], ENGINE_RULES[cfg.kind])
        check_engine_params(cfg.kind, {k: _first_value(spec) for k, spec in cfg.space[cfg.kind].items()},
                            where=f"{where} [space.{cfg.kind}]")


# ---------------------------------------------------------------------------------------------- trials

def _suggest(trial, name: str, spec: dict[str, Any]) -> Any:
    if "choices" in spec:
        # Optuna's categorical values are scalars; lists (hidden widths) travel as their JSON text
        encoded = [json.dumps(c) for c in spec["choices"]]
        return json.loads(trial.suggest_categorical(name, encoded))
    low, high = spec.get("float", spec.get("int"))
    if "float" in spec:
        return trial.suggest_float(name, float(low), float(high), log=bool(spec.get("log", False)), step=spec.get("step"))
    return trial.suggest_int(name, int(low), int(high), log=bool(spec.get("log", False)), step=int(spec.get("step", 1)))


def sample_settings(trial, cfg: TuneConfig) -> dict[str, dict[str, Any]]:
    """The fixed tables with this trial's sampled values put in (parameter names ``table.key``)."""
    settings = copy.deepcopy(cfg.fixed)
    for table, params in cfg.space.items():
        for key, spec in params.items():
            settings[table][key] = _suggest(trial, f"{table}.{key}", spec)
    return settings


class PruningCallback:
    """Trainer callback: report the monitored validation metric each epoch; stop when Optuna prunes."""

    def __init__(self, trial, warmup_epochs: int = 0):
        self.trial = trial
        self.warmup_epochs = int(warmup_epochs)
        self.pruned_at: int | None = None

    def __call__(self, trainer, epoch: int, record: dict[str, Any]) -> None:
        value = record["valid"][trainer.stopping.monitor]
        if not math.isfinite(value):
            return
        self.trial.report(float(value), epoch)
        if epoch > self.warmup_epochs and self.trial.should_prune():
            self.pruned_at = epoch
            trainer.hparams["trial_state"] = "pruned"
            trainer.request_stop(f"pruned by Optuna after epoch {epoch}")


def _lightgbm_pruning(trial, metric_name: str, warmup: int, state: dict[str, Any]):
    import optuna

    def callback(env) -> None:
        value = next((v for data, name, v, _ in env.evaluation_result_list if data == "valid" and name == metric_name), None)
        if value is None:
            return
        step = env.iteration + 1
        trial.report(float(value), step)
        if step > warmup and trial.should_prune():
            state["pruned_at"] = step
            raise optuna.TrialPruned(f"pruned by Optuna after round {step}")

    callback.order = 25  # after LightGBM's record_evaluation (20), before early stopping (30)
    return callback


def _flat(settings: dict[str, dict[str, Any]], space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The searched values as ``table.key`` HParams (lists as text)."""
    return {f"{t}.{k}": (json.dumps(settings[t][k]) if isinstance(settings[t][k], (list, dict)) else settings[t][k])
            for t, params in space.items() for k in params}


def _shown(settings, space) -> str:
    """The searched values on one line: ``train.lr=0.00262 model.hidden=[8]``."""
    return " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in _flat(settings, space).items())


def _neural_trial(trial, cfg: TuneConfig, settings, data, log_dir: Path) -> tuple[float, dict[str, Any]]:
    from ltr.train.config import TrainConfig
    from ltr.train.settings import MODEL_DEFAULTS, build_loss, build_scorer
    from ltr.train.trainer import Trainer, seed_everything

    train_ds, valid_ds = data
    # a trial trains one model: best.toml says so, since ltr train's default averages three
    settings["model"] = {**MODEL_DEFAULTS, "ensemble": 1, **settings["model"]}
    settings["loss"] = {"name": "lambdarank", **settings["loss"]}
    settings["train"]["monitor"] = cfg.metric
    tcfg = TrainConfig.from_dict({**settings["train"], "log_dir": str(log_dir), "progress": False, "histograms": False},
                                 source=f"trial {trial.number} [train]")
    seed_everything(tcfg.seed)
    model = build_scorer(settings["model"], train_ds)
    hp = {"trial": trial.number, "trial_state": "complete", **_flat(settings, cfg.space)}
    pruning = PruningCallback(trial, cfg.warmup_epochs if cfg.pruner != "none" else 10**9)
    result = Trainer(model, build_loss(settings["loss"]), tcfg, hparams=hp, callbacks=[pruning]).fit(train_ds, valid_ds)
    info = {"best_epoch": result.best_epoch, "epochs_run": result.epochs_run, "monitor": result.monitor,
            "pruned_at": pruning.pruned_at, "higher_is_better": result.higher_is_better}
    return float(result.best_value), info


def _lightgbm_trial(trial, cfg: TuneConfig, settings, data, log_dir: Path) -> tuple[float, dict[str, Any]]:
    import optuna

    from ltr.gbdt.lightgbm import predict_booster, train_lightgbm
    from ltr.runs.tensorboard_log import TensorBoardLogger
    from ltr.runs.scoring import evaluate_scores

    train_ds, valid_ds = data
    opts = {"gain": "exp2", "num_boost_round": 1000, "early_stopping_rounds": 50, "eval_at": [1, 3, 5, 10], "monitor_k": 10,
            "seed": 0, **settings["gbdt"]}
    settings["gbdt"] = opts
    state: dict[str, Any] = {"pruned_at": None}
    warmup = cfg.warmup_epochs if cfg.pruner != "none" else 10**9
    callback = _lightgbm_pruning(trial, f"ndcg@{int(opts['monitor_k'])}", warmup, state)
    keys = ("gain", "num_boost_round", "early_stopping_rounds", "eval_at", "monitor_k", "seed")
    hp = {"trial": trial.number, **_flat(settings, cfg.space)}
    logger = TensorBoardLogger(log_dir)
    try:
        try:
            booster, info = train_lightgbm(train_ds, valid_ds, settings["lightgbm"], callbacks=[callback],
                                           **{k: opts[k] for k in keys})
        except optuna.TrialPruned:
            logger.hparams({**hp, "trial_state": "pruned"}, {}, int(state["pruned_at"] or 0))
            raise
        ev = evaluate_scores(predict_booster(booster, valid_ds.features), valid_ds, [cfg.metric], opts.get("preset"),
                             {"gain": opts["gain"]} if opts.get("preset") is None else {})
        name = ev.names[cfg.metric]
        value = float(ev.mean[name])
        for i, v in enumerate(info["evals_result"].get("valid", {}).get(f"ndcg@{int(opts['monitor_k'])}", []), 1):
            logger.scalar(f"lightgbm_valid/ndcg@{int(opts['monitor_k'])}[empty=one]", v, i)
        logger.hparams({**hp, "trial_state": "complete"}, {"valid": {name: value}}, info["best_iteration"])
    finally:
        logger.close()
    return value, {"best_iteration": info["best_iteration"], "monitor": name, "pruned_at": None, "higher_is_better": True}


def _engine_trial(trial, cfg: TuneConfig, settings, data, log_dir: Path) -> tuple[float, dict[str, Any]]:
    """One XGBoost or CatBoost trial (:func:`ltr.gbdt.engines.train_gbdt`): its validation curve of the
    toolkit's NDCG, then the trial's metric on the kept model."""
    from ltr.gbdt.engines import import_engine, predict_gbdt, train_gbdt
    from ltr.runs.scoring import evaluate_scores
    from ltr.runs.tensorboard_log import TensorBoardLogger

    import_engine(cfg.kind)
    train_ds, valid_ds = data
    opts = {"gain": "exp2", "num_boost_round": 1000, "early_stopping_rounds": 50, "eval_at": [1, 3, 5, 10], "monitor_k": 10,
            "seed": 0, **settings["gbdt"]}
    settings["gbdt"] = opts
    keys = ("gain", "num_boost_round", "early_stopping_rounds", "eval_at", "monitor_k", "seed")
    logger = TensorBoardLogger(log_dir)
    try:
        model, info = train_gbdt(cfg.kind, train_ds, valid_ds, dict(settings[cfg.kind]), **{k: opts[k] for k in keys})
        ev = evaluate_scores(predict_gbdt(cfg.kind, model, valid_ds.features), valid_ds, [cfg.metric], opts.get("preset"),
                             {"gain": opts["gain"]} if opts.get("preset") is None else {})
        name = ev.names[cfg.metric]
        value = float(ev.mean[name])
        for i, v in enumerate(info["curve"], 1):
            logger.scalar(f"valid/{info['monitor']}", v, i)
        hp = {"trial": trial.number, "trial_state": "complete", "objective": info["objective"], **_flat(settings, cfg.space)}
        logger.hparams(hp, {"valid": {name: value}}, info["best_iteration"])
    finally:
        logger.close()
    return value, {"best_iteration": info["best_iteration"], "monitor": name, "pruned_at": None, "higher_is_better": True}


# ---------------------------------------------------------------------------------------------- the study

@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One ``ltr tune`` per output folder at a time (the lock goes with the process, killed or not)."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise LtrError(f"{out}: another ltr tune is running on this folder") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_study_file(db: Path) -> None:
    """``study.db``, when it is there, must be an SQLite file this process may write: a search
    resumes from it and adds its trials. Checked before Optuna opens it (SQLAlchemy would answer a
    damaged file with a traceback); a file without write permission is refused even for root."""
    if not os.path.lexists(db):
        return
    if not db.is_file():
        raise LtrError(f"{db}: is not a file; ltr tune keeps its study there: remove it or use another --out")
    try:
        with open(db, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise LtrError(f"{db}: cannot be read ({exc.strerror or exc})") from None
    if head and head != SQLITE_MAGIC:
        raise LtrError(f"{db}: not an SQLite database (damaged, or not written by ltr tune); remove it or use another --out")
    if not os.access(db, os.W_OK) or not db.stat().st_mode & 0o222:
        raise LtrError(f"{db}: is read-only, and ltr tune adds its trials to it; make it writable or use another --out")


@contextlib.contextmanager
def _database_errors(db: Path) -> Iterator[None]:
    """A database error of the study (a disk full, a file damaged while the search runs) as one line."""
    import sqlalchemy.exc

    try:
        yield
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise LtrError(f"{db}: the study database failed ({getattr(exc, 'orig', None) or exc.__class__.__name__}); "
                       "the trials finished before are kept") from None


def _open_study(cfg: TuneConfig, out: Path, higher: bool):
    import optuna

    _check_study_file(out / "study.db")
    storage = optuna.storages.RDBStorage(f"sqlite:///{(out / 'study.db').resolve()}")
    study = optuna.create_study(storage=storage, study_name=STUDY_NAME, load_if_exists=True,
                                direction="maximize" if higher else "minimize")
    mark = study.user_attrs.get("ltr_config")
    if mark is None:
        study.set_user_attr("ltr_config", cfg.fingerprint())
    elif mark != cfg.fingerprint():
        raise LtrError(f"{out} holds a study of another search space or settings; use another --out")
    return study


def _recover_interrupted(study, out: Path, say: Callable[[str], None]) -> None:
    """Trials left running by a killed process: marked failed, their settings queued to run first
    (once: a retried trial that is interrupted again is not queued a third time)."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(t.number, state=TrialState.FAIL)
        shutil.rmtree(out / "tensorboard" / f"trial-{t.number:04d}", ignore_errors=True)
        again = "retry_of" not in t.user_attrs
        if again:
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
        say(f"trial {t.number} was interrupted: marked failed" + (", its settings queued again" if again else ""))


def _finished(study) -> int:
    """Trials that count towards --trials: complete, pruned, or failed by their own error (not killed)."""
    from optuna.trial import TrialState

    return sum(1 for t in study.get_trials(deepcopy=False)
               if t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (t.state == TrialState.FAIL and "error" in t.user_attrs))


def run_tuning(cfg: TuneConfig, out: str | os.PathLike, n_trials: int, data, *, pruner=None,
               say: Callable[[str], None] = print) -> TuneResult:
    """Run (or resume) the search until ``n_trials`` trials have finished; see the module docstring.

    ``data``: ``(train, valid)`` data sets. ``pruner``: an Optuna pruner to use instead of the config's.
    """
    import optuna
    from optuna.trial import TrialState

    from ltr.runs.scoring import check_metric_names, higher_is_better

    if n_trials < 1:
        raise LtrError(f"--trials must be >= 1, got {n_trials}")
    check_metric_names([cfg.metric])
    out = Path(out)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    higher = higher_is_better(cfg.metric) if cfg.kind == "neural" else True
    with _exclusive(out), _database_errors(out / "study.db"):
        study = _open_study(cfg, out, higher)
        _recover_interrupted(study, out, say)
        done = _finished(study)
        # a resumed search reseeds TPE past the trials on disk, so it does not repeat their random draws
        study.sampler = optuna.samplers.TPESampler(seed=cfg.seed + len(study.trials), n_startup_trials=cfg.startup_trials)
        study.pruner = pruner or (optuna.pruners.NopPruner() if cfg.pruner == "none" else
                                  optuna.pruners.MedianPruner(n_startup_trials=cfg.startup_trials, n_warmup_steps=cfg.warmup_epochs))
        if done:
            say(f"resuming {out / 'study.db'}: {done} of {n_trials} trials done")
        run_one = {"neural": _neural_trial, "lightgbm": _lightgbm_trial}.get(cfg.kind, _engine_trial)

        def objective(trial) -> float:
            t0 = time.perf_counter()
            settings = sample_settings(trial, cfg)
            log_dir = out / "tensorboard" / f"trial-{trial.number:04d}"
            shutil.rmtree(log_dir, ignore_errors=True)
            try:
                value, info = run_one(trial, cfg, settings, data, log_dir)
            except LtrError as exc:
                trial.set_user_attr("error", str(exc))
                say(f"trial {trial.number}: failed: {exc}")
                raise
            except optuna.TrialPruned:
                trial.set_user_attr("settings", settings)
                say(f"trial {trial.number}: pruned ({time.perf_counter() - t0:.1f} s)")
                raise
            trial.set_user_attr("settings", settings)
            trial.set_user_attr("info", info)
            if info.get("pruned_at"):
                say(f"trial {trial.number}: pruned after epoch {info['pruned_at']} (best so far {value:.4f}; {time.perf_counter() - t0:.1f} s)")
                raise optuna.TrialPruned()
            say(f"trial {trial.number}: {cfg.metric} = {value:.4f} ({time.perf_counter() - t0:.1f} s) {_shown(settings, cfg.space)}")
            return value

        remaining = n_trials - done
        if remaining > 0:
            study.optimize(objective, n_trials=remaining, catch=(LtrError,))
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not complete:
            raise LtrError(f"no trial of {out / 'study.db'} completed (all pruned or failed); see {out / 'trials.json'}")
        best = study.best_trial
        best_settings = best.user_attrs["settings"]
        toml_path = _write_best(cfg, out, best, best_settings)
        counts = _write_trials(study, out)
    return TuneResult(float(best.value), best.number, best_settings, toml_path, counts, out / "study.db")


def _write_best(cfg: TuneConfig, out: Path, best, settings) -> Path:
    from ltr.train.config import toml_text

    monitor = best.user_attrs.get("info", {}).get("monitor", cfg.metric)
    command = {"neural": "ltr train", "lightgbm": "ltr gbdt"}.get(cfg.kind, f"ltr gbdt --engine {cfg.kind}")
    header = (f"# best of {out / 'study.db'}: trial {best.number}, validation {monitor} = {best.value:.6f}\n"
              f"# {command} --config {out / 'best.toml'} --train TRAIN --valid VALID reproduces it")
    path = out / "best.toml"
    atomic_write_text(path, toml_text({t: settings[t] for t in KINDS[cfg.kind]}, header))
    return path


def _write_trials(study, out: Path) -> dict[str, int]:
    rows = []
    counts: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        state = t.state.name.lower()
        counts[state] = counts.get(state, 0) + 1
        rows.append({"number": t.number, "state": state, "value": t.value, "params": t.params,
                     "intermediate": {int(k): v for k, v in t.intermediate_values.items()},
                     **{k: v for k, v in t.user_attrs.items()}})
    atomic_write_json(out / "trials.json", {"study": str(out / "study.db"), "counts": counts, "trials": rows})
    return counts
