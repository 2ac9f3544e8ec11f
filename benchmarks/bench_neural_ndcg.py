"""Time and peak memory of NeuralNDCG against ApproxNDCG at long lists (issue 24, part 7).

One forward + backward on a padded ``[B, L]`` batch (default B = 64, L = 1000, list lengths uniform
in [0.6 L, L], labels 0..4, scores standard normal), 2 torch threads, ``OMP_WAIT_POLICY=PASSIVE``:

* ``ApproxNDCG``                    losses.ApproxNDCG()
* ``NeuralNDCG``                    losses.NeuralNDCG()       (50 Sinkhorn rounds at most, tol 1e-6)
* ``NeuralNDCG, matrix rounds``     the direct form, ``sinkhorn(neural_sort(...))`` with autograd through
                                    every round (what NeuralNDCG computed before); only with ``--matrix``,
                                    and at ``--matrix-batch`` lists (default 8), as it needs ~100 B L^2 floats

Times: median of ``--repeats`` round-robin repeats, wall and this process's CPU time. Peak memory: in
a fresh subprocess per method, the growth of the resident set during one forward + backward (the
high-water mark is reset right before it; torch, the batch and the loss already loaded). The script
first checks on a small float64 batch that NeuralNDCG equals the matrix form (value and gradient).

Usage: python benchmarks/bench_neural_ndcg.py [--batch 64] [--length 1000] [--repeats 3] [--matrix]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads OpenMP (see bench_losses.py)

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import losses  # noqa: E402
from losses.neural_ndcg import neural_sort, sinkhorn  # noqa: E402
from metrics.dcg import normalised_gains  # noqa: E402
from metrics.discounts import discount_values, rank_positions  # noqa: E402

THREADS = 2
METHODS = ("ApproxNDCG", "NeuralNDCG", "NeuralNDCG, matrix rounds")


def make_batch(n_lists, length, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_lists, length, generator=gen, dtype=dtype)
    labels = torch.randint(0, 5, (n_lists, length), generator=gen).to(dtype)
    lengths = torch.randint(int(0.6 * length), length + 1, (n_lists,), generator=gen)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return scores, labels, mask


def matrix_neural_ndcg(scores, labels, mask, iterations=50, tol=1e-6):
    """The direct form: NeuralSort, Sinkhorn on the matrix every round, autograd through all of it."""
    p = sinkhorn(neural_sort(scores, mask, 1.0), mask, iterations, tol)
    g = normalised_gains(labels, None, mask=mask).to(scores.dtype)
    d = discount_values(rank_positions(scores.shape[1], scores), "log2")
    per_query = -(torch.bmm(p, g[:, :, None]).squeeze(2) * d).sum(dim=1)
    return per_query.sum() / mask.any(dim=1).sum()


def make_step(method):
    loss = {"ApproxNDCG": losses.ApproxNDCG(), "NeuralNDCG": losses.NeuralNDCG()}.get(method, matrix_neural_ndcg)

    def step(scores, labels, mask):
        s = scores.clone().requires_grad_(True)
        value = loss(s, labels, mask)
        value.backward()
        return float(value.detach())

    return step


def _proc_status_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def worker(method, n_lists, length):
    """Subprocess body: peak RSS growth of one forward + backward (MB); see bench_losses.worker."""
    torch.set_num_threads(THREADS)
    step = make_step(method)
    step(*make_batch(2, 8))  # load every lazy piece of code first
    batch = make_batch(n_lists, length)
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        before = _proc_status_kb("VmRSS")
        step(*batch)
        after = _proc_status_kb("VmHWM")
    except OSError:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        step(*batch)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mb": (after - before) / 1024.0}))


def peak_memory(method, n_lists, length):
    cmd = [sys.executable, __file__, "--worker", method, str(n_lists), str(length)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        return float("nan")
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


def check_same_values():
    scores, labels, mask = make_batch(6, 40, seed=3, dtype=torch.float64)
    a, b = scores.clone().requires_grad_(True), scores.clone().requires_grad_(True)
    new = losses.NeuralNDCG()(a, labels, mask)
    old = matrix_neural_ndcg(b, labels, mask)
    new.backward()
    old.backward()
    return float(new.detach()), float(old.detach()), float((a.grad - b.grad).abs().max())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--matrix", action="store_true", help="also run the matrix-rounds form (slow, large)")
    parser.add_argument("--matrix-batch", type=int, default=8)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))
        return
    torch.set_num_threads(THREADS)
    new, old, grad_diff = check_same_values()
    print(f"same values (6 x 40, float64): NeuralNDCG {new:.12f}, matrix rounds {old:.12f}, "
          f"largest gradient difference {grad_diff:.1e}")
    runs = [(m, args.batch) for m in METHODS[:2]] + ([(METHODS[2], args.matrix_batch)] if args.matrix else [])
    times = {run: [] for run in runs}
    batches = {b: make_batch(b, args.length) for b in {b for _, b in runs}}
    steps = {run: make_step(run[0]) for run in runs}
    for _ in range(args.repeats):
        for run in runs:
            w0, c0 = time.perf_counter(), time.process_time()
            steps[run](*batches[run[1]])
            times[run].append((time.perf_counter() - w0, time.process_time() - c0))
    load = os.getloadavg()[0]
    print(f"\nL = {args.length}, {THREADS} threads, median of {args.repeats}, load average {load:.1f}\n")
    print("| B | method | wall s | CPU s | peak MB |\n|---:|---|---:|---:|---:|")
    for run in runs:
        wall = statistics.median(t[0] for t in times[run])
        cpu = statistics.median(t[1] for t in times[run])
        print(f"| {run[1]} | {run[0]} | {wall:.2f} | {cpu:.2f} | {peak_memory(run[0], run[1], args.length):.0f} |")
    ratio = statistics.median(t[0] for t in times[runs[1]]) / statistics.median(t[0] for t in times[runs[0]])
    print(f"\nNeuralNDCG / ApproxNDCG wall time at B = {args.batch}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
