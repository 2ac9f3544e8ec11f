"""Seconds per training epoch: one process with 2 threads vs 2 processes (torch.distributed, gloo) with 1 thread.

The same model (MLP 136-128-64-1 with log1p+standard input transform, LambdaRank, Adam 1e-3, 64
queries a batch) on the same synthetic MSLR-like queries (``ltr.data.make_synthetic_splits``, 136
features, about 120 documents a query; 80 % train, 10 % valid), the same seed:

- **1 process x 2 threads**: ``Trainer`` in this process, ``torch.set_num_threads(2)``;
- **2 processes x 1 thread**: ``DistributedTrainer`` under ``ltr.train.distributed.launch`` (each rank
  takes half of every batch's queries; validation scored on halves and gathered).

The data is generated once and saved as ``.npy`` files that every process maps read-only, so the
processes share one copy in the page cache. An epoch's seconds (from the trainer's history) include
its validation; the first epoch is reported apart (warm-up). Both runs must give the same validation
NDCG@10 every epoch (up to 1e-4): the script prints both.

``--gbdt`` also times LightGBM lambdarank on one process (2 threads) against ``DaskLGBMRanker`` on 2
local Dask workers (1 thread each) on the same training set (fixed rounds, no early stopping).

Run (full size, several minutes on a busy 2-core machine)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_distributed.py --queries 10000 --epochs 3
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_distributed.py --queries 2000 --epochs 3 --gbdt
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads yield the core (shared machine)

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from ltr.data import RankingDataset  # noqa: E402


def save_split(ds, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("features", "labels", "query_offsets", "query_ids"):
        np.save(folder / f"{name}.npy", np.asarray(getattr(ds, name)))


def load_split(folder: Path) -> RankingDataset:
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in ("features", "labels", "query_offsets", "query_ids")}
    return RankingDataset(arrays["features"], np.asarray(arrays["labels"]), np.asarray(arrays["query_offsets"]), np.asarray(arrays["query_ids"]))


def train_job(data_dir: str, epochs: int, threads: int, distributed: bool) -> dict:
    """Train and return the per-epoch history and the CPU seconds of this process."""
    import torch

    import losses
    from ltr.train.config import TrainConfig
    from ltr.train.distributed import DistributedTrainer
    from ltr.train.models import FeatureTransform, MLPScorer
    from ltr.train.trainer import Trainer, seed_everything

    torch.set_num_threads(threads)
    train, valid = load_split(Path(data_dir) / "train"), load_split(Path(data_dir) / "valid")
    seed_everything(0)
    model = MLPScorer(train.n_features, hidden=(128, 64))
    model.set_normalizer(FeatureTransform.fit(train.features, "log1p_standard"))
    cfg = TrainConfig(epochs=epochs, patience=None, progress=False, seed=0, metrics=("ndcg@10",))
    cpu0 = time.process_time()
    result = (DistributedTrainer if distributed else Trainer)(model, losses.LambdaRank(), cfg).fit(train, valid)
    return {"history": result.history, "cpu_s": time.process_time() - cpu0, "n_items": int(train.n_items)}


def run_training(data_dir: Path, epochs: int) -> dict:
    from ltr.train.distributed import launch

    out = {}
    t = time.perf_counter()
    out["1 process x 2 threads"] = {**train_job(str(data_dir), epochs, 2, False), "wall_s": time.perf_counter() - t}
    t = time.perf_counter()
    res = launch(train_job, 2, str(data_dir), epochs, 1, True)
    out["2 processes x 1 thread"] = {**res, "wall_s": time.perf_counter() - t}
    return out


def run_gbdt(train: RankingDataset, rounds: int) -> dict:
    from ltr.gbdt.lightgbm import train_lightgbm
    from ltr.gbdt.lightgbm_dask import dask_client, train_lightgbm_dask

    params = {"num_threads": 2}
    t = time.perf_counter()
    train_lightgbm(train, None, params, num_boost_round=rounds, early_stopping_rounds=None)
    single = time.perf_counter() - t
    with dask_client(workers=2) as client:
        t = time.perf_counter()
        train_lightgbm_dask(train, None, {}, client=client, num_boost_round=rounds, early_stopping_rounds=None)
        dask_s = time.perf_counter() - t
    return {"LightGBM, 1 process x 2 threads": single, "DaskLGBMRanker, 2 workers x 1 thread": dask_s, "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=10000, help="synthetic queries in all (80%% train, 10%% valid)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--gbdt", action="store_true", help="also time LightGBM vs DaskLGBMRanker")
    ap.add_argument("--rounds", type=int, default=100, help="boosting rounds for --gbdt")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()

    from ltr.data.synthetic import make_synthetic_splits

    t = time.perf_counter()
    train, valid, _ = make_synthetic_splits(n_queries=args.queries, seed=0)
    print(f"data: {train.n_queries} training queries, {train.n_items} documents, {valid.n_queries} validation queries "
          f"({time.perf_counter() - t:.0f} s to generate); load average {os.getloadavg()[0]:.1f}", flush=True)
    report: dict = {"queries": args.queries, "train_items": int(train.n_items), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        save_split(train, Path(tmp) / "train")
        save_split(valid, Path(tmp) / "valid")
        runs = run_training(Path(tmp), args.epochs)
    print("\n| setting | epoch 1 s | later epochs s (median) | train documents / s | CPU s (rank 0) | NDCG@10 per epoch |")
    print("|---|---|---|---|---|---|")
    for name, r in runs.items():
        secs = [h["seconds"] for h in r["history"]]
        later = float(np.median(secs[1:])) if len(secs) > 1 else secs[0]
        ndcg = [round(next(iter(h["valid"].values())), 4) for h in r["history"]]
        print(f"| {name} | {secs[0]:.1f} | {later:.1f} | {r['n_items'] / later:,.0f} | {r['cpu_s']:.0f} | {ndcg} |")
        report[name] = {"epoch_seconds": secs, "cpu_s": r["cpu_s"], "wall_s": r["wall_s"], "ndcg10": ndcg}
    a, b = (report[k]["ndcg10"] for k in runs)
    print(f"largest NDCG@10 difference between the two settings: {max(abs(x - y) for x, y in zip(a, b)):.2e}")
    if args.gbdt:
        g = run_gbdt(train, args.rounds)
        print(f"\nLightGBM, {g['rounds']} rounds: 1 process x 2 threads {g['LightGBM, 1 process x 2 threads']:.1f} s; "
              f"DaskLGBMRanker 2 workers x 1 thread {g['DaskLGBMRanker, 2 workers x 1 thread']:.1f} s")
        report["gbdt"] = g
    report["load_after"] = os.getloadavg()
    report["peak_rss_mb_parent"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average after: {report['load_after'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
