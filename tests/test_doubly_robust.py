"""The direct method and the doubly-robust estimator (issue 47 part 4): the label by hand, and the click-DCG of a
new ranker checked against the truth on simulated logs (a stochastic and a deterministic logger)."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.clicks.estimators.doubly_robust import (
    dm_dr_click_dcg,
    doubly_robust_dataset,
    dr_labels,
    fit_direct_model,
    item_sums,
)
from ltr.clicks.estimators.ips import click_dcg, expected_click_dcg
from ltr.clicks.logs.stream import aggregate_from_log
from ltr.clicks.simulate.click_models import attraction, simulate_clicks
from ltr.data.synthetic import make_mslr_like


def test_the_label_is_policy_aware_where_examined_and_the_regression_elsewhere():
    r_hat = np.array([0.5, 0.5, 0.2, 0.4])
    clicks = np.array([3.0, 1.0, 0.0, 0.0])
    examined = np.array([6.0, 0.5, 0.0, 0.0])
    sessions = np.full(4, 10.0)
    y = dr_labels(r_hat, clicks, examined, sessions, clip=0.1)
    # examined 6 >= 0.1 x 10: C / E; examined 0.5 < 1: R + (C - E R) / 1; never shown: R
    np.testing.assert_allclose(y, [0.5, 0.5 + (1.0 - 0.25) / 1.0, 0.2, 0.4])


@pytest.fixture(scope="module")
def world():
    ds = make_mslr_like(n_queries=80, n_features=12, mean_list_length=30, seed=4)
    rng = np.random.default_rng(1)
    new = ds.labels + rng.normal(0, 1.0, ds.n_items)  # the ranker to judge
    a = attraction(ds.labels, max_label=float(ds.labels.max()), eps=0.1)
    truth = expected_click_dcg(new, a, ds.query_offsets, k=10)  # over every item: DM's and DR's target
    return ds, new, a, truth


def _estimates(ds, new, temperature):
    logger = ds.features[:, 0] + 0.5 * ds.labels
    log = simulate_clicks(ds.labels, ds.query_offsets, logger, top_k=10, sessions_per_query=60, seed=2,
                          logger_temperature=temperature)
    agg = aggregate_from_log(log, ds)
    c, e = item_sums(agg.doc, agg.clicks, agg.examined, ds.n_items)
    r_hat = fit_direct_model(ds.features, c, e)
    dm, dr = dm_dr_click_dcg(new, ds.query_offsets, r_hat, c, e, log.sessions_per_query(ds.n_queries), k=10)
    pa = click_dcg(log, new, ds.query_offsets, estimator="policy-aware", k=10)
    return np.nanmean(dm), np.nanmean(dr), np.nanmean(pa), log.sessions_per_query(ds.n_queries) > 0


def test_dr_and_dm_against_the_truth_under_a_stochastic_logger(world):
    ds, new, _, truth = world
    dm, dr, pa, logged = _estimates(ds, new, 0.3)
    target = truth[logged].mean()
    # measured (truth 0.9546): DR 6.1% below it, the direct model alone 13.1%, policy-aware 17.9% (60 sessions a
    # query leave some items unshown even at T = 0.3, and policy-aware labels those 0; DR gives them the regression)
    assert abs(dr - target) / target < 0.08
    assert abs(dr - target) < abs(dm - target) and abs(dr - target) < abs(pa - target)


def test_dr_fills_in_what_a_deterministic_logger_never_shows(world):
    ds, new, _, truth = world
    dm, dr, pa, logged = _estimates(ds, new, 0.0)
    target = truth[logged].mean()
    # policy-aware speaks for the top 10 the logger showed, 0 for the rest of the list: 35.3% below the all-items
    # truth; DR adds the regression's estimate of the others: 6.5% below; the regression alone 10.5%
    assert abs(dr - target) < 0.5 * abs(pa - target) and abs(dr - target) < abs(dm - target)


def test_the_training_lists_hold_every_item_of_a_logged_query(world):
    ds, *_ = world
    log = simulate_clicks(ds.labels, ds.query_offsets, ds.features[:, 0], top_k=5, sessions_per_query=20, seed=3)
    lists, info = doubly_robust_dataset(ds, aggregate_from_log(log, ds), clip=0.05)
    logged = np.flatnonzero(log.sessions_per_query(ds.n_queries) > 0)
    assert lists.n_queries == len(logged) and lists.n_items == int(np.diff(ds.query_offsets)[logged].sum())
    assert info["never_shown"] == lists.n_items - len(np.unique(log.doc)) and (lists.labels >= 0).all()


@pytest.mark.parametrize("engine", ["neural", "lightgbm"])
def test_clicks_train_doubly_robust_and_evaluate_reports_dm_and_dr(world, tmp_path, engine):
    import json

    from ltr.cli import main
    from ltr.data import save_svmlight

    ds, new, *_ = world
    save_svmlight(ds, tmp_path / "data.txt")
    assert main(["clicks", "simulate", "--data", str(tmp_path / "data.txt"), "--out", str(tmp_path / "sim"),
                 "--sessions-per-query", "10", "--logger-temperature", "0.3", "--quiet"]) == 0
    log = str(tmp_path / "sim" / "clicks.npz")
    extra = ["--rounds", "5"] if engine == "lightgbm" else ["--epochs", "1", "--model", "linear"]
    assert main(["clicks", "train", "--engine", engine, "--estimator", "doubly-robust", "--data",
                 str(tmp_path / "data.txt"), "--valid", str(tmp_path / "data.txt"), "--log", log, "--out",
                 str(tmp_path / "m"), "--quiet", *extra]) == 0
    info = json.loads((tmp_path / "m" / "clicks_training.json").read_text())
    assert info["estimator"] == "doubly-robust" and info["propensity_source"] == "logged (simulator's truth)"
    assert info["never_shown"] > 0 and 0 < info["direct_model_mean"] < 1
    out = tmp_path / "e.json"
    assert main(["clicks", "evaluate", "--log", log, "--data", str(tmp_path / "data.txt"), "--ranker",
                 str(tmp_path / "m"), "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {"dm", "dr", "true_click_dcg_all"} <= report.keys() and report["dm"] > 0
