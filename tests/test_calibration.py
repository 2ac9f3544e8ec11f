"""Platt, isotonic and strict isotonic calibration: parameters against independent fits, AUC
invariance (exact), created ties counted by brute force, JSON round trips, the training-data rule,
and the report files."""

from __future__ import annotations

import functools
import json
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logit
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from ltr.calibrate.calibrators import IsotonicCalibrator, PlattCalibrator, prediction_fingerprint
from ltr.calibrate.factory import calibrator_from_json, load_calibrator, make_calibrator
from ltr.calibrate.invariance import check_auc_invariance, count_created_ties
from ltr.calibrate.report import (
    CalibrationReport,
    add_reliability_to_tensorboard,
    save_reliability_diagram,
)
from ltr.base.errors import LtrError
from metrics.classification import auc, brier, ece, log_loss


def _data(n=4000, seed=0, ties=True):
    """Scores of a model that is right in order but miscalibrated (too confident), with ties."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.2, size=n)
    y = (rng.random(n) < expit(z)).astype(float)
    s = expit(1.8 * z + 0.7)
    if ties:
        s = np.round(s, 3)
    return s, y


def _sklearn_unpenalised(x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(x[:, None], y)
    return float(m.coef_[0, 0]), float(m.intercept_[0])


@pytest.mark.parametrize("input_kind", ["score", "logit"])
def test_platt_equals_unpenalised_logistic_regression(input_kind):
    s, y = _data()
    cal = PlattCalibrator(input=input_kind).fit(s, y)
    x = s if input_kind == "score" else logit(np.clip(s, 1e-15, 1 - 1e-15))
    a, b = _sklearn_unpenalised(x, y)
    assert cal.slope_ == pytest.approx(a, abs=1e-4)
    assert cal.intercept_ == pytest.approx(b, abs=1e-4)
    np.testing.assert_allclose(cal.predict(s), expit(a * x + b), atol=1e-6)


def test_platt_smoothed_targets_equal_scipy_fit():
    s, y = _data(seed=1)
    x = logit(np.clip(s, 1e-15, 1 - 1e-15))  # the calibrator's documented clipping (scores of 0 occur)
    n_pos, n_neg = y.sum(), (1 - y).sum()
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def nll(th):  # independent objective: cross-entropy with soft targets
        p = np.clip(expit(th[0] * x + th[1]), 1e-300, 1)
        q = np.clip(1 - expit(th[0] * x + th[1]), 1e-300, 1)
        return -np.sum(t * np.log(p) + (1 - t) * np.log(q))

    ref = minimize(nll, x0=[1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    cal = PlattCalibrator(input="logit", smoothed_targets=True).fit(s, y)
    assert cal.slope_ == pytest.approx(ref.x[0], abs=1e-4)
    assert cal.intercept_ == pytest.approx(ref.x[1], abs=1e-4)
    plain = PlattCalibrator(input="logit").fit(s, y)
    assert abs(plain.slope_ - cal.slope_) > 1e-5  # the option does change the fit


def test_platt_refuses_non_positive_slope_and_separable_data():
    s, y = _data(seed=2)
    with pytest.raises(LtrError, match="non-positive slope"):
        PlattCalibrator(input="score").fit(-s, y)
    sep = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    lab = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(LtrError, match="separable"):
        PlattCalibrator(input="score").fit(sep, lab)
    cal = PlattCalibrator(input="score", smoothed_targets=True).fit(sep, lab)
    assert cal.slope_ > 0 and np.all(np.diff(cal.predict(sep)) > 0)
    with pytest.raises(LtrError, match=r"\[0, 1\]"):
        PlattCalibrator(input="logit").fit(s * 3, y)


def test_isotonic_predictions_equal_sklearn():
    s, y = _data(seed=3)
    cal = IsotonicCalibrator().fit(s, y)
    ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(s, y)
    new = np.concatenate([np.linspace(-0.1, 1.1, 501), _data(seed=4)[0]])
    np.testing.assert_allclose(cal.predict(s), ref.predict(s), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cal.predict(new), ref.predict(new), rtol=0, atol=1e-12)
    with pytest.raises(LtrError, match="outside the fitted range"):
        IsotonicCalibrator(out_of_bounds="raise").fit(s, y).predict([2.0])
    assert np.isnan(IsotonicCalibrator(out_of_bounds="nan").fit(s, y).predict([2.0])[0])


@pytest.mark.parametrize("method", ["platt", "isotonic-strict"])
def test_auc_exactly_unchanged_with_ties(method):
    s, y = _data(seed=5)
    assert len(np.unique(s)) < len(s) // 4  # plenty of input ties
    s_eval, y_eval = _data(seed=6)
    groups = np.arange(s_eval.shape[0]) // 10
    cal = make_calibrator(method).fit(s, y)
    p = cal.predict(s_eval)
    rep = check_auc_invariance(s_eval, p, y_eval, groups=groups)
    assert rep.auc_after == rep.auc_before == auc(y_eval, s_eval)
    assert rep.auc_difference == 0.0 and rep.grouped_auc_difference == 0.0
    assert rep.tied_pairs_created == 0 and rep.tied_pairs_created_within_groups == 0
    assert rep.unchanged


def _brute_force_created(before, after, y, groups=None):
    n = len(before)
    created = mixed = 0
    for i in range(n):
        for j in range(i + 1, n):
            if groups is not None and groups[i] != groups[j]:
                continue
            if before[i] != before[j] and after[i] == after[j]:
                created += 1
                mixed += y[i] != y[j]
    return created, mixed


def test_plain_isotonic_reports_the_ties_it_created():
    s, y = _data(n=300, seed=7, ties=False)
    cal = IsotonicCalibrator().fit(s, y)
    p = cal.predict(s)
    rep = check_auc_invariance(s, p, y)
    created, mixed = _brute_force_created(s, p, y)
    assert created > 0 and mixed > 0
    assert rep.tied_pairs_created == created
    assert rep.tied_pos_neg_pairs_created == mixed
    assert rep.auc_after != rep.auc_before and not rep.unchanged
    assert rep.auc_after == pytest.approx(auc(y, p), abs=0)
    g = np.arange(300) % 7
    assert count_created_ties(s, p, y, g)["tied_pairs_created"] == _brute_force_created(s, p, y, g)[0]
    # The strict variant on the same data creates none and keeps AUC.
    strict = IsotonicCalibrator(strict=True).fit(s, y)
    rep2 = check_auc_invariance(s, strict.predict(s), y)
    assert rep2.tied_pairs_created == 0 and rep2.auc_after == rep2.auc_before


def test_strict_isotonic_keeps_calibration():
    s, y = _data(n=20000, seed=8)
    iso = IsotonicCalibrator().fit(s, y)
    strict = IsotonicCalibrator(strict=True, tie_margin=1e-4).fit(s, y)
    grid = np.concatenate([[-5.0, -1.0], np.linspace(0, 1, 2001), [1.5, 9.0]])
    a, b = iso.predict(grid), strict.predict(grid)
    assert np.all(np.diff(b) > 0)  # strictly increasing, the tails included
    assert np.all((b >= 0) & (b <= 1))
    assert np.max(np.abs(a - b)) <= 1e-4 * 1.0 + 1e-15
    s_eval, y_eval = _data(n=20000, seed=9)
    # Every value moved by <= 1e-4, so the Brier score barely moves. (ECE can move more: a plateau sitting
    # on a bin edge is split across two bins once its tie is broken; LogLoss too, where isotonic says 0.)
    assert brier(y_eval, strict.predict(s_eval)) == pytest.approx(brier(y_eval, iso.predict(s_eval)), abs=2e-5)
    # Both far better calibrated than the raw, over-confident scores.
    assert ece(y_eval, strict.predict(s_eval)) < ece(y_eval, s_eval) / 3


@pytest.mark.parametrize("method", ["platt", "isotonic", "isotonic-strict"])
def test_json_round_trip_is_exact(method, tmp_path):
    s, y = _data(seed=10)
    cal = make_calibrator(method).fit(s, y)
    path = tmp_path / "cal.json"
    cal.save(path)
    back = load_calibrator(path)
    probe = np.concatenate([s, np.linspace(-0.5, 1.5, 101)])
    if method == "platt":
        probe = np.clip(probe, 0, 1)
    assert np.array_equal(back.predict(probe), cal.predict(probe))
    assert back.to_json() == cal.to_json()
    assert json.loads(path.read_text())["kind"] == method
    with pytest.raises(LtrError, match="not a calibrator"):
        calibrator_from_json("[1, 2]")


def test_fitting_on_training_predictions_is_refused():
    s, y = _data(seed=11)
    with pytest.raises(LtrError, match="training predictions"):
        PlattCalibrator().fit(s, y, held_out=False)
    fp = prediction_fingerprint(s, y)
    perm = np.random.default_rng(0).permutation(s.shape[0])
    assert prediction_fingerprint(s[perm], y[perm]) == fp  # order does not matter
    with pytest.raises(LtrError, match="fingerprint"):
        IsotonicCalibrator().fit(s[perm], y[perm], training_fingerprint=fp)
    other, y2 = _data(seed=12)
    cal = IsotonicCalibrator().fit(other, y2, training_fingerprint=fp)
    assert cal.fit_fingerprint_ == prediction_fingerprint(other, y2) != fp
    with pytest.raises(LtrError, match="both classes"):
        PlattCalibrator().fit(s, np.zeros_like(y))


def test_report_and_figures(tmp_path):
    s, y = _data(seed=13)
    s_eval, y_eval = _data(seed=14)
    cal = make_calibrator("isotonic").fit(s, y)
    rep = CalibrationReport.build("isotonic", cal, s_eval, y_eval, groups=np.arange(len(s_eval)) // 8)
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["before"]["ece_width"] == pytest.approx(ece(y_eval, s_eval, n_bins=15))
    assert d["after"]["log_loss"] < d["before"]["log_loss"]
    assert d["auc_invariance"]["tied_pairs_created"] == rep.invariance.tied_pairs_created
    assert "AUC before" in rep.to_text() and "ECE mass" in rep.to_text()
    png = tmp_path / "rel.png"
    save_reliability_diagram(png, y_eval, {"before": s_eval, "after": cal.predict(s_eval)})
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rel.png"]  # no temporary left behind
    add_reliability_to_tensorboard(tmp_path / "tb", "reliability", y_eval, {"after": cal.predict(s_eval)})
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 1000


# ----------------------------------------------------------------------------- the CLI
def _write_lines(path, values, fmt="{!r}"):
    path.write_text("".join(fmt.format(v) + "\n" for v in values))
    return str(path)


def test_cli_calibrate_end_to_end(tmp_path, capsys):
    from ltr.cli import main
    from ltr.commands.calibrate import split_rows

    s, y = _data(n=3000, seed=15)
    groups = np.repeat(np.arange(300), 10)
    files = [
        "--scores", _write_lines(tmp_path / "s.txt", s.tolist()),
        "--labels", _write_lines(tmp_path / "y.txt", y.astype(int).tolist(), "{}"),
        "--groups", _write_lines(tmp_path / "g.txt", [f"q{g}" for g in groups], "{}"),
    ]
    out = tmp_path / "out"
    rc = main(["calibrate", *files, "--method", "isotonic-strict", "--fit-fraction", "0.4", "--seed", "3",
               "--out", str(out), "--bins", "10"])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == [".ltr-run.json", "calibrator.json", "reliability.png", "report.json", "report.txt"]
    rep = json.loads((out / "report.json").read_text())
    # Recompute the evaluation part and every "after" number independently from the saved calibrator.
    fit = split_rows(3000, 0.4, 3, np.array([f"q{g}" for g in groups]))
    assert rep["inputs"]["fit_rows"] == fit.sum() == 1200  # 120 whole groups of 10
    ev = ~fit
    p = load_calibrator(out / "calibrator.json").predict(s[ev])
    assert rep["after"]["log_loss"] == pytest.approx(log_loss(y[ev], p), rel=1e-12)
    assert rep["after"]["ece_mass"] == pytest.approx(ece(y[ev], p, n_bins=10, strategy="mass"), rel=1e-12)
    assert rep["before"]["ece_width"] == pytest.approx(ece(y[ev], s[ev], n_bins=10), rel=1e-12)
    inv = rep["auc_invariance"]
    assert inv["auc_before"] == inv["auc_after"] == auc(y[ev], s[ev]) and inv["unchanged"] is True
    assert inv["n_groups"] == 180
    assert "AUC before" in capsys.readouterr().out


def test_cli_reports_bad_input_with_file_and_line(tmp_path, capsys):
    from ltr.cli import main

    scores = _write_lines(tmp_path / "s.txt", [0.1, 0.2, 0.3])
    labels = _write_lines(tmp_path / "y.txt", [0, 1, 2], "{}")
    rc = main(["calibrate", "--scores", scores, "--labels", labels, "--method", "platt", "--out", str(tmp_path / "o")])
    assert rc == 2
    assert f"{labels}:3: label '2' is not 0 or 1" in capsys.readouterr().err
    short = _write_lines(tmp_path / "y2.txt", [0, 1], "{}")
    assert main(["calibrate", "--scores", scores, "--labels", short, "--method", "platt", "--out", str(tmp_path / "o")]) == 2
    assert "has 2 rows" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@functools.lru_cache(maxsize=None)
def _open_bandit(policy):
    import csv

    from conftest import shared_path

    path = shared_path("open-bandit-dataset-small", policy, "all", "all.csv")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return np.array([int(r["click"]) for r in rows]), np.array([int(r["item_id"]) for r in rows])


@pytest.mark.parametrize("method", ["platt", "isotonic-strict"])
def test_cli_open_bandit_smoke(tmp_path, method):
    """Real, very sparse clicks (42 in 10 000 rows of the Thompson-sampling log). The score is a simple
    model: each item's smoothed click rate measured on the OTHER log (uniform-random policy)."""
    from ltr.cli import main
    from metrics.classification import calibration_curve

    y_rand, item_rand = _open_bandit("random")
    y, item = _open_bandit("bts")
    clicks = np.bincount(item_rand, weights=y_rand, minlength=80)
    shown = np.bincount(item_rand, minlength=80)
    item_ctr = (clicks + 50 * y_rand.mean()) / (shown + 50)
    np.save(tmp_path / "s.npy", item_ctr[item])
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / method
    rc = main(["calibrate", "--scores", str(tmp_path / "s.npy"), "--labels", str(tmp_path / "y.npy"),
               "--method", method, "--out", str(out), "--bins", "10"])
    assert rc == 0
    rep = json.loads((out / "report.json").read_text())
    from ltr.commands.calibrate import split_rows

    # the split is a seeded hash of the row position, the same rows as --stream would take
    assert rep["inputs"]["rows"] == 10000 and rep["n_eval"] == int((~split_rows(10000, 0.5, 0)).sum()) == 5041
    assert rep["auc_invariance"]["unchanged"] and rep["auc_invariance"]["tied_pairs_created"] == 0
    assert rep["before"]["base_rate"] == rep["after"]["base_rate"] < 0.01
    # With a click rate of 0.4 % every prediction lies in the first equal-width bin: that ECE is only
    # |mean p - base rate| and equals its MCE; the equal-mass bins see inside.
    assert len(calibration_curve(y, item_ctr[item], n_bins=10).counts) == 1
    assert rep["before"]["ece_width"] == pytest.approx(abs(rep["before"]["mean_prediction"] - rep["before"]["base_rate"]))
    assert rep["before"]["ece_width"] == rep["before"]["mce_width"]
    assert rep["before"]["ece_mass"] > rep["before"]["ece_width"]


def test_the_report_says_what_its_tie_counts_count():
    from ltr.calibrate import check_auc_invariance

    # isotonic-like merge: scores 0.1 and 0.2 (a negative and a positive) become equal; 0.3 and 0.3 split
    report = check_auc_invariance([0.1, 0.2, 0.3, 0.3], [0.4, 0.4, 0.6, 0.7], [0, 1, 0, 1])
    text = report.to_text()
    assert "pairs of distinct scores the calibration made equal: 1 (1 of them positive-negative" in text
    assert "pairs of equal scores it made distinct: 1" in text
