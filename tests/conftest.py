"""Shared fixtures: where the third-party data sets live, and a skip when they are absent."""

from __future__ import annotations

import os
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


def pytest_collection_modifyitems(config, items):
    # Tests marked slow run first: under pytest-xdist each worker starts on one while the others fill
    # the gaps, so no long test starts last and holds up the end of `make test`. The sort is stable.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_configure(config):
    # Under pytest-xdist each worker gets one torch thread: two workers on two cores already fill
    # the machine, and oversubscribed OpenMP threads make small ops orders of magnitude slower.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # ranx's numba functions run parallel loops: one thread per worker, as for torch below
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
        try:
            import torch
        except ImportError:  # pragma: no cover
            return
        torch.set_num_threads(1)
