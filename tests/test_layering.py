"""The one-way import rule, kept by CI rather than by memory.

metrics <- losses <- ltr.data <- ltr.train <- {ltr.calibrate, ltr.clicks, ltr.study} <- ltr.commands

A module may import from its own part and from parts below it, never from a part above it or beside
it at the same level; the top-level helpers ``ltr.errors``, ``ltr.io_utils`` and ``ltr`` itself are
usable everywhere, a command module never imports another command module, and only ``ltr.cli`` / ``ltr.__main__`` may import ``ltr.commands``. Every import
statement is read, including the ones inside functions (the toolkit imports heavy modules lazily).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: level of each part; a module may import parts of a lower level or its own part only
LEVEL = {
    "metrics": 0,
    "losses": 1,
    "ltr.data": 2,
    "ltr.train": 3,
    "ltr.calibrate": 4,
    "ltr.clicks": 4,
    "ltr.study": 4,
    "ltr.commands": 5,
    "ltr.cli": 6,
    "ltr.__main__": 7,
}
SHARED = {"ltr", "ltr.errors", "ltr.io_utils", "ltr.checks"}  # used by every part
# ``from ltr import NeuralRanker``: ltr/__init__.py re-exports it lazily (module __getattr__)
REEXPORTS = {("ltr", "ltr.train.sklearn_ranker")}


def part_of(module: str) -> str | None:
    """The part a dotted module name belongs to (the longest matching prefix), or None if external."""
    best = None
    for part in list(LEVEL) + sorted(SHARED):
        if module == part or module.startswith(part + "."):
            if best is None or len(part) > len(best):
                best = part
    return best


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """Every (line, absolute module name) imported anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # ``from ltr import data`` imports the sub-package ltr.data
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names if part_of(f"{name}.{alias.name}") not in (None, part_of(name))]
    return found


def violations(path: Path) -> list[str]:
    module = module_name(path)
    mine = part_of(module)
    shared = mine is None or mine in SHARED
    mine_level = -1 if shared else LEVEL[mine]  # the shared helpers import no part at all
    bad = []
    for line, target in imported_modules(path, module):
        theirs = part_of(target)
        if mine == theirs == "ltr.commands" and target not in (module, "ltr.commands"):
            # what two commands share lives in the part it belongs to, not in another command
            bad.append(f"{path.relative_to(ROOT)}:{line}: command {module} imports command {target}")
            continue
        if theirs is None or theirs == mine or theirs in SHARED or (module, target) in REEXPORTS:
            continue
        if LEVEL[theirs] >= mine_level:
            where = "shared" if shared else mine
            bad.append(f"{path.relative_to(ROOT)}:{line}: {module} ({where}) imports {target} ({theirs})")
    return bad


def package_files() -> list[Path]:
    return sorted(p for d in ("metrics", "losses", "ltr") for p in (ROOT / d).rglob("*.py"))


def test_every_import_runs_one_way():
    bad = [v for p in package_files() for v in violations(p)]
    assert not bad, "imports against the one-way rule:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "module, source, expected",
    [
        ("ltr/data/x.py", "from ltr.train.models import MLPScorer\n", "ltr.data.x (ltr.data) imports ltr.train.models"),
        ("ltr/data/x.py", "def f():\n    from ltr.train import Trainer\n", "imports ltr.train"),
        ("ltr/clicks/x.py", "from ltr.study.report_table import markdown_table\n", "imports ltr.study.report_table"),
        ("ltr/train/x.py", "from ltr import commands\n", "imports ltr.commands"),
        ("metrics/x.py", "import losses\n", "metrics.x (metrics) imports losses"),
        ("losses/x.py", "from ltr.data import RankingDataset\n", "imports ltr.data"),
        ("ltr/errors.py", "from ltr.data import RankingDataset\n", "(shared) imports ltr.data"),
        ("ltr/train/x.py", "from .models import MLPScorer\nfrom ..study import ablation\n", "imports ltr.study"),
        ("ltr/commands/x.py", "from ltr.commands.train import load_data\n", "command ltr.commands.x imports command"),
    ],
)
def test_the_checker_catches_a_wrong_import(tmp_path, monkeypatch, module, source, expected):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    path = tmp_path / module
    path.parent.mkdir(parents=True)
    path.write_text(source)
    found = violations(path)
    assert len(found) == 1 and expected in found[0], found


def test_allowed_imports_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    path = tmp_path / "ltr/study/x.py"
    path.parent.mkdir(parents=True)
    path.write_text(
        "import numpy\nimport metrics\nfrom losses import RankNet\nfrom ltr.data import load_svmlight\n"
        "from ltr.train import Trainer\nfrom ltr.errors import LtrError\nfrom ltr.study.report import summarize\n"
        "from . import report\n"
    )
    assert violations(path) == []
