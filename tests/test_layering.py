"""The one-way import rule, kept by CI rather than by memory.

metrics <- losses <- ltr.data <- ltr.runs <- {ltr.train, ltr.gbdt} <- ltr.models
        <- {ltr.calibrate, ltr.clicks, ltr.study} <- ltr.commands

A module may import from its own part and from parts below it, never from a part above it or beside
it at the same level; the top-level helpers ``ltr.base.errors``, ``ltr.base.io_utils`` and ``ltr`` itself are
usable everywhere, a command module never imports another command (the modules of one command's
package, ``ltr.commands.clicks.*``, import each other), and only ``ltr.cli`` / ``ltr.__main__`` may
import ``ltr.commands``. Inside ``ltr.clicks`` the same rule holds between its floors
(``CLICKS_FLOORS``): logs <- simulate <- propensities, interleaving <- estimators <- engines. Every import
statement is read, including the ones inside functions (the toolkit imports heavy modules lazily).
The stubs left at the old places of moved modules (``ltr.base._moved.MOVED``) import nothing but ``ltr.base._moved``.

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
#: the floors of ltr.clicks (its sub-packages and top modules): a module imports its own floor and lower ones
CLICKS_FLOORS = {
    "logs": 0,
    "open_bandit": 0,
    "simulate": 1,
    "propensities": 2,
    "interleaving": 2,
    "estimators": 3,
    "engines": 4,
}
SHARED = {"ltr", "ltr.base"}  # used by every part
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


def import_statements(path: Path, module: str):
    """``(line, module the statement names, [names imported from it] or None)`` for every import
    statement of the file, at any depth; relative imports made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            yield node.lineno, name, [alias.name for alias in node.names]


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """Every (line, absolute module name) imported anywhere in the file.

    ``from pkg import name`` gives ``pkg``, and ``pkg.name`` too when that is another part
    (``from ltr import data`` imports the sub-package ltr.data).
    """
    found = []
    for line, name, names in import_statements(path, module):
        found.append((line, name))
        found += [(line, f"{name}.{n}") for n in names or () if part_of(f"{name}.{n}") not in (None, part_of(name))]
    return found


def command_of(module: str) -> str | None:
    """The sub-command a module of ltr.commands belongs to (``ltr.commands.clicks.train`` -> ``clicks``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["ltr", "commands"] else None


def clicks_floor(module: str) -> str | None:
    """The floor of ltr.clicks a module belongs to (``ltr.clicks.logs.table`` -> ``logs``), or None for the
    package itself and the stubs left at the old flat paths."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["ltr", "clicks"] and parts[2] in CLICKS_FLOORS else None


def clicks_violation(module: str, target: str) -> str | None:
    """Why an import between two modules of ltr.clicks breaks its floors' one-way rule, or None."""
    mine, theirs = clicks_floor(module), clicks_floor(target)
    if mine is None or mine == theirs:
        return None
    if theirs is None:  # the package's lazy names or an old stub: the floors import their modules by path
        return f"{module} ({mine}) imports {target} (not a floor: import the module of a floor)"
    if CLICKS_FLOORS[theirs] >= CLICKS_FLOORS[mine]:
        return f"{module} ({mine}) imports {target} ({theirs}, not below it)"
    return None


def violations(path: Path) -> list[str]:
    module = module_name(path)
    mine = part_of(module)
    shared = mine is None or mine in SHARED
    mine_level = -1 if shared else LEVEL[mine]  # the shared helpers import no part at all
    bad = []
    for line, target in imported_modules(path, module):
        theirs = part_of(target)
        if (mine == theirs == "ltr.commands" and target not in (module, "ltr.commands")
                and not (command_of(module) and command_of(module) == command_of(target) and module.count(".") > 2)):
            # what two commands share lives in the part it belongs to, not in another command
            bad.append(f"{path.relative_to(ROOT)}:{line}: command {module} imports command {target}")
            continue
        if mine == theirs == "ltr.clicks" and clicks_violation(module, target):
            bad.append(f"{path.relative_to(ROOT)}:{line}: {clicks_violation(module, target)}")
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


def test_moved_stubs_forward_with_a_warning():
    import importlib
    import warnings

    from ltr.base._moved import MOVED

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
        assert [getattr(n, "module", None) for n in imports] == ["ltr.base._moved"], f"{old}: a stub imports only ltr.base._moved"


@pytest.mark.parametrize(
    "module, source, expected",
    [
        ("ltr/data/x.py", "from ltr.train.models import MLPScorer\n", "ltr.data.x (ltr.data) imports ltr.train.models"),
        ("ltr/data/x.py", "def f():\n    from ltr.train import Trainer\n", "imports ltr.train"),
        ("ltr/clicks/x.py", "from ltr.study.report_table import markdown_table\n", "imports ltr.study.report_table"),
        ("ltr/train/x.py", "from ltr import commands\n", "imports ltr.commands"),
        ("metrics/x.py", "import losses\n", "metrics.x (metrics) imports losses"),
        ("losses/x.py", "from ltr.data import RankingDataset\n", "imports ltr.data"),
        ("ltr/base/errors.py", "from ltr.data import RankingDataset\n", "(shared) imports ltr.data"),
        ("ltr/train/x.py", "from .models import MLPScorer\nfrom ..study import ablation\n", "imports ltr.study"),
        ("ltr/commands/x.py", "from ltr.commands.train import load_data\n", "command ltr.commands.x imports command"),
        ("ltr/commands/clicks/x.py", "from ltr.commands.train import load_data\n", "command ltr.commands.clicks.x imports"),
        ("ltr/clicks/logs/x.py", "from ltr.clicks.estimators.ips import click_dcg\n", "(logs) imports ltr.clicks.estimators.ips"),
        ("ltr/clicks/simulate/x.py", "def f():\n    from ..propensities import interventions\n", "(simulate) imports ltr.clicks.propensities"),
        ("ltr/clicks/interleaving.py", "from ltr.clicks.propensities.harvesting import x\n", "(propensities, not below it)"),
        ("ltr/clicks/estimators/x.py", "from ltr.clicks import simulate_clicks\n", "not a floor"),
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
        "from ltr.train import Trainer\nfrom ltr.base.errors import LtrError\nfrom ltr.study.report import summarize\n"
        "from . import report\n"
    )
    assert violations(path) == []


def test_allowed_imports_inside_clicks_and_a_command_package(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    files = {
        "ltr/clicks/engines/x.py": "from ltr.clicks.estimators.ips import click_dcg\nfrom ltr.clicks.logs import table\n"
                                   "from .lightgbm import fit\n",
        "ltr/clicks/propensities/x.py": "from ltr.clicks.simulate.click_models import attraction\n",
        "ltr/commands/clicks/train.py": "from ltr.commands.clicks.common import load_log\nfrom . import common\n",
    }
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        assert violations(path) == [], name


# ---------------------------------------------------------------------------------------------
# No import circles: no set of modules may import each other in a loop, lazy imports included.
# The graph has an edge a -> b for every import statement of a (at any depth: inside functions too)
# naming the toolkit module b; ``from pkg import name`` points at ``pkg.name`` when that is a module,
# else at ``pkg`` (its __init__). The implicit import of a parent package is not an edge (every
# module would otherwise loop with its package's __init__). Cycles are the strongly connected
# components (Tarjan) of more than one module, or a module importing itself.
#
# CYCLE_PACKAGES lists the top packages whose modules are checked: all three.
CYCLE_PACKAGES = ("metrics", "losses", "ltr")


def module_graph(root: Path, files: list[Path]) -> dict[str, set[str]]:
    """``{module: set of toolkit modules it imports}`` over ``files`` (paths under ``root``)."""
    names = {}
    for path in files:
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        names[path] = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    known = set(names.values())
    graph: dict[str, set[str]] = {}
    for path, module in names.items():
        targets = set()
        for _, name, imported in import_statements(path, module):
            if imported is None:
                targets.update({name} & known)
            for n in imported or ():
                sub = f"{name}.{n}"
                targets.update({sub} & known or {name} & known)
        graph[module] = targets
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit on long chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
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
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: components of several modules, and self-imports."""
    return [c for c in strongly_connected(graph) if len(c) > 1 or c[0] in graph.get(c[0], ())]


@pytest.fixture(scope="module")
def package_cycles() -> list[list[str]]:
    """The import circles of the checkout's packages, computed once for the parametrized test below."""
    return import_cycles(module_graph(ROOT, package_files()))


@pytest.mark.parametrize("top", CYCLE_PACKAGES)
def test_no_import_cycles(top, package_cycles):
    cycles = package_cycles
    mine = [c for c in cycles if any(m == top or m.startswith(top + ".") for m in c)]
    assert not mine, f"import circles among {top} modules:\n" + "\n".join(" <-> ".join(c) for c in mine)


def test_the_cycle_checker_finds_lazy_and_relative_circles(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import f\n",
        "pkg/b.py": "def f():\n    from . import c\n",        # lazy and relative
        "pkg/c.py": "import pkg.a\nimport numpy\n",             # closes a -> b -> c -> a
        "pkg/d.py": "from pkg import a\n",                       # reaches the circle, is not in it
        "pkg/e.py": "def g():\n    import pkg.e\n",              # imports itself
        "pkg/sub/__init__.py": "from .x import y\n",
        "pkg/sub/x.py": "from pkg.sub import z\n",               # x <-> the package's __init__
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = module_graph(tmp_path, sorted(tmp_path.rglob("*.py")))
    assert graph["pkg.d"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert sorted(import_cycles(graph)) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.e"], ["pkg.sub", "pkg.sub.x"]]


def test_tarjan_handles_a_long_chain_without_recursion():
    n = 5000  # deeper than Python's default recursion limit
    graph = {f"m{i}": {f"m{i + 1}"} for i in range(n)}
    graph[f"m{n}"] = {"m0"}
    (cycle,) = import_cycles(graph)
    assert len(cycle) == n + 1
    del graph[f"m{n}"]
    assert import_cycles(graph) == []


def test_the_suite_refuses_the_moved_names():
    """pyproject's filterwarnings turns the stubs' warning into an error in the tests, so no test (nor
    docs example run by them) uses a deprecated name by accident; the tests of the stubs catch it."""
    import importlib

    from ltr.base._moved import MOVED

    old, new = next(iter(MOVED.items()))
    name = next(n for n in importlib.import_module(new).__all__ if not n.startswith("_"))
    with pytest.raises(DeprecationWarning, match=f"{old}.{name} moved to {new}.{name} in ltr 0.2"):
        getattr(importlib.import_module(old), name)


def test_names_moved_out_of_a_module_forward_with_a_warning():
    import importlib
    import warnings

    from ltr.base._moved import MOVED_NAMES

    for old, names in MOVED_NAMES.items():
        for name, new in names.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = getattr(importlib.import_module(old), name)
            assert value is getattr(importlib.import_module(new), name)
            assert caught and issubclass(caught[0].category, DeprecationWarning) and new in str(caught[0].message)


def test_names_that_moved_apart_from_their_module_forward_to_their_own_place():
    """``ltr.clicks.click_models.ClickLog`` went to ``ltr.clicks.logs.click_log``, the simulator to
    ``ltr.clicks.simulate.click_models``: each old name reaches the object its new module holds."""
    import importlib
    import warnings

    from ltr.base._moved import MOVED_APART

    for old, names in MOVED_APART.items():
        stub = importlib.import_module(old)
        for name, new in names.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = getattr(stub, name)
            assert value is getattr(importlib.import_module(new), name), (old, name)
            assert new in str(caught[0].message), (old, name)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        from ltr.clicks.click_models import simulate_clicks
    assert simulate_clicks.__module__ == "ltr.clicks.simulate.click_models"
