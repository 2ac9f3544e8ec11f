"""``ltr ablate``: a resumable grid of data sets x methods x seeds, with intervals and paired tests.

Each finished cell is stored under ``OUT/cells/`` as it completes; running the same command again
on the same ``--out`` re-runs only the missing (or stale) cells and rebuilds the same report:
``results.md``, ``results.json``, ``means.png``, ``tensorboard/`` and ``config.json``.
"""

from __future__ import annotations

import sys

from ltr.base.checks import integer
from ltr.base.errors import LtrError
from ltr.study.report_table import counted
from ltr.train.config import LOSS_NAMES


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ablate",
        help="ablation grid (data sets x methods x seeds): means with CIs, paired tests vs a reference, resumable",
        description="Train every (data set, method, seed) cell with early stopping on the validation split, "
        "evaluate it on the test split with the configured metrics, store it under OUT/cells as it "
        "finishes, and write results.md, results.json, means.png and TensorBoard HParams runs. "
        "Re-running on the same --out re-runs only missing or stale cells. Methods: any loss of `losses` by "
        f"name ({', '.join(LOSS_NAMES)}), LOSS@K for a cutoff, MODEL/LOSS[@K] for another "
        "scorer (mlp, linear, attention), a GBDT engine (lightgbm, xgboost, catboost; ENGINE:OBJECTIVE for another "
        "objective, e.g. xgboost:rank_pairwise, catboost:QuerySoftMax, lightgbm:rank_xendcg), or a [variants.NAME] table of the config (settings, "
        "ensemble = N, a tune grid tried tuning_budget times on the validation split).",
    )
    p.add_argument("--config", metavar="FILE.toml", default=None,
                   help="ablation TOML ([ablation], [train], [model], [models.TYPE], [lightgbm], [xgboost], [catboost], [gbdt], [loss_options], "
                   "[variants.NAME], [[datasets]]); without it: the built-in synthetic study (or the quick one with --quick)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder, reused to resume (default runs/ablate, or runs/ablate-quick with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="small synthetic study (ranknet, lambdarank, lambdarank@10, lightgbm x 5 seeds, each cell "
                   "trained until early stopping; under 3 minutes on 2 cores) that prints its table; ignores --config")
    p.add_argument("--workers", type=integer(min=0), default=0, metavar="N",
                   help="cells trained in parallel processes (default 0: one per CPU core; results do not depend on it)")
    p.add_argument("--seeds", type=integer(min=1), default=None, metavar="S", help="override the number of seeds: seeds 0..S-1 (default: the config's, 5)")
    p.add_argument("--methods", default=None, metavar="M1,M2,...",
                   help="override the methods (the reference method must be among them)")
    p.add_argument("--datasets", default=None, metavar="D1,D2,...", help="run only these data sets of the config")
    p.add_argument("--reference", default=None, metavar="METHOD", help="override the reference method of the paired tests")
    p.add_argument("--tuning-budget", type=integer(min=1), default=None, metavar="N",
                   help="override the configurations tried per method and cell (methods with a tune grid; default: the config's)")
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from stored cells (error if any is missing)")
    p.add_argument("--no-tensorboard", action="store_true", help="skip the TensorBoard HParams runs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def build_config(args):
    from ltr.study import ablation

    if args.quick:
        config = ablation.quick_config()
    elif args.config:
        # the files of a data set left out by --datasets are not looked for (a shipped config names shared data)
        config = ablation.load_config(args.config, only=None if args.datasets is None else _split(args.datasets))
    else:
        config = ablation.default_config()
    changes = {}
    if args.seeds is not None:
        if args.seeds < 1:
            raise LtrError(f"--seeds must be >= 1, got {args.seeds}")
        changes["seeds"] = list(range(args.seeds))
    if args.methods is not None:
        changes["methods"] = _split(args.methods)
    if args.reference is not None:
        changes["reference"] = args.reference
    if args.tuning_budget is not None:
        changes["tuning_budget"] = args.tuning_budget
    if args.datasets is not None:
        wanted = _split(args.datasets)
        known = [d.name for d in config.datasets]
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise LtrError(f"--datasets: unknown {unknown}; the config has {known}")
        changes["datasets"] = [d for d in config.datasets if d.name in wanted]
    if changes:
        config = ablation.config_copy(config, **changes)
    return config


def _older_ablation(folder) -> bool:
    """An ablation folder written before folders were marked: config.json and cells/."""
    return (folder / "config.json").is_file() and (folder / "cells").is_dir()


def run(args) -> int:
    from ltr.base.io_utils import atomic_write_json
    from ltr.study import ablation
    from ltr.study.report import write_report

    from ltr.runs.folder import claim_folder

    config = build_config(args)
    out = args.out or ("runs/ablate-quick" if args.quick else "runs/ablate")
    # an ablation folder is reused to resume; any other non-empty folder is refused
    data = [(f"[[datasets]] {d.name} {k}", d.options[k]) for d in config.datasets for k in ("train", "valid", "test", "path")
            if isinstance(d.options.get(k), str)]  # nothing new inside a data set's folder either
    claim_folder(out, "ablate", inputs=[("--config", args.config), *data], legacy=_older_ablation,
                 create=not args.report_only)
    n_cells = len(ablation.enumerate_cells(config))
    n_splits = sum(len(d.folds()) for d in config.datasets)
    print(f"ablation: {len(config.datasets)} data set(s) ({n_splits} train/test split(s) with the folds) x "
          f"{counted(len(config.methods), 'method')} x {counted(len(config.seeds), 'seed')} = {counted(n_cells, 'cell')} -> {out}",
          file=sys.stderr)
    if args.report_only:
        records = ablation.load_cells(out, config)
        cells = {"total": n_cells, "run": 0, "reused": n_cells, "stale": 0}
    else:
        atomic_write_json(f"{out}/config.json", ablation._json_safe(config.to_dict()))
        res = ablation.run_ablation(config, out, workers=args.workers, progress=not args.no_progress)
        records = res.records
        cells = {"total": res.n_cells, "run": res.n_run, "reused": res.n_reused, "stale": res.n_stale,
                 "wall_time_s": round(res.wall_time_s, 2)}
        print(f"cells: {res.n_cells} in the grid, {res.n_run} run ({res.n_stale} stale), {res.n_reused} reused; "
              f"{res.wall_time_s:.1f} s", file=sys.stderr)
    write_report(records, config, out, cells=cells, tensorboard=not args.no_tensorboard)
    with open(f"{out}/results.md", encoding="utf-8") as fh:
        print(fh.read())
    print(f"written: {out}/results.md, {out}/results.json, {out}/means.png"
          + ("" if args.no_tensorboard else f", {out}/tensorboard/"), file=sys.stderr)
    return 0
