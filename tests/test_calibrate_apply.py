"""Day-2 use from the command line (issue 46, part 1): fit on every row of day 1, ``--apply`` the saved
calibrator to day 2 in one streamed pass, the report on the new day recomputed from the written
probabilities, unseen values counted, --baseline's RCE, tables without labels, invalid rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.special import expit

from ltr.calibrate.factory import load_calibrator
from ltr.calibrate.fields_data import make_field_world
from ltr.cli import main
from metrics.calibration import field_rce, normalized_entropy, pcoc
from metrics.classification import log_loss

FIELDS = ["advertiser", "site", "device", "position"]


@pytest.fixture(scope="module")
def days(tmp_path_factory):
    """Day 1 fitted on every row (field-aware), a day-2 table with a weight column and two new advertisers."""
    root = tmp_path_factory.mktemp("days")
    world = make_field_world(seed=0)
    day1 = world.impressions(30000, seed=1).to_frame()
    day2 = world.impressions(20000, seed=2).to_frame()
    day2["w"] = np.where(day2["device"] == 1, 2.0, 1.0)
    new = day2.index[:300]
    day2.loc[new[:200], "advertiser"] = 1000  # advertisers the fit never saw
    day2.loc[new[200:], "advertiser"] = 1001
    day2.loc[new[250:], "site"] = 999  # and rows where two fields are new
    day1.to_parquet(root / "day1.parquet")
    day2.to_parquet(root / "day2.parquet")
    assert main(["calibrate", "--table", str(root / "day1.parquet"), "--field-columns", ",".join(FIELDS),
                 "--method", "field-aware", "--fit-fraction", "1", "--out", str(root / "cal")]) == 0
    return root, day2


def _apply(root, name, extra=(), table="day2.parquet"):
    rc = main(["calibrate", "--apply", str(root / "cal"), "--table", str(root / table), "--out", str(root / name),
               *extra])
    return rc


def test_apply_writes_the_calibrated_column_and_judges_the_new_day(days, capsys):
    root, day2 = days
    assert _apply(root, "d2", ["--weight-column", "w"]) == 0
    out = capsys.readouterr().out
    written = pq.read_table(root / "d2" / "calibrated.parquet").to_pandas()
    assert list(written.columns) == list(day2.columns) + ["calibrated"]
    cal = load_calibrator(root / "cal" / "calibrator.json")
    p = cal.predict(day2["score"].to_numpy(), {f: day2[f].to_numpy() for f in FIELDS})
    assert np.array_equal(written["calibrated"].to_numpy(), p)
    rep = json.loads((root / "d2" / "report.json").read_text())
    fr = rep["field_report"]
    y, w = day2["label"].to_numpy(), day2["w"].to_numpy()
    before = expit(day2["score"].to_numpy())
    # exact sums: the streamed report is the in-memory metric of the written probabilities
    assert fr["after"]["normalized_entropy"] == pytest.approx(normalized_entropy(y, p, sample_weight=w), rel=1e-12)
    assert fr["before"]["normalized_entropy"] == pytest.approx(normalized_entropy(y, before, sample_weight=w), rel=1e-12)
    assert fr["after"]["pcoc"] == pytest.approx(pcoc(y, p, sample_weight=w), rel=1e-12)
    for f in FIELDS:
        assert fr["after"]["fields"][f]["f_rce"] == pytest.approx(
            field_rce(y, p, day2[f].to_numpy(), sample_weight=w), rel=1e-10)
    cells = fr["order"]["within_cells"]
    assert (cells["reversed"], cells["ties_created"], cells["ties_broken"]) == (0, 0, 0)
    assert fr["after"]["fields"]["device"]["f_rce"] < fr["before"]["fields"]["device"]["f_rce"]
    assert "judged on this table" in out and "worst field values" in out
    assert (root / "d2" / "reliability.png").exists() and (root / "d2" / "pcoc_device.png").exists()


def test_unseen_values_are_counted_and_listed(days, capsys):
    root, day2 = days
    assert _apply(root, "unseen", ["--weight-column", "w", "--field-columns", "device"]) == 0
    out = capsys.readouterr().out
    u = json.loads((root / "unseen" / "report.json").read_text())["unseen"]
    adv = u["fields"]["advertiser"]
    assert adv["values"] == 2 and adv["rows"] == 300
    assert [(t["value"], t["rows"]) for t in adv["top"]] == [("1000", 200), ("1001", 100)]
    assert adv["impressions"] == pytest.approx(day2["w"].iloc[:300].sum())
    assert u["fields"]["site"]["rows"] == 50 and u["fields"]["device"]["values"] == 0
    assert u["rows_with_an_unseen_value"] == 300 and u["rows_all_unseen"] == 0
    assert "unseen advertiser values (no offset for advertiser): 2 values, 300 rows" in out
    # an unseen value takes no offset: those rows equal the map with that field's offset left out
    cal = load_calibrator(root / "cal" / "calibrator.json")
    rows = day2.iloc[:200]
    z = cal.global_.logit(rows["score"].to_numpy()) + sum(np.array([cal.offsets_[f][str(v)] for v in rows[f]]) for f in ("site", "device", "position"))
    written = pq.read_table(root / "unseen" / "calibrated.parquet").column("calibrated").to_numpy()[:200]
    assert written == pytest.approx(expit(z), rel=1e-12)


def test_baseline_column_and_calibrator_give_rce(days, capsys):
    root, day2 = days
    assert _apply(root, "base_col", ["--baseline", "true_ctr", "--field-columns", "device"]) == 0
    rep = json.loads((root / "base_col" / "report.json").read_text())["field_report"]
    y = day2["label"].to_numpy()
    p = pq.read_table(root / "base_col" / "calibrated.parquet").column("calibrated").to_numpy()
    t = day2["true_ctr"].to_numpy()
    assert rep["rce"]["after"] == pytest.approx(1 - log_loss(y, p) / log_loss(y, t), rel=1e-10)
    assert rep["rce"]["after"] < 0 < rep["rce"]["after"] + 0.02  # the truth is the best one can do
    assert main(["calibrate", "--table", str(root / "day1.parquet"), "--method", "platt", "--fit-fraction", "1",
                 "--out", str(root / "platt")]) == 0
    assert _apply(root, "base_cal", ["--baseline", str(root / "platt"), "--field-columns", "device"]) == 0
    rep = json.loads((root / "base_cal" / "report.json").read_text())["field_report"]
    q = load_calibrator(root / "platt" / "calibrator.json").predict(day2["score"].to_numpy())
    assert rep["rce"]["after"] == pytest.approx(1 - log_loss(y, p) / log_loss(y, q), rel=1e-10)
    assert rep["rce"]["after"] > 0  # the field-aware map beats a global Platt fit on the new day
    assert "RCE after +" in capsys.readouterr().out
    assert _apply(root, "base_bad", ["--baseline", "nothing"]) == 2
    assert "--baseline nothing: neither a column" in capsys.readouterr().err


def test_a_table_without_labels_is_written_and_not_judged(days, capsys):
    root, day2 = days
    day2.drop(columns=["label"]).iloc[:5000].to_csv(root / "nolabel.csv", index=False)
    assert _apply(root, "nolabel", table="nolabel.csv") == 0
    assert "nothing judged" in capsys.readouterr().out
    rep = json.loads((root / "nolabel" / "report.json").read_text())
    assert rep["field_report"] is None and rep["inputs"]["rows_written"] == 5000
    # CSV fields read by pyarrow meet the offsets learnt from Parquet ints: the same probabilities
    p = pq.read_table(root / "nolabel" / "calibrated.parquet").column("calibrated").to_numpy()
    cal = load_calibrator(root / "cal" / "calibrator.json")
    head = day2.iloc[:5000]
    assert p == pytest.approx(cal.predict(head["score"].to_numpy(), {f: head[f].astype(str).to_numpy() for f in FIELDS}),
                              rel=1e-12)


def test_invalid_rows_and_batches(days, capsys):
    root, day2 = days
    bad = day2.iloc[:6000].copy()
    bad.loc[bad.index[10], "score"] = np.nan
    bad.loc[bad.index[20], "label"] = 5
    bad.to_parquet(root / "bad.parquet")
    assert _apply(root, "refused", table="bad.parquet") == 2
    assert "column 'score', row 11 is empty" in capsys.readouterr().err
    assert _apply(root, "dropped", ["--drop-invalid", "--batch-size", "1000", "--field-columns", "device"],
                  table="bad.parquet") == 0
    rep = json.loads((root / "dropped" / "report.json").read_text())
    assert rep["inputs"]["dropped"]["total"] == 2 and rep["inputs"]["rows_calibrated"] == 5998
    col = pq.read_table(root / "dropped" / "calibrated.parquet").column("calibrated")
    assert col.null_count == 2 and col[10].as_py() is None and col[20].as_py() is None
    one = _apply(root, "one_batch", ["--drop-invalid", "--field-columns", "device"], table="bad.parquet")
    rep1 = json.loads((root / "one_batch" / "report.json").read_text())
    assert one == 0 and rep1["field_report"]["after"]["normalized_entropy"] == pytest.approx(
        rep["field_report"]["after"]["normalized_entropy"], rel=1e-12)  # sums: the batches do not matter
    assert _apply(root, "d", ["--method", "platt"]) == 2
    assert "--method does not go with it" in capsys.readouterr().err
