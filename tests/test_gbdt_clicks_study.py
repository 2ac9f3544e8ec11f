"""experiments/gbdt_clicks_study.py: the gap closed by hand, and one small seed end to end."""

import json

import pytest
from experiment_scripts import load_experiment


@pytest.fixture(scope="module")
def study():
    return load_experiment("gbdt_clicks_study")


#: training queries of the end-to-end runs' synthetic data (70% of the queries drawn)
N_TRAIN = 210


@pytest.fixture
def small_data(monkeypatch):
    """The script's synthetic data on 300 queries instead of 1,000: its model on the true labels (the
    toolkit's defaults, ~200 rounds to early stopping) dominates a run and costs in proportion."""
    import ltr.data

    real = ltr.data.make_synthetic_splits
    monkeypatch.setattr(ltr.data, "make_synthetic_splits", lambda n_queries, *a, **kw: real(300, *a, **kw))


def test_gap_closed_by_hand(study):
    import argparse

    rows = [{"data": "synthetic", "seed": 0, "sessions": 1000, "logger": 0.5, "full": 0.70, "naive": 0.50, "ips": 0.55,
             "position-bias": 0.65, "pairwise-debias": 0.60, "policy-aware": 0.70},
            {"data": "synthetic", "seed": 1, "sessions": 1000, "logger": 0.5, "full": 0.60, "naive": 0.40, "ips": 0.40,
             "position-bias": 0.60, "pairwise-debias": 0.45, "policy-aware": 0.50}]
    text = study.markdown(rows, argparse.Namespace(model="pbm:1", shown="10"))  # every estimator by default
    # per seed: ips (0.55-0.5)/0.2 = 25%, position-bias 75%, pairwise-debias 50%, policy-aware 100%; 0%, 100%, 25%, 50%
    assert "| synthetic | 0 | 0.5000 | 0.7000 | 0.5000 | 0.5500 | 0.6500 | 0.6000 | 0.7000 | 25% | 75% | 50% | 100% |" in text
    assert "| synthetic | 1 | 0.5000 | 0.6000 | 0.4000 | 0.4000 | 0.6000 | 0.4500 | 0.5000 | 0% | 100% | 25% | 50% |" in text
    # of the means: full 0.65, naive 0.45, ips 0.475 -> 0.025 / 0.2 = 12.5% (13% printed), position-bias 0.625 -> 88%,
    # pairwise-debias 0.525 -> 38% (37.5), policy-aware 0.6 -> 75%
    assert ("| mean | 2 seeds | 0.5000 | 0.6500 | 0.4500 | 0.4750 | 0.6250 | 0.5250 | 0.6000 | 13% | 88% | 38% | 75% |"
            in text)
    assert "ips − naive, paired by seed: +0.0250" in text


def test_one_small_seed_end_to_end(study, small_data, tmp_path):
    assert study.main(["--out", str(tmp_path), "--seeds", "1", "--sessions", "3000", "--rounds", "5",
                       "--pairwise-rounds", "3"]) == 0
    row = json.loads((tmp_path / "results.json").read_text())["rows"][0]
    assert row["sessions"] == N_TRAIN * round(3000 / N_TRAIN) and all(0.0 < row[k] <= 1.0 for k in ("full", *study.ESTIMATORS))
    assert all(1 <= row[f"{e}_rounds"] <= 5 for e in study.ESTIMATORS[:3]) and row["pairwise-debias_rounds"] == 3
    assert "position-bias gap closed" in (tmp_path / "results.md").read_text()


def test_a_stochastic_logger_end_to_end(study, small_data, tmp_path):
    assert study.main(["--out", str(tmp_path), "--seeds", "1", "--sessions", "3000", "--rounds", "5",
                       "--logger-temperature", "1", "--estimators", "policy-aware"]) == 0
    row = json.loads((tmp_path / "results.json").read_text())["rows"][0]
    assert row["logger_temperature"] == 1.0 and 0.0 < row["logger_seen"] < 1.0
    assert 1 <= row["policy-aware_rounds"] <= 5 and 0.0 < row["policy-aware"] <= 1.0 and "ips" not in row
    assert 0.0 < row["policy-aware_valid"] <= 1.0
    assert "the top 10 of a Plackett-Luce ranking at temperature 1;" in (tmp_path / "results.md").read_text()
    for bad in ("-1", "inf"):
        with pytest.raises(SystemExit, match="--logger-temperature must be"):
            study.main(["--out", str(tmp_path), "--logger-temperature", bad])


def test_a_subset_of_estimators_keeps_naive(study, tmp_path):
    import argparse

    assert study.chosen(argparse.Namespace(estimators="pairwise-debias")) == ["naive", "pairwise-debias"]
    with pytest.raises(SystemExit, match="unknown dla"):
        study.chosen(argparse.Namespace(estimators="dla,ips"))
    rows = [{"data": "synthetic", "seed": 0, "sessions": 10, "logger": 0.5, "full": 0.7, "naive": 0.5, "pairwise-debias": 0.6}]
    text = study.markdown(rows, argparse.Namespace(model="pbm:1", shown="10", estimators="pairwise-debias"))
    assert "| synthetic | 0 | 0.5000 | 0.7000 | 0.5000 | 0.6000 | 50% |" in text and "ips" not in text


def test_the_xgboost_side_end_to_end(study, small_data, tmp_path):
    pytest.importorskip("xgboost")
    assert study.main(["--out", str(tmp_path), "--seeds", "1", "--sessions", "3000", "--rounds", "5",
                       "--engine", "xgboost"]) == 0
    row = json.loads((tmp_path / "results.json").read_text())["rows"][0]
    assert all(0.0 < row[k] <= 1.0 for k in ("full", "naive", "pairwise-debias", "policy-aware")) and "ips" not in row
    assert all(1 <= row[f"{e}_rounds"] <= 5 for e in ("naive", "pairwise-debias", "policy-aware"))
    text = (tmp_path / "results.md").read_text()
    assert "XGBoost on labels" in text and "pairwise-debias gap closed" in text
    with pytest.raises(SystemExit, match="unknown position-bias"):
        study.main(["--out", str(tmp_path), "--engine", "xgboost", "--estimators", "position-bias"])
    with pytest.raises(SystemExit, match="--pairwise-rounds applies to --engine lightgbm"):
        study.main(["--out", str(tmp_path), "--engine", "xgboost", "--pairwise-rounds", "3"])
