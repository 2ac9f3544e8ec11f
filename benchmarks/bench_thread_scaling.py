"""How much two threads gain on this machine, step by step, for the steps of ``metrics.evaluate``.

Each numpy step that ``metrics.evaluate`` is built from is called 40 times on arrays of one chunk
(2^18 items, :data:`metrics.evaluate.CHUNK_ITEMS`), first on one thread, then shared by two threads
(the best of three tries each; each thread loops over its share of the calls); the speed-up is
one thread's wall time over two threads'. It tells whether the cores scale on the steps themselves; docs/benchmarks.md ("Metrics on every core") compares it with the whole
``metrics.evaluate``, which also spends time in the interpreter between the steps (GIL held).

    python benchmarks/bench_thread_scaling.py
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N = 1 << 18
REPS = 40


def steps(rng) -> dict:
    """Name -> a call of one numpy step on chunk-sized arrays."""
    a = rng.random(N)
    keys = rng.integers(0, 2**40, N).astype(np.uint64)
    idx = rng.permutation(N)
    labels = rng.integers(0, 5, N)
    offsets = np.unique(np.concatenate([[0], rng.choice(N, 2000, replace=False)]))
    return {
        "sort uint64 keys (default kind)": lambda: np.sort(keys),
        "sort float64 (default kind)": lambda: np.sort(a),
        "sort float64, stable": lambda: np.sort(a, kind="stable"),
        "argsort uint64 keys, stable": lambda: np.argsort(keys, kind="stable"),
        "searchsorted": lambda: np.searchsorted(np.sort(a), a),
        "gather a[idx]": lambda: a[idx],
        "cast int64 -> float64": lambda: labels.astype(np.float64),
        "exp2": lambda: np.exp2(a),
        "cumsum": lambda: np.cumsum(a),
        "add.reduceat (per query sums)": lambda: np.add.reduceat(a, offsets),
        "bincount": lambda: np.bincount(labels),
        "boolean mask": lambda: a[a > 0.5],
    }


def timed(call, threads: int) -> float:
    """Wall time of REPS calls, each of ``threads`` threads making REPS / threads of them in a loop
    (one task per thread: the pool's per-task cost does not count against short steps)."""

    def loop(n: int) -> None:
        for _ in range(n):
            call()

    with ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        list(pool.map(loop, [REPS // threads] * threads))
        return time.perf_counter() - t0


def main() -> int:
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}, numpy {np.__version__}")
    print(f"{'step':32s} {'ms per call':>12s} {'2 threads / 1':>14s}")
    for name, call in steps(np.random.default_rng(0)).items():
        call()  # warm-up
        one = min(timed(call, 1) for _ in range(3))
        two = min(timed(call, 2) for _ in range(3))
        print(f"{name:32s} {one * 1000 / REPS:12.3f} {one / two:14.2f}x")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
