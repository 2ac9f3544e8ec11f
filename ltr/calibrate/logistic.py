"""The one weighted-logistic solver every calibrator fits with (Platt, beta, the spline, the binned fits
of ``--stream`` and the joint field fit).

.. math::

    \\min_\\theta \\; \\sum_e \\big[n_e \\,\\mathrm{softplus}(a_e \\theta) - \\mathrm{pos}_e \\, a_e \\theta\\big]
    + \\tfrac12 \\sum_j \\lambda_j \\theta_j^2 \\quad \\text{subject to } \\theta \\ge \\text{lower}

``n_e`` rows sharing the features ``a_e`` with ``pos_e`` positives (a row-level fit: ``n = 1``,
``pos = y``; ``pos`` may be fractional, as Platt's smoothed targets are). The last column of ``A`` is
the intercept's: free and unpenalised. ``A`` is a dense array or a scipy sparse matrix.

Method: projected Newton steps with step halving. A coefficient at its lower bound whose gradient
pushes it further out is held there for the step; the rest take the Newton step of their block of
the Hessian ``A^T diag(n q (1 - q)) A + diag(lambda)``. It stops when the projected gradient is at
most ``tol`` per row (``tol * sum n``), or when no step length down to 1e-12 lowers the objective (the
optimum to float precision). Dense columns are centred and scaled first (bounds and penalties mapped
along), which keeps the steps well scaled; the coefficients are mapped back.

It is tested against scipy's L-BFGS-B on the same objective, bounds and penalties included
(``tests/test_logistic_solver.py``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, log_expit

from ltr.errors import LtrError

__all__ = ["weighted_logistic", "logistic_objective"]


def logistic_objective(theta, A, pos, n=None, penalty=None) -> float:
    """The objective of :func:`weighted_logistic` at ``theta`` (for tests and line searches)."""
    u = A @ theta
    n = np.ones(u.shape[0]) if n is None else n
    value = float(n @ (-log_expit(-u)) - pos @ u)
    return value if penalty is None else value + 0.5 * float(penalty @ (theta * theta))


def _standardise(A, n, lower, penalty):
    """Centre and scale the dense non-intercept columns (n-weighted); returns what maps back."""
    total = float(n.sum())
    X = A[:, :-1]
    mu = (n @ X) / total
    sd = np.sqrt(np.maximum((n @ (X * X)) / total - mu * mu, 0.0))
    sd[~(sd > 1e-300)] = 1.0
    Z = np.column_stack([(X - mu) / sd, np.ones(A.shape[0])])
    lower_z = np.r_[lower[:-1] * sd, lower[-1]]
    pen_z = np.r_[penalty[:-1] / (sd * sd), 0.0]
    return Z, lower_z, pen_z, mu, sd


def _gram(A, w):
    """``A^T diag(w) A`` as a dense array."""
    if hasattr(A, "tocsr"):
        return np.asarray((A.T @ A.multiply(w[:, None])).todense())
    return (A * w[:, None]).T @ A


# long: one Newton loop with its projection, line search and stopping rules, read in one piece
def weighted_logistic(A, pos, n=None, *, lower=None, penalty=None, start=None, max_iter: int = 200,
                      tol: float = 1e-10) -> np.ndarray:
    """``theta`` minimising the objective of the module docstring (``lower``: ``-inf`` for free
    coefficients; ``penalty``: ``lambda_j >= 0`` per coefficient, the intercept's ignored; ``start``: a
    first ``theta``, else bounded coefficients start at ``max(lower, 1)``, free ones at 0, the intercept at
    the log-odds of the positive rate). Raises :class:`LtrError` when the coefficients run off (the data
    is (nearly) separable) or ``max_iter`` steps do not reach the optimum."""
    sparse = hasattr(A, "tocsr")
    A = A.tocsr() if sparse else np.asarray(A, dtype=np.float64)
    m, k = A.shape
    pos = np.asarray(pos, dtype=np.float64)
    n = np.ones(m) if n is None else np.asarray(n, dtype=np.float64)
    lower = np.full(k, -np.inf) if lower is None else np.asarray(lower, dtype=np.float64).copy()
    penalty = np.zeros(k) if penalty is None else np.asarray(penalty, dtype=np.float64).copy()
    lower[-1], penalty[-1] = -np.inf, 0.0
    total = float(n.sum())
    if start is None:
        theta = np.where(np.isfinite(lower), np.maximum(lower, 1.0), 0.0)
        rate = float(np.clip(pos.sum() / total, 1e-12, 1 - 1e-12))
        theta[-1] = math.log(rate / (1 - rate)) - float(n @ (A[:, :-1] @ theta[:-1])) / total
    else:
        theta = np.maximum(np.asarray(start, dtype=np.float64).copy(), lower)
    if not sparse and k > 1:
        Z, lower_z, pen_z, mu, sd = _standardise(A, n, lower, penalty)
        tz = np.r_[theta[:-1] * sd, theta[-1] + float(mu @ theta[:-1])]
        tz = _newton(Z, pos, n, lower_z, pen_z, tz, max_iter, tol * total)
        coef = tz[:-1] / sd
        theta = np.r_[np.maximum(coef, lower[:-1]), tz[-1] - float(mu @ coef)]
    else:
        theta = _newton(A, pos, n, lower, penalty, theta, max_iter, tol * total)
    return theta


def _newton(A, pos, n, lower, penalty, theta, max_iter: int, gtol: float) -> np.ndarray:
    current = logistic_objective(theta, A, pos, n, penalty)
    k = theta.shape[0]
    for _ in range(max_iter):
        q = expit(A @ theta)
        grad = A.T @ (n * q - pos) + penalty * theta
        free = ~((theta <= lower + 1e-15) & (grad > 0))
        if np.max(np.abs(grad[free])) <= gtol:
            return theta
        H = _gram(A, n * q * (1.0 - q))[np.ix_(free, free)]
        H[np.diag_indices_from(H)] += penalty[free] + 1e-12 * max(float(n.sum()), 1.0)
        step = np.zeros(k)
        step[free] = np.linalg.solve(H, grad[free])
        lr = 1.0
        while lr > 1e-12:
            cand = np.maximum(theta - lr * step, lower)
            value = logistic_objective(cand, A, pos, n, penalty)
            if value <= current:
                break
            lr *= 0.5
        if lr <= 1e-12:
            return theta  # no step lowers the objective: the optimum to float precision
        if np.max(np.abs(cand)) > 1e6:
            break
        theta, current = cand, value
    raise LtrError("logistic fit did not converge: the fit data is (nearly) separable by the features")
