"""Start-up stays light: ``ltr --help``, ``ltr eval`` and ``import metrics`` load no heavy library.

Every command paid for torch, scipy.stats and LightGBM (6-8 s for ``ltr --help`` on a busy 2-core
machine) when the package ``__init__`` files imported their whole part. The checks run as steps in
one fresh interpreter (a subprocess) that reads ``sys.modules`` after each: a module-level
``import torch`` put back anywhere on a step's path fails that step, by name. The figures are in docs/benchmarks.md
(benchmarks/bench_startup.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

TRAINING = ("torch", "lightgbm", "xgboost", "catboost")
HEAVY = (*TRAINING, "scipy", "pandas", "pyarrow", "sklearn", "matplotlib", "optuna", "dask", "tensorboard", "onnx")


STEPS = {
    # each step runs after the ones above it in one fresh interpreter (one start-up paid, not six);
    # the steps that must stay light come first, torch's own (import losses) last
    "import metrics": "import metrics\nmetrics.evaluate",
    "import ltr.data": "import ltr.data\nltr.data.read_run\nltr.data.load_svmlight",
    "ltr --help": ("from ltr.cli import main\n"
                   "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code"),
    "every command's --help": (
        "from ltr.cli import COMMANDS, main\n"
        "for name in COMMANDS:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n            main([name, '--help'])\n"
        "        except SystemExit as e:\n            assert e.code == 0, (name, e.code)"),
    "ltr eval": (
        "buf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        "    rc = main(['eval', '--qrels', QRELS, '--run', RUN, '--metrics', 'ndcg@10,map'])\n"
        "assert rc == 0 and 'ndcg@10' in buf.getvalue(), (rc, buf.getvalue())"),
    "from ltr.study import markdown_table": "from ltr.study import markdown_table\nmarkdown_table",
    "import losses": "import losses\nlosses.get_loss",
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> dict[str, list[str]]:
    """{step: the heavy packages (and scipy.stats) loaded once the step and those before it ran}."""
    folder = tmp_path_factory.mktemp("startup")
    (folder / "qrels.txt").write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n")
    (folder / "run.txt").write_text("1 Q0 d1 1 0.9 r\n1 Q0 d2 2 0.5 r\n2 Q0 d3 1 0.3 r\n")
    probe = [f"import contextlib, io, json, sys\nQRELS, RUN = {str(folder / 'qrels.txt')!r}, {str(folder / 'run.txt')!r}",
             f"heavy = {HEAVY!r}",
             "def loaded():\n"
             "    names = sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy})\n"
             "    return names + (['scipy.stats'] if 'scipy.stats' in sys.modules else [])",
             "out = {}"]
    for step, code in STEPS.items():
        probe += [code, f"out[{step!r}] = loaded()"]
    probe.append("print('LOADED=' + json.dumps(out))")
    done = subprocess.run([sys.executable, "-c", "\n".join(probe)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=_env())
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stdout.splitlines() if x.startswith("LOADED=")][-1]
    return json.loads(line[len("LOADED="):])


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.xdist_group("startup")  # one worker runs the probe (a fresh interpreter that ends importing torch)
@pytest.mark.parametrize("step", ["import metrics", "import ltr.data", "ltr --help", "ltr eval",
                                  "from ltr.study import markdown_table"])
def test_light_steps_load_no_heavy_library(loaded, step):
    assert loaded[step] == [], f"{step} loaded {loaded[step]}"


def test_top_level_help_imports_no_command_module_and_no_numpy():
    """``ltr --help`` lists the commands from ltr.cli.SUMMARIES: near the interpreter's own start-up
    (issue 49: at most 0.15 s; docs/benchmarks.md has the figure)."""
    code = ("import contextlib, io, sys\nfrom ltr.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try:\n        main(['--help'])\n    except SystemExit as e:\n        assert e.code == 0\n"
            "assert 'importance' in out.getvalue()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('ltr', 'numpy', 'typing'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "['ltr', 'ltr.base', 'ltr.base.collector', 'ltr.base.errors', 'ltr.base.threads', 'ltr.cli']"


@pytest.mark.xdist_group("startup")  # one worker runs the probe (a fresh interpreter that ends importing torch)
def test_every_sub_command_help_loads_no_heavy_library(loaded):
    # building every command's parser imports every command module
    assert loaded["every command's --help"] == []


@pytest.mark.xdist_group("startup")  # one worker runs the probe (a fresh interpreter that ends importing torch)
def test_import_losses_loads_torch_but_not_scipy_or_lightgbm(loaded):
    assert loaded["import losses"] == ["torch"]  # the losses are torch modules, and nothing else heavy


@pytest.mark.parametrize("package", ["ltr.train", "ltr.gbdt", "ltr.runs", "ltr.study", "ltr.clicks", "ltr.calibrate"])
def test_lazy_package_names_resolve_to_their_modules(package):
    """Every name a part re-exports on first use is the object its defining module holds."""
    import importlib

    pkg = importlib.import_module(package)
    for module, names in pkg._WHERE.items():
        for name in names:
            assert getattr(pkg, name) is getattr(importlib.import_module(module), name), (package, name)
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        getattr(pkg, "not_a_name")


def test_average_ranks_equal_scipy_rankdata():
    from scipy.stats import rankdata

    from metrics.classification import average_ranks

    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 1000):
        for values in (rng.integers(0, 4, n).astype(float), rng.normal(size=n)):
            np.testing.assert_array_equal(average_ranks(values), rankdata(values, method="average"))


def test_ltr_gbdt_trains_and_logs_without_torch(tmp_path):
    """A GBDT run needs no torch: its TensorBoard log goes through TensorBoard's own writer and its
    summary reads torch's version from the installed distribution (3 s less per ``ltr gbdt``)."""
    rng = np.random.default_rng(0)
    for name in ("train", "valid"):
        lines = [f"{int(rng.integers(0, 3))} qid:{q} 1:{rng.normal():.4f} 2:{rng.normal():.4f}" for q in range(1, 9) for _ in range(6)]
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    code = ("import sys\nfrom ltr.cli import main\n"
            "assert main(['gbdt', '--train', 'train.txt', '--valid', 'valid.txt', '--num-boost-round', '3', "
            "'--quiet', '--out', 'run']) == 0\n"
            "print('TORCH=' + str('torch' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stderr
    assert "TORCH=False" in done.stdout
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    from importlib.metadata import version

    assert summary["versions"]["torch"] == version("torch")
