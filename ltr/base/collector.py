"""The pace of Python's cyclic garbage collector in the ``ltr`` command: few full passes while libraries load.

A command that loads torch, LightGBM, scikit-learn and matplotlib makes some 450,000 objects that live as
long as the process. CPython (3.11 to 3.13) runs a full pass over every tracked object once ten
middle-generation passes have run and the objects that survived them have grown by a quarter, so loading
those libraries walks the whole heap five times on the way: 0.4-0.6 CPU s of a 2.2 s start on the
machine of docs/benchmarks.md, a quarter of a small command's time.

:func:`configure_collector` raises the full pass's threshold from 10 to :data:`FULL_PASS_THRESHOLD`
middle-generation passes. The young passes are as before, so a reference cycle made and dropped inside a
training step is still freed at the next young pass; only garbage that survived two young passes waits
longer (ten times as many middle passes) for a full one. ``ltr.cli.main`` calls it first thing, next to
:func:`ltr.base.threads.configure_threads`; a library user who imports ltr keeps their own settings.

>>> import gc
>>> before = gc.get_threshold()
>>> gc.set_threshold(700, 10, 10); configure_collector()
(700, 10, 100)
>>> gc.set_threshold(700, 10, 500); configure_collector()  # a higher value is kept
(700, 10, 500)
>>> gc.set_threshold(*before)
"""

from __future__ import annotations

import gc

__all__ = ["FULL_PASS_THRESHOLD", "configure_collector"]

#: middle-generation passes between two full passes (CPython's default: 10)
FULL_PASS_THRESHOLD = 100


def configure_collector() -> tuple[int, int, int]:
    """Raise the full pass's threshold to at least :data:`FULL_PASS_THRESHOLD`; returns the thresholds now.

    The young and middle thresholds are kept, and so is automatic collection turned off (a first threshold of 0).
    """
    young, middle, full = gc.get_threshold()
    if young > 0:
        gc.set_threshold(young, middle, max(full, FULL_PASS_THRESHOLD))
    return gc.get_threshold()
