"""``ltr calibrate`` on tables: Parquet file / folder and CSV with named columns, the field methods,
the NE / PCOC / per-field report recomputed from the saved calibrator, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.calibrate.factory import load_calibrator
from ltr.calibrate.fields_data import make_field_world
from ltr.commands.calibrate import split_rows
from metrics.calibration import field_rce, normalized_entropy, pcoc

FIELDS = ["advertiser", "site", "device", "position"]


@pytest.fixture(scope="module")
def frame():
    imps = make_field_world(seed=0).impressions(60000, seed=1)
    df = imps.to_frame().drop(columns=["true_ctr"])
    df["w"] = np.where(df["device"] == 2, 2.0, 1.0)
    return df


def _run(args, capsys):
    from ltr.cli import main

    rc = main(["calibrate", *args])
    return rc, capsys.readouterr()


@pytest.fixture(scope="module")
def folder_run(frame, tmp_path_factory):
    """``ltr calibrate --method beta`` on the first 20,000 rows as a folder of two Parquet files, fields
    device and position: one run (about 2 s, most of it its pictures) for the folder / CSV comparison
    and the per-field pictures both."""
    import contextlib
    import io

    from ltr.cli import main

    root = tmp_path_factory.mktemp("folder_run")
    frame = frame.iloc[:20000]  # a third of the module's rows: the same reading, a third of the report's bootstrap
    folder = root / "parts"
    folder.mkdir()
    frame.iloc[:9000].to_parquet(folder / "part-0.parquet")
    frame.iloc[9000:].to_parquet(folder / "part-1.parquet")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["calibrate", "--table", str(folder), "--field-columns", "device,position", "--method", "beta",
                   "--out", str(root / "a")])
    assert rc == 0, err.getvalue()
    return frame, root / "a"


def test_parquet_field_aware_report_recomputed(frame, tmp_path, capsys):
    path = tmp_path / "imps.parquet"
    frame.to_parquet(path)
    out = tmp_path / "out"
    rc, cap = _run(["--table", str(path), "--field-columns", ",".join(FIELDS), "--weight-column", "w",
                    "--method", "field-aware", "--seed", "4", "--out", str(out)], capsys)
    assert rc == 0, cap.err
    rep = json.loads((out / "report.json").read_text())
    fit = split_rows(len(frame), 0.5, 4)
    ev = frame[~fit]
    cal = load_calibrator(out / "calibrator.json")
    p = cal.predict(ev["score"].to_numpy(), {f: ev[f].to_numpy() for f in FIELDS})
    y, w = ev["label"].to_numpy(), ev["w"].to_numpy()
    fr = rep["field_report"]
    assert fr["after"]["normalized_entropy"] == pytest.approx(normalized_entropy(y, p, sample_weight=w), rel=1e-12)
    assert fr["after"]["pcoc"] == pytest.approx(pcoc(y, p, sample_weight=w), rel=1e-12)
    assert fr["after"]["fields"]["device"]["f_rce"] == pytest.approx(
        field_rce(y, p, ev["device"].to_numpy(), sample_weight=w), rel=1e-12)
    cells = fr["order"]["within_cells"]
    assert (cells["reversed"], cells["ties_created"], cells["ties_broken"]) == (0, 0, 0)
    # The pooled model misses the device effect: field-aware calibration cuts the device F-RCE.
    assert fr["after"]["fields"]["device"]["f_rce"] < 0.5 * fr["before"]["fields"]["device"]["f_rce"]
    assert "F-RCE device" in cap.out and "worst field values" in cap.out


@pytest.mark.xdist_group("calibrate_folder_run")  # shares folder_run with the pictures' test
def test_parquet_folder_and_csv_read_the_same_rows(folder_run, tmp_path, capsys):
    frame, folder_out = folder_run
    csv = tmp_path / "imps.csv"
    frame.to_csv(csv, index=False)
    rc, cap = _run(["--table", str(csv), "--field-columns", "device,position", "--method", "beta",
                    "--out", str(tmp_path / "b")], capsys)
    assert rc == 0, cap.err
    reports = [json.loads((d / "report.json").read_text()) for d in (folder_out, tmp_path / "b")]
    a, b = (r["field_report"]["after"] for r in reports)
    assert a["normalized_entropy"] == b["normalized_entropy"]
    for f in ("device", "position"):  # values are ints in Parquet, text in CSV: compare the numbers
        assert a["fields"][f]["f_rce"] == b["fields"][f]["f_rce"]
        assert str(a["fields"][f]["worst_value"]) == str(b["fields"][f]["worst_value"])
    assert reports[0]["inputs"]["rows"] == len(frame)


def test_table_errors_name_the_file_column_and_row(frame, tmp_path, capsys):
    csv = tmp_path / "bad.csv"
    bad = frame.iloc[:50].copy()
    bad.loc[bad.index[7], "label"] = 3
    bad.to_csv(csv, index=False)
    rc, cap = _run(["--table", str(csv), "--method", "platt", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and f"{csv}: column 'label', row 8 holds 3.0, which is not one of 0, 1" in cap.err
    rc, cap = _run(["--table", str(csv), "--score-column", "pctr", "--method", "platt", "--out", str(tmp_path / "o")],
                   capsys)
    assert rc == 2 and "no column 'pctr'; the columns are advertiser" in cap.err
    good = tmp_path / "good.csv"
    frame.iloc[:50].to_csv(good, index=False)
    rc, cap = _run(["--table", str(good), "--method", "multicalibration", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "needs --table with --field-columns" in cap.err
    rc, cap = _run(["--method", "platt", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "give either --table" in cap.err
    assert not (tmp_path / "o").exists()


def test_parquet_missing_column_and_folder(frame, tmp_path, capsys):
    path = tmp_path / "imps.parquet"
    frame.iloc[:100].to_parquet(path)
    rc, cap = _run(["--table", str(path), "--field-columns", "campaign", "--method", "platt",
                    "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "no column 'campaign'; the columns are advertiser" in cap.err
    folder = tmp_path / "parts"
    folder.mkdir()
    frame.iloc[:100].to_parquet(folder / "part-0.parquet")
    rc, cap = _run(["--table", str(folder), "--label-column", "clicked", "--method", "platt",
                    "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and f"{folder}: cannot read the columns score, clicked" in cap.err


def _band_one_draw_per_call(y, p, n_bins, n_boot, level, seed):
    """reliability_band written out as one seeded draw of its own per vector (the definition)."""
    order = np.argsort(p, kind="stable")
    bins = np.empty(len(p), dtype=np.int64)
    bins[order] = np.minimum((np.arange(len(p)) * n_bins) // len(p), n_bins - 1)
    keep = np.bincount(bins, minlength=n_bins) > 0
    rng, reps = np.random.default_rng(seed), []
    for _ in range(n_boot):
        c = rng.poisson(1.0, len(p)).astype(np.float64)
        num, den = (np.bincount(bins, weights=w, minlength=n_bins)[keep] for w in (c * y, c))
        reps.append(np.where(den > 0, num / np.maximum(den, 1e-300), np.nan))
    a = (1.0 - level) / 2.0
    return np.nanquantile(reps, a, axis=0), np.nanquantile(reps, 1.0 - a, axis=0)


def test_bands_of_several_vectors_share_the_draws_and_equal_each_band_alone():
    from ltr.calibrate.field_report import reliability_band, reliability_bands

    rng = np.random.default_rng(3)
    p = rng.uniform(0.01, 0.3, 800)
    y = (rng.random(800) < p).astype(float)
    ps = [p, np.sqrt(p), np.where(p > 0.1, 0.2, p)]  # the last one with ties: bins split by position
    bands = reliability_bands(y, ps, n_bins=7, n_boot=60, level=0.8, seed=5)
    for q, band in zip(ps, bands):
        alone = reliability_band(y, q, n_bins=7, n_boot=60, level=0.8, seed=5)
        for got, expected in zip(band, alone):
            assert np.array_equal(got, expected)
        low, high = _band_one_draw_per_call(y, q, 7, 60, 0.8, 5)
        assert np.array_equal(band[2], low) and np.array_equal(band[3], high)


@pytest.mark.xdist_group("calibrate_folder_run")
def test_reliability_band_covers_the_curve_and_per_field_pngs(folder_run):
    from ltr.calibrate.field_report import reliability_band

    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.3, 5000)
    y = (rng.random(5000) < p).astype(float)
    mp, rate, lo, hi = reliability_band(y, p, n_bins=5, n_boot=100, seed=1)
    assert len(mp) == 5 and np.all(np.diff(mp) > 0)
    assert np.all(lo <= rate) and np.all(rate <= hi) and np.all(hi - lo > 0)
    # each bin holds 1000 rows: its rate is the mean of y over the rows of that quintile of p
    q = np.sort(p)[999]
    assert rate[0] == pytest.approx(y[p <= q].mean())
    again = reliability_band(y, p, n_bins=5, n_boot=100, seed=1)
    assert np.array_equal(again[2], lo)
    out = folder_run[1]  # the command draws one picture per field column
    for name in ("reliability_device.png", "reliability_position.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
