"""``ltr calibrate --stream`` on a Parquet folder of N impressions: peak memory and impressions per second.

1. Writes a folder of Parquet files (``--chunk`` rows each, never more in memory) drawn from
   :func:`ltr.calibrate.fields_data.make_field_world` (100 advertisers, 50 sites, 3 devices, 4
   positions; the pooled model's logit as the score, a 0/1 click): six columns ``advertiser, site,
   device, position`` (int16 / int8), ``score`` (float32 logit), ``label`` (int8).
2. Runs ``ltr calibrate --table FOLDER --stream --score-scale logit --method field-aware
   --field-columns ...`` in a child process and reports its wall time, impressions per second, its
   CPU seconds (on a shared machine the fairer time) and peak resident memory (``getrusage(RUSAGE_CHILDREN).ru_maxrss``: the child's whole process, Python,
   pyarrow and the binned tables included), and the number of binned entries it kept.
3. Deletes the folder (unless ``--keep``).

Run: ``nice -n 5 .venv/bin/python benchmarks/bench_calibrate_stream.py --rows 10000000 [--fields advertiser,site,device,position]
[--bin-width 0.05] [--dir /tmp]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_folder(folder: Path, rows: int, chunk: int, seed: int = 0) -> float:
    """Write ``rows`` impressions as ``ceil(rows / chunk)`` Parquet files; returns the bytes on disk."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.calibrate.fields_data import make_field_world

    world = make_field_world(seed=seed)
    for k, start in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - start)
        imp = world.impressions(n, seed=seed + 1 + k)
        f = imp.fields
        table = pa.table({"advertiser": f["advertiser"].astype(np.int16), "site": f["site"].astype(np.int16),
                          "device": f["device"].astype(np.int8), "position": f["position"].astype(np.int8),
                          "score": imp.pooled_logit.astype(np.float32), "label": imp.clicks.astype(np.int8)})
        pq.write_table(table, folder / f"part-{k:05d}.parquet")
        del imp, table
    return float(sum(p.stat().st_size for p in folder.glob("*.parquet")))


def run_stream(folder: Path, out: Path, fields: str, bin_width: float, batch_size: int) -> dict:
    cmd = [sys.executable, "-m", "ltr.cli", "calibrate", "--table", str(folder), "--stream", "--score-scale", "logit",
           "--method", "field-aware", "--field-columns", fields, "--bin-width", str(bin_width),
           "--batch-size", str(batch_size), "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"ltr calibrate failed:\n{proc.stderr}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    rep = json.loads((out / "report.json").read_text())
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak_kib / 1024, "report": rep, "text": proc.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--chunk", type=int, default=2_000_000)
    ap.add_argument("--fields", default="advertiser,site,device,position")
    ap.add_argument("--bin-width", type=float, default=0.05)
    ap.add_argument("--batch-size", type=int, default=262_144)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary folder goes")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--reuse", default=None, help="a folder written by an earlier --keep run (skips writing)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_calibrate_stream_", dir=args.dir))
    try:
        folder = Path(args.reuse) if args.reuse else work / "table"
        if not args.reuse:
            folder.mkdir()
            t0 = time.perf_counter()
            size = write_folder(folder, args.rows, args.chunk)
            print(f"wrote {args.rows:,} impressions in {time.perf_counter() - t0:.1f} s: {size / 2**30:.2f} GiB of Parquet")
        r = run_stream(folder, work / "out", args.fields, args.bin_width, args.batch_size)
        rep, timing = r["report"], r["report"]["timing"]
        b = rep["field_report"]["binning"]
        print(r["text"], end="")
        print(f"fields {args.fields}, bin width {args.bin_width}, batch {args.batch_size:,} rows, python {sys.version.split()[0]}, "
              f"{os.cpu_count()} cores")
        print(f"ltr calibrate --stream: wall {r['wall_s']:.1f} s (read and bin {timing['read_and_bin_s']:.1f} s, fit and "
              f"report {timing['fit_and_report_s']:.1f} s), {args.rows / r['wall_s']:,.0f} impressions/s end to end; "
              f"CPU {r['cpu_s']:.1f} s ({args.rows / r['cpu_s']:,.0f} impressions per CPU second); load average "
              f"{os.getloadavg()[0]:.1f}; "
              f"peak RSS {r['peak_rss_mib']:,.0f} MiB, entries fit {b['entries_fit']:,} / eval {b['entries_eval']:,}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
