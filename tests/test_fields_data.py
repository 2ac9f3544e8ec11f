"""The field generator: seeded, the truth is calibrated per field value, the pooled model after a
global Platt fit is calibrated in total but off per device / advertiser in the direction of the
effects it misses."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from ltr.calibrate.calibrators import PlattCalibrator
from ltr.calibrate.fields_data import make_field_world
from ltr.base.errors import LtrError
from metrics.calibration import field_calibration, pcoc


@pytest.fixture(scope="module")
def data():
    world = make_field_world(seed=0)
    return world, world.impressions(120_000, seed=1)


def test_seeded(data):
    world, imps = data
    again = make_field_world(seed=0).impressions(120_000, seed=1)
    assert np.array_equal(imps.clicks, again.clicks) and np.array_equal(imps.pooled_logit, again.pooled_logit)
    assert not np.array_equal(imps.clicks, world.impressions(120_000, seed=2).clicks)


def test_truth_is_calibrated_per_field(data):
    _, imps = data
    fc = field_calibration(imps.clicks, imps.true_ctr, {"device": imps.fields["device"],
                                                         "position": imps.fields["position"]}, n_boot=100)
    for r in fc.rows:  # within 4 standard errors (about 1 / sqrt(clicks)) of 1
        assert abs(r["pcoc"] - 1.0) < 4.0 / np.sqrt(r["clicks"]), r
        assert r["pcoc_low"] < r["pcoc"] < r["pcoc_high"]


def test_pooled_model_is_wrong_per_device_in_the_known_direction(data):
    world, imps = data
    fit, judge = imps.halves(seed=3)
    p = PlattCalibrator(input="score").fit(fit.pooled_logit, fit.clicks).predict(judge.pooled_logit)
    assert pcoc(judge.clicks, p) == pytest.approx(1.0, abs=0.03)
    d = judge.fields["device"]
    ratios = [pcoc(judge.clicks[d == k], p[d == k]) for k in range(3)]
    # Missing effect delta_d: the model over-predicts where delta_d is low, under-predicts where it is high.
    assert np.argmax(ratios) == np.argmin(world.device_effect) and np.argmin(ratios) == np.argmax(world.device_effect)
    assert max(ratios) > 1.1 and min(ratios) < 0.9


def test_requests_layout_and_truth():
    world = make_field_world(seed=0)
    req = world.requests(500, ads_per_request=6, seed=4)
    assert req.bids.shape == (500, 6) and req.ad_ctr.shape == (500, 6)
    a = req.fields["advertiser"]
    assert all(len(set(row)) == 6 for row in a.tolist())  # distinct candidates
    assert np.all(req.fields["site"] == req.fields["site"][:, :1])  # one site per request
    # The pooled logit differs from the true one by exactly the unknown shares of the effects.
    true_logit = np.log(req.ad_ctr) - np.log1p(-req.ad_ctr)
    missing = (1 - world.advertiser_known) * world.advertiser_effect[a] + world.device_effect[req.fields["device"]]
    raw = (req.pooled_logit - world.pooled_bias) / world.pooled_scale
    assert np.allclose(true_logit - raw, missing, atol=1e-9)
    assert np.allclose(expit(true_logit), req.ad_ctr)


def test_bad_parameters():
    with pytest.raises(LtrError, match="device_shares"):
        make_field_world(device_shares=(0.5, 0.6), device_effects=(0, 0))
    with pytest.raises(LtrError, match="ads_per_request"):
        make_field_world(n_advertisers=5).requests(3, ads_per_request=6)
