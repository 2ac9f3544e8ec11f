"""Open Bandit Dataset loader: counts from the data folder's SOURCE.md, intervals by hand, errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_path

from ltr.clicks.open_bandit import ctr_by_position, ips_value, load_open_bandit
from ltr.base.errors import DataFormatError, LtrError


@pytest.fixture(scope="module")
def obd_root():
    return shared_path("open-bandit-dataset-small")


@pytest.fixture(scope="module")
def logs(obd_root):
    return {policy: load_open_bandit(obd_root, policy) for policy in ("random", "bts")}


@pytest.fixture(scope="module")
def random_log(logs):
    return logs["random"]


# SOURCE.md: rows, clicks, impressions at positions 1/2/3.
@pytest.mark.parametrize("policy,clicks,positions", [("random", 38, (3322, 3412, 3266)), ("bts", 42, (3362, 3317, 3321))])
def test_counts_match_source(logs, policy, clicks, positions):
    log = logs[policy]
    assert log.n_rounds == 10_000
    assert int(log.click.sum()) == clicks
    assert tuple(np.bincount(log.position)[1:]) == positions
    assert log.n_items == 80 and log.affinity.shape == (10_000, 80) and log.user_features.shape == (10_000, 4)
    assert log.item_id.min() >= 0 and log.item_id.max() <= 79
    if policy == "random":
        np.testing.assert_array_equal(log.propensity, np.full(10_000, 0.0125))  # uniform 1/80
    else:
        assert log.propensity.min() < 0.0125 < log.propensity.max()


def test_ctr_by_position_wilson_by_hand(random_log):
    rows = ctr_by_position(random_log, confidence=0.95)
    assert sum(r["clicks"] for r in rows) == 38
    z = 1.959963984540054
    for r in rows:
        n, p = r["impressions"], r["clicks"] / r["impressions"]
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        assert r["ctr"] == pytest.approx(p)
        assert r["low"] == pytest.approx(centre - half, rel=1e-9)
        assert r["high"] == pytest.approx(centre + half, rel=1e-9)
    assert rows[0]["relative"] == 1.0
    assert rows[1]["relative"] == pytest.approx(rows[1]["ctr"] / rows[0]["ctr"])


def test_ctr_bootstrap_interval_contains_estimate(random_log):
    rows = ctr_by_position(random_log, interval="bootstrap", n_resamples=500, seed=1)
    for r in rows:
        assert 0 <= r["low"] < r["ctr"] < r["high"]
    with pytest.raises(LtrError, match="interval"):
        ctr_by_position(random_log, interval="jackknife")


def test_ips_on_policy_is_the_plain_ctr(random_log):
    # Target = logging policy: all weights are 1, IPS and SNIPS are the empirical CTR.
    out = ips_value(random_log, 1 / 80)
    assert out["ips"] == pytest.approx(38 / 10_000, rel=1e-12)
    assert out["snips"] == pytest.approx(38 / 10_000, rel=1e-12)
    assert out["ess"] == pytest.approx(10_000)


def test_ips_off_policy_from_bts(logs):
    bts = logs["bts"]
    out = ips_value(bts, 1 / 80)
    w = (1 / 80) / bts.propensity
    assert out["ips"] == pytest.approx(float((w * bts.click).mean()), rel=1e-12)
    assert out["max_weight"] == pytest.approx(w.max())
    assert out["ess"] < 10_000  # the weights vary, so fewer effective rounds
    assert out["ips_low"] < out["ips"] < out["ips_high"]


def test_loader_errors(tmp_path):
    folder = tmp_path / "random" / "all"
    folder.mkdir(parents=True)
    (folder / "item_context.csv").write_text(",item_id,item_feature_0\n0,0,0.5\n1,1,0.1\n")
    header = ",timestamp,item_id,position,click,propensity_score\n"
    (folder / "all.csv").write_text(header + "0,t,1,1,0,0.5\n1,t,0,2,2,0.5\n")
    with pytest.raises(DataFormatError, match=r"all\.csv:3: column 'click'"):
        load_open_bandit(tmp_path, "random")
    (folder / "all.csv").write_text(header + "0,t,1,1,0,0.5\n1,t,0,x,0,0.5\n")
    with pytest.raises(DataFormatError, match=r"all\.csv:3: column 'position': cannot read 'x'"):
        load_open_bandit(tmp_path, "random")
    (folder / "all.csv").write_text(header + "0,t,5,1,0,0.5\n")
    with pytest.raises(DataFormatError, match="item_id outside"):
        load_open_bandit(tmp_path, "random")
    (folder / "all.csv").write_text(header + "0,t,1,1,0\n")
    with pytest.raises(DataFormatError, match=r"all\.csv:2: 5 fields"):
        load_open_bandit(tmp_path, "random")
    with pytest.raises(LtrError, match="file not found"):
        load_open_bandit(tmp_path, "bts")
