"""``ltr gbdt``: the LightGBM lambdarank baseline, judged by the project's metrics; writes a run folder.

The folder holds ``model.txt`` (LightGBM's text model at the best iteration) + ``model.json``,
``summary.json`` (project metrics with stamped names on valid/test, LightGBM's own per-round NDCG on
the training and validation sets, the label mapping and gains, the configuration, versions, seed,
wall time), ``importance.json`` + ``importance.png`` (LightGBM's gain and split importances) and
``tensorboard/`` (the per-round training and validation curves, the final metrics as HParams).

LightGBM's own NDCG is the project's NDCG (same gains, discount and ideal cut) except for one
convention: a query without a relevant document scores 1 in LightGBM and is skipped (left out of
the mean) by the toolkit. LightGBM's numbers are therefore stamped ``empty=one`` wherever they are
written (:func:`lightgbm_metric_names`), beside the project's ``empty=skip`` metrics.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from ltr.base.checks import integer
from ltr.data.files import add_data_options, add_format_options
from ltr.base.errors import LtrError
from ltr.gbdt.engines import ENGINES
from ltr.gbdt.params import LIGHTGBM_RULES
from ltr.train.config import GBDT_RULES as R

GBDT_KEYS = tuple(R)
SPLITS = ("train", "valid", "test")  # the data options, for --query-file OPTION=FILE
STREAMING_ENGINES = ("lightgbm", "xgboost")  # read a store / Parquet data in row blocks (ltr.gbdt.streaming)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "gbdt",
        help="train a GBDT baseline (LightGBM, XGBoost or CatBoost) and judge it with the project's metrics",
        description="Train LightGBM (objective=lambdarank) with label_gain built from the metrics' gain "
        "convention, early stopping on the validation set, and write a run folder (model.txt, "
        "summary.json, tensorboard/). Non-integer labels are mapped to the index of their distinct "
        "value with the original gains (exact for NDCG); negative labels are refused. --engine xgboost "
        "(the gains as labels) or catboost (the raw labels) train the same data, stop early on the "
        "toolkit's validation NDCG and write xgboost.json / catboost.cbm instead of model.txt.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--train", required=True, metavar="FILE", help="training data: SVMlight/LETOR, a Parquet file or folder, or a store from `ltr convert`")
    p.add_argument("--valid", required=True, metavar="FILE", help="validation data for early stopping")
    p.add_argument("--test", default=None, metavar="FILE", help="optional test data, scored with the best iteration")
    p.add_argument("--engine", default="lightgbm", choices=ENGINES, help="the GBDT library: lightgbm, or xgboost / catboost (pip install 'ltr[xgboost]' / 'ltr[catboost]')")
    p.add_argument("--objective", default=None, metavar="NAME", help="the engine's ranking objective, its first one when not given: lightgbm lambdarank | rank_xendcg; xgboost rank:ndcg | rank:pairwise; catboost YetiRank | YetiRankPairwise | QuerySoftMax")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="an engine parameter (repeatable; VALUE read as TOML: 4, 0.1, true, lossguide), over the config's [ENGINE] table")
    p.add_argument("--config", default=None, metavar="FILE.toml", help="TOML with [lightgbm] / [xgboost] / [catboost] (the engine's parameters) and [gbdt] (gain, num_boost_round, early_stopping_rounds, eval_at, monitor_k, seed, metrics, preset)")
    p.add_argument("--gain", default=None, choices=("exp2", "linear"), help="gain convention for label_gain and the metrics (default exp2)")
    p.add_argument("--num-boost-round", type=R["num_boost_round"], default=None, help="maximum boosting rounds (default 1000)")
    p.add_argument("--early-stopping-rounds", type=R["early_stopping_rounds"], default=None, help="rounds without validation improvement before stopping (default 50; 0: no early stopping)")
    p.add_argument("--learning-rate", type=LIGHTGBM_RULES["learning_rate"], default=None, help="the engine's learning rate (default: LightGBM 0.05, XGBoost 0.3, CatBoost 0.03)")
    p.add_argument("--num-leaves", type=LIGHTGBM_RULES["num_leaves"], default=None, help="LightGBM num_leaves (default 31); other engines: --param max_depth=N")
    p.add_argument("--metrics", default=None, metavar="M1,M2,...", help="project metrics for valid/test (default ndcg@1,ndcg@3,ndcg@5,ndcg@10,map,mrr)")
    p.add_argument("--preset", default=None, help="metric conventions preset for the reported metrics (default: the toolkit's own)")
    p.add_argument("--seed", type=R["seed"], default=None, help="the engine's seed (default 0)")
    p.add_argument("--external-memory", action="store_true", help="xgboost with a store or Parquet --train: keep XGBoost's quantised training pages in a cache on disk (ExtMemQuantileDMatrix; a temporary folder in the run folder, removed at the end) instead of RAM")
    g = p.add_argument_group("LightGBM on a Dask cluster (pip install 'ltr[dask]')")
    g.add_argument("--dask-workers", type=integer(min=1), default=None, metavar="N", help="train lightgbm.DaskLGBMRanker on a local Dask cluster of N worker processes")
    g.add_argument("--dask-scheduler", default=None, metavar="ADDRESS", help="train on an existing Dask cluster (e.g. tcp://host:8786); a Parquet --train folder is read by its workers")
    p.add_argument("--out", default=None, metavar="DIR", help="run folder to create (default runs/gbdt-<engine>-<time>, as ltr train's)")
    add_format_options(p, SPLITS)
    p.add_argument("--force", action="store_true", help="replace --out if it is a run folder made by ltr (never any other folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_data_options(p)
    p.set_defaults(func=run)


def resolve_settings(args) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(engine parameters, [gbdt] options)``: the config's ``[ENGINE]`` table, then --param, then the
    named options; ``opts["engine"]`` and ``opts["objective"]`` name what trains."""
    from ltr.base.checks import check_table
    from ltr.gbdt.engines import take_objective
    from ltr.gbdt.params import check_param_values
    from ltr.train.config import DEFAULT_METRICS, load_toml

    engine = getattr(args, "engine", "lightgbm")
    tables: dict[str, dict[str, Any]] = {name: {} for name in ("gbdt",) + ENGINES}
    if args.config:
        tables = load_toml(args.config, ("gbdt",) + ENGINES)
        check_table(tables["gbdt"], R, where=f"{args.config} [gbdt]")
        for name in ENGINES:
            check_param_values(tables[name], where=f"{args.config} [{name}]")
    given = parse_params(getattr(args, "param", []))
    params = {**tables[engine], **given}
    opts: dict[str, Any] = {"gain": "exp2", "num_boost_round": 1000, "early_stopping_rounds": 50, "eval_at": [1, 3, 5, 10],
                            "monitor_k": 10, "seed": 0, "metrics": list(DEFAULT_METRICS), "preset": None}
    opts.update(tables["gbdt"])
    over = {"gain": args.gain, "num_boost_round": args.num_boost_round, "early_stopping_rounds": args.early_stopping_rounds,
            "seed": args.seed, "preset": args.preset}
    opts.update({k: v for k, v in over.items() if v is not None})
    if args.metrics is not None:
        opts["metrics"] = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if args.learning_rate is not None:
        params["learning_rate"] = args.learning_rate
    if args.num_leaves is not None:
        if engine != "lightgbm":
            raise LtrError(f"--num-leaves is a LightGBM option; for {engine} use --param max_depth=N")
        params["num_leaves"] = args.num_leaves
    objective = getattr(args, "objective", None)
    opts["engine"] = engine
    if engine == "lightgbm" and objective is None:  # [lightgbm] objective (any LightGBM alias) or lambdarank
        opts["objective"] = params.get("objective", "lambdarank")
    else:  # --objective, else the table's objective / loss_function, else the engine's default
        opts["objective"], params = take_objective(engine, params, objective)
        if engine == "lightgbm":
            params["objective"] = opts["objective"]
    _check_names_and_ranges(engine, params, tables[engine], given, args.config, opts["objective"])
    return params, opts


def _check_names_and_ranges(engine: str, params, table, given, config, objective) -> None:
    """The engine's names and ranges (:func:`ltr.gbdt.params.check_engine_params`), each key named by
    where it came from: the config's [ENGINE] table or --param (the named options are checked already)."""
    from ltr.gbdt.params import check_engine_params

    sources = (("--param", given), (f"{config} [{engine}]", table))
    for where, values in sources:
        mine = {k: params[k] for k in values if k in params}
        if mine:
            check_engine_params(engine, mine, where=where, objective=objective)


def parse_params(items) -> dict[str, Any]:
    """``["max_depth=4", "grow_policy=lossguide"]`` -> ``{"max_depth": 4, "grow_policy": "lossguide"}``:
    each value read as a TOML value, else kept as text.

    >>> parse_params(["max_depth=4", "eta=0.1", "grow_policy=lossguide", "x=true"])
    {'max_depth': 4, 'eta': 0.1, 'grow_policy': 'lossguide', 'x': True}
    """
    import tomllib

    from ltr.gbdt.params import check_param_values

    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = str(item).partition("=")
        if not eq or not key.strip():
            raise LtrError(f"--param {item!r}: expected KEY=VALUE")
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        out[key.strip()] = value
    return check_param_values(out, where="--param")


def lightgbm_metric_names(names, gain) -> dict[str, str]:
    """Stamped names of LightGBM's own metrics (``ndcg@10`` -> ``ndcg@10[gain=exp2,...,empty=one,...]``).

    LightGBM's NDCG matches the project's ``lightgbm`` preset (a query without relevant items
    scores 1), with the gain convention that built ``label_gain``. Names the preset cannot stamp
    are kept with a ``lightgbm:`` prefix.
    """
    import metrics

    out = {}
    for name in names:
        try:
            ev = metrics.evaluate(np.zeros(2), np.array([1.0, 0.0]), np.array([0, 2]), [name], preset="lightgbm", gain=gain)
            out[name] = ev.names[name]
        except (ValueError, KeyError, TypeError):
            out[name] = f"lightgbm:{name}"
    return out


def _lightgbm_own_metrics(info: dict[str, Any], gain) -> dict[str, Any]:
    names = sorted({m for split in info["evals_result"].values() for m in split})
    stamped = lightgbm_metric_names(names, gain)
    return {
        "convention": "LightGBM's own metrics: a query without a relevant document scores 1 (empty=one); the "
        "project's metrics above skip such queries (empty=skip), so the two differ when the data has them",
        "best_iteration": {stamped[m]: v for m, v in info["best_score"].get("valid", {}).items()},
        "per_round": {split: {stamped[m]: v for m, v in series.items()} for split, series in info["evals_result"].items()},
    }


def run(args) -> int:
    from ltr.runs.folder import check_destination, print_run_metrics, run_folder
    from ltr.runs.scoring import check_metric_names

    t0 = time.time()
    if args.dask_workers is not None and args.dask_scheduler is not None:
        raise LtrError("--dask-workers starts a local cluster, --dask-scheduler joins an existing one: give one of them")
    if args.dask_scheduler is not None:
        from ltr.gbdt.lightgbm_dask import check_scheduler_address

        check_scheduler_address(args.dask_scheduler)
    params, opts = resolve_settings(args)
    metric_kw = {"gain": opts["gain"]} if opts["preset"] is None else {}
    check_metric_names(opts["metrics"], opts["preset"], metric_kw)  # a typo fails before training
    out = Path(args.out) if args.out else Path("runs") / f"gbdt-{opts['engine']}-{time.strftime('%Y%m%d-%H%M%S')}"
    inputs = [("--train", args.train), ("--valid", args.valid), ("--test", args.test), ("--config", args.config)]
    check_destination(out, overwrite=args.force, inputs=inputs)
    if args.dask_workers is not None or args.dask_scheduler is not None:
        if opts["engine"] != "lightgbm":
            raise LtrError(f"--dask-workers / --dask-scheduler train LightGBM only, not --engine {opts['engine']}")
        from ltr.gbdt.dask_run import run_on_dask

        return run_on_dask(args, params, opts, out, inputs)
    _check_external_memory(args, opts["engine"])
    if opts["engine"] != "lightgbm":
        from ltr.gbdt.engines import import_engine

        import_engine(opts["engine"])  # a missing library fails before the data are read
    train_ds, valid_ds, test_ds = _load_splits(args, stream=opts["engine"] in STREAMING_ENGINES)

    with run_folder(out, overwrite=args.force, kind="gbdt", inputs=inputs) as tmp:
        fit = _run_lightgbm if opts["engine"] == "lightgbm" else _run_engine
        metrics_out, best_round = fit(tmp, args, params, opts, metric_kw, (train_ds, valid_ds, test_ds), t0)
    print_run_metrics(out, metrics_out, best_round, unit="round")
    return 0


def _check_external_memory(args, engine: str) -> None:
    """--external-memory: XGBoost only, on a training set read in row blocks (refused before any data are read)."""
    from ltr.data.files import data_format, data_options

    if not getattr(args, "external_memory", False):
        return
    if engine != "xgboost":
        raise LtrError(f"--external-memory is an option of --engine xgboost (XGBoost's page cache on disk), not of {engine}")
    if not Path(args.train).expanduser().exists():
        return  # the reader says what is missing
    if data_format(args.train) not in ("store", "parquet") or data_options(args).sort_by_query:
        raise LtrError(f"--external-memory: --train {args.train} would be read into memory (only a store or Parquet "
                       "data without --sort-by-query is read in row blocks); convert it first "
                       f"(`ltr convert {args.train} --out TRAIN.store`), or leave --external-memory out")  # fmt: skip


def _run_lightgbm(tmp: Path, args, params, opts, metric_kw, datasets, t0: float) -> dict[str, dict[str, float]]:
    """Train LightGBM into the run folder ``tmp`` (model, importance, TensorBoard, summary)."""
    from ltr.gbdt.lightgbm import save_booster, train_lightgbm
    from ltr.models.importance import write_importance

    train_ds, valid_ds, test_ds = datasets
    booster, info = train_lightgbm(
        train_ds, valid_ds, params,
        gain=opts["gain"], num_boost_round=opts["num_boost_round"], early_stopping_rounds=opts["early_stopping_rounds"],
        eval_at=opts["eval_at"], monitor_k=opts["monitor_k"], seed=opts["seed"], progress=not args.quiet,
        record_train=True,
    )
    metrics_out = _judge_booster(booster, {"valid": valid_ds, "test": test_ds}, opts, metric_kw)
    save_booster(booster, tmp, n_features=train_ds.n_features, best_iteration=info["best_iteration"], feature_names=train_ds.feature_names)

    own = _lightgbm_own_metrics(info, opts["gain"])
    write_importance(tmp, info["importance"])
    tags = _write_tensorboard(tmp / "tensorboard", own, info, opts, metrics_out)
    _write_summary(tmp, args, opts, info, own, metrics_out, tags, datasets, t0)
    return metrics_out, info["best_iteration"]


def _run_engine(tmp: Path, args, params, opts, metric_kw, datasets, t0: float) -> dict[str, dict[str, float]]:
    """Train XGBoost or CatBoost into the run folder ``tmp`` (model, importance, TensorBoard, summary)."""
    from ltr.data.streamed import predict_in_blocks
    from ltr.gbdt.engines import predict_gbdt, save_gbdt, train_gbdt
    from ltr.models.importance import write_importance
    from ltr.runs.scoring import evaluate_scores

    train_ds, valid_ds, test_ds = datasets
    engine = opts["engine"]
    model, info = train_gbdt(engine, train_ds, valid_ds, params, objective=opts["objective"], gain=opts["gain"],
                             num_boost_round=opts["num_boost_round"], early_stopping_rounds=opts["early_stopping_rounds"],
                             eval_at=opts["eval_at"], monitor_k=opts["monitor_k"], seed=opts["seed"], progress=not args.quiet,
                             external_memory=tmp if getattr(args, "external_memory", False) else None)  # fmt: skip
    metrics_out = {}
    for split, ds in (("valid", valid_ds), ("test", test_ds)):
        if ds is not None:
            scores = predict_in_blocks(lambda x: predict_gbdt(engine, model, x), ds)
            ev = evaluate_scores(scores, ds, opts["metrics"], opts["preset"], metric_kw)
            metrics_out[split] = {k: float(v) for k, v in ev.mean.items()}
    save_gbdt(engine, model, tmp, info, n_features=train_ds.n_features, feature_names=train_ds.feature_names)
    write_importance(tmp, info["importance"])
    # the curves: the toolkit's validation NDCG that early stopping watched, and the engine's own
    per_round = {"valid": {info["monitor"]: info["curve"]}} if info["monitor"] else {}
    for split, series in info["own_metrics"]["per_round"].items():
        per_round.setdefault(split, {}).update({f"{engine}:{name}": v for name, v in series.items()})
    own = {"convention": info["own_metrics"]["convention"], "per_round": per_round}
    tags = _write_tensorboard(tmp / "tensorboard", own, {**info, "engine": engine}, opts, metrics_out)
    _write_summary(tmp, args, opts, info, own, metrics_out, tags, datasets, t0)
    return metrics_out, info["best_iteration"]


def _load_splits(args, stream: bool = False):
    """The train, valid and test data sets (test None when not given), with one feature count.

    ``stream``: a store or a Parquet file/folder (without --sort-by-query) is opened as a
    :class:`~ltr.data.streamed.StreamedData` (labels and queries in memory, the features read in row
    blocks by the engine, the predictions and the metrics); other files are read into memory."""
    from ltr.data.files import data_format, data_options, format_options, load_data_file
    from ltr.data.signal import check_signal
    from ltr.data.streamed import open_streamed

    options = data_options(args)

    def load(path, option, n_features, names):
        if path is None:
            return None
        where = Path(path).expanduser()  # a FIFO or device is left to the reader, which refuses it unopened
        if stream and (where.is_file() or where.is_dir()) and data_format(path) in ("store", "parquet") and not options.sort_by_query:
            return open_streamed(path, option, n_features, options, feature_names=names)
        return load_data_file(path, option, n_features, options, feature_names=names, **format_options(args, option, SPLITS))

    train_ds = load(args.train, "train", None, None)
    check_signal(train_ds, args.train)  # every feature constant: nothing to learn, refused before training
    valid_ds = load(args.valid, "valid", train_ds.n_features, train_ds.feature_names)
    test_ds = load(args.test, "test", train_ds.n_features, train_ds.feature_names)
    for name, ds in (("valid", valid_ds), ("test", test_ds)):
        if ds is not None and ds.n_features != train_ds.n_features:
            raise LtrError(f"--{name} has {ds.n_features} features, --train has {train_ds.n_features}")
    return train_ds, valid_ds, test_ds


def _judge_booster(booster, splits: dict[str, Any], opts: dict[str, Any], metric_kw: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Mean project metrics of the booster's scores (best iteration) on each given split."""
    from ltr.data.streamed import predict_in_blocks
    from ltr.gbdt.lightgbm import predict_booster
    from ltr.runs.scoring import evaluate_scores

    metrics_out: dict[str, dict[str, float]] = {}
    for split, ds in splits.items():
        if ds is None:
            continue
        scores = predict_in_blocks(lambda x: predict_booster(booster, x), ds)  # a store is never read whole
        ev = evaluate_scores(scores, ds, opts["metrics"], opts["preset"], metric_kw)
        metrics_out[split] = {k: float(v) for k, v in ev.mean.items()}
    return metrics_out


def _write_tensorboard(log_dir: Path, own: dict[str, Any], info: dict[str, Any], opts: dict[str, Any],
                       metrics_out: dict[str, dict[str, float]]) -> dict[str, Any]:  # fmt: skip
    """Log LightGBM's per-round curves and the final metrics as HParams; return the logger's tags."""
    from ltr.runs.tensorboard_log import ScalarLogger  # no torch: the run logs scalars and HParams only

    logger = ScalarLogger(log_dir)
    try:
        # one step per boosting round: the training curve and the validation curve, stamped
        for split, series in own["per_round"].items():
            for name, values in series.items():
                for i, value in enumerate(values, 1):
                    logger.metrics(split, {name: value}, i)
        hp = {f"{info.get('engine', 'lightgbm')}.{k}": v for k, v in info["params"].items()} | {f"gbdt.{k}": v for k, v in opts.items()}
        logger.hparams(hp, metrics_out, info["best_iteration"])
    finally:
        logger.close()
    return dict(logger.tags)


def _write_summary(tmp: Path, args, opts, info, own, metrics_out, tags, datasets, t0: float) -> None:
    """Write ``summary.json`` (metrics, LightGBM's own curves, label mapping, configuration, data, versions)."""
    from ltr.data.files import data_facts
    from ltr.base.io_utils import atomic_write_json
    from ltr.runs.folder import versions

    train_ds, valid_ds, test_ds = datasets
    engine = opts.get("engine", "lightgbm")
    summary = {
        "kind": "gbdt",
        "engine": engine,
        "objective": opts.get("objective"),
        "arguments": {k: v for k, v in vars(args).items() if k != "func"},
        "seed": opts["seed"],
        "metrics": metrics_out,
        "best_iteration": info["best_iteration"],
        f"{engine}_own_metrics": own,
        "importance": {"json": "importance.json", "png": "importance.png"},
        "config": {engine: info["params"], "gbdt": {k: v for k, v in opts.items() if k in GBDT_KEYS}},
        "data": {k: data_facts(p, d) for k, p, d in (("train", args.train, train_ds), ("valid", args.valid, valid_ds), ("test", args.test, test_ds)) if d is not None},
        "versions": versions(),
        "tensorboard": {"log_dir": "tensorboard", "tags": tags},
        "wall_time_s": time.time() - t0,
    }
    if engine == "lightgbm":
        summary.update(label_gain=info["label_gain"], label_values=info["label_values"])
    else:
        summary.update(rounds_run=info["rounds_run"], external_memory=info.get("external_memory"), early_stopping={
            "monitor": info["monitor"], "best_value": info["best_score"], "curve": info["curve"],
            "rule": "the toolkit's validation metric after every round; stop after early_stopping_rounds "
                    "rounds without improvement; the model keeps the first best round"})
    atomic_write_json(tmp / "summary.json", summary)
