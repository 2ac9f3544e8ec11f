"""experiments/stochastic_logger_study.py: its own generator is deterministic, has the shapes it promises (24
features of three kinds, lists of 20 to 120 items, grades 0-4 with most items irrelevant), and its labels follow
its informative features; a small run of the study gives a row with every estimator and the gap it closed."""

import json

import numpy as np
import pytest
from experiment_scripts import load_experiment


@pytest.fixture(scope="module")
def study():
    return load_experiment("stochastic_logger_study")


def test_the_web_generator_has_its_own_shape_and_is_deterministic(study):
    ds = study.web_like(50, seed=3)
    lengths = np.diff(ds.query_offsets)
    assert ds.n_features == 24 and lengths.min() >= 20 and lengths.max() <= 120 and ds.n_queries == 50
    assert set(np.unique(ds.labels)) == {0.0, 1.0, 2.0, 3.0, 4.0} and (ds.labels == 0).mean() > 0.5
    assert set(np.unique(ds.features[:, 8:16])) == {0.0, 1.0}
    again = study.web_like(50, seed=3)
    assert np.array_equal(ds.features, again.features) and np.array_equal(ds.labels, again.labels)
    # the informative score and the flags carry the labels; the noise columns do not
    corr = [abs(np.corrcoef(ds.features[:, j], ds.labels)[0, 1]) for j in range(24)]
    assert corr[0] > 0.2 and max(corr[16:]) < 0.05


def test_a_small_run_reports_every_estimator_and_the_gap(study, tmp_path):
    assert study.main(["--out", str(tmp_path), "--seeds", "1", "--generators", "web", "--train-queries", "40",
                       "--valid-queries", "20", "--test-queries", "20", "--sessions", "10", "--rounds", "20"]) == 0
    (row,) = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert row["best"] in study.ESTIMATORS and row["sessions"] == 400
    want = (row[f"test_{row['best']}"] - row["test_naive"]) / (row["test_full"] - row["test_naive"])
    assert row["gap_closed"] == pytest.approx(want)
    assert "| web | 0 |" in (tmp_path / "results.md").read_text()
