"""Trust bias from the logs, by intervention harvesting: the affine click model's alpha and beta by position.

Under trust bias (Agarwal, Wang, Li, Bendersky and Najork, WWW 2019; Vardasbi, Oosterhuis and de Rijke, CIKM
2020) an examined item is clicked with a probability that depends on its position as well as on its relevance,
so a click at position k follows an affine model of relevance::

    P(click | d at k) = alpha_k rho(d) + beta_k,   alpha_k = theta_k (eps+_k - eps-_k),   beta_k = theta_k eps-_k

Clicks cannot tell a relevance scale apart from ``alpha`` and ``beta`` (any increasing affine map of rho fits
as well), so the estimate is stated on the scale of position 1: with ``P1(d) = alpha_1 rho(d) + beta_1``, the
click probability of d at the top,

    P(click | d at k) = a_k P1(d) + b_k,   a_k = alpha_k / alpha_1,   b_k = beta_k - a_k beta_1,   a_1 = 1, b_1 = 0

and the affine estimator's corrected click ``(c - b_k) / a_k`` estimates ``P1(d)``: an increasing affine map of
relevance, which ranks items as relevance does.

The fit uses the harvested (query, document) keys (:mod:`ltr.clicks.propensities.harvesting`): every key shown
at two or more positions gives, at each, its impressions ``n`` and clicks ``c``. With one latent ``P1`` per key,
the binomial likelihood ``sum_{keys, positions} c log(a_k P1 + b_k) + (n - c) log(1 - a_k P1 - b_k)`` is
maximised by alternating Newton steps: each key's ``P1`` given the lines, then each position's line
``(a_k, b_k)`` given the keys. A position's line is pinned by keys of different relevance seen there and
elsewhere, which the logs of several rankers give (they put documents of every kind at every position); the
start is the position-based fit (``a_k`` = AllPairs' propensity, ``b_k = 0``). Positions that no clicked swap
links to position 1 are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["TrustEstimate", "estimate_trust", "trust_from_file"]

_EPS = 1e-6


@dataclass(frozen=True)
class TrustEstimate:
    """``alpha`` [K] (``a_k``, 1 at position 1) and ``beta`` [K] (``b_k``, 0 at position 1) on the scale of position
    1 (module docstring), NaN at the positions the harvested keys do not identify; ``keys`` the keys fitted."""

    alpha: np.ndarray
    beta: np.ndarray
    identified: np.ndarray
    keys: int
    iterations: int

    def as_rows(self) -> list[dict]:
        return [{"position": r + 1, "alpha": float(a), "beta": float(b), "identified": bool(k)}
                for r, (a, b, k) in enumerate(zip(self.alpha, self.beta, self.identified))]


def _key_step(p1, a, b, n, c):
    """One Newton step of every key's P1 given the lines, kept where every shown position's rate is in (0, 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(n > 0, (_EPS - b) / a, -np.inf).max(axis=1)
        hi = np.where(n > 0, (1 - _EPS - b) / a, np.inf).min(axis=1)
    p = np.clip(a * p1[:, None] + b, _EPS, 1 - _EPS)
    grad = (a * (c / p - (n - c) / (1 - p))).sum(axis=1)
    hess = -(a * a * (c / p ** 2 + (n - c) / (1 - p) ** 2)).sum(axis=1)
    step = np.where(hess < 0, p1 - grad / np.minimum(hess, -1e-12), p1)
    return np.clip(step, np.maximum(lo, _EPS), np.minimum(hi, 1 - _EPS))


def _line_step(p1, a, b, n, c):
    """One damped Newton step of every position's line (a_k, b_k) given the keys (position 1 stays 1, 0)."""
    for k in range(1, len(a)):
        on = n[:, k] > 0
        x, nk, ck = p1[on], n[on, k], c[on, k]
        p = np.clip(a[k] * x + b[k], _EPS, 1 - _EPS)
        w1, w2 = ck / p - (nk - ck) / (1 - p), ck / p ** 2 + (nk - ck) / (1 - p) ** 2
        g = np.array([(w1 * x).sum(), w1.sum()])
        h = -np.array([[(w2 * x * x).sum(), (w2 * x).sum()], [(w2 * x).sum(), w2.sum()]])
        try:
            delta = -np.linalg.solve(h - 1e-9 * np.eye(2), g)
        except np.linalg.LinAlgError:
            continue
        for scale in (1.0, 0.5, 0.25, 0.125, 0.0625):  # stay where every key's rate is a probability
            na, nb = a[k] + scale * delta[0], b[k] + scale * delta[1]
            q = na * x + nb
            if na > 0 and q.min() > 0 and q.max() < 1:
                a[k], b[k] = na, nb
                break
    return a, b


def estimate_trust(counts, *, iterations: int = 300, tol: float = 1e-10) -> TrustEstimate:
    """``(a_k, b_k)`` by the likelihood of the module docstring from harvested counts
    (:class:`ltr.clicks.propensities.harvesting.HarvestedCounts` with impressions)."""
    from ltr.clicks.propensities.harvesting import _check_harvest, allpairs_estimate, linked_positions, pair_statistics

    if counts.impressions is None:
        raise LtrError("trust bias: the harvested counts carry no impressions (use harvest_counts)")
    cs, ss = pair_statistics(counts)
    _check_harvest(cs, ss, adjacent=False)  # nothing harvested, or nothing linked to position 1: refused
    known = linked_positions(cs, ss)
    idx = np.flatnonzero(known)
    if len(idx) < 2:
        raise LtrError("trust bias: no clicked swap links position 1 to another position: nothing is identified")
    n = counts.impressions[:, idx]
    c = counts.rate[:, idx] * n
    keep = (n > 0).sum(axis=1) >= 2  # a key seen at one position only fits itself and says nothing of the lines
    n, c = n[keep], c[keep]
    theta = allpairs_estimate(cs[np.ix_(idx, idx)], ss[np.ix_(idx, idx)])
    a, b = theta.copy(), np.zeros(len(idx))
    with np.errstate(divide="ignore", invalid="ignore"):
        p1 = np.clip(np.nansum(np.where(n > 0, c / n / a, np.nan), axis=1) / (n > 0).sum(axis=1), 0.01, 0.99)
    last, it = -np.inf, 0
    for it in range(1, iterations + 1):
        p1 = _key_step(p1, a, b, n, c)
        a, b = _line_step(p1, a, b, n, c)
        p = np.clip(a * p1[:, None] + b, _EPS, 1 - _EPS)
        value = float((c * np.log(p) + (n - c) * np.log1p(-p))[n > 0].sum())
        if abs(value - last) <= tol * abs(value):
            break
        last = value
    alpha, beta = np.full(len(known), np.nan), np.full(len(known), np.nan)
    alpha[idx], beta[idx] = a, b
    return TrustEstimate(alpha, beta, known, int(keep.sum()), it)


def trust_from_file(path) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha [K], beta [K])`` from a JSON file: ``{"alpha": [...], "beta": [...]}`` or the ``rows`` of ``ltr
    clicks estimate --method harvest --trust --json`` (null for an unidentified position)."""
    import json

    from ltr.base.checks import input_file

    path = input_file(path, "--affine-file")
    try:
        doc = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        raise LtrError(f"--affine-file {path}: not valid JSON ({exc})") from None
    if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
        rows = sorted(doc["rows"], key=lambda r: r.get("position", 0))
        doc = {"alpha": [r.get("alpha") for r in rows], "beta": [r.get("beta") for r in rows]}
    if not (isinstance(doc, dict) and isinstance(doc.get("alpha"), list) and isinstance(doc.get("beta"), list)
            and len(doc["alpha"]) == len(doc["beta"]) and doc["alpha"]):
        raise LtrError(f"--affine-file {path}: expected {{\"alpha\": [...], \"beta\": [...]}} of one length, or the JSON "
                       "of ltr clicks estimate --method harvest --trust")
    try:
        alpha = np.array([np.nan if v is None else float(v) for v in doc["alpha"]])
        beta = np.array([np.nan if v is None else float(v) for v in doc["beta"]])
    except (TypeError, ValueError):
        raise LtrError(f"--affine-file {path}: alpha and beta must be numbers (or null)") from None
    if not (np.isfinite(alpha[0]) and np.isfinite(beta[0])) or (np.isfinite(alpha) & (alpha <= 0)).any():
        raise LtrError(f"--affine-file {path}: alpha must be > 0 and position 1 must have both values")
    return alpha, beta
