"""Impressions with fields (advertiser, site, device, position, hour), true click probabilities,
and a pooled model that is calibrated overall but wrong per field value.

The world (one seeded draw, :func:`make_field_world`):

* ``n_advertisers`` advertisers with Zipf-like traffic shares (``share_a ~ 1 / rank^zipf``), a bid per
  click (log-normal) and a logit effect ``alpha_a ~ N(0, advertiser_sd^2)``; ``n_sites`` sites
  (Zipf shares, effect ``beta_s ~ N(0, site_sd^2)``); devices with shares ``device_shares`` and fixed
  logit effects ``device_effects``; ``n_positions`` positions with examination ``theta_k =
  position_decay^k`` (k = 0 at the top); 24 hours with effect ``hour_amplitude * sin(2 pi h / 24)``.
* An impression has a context vector ``x ~ N(0, I_3)`` and its ad's click probability at the top is
  ``ad_ctr = sigmoid(base_logit + c_d x @ w + alpha_a + beta_s + delta_d + eta_h)`` (``c_d`` the device's
  ``device_context``, 1 unless given); shown at position k
  it is clicked with probability ``true_ctr = theta_k * ad_ctr`` (the position-based model).
* The **pooled model** knows the context and the site, hour and position effects, but only a share
  ``advertiser_known`` of each advertiser's effect and a share ``device_known`` of each device's::

      pooled_logit = base_logit + x @ w + advertiser_known alpha_a + beta_s + device_known delta_d + eta_h + ln theta_k

  so after a global Platt fit it is calibrated in total and off by tens of percent for some
  advertisers and devices: every per-field claim has a known truth (``true_ctr``).

:meth:`FieldWorld.impressions` draws impression rows (the calibration benchmark);
:meth:`FieldWorld.requests` draws auctions (requests with candidate ads, slots assigned by the auction).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from ltr.base.errors import LtrError

__all__ = ["FieldWorld", "FieldImpressions", "AuctionRequests", "make_field_world", "make_joint_world", "FIELD_NAMES"]

FIELD_NAMES = ("advertiser", "site", "device", "position", "hour")


@dataclass
class FieldImpressions:
    """Impression rows: ``fields[name]`` int codes per row, the truth and the pooled model's logit."""

    fields: dict  # name -> [N] int64
    features: np.ndarray  # [N, 3] float32, the context x
    true_ctr: np.ndarray  # [N] click probability at the shown position
    clicks: np.ndarray  # [N] 0/1
    pooled_logit: np.ndarray  # [N] the pooled model's raw score (a logit, before any calibration)
    bids: np.ndarray  # [N] the advertiser's bid per click

    @property
    def n(self) -> int:
        return int(self.clicks.shape[0])

    def subset(self, rows) -> "FieldImpressions":
        rows = np.asarray(rows)
        return FieldImpressions(fields={k: v[rows] for k, v in self.fields.items()}, features=self.features[rows],
                                true_ctr=self.true_ctr[rows], clicks=self.clicks[rows],
                                pooled_logit=self.pooled_logit[rows], bids=self.bids[rows])

    def halves(self, seed: int = 0) -> tuple["FieldImpressions", "FieldImpressions"]:
        """A seeded random split into two halves (fit, judge)."""
        perm = np.random.default_rng(seed).permutation(self.n)
        h = self.n // 2
        return self.subset(np.sort(perm[:h])), self.subset(np.sort(perm[h:]))

    def to_frame(self, score=None):
        """A pandas frame: the fields, ``score`` (default the pooled logit), ``label``, ``true_ctr``."""
        import pandas as pd

        cols = {k: v for k, v in self.fields.items()}
        cols["score"] = self.pooled_logit if score is None else np.asarray(score)
        cols["label"] = self.clicks
        cols["true_ctr"] = self.true_ctr
        return pd.DataFrame(cols)


@dataclass
class AuctionRequests:
    """``A`` auctions with ``K`` candidate ads each (every array ``[A, K]``)."""

    bids: np.ndarray
    ad_ctr: np.ndarray  # true click probability of the ad in the top slot
    pooled_logit: np.ndarray  # the pooled model's logit for the top slot (ln theta_0 = 0)
    fields: dict  # advertiser [A, K]; site, device, hour [A, K] (repeated over the request's candidates)
    position_effects: np.ndarray  # [n_positions] theta_k

    def to_frame(self):
        """The table ``ltr auction`` reads, one row per candidate: ``request``, ``ad`` (the advertiser),
        ``bid``, ``score`` (the pooled model's logit at the top slot), ``true_ctr`` (at the top slot), the
        fields advertiser, site, device, hour, and ``position`` 0 (the top slot, where a calibrator that
        reads the position predicts)."""
        import pandas as pd

        a, k = self.bids.shape
        cols = {"request": np.repeat(np.arange(a), k), "ad": self.fields["advertiser"].reshape(-1),
                "bid": self.bids.reshape(-1), "score": self.pooled_logit.reshape(-1), "true_ctr": self.ad_ctr.reshape(-1)}
        cols.update({f: v.reshape(-1) for f, v in self.fields.items()})
        cols["position"] = np.zeros(a * k, dtype=np.int64)
        return pd.DataFrame(cols)


@dataclass
class FieldWorld:
    """The effects of one seeded world (see the module docstring)."""

    base_logit: float
    w: np.ndarray
    advertiser_share: np.ndarray
    advertiser_effect: np.ndarray
    advertiser_bid: np.ndarray
    site_share: np.ndarray
    site_effect: np.ndarray
    device_share: np.ndarray
    device_effect: np.ndarray
    position_effects: np.ndarray
    hour_effect: np.ndarray
    advertiser_known: float
    device_known: float
    pooled_bias: float = 0.0
    pooled_scale: float = 1.0
    sizes: dict = field(default_factory=dict)
    device_context: np.ndarray | None = None  # per device, the true weight of the context x @ w (None: 1)

    def _logits(self, x, adv, site, dev, hour):
        common = self.base_logit + x @ self.w + self.site_effect[site] + self.hour_effect[hour]
        true = common + self.advertiser_effect[adv] + self.device_effect[dev]
        if self.device_context is not None:  # the device's own weight of the context, where the pooled model has 1
            true = true + (self.device_context[dev] - 1.0) * (x @ self.w)
        pooled = (common + self.advertiser_known * self.advertiser_effect[adv]
                  + self.device_known * self.device_effect[dev])
        return true, pooled

    def impressions(self, n: int, seed: int = 0) -> FieldImpressions:
        """``n`` impression rows, seeded; positions uniform over ``n_positions``."""
        if n < 1:
            raise LtrError(f"n must be >= 1, got {n}")
        rng = np.random.default_rng(seed)
        adv = rng.choice(self.advertiser_share.shape[0], size=n, p=self.advertiser_share)
        site = rng.choice(self.site_share.shape[0], size=n, p=self.site_share)
        dev = rng.choice(self.device_share.shape[0], size=n, p=self.device_share)
        pos = rng.integers(0, self.position_effects.shape[0], size=n)
        hour = rng.integers(0, 24, size=n)
        x = rng.normal(size=(n, self.w.shape[0]))
        true_logit, pooled = self._logits(x, adv, site, dev, hour)
        theta = self.position_effects[pos]
        p = theta * expit(true_logit)
        clicks = (rng.random(n) < p).astype(np.float64)
        pooled = self.pooled_scale * (pooled + np.log(theta)) + self.pooled_bias
        return FieldImpressions(
            fields={"advertiser": adv.astype(np.int64), "site": site.astype(np.int64), "device": dev.astype(np.int64),
                    "position": pos.astype(np.int64), "hour": hour.astype(np.int64)},
            features=x.astype(np.float32), true_ctr=p, clicks=clicks, pooled_logit=pooled,
            bids=self.advertiser_bid[adv])

    def requests(self, n_requests: int, ads_per_request: int = 8, seed: int = 0) -> AuctionRequests:
        """Auctions: each request has a site, device and hour and ``ads_per_request`` distinct candidate
        advertisers drawn by traffic share; slots (positions) are for the auction to assign."""
        k_adv = self.advertiser_share.shape[0]
        if not 1 <= ads_per_request <= k_adv:
            raise LtrError(f"ads_per_request must be in [1, {k_adv}], got {ads_per_request}")
        rng = np.random.default_rng(seed)
        # Distinct candidates with probability growing with the share: Gumbel top-k.
        g = np.log(self.advertiser_share)[None, :] - np.log(-np.log(rng.random((n_requests, k_adv))))
        adv = np.argsort(-g, axis=1)[:, :ads_per_request]
        site = np.repeat(rng.choice(self.site_share.shape[0], size=n_requests, p=self.site_share)[:, None],
                         ads_per_request, axis=1)
        dev = np.repeat(rng.choice(self.device_share.shape[0], size=n_requests, p=self.device_share)[:, None],
                        ads_per_request, axis=1)
        hour = np.repeat(rng.integers(0, 24, size=n_requests)[:, None], ads_per_request, axis=1)
        x = rng.normal(size=(n_requests, ads_per_request, self.w.shape[0]))
        true_logit, pooled = self._logits(x, adv, site, dev, hour)
        return AuctionRequests(bids=self.advertiser_bid[adv], ad_ctr=expit(true_logit),
                               pooled_logit=self.pooled_scale * pooled + self.pooled_bias,
                               fields={"advertiser": adv, "site": site, "device": dev, "hour": hour},
                               position_effects=self.position_effects.copy())


def _device_context(values, n: int) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (n,) or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise LtrError(f"device_context needs one positive number per device ({n}), got {values!r}")
    return v


def _zipf(k: int, s: float, rng) -> np.ndarray:
    share = 1.0 / np.arange(1, k + 1) ** s
    return rng.permutation(share / share.sum())


def make_field_world(*, n_advertisers: int = 100, n_sites: int = 50, n_positions: int = 4, zipf: float = 0.9,
                     base_logit: float = -2.8, advertiser_sd: float = 0.4, site_sd: float = 0.3,
                     device_shares=(0.6, 0.3, 0.1), device_effects=(0.1, -0.2, 0.25), position_decay: float = 0.7,
                     hour_amplitude: float = 0.2, advertiser_known: float = 0.25, device_known: float = 0.0,
                     pooled_bias: float = 0.3, pooled_scale: float = 1.1, bid_sigma: float = 0.5,
                     device_context=None, seed: int = 0) -> FieldWorld:
    """Draw one world (effects, shares, bids) from ``seed``; every parameter is in the module docstring.

    ``pooled_bias`` / ``pooled_scale`` make the raw pooled logit miscalibrated overall too
    (``scale * logit + bias``), so that a global Platt fit has work to do. ``device_context`` (one
    number per device, default all 1): the true logit weighs the context ``x @ w`` by the device's
    number while the pooled model weighs it by 1, a field x score interaction (the pooled model is
    over-confident on a device below 1).

    >>> w = make_field_world(seed=1)
    >>> imps = w.impressions(1000, seed=2)
    >>> sorted(imps.fields), imps.n, bool(np.all(imps.true_ctr <= w.position_effects[imps.fields["position"]]))
    (['advertiser', 'device', 'hour', 'position', 'site'], 1000, True)
    """
    dev_s = np.asarray(device_shares, dtype=np.float64)
    dev_e = np.asarray(device_effects, dtype=np.float64)
    if dev_s.shape != dev_e.shape or not np.isclose(dev_s.sum(), 1.0) or (dev_s <= 0).any():
        raise LtrError("device_shares must be positive, sum to 1 and have one effect each in device_effects")
    if not 0.0 < position_decay <= 1.0:
        raise LtrError(f"position_decay must be in (0, 1], got {position_decay}")
    rng = np.random.default_rng(seed)
    return FieldWorld(
        base_logit=float(base_logit),
        w=rng.normal(scale=0.8, size=3),
        advertiser_share=_zipf(n_advertisers, zipf, rng),
        advertiser_effect=rng.normal(scale=advertiser_sd, size=n_advertisers),
        advertiser_bid=np.round(np.exp(rng.normal(0.0, bid_sigma, size=n_advertisers)), 2),
        site_share=_zipf(n_sites, zipf, rng),
        site_effect=rng.normal(scale=site_sd, size=n_sites),
        device_share=dev_s,
        device_effect=dev_e,
        position_effects=position_decay ** np.arange(n_positions, dtype=np.float64),
        hour_effect=hour_amplitude * np.sin(2 * np.pi * np.arange(24) / 24.0),
        advertiser_known=float(advertiser_known),
        device_known=float(device_known),
        device_context=None if device_context is None else _device_context(device_context, dev_s.shape[0]),
        pooled_bias=float(pooled_bias),
        pooled_scale=float(pooled_scale),
        sizes={"advertiser": n_advertisers, "site": n_sites, "device": int(dev_s.shape[0]),
               "position": n_positions, "hour": 24},
    )


def make_joint_world(seed: int = 0, **overrides) -> FieldWorld:
    """The world of the beyond-MCGrad study (``experiments/calibrate_beyond_mcgrad.py``): a
    :func:`make_field_world` whose pooled score already carries half of the advertiser and of the device
    effects (``advertiser_known = device_known = 0.5``), with wide advertiser effects (``advertiser_sd =
    1``) and device effects (0.5, -0.6, 0.8), and a device that changes the weight of the context
    (``device_context = (1, 0.7, 1.3)``: the pooled model is over-confident on device 1 and
    under-confident on device 2, a field x score interaction). A global map fitted first takes a slope
    that part of the field effects pulls; the truth is known for every row. ``overrides``: any other
    :func:`make_field_world` parameter."""
    params = dict(advertiser_sd=1.0, advertiser_known=0.5, device_known=0.5, device_effects=(0.5, -0.6, 0.8),
                  device_context=(1.0, 0.7, 1.3))
    params.update(overrides)
    return make_field_world(seed=seed, **params)
