"""The tutorials (docs/tutorials/*.py, Jupytext percent scripts) run as they are, on small data.

Each script checks its own claims with ``assert`` (calibration lowers ECE and leaves AUC as it was,
IPS lands nearer the true click-DCG than the naive estimate, both rankers beat a random order...),
so a tutorial whose story stops being true fails here, as does one whose code drifts from the API.
The site renders the same files (docs/_hooks/tutorials.py), so what runs here is what readers see.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.py"))


def test_three_tutorials_with_prose_and_code():
    spec = importlib.util.spec_from_file_location("docs_hook_tutorials", ROOT / "docs" / "_hooks" / "tutorials.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    split_cells = hook.split_cells
    assert [t.stem for t in TUTORIALS] == ["calibrate_ctr", "clicks", "neural_vs_gbdt"]
    for script in TUTORIALS:
        kinds = [kind for kind, _ in split_cells(script.read_text(encoding="utf-8"))]
        assert kinds[0] == "markdown" and kinds.count("markdown") >= 4 and kinds.count("code") >= 4, script.name


@pytest.mark.slow
@pytest.mark.parametrize("script", TUTORIALS, ids=[t.stem for t in TUTORIALS])
def test_tutorial_runs(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__main__")
    assert out.getvalue().count("\n") >= 5, "a tutorial prints what it finds"
