"""Griffe extension: the project's reStructuredText habits in docstrings, read as Markdown.

The docstrings are written for ``help()`` and doctest: ``::`` literal blocks, ``>>>`` examples and
roles such as ``:func:`~metrics.gain_values```. mkdocstrings reads docstrings as Markdown, where an
example line ``[0.0, 1.0, 3.0]`` would be taken for a link. This extension rewrites, for the site
only (the source is not touched):

- a paragraph ending in ``::`` and its indented block -> the paragraph ending in ``:`` and the block
  fenced as text;
- a run of ``>>>`` / ``...`` lines and the output lines after them -> a fenced Python console block;
- ``:role:`~a.b.c``` -> ```c```, ``:role:`a.b``` -> ```a.b```.
"""

from __future__ import annotations

import re

from griffe import Extension

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    target = match[2]
    return f"`{target.rsplit('.', 1)[-1] if match[1] else target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _literal_block(lines: list[str], start: int, base: int) -> tuple[list[str], int]:
    """The indented block that follows a ``::`` line at ``start`` (blank lines inside kept)."""
    i, block = start, []
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        block.append(lines[i])
        i += 1
    while block and not block[-1].strip():
        block.pop()
        i -= 1
    body = [line for line in block if line.strip()]
    cut = min((_indent(line) for line in body), default=0)
    fence = " " * base
    return [fence + "```text", *[fence + line[cut:] if line.strip() else "" for line in block], fence + "```"], i


def markdown_of(text: str) -> str:
    """The docstring ``text`` with literal blocks and doctests fenced and roles as code."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(">>>"):
            base, block = _indent(line), []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][base:] if _indent(lines[i]) >= base else lines[i].strip())
                i += 1
            out += [" " * base + "```pycon", *[" " * base + b for b in block], " " * base + "```"]
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            out.append(_ROLE.sub(_role, line[:-2].rstrip() + (":" if stripped != "::" else "")))
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > _indent(line):
                block, i = _literal_block(lines, j, _indent(line))
                out += ["", *block]
                continue
            i += 1
            continue
        out.append(_ROLE.sub(_role, line))
        i += 1
    return "\n".join(out)


class RestToMarkdown(Extension):
    """Rewrite every docstring griffe loads with :func:`markdown_of`."""

    def on_instance(self, *, obj, **kwargs) -> None:  # noqa: D102
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
