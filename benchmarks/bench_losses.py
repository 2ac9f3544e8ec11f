"""Speed and memory of RankNet and LambdaRank, side by side with allRank's lambdaLoss.

For (B, L) in (256, 10), (64, 100), (16, 1000), (1, 10000), with about 20% padding (list lengths
uniform in [0.6 L, L]; L * 0.8 for B = 1), it times forward + backward of

* ``ltr RankNet``                  losses.RankNet()
* ``ltr LambdaRank``               losses.LambdaRank()            (|ΔNDCG| over all pairs)
* ``ltr LambdaRank k=10``          losses.LambdaRank(k=10)        (pairs with an item in the top 10)
* ``allRank lambdaLoss``           allrank.models.losses.lambdaLoss(weighing_scheme="lambdaRank_scheme")

in this one process (2 torch threads, median of repeats; wall time and this process's CPU time,
which is the fairer figure on a shared machine), and measures the peak memory of one forward +
backward in a fresh subprocess per (configuration, method): the peak RSS during the run minus the
RSS right before it (torch, the data and the loss already loaded; see ``worker``).

allRank's package ``__init__`` imports torchvision and gcsfs (not installed: allRank is installed
with ``--no-deps``), so the file that defines ``lambdaLoss`` is loaded directly with its two
constants (padding label -1, eps 1e-10) provided by small stand-in modules; the code that runs is
allRank's own. allRank materialises several [B, L, L] tensors, so at (1, 10000) it is skipped
unless ``--allrank-everywhere`` is given (it would need several GB).

A check of equal values runs first: allRank's lambdaRank_scheme with the natural log and "sum"
reduction is the same loss as ``LambdaRank(reduction="sum")`` (distinct scores, no cutoff).

Usage: .venv/bin/python benchmarks/bench_losses.py [--repeats N] [--quick] [--allrank-everywhere]
"""

from __future__ import annotations

import os

# OpenMP threads that spin while waiting turn every kernel launch into a wait for a descheduled
# sibling on a busy machine (measured: LambdaRank at (16, 1000), 2 threads, load ~7 on 2 cores:
# 0.6-3.7 s spinning vs 0.15-0.19 s passive; allRank 3.4 s vs 2.2 s). Passive waiting is set
# before torch loads its OpenMP runtime; it applies to every method alike.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import losses  # noqa: E402
from ltr.study import markdown_table  # noqa: E402

CONFIGS = [(256, 10), (64, 100), (16, 1000), (1, 10000)]
from allrank_loader import load_allrank_lambdaloss  # noqa: E402  (benchmarks/ is sys.path[0])

METHODS = ["ltr RankNet", "ltr LambdaRank", "ltr LambdaRank k=10", "allRank lambdaLoss"]
THREADS = 2


def make_batch(n_lists, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_lists, length, generator=g)
    labels = torch.randint(0, 5, (n_lists, length), generator=g).float()
    if n_lists == 1:
        lengths = torch.tensor([int(round(0.8 * length))])
    else:
        lengths = torch.randint(int(0.6 * length), length + 1, (n_lists,), generator=g)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return scores, labels, mask


def make_step(method, lambda_loss=None):
    """A function (scores, labels, mask) -> None doing one forward + backward."""
    if method.startswith("ltr"):
        loss = {"ltr RankNet": losses.RankNet(), "ltr LambdaRank": losses.LambdaRank(),
                "ltr LambdaRank k=10": losses.LambdaRank(k=10)}[method]

        def step(scores, labels, mask):
            s = scores.clone().requires_grad_(True)
            loss(s, labels, mask).backward()
        return step

    def step(scores, labels, mask):
        s = scores.clone().requires_grad_(True)
        y = labels.masked_fill(~mask, -1.0)  # allRank's padding marker
        lambda_loss(s, y, weighing_scheme="lambdaRank_scheme").backward()
    return step


def time_step(step, batch, repeats, warm=True):
    if warm:
        step(*batch)
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        step(*batch)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def _proc_status_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def worker(method, n_lists, length):
    """Subprocess body: peak RSS growth of one forward + backward (MB).

    On Linux ``ru_maxrss`` survives ``exec``: a child started from a big parent reports the
    parent's peak. So the high-water mark of this process is reset (``/proc/self/clear_refs``,
    value 5) right before the step and read back as ``VmHWM``; ``ru_maxrss`` is the fallback.
    """
    torch.set_num_threads(THREADS)
    lambda_loss, _ = load_allrank_lambdaloss() if method.startswith("allRank") else (None, "")
    step = make_step(method, lambda_loss)
    small = make_batch(2, 8)
    step(*small)  # load every lazy piece of code first
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
    print(json.dumps({"peak_mb": (after - before) / 1024.0, "rss_mb": after / 1024.0}))


def peak_memory(method, n_lists, length):
    cmd = [sys.executable, __file__, "--worker", method, str(n_lists), str(length)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        return None, f"failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}"
    return json.loads(out.stdout.strip().splitlines()[-1]), ""


def check_same_values(lambda_loss):
    scores, labels, mask = make_batch(8, 50, seed=3)
    scores = scores.double()
    ours = losses.LambdaRank(reduction="sum")(scores, labels.double(), mask)
    theirs = lambda_loss(scores, labels.double().masked_fill(~mask, -1.0), weighing_scheme="lambdaRank_scheme",
                         reduction="sum", reduction_log="natural")
    return float(ours), float(theirs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per cell (median reported)")
    parser.add_argument("--quick", action="store_true", help="first three configurations only, 2 repeats")
    parser.add_argument("--allrank-everywhere", action="store_true", help="also run allRank at (1, 10000)")
    parser.add_argument("--no-memory", action="store_true", help="skip the per-cell memory subprocesses")
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads (default 2)")
    parser.add_argument("--worker", nargs=3, metavar=("METHOD", "B", "L"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))
        return 0
    torch.set_num_threads(args.threads)
    lambda_loss, where = load_allrank_lambdaloss()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {args.threads} threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, "
          f"{os.cpu_count()} CPUs, load average {load:.1f}; {where}")
    if lambda_loss is not None:
        ours, theirs = check_same_values(lambda_loss)
        print(f"same loss check (8 x 50, float64): ltr LambdaRank {ours:.10f}  allRank {theirs:.10f}  "
              f"rel. diff {abs(ours - theirs) / abs(theirs):.2e}")
    configs = CONFIGS[:3] if args.quick else CONFIGS
    repeats = 2 if args.quick else args.repeats
    rows = []
    for n_lists, length in configs:
        batch = make_batch(n_lists, length)
        padding = 1.0 - float(batch[2].float().mean())
        methods = [m for m in METHODS if not (m.startswith("allRank") and (
            lambda_loss is None or (length >= 10000 and not args.allrank_everywhere)))]
        steps = {m: make_step(m, lambda_loss) for m in methods}
        for m in methods:
            steps[m](*batch)  # warm-up
        # Round-robin repeats, so that a load spike on a shared machine hits every method alike.
        walls = {m: [] for m in methods}
        cpus = {m: [] for m in methods}
        for _ in range(1 if length >= 10000 else repeats):
            for m in methods:
                wall, cpu = time_step(steps[m], batch, 1, warm=False)
                walls[m].append(wall)
                cpus[m].append(cpu)
        for method in METHODS:
            if method not in methods:
                rows.append((n_lists, length, padding, method, None, None, None, "not run"))
                continue
            wall, cpu = statistics.median(walls[method]), statistics.median(cpus[method])
            mem, note = (None, "") if args.no_memory else peak_memory(method, n_lists, length)
            rows.append((n_lists, length, padding, method, wall, cpu, None if mem is None else mem["peak_mb"], note))
            peak = "-" if mem is None else f"{mem['peak_mb']:.0f} MB"
            print(f"  ({n_lists}, {length}) {method:20s} wall {wall:8.4f} s  cpu {cpu:8.4f} s  peak {peak} {note}",
                  flush=True)
    print()
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    print(markdown_table(["B", "L", "padding", "method", "wall s", "cpu s", "peak MB"],
                         [[n_lists, length, f"{padding:.0%}", method, fmt(wall, ".4f"), fmt(cpu, ".4f"),
                           fmt(peak, ".0f") + (" " + note if note else "")]
                          for n_lists, length, padding, method, wall, cpu, peak, note in rows]))
    cell = {(b, n, m): (w, c, p) for b, n, _, m, w, c, p, _ in rows}
    print()
    if (16, 1000, "allRank lambdaLoss") in cell and cell[(16, 1000, "allRank lambdaLoss")][0] is not None:
        aw, ac, ap = cell[(16, 1000, "allRank lambdaLoss")]
        lw, lc, lp = cell[(16, 1000, "ltr LambdaRank")]
        print(f"(16, 1000) LambdaRank vs allRank: {aw / lw:.1f}x faster (wall), {ac / lc:.1f}x (cpu)  [target >= 6x]")
        if ap and lp is not None:
            print(f"(16, 1000) peak memory: ltr {lp:.0f} MB vs allRank {ap:.0f} MB = {lp / ap:.2f}  [target <= 0.25]")
    if (16, 1000, "ltr LambdaRank k=10") in cell:
        kw, kc, _ = cell[(16, 1000, "ltr LambdaRank k=10")]
        fw, fc, _ = cell[(16, 1000, "ltr LambdaRank")]
        print(f"(16, 1000) K=10 vs all pairs: {fw / kw:.1f}x cheaper (wall), {fc / kc:.1f}x (cpu)  [target >= 5x]")
    for method in ("ltr RankNet", "ltr LambdaRank"):
        if (1, 10000, method) in cell and cell[(1, 10000, method)][2] is not None:
            print(f"(1, 10000) {method} peak memory {cell[(1, 10000, method)][2]:.0f} MB  [target < 2048 MB]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
