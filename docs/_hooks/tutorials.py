"""MkDocs hook: renders the Jupytext percent scripts of docs/tutorials/ as pages of the site.

A tutorial is a plain Python script (``python docs/tutorials/NAME.py`` runs it, and
``tests/test_docs_tutorials.py`` does in CI) cut into cells by ``# %%`` lines, the percent format of
Jupytext and of the editors that read it. ``# %% [markdown]`` cells hold the prose as comment
lines; every other cell is code. Each ``tutorials/NAME.py`` becomes the page ``tutorials/NAME.md``:
prose cells as markdown, code cells as fenced Python blocks, in order. The script itself stays out of
the site (``exclude_docs`` in mkdocs.yml).
"""

from __future__ import annotations

import re
from pathlib import Path

_CELL = re.compile(r"^# %%(?P<rest>.*)$")


def split_cells(text: str) -> list[tuple[str, str]]:
    """The cells of a percent script as ``(kind, source)`` pairs, kind "markdown" or "code".

    A Jupytext header (a ``# ---`` ... ``# ---`` block before the first cell) and lines before the
    first ``# %%`` marker that are blank are dropped; any other line before it forms a code cell.
    """
    lines = text.splitlines()
    if lines and lines[0].strip() == "# ---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "# ---"), None)
        if end is not None:
            lines = lines[end + 1:]
    cells: list[tuple[str, list[str]]] = [("code", [])]
    for line in lines:
        match = _CELL.match(line)
        if match:
            cells.append(("markdown" if "[markdown]" in match["rest"] else "code", []))
        else:
            cells[-1][1].append(line)
    out = []
    for kind, body in cells:
        if kind == "markdown":
            body = [re.sub(r"^# ?", "", line) if line.startswith("#") else line for line in body]
        source = "\n".join(body).strip("\n")
        if source.strip():
            out.append((kind, source))
    return out


def render(text: str, name: str) -> str:
    """The markdown page of a percent script: prose cells as they are, code cells fenced."""
    parts = []
    for kind, source in split_cells(text):
        parts.append(source if kind == "markdown" else f"```python\n{source}\n```")
    parts.append(
        f"*This page is the script `docs/tutorials/{name}.py`, run as it is in CI. Run it with "
        f"`python docs/tutorials/{name}.py`, or open it as a notebook with Jupytext "
        f"(`jupytext --to notebook docs/tutorials/{name}.py`).*"
    )
    return "\n\n".join(parts) + "\n"


def on_files(files, config):
    """Add a generated page ``tutorials/NAME.md`` for each ``docs/tutorials/NAME.py``."""
    from mkdocs.structure.files import File

    for script in sorted(Path(config["docs_dir"], "tutorials").glob("*.py")):
        uri = f"tutorials/{script.stem}.md"
        files.append(File.generated(config, uri, content=render(script.read_text(encoding="utf-8"), script.stem)))
    return files
