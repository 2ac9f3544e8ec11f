"""Estimating examination propensities by position from intervention traffic in a click log.

Under the position-based model a click at position r happens with probability
``theta_r * a(item)``. Ordinary traffic cannot separate the two factors (the items at the top are
also the ones the ranker believed best), so two kinds of intervention are used:

* Randomized traffic (RandTop-k): a share of sessions shows the top-k set in a uniformly random
  order. Every item is then equally likely at every position, so within such sessions
  ``E[click at r] = theta_r * mean_a`` and ``theta_r / theta_1 = CTR_r / CTR_1``. Only sessions that
  show at least ``n_positions`` items are used, so all positions see the same lists.
* Swap interventions (Joachims et al., 2017): a share of sessions swaps the item at position 1 with
  the item at a position k drawn uniformly from ``1..n_shown``; k = 1 is the control group. The item
  the ranker put first is the same kind of item in every group, so
  ``theta_k / theta_1 = P(click on the original top item | moved to k) / P(click on it | left at 1)``,
  with the control restricted to sessions showing at least k items (the same lists as group k).

Both return relative propensities (``theta_1 = 1``), with delta-method standard errors of the
ratio of means and a normal interval. :func:`fit_power_law` fits ``theta_r = r^-eta`` to an estimate
by weighted least squares on the log scale, which extends it to positions that were not estimated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.base.errors import LtrError

__all__ = [
    "PropensityEstimate",
    "estimate_from_randomized",
    "estimate_from_swaps",
    "fit_power_law",
    "compare_to_truth",
    "propensities_from_curve",
]


@dataclass(frozen=True)
class PropensityEstimate:
    """Relative examination propensity by position, ``theta[0] = 1`` for position 1.

    ``se``: delta-method standard errors; ``low``/``high``: normal interval at ``confidence``;
    ``clicks``/``sessions``: the numerator clicks and the sessions behind each position's rate.
    """

    positions: np.ndarray
    theta: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    clicks: np.ndarray
    sessions: np.ndarray
    method: str
    confidence: float

    def curve(self, n_positions: int, *, smooth: bool = False, floor: float = 1e-6) -> np.ndarray:
        """Propensities for positions ``1..n_positions``: the estimate where it is a number above 0, elsewhere
        (beyond the estimate, or where it is undefined or 0) the value of the nearest such position above it
        (:func:`ltr.clicks.propensities.curves.complete_curve`), floored at ``floor``; with ``smooth=True`` the
        fitted power law everywhere."""
        from ltr.clicks.propensities.curves import complete_curve

        if smooth:
            return np.clip(np.arange(1, n_positions + 1, dtype=np.float64) ** (-fit_power_law(self)), floor, None)
        return np.clip(complete_curve(self.theta, n_positions)[0], floor, None)

    def as_rows(self) -> list[dict]:
        return [
            {"position": int(p), "theta": float(t), "se": float(s), "low": float(lo), "high": float(hi),
             "clicks": float(c), "sessions": int(n)}
            for p, t, s, lo, hi, c, n in zip(self.positions, self.theta, self.se, self.low, self.high,
                                            self.clicks, self.sessions)
        ]


def _default_positions(log: ClickLog, n_positions: int | None) -> int:
    if n_positions is not None:
        if n_positions < 1:
            raise LtrError(f"n_positions must be >= 1, got {n_positions}")
        return int(n_positions)
    if log.n_entries == 0:
        raise LtrError("the click log is empty")
    return int(log.position.max())


def wilson_interval(clicks, n, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of a click rate ``clicks / n``: inside [0, 1], and above 0 when no click
    was seen (``[0, z^2 / (n + z^2)]``).

    >>> low, high = wilson_interval(np.array([0.0, 5.0]), np.array([10, 10]), 0.95)
    >>> low.round(4).tolist(), high.round(4).tolist()
    ([0.0, 0.2366], [0.2775, 0.7634])
    """
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n = np.asarray(n, dtype=np.float64)
    p = np.asarray(clicks, dtype=np.float64) / np.maximum(n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # no trial at all: no interval (NaN)
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def ratio_interval(clicks_r, n_r, clicks_1, n_1, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """An interval of ``theta = rate_r / rate_1`` that never goes below 0: the Wilson intervals of the
    two rates at confidence ``1 - (1 - confidence) / 2`` each (so both hold together with probability at
    least ``confidence``, by Bonferroni), divided crosswise: ``[low_r / high_1, high_r / low_1]``."""
    each = 1 - (1 - confidence) / 2
    low_r, high_r = wilson_interval(clicks_r, n_r, each)
    low_1, high_1 = wilson_interval(clicks_1, n_1, each)
    with np.errstate(divide="ignore"):
        return low_r / high_1, np.where(low_1 > 0, high_r / np.where(low_1 > 0, low_1, 1.0), np.inf)


def _sums_and_positions(source, n_positions: int | None):
    """``(sums, n_positions)`` of a :class:`ClickLog` or of the sums already taken (a streamed log)."""
    from ltr.clicks.propensities.intervention_sums import InterventionSums, sums_of_log

    if not isinstance(source, InterventionSums):
        return sums_of_log(source), _default_positions(source, n_positions)
    if n_positions is not None:
        return source, _default_positions(None, n_positions)  # checks n_positions >= 1 only
    if source.max_position == 0:
        raise LtrError("the click log has no randomized or swap sessions")
    return source, source.max_position


def estimate_from_randomized(log, n_positions: int | None = None, *, confidence: float = 0.95) -> PropensityEstimate:
    """``theta_r / theta_1 = CTR_r / CTR_1`` over randomized sessions showing >= n_positions items.

    ``log``: a :class:`ClickLog` or its :class:`~ltr.clicks.propensities.intervention_sums.InterventionSums`.
    Standard error of a ratio of paired means R = mean(x) / mean(y) (x, y: clicks at r and at 1 in
    the same sessions): ``sqrt(var(x - R y) / n) / mean(y)``, with
    ``(n - 1) var(x - R y) = sum x^2 - 2 R sum x y + R^2 sum y^2`` (the residuals' mean is 0 at this R).
    The interval is :func:`ratio_interval`'s (Wilson's score intervals of the two click rates), so
    it stays above 0 and is not empty for a position without clicks.
    """
    sums, n_pos = _sums_and_positions(log, n_positions)
    enough = slice(n_pos, None)  # sessions showing at least n_pos items
    n = int(sums.rand_n[enough].sum())
    if n < 2:
        raise LtrError(f"the log has {n} randomized sessions showing >= {n_pos} items; "
                       "simulate with a randomized share (randomize_fraction > 0) or ask for fewer positions")
    x, xx, x1x = (np.zeros(n_pos) for _ in range(3))
    m = min(n_pos, sums.rand_x.shape[1])
    for total, part in ((x, sums.rand_x), (xx, sums.rand_xx), (x1x, sums.rand_x1x)):
        total[:m] = part[enough, :m].sum(axis=0)
    if x[0] <= 0:
        raise LtrError("no clicks at position 1 in the randomized sessions: the estimate is undefined")
    theta = x / x[0]
    resid_ss = np.maximum(xx - 2 * theta * x1x + theta * theta * xx[0], 0.0)
    se = np.sqrt(resid_ss / (n - 1) / n) / (x[0] / n)
    low, high = ratio_interval(x, n, x[0], n, confidence)
    return PropensityEstimate(np.arange(1, n_pos + 1), theta, se, low, high, x, np.full(n_pos, n), "randomized",
                              confidence)


def _swap_group(sums, k: int, min_shown: int = 0) -> tuple[int, float, float]:
    """(sessions, sum t, sum t^2) of swap group k among the sessions showing >= min_shown items."""
    if k >= sums.swap_n.shape[0]:
        return 0, 0.0, 0.0
    sel = slice(min_shown, None)
    return int(sums.swap_n[k, sel].sum()), float(sums.swap_t[k, sel].sum()), float(sums.swap_tt[k, sel].sum())


def _relative_variance(n: int, t: float, tt: float) -> float:
    """``var(t) / (n mean(t)^2)`` of a group from its sums (``var`` with ddof 1)."""
    mean = t / n
    return (tt - t * mean) / (n - 1) / (n * mean * mean)


def estimate_from_swaps(log, n_positions: int | None = None, *, confidence: float = 0.95) -> PropensityEstimate:
    """``theta_k / theta_1`` = click rate of the original top item moved to k / its rate left at 1.

    ``log``: a :class:`ClickLog` or its :class:`~ltr.clicks.propensities.intervention_sums.InterventionSums`.
    Groups are independent, so ``se = R * sqrt(var_k / (n_k mean_k^2) + var_c / (n_c mean_c^2))``
    (the first term only when the group clicked at all).
    """
    sums, n_pos = _sums_and_positions(log, n_positions)
    if sums.n_swap == 0:
        raise LtrError("the log has no swap sessions; simulate with swap_fraction > 0")
    theta, se, clicks = np.ones(n_pos), np.zeros(n_pos), np.zeros(n_pos)
    counts = np.zeros(n_pos, dtype=np.int64)
    n_c, t_c, _ = _swap_group(sums, 1)
    if t_c <= 0:
        raise LtrError("no clicks on the top item in the control (k = 1) swap sessions")
    clicks[0], counts[0] = t_c, n_c
    ctrl_clicks, ctrl_n = np.full(n_pos, t_c), np.full(n_pos, n_c, dtype=np.float64)
    for k in range(2, n_pos + 1):
        n_k, t_k, tt_k = _swap_group(sums, k)
        n_ctrl, t_ctrl, tt_ctrl = _swap_group(sums, 1, min_shown=k)
        counts[k - 1], clicks[k - 1] = n_k, t_k
        if n_k < 2 or n_ctrl < 2 or t_ctrl <= 0:
            theta[k - 1], se[k - 1] = np.nan, np.nan
            continue
        r = (t_k / n_k) / (t_ctrl / n_ctrl)
        theta[k - 1] = r
        rel_var = _relative_variance(n_ctrl, t_ctrl, tt_ctrl)
        if t_k > 0:
            rel_var += _relative_variance(n_k, t_k, tt_k)
        se[k - 1] = r * np.sqrt(max(rel_var, 0.0))
        ctrl_clicks[k - 1], ctrl_n[k - 1] = t_ctrl, n_ctrl
    low, high = ratio_interval(clicks, counts, ctrl_clicks, ctrl_n, confidence)
    undefined = ~np.isfinite(theta)
    low[undefined], high[undefined] = np.nan, np.nan
    low[0], high[0] = 1.0, 1.0  # theta_1 = 1 by definition
    return PropensityEstimate(np.arange(1, n_pos + 1), theta, se, low, high, clicks, counts, "swap", confidence)


def fit_power_law(estimate: PropensityEstimate) -> float:
    """``eta`` of ``theta_r = r^-eta`` fitted to an estimate (weighted least squares of log theta on
    log r through the origin, weights ``(theta / se)^2`` = inverse variance of log theta).

    >>> r = np.arange(1, 6)
    >>> est = PropensityEstimate(r, r ** -1.3, np.full(5, 0.01), r * 0.0, r * 0.0, r * 0.0, r, "x", 0.95)
    >>> round(fit_power_law(est), 10)
    1.3
    """
    t, s, r = estimate.theta, estimate.se, estimate.positions.astype(np.float64)
    ok = (r > 1) & np.isfinite(t) & (t > 0) & np.isfinite(s) & (s > 0)
    if not ok.any():
        return 0.0
    w = (t[ok] / s[ok]) ** 2
    lr, lt = np.log(r[ok]), np.log(t[ok])
    return float(-(w * lr * lt).sum() / (w * lr * lr).sum())


def compare_to_truth(estimate: PropensityEstimate, truth) -> list[dict]:
    """Rows of position, true relative propensity, estimate, interval and whether it covers the truth.

    ``truth`` is the simulator's examination curve (any scale: it is divided by its first value).
    """
    t = np.asarray(truth, dtype=np.float64).ravel()
    if len(t) < len(estimate.theta):
        raise ValueError(f"truth has {len(t)} positions, the estimate {len(estimate.theta)}")
    t = t[: len(estimate.theta)] / t[0]
    rows = []
    for row, true in zip(estimate.as_rows(), t):
        row = {"position": row["position"], "truth": float(true), **{k: v for k, v in row.items() if k != "position"}}
        defined = np.isfinite(row["theta"])  # a swap group too small for an estimate covers nothing
        row["covered"] = (bool(row["low"] <= true <= row["high"]) if row["position"] > 1 else True) if defined else None
        rows.append(row)
    return rows


def propensities_from_curve(log: ClickLog, curve) -> np.ndarray:
    """Per-entry propensities ``curve[position - 1]`` (for IPS with an estimated curve).

    >>> import numpy as np
    >>> from ltr.clicks.logs.click_log import ClickLog
    >>> z = np.zeros(3, dtype=np.int64)
    >>> log = ClickLog(z, z, z, np.array([1, 2, 3]), z, z.astype(np.int8), np.ones(3), np.zeros(1, np.int64),
    ...                np.zeros(1, np.int8), np.zeros(1, np.int64))
    >>> propensities_from_curve(log, [1.0, 0.6, 0.3])
    array([1. , 0.6, 0.3])
    """
    c = np.asarray(curve, dtype=np.float64).ravel()
    if log.n_entries and log.position.max() > len(c):
        raise LtrError(f"the propensity curve has {len(c)} positions, the log shows up to {log.position.max()}")
    return c[log.position - 1]
