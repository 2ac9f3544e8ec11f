"""``ltr tune``: Optuna search over the trainer's, model's and loss's settings (or LightGBM's).

TPE sampling, pruning on the per-epoch validation metric, a SQLite study in ``--out`` that an
interrupted run resumes, the best configuration as ``best.toml`` for ``ltr train --config`` (or
``ltr gbdt --config``) and every trial in TensorBoard's HParams tab (:mod:`ltr.study.tune`).
"""

from __future__ import annotations

from ltr.base.checks import COUNT
from ltr.data.files import add_format_options
from ltr.base.errors import LtrError

SPLITS = ("train", "valid")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "tune",
        help="hyper-parameter search with Optuna (TPE, pruning, resumable SQLite study, best config as TOML)",
        description="Search the space of --config (see experiments/tune_lambdarank.toml) with Optuna's TPE sampler; "
        "each trial trains on --train and is judged on --valid, pruned early when its per-epoch validation metric "
        "falls behind. --out holds study.db (run the same command again to resume an interrupted search), best.toml "
        "(ltr train --config best.toml reproduces the best trial), trials.json and tensorboard/ (one HParams run per "
        "trial: tensorboard --logdir OUT/tensorboard).",
    )
    p.add_argument("--config", required=True, metavar="SPACE.toml", help="search space: [tune], [data], fixed tables and [space.*]")
    p.add_argument("--trials", required=True, type=COUNT, metavar="N", help="trials to finish in the study, counting those already in --out")
    p.add_argument("--out", required=True, metavar="DIR", help="study folder (created, or resumed when it holds study.db)")
    p.add_argument("--train", default=None, metavar="FILE", help="training data (default: [data] train of --config)")
    p.add_argument("--valid", default=None, metavar="FILE", help="validation data (default: [data] valid of --config)")
    add_format_options(p, SPLITS)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ltr.data.files import format_options, load_data_file
    from ltr.study.report_table import markdown_table
    from ltr.study.tune import load_tune_config, run_tuning

    try:
        import optuna  # noqa: F401
    except ImportError:
        raise LtrError("ltr tune needs Optuna: pip install 'ltr[tune]'") from None
    from ltr.base.checks import output_folder

    cfg = load_tune_config(args.config)
    paths = {s: getattr(args, s) or cfg.data.get(s) for s in SPLITS}
    for split, path in paths.items():
        if path is None:
            raise LtrError(f"no {split} data: pass --{split} FILE or set [data] {split} in {args.config}")
    kw = {s: format_options(args, s, SPLITS) for s in SPLITS}
    for s in SPLITS:
        kw[s]["zero_based"] = kw[s]["zero_based"] or bool(cfg.data.get("zero_based", False))
        kw[s]["query_file"] = kw[s]["query_file"] or cfg.data.get(f"{s}_query_file")
    output_folder(args.out, "--out", inputs=[("--config", args.config), ("--train", paths["train"]), ("--valid", paths["valid"])])
    train = load_data_file(paths["train"], "train", **kw["train"])
    valid = load_data_file(paths["valid"], "valid", train.n_features, **kw["valid"])
    if valid.n_features != train.n_features:
        raise LtrError(f"--valid has {valid.n_features} features, --train has {train.n_features}")
    result = run_tuning(cfg, Path(args.out), args.trials, (train, valid), say=lambda text: print(text, flush=True))
    print()
    print(markdown_table(["trials", *result.counts], [["count", *result.counts.values()]]))
    print(f"\nbest: trial {result.best_trial}, validation {cfg.metric} = {result.best_value:.4f}")
    command = {"neural": "train", "lightgbm": "gbdt"}.get(cfg.kind, f"gbdt --engine {cfg.kind}")
    print(f"wrote {result.best_toml} (use it with ltr {command} --config), "
          f"{Path(args.out) / 'trials.json'}, {Path(args.out) / 'tensorboard'}/")
    return 0
