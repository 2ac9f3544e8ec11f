"""The run of ``ltr gbdt --dask-workers N`` / ``--dask-scheduler ADDRESS``: the LightGBM baseline on a Dask cluster.

The same run folder as ``ltr gbdt`` (``model.txt`` in LightGBM's text format + ``model.json``, so
``ltr predict`` loads it; ``summary.json``; ``tensorboard/``), trained by
:func:`ltr.gbdt.lightgbm_dask.train_lightgbm_dask`. A Parquet ``--train`` file or folder is read by the
cluster's workers as a Dask data frame (partitions re-cut at query boundaries); an SVMlight file is
read here and cut at query boundaries, one partition per worker. ``--valid`` (judged whole by every
worker for early stopping) and ``--test`` are read into memory as ``ltr gbdt`` reads them.
:mod:`ltr.commands.gbdt` resolves the settings and checks the destination, then calls :func:`run_on_dask`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ltr.base.errors import LtrError

SPLITS = ("train", "valid", "test")  # the data options of ltr gbdt, for --query-file OPTION=FILE


def _columns(args) -> dict[str, Any]:
    """The Parquet column roles given on the command line (``ltr gbdt``'s data options, when present)."""
    features = getattr(args, "feature_columns", None)
    if isinstance(features, str):
        features = [c.strip() for c in features.split(",") if c.strip()]
    exclude = [c for c in (getattr(args, "doc_id_column", None), getattr(args, "weight_column", None)) if c]
    return {"query_column": getattr(args, "query_column", "qid"), "label_column": getattr(args, "label_column", "label"),
            "feature_columns": features, "exclude": exclude}  # fmt: skip


def _load_in_memory(path, option: str, n_features: int | None, args):
    """``--valid`` / ``--test`` as ``ltr gbdt`` reads them (with its column options where it has them)."""
    from ltr.data import files

    if path is None:
        return None
    return files.load_data_file(path, option, n_features, files.data_options(args), **files.format_options(args, option, SPLITS))


def _read_train(args, client):
    from ltr.data.parquet import is_parquet
    from ltr.gbdt.lightgbm_dask import from_dataset, read_parquet_for_ranking

    if not Path(args.train).exists():
        raise LtrError(f"--train {args.train}: file not found")
    if is_parquet(args.train):
        return read_parquet_for_ranking(args.train, **_columns(args)), None
    ds = _load_in_memory(args.train, "train", None, args)
    return from_dataset(ds, len(client.scheduler_info()["workers"]), client=client), ds


def _quiet_lightgbm() -> None:
    """Route LightGBM's Python-side messages in this process to a logger that shows errors only
    (the workers' own C++ network notices still print)."""
    import logging

    import lightgbm as lgb

    logger = logging.getLogger("lightgbm")
    logger.setLevel(logging.ERROR)
    lgb.register_logger(logger)


def run_on_dask(args, params: dict[str, Any], opts: dict[str, Any], out: Path, inputs) -> int:
    """Train on the cluster, judge valid/test with the project's metrics, write the run folder ``out``."""
    from ltr.data.files import data_facts
    from ltr.base.io_utils import atomic_write_json
    from ltr.gbdt.lightgbm import predict_booster, save_booster
    from ltr.gbdt.lightgbm_dask import dask_client, require_dask, train_lightgbm_dask
    from ltr.runs.folder import print_run_metrics, run_folder, versions
    from ltr.runs.tensorboard_log import ScalarLogger  # no torch: the run logs scalars and HParams only
    from ltr.runs.scoring import evaluate_scores

    t0 = time.time()
    require_dask()
    metric_kw = {"gain": opts["gain"]} if opts["preset"] is None else {}
    with dask_client(args.dask_workers, args.dask_scheduler) as client:
        _quiet_lightgbm()
        train, _ = _read_train(args, client)
        valid_ds = _load_in_memory(args.valid, "valid", train.n_features, args)
        test_ds = _load_in_memory(args.test, "test", train.n_features, args)
        with run_folder(out, overwrite=args.force, kind="gbdt", inputs=inputs) as tmp:
            booster, info = train_lightgbm_dask(
                train, valid_ds, params, client=client, gain=opts["gain"], num_boost_round=opts["num_boost_round"],
                early_stopping_rounds=opts["early_stopping_rounds"] or None, eval_at=opts["eval_at"], monitor_k=opts["monitor_k"], seed=opts["seed"],
            )  # fmt: skip
            metrics_out: dict[str, dict[str, float]] = {}
            for split, ds in (("valid", valid_ds), ("test", test_ds)):
                if ds is not None:
                    ev = evaluate_scores(predict_booster(booster, ds.features), ds, opts["metrics"], opts["preset"], metric_kw)
                    metrics_out[split] = {k: float(v) for k, v in ev.mean.items()}
            save_booster(booster, tmp, n_features=train.n_features, best_iteration=info["best_iteration"])
            tags = _log_tensorboard(ScalarLogger, tmp / "tensorboard", info, opts, metrics_out)
            data = {"train": {"path": str(args.train), "n_queries": info["dask"]["n_queries"], "n_items": info["dask"]["n_items"],
                              "n_features": train.n_features}}  # fmt: skip
            data.update({k: data_facts(p, d) for k, p, d in (("valid", args.valid, valid_ds), ("test", args.test, test_ds)) if d is not None})
            summary = {
                "kind": "gbdt", "arguments": {k: v for k, v in vars(args).items() if k != "func"}, "seed": opts["seed"],
                "metrics": metrics_out, "best_iteration": info["best_iteration"], "lightgbm_best_score": info["best_score"],
                "lightgbm_evals_result": info["evals_result"], "label_gain": info["label_gain"], "label_values": info["label_values"],
                "config": {"lightgbm": info["params"], "gbdt": opts}, "dask": {**info["dask"], "scheduler": args.dask_scheduler or "local"},
                "data": data, "versions": versions(), "tensorboard": {"log_dir": "tensorboard", "tags": tags},
                "wall_time_s": time.time() - t0,
            }  # fmt: skip
            atomic_write_json(tmp / "summary.json", summary)
    print_run_metrics(out, metrics_out, info["best_iteration"], unit="round")
    return 0


def _log_tensorboard(logger_cls, log_dir: Path, info: dict, opts: dict, metrics_out: dict) -> dict[str, str]:
    logger = logger_cls(log_dir)
    try:
        for name, series in info["evals_result"].get("valid", {}).items():
            for i, value in enumerate(series, 1):
                logger.scalar(f"lightgbm_valid/{name}", value, i)
        hp = {f"lightgbm.{k}": v for k, v in info["params"].items()} | {f"gbdt.{k}": v for k, v in opts.items()}
        logger.hparams(hp | {"dask.workers": info["dask"]["workers"]}, metrics_out, info["best_iteration"])
        return dict(logger.tags)
    finally:
        logger.close()
