"""GBDT engines on a store larger than they should hold: peak RSS of LightGBM (and XGBoost) trained
from a memory-mapped store in row blocks, against the in-memory runs, with the models compared.

1. Writes a training store of ``--gb`` GB (136 float32 features per row, the synthetic MSLR-like
   queries of ``bench_store.py``) and a test store of ``--test-gb`` GB (another seed), in ``--dir``.
2. Runs each case in a child process (its peak RSS, VmHWM of ``/proc/self/status``, is its own):

   - ``lightgbm ram``: the features copied into RAM (``np.array``), ``train_lightgbm`` on them:
     what ``ltr gbdt`` does with an SVMlight or Parquet file read into memory;
   - ``lightgbm mapped``: the store's memory-mapped features given whole to LightGBM, what
     ``ltr gbdt --train STORE`` did before it streamed (every page LightGBM reads stays resident);
   - ``lightgbm streamed``: ``open_streamed`` + ``train_lightgbm`` (a ``lightgbm.Sequence`` in row
     blocks), what ``ltr gbdt --train STORE`` does now;
   - ``lightgbm binned``: only the streamed ``lgb.Dataset`` built, as ``train_lightgbm`` builds it
     (``lightgbm_train_set``): the RSS it adds once built is LightGBM's own binned dataset (with
     its C++ copy of the labels), next to the estimate N x sum over features of the bytes of a bin
     index (1 byte up to 256 bins);
   - with ``--xgboost``: ``xgboost ram`` (DMatrix of the array), ``xgboost streamed``
     (QuantileDMatrix from query-aligned blocks) and ``xgboost extmem`` (ExtMemQuantileDMatrix from
     the same blocks, its pages in a temporary folder in ``--dir``: ``ltr gbdt --external-memory``;
     the cache's bytes are printed, and the folder is checked to be empty afterwards).

   Every training run: ``--rounds`` rounds, no validation set, one seed; LightGBM's histograms
   column-wise in every case (``force_col_wise=true``, what ``ltr gbdt`` chooses for a store or
   Parquet data), or row-wise with ``--row-wise`` (the toolkit's default in memory); then the test
   store is scored in blocks and NDCG@10 computed; the model's SHA-256 is printed, so equal models
   show.
3. Deletes the stores (unless ``--keep``).

Run: ``nice -n 5 python benchmarks/bench_gbdt_store.py --gb 1 [--test-gb 0.1] [--rounds 50]
[--threads 2] [--xgboost] [--dir /tmp] [--cases lightgbm:streamed,lightgbm:binned] [--row-wise]
[--block-mb 16]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_store import N_FEATURES, SyntheticSource, rss_mb  # noqa: E402

CASES = {"lightgbm": ("ram", "mapped", "streamed", "binned"), "xgboost": ("ram", "streamed", "extmem")}


def write_store(path: Path, gb: float, seed: int) -> dict:
    from ltr.data.store import StoreWriter

    n_rows = int(gb * 1e9 / (4 * N_FEATURES)) + 1
    source = SyntheticSource(n_rows, seed=seed)
    t0 = time.perf_counter()
    with StoreWriter(path, source, overwrite=True) as writer:
        for block in source.blocks():
            writer.append(block)
        writer.close()
    return {"rows": n_rows, "gb": n_rows * N_FEATURES * 4 / 1e9, "write_s": time.perf_counter() - t0}


def current_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1024.0 for line in fh if line.startswith("VmRSS:"))


class RssSampler:
    """The largest anonymous and file-backed resident sets (RssAnon, RssFile of /proc/self/status)
    seen by a thread that reads them every ``every`` seconds: which kind of memory the peak is
    (file-backed pages, e.g. a memory-mapped store or cache, can be dropped by the kernel under
    pressure; anonymous ones cannot). Sampled, so a spike shorter than ``every`` can be missed."""

    def __init__(self, every: float = 0.05):
        import threading

        self.every, self.peak = every, {"RssAnon": 0.0, "RssFile": 0.0}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            with open("/proc/self/status") as fh:
                for line in fh:
                    key = line.split(":")[0]
                    if key in self.peak:
                        self.peak[key] = max(self.peak[key], int(line.split()[1]) / 1024.0)

    def close(self) -> dict:
        self.stop.set()
        self.thread.join()
        return {"sampled_peak_anon_mb": self.peak["RssAnon"], "sampled_peak_file_mb": self.peak["RssFile"]}


def status_mb() -> dict:
    """VmHWM (the peak so far), VmRSS, RssAnon and RssFile of this process, MiB."""
    keys = ("VmHWM", "VmRSS", "RssAnon", "RssFile")
    with open("/proc/self/status") as fh:
        return {k: int(line.split()[1]) / 1024.0 for line in fh for k in [line.split(":")[0]] if k in keys}


def watch_xgboost_train(out: dict) -> None:
    """Record ``status_mb()`` when ``xgboost.train`` starts, i.e. once the matrix is built: what
    construction peaked at (VmHWM) and what the built matrix keeps resident for training."""
    import xgboost as xgb

    real = xgb.train

    def train(*args, **kwargs):
        out["at_train_start"] = status_mb()
        return real(*args, **kwargs)

    xgb.train = train


def load(path: str, how: str):
    from ltr.data import open_store
    from ltr.data.streamed import open_streamed

    if how in ("streamed", "extmem"):
        return open_streamed(path, "train")
    ds = open_store(path)
    return ds.with_features(np.array(ds.features)) if how == "ram" else ds


def binned_child(store: str, params: dict) -> dict:
    """Build the streamed LightGBM dataset only, as ``train_lightgbm`` builds it
    (``lightgbm_train_set``: constructed, LightGBM's labels on its C++ side only); the RSS it adds
    once built, and the estimate."""
    from ltr.gbdt.lightgbm import DEFAULT_PARAMS
    from ltr.gbdt.streaming import lightgbm_train_set

    data = load(store, "streamed")
    merged = {**DEFAULT_PARAMS, "seed": 0, **params}
    before = current_rss_mb()
    labels = data.labels.astype(np.float32)  # the synthetic labels are integers 0..4: their own codes
    ds = lightgbm_train_set(data, labels, np.diff(data.query_offsets), merged)
    del labels
    bins = [ds.feature_num_bin(j) for j in range(ds.num_feature())]
    per_row = sum(1 if b <= 256 else 2 if b <= 65536 else 4 for b in bins)
    return {"binned_added_mb": current_rss_mb() - before, "binned_estimate_mb": data.n_items * per_row / 2**20,
            "bins_per_feature_max": max(bins)}  # fmt: skip


def child(engine: str, how: str, store: str, test: str, rounds: int, threads: int, row_wise: bool = False,
          block_mb: float | None = None) -> None:  # fmt: skip
    """One case (see the module docstring); prints a JSON line. ``block_mb``: the engines' blocks of
    that many MB of float32 features instead of ``ltr.data.streamed.BLOCK_BYTES`` (64 MB)."""
    import importlib

    if block_mb is not None:
        import ltr.gbdt.streaming
        from ltr.data.streamed import block_rows

        ltr.gbdt.streaming.block_rows = lambda n_features: block_rows(n_features, int(block_mb * 2**20))

    import metrics
    from ltr.data.streamed import open_streamed, predict_in_blocks
    from ltr.gbdt.engines import predict_gbdt, train_gbdt

    importlib.import_module(engine)  # its imports (scipy, pandas, scikit-learn: about 190 MiB) in the baseline
    params = {"num_threads": threads} if engine == "lightgbm" else {"nthread": threads}
    if engine == "lightgbm":  # every case the same histograms: the streamed default (column-wise) or --row-wise
        params.update(force_row_wise=row_wise, force_col_wise=not row_wise)
    out: dict = {"engine": engine, "case": how, "rss_after_imports_mb": rss_mb(), "block_mb": block_mb or 64}
    if how == "binned":
        out.update(binned_child(store, params), peak_rss_mb=rss_mb())
        print(json.dumps(out))
        return
    sampler = RssSampler()
    if engine == "xgboost":
        watch_xgboost_train(out)
    t0 = time.perf_counter()
    train = load(store, how)
    out["load_s"] = time.perf_counter() - t0
    cache = Path(store).parent / "xgboost_cache" if how == "extmem" else None  # beside the store, on its disk
    if cache is not None:
        cache.mkdir()
    t0, c0 = time.perf_counter(), time.process_time()
    model, info = train_gbdt(engine, train, None, params, num_boost_round=rounds, early_stopping_rounds=None, seed=0,
                             **({} if cache is None else {"external_memory": cache}))  # fmt: skip
    out["train_s"], out["train_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    if cache is not None:
        out["cache_mb"] = info["external_memory"]["cache_bytes"] / 2**20
        out["cache_files"] = info["external_memory"]["cache_files"]
        out["cache_left"] = len(list(cache.iterdir()))  # the pages' folder is removed: 0
        cache.rmdir()
    out["rss_after_training_mb"] = rss_mb()
    test_ds = open_streamed(test, "test")
    scores = predict_in_blocks(lambda x: predict_gbdt(engine, model, x), test_ds)
    out["test_ndcg@10"] = float(metrics.evaluate(scores, test_ds.labels, test_ds.query_offsets, ["ndcg@10"])["ndcg@10"])
    text = model.model_to_string() if engine == "lightgbm" else bytes(model.save_raw(raw_format="json")).decode()
    out["model_sha256"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    out["peak_rss_mb"] = rss_mb()
    out.update(sampler.close())
    print(json.dumps(out))


def run_children(args, store: Path, test: Path) -> list[dict]:
    results = []
    engines = ["lightgbm"] + (["xgboost"] if args.xgboost else [])
    chosen = None if args.cases is None else {c.strip() for c in args.cases.split(",")}
    for engine in engines:
        for how in CASES[engine]:
            if chosen is not None and f"{engine}:{how}" not in chosen:
                continue
            cmd = [sys.executable, __file__, "--child", engine, how, str(store), str(test), "--rounds", str(args.rounds),
                   "--threads", str(args.threads)] + (["--row-wise"] if args.row_wise else [])  # fmt: skip
            cmd += [] if args.block_mb is None else ["--block-mb", str(args.block_mb)]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"child {engine} {how} failed")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["wall_s"] = time.perf_counter() - t0
            print(json.dumps(row), flush=True)
            results.append(row)
    return results


def report(results: list[dict], facts: dict) -> None:
    print(f"\ntraining store: {facts['train']['rows']:,} rows x {N_FEATURES} features = {facts['train']['gb']:.2f} GB; "
          f"test store {facts['test']['rows']:,} rows")  # fmt: skip
    print("| engine | features | train s | train CPU s | peak RSS MiB | test NDCG@10 | model sha256 |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in results:
        if r["case"] == "binned":
            continue
        blocks = "" if r["block_mb"] == 64 else f" ({r['block_mb']:g} MB blocks)"
        print(f"| {r['engine']} | {r['case']}{blocks} | {r['train_s']:.1f} | {r['train_cpu_s']:.1f} | {r['peak_rss_mb']:,.0f} | "
              f"{r['test_ndcg@10']:.6f} | {r['model_sha256']} |")  # fmt: skip
        print(f"  sampled peaks: anonymous {r['sampled_peak_anon_mb']:,.0f} MiB, file-backed {r['sampled_peak_file_mb']:,.0f} MiB")
        if "at_train_start" in r:
            a = r["at_train_start"]
            print(f"  matrix built: peak so far {a['VmHWM']:,.0f} MiB; resident {a['VmRSS']:,.0f} MiB (anonymous "
                  f"{a['RssAnon']:,.0f}, file-backed {a['RssFile']:,.0f})")  # fmt: skip
        if "cache_mb" in r:
            print(f"  page cache: {r['cache_files']} files, {r['cache_mb']:,.1f} MiB; files left after training: {r['cache_left']}")
    binned = next((r for r in results if r["case"] == "binned"), None)
    if binned is not None:
        print(f"LightGBM binned dataset: {binned['binned_added_mb']:,.0f} MiB added once built (estimate "
              f"{binned['binned_estimate_mb']:,.0f} MiB, at most {binned['bins_per_feature_max']} bins a feature); "
              f"building it peaked at {binned['peak_rss_mb']:,.0f} MiB (imports {binned['rss_after_imports_mb']:,.0f} MiB)")  # fmt: skip
        streamed = next((r for r in results if r["engine"] == "lightgbm" and r["case"] == "streamed"), binned)
        budget = binned["binned_added_mb"] + 512 + streamed["rss_after_imports_mb"]
        print(f"target: streamed peak {streamed['peak_rss_mb']:,.0f} MiB <= imports + binned + 512 MiB = {budget:,.0f} MiB: "
              f"{streamed['peak_rss_mb'] <= budget}")  # fmt: skip
        over = streamed["peak_rss_mb"] - streamed["rss_after_imports_mb"] - binned["binned_added_mb"]
        print(f"streamed peak - imports - binned = {over:,.0f} MiB ({over * 2**20 / facts['train']['rows']:.1f} bytes a training row)")
    for engine in ("lightgbm", "xgboost"):
        rows = [r for r in results if r["engine"] == engine and r["case"] != "binned"]
        if rows:
            same = len({r["model_sha256"] for r in rows}) == 1 and len({r["test_ndcg@10"] for r in rows}) == 1
            print(f"{engine}: every case the same model and NDCG@10: {same}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--test-gb", type=float, default=0.1)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--xgboost", action="store_true")
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--row-wise", action="store_true", help="LightGBM force_row_wise=true (default: force_col_wise=true, "
                   "what ltr gbdt chooses for a store or Parquet data)")
    p.add_argument("--cases", default=None, metavar="ENGINE:CASE,...", help="only these cases (e.g. lightgbm:streamed,lightgbm:binned)")
    p.add_argument("--block-mb", type=float, default=None, help="the engines' row blocks (XGBoost's batches and pages) "
                   "of this many MB of float32 features (default: ltr's 64 MB)")
    p.add_argument("--child", nargs=4, default=None, metavar=("ENGINE", "CASE", "STORE", "TEST"))
    args = p.parse_args()
    if args.child:
        engine, how, store, test = args.child
        child(engine, how, store, test, args.rounds, args.threads, args.row_wise, args.block_mb)
        return
    folder = Path(args.dir) / f"bench_gbdt_store_{os.getpid()}"
    need = (args.gb + args.test_gb) * 1.05e9
    if shutil.disk_usage(args.dir).free < need + 1e9:
        raise SystemExit(f"{args.dir}: not enough free disk for {need / 1e9:.1f} GB of stores")
    try:
        facts = {"train": write_store(folder / "train.store", args.gb, 0), "test": write_store(folder / "test.store", args.test_gb, 1)}
        print(json.dumps(facts), flush=True)
        results = run_children(args, folder / "train.store", folder / "test.store")
        report(results, facts)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
