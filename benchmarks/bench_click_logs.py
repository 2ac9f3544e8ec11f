"""Click logs larger than memory: simulate, estimate and train on 10^6 and 10^7 logged sessions.

For each log size S (default 10^6 then 10^7 sessions) on one synthetic data set (``--queries``
MSLR-like queries, 20 features, mean list length 40, 10 items shown per session, so 10 S log rows):

1. ``ltr clicks simulate --format parquet --logger-noise 1`` (PBM, eta = 1; the logger that ranks by the
   labels plus noise, as when the figures were published): the log written chunk by chunk;
2. the streamed read alone: ``ltr.clicks.logs.stream.aggregate_log`` in batches of 10^6 rows
   (what the next two steps start with);
3. ``ltr clicks estimate --method em``: regression EM on the production sessions, streamed in
   record batches of 10^6 rows (logistic relevance, 5 bootstrap resamples);
4. ``ltr clicks train --estimator ips``: the log streamed into per-(document, position) sums, a
   linear scorer trained on them for 5 epochs.

Each step runs in a fresh Python process with one BLAS / OpenMP thread (so peak RSS is its own: ``ru_maxrss`` of the child); the
script prints per step the wall time, sessions per second and peak RSS, and the size of the log.
The log goes to a temporary folder under ``--tmp`` (default /tmp; the script checks the free space
first: about 25 bytes per log row) and is deleted afterwards.

Run: ``.venv/bin/python benchmarks/bench_click_logs.py [--sessions 1000000 10000000] [--queries 2000]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = """
import json, resource, sys, time
from ltr.cli import main
args = json.loads(sys.argv[1])
t0 = time.perf_counter()
if args[0] == "aggregate":  # the streamed read alone: ltr.clicks.logs.stream.aggregate_log
    from ltr.clicks.logs.stream import aggregate_log
    from ltr.data import load_svmlight
    agg = aggregate_log(args[1], load_svmlight(args[2]), batch_size=1_000_000)
    rc = 0 if agg.n_sessions > 0 else 1
    print(f"{agg.n_entries} rows in {agg.n_batches} batches -> {len(agg.n)} (document, position) cells")
else:
    rc = main(args)
wall = time.perf_counter() - t0
print("@@" + json.dumps({"rc": rc, "wall": wall, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


# One BLAS / OpenMP thread per step: on a shared machine a second spinning thread slows regression EM's small
# Newton solves by two orders of magnitude, which is the machine's noise, not the log's size.
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


def run_step(args: list[str]) -> dict:
    import os

    env = {**os.environ, **THREADS}
    out = subprocess.run([sys.executable, "-c", STEP, json.dumps(args)], capture_output=True, text=True, env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("@@")]
    if out.returncode or not lines:
        raise SystemExit(f"step failed: ltr {' '.join(args)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    res = json.loads(lines[-1][2:])
    if res["rc"] != 0:
        raise SystemExit(f"step returned {res['rc']}: ltr {' '.join(args)}\n{out.stderr[-2000:]}")
    res["stdout"] = out.stdout
    return res


def make_data(folder: Path, n_queries: int) -> Path:
    from ltr.data import make_mslr_like, save_svmlight

    ds = make_mslr_like(n_queries, 20, mean_list_length=40, max_list_length=200, seed=0)
    path = folder / "data.txt"
    save_svmlight(ds, path, progress=False)
    return path


def bench_size(data: Path, folder: Path, n_sessions: int, n_queries_shown: int) -> list[dict]:
    per_query = max(1, round(n_sessions / n_queries_shown))
    sim = folder / f"sim_{n_sessions}"
    steps = [
        ("simulate (parquet)", ["clicks", "simulate", "--data", str(data), "--out", str(sim), "--format", "parquet",
                                "--sessions-per-query", str(per_query), "--top-k", "10", "--seed", "0", "--quiet",
                                "--logger-noise", "1"]),  # the logger of the published figures
        ("read + aggregate", ["aggregate", str(sim / "clicks.parquet"), str(data)]),
        ("estimate --method em", ["clicks", "estimate", "--log", str(sim / "clicks.parquet"), "--data", str(data),
                                  "--method", "em", "--resamples", "5", "--positions", "10"]),
        ("train --estimator ips", ["clicks", "train", "--data", str(data), "--valid", str(data), "--log",
                                   str(sim / "clicks.parquet"), "--out", str(folder / f"model_{n_sessions}"),
                                   "--estimator", "ips", "--model", "linear", "--epochs", "5"]),
    ]
    rows = []
    for name, args in steps:
        res = run_step(args)
        if name.startswith("simulate"):
            summary = json.loads((sim / "summary.json").read_text())
            sessions = summary["n_sessions"]
            size = (sim / "clicks.parquet").stat().st_size / 2**20
        rows.append({"sessions": sessions, "step": name, "wall_s": res["wall"], "sessions_per_s": sessions / res["wall"],
                     "peak_rss_mib": res["rss_mib"], "log_mib": size})
        print(f"{sessions:>10,} sessions  {name:<24} {res['wall']:8.1f} s  {sessions / res['wall']:>12,.0f} sessions/s  "
              f"peak RSS {res['rss_mib']:7,.0f} MiB  (log {size:,.0f} MiB on disk)", flush=True)
    shutil.rmtree(sim)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--tmp", default="/tmp")
    args = ap.parse_args()
    need = max(args.sessions) * 10 * 25
    free = shutil.disk_usage(args.tmp).free
    if free < 2 * need:
        raise SystemExit(f"{args.tmp}: {free / 2**30:.1f} GiB free, the largest log needs about {need / 2**30:.1f} GiB")
    with tempfile.TemporaryDirectory(prefix="ltr-bench-clicks-", dir=args.tmp) as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        data = make_data(folder, args.queries)
        from ltr.data import load_svmlight

        ds = load_svmlight(data)
        shown = int((ds.query_lengths > 0).sum())
        print(f"data: {ds.n_queries:,} queries ({shown:,} non-empty), {ds.n_items:,} rows x {ds.n_features} features "
              f"({time.perf_counter() - t0:.1f} s); 10 items shown per session")
        rows = []
        for n in args.sessions:
            rows += bench_size(data, folder, n, shown)
        print("\n| sessions | step | wall s | sessions/s | peak RSS MiB | log on disk MiB |\n|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['sessions']:,} | {r['step']} | {r['wall_s']:.1f} | {r['sessions_per_s']:,.0f} | "
                  f"{r['peak_rss_mib']:,.0f} | {r['log_mib']:,.0f} |")


if __name__ == "__main__":
    main()
