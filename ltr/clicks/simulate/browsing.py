"""Browsing models beyond PBM and cascade: DBN, UBM, trust bias and click noise; draws and closed forms.

Each model has two halves that the tests hold against each other: a *draw* (vectorised over
sessions, one list of attractions per row) and a *closed form* of the marginal click probability
at each position of a list. Lists are rows of ``[B, K]`` arrays; padding cells carry attraction 0.

Dynamic Bayesian network (Chapelle and Zhang, WWW 2009)
    The user examines position 1; at an examined position r they click with probability ``a_r``
    (attractiveness); after a click they are satisfied with probability ``s_r`` and stop; otherwise
    (no click, or a click without satisfaction) they go on to r + 1 with probability ``gamma``
    (perseverance)::

        P(E_1) = 1,   P(E_{r+1}) = P(E_r) * gamma * (1 - a_r s_r),   P(C_r) = a_r P(E_r)

    With ``gamma = 1`` and ``s = 1`` it is the cascade model.

User browsing model (Dupret and Piwowarski, SIGIR 2008)
    Position r is examined with probability ``G[r, d]`` where d = r - r' is the distance to the
    last click above it (r' = 0 when there was none, so d = r), independently given that history;
    a click needs examination and attraction: ``P(C_r | history) = G[r, d] a_r``. The default
    matrix (:func:`ubm_examination`) is ``G[r, d] = r^-(eta - xi) * d^-xi`` for 1 <= d <= r, with
    0 <= xi <= eta: ``xi = 0`` is PBM (``r^-eta``), ``xi = eta`` a full reset after each click
    (``d^-eta``). The marginal click rate is a forward pass over the position of the last click
    (:func:`ubm_click_rates`, O(K^2) per list).

Trust bias (Agarwal et al., WWW 2019)
    Examination is position based (``theta_r``); an examined item is clicked with probability
    ``eps_plus_r`` when it is relevant and ``eps_minus_r`` when it is not, relevance being a
    Bernoulli draw with probability ``rho(rel) = g(rel) / g(max_label)``::

        P(C_r) = theta_r * (eps_minus_r + (eps_plus_r - eps_minus_r) * rho)  =  alpha_r rho + beta_r

    which is the affine form that Vardasbi et al. (CIKM 2020) correct for:
    ``alpha_r = theta_r (eps_plus_r - eps_minus_r)``, ``beta_r = theta_r eps_minus_r``.
    Defaults: ``eps_plus_r = 1``, ``eps_minus_r = 0.65 / r`` (users trust the top of the list).

Click noise
    After any model, each shown item gets an extra spurious click with probability ``nu``
    independently of the user's browsing (a click that was already there stays):
    ``P(C_r) = p_r + nu (1 - p_r)``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ltr.base.errors import LtrError

__all__ = [
    "dbn_click_rates",
    "draw_dbn",
    "ubm_examination",
    "check_ubm_matrix",
    "ubm_click_rates",
    "draw_ubm",
    "trust_curves",
    "trust_affine",
    "trust_click_rates",
    "draw_trust",
    "add_noise",
    "noise_click_rates",
]


# ---------------------------------------------------------------------------------------------- DBN
def dbn_click_rates(a: Any, s: Any, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """``(P(C_r), P(E_r))`` of DBN lists ``a``, ``s`` ([..., K]) with perseverance ``gamma``.

    >>> c, e = dbn_click_rates(np.array([0.5, 0.5]), np.array([1.0, 1.0]), 0.8)
    >>> e.tolist(), c.tolist()   # E_2 = 0.8 * (1 - 0.5 * 1)
    ([1.0, 0.4], [0.5, 0.2])
    """
    a = np.asarray(a, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    step = gamma * (1.0 - a * s)
    ones = np.ones(a.shape[:-1] + (1,))
    exam = np.concatenate([ones, np.cumprod(step, axis=-1)[..., :-1]], axis=-1)
    return a * exam, exam


def draw_dbn(rng: np.random.Generator, a: np.ndarray, s: np.ndarray, gamma: float, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DBN clicks ``[B, K]`` (bool) and the examination probability of each cell (the closed form)."""
    u = rng.random((3,) + a.shape)  # click, satisfaction, perseverance draws
    browsing = np.ones(len(a), dtype=bool)
    click = np.zeros(a.shape, dtype=bool)
    for r in range(a.shape[1]):
        c = browsing & (u[0, :, r] < a[:, r]) & valid[:, r]
        click[:, r] = c
        satisfied = c & (u[1, :, r] < s[:, r])
        browsing = browsing & ~satisfied & (u[2, :, r] < gamma)
    return click, dbn_click_rates(a, s, gamma)[1]


# ---------------------------------------------------------------------------------------------- UBM
def ubm_examination(n_positions: int, eta: float = 1.0, xi: float | None = None) -> np.ndarray:
    """Default UBM examination ``G [K, K]``: ``G[r-1, d-1] = r^-(eta - xi) d^-xi`` for d <= r, else 0.

    ``xi`` defaults to ``eta / 2``; it must lie in ``[0, eta]`` (so that every entry is <= 1).

    >>> ubm_examination(2, eta=1.0, xi=1.0).tolist()   # a full reset: G = 1/d
    [[1.0, 0.0], [1.0, 0.5]]
    """
    xi = eta / 2.0 if xi is None else float(xi)
    if eta < 0 or not 0.0 <= xi <= eta:
        raise LtrError(f"UBM needs eta >= 0 and 0 <= xi <= eta, got eta={eta}, xi={xi}")
    r = np.arange(1, n_positions + 1, dtype=np.float64)[:, None]
    d = np.arange(1, n_positions + 1, dtype=np.float64)[None, :]
    g = r ** -(eta - xi) * d ** -xi
    return np.where(d <= r, g, 0.0)


def check_ubm_matrix(g: Any, k: int) -> np.ndarray:
    """A user's UBM matrix cut to ``[k, k]``; entries in [0, 1] (the part above the diagonal is unused)."""
    g = np.asarray(g, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] < k or g.shape[1] < k:
        raise LtrError(f"the UBM examination matrix must be at least {k} x {k}, got shape {g.shape}")
    g = np.tril(g[:k, :k])
    if ((g < 0) | (g > 1)).any() or not np.isfinite(g).all():
        raise LtrError("UBM examination probabilities must lie in [0, 1]")
    return g


def ubm_click_rates(a: Any, g: np.ndarray) -> np.ndarray:
    """Marginal ``P(C_r)`` of UBM lists ``a`` ([B, K] or [K]) under examination ``g`` [K, K].

    Forward pass over ``L`` = the position of the last click so far (0 = none):
    ``P(C_r) = sum_l P(L = l) G[r, r - l] a_r``; then ``P(L = r) = P(C_r)`` and every other
    ``P(L = l)`` is multiplied by ``1 - G[r, r - l] a_r``.

    >>> ubm_click_rates(np.array([1.0, 1.0]), ubm_examination(2, 1.0, 1.0)).tolist()   # click, then d = 1
    [[1.0, 1.0]]
    """
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b, k = a.shape
    state = np.zeros((b, k + 1))
    state[:, 0] = 1.0
    out = np.zeros((b, k))
    for r in range(1, k + 1):
        d = r - np.arange(r)  # distance from each possible last-click position 0..r-1
        p = g[r - 1, d - 1][None, :] * a[:, [r - 1]]
        out[:, r - 1] = (state[:, :r] * p).sum(axis=1)
        state[:, :r] *= 1.0 - p
        state[:, r] = out[:, r - 1]
    return out


def draw_ubm(rng: np.random.Generator, a: np.ndarray, g: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UBM clicks ``[B, K]`` and each cell's examination probability given the session's earlier clicks."""
    u = rng.random(a.shape)
    last = np.zeros(len(a), dtype=np.int64)
    click = np.zeros(a.shape, dtype=bool)
    exam = np.zeros(a.shape)
    for r in range(1, a.shape[1] + 1):
        e = g[r - 1, r - last - 1]
        exam[:, r - 1] = e
        c = (u[:, r - 1] < e * a[:, r - 1]) & valid[:, r - 1]
        click[:, r - 1] = c
        last = np.where(c, r, last)
    return click, exam


# ---------------------------------------------------------------------------------------------- trust bias
def _curve(value: float | Sequence[float] | None, k: int, default, name: str) -> np.ndarray:
    r = np.arange(1, k + 1, dtype=np.float64)
    if value is None:
        out = default(r)
    elif np.ndim(value) == 0:
        out = np.full(k, float(value))
    else:
        out = np.asarray(value, dtype=np.float64).ravel()
        if len(out) < k:
            raise LtrError(f"{name} has {len(out)} positions, {k} are shown")
        out = out[:k]
    if ((out < 0) | (out > 1)).any() or not np.isfinite(out).all():
        raise LtrError(f"{name} must lie in [0, 1]")
    return out


def trust_curves(k: int, eps_plus=None, eps_minus=None) -> tuple[np.ndarray, np.ndarray]:
    """``(eps_plus [k], eps_minus [k])``: a scalar, a curve, or the defaults ``1`` and ``0.65 / r``.

    >>> [c.tolist() for c in trust_curves(2)]
    [[1.0, 1.0], [0.65, 0.325]]
    """
    plus = _curve(eps_plus, k, lambda r: np.ones_like(r), "trust eps_plus")
    minus = _curve(eps_minus, k, lambda r: 0.65 / r, "trust eps_minus")
    if (minus > plus).any():
        raise LtrError("trust bias needs eps_minus <= eps_plus at every position")
    return plus, minus


def trust_affine(theta: np.ndarray, eps_plus: np.ndarray, eps_minus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, beta)`` of ``P(C_r) = alpha_r rho + beta_r``: ``theta (eps_plus - eps_minus)``, ``theta eps_minus``.

    >>> [v.tolist() for v in trust_affine(np.array([1.0, 0.5]), np.array([1.0, 1.0]), np.array([0.2, 0.1]))]
    [[0.8, 0.45], [0.2, 0.05]]
    """
    theta = np.asarray(theta, dtype=np.float64)
    return theta * (eps_plus - eps_minus), theta * eps_minus


def trust_click_rates(rho: Any, theta: np.ndarray, eps_plus: np.ndarray, eps_minus: np.ndarray) -> np.ndarray:
    """``P(C_r) = theta_r (eps_minus_r + (eps_plus_r - eps_minus_r) rho_r)`` for lists ``rho`` [..., K]."""
    alpha, beta = trust_affine(theta, eps_plus, eps_minus)
    return alpha * np.asarray(rho, dtype=np.float64) + beta


def draw_trust(rng, rho, theta, eps_plus, eps_minus, valid) -> tuple[np.ndarray, np.ndarray]:
    """Trust-bias clicks ``[B, K]`` (examination, relevance and click drawn apart) and ``theta`` per cell."""
    u = rng.random((3,) + rho.shape)
    examined = u[0] < theta[None, :]
    relevant = u[1] < rho
    p_click = np.where(relevant, eps_plus[None, :], eps_minus[None, :])
    return examined & (u[2] < p_click) & valid, np.broadcast_to(theta, rho.shape)


# ---------------------------------------------------------------------------------------------- noise
def add_noise(rng: np.random.Generator, click: np.ndarray, nu: float, valid: np.ndarray) -> np.ndarray:
    """``click`` with an extra independent click of probability ``nu`` on every valid cell."""
    if nu <= 0:
        return click
    return click | ((rng.random(click.shape) < nu) & valid)


def noise_click_rates(p: Any, nu: float) -> np.ndarray:
    """``p + nu (1 - p)``: the click rate after click noise.

    >>> noise_click_rates(np.array([0.0, 0.5, 1.0]), 0.1).tolist()
    [0.1, 0.55, 1.0]
    """
    p = np.asarray(p, dtype=np.float64)
    return p + nu * (1.0 - p)
