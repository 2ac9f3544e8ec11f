"""Ad auctions that multiply money by probabilities: GSP / VCG / second price, reserves, threshold.

Many auctions at once, as padded arrays ``[A, K]`` (auctions x candidate ads) with a ``mask`` for the
candidates that exist. Rules, stated once:

* **Rank score** ``bid * pCTR``; the ``S`` slots go to the eligible ads with the highest scores (ties:
  the lower candidate index first, a stable sort).
* **Eligible**: present in ``mask``, ``pCTR > 0``, ``pCTR >= threshold`` (the "show only if pCTR >= t"
  rule), ``bid >= reserve`` (a per-click reserve price, money per click; a number, or one value per
  candidate ``[A, K]`` for reserves per field value, see :func:`field_reserves`) and
  ``bid * pCTR >= score_reserve`` (a reserve on the rank score, money per impression).
* **GSP price per click** of the ad in slot ``s``: the smallest bid that keeps its slot,
  ``max(score of the next eligible ad, score_reserve, reserve * pCTR_own) / pCTR_own``; 0 competition
  and no reserve means a price of 0. It never exceeds the own bid. With ``slots=1`` this is the
  (quality-weighted) second-price auction.
* **VCG price per click** (``mechanism="vcg"``): the externality the ad imposes on the ads below it,
  with rank scores ``e_(1) >= e_(2) >= ...`` of the eligible ads and slot effects ``theta_0 >= ... >=
  theta_{S-1}``, ``theta_S = 0``: the ad in slot s pays per impression
  ``sum_{j=s}^{S-1} (theta_j - theta_{j+1}) e_(j+2)`` (``e`` of a missing ad = 0), i.e. per click that
  amount over ``theta_s pCTR_own``; the reserves act as a floor on the price per click
  (``max(VCG, reserve, score_reserve / pCTR_own)``). One slot: VCG = GSP. With the
  slot click-through ``theta_s x CTR`` both follow the separable model below.
* **Clicks** follow a separable model: ad ``i`` in slot ``s`` is clicked with probability
  ``true_CTR_i * position_effect_s`` (``position_effects`` default all 1). Without ``true_ctr`` the
  pCTRs are used, i.e. the auctioneer's own expectation.
* **Revenue** = ``sum over shown ads of price * expected clicks``. **Welfare** = the value of the true
  expected clicks, ``sum over shown ads of bid * true_CTR * position_effect`` (bids are taken as the
  advertisers' values per click, i.e. truthful bidding).
* The **oracle** runs the same auction with ``pCTR = true CTR``; agreement compares allocations;
  **regret** = oracle welfare - welfare (money the wrong allocation loses).
* **Winners' PCOC** = ``sum over shown ads of pCTR * theta_s`` / ``sum of true_CTR * theta_s``: the
  predicted over the expected clicks of the ads that won. Selection picks ads whose pCTR came out
  high, so a model calibrated on all candidates over-predicts on its winners (maximization bias).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["AuctionResult", "run_auctions", "second_price", "oracle_comparison", "pad_groups", "field_reserves",
           "log_winners"]


@dataclass
class AuctionResult:
    """Outcome of ``A`` auctions with ``S`` slots. Empty slots have winner -1 and zeros elsewhere."""

    winners: np.ndarray  # [A, S] candidate index in slot s, -1 where the slot stays empty
    prices: np.ndarray  # [A, S] price per click
    expected_clicks: np.ndarray  # [A, S] true_CTR * position effect of the slot
    revenue: np.ndarray  # [A]
    welfare: np.ndarray  # [A]
    predicted_clicks: np.ndarray | None = None  # [A, S] pCTR * position effect of the slot

    @property
    def total_clicks(self) -> float:
        return float(self.expected_clicks.sum())

    @property
    def cost_per_click(self) -> float:
        """Revenue over expected clicks: what advertisers pay per click on average."""
        c = self.total_clicks
        return self.total_revenue / c if c else float("nan")

    @property
    def winners_pcoc(self) -> float:
        """Predicted over expected clicks of the shown ads (see the module docstring)."""
        c = self.total_clicks
        return float(self.predicted_clicks.sum()) / c if c and self.predicted_clicks is not None else float("nan")

    @property
    def total_revenue(self) -> float:
        return float(self.revenue.sum())

    @property
    def total_welfare(self) -> float:
        return float(self.welfare.sum())

    @property
    def n_shown(self) -> int:
        return int((self.winners >= 0).sum())


def _as2d(x, name: str, shape=None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise LtrError(f"{name} must be [auctions, candidates], got shape {a.shape}")
    if shape is not None and a.shape != shape:
        raise LtrError(f"{name} has shape {a.shape}, expected {shape}")
    return a


def run_auctions(bids, pctr, true_ctr=None, mask=None, *, slots: int = 1, position_effects=None,
                 reserve=0.0, score_reserve: float = 0.0, threshold: float = 0.0,
                 mechanism: str = "gsp") -> AuctionResult:
    """Run GSP or VCG auctions row by row (vectorised; see the module docstring for every rule).

    ``bids``, ``pctr``, ``true_ctr``, ``mask``: ``[A, K]`` (a 1-D input is one auction); ``reserve``: a
    number or ``[A, K]`` per-click reserves.

    >>> r = run_auctions([[4.0, 3.0, 2.0]], [[0.1, 0.2, 0.1]], slots=2)
    >>> r.winners.tolist(), r.prices.round(6).tolist()
    ([[1, 0]], [[2.0, 2.0]])
    """
    b = _as2d(bids, "bids")
    p = _as2d(pctr, "pctr", b.shape)
    t = p if true_ctr is None else _as2d(true_ctr, "true_ctr", b.shape)
    m = np.ones(b.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool).reshape(b.shape)
    if int(slots) != slots or slots < 1:
        raise LtrError(f"slots must be a positive integer, got {slots!r}")
    slots = int(slots)
    theta = np.ones(slots) if position_effects is None else np.asarray(position_effects, dtype=np.float64)
    if theta.shape != (slots,):
        raise LtrError(f"position_effects needs one value per slot ({slots}), got {theta.shape}")
    if (b[m] < 0).any() or (p[m] < 0).any() or (p[m] > 1).any() or not np.isfinite(b[m]).all():
        raise LtrError("bids must be finite and >= 0, and pCTRs in [0, 1]")
    if mechanism not in ("gsp", "vcg"):
        raise LtrError(f"mechanism must be 'gsp' or 'vcg', got {mechanism!r}")
    try:
        r = np.broadcast_to(np.asarray(reserve, dtype=np.float64), b.shape)
    except ValueError:
        raise LtrError(f"reserve must be a number or one value per candidate {b.shape}, got shape "
                       f"{np.shape(reserve)}") from None
    n_auctions, k = b.shape

    eligible = m & (p > 0) & (p >= threshold) & (b >= r)
    score = b * p
    eligible &= score >= score_reserve
    ranked = np.where(eligible, score, -np.inf)
    # One extra column of -inf so that the last slot always has a "next" ad.
    ranked = np.concatenate([ranked, np.full((n_auctions, slots + 1), -np.inf)], axis=1)
    order = np.argsort(-ranked, axis=1, kind="stable")[:, : slots + 1]
    top = np.take_along_axis(ranked, order, axis=1)
    shown = np.isfinite(top[:, :slots])
    winners = np.where(shown, order[:, :slots], -1)
    next_score = np.where(np.isfinite(top[:, 1:]), top[:, 1:], 0.0)

    idx = np.where(shown, winners, 0)
    w_p = np.take_along_axis(p, idx, axis=1)
    w_b = np.take_along_axis(b, idx, axis=1)
    w_t = np.take_along_axis(t, idx, axis=1)
    w_r = np.take_along_axis(r, idx, axis=1)
    safe_p = np.where(shown, w_p, 1.0)
    if mechanism == "gsp":
        floor = np.maximum(np.maximum(next_score, score_reserve), w_r * w_p)
        prices = np.where(shown, floor / safe_p, 0.0)
    else:
        per_impression = _vcg_payments(next_score, theta)
        vcg = per_impression / (theta[None, :] * safe_p)
        prices = np.where(shown, np.maximum(np.maximum(vcg, w_r), score_reserve / safe_p), 0.0)
    prices = np.minimum(prices, w_b)  # guards rounding only: the floor never exceeds the own score
    clicks = np.where(shown, w_t * theta[None, :], 0.0)
    return AuctionResult(
        winners=winners,
        prices=prices,
        expected_clicks=clicks,
        revenue=(prices * clicks).sum(axis=1),
        welfare=np.where(shown, w_b * clicks, 0.0).sum(axis=1),
        predicted_clicks=np.where(shown, w_p * theta[None, :], 0.0),
    )


def _vcg_payments(next_score: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``[A, S]`` VCG payment per impression of slot s: ``sum_{j>=s} (theta_j - theta_{j+1}) e_(j+2)``,
    where ``next_score[:, j]`` is ``e_(j+2)`` (the score ranked just below slot j, 0 if none)."""
    drops = theta - np.r_[theta[1:], 0.0]  # theta_j - theta_{j+1}
    terms = drops[None, :] * next_score
    return np.cumsum(terms[:, ::-1], axis=1)[:, ::-1]


def second_price(bids, pctr, true_ctr=None, mask=None, *, reserve: float = 0.0, score_reserve: float = 0.0,
                 threshold: float = 0.0) -> AuctionResult:
    """One slot: the winner pays the runner-up's score divided by its own pCTR (GSP with ``slots=1``)."""
    return run_auctions(bids, pctr, true_ctr, mask, slots=1, reserve=reserve, score_reserve=score_reserve,
                        threshold=threshold)


def oracle_comparison(bids, pctr, true_ctr, mask=None, **auction_kwargs) -> dict[str, float]:
    """Run the auctions with ``pctr`` and with the true CTRs (the oracle) and compare.

    Returns revenue and welfare of both, their ratios (model / oracle), ``allocation_agreement`` (share
    of auctions whose slots hold the same ads in the same order), ``slot_agreement`` (share of
    (auction, slot) cells with the same ad, empty slots included) and the number of ads shown.
    """
    res = run_auctions(bids, pctr, true_ctr, mask, **auction_kwargs)
    ora = run_auctions(bids, true_ctr, true_ctr, mask, **auction_kwargs)
    same = res.winners == ora.winners
    return {
        "regret": ora.total_welfare - res.total_welfare,
        "cost_per_click": res.cost_per_click,
        "oracle_cost_per_click": ora.cost_per_click,
        "winners_pcoc": res.winners_pcoc,
        "revenue": res.total_revenue,
        "welfare": res.total_welfare,
        "oracle_revenue": ora.total_revenue,
        "oracle_welfare": ora.total_welfare,
        "revenue_ratio": res.total_revenue / ora.total_revenue if ora.total_revenue else float("nan"),
        "welfare_ratio": res.total_welfare / ora.total_welfare if ora.total_welfare else float("nan"),
        "allocation_agreement": float(same.all(axis=1).mean()),
        "slot_agreement": float(same.mean()),
        "shown": res.n_shown,
        "oracle_shown": ora.n_shown,
    }


def pad_groups(values, offsets, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Lay out a flat per-row array as ``[G, Lmax]`` by group offsets (rows ``offsets[g]:offsets[g+1]``).

    Returns the padded array and its mask; use it to turn per-impression bids / pCTRs of many
    requests into the auction layout.

    >>> v, m = pad_groups([1.0, 2.0, 3.0], [0, 2, 3])
    >>> v.tolist(), m.tolist()
    ([[1.0, 2.0], [3.0, 0.0]], [[True, True], [True, False]])
    """
    v = np.asarray(values)
    off = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(off)
    g, lmax = lengths.shape[0], int(lengths.max()) if lengths.size else 0
    mask = np.arange(lmax)[None, :] < lengths[:, None]
    out = np.full((g, lmax), fill, dtype=np.result_type(v.dtype, np.asarray(fill).dtype))
    out[mask] = v[off[0]:off[-1]]
    return out, mask


def field_reserves(values, table: dict, default: float = 0.0) -> np.ndarray:
    """Per-candidate reserves from one field: ``table[value]`` for each entry of ``values`` (any shape,
    e.g. the ``[A, K]`` site or device of every candidate), ``default`` for values not in the table.

    >>> field_reserves([["a", "b"], ["c", "a"]], {"a": 0.5, "c": 0.2}).tolist()
    [[0.5, 0.0], [0.2, 0.5]]
    """
    v = np.asarray(values)
    out = np.full(v.shape, float(default))
    for key, price in table.items():
        if not np.isfinite(price) or price < 0:
            raise LtrError(f"reserve for {key!r} must be finite and >= 0, got {price!r}")
        out[v == key] = float(price)
    return out


def log_winners(result: AuctionResult, pctr, seed: int = 0) -> dict:
    """The impression log an ad system keeps: one row per shown ad of ``result`` (run with the true
    CTRs), with a click drawn (seeded) from the separable model, ``Bernoulli(theta_s * true_CTR)``.

    Returns flat arrays ``auction``, ``candidate``, ``slot``, ``pctr`` (the ad's pCTR in the top slot),
    ``expected_clicks`` (``theta_s * true_CTR``) and ``click`` (0/1). Calibrating on this log
    (e.g. :class:`~ltr.calibrate.field_calibrators.FieldAwareCalibrator` with the slot as its field,
    predicting at slot 0) fits the winners, whose pCTRs selection pushed up.
    """
    p = _as2d(pctr, "pctr")
    if p.shape[0] != result.winners.shape[0]:
        raise LtrError(f"log_winners: pctr has {p.shape[0]} auctions, the result {result.winners.shape[0]}")
    shown = result.winners >= 0
    a, s = np.nonzero(shown)
    c = result.winners[a, s]
    expected = result.expected_clicks[a, s]
    click = (np.random.default_rng(seed).random(a.shape[0]) < expected).astype(np.float64)
    return {"auction": a, "candidate": c, "slot": s, "pctr": p[a, c], "expected_clicks": expected, "click": click}
