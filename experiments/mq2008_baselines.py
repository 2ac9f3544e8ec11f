"""Baselines on MQ2008 (LETOR 4.0, five official folds) and on LightGBM's lambdarank example data.

Methods: LightGBM lambdarank (``ltr.gbdt.lightgbm.train_lightgbm``), MLP + LambdaRank and MLP + RankNet
(``ltr.train.trainer.Trainer``), all early-stopped on the validation NDCG@10 and judged on the test set by
``metrics.evaluate`` with the toolkit's conventions (names stamped in the output).

MQ2008 folds (SOURCE.md of the data): Fold1 train S1,S2,S3 vali S4 test S5; Fold2 train S2,S3,S4
vali S5 test S1; Fold3 train S3,S4,S5 vali S1 test S2; Fold4 train S4,S5,S1 vali S2 test S3; Fold5
train S5,S1,S2 vali S3 test S4. The LightGBM example has only train and test: 20% of the training
queries (seeded) become the validation set.

MLP settings (128-64 hidden, dropout 0.1, Adam lr 1e-3, 16 queries a batch, patience 15, raw
features: MQ2008 is already min-max normalised per query) were chosen by the mean *validation*
NDCG@10 of MLP + LambdaRank over the five folds among five candidates (standard vs no input
normalisation, 64 hidden + batch norm, 64 hidden + weight decay 1e-4, LambdaRank truncated at 10);
the test sets played no part in the choice. LightGBM runs with ``ltr.gbdt.lightgbm``'s defaults
(learning rate 0.05, 31 leaves, early stopping after 50 rounds).

Run (about 10 minutes on one busy core)::

    .venv/bin/python experiments/mq2008_baselines.py --out runs/mq2008_baselines.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import losses
from ltr.data import concat_datasets, load_svmlight, split_by_query
from ltr.base.io_utils import atomic_write_json
from ltr.study import markdown_table
from ltr.train import (
    FeatureTransform,
    MLPScorer,
    TrainConfig,
    Trainer,
    evaluate_scores,
    predict_booster,
    seed_everything,
    train_lightgbm,
)
from ltr.runs.folder import versions

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LTR_SHARED_DIR", ROOT.parent / "shared")) / "data"
FOLDS = {
    1: ((1, 2, 3), 4, 5),
    2: ((2, 3, 4), 5, 1),
    3: ((3, 4, 5), 1, 2),
    4: ((4, 5, 1), 2, 3),
    5: ((5, 1, 2), 3, 4),
}
METRICS = ("ndcg@10", "map")


def mq2008_folds(folds):
    parts = {i: load_svmlight(SHARED / "letor4-mq2008" / f"S{i}.txt", n_features=46) for i in range(1, 6)}
    for f in folds:
        tr, va, te = FOLDS[f]
        yield f"fold{f}", concat_datasets([parts[i] for i in tr]), parts[va], parts[te]


def lightgbm_example():
    d = SHARED / "lightgbm-lambdarank-example"
    train_all = load_svmlight(d / "rank.train")
    test = load_svmlight(d / "rank.test", n_features=train_all.n_features)
    train, valid = split_by_query(train_all, (0.8, 0.2), seed=0)
    yield "example", train, valid, test


def run_lightgbm(train, valid, test, seed, args):
    booster, info = train_lightgbm(train, valid, {"num_threads": args.threads}, num_boost_round=1000, early_stopping_rounds=50, seed=seed)
    ev = evaluate_scores(predict_booster(booster, test.features), test, METRICS)
    return {k: float(v) for k, v in ev.mean.items()}, {"best_iteration": info["best_iteration"]}


def run_mlp(loss_name, train, valid, test, seed, args):
    seed_everything(seed)
    model = MLPScorer(train.n_features, hidden=(128, 64), dropout=args.dropout)
    if args.normalize != "none":
        model.set_normalizer(FeatureTransform.fit(train.features, args.normalize))
    cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                      metrics=METRICS, seed=seed, progress=False)
    result = Trainer(model, losses.get_loss(loss_name), cfg).fit(train, valid, test)
    return result.test_metrics, {"best_epoch": result.best_epoch, "epochs_run": result.epochs_run}


METHODS = {
    "lightgbm-lambdarank": run_lightgbm,
    "mlp-lambdarank": lambda *a: run_mlp("lambdarank", *a),
    "mlp-ranknet": lambda *a: run_mlp("ranknet", *a),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folds", default="1,2,3,4,5", help="MQ2008 folds to run")
    p.add_argument("--datasets", default="mq2008,example", help="mq2008 and/or example")
    p.add_argument("--methods", default=",".join(METHODS), help="subset of " + ", ".join(METHODS))
    p.add_argument("--seed", type=int, default=0, help="seed of every method")
    p.add_argument("--epochs", type=int, default=100, help="MLP: maximum epochs")
    p.add_argument("--patience", type=int, default=15, help="MLP: early-stopping patience")
    p.add_argument("--batch-size", type=int, default=16, help="MLP: queries per batch")
    p.add_argument("--lr", type=float, default=1e-3, help="MLP: Adam learning rate")
    p.add_argument("--dropout", type=float, default=0.1, help="MLP: dropout")
    p.add_argument("--normalize", default="none", help="MLP input normalisation (none, standard, log1p, log1p_standard)")
    p.add_argument("--threads", type=int, default=1, help="torch and LightGBM threads")
    p.add_argument("--out", default="runs/mq2008_baselines.json", help="JSON results file")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    methods = [m for m in args.methods.split(",") if m]
    folds = [int(f) for f in args.folds.split(",") if f]

    sources = []
    if "mq2008" in args.datasets:
        sources.append(("mq2008", mq2008_folds(folds)))
    if "example" in args.datasets:
        sources.append(("lightgbm-example", lightgbm_example()))
    results: dict = {"versions": versions(), "args": vars(args), "runs": []}
    for dataset, splits in sources:
        for split_name, train, valid, test in splits:
            for method in methods:
                t0 = time.perf_counter()
                test_metrics, extra = METHODS[method](train, valid, test, args.seed, args)
                row = {"dataset": dataset, "split": split_name, "method": method, "test": test_metrics,
                       "seconds": time.perf_counter() - t0, **extra}
                results["runs"].append(row)
                short = {k.split("[")[0]: round(v, 4) for k, v in test_metrics.items()}
                print(f"{dataset:18s} {split_name:8s} {method:20s} {short} {extra} {row['seconds']:.1f}s", flush=True)

    # mean over folds per data set and method
    table = {}
    for r in results["runs"]:
        table.setdefault((r["dataset"], r["method"]), []).append(r["test"])
    results["mean"] = []
    names = None
    cells = []
    for (dataset, method), rows in table.items():
        names = list(rows[0])
        means = {k: float(np.mean([row[k] for row in rows])) for k in names}
        results["mean"].append({"dataset": dataset, "method": method, "test": means, "n_splits": len(rows)})
        cells.append([dataset, method] + [f"{means[k]:.4f}" for k in names] + [len(rows)])
    print("\n" + markdown_table(["data set", "method"] + [f"test {m} (mean)" for m in METRICS] + ["splits"], cells))
    if names:
        print("\nmetric names: " + "; ".join(names))
    atomic_write_json(args.out, results)
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
