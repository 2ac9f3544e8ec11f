"""Start-up time of the ``ltr`` command: wall time and imports of commands that do little work.

    .venv/bin/python benchmarks/bench_startup.py                # 7 timed runs of each command
    .venv/bin/python benchmarks/bench_startup.py --repeats 15

Each command runs in a fresh interpreter (``python -m ltr ...``, what the ``ltr`` script runs):
``python -c pass`` (the floor: the interpreter alone), ``ltr --help``, ``ltr eval`` of a two-query
run, ``ltr predict`` of a 20-query SVMlight file with a linear torch model (one epoch of
``ltr train``) and with a LightGBM model (``ltr gbdt``, 5 rounds), both made beforehand and not
timed, and that one epoch of ``ltr train`` itself. Printed: the median and fastest wall time over
``--repeats`` runs, the import time that ``python -X importtime`` reports (sum over the top-level
imports, one more run) and which of torch, LightGBM, scipy, pandas and pyarrow the command loaded. The load average is printed too: on
a shared machine the wall times include waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "lightgbm", "xgboost", "catboost", "scipy", "pandas", "pyarrow", "sklearn")


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_WAIT_POLICY": "PASSIVE"}


def run(argv: list[str]) -> subprocess.CompletedProcess:
    out = subprocess.run(argv, capture_output=True, text=True, env=env())
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{out.stderr[-2000:]}")
    return out


def import_summary(argv: list[str]) -> tuple[float, list[str]]:
    """(seconds of top-level imports under -X importtime, the heavy packages among all imports)."""
    out = run([argv[0], "-X", "importtime", *argv[1:]])
    total, loaded = 0, set()
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if cumulative.strip().isdigit():
            if not name.startswith("  "):  # a top-level import (nested ones are indented further)
                total += int(cumulative)
            top = name.strip().split(".")[0]
            if top in HEAVY:
                loaded.add(top)
    return total / 1e6, sorted(loaded)


def prepare(folder: Path, py: str) -> dict[str, list[str]]:
    """The files the commands read, and the commands."""
    ltr = [py, "-m", "ltr"]
    (folder / "qrels.txt").write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n")
    (folder / "run.txt").write_text("1 Q0 d1 1 0.9 r\n1 Q0 d2 2 0.5 r\n2 Q0 d3 1 0.3 r\n")
    run(ltr + ["synth", "--out", str(folder / "data"), "--queries", "60", "--features", "20", "--quiet"])
    data = str(folder / "data" / "test.txt")
    run(ltr + ["train", "--train", str(folder / "data" / "train.txt"), "--valid", str(folder / "data" / "valid.txt"),
               "--model", "linear", "--epochs", "1",
               "--out", str(folder / "torch_model"), "--quiet"])
    run(ltr + ["gbdt", "--train", str(folder / "data" / "train.txt"), "--valid", str(folder / "data" / "valid.txt"),
               "--num-boost-round", "5",
               "--out", str(folder / "gbdt_model"), "--quiet"])
    return {
        "python -c pass": [py, "-c", "pass"],
        "ltr --help": ltr + ["--help"],
        "ltr eval (2-query run)": ltr + ["eval", "--qrels", str(folder / "qrels.txt"), "--run", str(folder / "run.txt")],
        "ltr predict (linear torch model)": ltr + ["predict", "--model", str(folder / "torch_model"), "--data", data,
                                                   "--out", str(folder / "torch.run"), "--force"],
        "ltr predict (LightGBM model)": ltr + ["predict", "--model", str(folder / "gbdt_model"), "--data", data,
                                               "--out", str(folder / "gbdt.run"), "--force"],
        "ltr train (linear, 1 epoch)": ltr + ["train", "--train", str(folder / "data" / "train.txt"), "--valid",
                                              str(folder / "data" / "valid.txt"), "--model", "linear", "--epochs", "1",
                                              "--out", str(folder / "torch_again"), "--force", "--quiet"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7, help="timed runs of each command (median and fastest kept)")
    args = p.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        commands = prepare(Path(tmp), py)
        print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):  # interleaved, so that a burst of load hits every command alike
            for name, command in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                run(command)
                walls[name].append(time.perf_counter() - t)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        print(f"\n{'command':<36} {'median s':>9} {'fastest s':>10} {'median cpu s':>13} {'imports s':>10}  "
              "heavy packages loaded")
        for name, command in commands.items():
            seconds, loaded = import_summary(command)
            print(f"{name:<36} {statistics.median(walls[name]):>9.3f} {min(walls[name]):>10.3f} "
                  f"{statistics.median(cpus[name]):>13.3f} {seconds:>10.3f}  {', '.join(loaded) or '-'}")
    print(f"\nload average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
