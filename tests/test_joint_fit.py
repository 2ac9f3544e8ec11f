"""The joint field fit (issue 46, part 4): its designs against explicit matrices, the fit against the
field-aware method and the truth on a world where the score carries part of the field effects, the
order inside cells, the JSON round trip, the command line, and MCGrad side by side where installed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from ltr.calibrate.factory import calibrator_from_json, make_calibrator
from ltr.calibrate.fields_data import make_joint_world
from ltr.calibrate.logistic import CodesDesign, InteractionDesign, weighted_logistic
from metrics.calibration import field_calibration, normalized_entropy

F = ["advertiser", "site", "device", "position"]


def _onehot(codes, k):
    return sp.csr_matrix((np.ones(len(codes)), (np.arange(len(codes)), codes)), shape=(len(codes), k))


def test_designs_equal_their_explicit_matrices():
    rng = np.random.default_rng(0)
    m = 500
    D = rng.normal(size=(m, 3))
    codes = [rng.integers(0, 4, m), rng.integers(0, 7, m)]
    A = CodesDesign(D, codes, [4, 7])
    E = sp.hstack([sp.csr_matrix(D), _onehot(codes[0], 4), _onehot(codes[1], 7), sp.csr_matrix(np.ones((m, 1)))]).toarray()
    theta, r, w = rng.normal(size=E.shape[1]), rng.normal(size=m), rng.uniform(0.1, 1, m)
    assert A @ theta == pytest.approx(E @ theta, abs=1e-12)
    assert A.rmatvec(r) == pytest.approx(E.T @ r, abs=1e-12)
    assert A.gram(w) == pytest.approx((E * w[:, None]).T @ E, abs=1e-10)
    phi = rng.normal(size=(m, 2))
    c = rng.integers(-1, 3, m)  # -1: a row of a value without interaction columns
    B = InteractionDesign(phi, c, 3)
    X = np.zeros((m, 7))
    for i in range(m):
        if c[i] >= 0:
            X[i, c[i] * 2:c[i] * 2 + 2] = phi[i]
    X[:, -1] = 1.0
    theta = rng.normal(size=7)
    assert B @ theta == pytest.approx(X @ theta, abs=1e-12)
    assert B.rmatvec(r) == pytest.approx(X.T @ r, abs=1e-12)
    assert B.gram(w) == pytest.approx((X * w[:, None]).T @ X, abs=1e-10)
    y = (rng.random(m) < 0.3).astype(float)
    pen = np.r_[np.zeros(3), np.full(11, 5.0), 0.0]
    assert weighted_logistic(A, y, penalty=pen) == pytest.approx(
        weighted_logistic(sp.csr_matrix(E), y, penalty=pen), abs=1e-8)


@pytest.fixture(scope="module")
def world_fit():
    imps = make_joint_world(seed=0).impressions(120_000, seed=1)
    fit, judge = imps.halves(seed=2)
    ff = {f: fit.fields[f] for f in F}
    joint = make_calibrator("field-joint", fields=F).fit(fit.pooled_logit, fit.clicks, ff)
    aware = make_calibrator("field-aware", fields=F).fit(fit.pooled_logit, fit.clicks, ff)
    return fit, judge, joint, aware


def _judge(judge, p):
    fc = field_calibration(judge.clicks, p, {f: judge.fields[f] for f in F}, n_boot=2)
    return normalized_entropy(judge.clicks, p), fc.mean_f_rce


def test_joint_beats_the_sequential_fit_and_nears_the_truth(world_fit):
    fit, judge, joint, aware = world_fit
    jf = {f: judge.fields[f] for f in F}
    ne_j, frce_j = _judge(judge, joint.predict(judge.pooled_logit, jf))
    ne_a, frce_a = _judge(judge, aware.predict(judge.pooled_logit, jf))
    ne_t, frce_t = _judge(judge, judge.true_ctr)
    assert ne_j < ne_a - 0.002 and frce_j < frce_a
    assert ne_j - ne_t < 0.6 * (ne_a - ne_t)  # 40% of the field-aware method's gap to the truth closed (45% here)
    # empirical Bayes: the score carries the site and position effects (large penalty, offsets near 0),
    # the advertisers' spread is wide (small penalty)
    assert joint.penalties_["advertiser"] < 15 < 50 < min(joint.penalties_["site"], joint.penalties_["position"])
    # the planted interaction (the device changes the score's slope) passes the held-out test
    assert any(h.get("field") == "device" and h["kept"] for h in joint.held_out_)


def test_order_inside_cells_is_kept_and_the_map_increases_in_every_cell(world_fit):
    from ltr.calibrate.field_calibrators import cell_codes, check_within_field_order

    fit, judge, joint, _ = world_fit
    jf = {f: judge.fields[f] for f in F}
    p = joint.predict(judge.pooled_logit, jf)
    assert check_within_field_order(judge.pooled_logit, p, cell_codes([jf[f] for f in F])) == {
        "reversed": 0, "ties_created": 0, "ties_broken": 0}
    grid = np.linspace(-12, 4, 400)  # far beyond the scores seen: the bound holds on every segment
    for dev in range(3):
        for pos in range(4):
            cell = {"advertiser": np.full(400, 3), "site": np.full(400, 1), "device": np.full(400, dev),
                    "position": np.full(400, pos)}
            z = joint.logit(grid, cell)
            assert np.all(np.diff(z) >= joint.min_slope * np.diff(grid) * (1 - 1e-9))


def test_json_round_trip_and_types(world_fit):
    fit, judge, joint, _ = world_fit
    again = calibrator_from_json(joint.to_json())
    jf = {f: judge.fields[f].astype(float) for f in F}  # floats of the same values
    assert np.array_equal(again.predict(judge.pooled_logit, jf), joint.predict(judge.pooled_logit, jf))
    d = json.loads(joint.to_json())
    assert d["kind"] == "field-joint" and d["field_types"] == dict.fromkeys(F, "int")
    assert set(d["interactions"]["fields"]) <= set(F) and d["held_out"][0]["step"] == "joint fit"


def test_cli_field_joint_in_memory(tmp_path, capsys):
    from ltr.cli import main

    df = make_joint_world(seed=0).impressions(20_000, seed=3).to_frame()
    df.to_parquet(tmp_path / "t.parquet")
    args = ["calibrate", "--table", str(tmp_path / "t.parquet"), "--field-columns", "device,position", "--method",
            "field-joint"]
    assert main(args + ["--out", str(tmp_path / "o")]) == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    cells = rep["field_report"]["order"]["within_cells"]
    assert (cells["reversed"], cells["ties_created"], cells["ties_broken"]) == (0, 0, 0)
    assert rep["field_report"]["after"]["mean_f_rce"] < rep["field_report"]["before"]["mean_f_rce"]
    capsys.readouterr()
    assert main(args + ["--stream", "--out", str(tmp_path / "s")]) == 2
    assert "--method field-joint needs the rows in memory" in capsys.readouterr().err


@pytest.mark.slow
def test_side_by_side_with_mcgrad():
    """MCGrad (the oracle here, not a dependency) on the same rows of the joint world: the joint fit's
    F-RCE and NE are at most MCGrad's, its F-RCE within 1.3x of the truth's, and it keeps the order
    inside cells. 100,000 impressions (MCGrad fits in about 20 s); the worst value with >= 20,000
    impressions needs the 400,000 of experiments/calibrate_beyond_mcgrad.py (docs/experiments.md)."""
    pytest.importorskip("mcgrad")
    from experiment_scripts import load_experiment

    study = load_experiment("calibrate_beyond_mcgrad")
    _mcgrad, judge_row = study._mcgrad, study.judge_row

    fit, judge = make_joint_world(seed=0).impressions(100_000, seed=1).halves(seed=2)
    jf = {f: judge.fields[f] for f in F}
    joint = make_calibrator("field-joint", fields=F).fit(fit.pooled_logit, fit.clicks, {f: fit.fields[f] for f in F})
    predict, _ = _mcgrad(fit)
    j = judge_row("field-joint", joint.predict(judge.pooled_logit, jf), judge, 0.0, 5000)
    m = judge_row("mcgrad", predict(judge.pooled_logit, jf), judge, 0.0, 5000)
    t = judge_row("truth", judge.true_ctr, judge, 0.0, 5000)
    assert j["f_rce"] <= m["f_rce"] and j["ne"] <= m["ne"]
    assert j["f_rce"] <= 1.3 * t["f_rce"]
    assert j["order_kept"] == "yes" and m["order_kept"].startswith("no")


def test_the_study_script_writes_its_table(tmp_path, capsys):
    """experiments/calibrate_beyond_mcgrad.py end to end on small data, without MCGrad."""
    from experiment_scripts import load_experiment

    study = load_experiment("calibrate_beyond_mcgrad")
    assert study.main(["--impressions", "30000", "--min-count", "1500", "--no-mcgrad", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "table.md").read_text()
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [r["method"] for r in rows] == ["field-aware", "multicalibration", "field-joint, no interactions",
                                           "field-joint", "true probabilities"]
    joint, truth = rows[3], rows[4]
    assert f"F-RCE {joint['f_rce']:.4f} = {joint['f_rce'] / truth['f_rce']:.2f}x the truth's" in text
    assert joint["order_kept"] == "yes" and "MCGrad" not in text.split("\n\n")[1]
