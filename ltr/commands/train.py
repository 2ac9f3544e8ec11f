"""``ltr train``: fit a scorer (linear, MLP, context-aware attention; optionally a seed ensemble)
with a ranking loss; write a complete run folder.

The run folder (``--out``) holds ``model.pt`` + ``model.json`` (the best epoch's weights and the
architecture, loadable without pickle), ``summary.json`` (metrics with their stamped names, the
configuration, versions, seed, wall time, per-epoch history) and ``tensorboard/`` (event files).
It is written in a hidden temporary folder and renamed at the end: a failed run leaves nothing.

Precedence of settings: command-line options > the TOML file (``--config``) > defaults.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from ltr.base.checks import integer
from ltr.data.files import add_data_options, add_format_options
from ltr.base.errors import LtrError
from ltr.train.config import LOSS_NAMES, LOSS_RULES, MODEL_RULES, MODEL_TYPE_NAMES, NORMALIZE_CHOICES, QUERY_NORM_CHOICES
from ltr.train.config import TRAIN_RULES as R

MODEL_KEYS = tuple(MODEL_RULES)
SPLITS = ("train", "valid", "test")  # the data options, for --query-file OPTION=FILE
LOSS_HELP = (f"loss name for losses.get_loss: {', '.join(LOSS_NAMES)}; options such as "
             "k or temperature go in the --config [loss] table (default softmax: the defaults study of docs/experiments.md)")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a linear, MLP or context-aware (attention) ranker with a ranking loss (early stopping, TensorBoard, checkpoints)",
        description="Train a scorer on SVMlight/LETOR files with a loss from `losses`, validate every epoch, "
        "keep the best epoch's weights, and write a run folder (model, summary.json, tensorboard/). "
        "Options given here override the --config TOML file, which overrides the defaults.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--train", required=True, metavar="FILE", help="training data: SVMlight/LETOR (qid:, or a .query sidecar), a Parquet file or folder "
                   "(columns: see below), or a memory-mapped store written by `ltr convert` (data larger than RAM)")
    p.add_argument("--valid", required=True, metavar="FILE", help="validation data: picks the best epoch and stops early")
    p.add_argument("--test", metavar="FILE", default=None, help="optional test data, scored once with the best weights")
    p.add_argument("--loss", default=None, metavar="NAME", help=LOSS_HELP)
    p.add_argument("--model", default=None, choices=MODEL_TYPE_NAMES, help="scorer type (default mlp); attention = "
                   "self-attention over each query's items (masked Transformer encoder, see --width/--heads/--layers)")
    p.add_argument("--width", type=MODEL_RULES["width"], default=None, help="attention: embedding width, a multiple of --heads (default 64)")
    p.add_argument("--heads", type=MODEL_RULES["heads"], default=None, help="attention: heads per layer (default 2)")
    p.add_argument("--layers", type=MODEL_RULES["layers"], default=None, help="attention: encoder blocks (default 2)")
    p.add_argument("--query-norm", default=None, choices=QUERY_NORM_CHOICES,
                   help="normalise each feature within its query after the input transform (LETOR's QueryLevelNorm): zscore / minmax replace the features, "
                        "append_zscore / append_minmax add the normalised copies beside them; the model then scores whole queries. auto (the default for mlp): "
                        "zscore when the training features are already min-max normalised within each query (as LETOR 4.0's MQ2008), else none; "
                        "chosen by the defaults study of docs/experiments.md (default none for the other types)")
    p.add_argument("--input-noise", type=MODEL_RULES["input_noise"], default=None, metavar="STD",
                   help="Gaussian noise of this standard deviation on the (normalised) inputs while training (default 0.1 for mlp, 0 for the others)")
    p.add_argument("--ensemble", type=MODEL_RULES["ensemble"], default=None, metavar="N",
                   help="train N models with seeds seed..seed+N-1 and save their score average as one model (default 3 for mlp, "
                        "chosen by the defaults study of docs/experiments.md; 1 for the other types; --ensemble 1 trains one MLP in a third of the time)")
    p.add_argument("--hidden", default=None, metavar="W1,W2,...", help="MLP hidden widths (default 128,64)")
    p.add_argument("--activation", default=None, type=MODEL_RULES["activation"], help="MLP activation: relu, leaky_relu, gelu, elu, silu, tanh, sigmoid (default relu)")
    p.add_argument("--dropout", type=MODEL_RULES["dropout"], default=None, help="dropout probability (default 0 for mlp, 0.1 for attention)")
    p.add_argument("--batch-norm", action="store_true", default=None, help="batch normalisation after each hidden layer (valid items only)")
    p.add_argument("--normalize", default=None, choices=NORMALIZE_CHOICES, help="input transform fitted on the training split and saved in the model; auto: per feature, constant ones dropped, heavy-tailed ones signed-log1p'd, robust scale, clipped to the training range (default auto)")
    p.add_argument("--epochs", type=R["epochs"], default=None, help="maximum number of epochs (default 30)")
    p.add_argument("--batch-size", type=R["batch_size"], default=None, help="queries per batch, or auto (the default): n_train_queries // 30 between 4 and 64, "
                        "chosen by the defaults study of docs/experiments.md")
    p.add_argument("--bucket-size", type=R["bucket_size"], default=None, help="length bucketing: this many shuffled queries are sorted by length before batches are cut; "
                   "smaller = more random batches (equal to --batch-size: no bucketing), larger = less padding (default: 50 batches)")
    p.add_argument("--lr", type=R["lr"], default=None, help="Adam learning rate (default 0.001)")
    p.add_argument("--weight-decay", type=R["weight_decay"], default=None, help="Adam weight decay (default 0)")
    p.add_argument("--patience", type=R["patience"], default=None, help="epochs without improvement before stopping (default 5)")
    p.add_argument("--monitor", default=None, help="validation metric that picks the best epoch (default ndcg@10); ranking metrics and auc: higher is better; "
                   "logloss, brier (on sigmoid(score), for pointwise BCE / click models with 0/1 labels): lower is better")
    p.add_argument("--metrics", default=None, metavar="M1,M2,...", help="validation/test metrics (default ndcg@1,ndcg@3,ndcg@5,ndcg@10,map,mrr; also logloss, brier, auc for 0/1 labels)")
    p.add_argument("--preset", default=None, help="metric conventions preset: trec_eval, sklearn, lightgbm, ranx (default: the toolkit's own)")
    p.add_argument("--seed", type=R["seed"], default=None, help="random seed for weights, batch order and dropout (default 0)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N or auto (default cpu)")
    p.add_argument("--checkpoint-dir", default=None, metavar="DIR", help="write last.pt here after every epoch; if it already holds one from the same configuration, resume from it "
                   "(e.g. after a crash, or with a larger --epochs to extend a run); the new run folder's TensorBoard logs then hold every epoch "
                   "(the restored epochs' scalars are written again; their score histograms are not kept)")
    p.add_argument("--config", default=None, metavar="FILE.toml", help="TOML file with [train], [model] and [loss] tables")
    p.add_argument("--out", default=None, metavar="DIR", help="run folder to create (default runs/train-<loss>-<model>-<time>)")
    add_format_options(p, SPLITS)
    p.add_argument("--force", action="store_true", help="replace --out if it is a run folder made by ltr (never any other folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    # more than a few processes per core only thrashes (and 10^5 runs out of file descriptors)
    p.add_argument("--nproc", type=integer(min=1, max=4 * (os.cpu_count() or 1)), default=1, metavar="N", help="train with N processes on this machine (torch.distributed data parallel: "
                   "gloo on CPU, NCCL on CUDA; each takes 1/N of every batch, same result as one process with the same --batch-size). "
                   "For several machines run `torchrun --nnodes M --nproc-per-node N -m ltr train ...` (without --nproc)")
    add_data_options(p)
    p.set_defaults(func=run)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def resolve_settings(args) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Merge defaults, the TOML file and the command line -> (train, model, loss) dicts."""
    from ltr.base.checks import check_table
    from ltr.train.config import TrainConfig, load_toml
    from ltr.train.settings import DEFAULT_ENSEMBLE, DEFAULT_LOSS, model_defaults

    tables = {"train": {}, "model": {}, "loss": {}}
    if args.config:
        tables = load_toml(args.config, ("train", "model", "loss"))
        check_table(tables["model"], MODEL_RULES, where=f"{args.config} [model]")
        TrainConfig.from_dict(tables["train"], source=f"{args.config} [train]")  # checks keys and values early
        for key, value in tables["loss"].items():  # other keys: losses.get_loss names the ones it does not take
            if key in LOSS_RULES:
                LOSS_RULES[key].check(value, f"{args.config} [loss] {key}")
    train = dict(tables["train"])
    kind = args.model or tables["model"].get("type", "mlp")
    model = model_defaults(kind)
    model["ensemble"] = DEFAULT_ENSEMBLE if kind == "mlp" else 1
    model.update(tables["model"])
    loss = {"name": DEFAULT_LOSS}
    loss.update(tables["loss"])

    overrides = {
        "epochs": args.epochs, "batch_size": args.batch_size, "bucket_size": args.bucket_size, "lr": args.lr, "weight_decay": args.weight_decay,
        "patience": args.patience, "monitor": args.monitor, "preset": args.preset, "seed": args.seed,
        "device": args.device, "checkpoint_dir": args.checkpoint_dir,
    }
    train.update({k: v for k, v in overrides.items() if v is not None})
    if args.metrics is not None:
        train["metrics"] = _split(args.metrics)
    if args.checkpoint_dir is not None:
        train["resume"] = True
    if args.quiet:
        train["progress"] = False
    model_over = {"type": args.model, "activation": args.activation, "dropout": args.dropout,
                  "batch_norm": args.batch_norm, "normalize": args.normalize, "width": args.width,
                  "heads": args.heads, "layers": args.layers, "input_noise": args.input_noise, "query_norm": args.query_norm,
                  "ensemble": args.ensemble}
    model.update({k: v for k, v in model_over.items() if v is not None})
    if args.hidden is not None:
        try:
            model["hidden"] = [int(h) for h in _split(args.hidden)]
        except ValueError:
            raise LtrError(f"--hidden must be comma-separated integers, got {args.hidden!r}") from None
        MODEL_RULES["hidden"].check(model["hidden"], "--hidden")
    if args.loss is not None:
        loss["name"] = args.loss
    if model["normalize"] not in NORMALIZE_CHOICES:
        raise LtrError(f"normalize must be one of {', '.join(NORMALIZE_CHOICES)}, got {model['normalize']!r}")
    return train, model, loss


def run(args) -> int:
    """One process, ``--nproc N`` processes (launched here), or one worker of torchrun's job."""
    from ltr.train import distributed

    train_cfg, model_cfg, _ = resolve_settings(args)
    device = str(train_cfg.get("device", "cpu"))
    if distributed.launched_by_torchrun():
        if args.nproc > 1:
            raise LtrError("--nproc is for a job launched by ltr itself; under torchrun use its --nproc-per-node")
        with distributed.process_group(device=device):
            return _run(args)
    if args.nproc > 1:
        try:
            return distributed.launch(_run, args.nproc, args, device=device)
        except distributed.WorkerFailedError as exc:
            ckpt = Path(args.checkpoint_dir) / "last.pt" if args.checkpoint_dir else None
            kept = f"; last checkpoint kept: {ckpt} (run the same command to resume)" if ckpt and ckpt.exists() else ""
            raise LtrError(f"distributed training stopped: {exc}{kept}") from None
    return _run(args)


def _run(args) -> int:
    from ltr.train.distributed import DistributedTrainer, context
    from ltr.train.config import TrainConfig
    from ltr.train.models import save_model
    from ltr.base.checks import output_folder
    from ltr.runs.folder import check_destination, print_run_metrics, run_folder
    from ltr.train.settings import build_loss, build_scorer, resolve_query_norm
    from ltr.runs.scoring import check_metric_names
    from ltr.train.trainer import Trainer, resolve_device, seed_everything

    t0 = time.time()
    ctx = context()
    train_cfg, model_cfg, loss_cfg = resolve_settings(args)
    out = Path(args.out) if args.out else Path("runs") / f"train-{loss_cfg['name']}-{model_cfg['type']}-{time.strftime('%Y%m%d-%H%M%S')}"
    inputs = [("--train", args.train), ("--valid", args.valid), ("--test", args.test), ("--config", args.config)]
    check_destination(out, overwrite=args.force, inputs=inputs)  # before minutes of work, not after
    if args.checkpoint_dir is not None:
        output_folder(args.checkpoint_dir, "--checkpoint-dir", inputs=inputs)
        _check_checkpoint_kind(Path(args.checkpoint_dir), model_cfg["ensemble"])
    loss = build_loss(loss_cfg)
    settings = TrainConfig.from_dict(train_cfg, source="train settings")
    check_metric_names(settings.metrics, settings.preset, settings.conventions)  # a typo fails before any work
    resolve_device(settings.device)
    train_ds, valid_ds, test_ds = _load_splits(args)
    model_cfg, query_norm_facts = resolve_query_norm(model_cfg, train_ds)  # once, before any member is built
    if query_norm_facts and ctx.is_main and not args.quiet:
        _say_query_norm(query_norm_facts)
    if not ctx.is_main:  # the other ranks of a distributed job train; rank 0 alone writes the run folder
        if model_cfg["ensemble"] > 1:
            _fit_ensemble(settings, model_cfg, loss, train_ds, valid_ds, test_ds)
            return 0
        seed_everything(settings.seed)
        DistributedTrainer(build_scorer(model_cfg, train_ds), loss, settings).fit(train_ds, valid_ds, test_ds)
        return 0

    with run_folder(out, overwrite=args.force, kind="train", inputs=inputs) as tmp:
        cfg = TrainConfig.from_dict({**train_cfg, "log_dir": str(tmp / "tensorboard")}, source="train settings")
        if model_cfg["ensemble"] > 1:
            result, members = _fit_ensemble(cfg, model_cfg, loss, train_ds, valid_ds, test_ds)
        else:
            seed_everything(cfg.seed)  # the initial weights depend on the seed too
            model = build_scorer(model_cfg, train_ds)
            hp = {f"model.{k}": v for k, v in model_cfg.items()} | {f"loss.{k}": v for k, v in loss_cfg.items()}
            trainer = (DistributedTrainer if ctx.active else Trainer)(model, loss, cfg, hparams=hp)
            result, members = trainer.fit(train_ds, valid_ds, test_ds), None
        save_model(result.model, tmp)
        metrics_out = {"valid": result.valid_metrics}
        if result.test_metrics is not None:
            metrics_out["test"] = result.test_metrics
        recorded_model = {**model_cfg, **({"query_norm_rule": query_norm_facts} if query_norm_facts else {})}
        _write_summary(tmp, args, cfg, recorded_model, loss_cfg, result, members, metrics_out, (train_ds, valid_ds, test_ds), ctx, t0)
    print_run_metrics(out, metrics_out, result.best_epoch if members is None else [m["best_epoch"] for m in members])
    return 0


def _say_query_norm(facts: dict[str, Any]) -> None:
    """One line on stderr: what ``--query-norm auto`` chose, and from what."""
    import sys

    why = "already min-max normalised within each query" if facts["chosen"] != "none" else "not normalised per query"
    print(f"query-norm auto: {facts['chosen']} (training features {why}: {facts['features_minmax']} of "
          f"{facts['features_checked']} checked features span [0, 1] in the queries where they vary; "
          f"{facts['queries_read']} queries read)", file=sys.stderr)


def _load_splits(args):
    """The train, valid and test data sets (test None when not given), read with the data options."""
    from ltr.data.files import data_options, format_options, load_data_file
    from ltr.data.signal import check_signal

    options = data_options(args)
    train_ds = load_data_file(args.train, "train", None, options, **format_options(args, "train", SPLITS))
    check_signal(train_ds, args.train)  # every feature constant: nothing to learn, refused before training
    valid_ds = load_data_file(args.valid, "valid", train_ds.n_features, options, feature_names=train_ds.feature_names,
                              **format_options(args, "valid", SPLITS))  # fmt: skip
    test_ds = load_data_file(args.test, "test", train_ds.n_features, options, feature_names=train_ds.feature_names,
                             **format_options(args, "test", SPLITS))  # fmt: skip
    return train_ds, valid_ds, test_ds


def _write_summary(tmp: Path, args, cfg, model_cfg, loss_cfg, result, members, metrics_out, datasets, ctx, t0: float) -> None:
    """Write ``summary.json`` (metrics, best epoch, configuration, data, versions, history, ensemble members)."""
    from ltr.data.files import data_facts
    from ltr.base.io_utils import atomic_write_json
    from ltr.runs.folder import versions
    from ltr.train.models import input_transform_report

    train_ds, valid_ds, test_ds = datasets
    summary = {
        "kind": "train",
        "arguments": {k: v for k, v in vars(args).items() if k != "func"},
        "seed": cfg.seed,
        "metrics": metrics_out,
        "monitor": result.monitor,
        "monitor_higher_is_better": result.higher_is_better,
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "stopped_early": result.stopped_early,
        "config": {"train": _train_settings(cfg, train_ds), "model": model_cfg, "loss": loss_cfg},
        "data": {k: data_facts(p, d) for k, p, d in (("train", args.train, train_ds), ("valid", args.valid, valid_ds), ("test", args.test, test_ds)) if d is not None},
        "versions": versions(),
        "tensorboard": {"log_dir": "tensorboard", "tags": result.tensorboard_tags},
        "history": result.history,
        "distributed": {"world_size": ctx.world_size, "backend": ctx.backend},
        "wall_time_s": time.time() - t0,
    }
    if members is not None:
        summary["ensemble"] = members
    report = input_transform_report(result.model)
    if report is not None:  # the per-feature decisions, also on their own beside the model
        summary["input_transform"] = {"kind": report["kind"], "counts": report["counts"], "file": "input_transform.json"}
        atomic_write_json(tmp / "input_transform.json", report)
    atomic_write_json(tmp / "summary.json", summary)


def _check_checkpoint_kind(folder: Path, ensemble: int) -> None:
    """An ensemble keeps one checkpoint per member (``member-K/last.pt``): a one-model ``last.pt`` in the
    folder would be silently ignored, so it is refused (and the reverse)."""
    single, members = (folder / "last.pt").exists(), any(folder.glob("member-*/last.pt"))
    if ensemble > 1 and single:
        raise LtrError(f"{folder / 'last.pt'}: this checkpoint is of one model, and ltr train averages {ensemble} "
                       "by default; resume it with --ensemble 1, or choose another --checkpoint-dir")
    if ensemble == 1 and members:
        raise LtrError(f"{folder}: holds the checkpoints of an ensemble (member-K/last.pt); resume them with "
                       "--ensemble N as they were written, or choose another --checkpoint-dir")


def _train_settings(cfg, train_ds) -> dict[str, Any]:
    """The [train] settings as run: an "auto" batch size is written as the number it chose, and the rule."""
    from ltr.train.config import auto_batch_size

    settings = {**cfg.to_dict(), "log_dir": "tensorboard"}
    if settings["batch_size"] == "auto":
        settings.update(batch_size=auto_batch_size(train_ds.n_queries), batch_size_rule="auto")
    return settings


def _fit_ensemble(cfg, model_cfg, loss, train_ds, valid_ds, test_ds):
    """Train ``model_cfg["ensemble"]`` members with seeds seed, seed+1, ...; returns a FitResult-like
    record of the ensemble (its best epoch / history are the first member's) and the members' facts."""
    import dataclasses

    from ltr.train.distributed import DistributedTrainer, context
    from ltr.train.ensemble import fit_ensemble
    from ltr.train.settings import build_scorer, fit_input_transform

    seeds = [cfg.seed + k for k in range(model_cfg["ensemble"])]
    transform = fit_input_transform(model_cfg, train_ds)  # once for every member: the data are read once

    def member_config(c, k):
        changes = {"log_dir": None if cfg.log_dir is None else f"{cfg.log_dir}/member-{k}"}
        if cfg.checkpoint_dir is not None:
            changes["checkpoint_dir"] = f"{cfg.checkpoint_dir}/member-{k}"
        return dataclasses.replace(c, **changes)

    fit = fit_ensemble(lambda seed: build_scorer(model_cfg, train_ds, transform), loss, cfg, train_ds, valid_ds, test_ds,
                       seeds=seeds, member_config=member_config,
                       trainer_class=DistributedTrainer if context().active else None)
    first = fit.members[0]
    result = dataclasses.replace(first, model=fit.model, valid_metrics=fit.valid_metrics, test_metrics=fit.test_metrics,
                                 wall_time_s=fit.wall_time_s, tensorboard_tags={})
    members = [{"seed": s, "best_epoch": f.best_epoch, "epochs_run": f.epochs_run, "stopped_early": f.stopped_early,
                "valid": f.valid_metrics} for s, f in zip(seeds, fit.members)]
    return result, members
