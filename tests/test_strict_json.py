"""Every JSON file the commands write is strict JSON (issue 48): no ``NaN`` / ``Infinity`` tokens.

Python's :mod:`json` writes them by default and reads them back, so only a strict parser finds them;
jq, browsers and most languages refuse such files. The test runs the commands that write JSON on
tiny inputs chosen to produce undefined numbers (queries without a relevant document, a field value
without a click, positions without swap sessions) and loads every ``*.json`` written with a parser
that rejects the three tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ltr.cli import main
from ltr.base.io_utils import atomic_write_json, json_safe, json_text, write_json_report


def _reject(token: str):
    raise ValueError(f"not JSON: {token}")


def strict_load(path: Path):
    return json.loads(path.read_text(), parse_constant=_reject)


def _ok(argv: list[str]) -> None:
    assert main(argv) == 0, argv


def _field_table(path: Path) -> None:
    """A CSV of 400 rows whose advertiser 'z' has no click: its predicted-over-observed ratio is infinite."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.6, 400)
    adv = np.where(np.arange(400) < 40, "z", np.where(np.arange(400) % 2 == 0, "a", "b"))
    y = np.where(adv == "z", 0, (rng.random(400) < p).astype(int))
    path.write_text("score,label,adv\n" + "".join(f"{s:.6f},{v},{a}\n" for s, v, a in zip(p, y, adv)))


def test_every_json_file_the_commands_write_is_strict(tmp_path, monkeypatch, capsys):
    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    _ok(["synth", "--out", "d", "--queries", "40", "--mean-length", "6", "--features", "4", "--quiet"])
    data = ["--train", "d/train.txt", "--valid", "d/valid.txt", "--test", "d/test.txt", "--quiet"]
    _ok(["train", *data, "--model", "linear", "--epochs", "2", "--ensemble", "1", "--out", "runs/lin"])
    _ok(["gbdt", *data, "--num-boost-round", "3", "--out", "runs/gb"])
    _ok(["predict", "--model", "runs/lin", "--data", "d/test.txt", "--out", "lin.run", "--qrels", "q.txt"])
    _ok(["predict", "--model", "runs/gb", "--data", "d/test.txt", "--out", "gb.run"])
    # queries without a relevant document: skipped, NaN per query
    _ok(["eval", "--qrels", "q.txt", "--run", "lin.run", "--per-query", "--json", "eval.json", "--metrics", "ndcg@5,map"])
    _ok(["compare", "--qrels", "q.txt", "--run", "lin.run", "--run", "gb.run", "--json", "compare.json"])
    _ok(["importance", "--model", "runs/lin", "--data", "d/valid.txt", "--repeats", "1", "--json", "imp.json", "--out", "imp"])
    _ok(["blend", "--models", "runs/lin", "runs/gb", "--valid", "d/valid.txt", "--out", "runs/blend"])
    _ok(["convert", "d/train.txt", "--out", "train.store", "--quiet"])
    _field_table(tmp_path / "fields.csv")
    _ok(["calibrate", "--table", "fields.csv", "--field-columns", "adv", "--method", "platt", "--out", "cal"])
    _ok(["calibrate", "--table", "fields.csv", "--field-columns", "adv", "--method", "field-aware", "--out", "cal-fields"])
    _ok(["clicks", "simulate", "--data", "d/train.txt", "--out", "sim", "--sessions-per-query", "2", "--swap-fraction",
         "0.2", "--quiet"])
    (tmp_path / "space.toml").write_text('[tune]\nkind = "lightgbm"\nmetric = "ndcg@10"\n[data]\ntrain = "d/train.txt"\n'
                                         'valid = "d/valid.txt"\n[gbdt]\nnum_boost_round = 2\n'
                                         '[space.lightgbm]\nlearning_rate = { float = [0.05, 0.2] }\n')
    _ok(["tune", "--config", "space.toml", "--trials", "2", "--out", "tu"])
    capsys.readouterr()
    written = sorted(p for p in tmp_path.rglob("*.json"))
    folders = {p.relative_to(tmp_path).parts[0] for p in written}
    assert folders >= {"d", "runs", "eval.json", "compare.json", "imp.json", "imp", "train.store", "cal", "cal-fields",
                       "sim", "tu"}, folders
    nulls = 0
    for path in written:
        text = path.read_text()
        strict_load(path)  # raises on NaN / Infinity / -Infinity
        nulls += text.count("null")
    assert nulls > 0  # the undefined numbers are there, written as null
    report = strict_load(tmp_path / "cal" / "report.json")
    assert "Infinity" not in json.dumps(report)


def test_json_safe_writes_undefined_numbers_as_null(tmp_path):
    value = {"nan": float("nan"), "inf": float("inf"), "ninf": -math.inf, "arr": np.array([[1.5, np.nan]]),
             "f32": np.float32(np.inf), "ok": 2, "nested": [{"x": (float("nan"),)}], "path": Path("a/b")}
    safe = json_safe(value)
    assert safe == {"nan": None, "inf": None, "ninf": None, "arr": [[1.5, None]], "f32": None, "ok": 2,
                    "nested": [{"x": [None]}], "path": "a/b"}
    atomic_write_json(tmp_path / "a.json", value)
    write_json_report(tmp_path / "b.json", value)
    for name in ("a.json", "b.json"):
        assert strict_load(tmp_path / name) == safe
    with pytest.raises(TypeError):
        json_text({"x": object()})
