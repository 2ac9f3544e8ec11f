"""Functions fit in a reader's head: none in ``ltr/`` is longer than 80 lines without a written reason.

A function's length runs from its ``def`` line to its last line, docstring included (decorators
are not counted). A longer one passes only when the line just above it (above its first decorator,
or above the ``def`` itself) is a comment ``# long: <reason>``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 80
MARK = "# long:"


def _has_reason(lines: list[str], lineno: int) -> bool:
    """Whether 1-based line ``lineno - 1`` is a ``# long: <reason>`` comment with a non-empty reason."""
    if lineno < 2:
        return False
    text = lines[lineno - 2].strip()
    return text.startswith(MARK) and bool(text[len(MARK):].strip())


def long_functions(source: str, max_lines: int = MAX_LINES) -> list[tuple[int, str, int]]:
    """``(def line, qualified name, length)`` of every function longer than ``max_lines`` lines
    without a ``# long:`` reason above it; nested functions and methods are measured too."""
    lines = source.splitlines()
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                length = child.end_lineno - child.lineno + 1
                top = min([d.lineno for d in child.decorator_list] + [child.lineno])
                if length > max_lines and not (_has_reason(lines, top) or _has_reason(lines, child.lineno)):
                    found.append((child.lineno, name, length))
                name += "."
            elif isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}."
            walk(child, name)

    walk(ast.parse(source), "")
    return found


def test_no_function_in_ltr_is_longer_than_80_lines_without_a_reason():
    files = sorted((ROOT / "ltr").rglob("*.py"))
    assert len(files) > 20  # the walk did find the package
    too_long = [
        f"{path.relative_to(ROOT)}:{line} {name} {length}"
        for path in files
        for line, name, length in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not too_long, (
        f"functions longer than {MAX_LINES} lines (def to end); split them into named steps or put "
        f"'{MARK} <reason>' on the line above:\n" + "\n".join(too_long)
    )


def _function(n_lines: int, name: str = "f", indent: str = "") -> str:
    """Source of a function exactly ``n_lines`` long, def to end, with a three-line docstring."""
    assert n_lines >= 5
    body = [f'{indent}def {name}():', f'{indent}    """Doc.', f"{indent}", f'{indent}    """']
    body += [f"{indent}    x = {i}" for i in range(n_lines - len(body) - 1)]
    body.append(f"{indent}    return x")
    return "\n".join(body) + "\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        (_function(85), [(1, "f", 85)]),
        (_function(81), [(1, "f", 81)]),
        (_function(80), []),
        ("# long: a table of cases, one per line\n" + _function(85), []),
        ("# long:\n" + _function(85), [(2, "f", 85)]),  # a mark without a reason does not count
        ("# long: a reason\n\n" + _function(85), [(3, "f", 85)]),  # the comment must be right above
        ("# long: a reason\n@decorator\n@other(1)\n" + _function(85), []),
        ("@decorator\n# long: a reason\n" + _function(85), []),
        ("@decorator\n" + _function(85), [(2, "f", 85)]),  # decorators are not counted in the length
        ("x = 1\n" + _function(85).replace("def f", "async def f"), [(2, "f", 85)]),
        ("class C:\n" + _function(90, "m", "    "), [(2, "C.m", 90)]),
        ("def outer():\n" + _function(82, "inner", "    ") + "    return inner\n",
         [(1, "outer", 84), (2, "outer.inner", 82)]),
    ],
)
def test_walker_measures_synthetic_sources(source, expected):
    assert long_functions(source) == expected
