"""Data larger than RAM: one training epoch over a memory-mapped store, with the peak resident set.

1. Checks the free disk space, then writes a store of ``--gb`` GB of features (default 6; 136
   float32 features per row, MSLR-like list lengths, grades 0..4 from a noisy linear teacher) by
   streaming synthetic blocks through ``ltr.data.store.StoreWriter``: no step holds more than one
   block of rows.
2. In a child process (so that its peak RSS is its own): opens the store (``ltr.data.open_store``),
   fits the model's log1p_standard input transform in one streaming pass, trains the default MLP
   scorer with LambdaRank for one epoch (``ltr.train.trainer.Trainer``; validation on a small
   in-RAM set), then scores every row of the store (``predict_scores``) and evaluates NDCG@10 over
   all its queries with ``metrics.evaluate``. Prints the time of each step and the child's peak RSS
   (VmHWM of ``/proc/self/status``), next to the peak right after imports.
3. ``--no-release`` runs the child with page release switched off (``release_pages`` made a no-op),
   to show what the kernel would otherwise leave in the resident set; ``--compare-ram`` runs it once
   more with the features copied into RAM first (the in-RAM path, for the throughput ratio; needs
   RAM for the whole store).
4. On a small set (400 queries), trains 2 epochs from the store and from the same data in RAM and
   prints whether the histories and final weights are bit-identical (the unit test
   ``tests/test_store.py`` checks the same).
5. Deletes the store.
6. ``ltr convert`` throughput: ``--convert-rows`` synthetic MSLR-like rows (default 200,000) written as
   SVMlight and as Parquet, each converted to a store (``convert_to_store``), rows per second and the
   peak RSS of the conversion (a child process each), beside ``load_svmlight`` / ``load_parquet`` of the
   same files into RAM.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_store.py [--gb 6] [--dir /tmp] [--no-release]
[--convert-rows N]`` (``--gb 0`` skips steps 1-3).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_FEATURES = 136
BLOCK_QUERIES = 2000


class SyntheticSource:
    """Synthetic queries in blocks of ``BLOCK_QUERIES`` (the interface StoreWriter reads)."""

    name = "synthetic"
    feature_names = None

    def __init__(self, n_rows: int, seed: int = 0):
        self.n_rows, self.seed, self.n_features = n_rows, seed, N_FEATURES
        self.teacher = np.random.default_rng(12345).normal(size=N_FEATURES) / np.sqrt(N_FEATURES)

    def describe(self, row: int) -> str:
        return f"row {row}"

    def error_at(self, row: int, message: str) -> Exception:
        return RuntimeError(f"row {row}: {message}")

    def blocks(self):
        from ltr.data.blocks import Block

        rng = np.random.default_rng(self.seed)
        row, query = 0, 0
        while row < self.n_rows:
            lengths = np.clip(np.round(rng.lognormal(np.log(100.0), 0.8, size=BLOCK_QUERIES)), 1, 1000).astype(np.int64)
            n = int(min(lengths.sum(), self.n_rows - row))
            cum = np.cumsum(lengths)
            k = int(np.searchsorted(cum, n, side="left")) + 1  # queries that fit (the last one cut)
            keys = np.repeat(np.arange(query, query + k), lengths[:k])[:n]
            x = rng.standard_normal((n, N_FEATURES), dtype=np.float32)
            np.abs(x[:, ::4], out=x[:, ::4])  # some count-like, non-negative columns
            y = np.clip(np.round(x @ self.teacher + rng.normal(0.0, 0.7, size=n) + 1.0), 0, 4)
            yield Block(features=x, labels=y, query_keys=keys, positions=np.arange(row, row + n))
            row, query = row + n, query + k


def write_store(path: Path, gb: float) -> tuple[int, float]:
    from ltr.data.store import StoreWriter

    n_rows = int(gb * 1e9 / (4 * N_FEATURES)) + 1
    source = SyntheticSource(n_rows)
    t0 = time.perf_counter()
    with StoreWriter(path, source) as writer:
        for block in source.blocks():
            writer.append(block)
        writer.close()
    return n_rows, time.perf_counter() - t0


def rss_mb() -> float:
    """Peak resident set of this process so far, in MiB: VmHWM of /proc/self/status.

    Not ``getrusage(RUSAGE_SELF).ru_maxrss``: Linux carries the parent's peak across fork and exec
    into it, so a child started by a parent that held 600 MB would report at least 600 MB.
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0  # kB
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def child(store: str, release: bool, in_ram: bool = False) -> None:
    """One epoch over the store (or, ``in_ram``, over its features copied into RAM); prints a JSON
    line with times and peak RSS."""
    import torch

    import losses
    import metrics
    from ltr.data import open_store, to_parquet
    from ltr.data import store as store_mod
    from ltr.data.synthetic import make_mslr_like
    from ltr.train.models import FeatureTransform, MLPScorer
    from ltr.train.trainer import Trainer, TrainConfig, predict_scores, seed_everything

    if not release:
        store_mod.release_pages = lambda array: None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    out = {"rss_after_imports_mb": rss_mb()}
    train = open_store(store)
    if in_ram:
        train = train.with_features(np.array(train.features))
    valid = make_mslr_like(200, N_FEATURES, seed=1)
    out.update(rows=train.n_items, queries=train.n_queries, features_gb=train.features.nbytes / 1e9)
    seed_everything(0)
    t0, c0 = time.perf_counter(), time.process_time()
    model = MLPScorer(N_FEATURES, hidden=(128, 64))
    model.set_normalizer(FeatureTransform.fit(train.features, "log1p_standard"))
    out["normalizer_fit_s"], out["normalizer_fit_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["rss_after_fit_mb"] = rss_mb()
    cfg = TrainConfig(epochs=1, batch_size=64, progress=False, metrics=("ndcg@10",), monitor="ndcg@10")
    t0, c0 = time.perf_counter(), time.process_time()
    result = Trainer(model, losses.get_loss("lambdarank"), cfg).fit(train, valid)
    out["epoch_s"], out["epoch_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["valid_ndcg@10"] = next(iter(result.valid_metrics.values()))
    out["rss_after_epoch_mb"] = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    scores = predict_scores(result.model, train.features)
    ev = metrics.evaluate(scores, train.labels, train.query_offsets, ["ndcg@10"])
    out["predict_evaluate_s"], out["predict_evaluate_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["store_ndcg@10"] = ev["ndcg@10"]
    out["peak_rss_mb"] = rss_mb()
    print(json.dumps(out))


def identical_small() -> bool:
    """2 epochs on 400 queries from a store and from RAM: same history and weights, bit for bit."""
    import losses
    from ltr.data import open_store, to_parquet
    from ltr.data.synthetic import make_synthetic_splits
    from ltr.train.models import FeatureTransform, MLPScorer
    from ltr.train.trainer import Trainer, TrainConfig, seed_everything

    train, valid, _ = make_synthetic_splits(400, 20, mean_list_length=30, seed=3)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        to_parquet(train, Path(tmp) / "train.parquet")
        from ltr.data.store import convert_to_store

        convert_to_store(Path(tmp) / "train.parquet", Path(tmp) / "train.store")
        for data in (train, open_store(Path(tmp) / "train.store")):
            seed_everything(0)
            model = MLPScorer(20, hidden=(16,))
            model.set_normalizer(FeatureTransform.fit(data.features, "log1p_standard"))
            cfg = TrainConfig(epochs=2, progress=False, metrics=("ndcg@10",))
            result = Trainer(model, losses.get_loss("lambdarank"), cfg).fit(data, valid)
            runs.append((result.history, {k: v.clone() for k, v in result.model.state_dict().items()}))
    (h1, w1), (h2, w2) = runs
    same_history = [(r["train_loss"], r["valid"]) for r in h1] == [(r["train_loss"], r["valid"]) for r in h2]
    return same_history and all(bool((w1[k] == w2[k]).all()) for k in w1)


def convert_child(src: str, out: str) -> None:
    """One conversion (or, with out == "ram", one load into RAM); prints seconds and peak RSS."""
    from ltr.data import convert_to_store, load_parquet, load_svmlight

    t0 = time.perf_counter()
    if out == "ram":
        ds = load_parquet(src) if src.endswith(".parquet") else load_svmlight(src, cache=False)
        rows = ds.n_items
    else:
        convert_to_store(src, out, progress=False)
        rows = int(json.loads((Path(out) / "store.json").read_text())["n_items"])
    print(json.dumps({"seconds": time.perf_counter() - t0, "rows": rows, "peak_rss_mb": rss_mb()}))


def bench_convert(n_rows: int, folder: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_data_load import make_rows

    from ltr.data import save_svmlight, to_parquet

    ds = make_rows(n_rows)
    save_svmlight(ds, folder / "c.txt")
    to_parquet(ds, folder / "c.parquet")
    mb = {k: (folder / f"c.{k}").stat().st_size / 1e6 for k in ("txt", "parquet")}
    print(f"\nltr convert, {n_rows:,} rows x 136 features ({ds.features.nbytes / 1e6:.0f} MB of float32; "
          f"SVMlight {mb['txt']:.0f} MB, Parquet {mb['parquet']:.0f} MB)")  # fmt: skip
    for kind in ("txt", "parquet"):
        for out in (str(folder / f"{kind}.store"), "ram"):
            proc = subprocess.run([sys.executable, __file__, "--convert-child", str(folder / f"c.{kind}"), out],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if proc.returncode != 0:
                sys.exit(proc.stderr)
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            what = "convert_to_store" if out != "ram" else ("load_svmlight   " if kind == "txt" else "load_parquet    ")
            print(f"  {'SVMlight' if kind == 'txt' else 'Parquet ':8s} {what} {r['seconds']:6.1f} s  "
                  f"{r['rows'] / r['seconds']:10,.0f} rows/s   peak RSS {r['peak_rss_mb']:5.0f} MiB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=6.0, help="GB of features in the store (default 6)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the store is written (and deleted)")
    parser.add_argument("--no-release", action="store_true", help="also run the child with page release switched off")
    parser.add_argument("--compare-ram", action="store_true", help="also run the child on the features copied into RAM")
    parser.add_argument("--convert-rows", type=int, default=200_000, help="rows of the conversion benchmark (0: skip it)")
    parser.add_argument("--default-train", action="store_true",
                        help="instead of steps 2-3: `ltr train` with its defaults and --epochs 1 on the store, peak RSS")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--release", default="1", help=argparse.SUPPRESS)
    parser.add_argument("--convert-child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.release != "0", in_ram=args.release == "ram")
        return
    if args.convert_child:
        convert_child(*args.convert_child)
        return
    if args.gb > 0:
        bench_epoch(args)
    print(f"small set, store vs RAM, 2 epochs: bit-identical history and weights: {identical_small()}")
    if args.convert_rows > 0:
        folder = Path(tempfile.mkdtemp(prefix="ltr-bench-convert-", dir=args.dir))
        try:
            bench_convert(args.convert_rows, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def bench_epoch(args) -> None:

    free = shutil.disk_usage(args.dir).free
    need = args.gb * 1e9 * 1.1 + 2e9
    print(f"parent peak RSS so far: {rss_mb():.0f} MiB")
    print(f"free disk in {args.dir}: {free / 1e9:.1f} GB (need about {need / 1e9:.1f} GB)")
    if free < need:
        sys.exit(f"not enough free disk in {args.dir}")
    store = Path(tempfile.mkdtemp(prefix="ltr-bench-store-", dir=args.dir)) / "train.store"
    try:
        n_rows, seconds = write_store(store, args.gb)
        size = sum(f.stat().st_size for f in store.iterdir()) / 1e9
        print(f"wrote {store}: {n_rows:,} rows x {N_FEATURES} features, {size:.2f} GB on disk, in {seconds:.1f} s "
              f"({n_rows / seconds:,.0f} rows/s); this process's peak RSS: {rss_mb():.0f} MiB")  # fmt: skip
        if args.default_train:
            default_train_epoch(store)
            return
        modes = ["1"] + (["0"] if args.no_release else []) + (["ram"] if args.compare_ram else [])
        for release in modes:
            proc = subprocess.run([sys.executable, __file__, "--child", str(store), "--release", release],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if proc.returncode != 0:
                sys.exit(proc.stderr)
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            label = {"1": "store, page release on", "0": "store, page release OFF", "ram": "features copied into RAM"}[release]
            print(f"\n[{label}] {r['rows']:,} rows, {r['queries']:,} queries, {r['features_gb']:.2f} GB of features")
            print(f"  peak RSS after imports       {r['rss_after_imports_mb']:8.0f} MiB")
            print("                               wall s    CPU s   peak RSS MiB")
            print(f"  normaliser fit (stream)      {r['normalizer_fit_s']:7.1f}  {r['normalizer_fit_cpu_s']:7.1f}   {r['rss_after_fit_mb']:6.0f}")
            print(f"  one epoch (MLP, LambdaRank)  {r['epoch_s']:7.1f}  {r['epoch_cpu_s']:7.1f}   {r['rss_after_epoch_mb']:6.0f}   "
                  f"({r['rows'] / r['epoch_cpu_s']:,.0f} rows per CPU second)")  # fmt: skip
            print(f"  predict + evaluate all rows  {r['predict_evaluate_s']:7.1f}  {r['predict_evaluate_cpu_s']:7.1f}   {r['peak_rss_mb']:6.0f}   "
                  f"NDCG@10 {r['store_ndcg@10']:.4f}")  # fmt: skip
            print(f"  peak RSS / features size     {r['peak_rss_mb'] * 2**20 / (r['features_gb'] * 1e9):8.3f}")
    finally:
        shutil.rmtree(store.parent, ignore_errors=True)
        print(f"\ndeleted {store.parent}")


_CLI_CHILD = r"""
import sys
from ltr.cli import main
code = main(sys.argv[1:])
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024)
sys.exit(code)
"""


def default_train_epoch(store: Path) -> None:
    """``ltr train`` with its defaults (three MLPs, ``auto`` input transform and query-norm decision) and
    ``--epochs 1`` on the store, in a child process: wall, CPU and peak RSS against the store's size."""
    from ltr.data import save_svmlight
    from ltr.data.synthetic import make_mslr_like

    valid = store.parent / "valid.txt"
    save_svmlight(make_mslr_like(200, N_FEATURES, seed=1), valid)
    argv = ["train", "--train", str(store), "--valid", str(valid), "--epochs", "1", "--quiet", "--out", str(store.parent / "run")]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CLI_CHILD, *argv], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    usage = __import__("resource").getrusage(__import__("resource").RUSAGE_CHILDREN)
    peak = float(proc.stdout.split()[-1])
    size = (store / "features.npy").stat().st_size
    print(f"\nltr train (defaults, --epochs 1) on the store: {wall:.0f} s wall, {usage.ru_utime + usage.ru_stime:.0f} CPU s, "
          f"peak RSS {peak:.0f} MiB = {peak * 2**20 / size:.2f} x the store's {size / 2**30:.2f} GiB of features")
    for line in proc.stdout.splitlines():
        if line.startswith("valid\tndcg@10"):
            print("  " + line)


if __name__ == "__main__":
    main()
