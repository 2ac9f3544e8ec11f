"""The default logging ranker of ``ltr clicks simulate``: a ridge regression on a few queries' labels."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ltr.clicks.simulate.logging_ranker as logging_ranker
import metrics
from ltr.cli import main
from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.simulate.logging_ranker import RIDGE_PENALTY, ridge_logger
from ltr.data import load_svmlight, save_svmlight
from ltr.data.synthetic import make_mslr_like


@pytest.fixture(scope="module")
def data():
    return make_mslr_like(n_queries=40, n_features=6, mean_list_length=12, max_list_length=30, seed=3)


def test_ridge_solves_the_penalised_least_squares(data):
    # oracle: the same problem as an ordinary least-squares one, [z; sqrt(lambda) I] w = [y; 0], by lstsq
    q = np.random.default_rng(5).choice(data.n_queries, size=10, replace=False)
    rows = data.row_indices(q)
    x = data.features[rows].astype(np.float64)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    big = np.vstack([z, np.sqrt(RIDGE_PENALTY) * np.eye(z.shape[1])])
    w, *_ = np.linalg.lstsq(big, np.concatenate([data.labels[rows], np.zeros(z.shape[1])]), rcond=None)
    expected = np.hstack([(data.features - mu) / sd, np.ones((data.n_items, 1))]) @ w
    np.testing.assert_allclose(ridge_logger(data, 10, seed=5)(data), expected, rtol=1e-9, atol=1e-9)


def test_scores_are_the_same_in_blocks(data, monkeypatch):
    whole = ridge_logger(data, 10, seed=0)(data)
    monkeypatch.setattr(logging_ranker, "SCORE_BLOCK_ROWS", 7)
    blocks = ridge_logger(data, 10, seed=0)(data)
    assert blocks.shape == (data.n_items,)
    np.testing.assert_allclose(blocks, whole, rtol=0, atol=1e-12)


def test_the_queries_are_drawn_under_the_seed(data):
    a, b, c = (ridge_logger(data, 5, seed=s)(data) for s in (1, 1, 2))
    assert np.array_equal(a, b) and not np.allclose(a, c)
    # more queries asked than there are: all of them, whatever the seed (up to the order of the sums)
    np.testing.assert_allclose(ridge_logger(data, 999, seed=1)(data), ridge_logger(data, 40, seed=7)(data), atol=1e-9)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_bad_query_counts_are_refused(data, bad):
    with pytest.raises(ValueError, match="n_queries"):
        ridge_logger(data, bad, seed=0)


def _simulate(path, out, *extra):
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(out), "--sessions-per-query", "5",
                 "--seed", "4", "--quiet", *extra]) == 0
    log = ClickLog.load(out / "clicks.npz")
    return log, log.meta["logger"]


def _same_log(a: ClickLog, b: ClickLog) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("doc", "position", "click", "session_query"))


def test_simulate_logs_with_the_ridge_by_default(data, tmp_path):
    path = tmp_path / "data.txt"
    save_svmlight(data, path)
    ds = load_svmlight(path)
    default, name = _simulate(path, tmp_path / "default")
    assert name == "ridge(10 queries)"
    # the summary says how good the logger is: its NDCG@10 on the labels of --data
    ev = metrics.evaluate(ridge_logger(ds, 10, [4, 2])(ds), ds.labels, ds.query_offsets, ["ndcg@10"])
    summary = json.loads((tmp_path / "default" / "summary.json").read_text())
    assert summary["logger_ndcg@10"] == pytest.approx(float(ev.mean[ev.names["ndcg@10"]]), abs=1e-12)
    # the same log as the ridge's scores given by hand: fitted under the stream (seed, 2)
    np.save(tmp_path / "ridge.npy", ridge_logger(ds, 10, [4, 2])(ds))
    by_hand, _ = _simulate(path, tmp_path / "by_hand", "--logger-scores", str(tmp_path / "ridge.npy"))
    assert _same_log(default, by_hand)
    three, name = _simulate(path, tmp_path / "three", "--logger-ridge", "3")
    assert name == "ridge(3 queries)" and not _same_log(three, default)
    # the logger that sees the labels is still there, and unchanged: labels + N(0, 1) under the stream (seed, 1)
    noisy, name = _simulate(path, tmp_path / "noisy", "--logger-noise", "1")
    assert name == "labels+N(0,1.0^2)"
    np.save(tmp_path / "noisy.npy", ds.labels + np.random.default_rng([4, 1]).normal(0.0, 1.0, ds.n_items))
    assert _same_log(noisy, _simulate(path, tmp_path / "noisy_by_hand", "--logger-scores", str(tmp_path / "noisy.npy"))[0])
