"""``make test`` runs with ``--dist loadgroup``: the tests of one ``xdist_group`` share a pytest-xdist
worker only if their node ids carry the ``@NAME`` suffix the scheduler groups by (tests/conftest.py
writes it where pytest 9 reads node ids; pytest-xdist 3.8 alone writes it where pytest 9 does not)."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("suffix_check")
def test_a_grouped_test_carries_its_group_in_its_node_id(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not a pytest-xdist worker under --dist loadgroup")
    assert request.node.nodeid == "tests/test_xdist_groups.py::test_a_grouped_test_carries_its_group_in_its_node_id@suffix_check"


def test_an_ungrouped_test_keeps_its_node_id(request):
    assert request.node.nodeid == "tests/test_xdist_groups.py::test_an_ungrouped_test_keeps_its_node_id"


def test_the_tests_run_ranx_without_numbas_compiler():
    """tests/conftest.py sets NUMBA_DISABLE_JIT before numba loads: ranx's comparisons take seconds,
    not numba's per-process compilation of its typed containers (70-200 s)."""
    import os

    numba = pytest.importorskip("numba")
    if os.environ.get("NUMBA_DISABLE_JIT") != "1":
        pytest.skip("NUMBA_DISABLE_JIT overridden in the environment")
    assert numba.config.DISABLE_JIT
    assert numba.njit(lambda x: x + 1).__class__.__name__ != "CPUDispatcher"  # a plain function, not compiled
