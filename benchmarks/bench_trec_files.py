"""Run files of real size: ``ltr eval`` on an MS MARCO-scale run against pytrec_eval, time and peak memory.

    .venv/bin/python benchmarks/bench_trec_files.py --dir /tmp/trec_bench            # 7,000 x 1,000 + 210,000 qrels
    .venv/bin/python benchmarks/bench_trec_files.py --dir /tmp/trec_bench --queries 700 --runs 3

Generates (seeded, once; kept in ``--dir``, which should not be in the repository) a run of
``--queries`` queries x ``--depth`` documents (``qid Q0 docno rank score tag``, MS MARCO-like ids)
and qrels with ``--judged`` documents per query (grades 0..3, about half of them retrieved), then
times, each in a fresh process (wall time, CPU time and peak RSS of the child, from ``wait4``):

* ``ltr eval --metrics ndcg@10,map,recall@100`` (the columnar reader, :func:`ltr.data.trec.read_run_table`);
* the same evaluation through the line-by-line reader (``read_run`` / ``read_qrels`` dictionaries,
  ``align``): what ``ltr eval`` did before;
* pytrec_eval: the files parsed in Python into its dictionaries, then ``RelevanceEvaluator``
  (ndcg_cut.10, map, recall.100) in C;

and checks that the three means agree (trec_eval conventions: ``--preset trec_eval``). ``--steps``
prints the CPU seconds of each step of ltr eval's work (imports, reading, join, metrics). With
``--runs N`` it also times ``ltr compare`` of N such runs (different seeds) against pytrec_eval
evaluating each. The load average is printed: on a shared machine wall times include waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
METRICS = "ndcg@10,map,recall@100"


def generate(folder: Path, queries: int, depth: int, judged: int, n_runs: int, seed: int = 0) -> list[Path]:
    """Write qrels.txt and run{i}.txt into ``folder`` unless they are there already."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pool = 8_841_823  # MS MARCO passages
    retrieved = [rng.choice(pool, size=depth, replace=False) for _ in range(queries)]
    qrels_path = folder / "qrels.txt"
    if not qrels_path.exists():
        with open(qrels_path, "w") as fh:
            for q in range(queries):
                hits = retrieved[q][rng.choice(depth, judged // 2, replace=False)]
                others = rng.choice(pool, judged - judged // 2, replace=False)
                docs = np.unique(np.concatenate([hits, others]))[:judged]
                grades = rng.choice(4, size=docs.size, p=[0.5, 0.25, 0.15, 0.1])
                fh.write("".join(f"{1000 + q} 0 D{d} {g}\n" for d, g in zip(docs.tolist(), grades.tolist())))
    runs = []
    for r in range(n_runs):
        path = folder / f"run{r}.txt"
        runs.append(path)
        if path.exists():
            continue
        run_rng = np.random.default_rng(seed + 1 + r)
        with open(path, "w") as fh:
            for q in range(queries):
                scores = np.sort(run_rng.normal(size=depth))[::-1] * 10
                order = run_rng.permutation(depth) if r else np.arange(depth)
                docs = retrieved[q][order].tolist()
                fh.write("".join(f"{1000 + q} Q0 D{d} {i + 1} {s:.6f} run{r}\n"
                                 for i, (d, s) in enumerate(zip(docs, scores.tolist()))))
    return runs


LINE_BY_LINE = """
import sys, json
import metrics
from ltr.data.trec import align, evaluate_aligned, read_qrels, read_run
qrels = read_qrels(sys.argv[1])
for path in sys.argv[2:]:
    r = evaluate_aligned(align(read_run(path), qrels), "{metrics}", "trec_eval")
    print(json.dumps({{m: r[m] for m in "{metrics}".split(",")}}))
"""

PYTREC = """
import sys, json
import pytrec_eval
def read(path, cast, doc_field, value_field):
    out = {{}}
    with open(path) as fh:
        for line in fh:
            f = line.split()
            out.setdefault(f[0], {{}})[f[doc_field]] = cast(f[value_field])
    return out
qrels = read(sys.argv[1], int, 2, 3)
evaluator = pytrec_eval.RelevanceEvaluator(qrels, {{"ndcg_cut.10", "map", "recall.100"}})
for path in sys.argv[2:]:
    per_query = evaluator.evaluate(read(path, float, 2, 4))
    n = len(per_query)
    print(json.dumps({{m: sum(v[k] for v in per_query.values()) / n
                       for m, k in (("ndcg@10", "ndcg_cut_10"), ("map", "map"), ("recall@100", "recall_100"))}}))
"""

STEPS = """
import sys, time
t = time.process_time()
import numpy as np, pyarrow, pyarrow.csv, pyarrow.compute
import metrics
from ltr.data.trec import evaluate_aligned
from ltr.data.trec_tables import align_tables, read_qrels_table, read_run_table
steps = [("imports (numpy, pyarrow, metrics, ltr.data)", time.process_time() - t)]
for name, step in (("read the qrels", lambda: read_qrels_table(sys.argv[1])),
                   ("read the run", lambda: read_run_table(sys.argv[2]))):
    t = time.process_time(); out = step(); steps.append((name, time.process_time() - t))
    qrels = out if name == "read the qrels" else qrels
run = out
t = time.process_time(); aligned = align_tables(run, qrels); steps.append(("join run and qrels", time.process_time() - t))
del run
t = time.process_time(); evaluate_aligned(aligned, "{metrics}", "trec_eval")
steps.append(("metrics.evaluate", time.process_time() - t))
for name, seconds in steps:
    print(f"{{name:<48}} {{seconds:8.2f}}")
"""


def timed_child(argv: list[str]) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds (user + system), peak RSS in GB, standard output) of a child process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    out, err = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:3])}... failed:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024**2, out


def ltr_means(json_text: str) -> dict:
    return json.loads(json_text)["mean"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", type=Path, required=True, help="folder for the generated files (outside the repository)")
    p.add_argument("--queries", type=int, default=7000)
    p.add_argument("--depth", type=int, default=1000, help="documents per query in the run")
    p.add_argument("--judged", type=int, default=30, help="judged documents per query in the qrels")
    p.add_argument("--runs", type=int, default=1, help="with 2 or more, also time ltr compare of that many runs")
    p.add_argument("--skip-line-by-line", action="store_true", help="do not time the line-by-line reader")
    p.add_argument("--steps", action="store_true", help="also print the CPU seconds of each step of ltr eval's work")
    args = p.parse_args(argv)

    t = time.perf_counter()
    runs = generate(args.dir, args.queries, args.depth, args.judged, max(args.runs, 1))
    qrels = args.dir / "qrels.txt"
    n_lines = sum(1 for _ in open(runs[0]))
    n_qrels = sum(1 for _ in open(qrels))
    print(f"files: {runs[0]} ({n_lines:,} lines, {runs[0].stat().st_size / 1e6:.0f} MB), {qrels} ({n_qrels:,} "
          f"lines); ready in {time.perf_counter() - t:.1f} s")
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
    py = sys.executable
    ltr = [py, "-m", "ltr.cli"]
    rows = []
    wall, cpu, rss, out = timed_child(ltr + ["eval", "--qrels", str(qrels), "--run", str(runs[0]), "--metrics", METRICS,
                                        "--preset", "trec_eval", "--json", "-"])
    ours = ltr_means(out)
    rows.append(("ltr eval (columnar reader)", wall, cpu, rss, ours))
    if not args.skip_line_by_line:
        wall, cpu, rss, out = timed_child([py, "-c", LINE_BY_LINE.format(metrics=METRICS), str(qrels), str(runs[0])])
        rows.append(("line-by-line reader + metrics.evaluate (before)", wall, cpu, rss, json.loads(out.splitlines()[0])))
    wall, cpu, rss, out = timed_child([py, "-c", PYTREC.format(), str(qrels), str(runs[0])])
    rows.append(("pytrec_eval (Python parsing + C)", wall, cpu, rss, json.loads(out.splitlines()[0])))

    if args.runs >= 2:
        paths = [str(r) for r in runs[:args.runs]]
        wall, cpu, rss, out = timed_child(ltr + ["compare", "--qrels", str(qrels), *[a for r in paths for a in ("--run", r)],
                                            "--metrics", METRICS, "--preset", "trec_eval", "--json", "-"])
        rows.append((f"ltr compare of {args.runs} runs", wall, cpu, rss, None))
        wall, cpu, rss, out = timed_child([py, "-c", PYTREC.format(), str(qrels), *paths])
        rows.append((f"pytrec_eval of {args.runs} runs", wall, cpu, rss, None))

    print(f"\n{'what':<50} {'wall s':>8} {'CPU s':>8} {'peak RSS GB':>12}   "
          + "  ".join(f"{m:>10}" for m in METRICS.split(",")))
    for name, wall, cpu, rss, means in rows:
        shown = "  ".join(f"{means[m]:>10.6f}" for m in METRICS.split(",")) if means else ""
        print(f"{name:<50} {wall:>8.2f} {cpu:>8.2f} {rss:>12.2f}   {shown}")
    pytrec = rows[-1 if args.runs < 2 else -3]
    gap = max(abs(ours[m] - pytrec[4][m]) for m in METRICS.split(","))
    print(f"\nltr eval / pytrec_eval: {rows[0][1] / pytrec[1]:.2f}x the wall time, {rows[0][2] / pytrec[2]:.2f}x the "
          f"CPU time, {rows[0][3] / pytrec[3]:.2f}x the peak memory (target <= 1); largest |mean difference| {gap:.1e}")
    if args.runs >= 2:
        print(f"ltr compare / pytrec_eval ({args.runs} runs): {rows[-2][1] / rows[-1][1]:.2f}x the wall time, "
              f"{rows[-2][2] / rows[-1][2]:.2f}x the CPU time, {rows[-2][3] / rows[-1][3]:.2f}x the peak memory")
    if args.steps:
        *_, out = timed_child([py, "-c", STEPS.format(metrics=METRICS), str(qrels), str(runs[0])])
        print(f"\nCPU seconds of each step (one process, as ltr eval runs them):\n{out}", end="")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
