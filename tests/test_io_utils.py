"""Atomic writes: whole file or nothing, and the usual file mode."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ltr.base.io_utils import atomic_path, atomic_write_json, atomic_write_text


def test_failed_write_leaves_previous_version(tmp_path):
    target = tmp_path / "summary.json"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary left


def test_json_numpy_values_and_mode(tmp_path):
    np = pytest.importorskip("numpy")
    target = tmp_path / "sub" / "r.json"
    atomic_write_json(target, {"a": np.float64(0.5), "b": np.arange(3)})
    assert json.loads(target.read_text()) == {"a": 0.5, "b": [0, 1, 2]}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
