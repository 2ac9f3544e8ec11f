"""Shared fixtures: where the third-party data sets live, and a skip when they are absent."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (CI lays a copy there); LTR_SHARED_DIR overrides.
SHARED = Path(os.environ.get("LTR_SHARED_DIR", ROOT.parent / "shared"))
SHARED_DATA = SHARED / "data"
REFERENCE = SHARED / "reference"


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test cleanly when it is not there."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path


@pytest.fixture
def shared_data():
    return shared_path


@pytest.fixture(scope="session")
def gbdt_data_files(tmp_path_factory):
    """train / valid / test as SVMlight, store and Parquet (row groups of 300 rows); 4,405 training rows,
    20 features: the data of the streamed GBDT tests (LightGBM's Sequence, XGBoost's iterators)."""
    from ltr.data import convert_to_store, save_svmlight, to_parquet
    from ltr.data.synthetic import make_synthetic_splits

    d = tmp_path_factory.mktemp("gbdt_files")
    for name, ds in zip(("train", "valid", "test"), make_synthetic_splits(300, 20, mean_list_length=20, seed=5)):
        save_svmlight(ds, d / f"{name}.txt")
        convert_to_store(d / f"{name}.txt", d / f"{name}.store")
        to_parquet(ds, d / f"{name}.parquet", row_group_rows=300)
    return d


def pytest_collection_finish(session):
    # The objects alive once the tests are collected (the imported libraries': some 300,000) sit out the
    # cyclic garbage collector's passes from here on, so a full pass walks only what was made later (the
    # libraries a test imports first, what the tests make): 0.2-0.3 s less each. Frozen once, not per
    # test: a test's own garbage (a closed Dask client, say) must stay collectable by the next one.
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    # Tests marked slow run first: under pytest-xdist each worker starts on one while the others fill
    # the gaps, so no long test starts last and holds up the end of `make test`. The sort is stable.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    _xdist_groups(config, items)


def _xdist_groups(config, items) -> None:
    """Keep ``--dist loadgroup`` working: the tests of one ``xdist_group`` run in one worker.

    pytest-xdist (3.8) groups tests by a ``@NAME`` suffix of their node ids, which its worker writes to
    ``item._nodeid``; pytest 9 reads a node id from ``item._id``, so the suffix was lost and the
    groups were spread over the workers (each paying, say, numba's compilation for ranx). The suffix
    is written where pytest 9 reads it; with an older pytest xdist's own suffix is already there.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest < 9: xdist's own hook works
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = NodeId.parse(item.nodeid + suffix)


def pytest_configure(config):
    # The readers' binary caches go to the cache folder by default (ltr.data.cache): during the tests,
    # to a temporary one per process (the commands the tests start inherit it), never the user's.
    cache = tempfile.mkdtemp(prefix="ltr-test-cache-")
    os.environ["LTR_CACHE_DIR"] = cache
    atexit.register(shutil.rmtree, cache, True)
    # ranx, a test oracle, runs its Python source without numba's compiler: numba compiles its typed
    # Dict / List helpers anew in every process (they cannot be cached on disk), 70-200 s of a worker
    # on a busy 2-core machine for 40-query comparisons that take under a second interpreted. The
    # values are ranx's definitions either way; benchmarks/bench_metrics.py runs ranx compiled and
    # compares its means with ours. NUMBA_DISABLE_JIT=0 in the environment runs the tests compiled.
    os.environ.setdefault("NUMBA_DISABLE_JIT", "1")
    # The collector's full passes spaced as the `ltr` command spaces them (ltr.base.collector), here before
    # collecting the tests imports torch and the rest.
    from ltr.base.collector import configure_collector

    configure_collector()
    # Under pytest-xdist each worker gets one torch thread and one BLAS thread: two workers on two cores
    # already fill the machine, and oversubscribed threads make small ops orders of magnitude slower
    # (OpenBLAS's pthreads spin-wait whatever OMP_WAIT_POLICY says: on a 2-core machine with one core
    # taken by another job the suite's CPU rose by a quarter). The commands the tests start inherit it.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")  # where numpy's OpenBLAS was loaded before this hook
        # ranx's numba functions run parallel loops when compiled: one thread per worker, as for torch below
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
        try:
            import torch
        except ImportError:  # pragma: no cover
            return
        torch.set_num_threads(1)
        _rendezvous_names_from_the_frame()
        from onnx_registry import memoise_torchlib_ops  # tests/onnx_registry.py: 1.2-1.5 s less per ONNX export

        memoise_torchlib_ops()


def _rendezvous_names_from_the_frame() -> None:
    """torch's dynamic rendezvous (``ltr train --nproc``'s launcher) names each of its events after the
    calling method with ``inspect.stack()``, twice per event, which reads the source lines of every frame:
    under pytest's deep stacks 1-2 CPU s per launch, 6 s of the suite. The same name, from the frame
    itself (``inspect.stack()[depth]`` is ``sys._getframe(depth)``); only the tests' processes are changed."""
    import sys

    try:
        from torch.distributed.elastic.rendezvous import dynamic_rendezvous
    except ImportError:  # pragma: no cover - a torch without it: nothing to change
        return

    def get_method_name(depth: int = 2) -> str:
        try:
            return sys._getframe(depth).f_code.co_name
        except ValueError:
            return "no_method_name"

    dynamic_rendezvous.get_method_name = get_method_name
