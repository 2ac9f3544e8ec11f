"""``ltr calibrate``'s frictions of round 2 (issue 46, part 5), each with the value a bug would change:
the score scale honoured in memory, --drop-invalid, progress lines, one split for stream and memory,
--out replaced only with --force (and then whole), per-bin counts and bands in the reliability
diagram, the guide's call signatures and the help text."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from ltr.calibrate.fields_data import make_field_world
from ltr.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def frame():
    df = make_field_world(seed=0).impressions(12000, seed=1).to_frame().drop(columns=["true_ctr"])
    df["w"] = 1.0
    return df


def _run(args, capsys):
    rc = main(["calibrate", *args])
    return rc, capsys.readouterr()


def _report(folder) -> dict:
    return json.loads((Path(folder) / "report.json").read_text())


def test_score_scale_is_honoured_in_memory_as_in_the_stream(frame, tmp_path, capsys):
    df = frame.copy()
    df["score"] = expit(df["score"])
    df.loc[df.index[77], "score"] = 1.02  # one bad score among probabilities
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    common = ["--table", str(path), "--method", "platt", "--score-scale", "probability"]
    for extra in ([], ["--stream"]):
        rc, cap = _run(common + extra + ["--out", str(tmp_path / f"o{len(extra)}")], capsys)
        assert rc == 2 and "column 'score', row 78 holds 1.02, which is not a probability in [0, 1]" in cap.err
    # auto reads them all as logits (one score is above 1): said in the report
    rc, cap = _run(["--table", str(path), "--method", "platt", "--out", str(tmp_path / "auto")], capsys)
    assert rc == 0 and _report(tmp_path / "auto")["inputs"]["before_is"] == "sigmoid(scores)"
    # logit on scores that all lie in [0, 1]: Platt on the raw score, "before" is their sigmoid
    df.loc[df.index[77], "score"] = 0.5
    df.to_parquet(path)
    rc, cap = _run(["--table", str(path), "--method", "platt", "--score-scale", "logit", "--out", str(tmp_path / "lg")],
                   capsys)
    rep = _report(tmp_path / "lg")
    assert rc == 0 and rep["calibrator"]["input"] == "score" and rep["inputs"]["before_is"] == "sigmoid(scores)"
    assert rep["before"]["mean_prediction"] > 0.5  # sigmoid of probabilities lies in [0.5, 0.73]


def _bad_frame(frame):
    df = frame.iloc[:6000].copy()
    df["device"] = df["device"].astype("float64")  # an int field with a null is a float column in pandas
    df.loc[df.index[4], "score"] = np.nan
    df.loc[df.index[9], "device"] = np.nan
    df.loc[df.index[11], "label"] = 2
    df.loc[df.index[13], "w"] = -1.0
    df.loc[df.index[20], ["score", "label"]] = [np.inf, 3]  # bad twice: counted once in the total
    return df


def test_drop_invalid_counts_the_rows_and_keeps_the_split(frame, tmp_path, capsys):
    path = tmp_path / "bad.parquet"
    _bad_frame(frame).to_parquet(path)
    base = ["--table", str(path), "--field-columns", "device", "--weight-column", "w", "--method", "platt",
            "--seed", "3"]
    rc, cap = _run(base + ["--out", str(tmp_path / "refused")], capsys)
    assert rc == 2 and "column 'score', row 5 holds nan, which is not a finite number (--drop-invalid" in cap.err
    reports = []
    for extra, name in (([], "mem"), (["--stream"], "stream")):
        rc, cap = _run(base + extra + ["--drop-invalid", "--out", str(tmp_path / name)], capsys)
        assert rc == 0, cap.err
        assert "left out 5 invalid rows of 6000" in cap.out
        reports.append(_report(tmp_path / name))
    mem, stream = reports
    assert mem["inputs"]["dropped"] == stream["inputs"]["dropped"] == {
        "score": 2, "label": 2, "fields": 1, "weight": 1, "total": 5}
    assert mem["inputs"]["rows"] == stream["inputs"]["rows"] == 5995
    # the split is the hash of the row's position in the file: the same rows on both sides
    assert mem["inputs"]["eval_rows"] == stream["inputs"]["eval_rows"]
    b_mem, b_stream = mem["field_report"]["before"], stream["field_report"]["before"]
    assert b_mem["normalized_entropy"] == pytest.approx(b_stream["normalized_entropy"], rel=1e-12)
    assert b_mem["pcoc"] == pytest.approx(b_stream["pcoc"], rel=1e-12)


def test_stream_and_memory_split_the_same_rows_and_say_their_progress(frame, tmp_path, capsys):
    from ltr.commands.calibrate import split_rows

    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    base = ["--table", str(path), "--field-columns", "device", "--method", "platt", "--fit-fraction", "0.3",
            "--seed", "11"]
    rc, cap = _run(base + ["--out", str(tmp_path / "m")], capsys)
    assert rc == 0
    lines = [ln for ln in cap.err.splitlines() if ln.startswith("ltr calibrate: ")]
    assert [re.sub(r" \(.*", "", ln.split(": ", 1)[1]).split(" ")[0] for ln in lines] == [
        "read", "fitted", "measured", "drew"]
    assert "read 12000 rows" in lines[0] and "fitted platt on" in lines[1]
    rc, cap = _run(base + ["--stream", "--out", str(tmp_path / "s")], capsys)
    assert rc == 0 and "ltr calibrate: read and binned 12000 rows" in cap.err
    m, s = _report(tmp_path / "m"), _report(tmp_path / "s")
    fit = split_rows(12000, 0.3, 11)
    assert m["inputs"]["fit_rows"] == s["inputs"]["fit_rows"] == int(fit.sum())
    y = frame["label"].to_numpy()[~fit]
    p = expit(frame["score"].to_numpy()[~fit])
    from metrics.calibration import normalized_entropy

    for rep in (m, s):  # "before" is exact on both sides: the same evaluation rows
        assert rep["field_report"]["before"]["normalized_entropy"] == pytest.approx(normalized_entropy(y, p), rel=1e-12)


def test_out_is_refused_unless_force_and_then_holds_one_run(frame, tmp_path, capsys):
    path = tmp_path / "t.parquet"
    frame.iloc[:5000].to_parquet(path)
    out = tmp_path / "c"
    rc, cap = _run(["--table", str(path), "--field-columns", "device", "--method", "platt", "--out", str(out)], capsys)
    assert rc == 0 and (out / "reliability_device.png").exists()
    rc, cap = _run(["--table", str(path), "--method", "beta", "--out", str(out)], capsys)
    assert rc == 2 and "already exists" in cap.err and "choose another --out or pass --force" in cap.err
    assert _report(out)["method"] == "platt"
    rc, cap = _run(["--table", str(path), "--method", "beta", "--out", str(out), "--force"], capsys)
    assert rc == 0 and _report(out)["method"] == "beta"
    # the earlier run's field picture went with it: the folder holds one run's results
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "calibrator.json", "reliability.png", "report.json", "report.txt"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    rc, cap = _run(["--table", str(path), "--method", "beta", "--out", str(mine), "--force"], capsys)
    assert rc == 2 and "not a run folder made by ltr" in cap.err and (mine / "notes.txt").read_text() == "keep"


def test_fit_fraction_one_fits_every_row_and_a_tiny_evaluation_is_warned(frame, tmp_path, capsys):
    from ltr.calibrate.calibrators import PlattCalibrator

    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    rc, cap = _run(["--table", str(path), "--method", "platt", "--fit-fraction", "1", "--out", str(tmp_path / "all")],
                   capsys)
    assert rc == 0 and "there is no evaluation part" in cap.out
    rep = _report(tmp_path / "all")
    assert rep["evaluation"] is None and rep["inputs"]["fit_rows"] == 12000 and rep["inputs"]["eval_rows"] == 0
    direct = PlattCalibrator(input="score").fit(frame["score"].to_numpy(), frame["label"].to_numpy())
    assert rep["calibrator"]["slope"] == pytest.approx(direct.slope_, rel=1e-12)
    assert not (tmp_path / "all" / "reliability.png").exists()
    rc, cap = _run(["--table", str(path), "--method", "platt", "--fit-fraction", "0.99", "--out",
                    str(tmp_path / "tiny")], capsys)
    n_ev = _report(tmp_path / "tiny")["inputs"]["eval_rows"]
    assert rc == 0 and n_ev < 200
    assert f"warning: the evaluation part has only {n_ev} rows" in cap.err
    assert _report(tmp_path / "tiny")["inputs"]["warning"].startswith("warning: the evaluation part")


def test_reliability_bins_count_rows_and_their_band_is_wilsons():
    from scipy.stats import binomtest

    from ltr.calibrate.report import reliability_bins

    rng = np.random.default_rng(5)
    p = rng.beta(1, 12, 3000)
    y = (rng.random(3000) < p).astype(float)
    r = reliability_bins(y, p, n_bins=10, strategy="width", level=0.9)
    hist, _ = np.histogram(p, bins=np.linspace(0, 1, 11))
    assert r["count"] == [int(c) for c in hist if c > 0] and sum(r["count"]) == 3000
    for n, rate, lo, hi in zip(r["count"], r["rate"], r["low"], r["high"]):
        ci = binomtest(int(round(rate * n)), n).proportion_ci(confidence_level=0.9, method="wilson")
        assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert lo <= rate <= hi
    mass = reliability_bins(y, p, n_bins=10, strategy="mass")
    assert mass["count"] == [300] * 10


def test_report_json_holds_the_bins_of_the_diagram(frame, tmp_path, capsys):
    path = tmp_path / "t.parquet"
    frame.iloc[:4000].to_parquet(path)
    rc, _ = _run(["--table", str(path), "--method", "platt", "--bins", "8", "--out", str(tmp_path / "o")], capsys)
    rep = _report(tmp_path / "o")
    bins = rep["reliability"]["after"]["mass"]
    assert rc == 0 and sum(bins["count"]) == rep["n_eval"] and len(bins["count"]) == 8
    assert all(lo <= r <= hi for lo, r, hi in zip(bins["low"], bins["rate"], bins["high"]))


def _inline_calls(text: str) -> list[str]:
    return [m for m in re.findall(r"`([A-Za-z_][A-Za-z_0-9.]*\([^`]*\))`", text)]


def test_the_guides_call_signatures_bind():
    """Every inline call `name(args)` of the calibration guide whose name the toolkit exports binds to
    that function's signature (positional count and keyword names), as `make_field_world(seed)` did not."""
    import inspect

    import ltr.calibrate as cal
    import metrics

    text = (ROOT / "docs" / "guide" / "calibration.md").read_text()
    checked = 0
    for call in _inline_calls(text):
        try:
            node = ast.parse(call.replace("...", "None"), mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        fn = getattr(cal, node.func.id, None) or getattr(metrics, node.func.id, None)
        if fn is None or not callable(fn):
            continue
        sig = inspect.signature(fn)
        sig.bind(*[None] * len(node.args), **{k.arg: None for k in node.keywords if k.arg})  # raises TypeError
        checked += 1
    assert checked >= 8


def test_help_names_every_method(capsys):
    from ltr.calibrate.calibrators import ALL_METHODS

    with pytest.raises(SystemExit):
        main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    line = top[top.index(" calibrate "):top.index(" clicks ")]  # its help, however argparse wraps it
    assert "strict isotonic)" not in line and "field-aware" in line and "multicalibration" in line
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = re.sub(r"-\s+", "-", capsys.readouterr().out)  # argparse wraps at hyphens
    for method in ALL_METHODS:
        assert f"{method}:" in text, method
