"""Start-up stays light: ``ltr --help``, ``ltr eval`` and ``import metrics`` load no heavy library.

Every command paid for torch, scipy.stats and LightGBM (6-8 s for ``ltr --help`` on a busy 2-core
machine) when the package ``__init__`` files imported their whole part. Each check runs in a fresh
interpreter (a subprocess) and reads ``sys.modules`` at the end: a module-level ``import torch`` put
back anywhere on the path fails it, by name. The figures are in docs/benchmarks.md
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


def loaded_after(code: str) -> list[str]:
    """The top-level packages of :data:`HEAVY` (and ``scipy.stats``) loaded after running ``code``."""
    probe = (
        "import sys, json\n" + code + "\n"
        f"heavy = {HEAVY!r}\n"
        "names = sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy})\n"
        "names += ['scipy.stats'] if 'scipy.stats' in sys.modules else []\n"
        "print('LOADED=' + json.dumps(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=_env())
    assert out.returncode == 0, out.stderr
    line = [x for x in out.stdout.splitlines() if x.startswith("LOADED=")][-1]
    return json.loads(line[len("LOADED="):])


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_ltr_help_and_every_parser_load_no_heavy_library():
    # main(["--help"]) builds every sub-command's parser (each command module is imported) and exits 0
    code = ("from ltr.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n")
    assert loaded_after(code) == []


def test_every_sub_command_help_loads_no_training_library():
    code = ("import contextlib, io\nfrom ltr.cli import COMMANDS, main\n"
            "for name in COMMANDS:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try:\n            main([name, '--help'])\n"
            "        except SystemExit as e:\n            assert e.code == 0, (name, e.code)\n")
    assert [m for m in loaded_after(code) if m in (*TRAINING, "scipy.stats")] == []


def test_ltr_eval_of_a_small_run_loads_no_heavy_library(tmp_path):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n")
    run.write_text("1 Q0 d1 1 0.9 r\n1 Q0 d2 2 0.5 r\n2 Q0 d3 1 0.3 r\n")
    code = ("import contextlib, io\nfrom ltr.cli import main\nbuf = io.StringIO()\n"
            f"with contextlib.redirect_stdout(buf):\n    rc = main(['eval', '--qrels', {str(qrels)!r}, "
            f"'--run', {str(run)!r}, '--metrics', 'ndcg@10,map'])\n"
            "assert rc == 0, rc\nassert 'ndcg@10' in buf.getvalue(), buf.getvalue()\n")
    assert loaded_after(code) == []


def test_import_metrics_loads_neither_torch_nor_scipy():
    assert loaded_after("import metrics\nmetrics.evaluate") == []


def test_import_losses_loads_torch_but_not_scipy_or_lightgbm():
    loaded = loaded_after("import losses\nlosses.get_loss")
    assert "torch" in loaded  # the losses are torch modules
    assert [m for m in loaded if m != "torch"] == []


def test_ltr_data_reads_files_without_torch():
    assert loaded_after("import ltr.data\nltr.data.read_run\nltr.data.load_svmlight") == []


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


def test_from_import_of_a_lazy_name_works_in_a_fresh_interpreter():
    code = "from ltr.study import markdown_table\nassert 'torch' not in sys.modules\nfrom ltr.train import Trainer\n"
    assert "torch" in loaded_after(code)


def test_average_ranks_equal_scipy_rankdata():
    from scipy.stats import rankdata

    from metrics.classification import average_ranks

    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 1000):
        for values in (rng.integers(0, 4, n).astype(float), rng.normal(size=n)):
            np.testing.assert_array_equal(average_ranks(values), rankdata(values, method="average"))
