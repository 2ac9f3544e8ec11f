"""Markdown tables and interval cells for the reports the toolkit and its experiments print.

One place for the table layout, so that every report (``ltr clicks``, the experiments) writes the
same markdown: ``| a | b |`` rows under a separator whose cells are ``---`` (left) or ``---:``
(right-aligned numbers).

>>> print(markdown_table(["method", "AUC"], [["platt", "0.7500"]], align="lr"))
| method | AUC |
|---|---:|
| platt | 0.7500 |
>>> format_interval(0.5, 0.25, 0.75)
'0.5000 [0.2500, 0.7500]'
>>> counted(1, "seed"), counted(5, "seed")
('1 seed', '5 seeds')
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

__all__ = ["markdown_table", "markdown_row", "format_interval", "counted"]

_SEPARATOR = {"l": "---", "r": "---:"}


def counted(n: int, noun: str) -> str:
    """``"1 seed"``, ``"3 seeds"``: a count with its noun in the right number."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def markdown_row(cells: Iterable[Any]) -> str:
    """One table row: ``| c1 | c2 | ... |`` (cells written with ``str``)."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_table(header: Sequence[Any], rows: Iterable[Iterable[Any]], align: str | None = None) -> str:
    """A markdown table: the header, the separator, one line per row of (already formatted) cells.

    ``align``: one letter per column, ``"l"`` (``---``) or ``"r"`` (``---:``); default all ``"l"``.
    """
    align = "l" * len(header) if align is None else align
    if len(align) != len(header) or set(align) - set(_SEPARATOR):
        raise ValueError(f"align must hold one of 'l' / 'r' per column ({len(header)}), got {align!r}")
    lines = [markdown_row(header), "|" + "".join(_SEPARATOR[a] + "|" for a in align)]
    lines += [markdown_row(r) for r in rows]
    return "\n".join(lines)


def format_interval(mean: float | None, low: float | None, high: float | None, spec: str = ".4f",
                    *, missing: str | None = None) -> str:
    """``mean [low, high]``, each number formatted with ``spec`` (e.g. ``"+.4f"`` for differences).

    ``missing``: text written for a number that is None or not finite (e.g. the NaN bounds of a
    t-interval over one seed); by default such numbers are formatted as they are (``nan``).

    >>> format_interval(0.5, float("nan"), None, missing="n/a")
    '0.5000 [n/a, n/a]'
    """

    def one(x):
        if missing is not None and (x is None or not math.isfinite(x)):
            return missing
        return f"{x:{spec}}"

    return f"{one(mean)} [{one(low)}, {one(high)}]"
