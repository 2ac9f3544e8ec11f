"""The one weighted-logistic solver (:mod:`ltr.calibrate.logistic`) against scipy's L-BFGS-B on the
same objective: plain, bounded, penalised, with entry counts, dense and sparse; and its callers (Platt,
beta, the spline, the binned fits) are the solver on their own design."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from ltr.calibrate.logistic import logistic_objective, weighted_logistic
from ltr.base.errors import LtrError


def _lbfgs(A, pos, n, lower=None, penalty=None):
    """scipy's L-BFGS-B on the objective, to a tight tolerance."""
    k = A.shape[1]
    pen = np.zeros(k) if penalty is None else penalty.copy()
    pen[-1] = 0.0

    def f(t):
        u = A @ t
        q = expit(u)
        value = float(n @ (-log_expit(-u)) - pos @ u + 0.5 * pen @ (t * t))
        return value, np.asarray(A.T @ (n * q - pos)).ravel() + pen * t

    bounds = None if lower is None else [(lo if np.isfinite(lo) else None, None) for lo in lower]
    r = minimize(f, np.zeros(k), jac=True, method="L-BFGS-B", bounds=bounds,
                 options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30})
    return r.x, r.fun


def _data(seed, m=3000, k=4):
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.2, 5.0, k)
    X = rng.normal(size=(m, k)) * scale + rng.normal(size=k)  # unequal scales and means
    beta = rng.normal(size=k) / scale
    y = (rng.random(m) < expit(X @ beta - 1.0)).astype(float)
    return np.column_stack([X, np.ones(m)]), y, beta


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plain_fit_equals_lbfgs(seed):
    A, y, _ = _data(seed)
    n = np.ones(A.shape[0])
    theta = weighted_logistic(A, y)
    ref, ref_f = _lbfgs(A, y, n)
    assert theta == pytest.approx(ref, abs=1e-5)
    assert logistic_objective(theta, A, y) <= ref_f + 1e-9


def test_bounds_hold_and_equal_lbfgs():
    A, y, beta = _data(3)
    lower = np.r_[beta[:2] + 0.5, -np.inf, 0.3, -np.inf]  # the first two bounds bind at the optimum
    theta = weighted_logistic(A, y, lower=lower)
    ref, ref_f = _lbfgs(A, y, np.ones(A.shape[0]), lower=lower)
    assert np.all(theta >= lower)
    assert theta[:2] == pytest.approx(lower[:2], abs=1e-12)  # held exactly at the bound
    assert theta == pytest.approx(ref, abs=1e-5)
    assert logistic_objective(theta, A, y) <= ref_f + 1e-9


def test_counts_penalty_and_sparse_design_equal_lbfgs():
    rng = np.random.default_rng(4)
    m, groups = 4000, 30
    g = rng.integers(0, groups, m)
    x = rng.normal(size=m)
    n = rng.integers(1, 50, m).astype(float)  # entries standing for n rows
    true = rng.normal(0, 0.5, groups)
    pos = rng.binomial(n.astype(int), expit(0.8 * x - 2.0 + true[g])).astype(float)
    onehot = sp.csr_matrix((np.ones(m), (np.arange(m), g)), shape=(m, groups))
    A = sp.hstack([sp.csr_matrix(x[:, None]), onehot, sp.csr_matrix(np.ones((m, 1)))]).tocsr()
    penalty = np.r_[0.0, np.full(groups, 30.0), 0.0]
    lower = np.r_[0.5, np.full(groups, -np.inf), -np.inf]
    theta = weighted_logistic(A, pos, n, lower=lower, penalty=penalty)
    ref, ref_f = _lbfgs(A, pos, n, lower=lower, penalty=penalty)
    assert theta == pytest.approx(ref, abs=1e-5)
    assert logistic_objective(theta, A, pos, n, penalty) <= ref_f + 1e-7
    dense = weighted_logistic(A.toarray(), pos, n, lower=lower, penalty=penalty)  # standardised path
    assert dense == pytest.approx(theta, abs=1e-8)


def test_rows_and_counts_give_one_answer():
    """Entries of ``n`` identical rows with ``pos`` clicks = those rows one by one."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, 500).astype(float)
    y = (rng.random(500) < expit(x - 3)).astype(float)
    rows = weighted_logistic(np.column_stack([x, np.ones(500)]), y)
    u = np.unique(x)
    n = np.array([np.sum(x == v) for v in u], dtype=float)
    pos = np.array([y[x == v].sum() for v in u])
    entries = weighted_logistic(np.column_stack([u, np.ones(u.shape[0])]), pos, n)
    assert entries == pytest.approx(rows, abs=1e-10)


def test_no_silent_answer_before_the_optimum():
    """Stopped before the projected gradient is small, the solver raises instead of returning a
    half-fitted map; on separable data the gradient vanishes only at a slope that sends every row to
    its side (the calibrators refuse such data before fitting)."""
    A, y, _ = _data(7)
    with pytest.raises(LtrError, match="did not converge"):
        weighted_logistic(A, y, max_iter=1)
    x = np.r_[np.linspace(-2, -0.1, 50), np.linspace(0.1, 2, 50)]
    theta = weighted_logistic(np.column_stack([x, np.ones(100)]), (x > 0).astype(float))
    assert theta[0] > 100 and np.all(np.abs(expit(theta[0] * x + theta[1]) - (x > 0)) < 1e-6)


def test_the_calibrators_are_the_solver_on_their_design():
    from ltr.calibrate.calibrators import PlattCalibrator
    from ltr.calibrate.field_calibrators import BetaCalibrator, SplineCalibrator

    rng = np.random.default_rng(6)
    s = rng.normal(-2, 1.2, 5000)
    y = (rng.random(5000) < expit(0.7 * s - 0.4)).astype(float)
    platt = PlattCalibrator(input="score").fit(s, y)
    a, b = weighted_logistic(np.column_stack([s, np.ones(5000)]), y)
    assert (platt.slope_, platt.intercept_) == pytest.approx((a, b), rel=1e-12)
    p = expit(s)
    beta = BetaCalibrator().fit(p, y)
    X = beta._features(p)
    assert [beta.a_, beta.b_, beta.c_] == pytest.approx(weighted_logistic(np.column_stack([X, np.ones(5000)]), y),
                                                        rel=1e-12)
    spline = SplineCalibrator().fit(p, y)
    B = spline._basis(spline._x(p), spline.knots_)
    lower = np.r_[np.full(B.shape[1], spline.min_slope), -np.inf]
    ref, _ = _lbfgs(np.column_stack([B, np.ones(5000)]), y, np.ones(5000), lower=lower)
    assert np.r_[spline.slopes_, spline.intercept_] == pytest.approx(ref, abs=1e-4)
