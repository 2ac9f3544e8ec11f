"""Thread settings applied by the ``ltr`` command before torch or LightGBM is imported.

On a busy machine OpenMP's default spin-waiting makes worker threads burn the cores other processes
need, and small torch / LightGBM operations then wait on each other: the same ``ltr gbdt`` run took
13.9 s once and 52.4 s the next on a loaded 2-core machine, and ~10 s both times with passive waiting.
OpenMP reads its settings once, when the runtime loads, so they must be in the environment before the
first ``import torch`` / ``import lightgbm``; :func:`configure_threads` is called first thing in
``ltr.cli.main``.

The knob: ``LTR_THREADS=N`` sets the thread count of torch, LightGBM, OpenMP and the BLAS libraries
(default: unset, each library's own choice, usually one thread per core); torch reads
``OMP_NUM_THREADS`` when it loads and LightGBM uses OpenMP's default, so both follow it. A wait policy
the user set (``OMP_WAIT_POLICY=ACTIVE``) is kept.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping  # not typing's: importing typing costs `ltr --help` ~8 ms

from ltr.base.errors import LtrError

__all__ = ["THREADS_ENV", "configure_threads", "configured_threads", "one_blas_thread"]

THREADS_ENV = "LTR_THREADS"
_COUNT_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def configured_threads(environ: MutableMapping[str, str] | None = None) -> int | None:
    """The thread count asked for with ``LTR_THREADS`` (None when unset or empty).

    >>> configured_threads({"LTR_THREADS": "2"}), configured_threads({})
    (2, None)
    """
    env = os.environ if environ is None else environ
    text = env.get(THREADS_ENV, "").strip()
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise LtrError(f"{THREADS_ENV}={text!r}: expected a positive integer (threads for torch, LightGBM and OpenMP)")
    return n


def configure_threads(environ: MutableMapping[str, str] | None = None) -> int | None:
    """Set passive OpenMP waiting and, with ``LTR_THREADS``, the thread counts; returns the count.

    >>> env = {"LTR_THREADS": "3", "OMP_NUM_THREADS": "1"}
    >>> configure_threads(env), env["OMP_WAIT_POLICY"], env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"]
    (3, 'PASSIVE', '3', '3')
    """
    env = os.environ if environ is None else environ
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    n = configured_threads(env)
    if n is not None:
        for name in _COUNT_VARS:
            env[name] = str(n)
    return n


class one_blas_thread:
    """``with one_blas_thread():`` the BLAS libraries run one thread inside the block, their limit before
    it restored after.

    For many small solves (a few hundred unknowns at most): one thread does each in about a millisecond,
    where a multi-threaded BLAS wakes its pool per call, and OpenBLAS's threads spin-wait whatever
    ``OMP_WAIT_POLICY`` says, taking the cores other work needs on a busy machine (40 ms a Newton solve,
    10x the CPU of the harvest estimator, measured on 2 cores). threadpoolctl is imported on entry.
    """

    def __enter__(self) -> "one_blas_thread":
        from threadpoolctl import threadpool_limits

        self._limits = threadpool_limits(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc) -> None:
        self._limits.restore_original_limits()
