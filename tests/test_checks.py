"""ltr.base.checks: the value rules and path checks every command shares (issue 13)."""

from __future__ import annotations

import argparse
import os

import numpy as np
import pytest

from ltr.base import checks
from ltr.base.checks import boolean, integer, list_of, number, text
from ltr.base.errors import LtrError


@pytest.mark.parametrize("rule, good, bad", [
    (integer(min=1), [1, 7, np.int64(3), 10**30], [0, -1, True, 2.0, 2.5, "3", None, [1]]),
    (number(above=0), [0.5, 3, np.float32(0.25), 1e300], [0, -1e-9, float("nan"), float("inf"), True, "0.1", 10**400]),
    (number(min=0, below=1), [0, 0.999], [1, 1.0, -0.0001]),
    (boolean(), [True, False], [0, 1, "false", "true", None]),
    (text(choices=("a", "b")), ["a", "b"], ["c", 1, None, True]),
    (list_of(integer(min=1), min_len=1), [[1], (2, 3)], [[], [0], [1.0], "12", [True]]),
    (integer(min=0, optional=True), [None, 0], [-1]),
])
def test_rules_accept_and_refuse(rule, good, bad):
    for v in good:
        assert rule.problem(v) is None, v
    for v in bad:
        assert rule.problem(v) is not None, v
        with pytest.raises(LtrError, match=r"^x\.toml \[t\] k (item \d+ )?must be "):
            rule.check(v, "x.toml [t] k")


def test_check_returns_the_python_value():
    assert number().check(3, "k") == 3.0 and isinstance(number().check(3, "k"), float)
    assert integer().check(np.int64(4), "k") == 4 and type(integer().check(np.int64(4), "k")) is int


def test_rule_as_argparse_type_names_the_option():
    p = argparse.ArgumentParser(prog="ltr x", exit_on_error=False)
    p.add_argument("--lr", type=number(above=0))
    assert p.parse_args(["--lr", "0.5"]).lr == 0.5
    with pytest.raises(argparse.ArgumentError, match=r"argument --lr: must be a finite number > 0, got 'nan'"):
        p.parse_args(["--lr", "nan"])
    assert number(min=0, below=1).describe() == "a finite number in [0, 1)"
    assert integer(min=1).describe() == "an integer >= 1"


def test_input_file_says_what_the_path_is_instead(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    assert checks.input_file(tmp_path / "f.txt", "--data") == tmp_path / "f.txt"
    os.mkfifo(tmp_path / "pipe")
    for path, words in ((tmp_path / "none", "--data .*none: file not found"), (tmp_path, "is a folder, not a file"),
                        (tmp_path / "pipe", "not a regular file"),
                        (tmp_path / "f.txt" / "x", r"file not found \(.*f.txt is a file, not a folder\)")):
        with pytest.raises(LtrError, match=words):
            checks.input_file(path, "--data")


def test_output_checks_protect_inputs_and_earlier_runs(tmp_path, monkeypatch):
    data = tmp_path / "data.txt"
    data.write_text("x")
    with pytest.raises(LtrError, match="is the input --data"):
        checks.output_file(data, "--out", inputs=[("--data", data)])
    run = tmp_path / "run"
    run.mkdir()
    (run / checks.RUN_MARK).write_text("{}")
    (run / "model.pt").write_text("w")
    with pytest.raises(LtrError, match="output of an earlier ltr run"):
        checks.output_file(run / "model.pt", "--out")
    assert checks.output_file(run / "new.run", "--out") == run / "new.run"
    with pytest.raises(LtrError, match="holds the input --data"):
        checks.output_folder(tmp_path / "x" / "..", "--out", inputs=[("--data", data)])
    monkeypatch.chdir(run)
    for dest in (".", str(tmp_path)):
        with pytest.raises(LtrError, match="current folder or one above it"):
            checks.output_folder(dest, "--out")


def test_read_json_object_refuses_other_json(tmp_path):
    p = tmp_path / "m.json"
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert checks.read_json_object(p) == {"a": 1}
    for body, words in (("[1]", "expected a JSON object"), ("{x", "invalid JSON"), (b"\xff\xfe", "not UTF-8")):
        p.write_bytes(body if isinstance(body, bytes) else body.encode())
        with pytest.raises(LtrError, match=words):
            checks.read_json_object(p)
