"""The start method of the toolkit's worker processes (``ltr train --nproc``, the ablation's workers).

A worker forked from this process could deadlock (this process may have run OpenMP threads or CUDA), and a spawned
one imports torch and LightGBM again, a few CPU seconds each. A forkserver does neither: one server process, started
without threads, imports the heavy modules once and forks every worker from there. Where the platform has none
(Windows), workers are spawned.

>>> worker_start_method(["json"]) in ("forkserver", "spawn")
True
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["worker_start_method"]


def worker_start_method(preload: Sequence[str | None]) -> str:
    """``"forkserver"``, its server to import ``preload`` (module names; None and ``"__main__"`` are skipped, a name
    that fails to import is ignored there), or ``"spawn"`` where there is no forkserver. The list takes effect when
    the server starts: at the first worker this process starts, later calls do not change a running server."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    modules = [m for m in dict.fromkeys(preload) if m not in (None, "__main__")]
    multiprocessing.get_context("forkserver").set_forkserver_preload(modules)
    return "forkserver"
