"""``ltr auction`` (issue 46, part 3): hand-worked GSP / VCG prices from a table, the oracle, reserves
per field value fitted on day 1 and applied on day 2, the winners' PCOC, intervals over requests, and
clear errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ltr.calibrate.auction import run_auctions
from ltr.cli import main


def _run(args, capsys):
    rc = main(["auction", *args])
    return rc, capsys.readouterr()


def _rep(folder):
    return json.loads((folder / "report.json").read_text())


def test_hand_worked_prices_from_a_csv_in_any_row_order(tmp_path, capsys):
    # request r1: bids 4, 3, 2 with pCTR 0.1, 0.2, 0.1 -> scores 0.4, 0.6, 0.2: slot 1 ad b, slot 2 ad a.
    # GSP per click: b pays 0.4 / 0.2 = 2, a pays 0.2 / 0.1 = 2. Slot effects 1, 0.5:
    # revenue = 2 * 0.2 * 1 + 2 * 0.1 * 0.5 = 0.5 (the true CTRs are the pCTRs here).
    df = pd.DataFrame({"request": ["r2", "r1", "r1", "r2", "r1"], "ad": ["x", "a", "b", "y", "c"],
                       "bid": [1.0, 4.0, 3.0, 2.0, 2.0], "pctr": [0.3, 0.1, 0.2, 0.1, 0.1]})
    df.to_csv(tmp_path / "t.csv", index=False)
    rc, cap = _run(["--table", str(tmp_path / "t.csv"), "--pctr-column", "pctr", "--slots", "2",
                    "--position-effects", "1,0.5", "--bootstrap", "20", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0, cap.err
    gsp, vcg = (_rep(tmp_path / "o")["mechanisms"][m] for m in ("gsp", "vcg"))
    # r2: scores 0.3 (x), 0.2 (y): x pays 0.2 / 0.3 per click, y pays 0 (no one below, no reserve)
    r1 = 2 * 0.2 * 1 + 2 * 0.1 * 0.5
    r2 = (0.2 / 0.3) * 0.3 * 1
    assert gsp["revenue"]["value"] == pytest.approx(r1 + r2, rel=1e-12)
    # VCG per impression of slot s: sum_{j >= s} (theta_j - theta_{j+1}) e_(j+2), which is the revenue here
    v1 = (1 - 0.5) * 0.4 + 0.5 * 0.2 + 0.5 * 0.2  # r1: slot 1 pays 0.5*0.4 + 0.5*0.2, slot 2 pays 0.5*0.2
    v2 = (1 - 0.5) * 0.2  # r2: slot 1 pays 0.5 * 0.2, slot 2 pays 0
    assert vcg["revenue"]["value"] == pytest.approx(v1 + v2, rel=1e-12)
    assert gsp["welfare"]["value"] == pytest.approx(3 * 0.2 + 4 * 0.1 * 0.5 + 1 * 0.3 + 2 * 0.1 * 0.5, rel=1e-12)
    assert gsp["revenue"]["low"] <= gsp["revenue"]["value"] <= gsp["revenue"]["high"]


@pytest.fixture(scope="module")
def requests(tmp_path_factory):
    from ltr.calibrate.fields_data import make_field_world

    root = tmp_path_factory.mktemp("auction")
    world = make_field_world(seed=0)
    for day, seed in (("day1", 5), ("day2", 6)):
        df = world.requests(3000, 6, seed=seed).to_frame()
        df["pctr"] = 1 / (1 + np.exp(-df["score"]))  # the raw pooled model's pCTR
        df.to_parquet(root / f"{day}.parquet")
    return root


def test_oracle_winners_pcoc_and_intervals(requests, capsys):
    root = requests
    df = pd.read_parquet(root / "day1.parquet")
    rc, cap = _run(["--table", str(root / "day1.parquet"), "--pctr-column", "pctr", "--true-ctr-column", "true_ctr",
                    "--position-effects", "1,0.7,0.49", "--out", str(root / "o1")], capsys)
    assert rc == 0, cap.err
    rep = _rep(root / "o1")
    a, k = 3000, 6
    bids, p, t = (df[c].to_numpy().reshape(a, k) for c in ("bid", "pctr", "true_ctr"))
    res = run_auctions(bids, p, t, slots=3, position_effects=[1, 0.7, 0.49])
    ora = run_auctions(bids, t, t, slots=3, position_effects=[1, 0.7, 0.49])
    g = rep["mechanisms"]["gsp"]
    assert g["winners_pcoc"]["value"] == pytest.approx(res.winners_pcoc, rel=1e-12)
    assert g["regret"]["value"] == pytest.approx(ora.total_welfare - res.total_welfare, rel=1e-10)
    assert g["allocation_agreement"]["value"] == pytest.approx(float((res.winners == ora.winners).all(axis=1).mean()))
    assert rep["all_candidates_pcoc"] == pytest.approx(p.sum() / t.sum(), rel=1e-12)
    for d in g.values():
        assert d["low"] <= d["value"] <= d["high"]
    assert "winners' PCOC" in cap.out and (root / "o1" / "auction.png").exists()
    # the oracle against itself: everything agrees
    rc, _ = _run(["--table", str(root / "day1.parquet"), "--pctr-column", "true_ctr", "--true-ctr-column", "true_ctr",
                  "--out", str(root / "o2"), "--mechanisms", "gsp"], capsys)
    g = _rep(root / "o2")["mechanisms"]["gsp"]
    assert (g["allocation_agreement"]["value"], g["regret"]["value"], g["winners_pcoc"]["value"]) == (1.0, 0.0, 1.0)


def test_reserves_fitted_on_day1_are_applied_on_day2(tmp_path, capsys):
    """One ad per request and one slot: revenue = reserve x pCTR when the bid reaches the reserve, so the
    best reserve of a device is its bid. Day 2 applies the fitted prices to new requests."""
    rng = np.random.default_rng(0)
    n = 400
    dev = rng.integers(0, 2, n)
    day1 = pd.DataFrame({"request": np.arange(n), "ad": 0, "bid": np.where(dev == 0, 1.0, 3.0),
                         "pctr": rng.uniform(0.01, 0.1, n), "device": dev})
    day1.to_parquet(tmp_path / "d1.parquet")
    rc, cap = _run(["--table", str(tmp_path / "d1.parquet"), "--pctr-column", "pctr", "--slots", "1",
                    "--field-columns", "device", "--fit-reserves", "--reserve-field", "device",
                    "--out", str(tmp_path / "fit")], capsys)
    assert rc == 0, cap.err
    spec = json.loads((tmp_path / "fit" / "reserves.json").read_text())
    assert spec["reserves"] == {"0": 1.0, "1": 3.0}
    g = _rep(tmp_path / "fit")["mechanisms"]["gsp"]
    assert g["revenue"]["value"] == pytest.approx(float((day1["bid"] * day1["pctr"]).sum()), rel=1e-12)
    day2 = day1.assign(bid=np.where(dev == 0, 2.0, 2.5), device=dev.astype(float))  # floats: the same values
    day2.to_parquet(tmp_path / "d2.parquet")
    rc, cap = _run(["--table", str(tmp_path / "d2.parquet"), "--pctr-column", "pctr", "--slots", "1",
                    "--reserves", str(tmp_path / "fit" / "reserves.json"), "--out", str(tmp_path / "apply")], capsys)
    assert rc == 0, cap.err
    g = _rep(tmp_path / "apply")["mechanisms"]["gsp"]
    # device 0 bids 2 over a reserve of 1 and pays 1; device 1 bids 2.5 under its reserve of 3: not shown
    assert g["revenue"]["value"] == pytest.approx(float(day2["pctr"][dev == 0].sum()), rel=1e-12)
    assert g["shown"]["value"] == int((dev == 0).sum())


def test_calibrator_path_and_errors(requests, tmp_path, capsys):
    from ltr.calibrate.factory import load_calibrator

    root = requests
    fit = pd.read_parquet(root / "day1.parquet")
    fit["label"] = (np.random.default_rng(1).random(len(fit)) < fit["true_ctr"]).astype(float)
    fit.to_parquet(tmp_path / "imps.parquet")
    assert main(["calibrate", "--table", str(tmp_path / "imps.parquet"), "--method", "platt", "--fit-fraction", "1",
                 "--out", str(tmp_path / "cal")]) == 0
    capsys.readouterr()
    rc, cap = _run(["--table", str(root / "day2.parquet"), "--calibrator", str(tmp_path / "cal"), "--true-ctr-column",
                    "true_ctr", "--mechanisms", "gsp", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0, cap.err
    df = pd.read_parquet(root / "day2.parquet")
    p = load_calibrator(tmp_path / "cal" / "calibrator.json").predict(df["score"].to_numpy())
    res = run_auctions(df["bid"].to_numpy().reshape(3000, 6), p.reshape(3000, 6), df["true_ctr"].to_numpy().reshape(3000, 6),
                       slots=3)
    assert _rep(tmp_path / "o")["mechanisms"]["gsp"]["revenue"]["value"] == pytest.approx(res.total_revenue, rel=1e-12)
    bad = df.copy()
    bad.loc[7, "pctr"] = 1.5
    bad.to_parquet(tmp_path / "bad.parquet")
    for args, msg in (
        (["--pctr-column", "pctr", "--calibrator", str(tmp_path / "cal")], "give the pCTR as --pctr-column, or"),
        (["--pctr-column", "pctr", "--table", str(tmp_path / "bad.parquet")], "column 'pctr', row 8 holds 1.5, which is "
                                                                             "not a probability in [0, 1]"),
        (["--pctr-column", "pctr", "--position-effects", "1,0.7"], "--position-effects needs one value per slot (3)"),
        (["--pctr-column", "pctr", "--fit-reserves"], "--fit-reserves needs --reserve-field"),
        (["--pctr-column", "pctr", "--mechanisms", "gsp,first"], "--mechanisms takes gsp, vcg or both"),
    ):
        table = [] if "--table" in args else ["--table", str(root / "day2.parquet")]
        rc, cap = _run(table + args + ["--out", str(tmp_path / "err")], capsys)
        assert rc == 2 and msg in cap.err, (args, cap.err)
        assert not (tmp_path / "err").exists()
