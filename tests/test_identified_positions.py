"""Only what a log identifies: positions shown too rarely get no propensity (EM, DLA, harvesting, the CLI's
rows and notes), and the records of `ltr clicks simulate` hold no NaN (null where a value is not defined)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.cli import main
from ltr.clicks.logs.click_log import ClickLog, concat_logs
from ltr.clicks.logs.counts import observations_from_log
from ltr.clicks.propensities.regression_em import regression_em
from ltr.clicks.simulate.click_models import simulate_clicks
from ltr.data import save_svmlight
from ltr.data.synthetic import make_mslr_like


@pytest.fixture(scope="module")
def data():
    ds = make_mslr_like(n_queries=60, n_features=8, mean_list_length=60, seed=3)
    scores = ds.features[:, 0] + 0.1 * np.arange(ds.n_items) % 1
    log = simulate_clicks(ds.labels, ds.query_offsets, scores, top_k=10, sessions_per_query=30, seed=1)
    return ds, log


def _one_click_at(log: ClickLog, ds, position: int) -> ClickLog:
    """The log and one more session: a single item, clicked, shown at ``position``."""
    q = int(log.session_query[0])
    row = int(ds.query_offsets[q + 1] - 1)
    one = lambda v, d: np.array([v], dtype=d)  # noqa: E731
    extra = ClickLog(one(0, np.int64), one(q, np.int64), one(row, np.int64), one(position, np.int64),
                     one(position, np.int64), one(1, np.int8), one(1.0, np.float64), one(q, np.int64),
                     one(0, np.int8), one(0, np.int64), dict(log.meta))
    return concat_logs([log, extra], log.meta)


def test_one_click_far_down_leaves_the_other_positions_untouched_and_is_not_estimated(data):
    ds, log = data
    base = regression_em(observations_from_log(log), relevance="logistic", features=ds.features, iterations=50,
                         min_impressions=30)
    more = regression_em(observations_from_log(_one_click_at(log, ds, 50)), relevance="logistic",
                         features=ds.features, iterations=50, min_impressions=30)
    np.testing.assert_allclose(more.theta[:10], base.theta, rtol=1e-12)  # the row at 50 is left out of the fit
    assert np.isnan(more.theta[10:]).all() and not more.identified[10:].any() and more.identified[:10].all()


def test_the_estimate_command_prints_no_number_for_an_unidentified_position(data, tmp_path, capsys):
    ds, log = data
    save_svmlight(ds, tmp_path / "data.txt")
    _one_click_at(log, ds, 50).save(tmp_path / "clicks.npz")
    out = tmp_path / "em.json"
    assert main(["clicks", "estimate", "--method", "em", "--log", str(tmp_path / "clicks.npz"), "--data",
                 str(tmp_path / "data.txt"), "--resamples", "2", "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    rows = report["rows"]
    assert [r["identified"] for r in rows] == [True] * 10 + [False] * 40
    assert all(r["theta"] is None and r["low"] is None for r in rows[10:])
    assert "positions 11-50 unidentified (shown too rarely)" in capsys.readouterr().out


def test_dla_reports_no_propensity_where_its_lists_are_shown_too_rarely():
    from ltr.clicks.estimators.dla import fit_dla
    from ltr.clicks.logs.lists import group_sessions
    from ltr.train.models import LinearScorer

    rng = np.random.default_rng(0)
    q, k = 40, 6
    x = rng.normal(size=(q * k, 3)).astype(np.float32)
    offsets = np.arange(0, q * k + 1, k)
    log = simulate_clicks(np.zeros(q * k), offsets, x[:, 0], top_k=k - 1, sessions_per_query=5, seed=0, eps=0.5)
    lists = group_sessions(_one_click_at(log, type("D", (), {"query_offsets": offsets})(), k))  # one list shows 6
    res = fit_dla(lists, x, LinearScorer(3), epochs=2, seed=0, min_impressions=10)
    assert res.identified.tolist() == [True] * 5 + [False]
    assert np.isfinite(res.theta[:5]).all() and np.isnan(res.theta[5])


def test_harvesting_leaves_a_position_no_clicked_swap_reaches_unidentified():
    from ltr.clicks.propensities.harvesting import allpairs_estimate, adjacent_estimate

    c = np.array([[0, 6, 0, 0], [3, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=float)
    s = (c + c.T > 0) * 10.0
    theta = allpairs_estimate(c, s)  # positions 3 and 4 swap with each other only
    assert theta[0] == 1.0 and theta[1] == pytest.approx(0.5, rel=1e-4) and np.isnan(theta[2:]).all()
    chain = adjacent_estimate(c, s)  # the chain breaks between 2 and 3
    assert chain[:2].tolist() == [1.0, 0.5] and np.isnan(chain[2:]).all()


def test_simulate_writes_no_nan_into_summary_json(tmp_path):
    ds = make_mslr_like(n_queries=20, n_features=4, mean_list_length=12, seed=1)
    save_svmlight(ds, tmp_path / "data.txt")
    zero = type(ds)(ds.features, np.zeros(ds.n_items), ds.query_offsets, ds.query_ids)  # no relevant item anywhere
    save_svmlight(zero, tmp_path / "zero.txt")
    for name, extra in (("data", ["--swap-fraction", "0.03"]), ("zero", [])):
        assert main(["clicks", "simulate", "--data", str(tmp_path / f"{name}.txt"), "--out", str(tmp_path / name),
                     "--sessions-per-query", "60", "--logger-noise", "1", "--quiet", *extra]) == 0
    load = lambda name: json.loads((tmp_path / name / "summary.json").read_text(),  # noqa: E731
                                   parse_constant=lambda c: pytest.fail(f"{c} in summary.json"))
    swap = load("data")["propensity_swap"]
    # too few swap sessions at a position for an estimate: null, and no claim that its interval covers the truth
    assert any(r["theta"] is None and r["se"] is None and r["covered"] is None for r in swap[1:])
    assert load("zero")["logger_ndcg@10"] is None  # NDCG is not defined without a relevant item


def test_interval_and_model_notes():
    from ltr.commands.clicks.report import interval_notes, model_notes

    rows = [{"position": 1, "theta": 1.0, "low": 1.0, "high": 1.0}, {"position": 2, "theta": 0.5, "low": 0.55,
                                                                        "high": 0.6}]
    (note,) = interval_notes(rows, 0.95, 3)
    assert "leaves out the estimate itself at position(s) 2" in note and "--resamples" in note
    assert interval_notes(rows[:1], 0.95, 3) == []
    assert "trust" in model_notes({"model": "trust"}, "randomized")[0] and model_notes({"model": "pbm"}, "em") == []
