"""The default path at WEB30K size on this machine: every command with no options, its time, memory and NDCG.

1. Writes a synthetic MSLR-like set (``ltr.data.synthetic.make_mslr_like``: 136 features, heavy-tailed
   list lengths, labels 0..4; ``--queries`` 30,000 by default, about 3.6M rows) split 60 / 20 / 20 by
   query as MSLR's folds are, each part a Parquet file.
2. Runs the user's path, each command in a child process of its own (``/usr/bin/time``'s figures are
   not used: the child reports its own VmHWM, and its CPU time comes from ``getrusage``):
   ``ltr convert`` of the training part to a store; ``ltr train`` (no options); ``ltr gbdt`` (no
   options: LightGBM); ``ltr gbdt --engine catboost``; ``ltr blend`` of the neural run and the better
   GBDT run by validation; ``ltr predict`` of the blend on the test part; ``ltr eval`` of that run.
3. Prints one table row per step (wall s, CPU s, peak RSS) and the test NDCG@10 of every model (its
   run folder's summary, the toolkit's conventions), and writes OUT/results.json.

Run: ``nice python benchmarks/bench_default_path.py --out /tmp/web30k [--queries 30000] [--skip catboost]``;
a step whose output exists is not run again (delete OUT to start afresh). Needs about 6 GB of disk.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import sys
from ltr.cli import main
code = main(sys.argv[1:])
print("VmHWM_kB", next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")))
sys.exit(code)
"""
NDCG10 = "ndcg@10[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]"


def write_data(out: Path, n_queries: int, seed: int) -> dict:
    from ltr.data import split_by_query, to_parquet
    from ltr.data.synthetic import make_mslr_like

    if (out / "test.parquet").exists():
        return json.loads((out / "data.json").read_text())
    t0 = time.perf_counter()
    ds = make_mslr_like(n_queries, 136, seed=seed)
    parts = split_by_query(ds, (0.6, 0.2, 0.2), seed=seed)
    facts = {"queries": n_queries, "rows": int(ds.n_items), "seconds": time.perf_counter() - t0}
    del ds
    for name, part in zip(("train", "valid", "test"), parts):
        to_parquet(part, out / f"{name}.parquet")
        facts[name] = {"queries": int(part.n_queries), "rows": int(part.n_items)}
    (out / "data.json").write_text(json.dumps(facts, indent=1))
    return facts


def step(name: str, argv: list, done: Path, results: dict) -> None:
    """Run ``ltr ARGV`` in a child; record wall, CPU (user + system) and the child's peak RSS."""
    if name in results and done.exists():
        print(f"{name}: done before ({results[name]['wall_s']:.0f} s)")
        return
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, *map(str, argv)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{name} failed:\n{proc.stderr[-3000:]}")
    peak = int(proc.stdout.split("VmHWM_kB")[-1].split()[0]) * 1024
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    results[name] = {"argv": [str(a) for a in argv], "wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": peak,
                     "stdout_tail": proc.stdout.splitlines()[-12:]}
    print(f"{name}: {wall:.0f} s wall, {cpu:.0f} CPU s, peak RSS {peak / 2**30:.2f} GiB", flush=True)


def test_ndcg(run: Path) -> float | None:
    summary = json.loads((run / "summary.json").read_text())
    test = summary.get("metrics", {}).get("test", {})
    if isinstance(test.get("blend"), (int, float)):  # ltr blend's summary
        return float(test["blend"])
    return test.get(NDCG10)


def valid_ndcg(run: Path) -> float:
    summary = json.loads((run / "summary.json").read_text())
    return summary["metrics"]["valid"][NDCG10]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--queries", type=int, default=30_000)
    p.add_argument("--seed", type=int, default=30)
    p.add_argument("--skip", default="", help="comma-separated steps to leave out: catboost")
    args = p.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    facts = write_data(out, args.queries, args.seed)
    print(f"data: {facts['rows']:,} rows, {facts['queries']:,} queries (train {facts['train']['rows']:,} rows)")
    results_file = out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}

    def save():
        results_file.write_text(json.dumps(results, indent=1))

    train, valid, test = (out / f"{s}.parquet" for s in ("train", "valid", "test"))
    store = out / "train.store"
    plan = [
        ("ltr convert", ["convert", train, "--out", store, "--quiet"], store),
        ("ltr train", ["train", "--train", store, "--valid", valid, "--test", test, "--quiet", "--out", out / "neural"], out / "neural"),
        ("ltr gbdt", ["gbdt", "--train", store, "--valid", valid, "--test", test, "--quiet", "--out", out / "lightgbm"], out / "lightgbm"),
        ("ltr gbdt --engine catboost", ["gbdt", "--engine", "catboost", "--train", store, "--valid", valid, "--test", test,
                                        "--quiet", "--out", out / "catboost"], out / "catboost"),
    ]
    for name, argv, done in plan:
        if "catboost" in name and "catboost" in args.skip.split(","):
            continue
        step(name, argv, done, results)
        save()
    gbdts = [r for r in ("lightgbm", "catboost") if (out / r / "summary.json").exists()]
    best_gbdt = max(gbdts, key=lambda r: valid_ndcg(out / r))
    step("ltr blend", ["blend", "--models", out / best_gbdt, out / "neural", "--valid", valid, "--test", test,
                       "--out", out / "blend"], out / "blend", results)
    step("ltr predict", ["predict", "--model", out / "blend", "--data", test, "--out", out / "test.run",
                         "--qrels", out / "test.qrels"], out / "test.run", results)
    step("ltr eval", ["eval", "--qrels", out / "test.qrels", "--run", out / "test.run", "--metrics", "ndcg@10"],
         out / "test.run", results)
    results["models"] = {r: {"test_ndcg@10": test_ndcg(out / r), "valid_ndcg@10": valid_ndcg(out / r) if r != "blend" else None}
                         for r in ("neural", *gbdts, "blend")}
    results["blend_gbdt_member"] = best_gbdt
    save()
    print("\n| step | wall s | CPU s | peak RSS |\n|---|---:|---:|---:|")
    for name, r in results.items():
        if isinstance(r, dict) and "wall_s" in r:
            print(f"| `{name}` | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | {r['peak_rss_bytes'] / 2**30:.2f} GiB |")
    print("\n| model | test NDCG@10 |\n|---|---:|")
    for name, r in results["models"].items():
        print(f"| {name} | {r['test_ndcg@10']:.4f} |")


if __name__ == "__main__":
    main()
