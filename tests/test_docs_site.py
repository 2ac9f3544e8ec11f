"""The documentation site: it builds with ``mkdocs build --strict``, and its two hooks do what they say.

``make docs`` builds into site/; CI runs only ``make test``, so the strict build runs here, into a
temporary folder (a broken link, a page missing from the nav or an API name mkdocstrings cannot find
fails it). The README is the front door and stays under 200 lines.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", ROOT / "docs" / "_hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines; move details into docs/"
    text = "\n".join(lines)
    for must in ("make demo", "make test", "ltr --help", "docs/getting-started.md"):   # set-up, commands, the docs
        assert must in text, must


@pytest.mark.slow
def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    assert "WARNING" not in out.stderr, out.stderr[-6000:]
    site = tmp_path / "site"
    # the API reference is generated from the docstrings: a public function's heading and its formula text
    api = (site / "api" / "metrics" / "index.html").read_text(encoding="utf-8")
    assert 'id="metrics.evaluate.evaluate"' in api
    assert "2^rel - 1" in api
    # the tutorials are rendered from their scripts, code cells as code
    page = (site / "tutorials" / "neural_vs_gbdt" / "index.html").read_text(encoding="utf-8")
    assert "train_lightgbm" in page and "A neural ranker against the GBDT baseline" in page
    assert "# %%" not in page and "jupytext:" not in page
    assert not list(site.rglob("_hooks")), "the hooks are build code, not pages"


def test_tutorial_cells():
    tutorials = _hook("tutorials")
    script = "# ---\n# jupyter: {}\n# ---\n\n# %% [markdown]\n# # Title\n#\n# Some *prose*.\n\n# %%\nx = 1\n\n# %%\nprint(x)\n"
    assert tutorials.split_cells(script) == [
        ("markdown", "# Title\n\nSome *prose*."), ("code", "x = 1"), ("code", "print(x)"),
    ]
    page = tutorials.render(script, "demo")
    assert page.startswith("# Title\n\nSome *prose*.\n\n```python\nx = 1\n```\n\n```python\nprint(x)\n```\n")
    assert "docs/tutorials/demo.py" in page


def test_docstrings_read_as_markdown():
    rst = _hook("griffe_rst")
    text = (
        "Uses :func:`~metrics.gain_values` and :mod:`metrics.swap`. The formula::\n\n"
        "    [r_p != r_q] [p < K]\n\n"
        "Example:\n\n>>> f([1])\n[0.0, 1.0]\n\nAfter."
    )
    assert rst.markdown_of(text) == (
        "Uses `gain_values` and `metrics.swap`. The formula:\n\n"
        "```text\n[r_p != r_q] [p < K]\n```\n\n"
        "Example:\n\n```pycon\n>>> f([1])\n[0.0, 1.0]\n```\n\nAfter."
    )
