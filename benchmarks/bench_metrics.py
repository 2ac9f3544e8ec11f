"""Speed of ``metrics.evaluate`` against ranx, pytrec_eval, one sort and one pass over the data, in one process.

    .venv/bin/python benchmarks/bench_metrics.py --queries 27000 --threads 2 --repeats 5   # 3.2 M items (issue 49)
    .venv/bin/python benchmarks/bench_metrics.py                      # 100,000 queries, with peers
    .venv/bin/python benchmarks/bench_metrics.py --queries 1000000 --skip-peers
    .venv/bin/python benchmarks/bench_metrics.py --queries 27000 --threads 2 --whole --skip-peers  # chunks or not

Workload: ``--queries`` synthetic queries with heavy-tailed lengths (log-normal, mean ~120), graded
labels 0..4 (mostly 0) and scores that are a noisy function of the label; seeded, generated here.
Two sets of measures are timed: the five of issue 3 (NDCG@10 + MAP + MRR@10 + P@10 + Recall@100;
MAP reads every rank, so the plan sorts every item) and ``--cutoff-set`` (default NDCG@10 alone,
what early stopping evaluates every epoch: the plan ranks each query's top-10 candidates,
``metrics.plan``).

* ours: ``metrics.evaluate`` on the flat arrays (toolkit conventions), best of ``--repeats``;
* memory floor: one pass over the scores and the labels (``np.sum`` of each), the least any
  evaluation must read; ``x pass`` columns divide by it;
* sort floor: one vectorized sort per query = a single ``np.sort`` of a query-major uint64 key
  (query index in the high 32 bits, the order-preserving bits of the float32 score below),
  built beforehand (its build time is printed too);
* ranx ``evaluate`` after a JIT warm-up on a small input (building its Qrels/Run timed apart), with
  numba's threads set to 1 and, with ``--threads N``, to N: the same cores as ours;
* pytrec_eval ``RelevanceEvaluator.evaluate`` (building its dicts and the evaluator timed apart;
  its recip_rank has no cutoff).

With ``--whole``, one thread over the whole input at once (no chunks, the path before issue 24)
is timed too. With ``--threads N``, ``metrics.evaluate(..., threads=N)`` is timed too (wall time: the point of
threads is to wait less), checked equal to one thread's values bit for bit, and compared with one
thread and with ranx on N threads in wall time. Beside it, in the same interleaved repeats, the
ceiling: the floor's key sorted in evaluation-sized chunks on one thread and on N (``np.sort`` holds
no GIL), i.e. what the machine gives GIL-free work then.

Targets: issue 3, at least 10x faster than ranx's evaluate and within 4x of the sort floor; issue 49,
at least 15x ranx with one thread each and with N each. Wall and CPU time of this process are both
printed; on a shared machine CPU time does not count waiting for a core (one thread). The load
average is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

import metrics

METRICS = ["ndcg@10", "map", "mrr@10", "p@10", "recall@100"]


def make_workload(n_queries: int, seed: int = 0, mean_length: float = 120.0, sigma: float = 1.0):
    rng = np.random.default_rng(seed)
    mu = np.log(mean_length) - sigma**2 / 2  # log-normal with the requested mean
    lengths = np.clip(np.round(rng.lognormal(mu, sigma, n_queries)), 1, 20 * mean_length).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = int(offsets[-1])
    labels = rng.choice(5, size=n, p=[0.55, 0.25, 0.12, 0.06, 0.02]).astype(np.float64)
    scores = labels * 0.7 + rng.normal(size=n)
    return scores, labels, offsets


def timed(fn):
    """(wall seconds, CPU seconds of this process, result). On a shared machine the CPU time is the
    fairer measure: waiting for a core is not counted (everything timed here is single-threaded)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def floor_key(scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    qidx = np.repeat(np.arange(offsets.size - 1, dtype=np.uint64), np.diff(offsets))
    u = scores.astype(np.float32).view(np.uint32).astype(np.uint64)
    neg = (u >> np.uint64(31)) == 1
    asc = np.where(neg, ~u & np.uint64(0xFFFFFFFF), u | np.uint64(1 << 31))
    desc = np.uint64(0xFFFFFFFF) - asc
    return (qidx << np.uint64(32)) | desc


def peer_dicts(scores, labels, offsets, ids):
    """The peers' input: ``({qid: {doc: label}}, {qid: {doc: score}})`` of the flat arrays."""
    qd, rd = {}, {}
    for j in range(offsets.size - 1):
        lo, hi = offsets[j], offsets[j + 1]
        d = ids[lo:hi]
        qd[f"q{j}"] = dict(zip(d, labels[lo:hi].astype(int).tolist()))
        rd[f"q{j}"] = dict(zip(d, scores[lo:hi].tolist()))
    return qd, rd


RANX_NAMES = {"ndcg@10": "ndcg@10", "map": "map", "mrr@10": "mrr@10", "p@10": "precision@10", "recall@100": "recall@100"}


def run_ranx(scores, labels, offsets, ids, sets: dict, threads: list, repeats: int):
    """{(set name, threads): (wall, cpu, means)} of ranx's evaluate of each set on each numba thread
    count (best of ``repeats``), and the seconds spent building its Qrels/Run."""
    import numba
    import ranx

    warnings.simplefilter("ignore")
    small_q = ranx.Qrels.from_dict({"a": {"x": 1, "y": 0}})
    small_r = ranx.Run.from_dict({"a": {"x": 0.2, "y": 0.7}})
    ranx.evaluate(small_q, small_r, [RANX_NAMES[m] for m in METRICS])  # JIT warm-up
    t = time.perf_counter()
    qd, rd = peer_dicts(scores, labels, offsets, ids)
    qrels, run = ranx.Qrels.from_dict(qd), ranx.Run.from_dict(rd)
    build = time.perf_counter() - t
    del qd, rd
    out = {}
    for n in threads:
        numba.set_num_threads(n)
        for name, measures in sets.items():
            names = [RANX_NAMES[m] for m in measures]
            ranx.evaluate(qrels, run, names)  # the first call on this input pays ranx's own set-up
            best = [np.inf, np.inf, None]
            for _ in range(repeats):
                wall, cpu, means = timed(lambda: ranx.evaluate(qrels, run, names))
                best = [min(best[0], wall), min(best[1], cpu), means]
            out[(name, n)] = tuple(best)
    return out, build


def run_pytrec(scores, labels, offsets, ids):
    import pytrec_eval

    t = time.perf_counter()
    qd, rd = peer_dicts(scores, labels, offsets, ids)
    evaluator = pytrec_eval.RelevanceEvaluator(qd, {"ndcg_cut.10", "map", "recip_rank", "P.10", "recall.100"})
    build = time.perf_counter() - t
    wall, cpu, per_query = timed(lambda: evaluator.evaluate(rd))
    means = {m: float(np.mean([v[m] for v in per_query.values()])) for m in ("ndcg_cut_10", "map", "P_10", "recall_100")}
    return wall, cpu, build, means


def whole_input(scores, labels, offsets):
    """metrics.evaluate without chunks (one RankedLists over every query, as before issue 24)."""
    import importlib

    module = importlib.import_module("metrics.evaluate")
    saved = module.CHUNK_ITEMS
    module.CHUNK_ITEMS = scores.size + 1
    try:
        return metrics.evaluate(scores, labels, offsets, METRICS)
    finally:
        module.CHUNK_ITEMS = saved


def chunked_sorts(key: np.ndarray, threads: int) -> list:
    """``np.sort`` of each ``metrics.evaluate.CHUNK_ITEMS`` slice of the floor's key, on ``threads``
    threads: work of the size of one evaluation chunk that holds no GIL. Two threads of it against
    one measure what the machine gives GIL-free work at this moment (shared virtual cores, other
    tenants), the ceiling for ``metrics.evaluate(..., threads=2)``."""
    from concurrent.futures import ThreadPoolExecutor

    from metrics.evaluate import CHUNK_ITEMS

    parts = [key[a:a + CHUNK_ITEMS] for a in range(0, key.size, CHUNK_ITEMS)]
    if threads == 1:
        return [np.sort(part) for part in parts]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(np.sort, parts))


def time_ours(scores, labels, offsets, sets: dict, args) -> tuple[dict, dict]:
    """Interleaved repeats (the machine may be shared): {job: [best wall, best CPU]} and the results."""
    key_time = time.perf_counter()
    key = floor_key(scores, offsets)
    key_time = time.perf_counter() - key_time
    jobs = {"pass": lambda: (np.sum(scores), np.sum(labels)), "floor": lambda: np.sort(key),
            "order": lambda: metrics.rank_order(scores, offsets)}
    for name, measures in sets.items():
        jobs[name] = (lambda m: lambda: metrics.evaluate(scores, labels, offsets, m))(measures)
        if args.threads > 1:
            jobs[f"{name} threads"] = (lambda m: lambda: metrics.evaluate(scores, labels, offsets, m,
                                                                          threads=args.threads))(measures)
    if args.threads > 1:
        jobs["sorts1"] = lambda: chunked_sorts(key, 1)
        jobs["sortsN"] = lambda: chunked_sorts(key, args.threads)
    if args.whole:
        jobs["whole"] = lambda: whole_input(scores, labels, offsets)
    best = {name: [np.inf, np.inf] for name in jobs}
    results: dict = {"key build": key_time}
    for _ in range(args.repeats):
        for name, job in jobs.items():
            wall, cpu, out = timed(job)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
            results[name] = out
            del out
    return best, results


def row(what: str, wall: float, cpu: float, best: dict, note: str = "") -> None:
    print(f"{what:<50} {wall:>8.3f} {cpu:>8.3f}  {cpu / best['pass'][1]:>7.1f} {cpu / best['floor'][1]:>7.2f}  {note}")


def print_ours(best: dict, results: dict, sets: dict, args, n: int) -> None:
    print(f"\n{'what':<50} {'wall s':>8} {'cpu s':>8}  {'x pass':>7} {'x sort':>7}   (ratios in CPU time)")
    row("memory floor: one pass over scores and labels", *best["pass"], best)
    row("sort floor: np.sort of the composite key", *best["floor"], best, f"(key build {results['key build']:.3f} s)")
    row("metrics.rank_order (the whole ordering)", *best["order"], best)
    for name, measures in sets.items():
        wall, cpu = best[name]
        row(f"metrics.evaluate, {name}", wall, cpu, best, f"({cpu / n * 1e9:.1f} ns CPU per item)")
        for m in measures:
            print(f"    {results[name].names[m]} = {results[name][m]:.6f}")
        if args.threads > 1:
            wall_t, cpu_t = best[f"{name} threads"]
            same = all(np.array_equal(results[name].per_query[k], results[f"{name} threads"].per_query[k],
                                      equal_nan=True) for k in results[name].per_query)
            row(f"metrics.evaluate, {name}, threads={args.threads}", wall_t, cpu_t, best,
                f"({wall / wall_t:.2f}x one thread in wall time; values equal bit for bit: {same})")
    if args.whole:
        wall, cpu = best["whole"]
        row("metrics.evaluate, five measures, whole input at once", wall, cpu, best)
    if args.threads > 1:
        t1, tn = best["sorts1"][0], best["sortsN"][0]
        print(f"    ceiling: np.sort of each chunk of the key, one thread {t1:.3f} s, {args.threads} threads {tn:.3f} s"
              f" ({t1 / tn:.2f}x in wall time: what this machine gave GIL-free work)")


def print_ranx(best: dict, ranx_times: dict, build: float, sets: dict, args) -> None:
    print(f"ranx evaluate after its JIT warm-up (building Qrels/Run {build:.1f} s, not timed):")
    for (name, n), (wall, cpu, means) in ranx_times.items():
        ours = best[name] if n == 1 else best[f"{name} threads"]
        row(f"ranx, {name}, {n} numba thread{'s' if n > 1 else ''}", wall, cpu, best,
            f"(ours with {n} thread{'s' if n > 1 else ''} is {wall / ours[0]:.1f}x faster in wall time, "
            f"{cpu / ours[1]:.1f}x in CPU time; target >= 15x)")
    five = metrics.evaluate(*args.data, METRICS, preset="ranx")
    means = ranx_times[("five measures", 1)][2]
    diff = max(abs(five[m] - means[RANX_NAMES[m]]) for m in METRICS)
    print(f"    largest |mean difference| to ours with preset='ranx': {diff:.2e}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", type=int, default=100_000, help="number of synthetic queries")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of each job (best kept)")
    p.add_argument("--seed", type=int, default=0, help="workload seed")
    p.add_argument("--skip-peers", action="store_true", help="do not run ranx and pytrec_eval")
    p.add_argument("--threads", type=int, default=0, help="also time metrics.evaluate(..., threads=N) (0: skip)")
    p.add_argument("--cutoff-set", default="ndcg@10",
                   help="the second set of measures, all with a cutoff (default ndcg@10; comma-separated)")
    p.add_argument("--whole", action="store_true",
                   help="also time one thread on the whole input at once (no chunks: the path before issue 24)")
    args = p.parse_args(argv)

    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}, numpy {np.__version__}")
    scores, labels, offsets = make_workload(args.queries, args.seed)
    args.data = (scores, labels, offsets)
    n = scores.size
    print(f"workload: {args.queries:,} queries, {n:,} items (mean length {n / args.queries:.1f}, "
          f"max {int(np.diff(offsets).max())})")
    sets = {"five measures": METRICS, "cutoff set": args.cutoff_set.split(",")}
    best, results = time_ours(scores, labels, offsets, sets, args)
    print_ours(best, results, sets, args, n)

    if not args.skip_peers:
        ids = [f"d{i}" for i in range(int(np.diff(offsets).max()))]
        ids = np.array(ids, dtype=object)[np.arange(n) - np.repeat(offsets[:-1], np.diff(offsets))].tolist()
        try:
            threads = [1] + ([args.threads] if args.threads > 1 else [])
            ranx_times, build = run_ranx(scores, labels, offsets, ids, sets, threads, args.repeats)
            print_ranx(best, ranx_times, build, sets, args)
        except ImportError:
            print("ranx not installed: skipped")
        try:
            t_te, c_te, b_te, m_te = run_pytrec(scores, labels, offsets, ids)
            row("pytrec_eval evaluate, five measures", t_te, c_te, best,
                f"(building dicts + evaluator {b_te:.1f} s; ours is {c_te / best['five measures'][1]:.1f}x faster in CPU time)")
            same = metrics.evaluate(scores, labels, offsets, ["ndcg@10", "map", "p@10", "recall@100"], preset="trec_eval",
                                    doc_ids=np.array(ids, dtype=object))
            diff = max(abs(same[a] - m_te[b]) for a, b in zip(["ndcg@10", "map", "p@10", "recall@100"], m_te))
            print(f"    largest |mean difference| to ours with preset='trec_eval': {diff:.2e}")
        except ImportError:
            print("pytrec_eval not installed: skipped")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
