"""The one weighted-logistic solver every calibrator fits with (Platt, beta, the spline, the binned fits
of ``--stream`` and the joint field fit).

.. math::

    \\min_\\theta \\; \\sum_e \\big[n_e \\,\\mathrm{softplus}(a_e \\theta) - \\mathrm{pos}_e \\, a_e \\theta\\big]
    + \\tfrac12 \\sum_j \\lambda_j \\theta_j^2 \\quad \\text{subject to } \\theta \\ge \\text{lower}

``n_e`` rows sharing the features ``a_e`` with ``pos_e`` positives (a row-level fit: ``n = 1``,
``pos = y``; ``pos`` may be fractional, as Platt's smoothed targets are). The last column of ``A`` is
the intercept's: free and unpenalised. ``A`` is a dense array, a scipy sparse matrix, or a
:class:`CodesDesign` (dense columns and categorical fields) or :class:`InteractionDesign` (a basis
per value of a field): the joint field fit's designs, whose Gram matrices come from bincounts.

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

from ltr.base.errors import LtrError

__all__ = ["weighted_logistic", "logistic_objective", "CodesDesign", "InteractionDesign"]


class CodesDesign:
    """The design ``[D | one-hot(codes_1) | ... | one-hot(codes_F) | 1]`` without building it: dense
    columns ``D`` (``[m, d]``, e.g. a spline basis), one block of indicator columns per categorical field
    (``codes_f`` in ``0 .. sizes_f - 1``), the intercept last. Products and the Gram matrix
    ``A^T diag(w) A`` come from ``bincount``s, block by block (the field-aware fits' Hessian), so a
    Newton step costs a few passes over the rows however many values the fields have."""

    def __init__(self, dense, codes, sizes):
        m = len(codes[0]) if codes else len(dense)
        # columns stored as contiguous rows: bincount over a strided column is several times slower
        self.denseT = np.ascontiguousarray(np.asarray(dense, dtype=np.float64).reshape(m, -1).T)
        self.codes = [np.asarray(c, dtype=np.int64) for c in codes]
        self.sizes = [int(k) for k in sizes]
        d = self.denseT.shape[0]
        self.starts = np.r_[0, np.cumsum(self.sizes)].astype(int) + d
        self.shape = (m, d + int(sum(self.sizes)) + 1)
        self._buffer = None  # the weighted columns of gram(), reused: a fresh array each step costs page faults

    def __matmul__(self, theta):
        d = self.denseT.shape[0]
        u = theta[:d] @ self.denseT + theta[-1]
        for j, c in enumerate(self.codes):
            u = u + theta[self.starts[j]:self.starts[j + 1]][c]
        return u

    def rmatvec(self, r):
        """``A^T r``."""
        parts = [self.denseT @ r] + [np.bincount(c, weights=r, minlength=k) for c, k in zip(self.codes, self.sizes)]
        return np.concatenate(parts + [[r.sum()]])

    def gram(self, w):
        """``A^T diag(w) A`` (dense)."""
        d, k = self.denseT.shape[0], self.shape[1]
        G = np.zeros((k, k))
        if self._buffer is None:
            self._buffer = np.empty_like(self.denseT)
        DwT = np.multiply(self.denseT, w, out=self._buffer)
        G[:d, :d] = DwT @ self.denseT.T
        G[:d, -1] = G[-1, :d] = DwT.sum(axis=1)
        G[-1, -1] = w.sum()
        for a, ca in enumerate(self.codes):
            sa, ea, ka = self.starts[a], self.starts[a + 1], self.sizes[a]
            cross = np.stack([np.bincount(ca, weights=DwT[j], minlength=ka) for j in range(d)]) if d else np.zeros((0, ka))
            G[:d, sa:ea], G[sa:ea, :d] = cross, cross.T
            diag = np.bincount(ca, weights=w, minlength=ka)
            G[sa:ea, -1] = G[-1, sa:ea] = diag
            G[np.arange(sa, ea), np.arange(sa, ea)] = diag
            for b in range(a + 1, len(self.codes)):
                cb, sb, eb, kb = self.codes[b], self.starts[b], self.starts[b + 1], self.sizes[b]
                block = np.bincount(ca * kb + cb, weights=w, minlength=ka * kb).reshape(ka, kb)
                G[sa:ea, sb:eb], G[sb:eb, sa:ea] = block, block.T
        return G


class InteractionDesign:
    """The design ``[phi(x) * 1(code = a) for every value a | 1]``: per value of one field, its own
    copy of the basis ``phi`` (``[m, p]``; rows with code -1 have none), the intercept last. Column
    ``a * p + c`` is segment c of value a. The Gram matrix is block diagonal over the values (plus the
    intercept's row), built from ``p (p + 1) / 2 + p + 1`` bincounts."""

    def __init__(self, basis, codes, size: int):
        basis = np.asarray(basis, dtype=np.float64)
        codes = np.asarray(codes, dtype=np.int64)
        self.m = basis.shape[0]
        self.rows = np.flatnonzero(codes >= 0)
        self.codes, self.size, self.p = codes[self.rows], int(size), basis.shape[1]
        self.basisT = np.ascontiguousarray(basis[self.rows].T)  # [p, rows with a value], contiguous rows
        self.shape = (self.m, self.size * self.p + 1)

    def __matmul__(self, theta):
        G = theta[:-1].reshape(self.size, self.p)
        u = np.full(self.m, float(theta[-1]))
        u[self.rows] += np.einsum("ji,ij->i", self.basisT, G[self.codes])
        return u

    def rmatvec(self, r):
        """``A^T r``."""
        rr = r[self.rows]
        out = np.stack([np.bincount(self.codes, weights=rr * self.basisT[c], minlength=self.size) for c in range(self.p)],
                       axis=1).ravel()
        return np.r_[out, r.sum()]

    def gram(self, w):
        """``A^T diag(w) A`` (dense)."""
        k, p = self.shape[1], self.p
        G = np.zeros((k, k))
        c, ww, B = self.codes, w[self.rows], self.basisT
        idx = np.arange(self.size) * p
        for i in range(p):
            wi = ww * B[i]
            for j in range(i, p):
                v = np.bincount(c, weights=wi * B[j], minlength=self.size)
                G[idx + i, idx + j] = G[idx + j, idx + i] = v
            G[idx + i, -1] = G[-1, idx + i] = np.bincount(c, weights=wi, minlength=self.size)
        G[-1, -1] = w.sum()
        return G


def _rmatvec(A, r):
    return A.rmatvec(r) if isinstance(A, (CodesDesign, InteractionDesign)) else A.T @ r


def logistic_objective(theta, A, pos, n=None, penalty=None, offset=None) -> float:
    """The objective of :func:`weighted_logistic` at ``theta`` (for tests and line searches)."""
    u = A @ theta if offset is None else A @ theta + offset
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
    if isinstance(A, (CodesDesign, InteractionDesign)):
        return A.gram(w)
    if hasattr(A, "tocsr"):
        return np.asarray((A.T @ A.multiply(w[:, None])).todense())
    return (A * w[:, None]).T @ A


# long: one Newton loop with its projection, line search and stopping rules, read in one piece
def weighted_logistic(A, pos, n=None, *, lower=None, penalty=None, start=None, offset=None, max_iter: int = 200,
                      tol: float = 1e-10) -> np.ndarray:
    """``theta`` minimising the objective of the module docstring (``lower``: ``-inf`` for free
    coefficients; ``penalty``: ``lambda_j >= 0`` per coefficient, the intercept's ignored; ``start``: a
    first ``theta``, else bounded coefficients start at ``max(lower, 1)``, free ones at 0, the intercept at
    the log-odds of the positive rate; ``offset``: a fixed term added to every entry's ``a_e theta``, as
    an earlier stage's logit). Raises :class:`LtrError` when the coefficients run off (the data
    is (nearly) separable) or ``max_iter`` steps do not reach the optimum."""
    structured = isinstance(A, (CodesDesign, InteractionDesign))
    sparse = hasattr(A, "tocsr") or structured
    A = A if structured else A.tocsr() if sparse else np.asarray(A, dtype=np.float64)
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
        rest = A @ np.r_[theta[:-1], 0.0]
        theta[-1] = 0.0 if offset is not None else math.log(rate / (1 - rate)) - float(n @ rest) / total
    else:
        theta = np.maximum(np.asarray(start, dtype=np.float64).copy(), lower)
    if not sparse and k > 1:
        Z, lower_z, pen_z, mu, sd = _standardise(A, n, lower, penalty)
        tz = np.r_[theta[:-1] * sd, theta[-1] + float(mu @ theta[:-1])]
        tz = _newton(Z, pos, n, lower_z, pen_z, tz, max_iter, tol * total, offset)
        coef = tz[:-1] / sd
        theta = np.r_[np.maximum(coef, lower[:-1]), tz[-1] - float(mu @ coef)]
    else:
        theta = _newton(A, pos, n, lower, penalty, theta, max_iter, tol * total, offset)
    return theta


def _newton(A, pos, n, lower, penalty, theta, max_iter: int, gtol: float, offset=None) -> np.ndarray:
    from ltr.base.threads import one_blas_thread

    with one_blas_thread():  # the Newton systems are small: a few hundred unknowns
        return _newton_steps(A, pos, n, lower, penalty, theta, max_iter, gtol, offset)


def _linear(A, theta, offset):
    return A @ theta if offset is None else A @ theta + offset


def _objective_at(u, theta, pos, n, penalty) -> float:
    """The objective from the linear predictor ``u`` already at hand (one pass over the rows saved)."""
    return float(n @ (-log_expit(-u)) - pos @ u) + 0.5 * float(penalty @ (theta * theta))


def _newton_steps(A, pos, n, lower, penalty, theta, max_iter: int, gtol: float, offset=None) -> np.ndarray:
    u = _linear(A, theta, offset)
    current = _objective_at(u, theta, pos, n, penalty)
    k = theta.shape[0]
    for _ in range(max_iter):
        q = expit(u)
        grad = _rmatvec(A, n * q - pos) + penalty * theta
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
            u_cand = _linear(A, cand, offset)
            value = _objective_at(u_cand, cand, pos, n, penalty)
            if value <= current:
                break
            lr *= 0.5
        if lr <= 1e-12:
            return theta  # no step lowers the objective: the optimum to float precision
        if np.max(np.abs(cand)) > 1e6:
            break
        theta, u, current = cand, u_cand, value
    raise LtrError("logistic fit did not converge: the fit data is (nearly) separable by the features")
