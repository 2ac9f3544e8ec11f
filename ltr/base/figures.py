"""Figure margins given in inches, for figures whose layout is known in advance.

``Figure.tight_layout`` measures every tick label and title with the renderer before the figure is
drawn, and saving draws them all again: a quarter of the CPU time of a reliability diagram (about
0.08 s of 0.3 s). Where the labels are fixed text and the tick labels short numbers, the margins
are known: :func:`set_margins` places the axes from them without measuring anything, and a margin in
inches stays the same whatever the figure's width (one panel or four).

>>> from matplotlib.figure import Figure
>>> fig = Figure(figsize=(10, 4))
>>> axes = fig.subplots(1, 2)
>>> set_margins(fig, left=0.5, right=0.5, bottom=0.5, top=0.5, wgap=1.0, ncols=2)
>>> [round(float(v), 3) for v in axes[0].get_position().bounds]
[0.05, 0.125, 0.4, 0.75]
"""

from __future__ import annotations

__all__ = ["set_margins"]


def set_margins(fig, *, left: float, right: float, bottom: float, top: float, wgap: float = 0.0,
                hgap: float = 0.0, ncols: int = 1, nrows: int = 1) -> None:
    """Place the subplot grid of ``fig`` with these margins, and ``wgap`` / ``hgap`` between its
    ``ncols`` columns / ``nrows`` rows, all in inches.

    ``subplots_adjust`` takes the margins as fractions of the figure and the gaps as fractions of the
    mean axes size: ``wspace = wgap / ((W - left - right - (ncols - 1) wgap) / ncols)``, and the same
    for the rows with the height ``H``.
    """
    width, height = fig.get_size_inches()
    axes_w = (width - left - right - (ncols - 1) * wgap) / ncols
    axes_h = (height - bottom - top - (nrows - 1) * hgap) / nrows
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wgap / axes_w, hspace=hgap / axes_h)
