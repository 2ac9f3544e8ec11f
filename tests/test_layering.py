"""The one-way import rule, kept by CI rather than by memory.

metrics <- losses <- ltr.data <- ltr.runs <- {ltr.train, ltr.gbdt} <- ltr.models
        <- {ltr.calibrate, ltr.clicks, ltr.study} <- ltr.commands

A module may import from its own part and from parts below it, never from a part above it or beside
it at the same level; the top-level helpers ``ltr.errors``, ``ltr.io_utils`` and ``ltr`` itself are
usable everywhere, a command module never imports another command module, and only ``ltr.cli`` / ``ltr.__main__`` may import ``ltr.commands``. Every import
statement is read, including the ones inside functions (the toolkit imports heavy modules lazily).
The stubs left at the old places of moved modules (``ltr._moved.MOVED``) import nothing but ``ltr._moved``.

And no set of modules imports each other in a loop: the graph of every import statement (lazy ones
too) between the project's modules has no strongly connected component of more than one module.
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
    "ltr.runs": 3,
    "ltr.train": 4,
    "ltr.gbdt": 4,
    "ltr.models": 5,
    "ltr.calibrate": 6,
    "ltr.clicks": 6,
    "ltr.study": 6,
    "ltr.commands": 7,
    "ltr.cli": 8,
    "ltr.__main__": 9,
}
SHARED = {"ltr", "ltr.errors", "ltr.io_utils", "ltr.checks", "ltr._moved", "ltr._lazy"}  # used by every part
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


def imported_modules(path: Path, module: str, every_name: bool = False) -> list[tuple[int, str]]:
    """Every (line, absolute module name) imported anywhere in the file.

    ``from pkg import name`` gives ``pkg``, and ``pkg.name`` too when that is another part (or, with
    ``every_name``, always: the caller decides which of them are modules).
    """
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
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names
                      if every_name or part_of(f"{name}.{alias.name}") not in (None, part_of(name))]
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


def import_graph(files: list[Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (any statement, lazy ones included).

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module of the project,
    else ``pkg`` (a value of the package's ``__init__``). Importing ``a.b.c`` also runs ``a/__init__``
    and ``a.b/__init__``, but that alone is no edge: every module of a package runs its ``__init__``.
    """
    modules = {module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        by_line: dict[int, set[str]] = {}
        for line, target in imported_modules(path, module, every_name=True):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                by_line.setdefault(line, set()).add(target)
        targets = set()
        for names in by_line.values():  # ``from pkg import module``: the edge is to the module alone
            targets |= {n for n in names if not any(m.startswith(n + ".") for m in names)}
        graph[module] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_modules_import_each_other_in_a_loop():
    cycles = import_cycles(import_graph(package_files()))
    assert not cycles, "modules that import each other in a loop:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_loops(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    files = {
        "ltr/data/a.py": "def f():\n    from ltr.data.b import g\n",   # a -> b (lazy)
        "ltr/data/b.py": "from ltr.data import c\n",                    # b -> c
        "ltr/data/c.py": "import ltr.data.a\n",                         # c -> a: a loop of three
        "ltr/data/d.py": "from ltr.data.a import f\n",                  # d -> a: outside the loop
        "ltr/data/__init__.py": "from ltr.data.d import f\n",
    }
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    graph = import_graph(sorted(tmp_path.rglob("*.py")))
    assert graph["ltr.data.b"] == {"ltr.data.c"} and graph["ltr.data.d"] == {"ltr.data.a"}
    assert import_cycles(graph) == [["ltr.data.a", "ltr.data.b", "ltr.data.c"]]
    (tmp_path / "ltr/data/c.py").write_text("import numpy\n")
    assert import_cycles(import_graph(sorted(tmp_path.rglob("*.py")))) == []


def test_moved_stubs_forward_with_a_warning():
    import importlib
    import warnings

    from ltr._moved import MOVED

    for old, new in MOVED.items():
        stub = importlib.import_module(old)
        name = next(n for n in getattr(importlib.import_module(new), "__all__", ()) if not n.startswith("_"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(stub, name)
        assert value is getattr(importlib.import_module(new), name), (old, name)
        assert caught and issubclass(caught[0].category, DeprecationWarning) and new in str(caught[0].message), old
        source = (ROOT / (old.replace(".", "/") + ".py")).read_text()
        imports = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert [getattr(n, "module", None) for n in imports] == ["ltr._moved"], f"{old}: a stub imports only ltr._moved"


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
