"""Synthetic ad impressions with known true click probabilities, and the ways a CTR goes wrong.

The generative model (seeded, vectorised):

* ``n_advertisers`` advertisers, each with a bid (log-normal, money per click), an ad vector
  ``a ~ N(0, I_d)`` and a quality offset ``q ~ N(0, quality_sd^2)``.
* ``n_requests`` requests (page views, the "queries" of the ranking layout), each with a context
  vector ``u ~ N(0, I_d)`` and ``ads_per_request`` distinct candidate advertisers.
* Observed features of an impression: ``x = [u * a, a, q + noise]`` (``3 d`` columns, float32).
* True click probability ``p = sigmoid(base_logit + x @ w + interaction * x_0 * x_1)``: a linear
  model on ``x`` is close but not exact. Clicks are Bernoulli(p); ``p`` is the click probability in
  the top position (position effects belong to :mod:`ltr.calibrate.auction`).

Miscalibration sources: negative down-sampling (keep every click and a share ``w`` of the
non-clicks; a model trained on the result predicts ``q = p / (p + (1 - p) w)``, which
:func:`correct_downsampling` inverts exactly) and monotone distortions (:func:`distort`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import expit, logit

from ltr.base.errors import LtrError

__all__ = [
    "Impressions",
    "generate_impressions",
    "downsample_negatives",
    "correct_downsampling",
    "downsampled_rate",
    "distort",
    "DISTORTIONS",
    "train_ctr_model",
]


@dataclass
class Impressions:
    """Impressions in request order; the rows of one request are contiguous."""

    features: np.ndarray  # [N, F] float32
    clicks: np.ndarray  # [N] float64 0/1
    true_ctr: np.ndarray  # [N] float64
    request_ids: np.ndarray  # [N] int64 (non-decreasing)
    advertiser_ids: np.ndarray  # [N] int64
    bids: np.ndarray  # [N] float64, the advertiser's bid per click
    weights: np.ndarray  # [N] importance weights (1, or 1 / w for kept negatives after down-sampling)
    negative_rate: float = 1.0  # share of negatives kept (1: no down-sampling)

    @property
    def n(self) -> int:
        return int(self.clicks.shape[0])

    @property
    def request_offsets(self) -> np.ndarray:
        """``[R + 1]`` offsets of the requests present (request r owns rows offsets[r]:offsets[r+1])."""
        if self.n == 0:
            return np.zeros(1, dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, self.request_ids[1:] != self.request_ids[:-1]])
        return np.r_[starts, self.n].astype(np.int64)

    def subset(self, rows) -> "Impressions":
        """The given rows (a boolean mask or sorted indices), keeping the request order."""
        rows = np.asarray(rows)
        return replace(
            self,
            features=self.features[rows],
            clicks=self.clicks[rows],
            true_ctr=self.true_ctr[rows],
            request_ids=self.request_ids[rows],
            advertiser_ids=self.advertiser_ids[rows],
            bids=self.bids[rows],
            weights=self.weights[rows],
        )

    def split_requests(self, fractions=(0.6, 0.2, 0.2), seed: int = 0) -> list["Impressions"]:
        """Split by request (never inside one) into parts of the given shares, seeded."""
        f = np.asarray(fractions, dtype=np.float64)
        if (f < 0).any() or not np.isclose(f.sum(), 1.0):
            raise LtrError(f"fractions must be non-negative and sum to 1, got {fractions!r}")
        reqs = np.unique(self.request_ids)
        perm = np.random.default_rng(seed).permutation(reqs.shape[0])
        cuts = np.round(np.cumsum(f) * reqs.shape[0]).astype(int)
        part_of = np.empty(reqs.shape[0], dtype=np.int64)
        part_of[perm] = np.searchsorted(cuts, np.arange(reqs.shape[0]), side="right")
        row_part = part_of[np.searchsorted(reqs, self.request_ids)]
        return [self.subset(row_part == i) for i in range(f.shape[0])]

    def to_ranking_dataset(self, with_weights: bool = False):
        """A :class:`ltr.data.RankingDataset` with one query per request (labels = clicks).

        ``with_weights=True`` attaches the down-sampling importance weights (the trainer then passes
        them to the loss, which undoes the down-sampling in training); by default they are left off,
        as in the common practice this module reproduces.
        """
        from ltr.data import RankingDataset

        off = self.request_offsets
        return RankingDataset(
            features=np.ascontiguousarray(self.features, dtype=np.float32),
            labels=self.clicks.astype(np.float64),
            query_offsets=off,
            query_ids=self.request_ids[off[:-1]].astype(np.int64),
            weights=self.weights.astype(np.float64) if with_weights else None,
        )


def generate_impressions(n_requests: int = 10000, ads_per_request: int = 8, *, n_advertisers: int = 60,
                         dim: int = 4, base_logit: float = -3.5, interaction: float = 0.6,
                         quality_sd: float = 0.7, quality_noise: float = 0.3, bid_sigma: float = 0.6,
                         seed: int = 0) -> Impressions:
    """Draw ``n_requests * ads_per_request`` impressions from the model in the module docstring.

    The world (advertisers, weights) and the impressions come from one seeded stream: split one call's
    output (:meth:`Impressions.split_requests`) for train / test sets of the same world.
    The defaults give a click rate of about 6.5 % with true CTRs from 0.02 % to 60 % (1st to 99th percentile).

    >>> imps = generate_impressions(200, 5, seed=1)
    >>> imps.features.shape, imps.n, bool(np.all(np.diff(imps.request_ids) >= 0))
    ((1000, 9), 1000, True)
    """
    if ads_per_request > n_advertisers:
        raise LtrError(f"ads_per_request ({ads_per_request}) exceeds n_advertisers ({n_advertisers})")
    rng = np.random.default_rng(seed)
    adv_vec = rng.normal(size=(n_advertisers, dim))
    adv_quality = rng.normal(scale=quality_sd, size=n_advertisers)
    adv_bid = np.round(np.exp(rng.normal(0.0, bid_sigma, size=n_advertisers)), 2)
    w = rng.normal(scale=0.5, size=2 * dim + 1)
    w[-1] = 1.0  # the quality feature enters with weight 1

    u = rng.normal(size=(n_requests, dim))
    # ads_per_request distinct advertisers per request: the first K of a random permutation.
    cand = np.argsort(rng.random((n_requests, n_advertisers)), axis=1)[:, :ads_per_request]
    adv = cand.reshape(-1)
    req = np.repeat(np.arange(n_requests, dtype=np.int64), ads_per_request)
    a = adv_vec[adv]
    q_obs = adv_quality[adv] + rng.normal(scale=quality_noise, size=adv.shape[0])
    x = np.concatenate([u[req] * a, a, q_obs[:, None]], axis=1)
    z = base_logit + x @ w + interaction * x[:, 0] * x[:, 1] + (adv_quality[adv] - q_obs)
    p = expit(z)
    clicks = (rng.random(p.shape[0]) < p).astype(np.float64)
    return Impressions(
        features=x.astype(np.float32),
        clicks=clicks,
        true_ctr=p,
        request_ids=req,
        advertiser_ids=adv.astype(np.int64),
        bids=adv_bid[adv].astype(np.float64),
        weights=np.ones(p.shape[0]),
    )


def downsample_negatives(imps: Impressions, rate: float, seed: int = 0) -> Impressions:
    """Keep every click and each non-click with probability ``rate`` (= w), seeded.

    Kept negatives get importance weight ``1 / w``. The click rate among kept rows with true CTR
    ``p`` becomes ``p / (p + (1 - p) w)`` (:func:`downsampled_rate`).
    """
    if not 0.0 < rate <= 1.0:
        raise LtrError(f"negative sampling rate must be in (0, 1], got {rate!r}")
    rng = np.random.default_rng(seed)
    keep = (imps.clicks == 1) | (rng.random(imps.n) < rate)
    out = imps.subset(keep)
    out.weights = np.where(out.clicks == 1, 1.0, 1.0 / rate) * out.weights
    out.negative_rate = imps.negative_rate * rate
    return out


def downsampled_rate(p, rate: float) -> np.ndarray:
    """Expected click rate after keeping a share ``rate`` (w) of negatives: ``p / (p + (1 - p) w)``."""
    p = np.asarray(p, dtype=np.float64)
    return p / (p + (1.0 - p) * rate)


def correct_downsampling(q, rate: float) -> np.ndarray:
    """Undo negative down-sampling at rate ``w``: ``p = q / (q + (1 - q) / w)``.

    The exact inverse of :func:`downsampled_rate`, and a monotone map (AUC unchanged).

    >>> float(correct_downsampling(downsampled_rate(0.02, 0.1), 0.1).round(12))
    0.02
    """
    if not 0.0 < rate <= 1.0:
        raise LtrError(f"negative sampling rate must be in (0, 1], got {rate!r}")
    q = np.asarray(q, dtype=np.float64)
    return q / (q + (1.0 - q) / rate)


DISTORTIONS = ("square", "double", "sharpen", "downsample")


def distort(p, kind: str, strength: float | None = None) -> np.ndarray:
    """Monotone distortions of calibrated probabilities (they keep the order, hence AUC).

    * ``"square"``: ``p ** k`` (k = strength, default 2);
    * ``"double"``: ``min(k p, 1)`` (k default 2; ties only where ``k p >= 1``);
    * ``"sharpen"``: ``sigmoid(k logit p)`` (k default 2: over-confident);
    * ``"downsample"``: ``p / (p + (1 - p) w)`` (w default 0.1: what a model trained on down-sampled data
      predicts).

    >>> distort([0.1, 0.5], "sharpen").round(6).tolist()
    [0.012195, 0.5]
    """
    p = np.asarray(p, dtype=np.float64)
    if kind == "square":
        return p ** (2.0 if strength is None else strength)
    if kind == "double":
        return np.minimum((2.0 if strength is None else strength) * p, 1.0)
    if kind == "sharpen":
        k = 2.0 if strength is None else strength
        return expit(k * logit(np.clip(p, 1e-15, 1 - 1e-15)))
    if kind == "downsample":
        return downsampled_rate(p, 0.1 if strength is None else strength)
    raise LtrError(f"unknown distortion {kind!r}; choose one of {', '.join(DISTORTIONS)}")


def train_ctr_model(train: Impressions, valid: Impressions, *, hidden=(32,), epochs: int = 8, batch_size: int = 256,
                    lr: float = 3e-3, seed: int = 0, progress: bool = False, log_dir=None):
    """A pointwise CTR model: :class:`ltr.train.models.MLPScorer` (``hidden=()`` gives a linear model) trained
    with :class:`ltr.train.trainer.Trainer` and :class:`losses.PointwiseBCE` (binary cross-entropy on the
    logit), one "query" per request. The output bias starts at the logit of the training click rate.
    Early stopping watches the validation LogLoss of ``sigmoid(score)`` (``monitor="logloss"``, lower
    is better), the loss the model is fitted for; AUC is logged beside it. Seeded: the same ``seed``
    gives the same weights.

    Returns ``(trainer, fit_result)``; ``sigmoid(trainer.predict(ds))`` are the predicted CTRs.
    """
    import torch

    from losses import PointwiseBCE
    from ltr.train.models import LinearScorer, MLPScorer
    from ltr.train.trainer import TrainConfig, Trainer

    n_features = train.features.shape[1]
    torch.manual_seed(seed)  # the initial weights: the trainer seeds only when fit starts
    model = MLPScorer(n_features, hidden=tuple(hidden)) if hidden else LinearScorer(n_features)
    # Start the output bias at the training click rate's logit (a constant model that is already
    # calibrated on the training data), instead of at p = 0.5.
    last = model.out if hidden else model.linear
    rate = float(np.clip(train.clicks.mean(), 1e-6, 1 - 1e-6))
    with torch.no_grad():
        last.bias.fill_(float(logit(rate)))
    cfg = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, patience=3, monitor="logloss",
                      metrics=("logloss", "auc"), seed=seed, progress=progress, log_dir=log_dir)
    trainer = Trainer(model, PointwiseBCE(), cfg)
    result = trainer.fit(train.to_ranking_dataset(), valid.to_ranking_dataset())
    return trainer, result
