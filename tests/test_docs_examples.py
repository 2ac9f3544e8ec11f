"""Every example in README.md and docs/ runs, or says why not.

Each fenced ```python and ```bash / ```sh block of README.md and docs/**/*.md is run, in page order,
in a fresh temporary folder per page: Python blocks with ``exec`` in one namespace per page (``__name__`` is "__main__", as in a script), shell
blocks with ``bash -e`` with the installed ``ltr`` (the one beside this interpreter) first on PATH.
The pages make their own small data (``ltr synth --queries 60 ...`` or ``make_synthetic_splits``), so
an example that drifts from the code (a renamed option, a changed signature, a removed name) fails
here. A block that cannot run in a test is marked by an HTML comment on the line before it,
``<!-- not run: REASON -->``, and the reason may not be empty. A block of any language after
``<!-- file: NAME -->`` is written to NAME in the page's folder (a TOML configuration that a later
command reads), so it is checked by the command that reads it. A shell block after
``<!-- run in the repository root -->`` runs in the checkout (a script of experiments/ that only
prints).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<ticks>```+)\s*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^<!--\s*not run:(?P<reason>.*?)-->$")
FILE = re.compile(r"^<!--\s*file:\s*(?P<name>[\w./-]+)\s*-->$")
IN_ROOT = re.compile(r"^<!--\s*run in the repository root\s*-->$")


@dataclass
class Block:
    lang: str        # the fence's language, lower case ("" when none)
    code: str
    line: int        # 1-based line of the opening fence
    marker: str      # the line before the fence when it is an HTML comment, else ""


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def fenced_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a markdown text, with the HTML comment before each (if any)."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, ticks = i, match["ticks"]
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        body, i = [], i + 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i][len(match["indent"]):])
            i += 1
        i += 1
        marker = before if before.startswith("<!--") else ""
        blocks.append(Block(match["lang"].lower(), "\n".join(body) + "\n", start + 1, marker))
    return blocks


def plan(blocks: list[Block]) -> list[tuple[str, Block]]:
    """What to do with each block: "python", "bash", "bash-root", "file", "skip" (marked) or "show" (not code).

    Raises ValueError for a not-run marker without a reason, or one before a block that would not run anyway.
    """
    steps = []
    for block in blocks:
        not_run, file = NOT_RUN.match(block.marker), FILE.match(block.marker)
        if file:
            steps.append(("file", block))
        elif IN_ROOT.match(block.marker) and RUNNABLE.get(block.lang) == "bash":
            steps.append(("bash-root", block))
        elif not_run:
            if not not_run["reason"].strip():
                raise ValueError(f"line {block.line}: a not-run marker needs a reason")
            if block.lang not in RUNNABLE:
                raise ValueError(f"line {block.line}: a not-run marker before a ```{block.lang} block, which never runs")
            steps.append(("skip", block))
        else:
            steps.append((RUNNABLE.get(block.lang, "show"), block))
    return steps


def _environment() -> dict:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "MPLBACKEND": "Agg",
           "OMP_WAIT_POLICY": "PASSIVE", "LTR_THREADS": "1", "LTR_REPO": str(ROOT)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _run_python(code: str, namespace: dict, where: str) -> None:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(code, where, "exec"), namespace)
    except BaseException:  # a SystemExit of an example fails the test too
        pytest.fail(f"{where} failed:\n{code}\n--- output ---\n{out.getvalue()[-3000:]}\n{traceback.format_exc()[-4000:]}")


def _run_bash(code: str, folder: Path, where: str) -> None:
    out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=folder, env=_environment(),
                         capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if out.returncode:
        pytest.fail(f"{where} exited {out.returncode}:\n{code}\n--- stdout ---\n{out.stdout[-3000:]}\n"
                    f"--- stderr ---\n{out.stderr[-3000:]}")


def run_page(page: Path, folder: Path) -> int:
    """Run every runnable block of ``page`` in ``folder``; the number of blocks run."""
    steps = plan(fenced_blocks(page.read_text(encoding="utf-8")))
    namespace = {"__name__": "__main__"}   # as a script: its __main__ guard runs
    ran, cwd = 0, os.getcwd()
    os.chdir(folder)
    try:
        for kind, block in steps:
            where = f"{page.relative_to(ROOT)}:{block.line}"
            if kind == "file":
                target = folder / FILE.match(block.marker)["name"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code, encoding="utf-8")
            elif kind == "python":
                _run_python(block.code, namespace, where)
            elif kind in ("bash", "bash-root"):
                _run_bash(block.code, ROOT if kind == "bash-root" else folder, where)
            ran += kind in ("python", "bash", "bash-root")
    finally:
        os.chdir(cwd)
    return ran


PAGES = [p for p in doc_pages()
         if any(k in ("python", "bash", "bash-root") for k, _ in plan(fenced_blocks(p.read_text("utf-8"))))]


def test_every_block_is_run_or_says_why():
    """Every page parses: markers have reasons, and each python / shell block is run or marked."""
    counts = {"python": 0, "bash": 0, "bash-root": 0, "skip": 0}
    for page in doc_pages():
        for kind, _ in plan(fenced_blocks(page.read_text(encoding="utf-8"))):
            if kind in counts:
                counts[kind] += 1
    assert counts["python"] >= 20 and counts["bash"] >= 20, counts
    assert counts["skip"] < counts["python"] + counts["bash"], counts


def test_markers_are_read():
    text = ("Intro\n\n```bash\nltr --help\n```\n\n<!-- not run: needs the MQ2008 folder -->\n```python\nx = 1\n```\n"
            "\n<!-- file: cfg/run.toml -->\n```toml\n[train]\nepochs = 1\n```\n\n```text\nout\n```\n"
            "<!-- run in the repository root -->\n```sh\npython experiments/seed_tables.py\n```\n")
    steps = [(kind, b.lang, b.line, b.code) for kind, b in plan(fenced_blocks(text))]
    assert steps == [("bash", "bash", 3, "ltr --help\n"), ("skip", "python", 8, "x = 1\n"),
                     ("file", "toml", 13, "[train]\nepochs = 1\n"), ("show", "text", 18, "out\n"),
                     ("bash-root", "sh", 22, "python experiments/seed_tables.py\n")]
    with pytest.raises(ValueError, match="needs a reason"):
        plan(fenced_blocks("<!-- not run: -->\n```bash\nls\n```\n"))
    with pytest.raises(ValueError, match="never runs"):
        plan(fenced_blocks("<!-- not run: why -->\n```toml\na = 1\n```\n"))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples_run(page, tmp_path):
    assert run_page(page, tmp_path) > 0
