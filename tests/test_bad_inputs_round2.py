"""Bad input, round 2 (issue 25): the surfaces added after the first battery.

Parquet folders, ``ltr convert``, stores, ``ltr tune``, ``ltr importance``, ``NeuralRanker``, the
trec_eval names and what a newcomer tripped on. The table uses the first battery's rules
(:mod:`test_bad_inputs`: exit 2, one line naming the place, inputs unchanged, no ``.partial`` left);
the cases that are not a refusal (a message that must say something, a subprocess under a file-size
limit) are tests of their own below it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ltr.cli import main
from test_bad_inputs import (
    Case,
    _parquet,
    _quiet_main,
    assert_refused,
    build_world,
    run_cli,
    snapshot,
    space,
    store_copy,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world2"))


# --------------------------------------------------------------------------------------------------
# Setups
# --------------------------------------------------------------------------------------------------
def parquet_folder(**second):
    """A Parquet folder of two files; the second file's columns changed by ``second`` (see _parquet)."""

    def setup(tmp: Path, w: dict) -> dict:
        d = tmp / "pqdir"
        d.mkdir()
        _parquet(d / "a.parquet", seed=5)
        _parquet(d / "b.parquet", seed=6, qid=lambda v: v + 100, **second)
        return {"bad": str(d)}

    return setup


def store_with(**arrays):
    """The world's store with some arrays replaced (``name=function of the old array``)."""

    def edit(folder: Path) -> None:
        for name, change in arrays.items():
            old = np.load(folder / f"{name}.npy")
            np.save(folder / f"{name}.npy", change(old.copy()))

    return store_copy(edit)


def _set(index, value):
    def change(a):
        a[index] = value
        return a

    return change


def dup_doc_ids(tmp: Path, w: dict) -> dict:
    """A Parquet file whose query 2 holds document id d5 twice, and a model trained on 3 features."""
    _parquet(tmp / "dup.parquet", docid=[f"d{i}" for i in range(7)] + ["d5"] + [f"d{i}" for i in range(8, 16)])
    return {"bad": str(tmp / "dup.parquet")}


T = ["train", "--train", "{train}", "--valid", "{valid}", "--quiet", "--epochs", "1", "--out", "{tmp}/out"]
TU = ["tune", "--config", "{bad}", "--trials", "1", "--out", "{tmp}/tu"]
CASES: list[Case] = [
    # ------------------------------------------------------------------ Parquet folders: every file checked
    Case("pq-folder-second-file-lacks-a-column", ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"],
         ("b.parquet", "f3"), parquet_folder(f3=None)),
    Case("pq-folder-second-file-text-feature", ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"],
         ("b.parquet", "f2", "string"), parquet_folder(f2=lambda v: ["abc"] * len(v))),
    Case("pq-folder-second-file-numbers-as-text", ["train", "--train", "{bad}", "--valid", "{bad}", "--quiet",
                                                   "--epochs", "1", "--out", "{tmp}/o"],
         ("b.parquet", "f1", "string"), parquet_folder(f1=lambda v: [f"{x:.3f}" for x in v])),
    Case("pq-folder-second-file-text-label", ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"],
         ("b.parquet", "label"), parquet_folder(label=lambda v: [str(x) for x in v])),
    # ------------------------------------------------------------------ nothing new inside an input folder
    Case("convert-out-inside-parquet-folder", ["convert", "{bad}", "--out", "{bad}/x.store", "--quiet"],
         ("--out", "inside the input folder"), parquet_folder()),
    Case("train-out-inside-store", ["train", "--train", "{store}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                    "--out", "{store}/run"], ("--out", "inside the input folder")),
    Case("importance-out-inside-model", ["importance", "--model", "{lin}", "--data", "{test}", "--repeats", "1",
                                         "--out", "{lin}/imp"], ("--out", "inside the input folder")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case: Case, world, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = case.setup(tmp_path, world) if case.setup else {}
    values = {**world, **extra, "tmp": str(tmp_path)}
    argv = [a.format(**values) for a in case.argv]
    before = snapshot(world["root"])
    mine = snapshot(values["bad"]) if "bad" in extra and Path(extra["bad"]).is_dir() else None
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, case.expect)
    assert snapshot(world["root"]) == before, "an input or an earlier output changed"
    if mine is not None:
        assert snapshot(values["bad"]) == mine, "the input folder changed"
    leftovers = [p for p in Path(world["root"]).rglob(".*partial*")] + list(tmp_path.rglob(".*partial*"))
    assert not leftovers, leftovers
