"""Statistics for comparing rankers: confidence intervals, paired tests, multiple-comparison control.

Every function takes plain arrays of per-unit values (per query, per seed, per user) and returns a
small frozen dataclass. Randomised procedures take a ``seed`` and are deterministic given it.

- :func:`bootstrap_ci`: bootstrap interval of a mean. ``method="percentile"`` is computed here,
  vectorised in batches (the resampling and the quantile rule are the ones of
  ``scipy.stats.bootstrap``, so with the same seed and batch size the two agree exactly);
  ``"basic"`` and ``"BCa"`` are delegated to ``scipy.stats.bootstrap``.
- :func:`t_interval`: Student-t interval of a mean, ``mean +- t_{1-a/2, n-1} * s / sqrt(n)``; the
  right interval for a handful of seeds.
- :func:`normal_interval`: normal-approximation interval ``center +- z_{1-a/2} * se`` from a given
  estimate and standard error (vectorised; e.g. propensity ratios, IPS means).
- :func:`paired_t_test`: ``scipy.stats.ttest_rel`` on the pairs, with NaN pairs dropped.
- :func:`paired_bootstrap_test`: two-sided bootstrap test of a zero mean difference over the pairs.
- :func:`paired_randomization_test`: two-sided sign-flip (Fisher) randomization test of a zero mean
  difference; exact (all 2^n sign vectors) for small n, seeded Monte Carlo otherwise.
- :func:`holm`: Holm-Bonferroni step-down adjusted p-values; :func:`bonferroni`; :func:`adjust_p_values`.

NaN policy (all functions): a NaN marks a unit without a value (for example a query with no
relevant item under ``empty=skip``). One-sample functions drop NaN values; paired functions drop a
pair when either side is NaN. ``n`` in each result counts the units actually used.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ConfidenceInterval",
    "PairedTestResult",
    "bootstrap_ci",
    "bootstrap_means",
    "t_interval",
    "normal_interval",
    "paired_t_test",
    "paired_bootstrap_test",
    "paired_randomization_test",
    "holm",
    "bonferroni",
    "adjust_p_values",
    "CORRECTIONS",
]


@dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate with a two-sided interval: ``low <= mean <= high`` for the usual methods."""

    mean: float
    low: float
    high: float
    confidence: float
    n: int
    method: str

    def as_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high,
                "confidence": self.confidence, "n": self.n, "method": self.method}


@dataclass(frozen=True)
class PairedTestResult:
    """Result of a paired test of ``mean(a - b) == 0``: ``statistic``, two-sided ``p_value``."""

    mean_difference: float
    statistic: float
    p_value: float
    n: int
    method: str

    def as_dict(self) -> dict:
        return {"mean_difference": self.mean_difference, "statistic": self.statistic,
                "p_value": self.p_value, "n": self.n, "method": self.method}


def _scipy_stats():
    """``scipy.stats``, imported on first use so that ``import metrics`` does not load it (~1 s)."""
    from scipy import stats

    return stats


def _as_1d(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    a = _as_1d(a, "a")
    b = _as_1d(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired samples need equal lengths, got {a.shape[0]} and {b.shape[0]}")
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep], b[keep]


def _differences(a, b, method: str) -> tuple[np.ndarray, "PairedTestResult | None"]:
    """``d = a - b`` over the pairs without NaN, and the result when it is settled without resampling:
    no pair (all NaN) or every difference exactly zero (``p = 1``)."""
    a, b = _paired(a, b)
    d = a - b
    if d.shape[0] == 0:
        return d, PairedTestResult(float("nan"), float("nan"), float("nan"), 0, method)
    if np.all(d == 0.0):
        return d, PairedTestResult(0.0, 0.0, 1.0, int(d.shape[0]), method)
    return d, None


def bootstrap_means(values, n_resamples: int = 10_000, *, seed: int = 0, batch: int | None = 1000) -> np.ndarray:
    """Means of ``n_resamples`` resamples (with replacement) of ``values`` (NaN dropped).

    Resamples are drawn as ``rng.integers(0, n, (batch, n))`` per batch, from
    ``np.random.default_rng(seed)``; the memory is ``batch * n`` indices at a time.

    >>> bootstrap_means([1.0, 1.0, 1.0], 4).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    x = _as_1d(values, "values")
    x = x[~np.isnan(x)]
    n = x.shape[0]
    if n == 0:
        raise ValueError("no non-NaN values to resample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    step = n_resamples if not batch else int(batch)
    out = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, step):
        size = min(step, n_resamples - start)
        idx = rng.integers(0, n, (size, n))
        out[start:start + size] = x[idx].mean(axis=-1)
    return out


def bootstrap_ci(values, *, confidence: float = 0.95, n_resamples: int = 10_000, method: str = "percentile",
                 seed: int = 0, batch: int | None = 1000) -> ConfidenceInterval:
    """Bootstrap confidence interval of the mean of ``values`` (NaN dropped).

    percentile: ``[q_{a/2}, q_{1-a/2}]`` of the resampled means, ``a = 1 - confidence``, with linear
    interpolation between order statistics (``np.quantile``'s default, as scipy uses).
    ``"basic"`` and ``"BCa"`` call ``scipy.stats.bootstrap`` with the same seed. A single value gives
    a degenerate interval ``[x, x]``.

    >>> ci = bootstrap_ci([0.2, 0.4, 0.6, 0.8], n_resamples=2000, seed=1)
    >>> round(ci.mean, 3), ci.low <= ci.mean <= ci.high
    (0.5, True)
    """
    _check_confidence(confidence)
    x = _as_1d(values, "values")
    x = x[~np.isnan(x)]
    if x.shape[0] == 0:
        return ConfidenceInterval(float("nan"), float("nan"), float("nan"), confidence, 0, method)
    mean = float(x.mean())
    alpha = (1.0 - confidence) / 2.0
    m = method.lower()
    if m == "percentile":
        boot = bootstrap_means(x, n_resamples, seed=seed, batch=batch)
        low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    elif m in ("basic", "bca"):
        if np.all(x == x[0]):
            low = high = mean  # scipy warns and returns NaN for BCa on degenerate data
        else:
            bootstrap = _scipy_stats().bootstrap
            # scipy 1.15 named the generator rng=; before (the declared floor is 1.10) it was random_state=
            seed_arg = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"
            res = bootstrap((x,), np.mean, n_resamples=n_resamples, batch=batch, method=m,
                            confidence_level=confidence, **{seed_arg: np.random.default_rng(seed)})
            low, high = res.confidence_interval
    else:
        raise ValueError(f"unknown bootstrap method {method!r}; use 'percentile', 'basic' or 'BCa'")
    return ConfidenceInterval(mean, float(low), float(high), confidence, int(x.shape[0]), f"bootstrap-{m}")


def t_interval(values, *, confidence: float = 0.95, bounds: tuple[float, float] | None = None) -> ConfidenceInterval:
    """Student-t interval of the mean: ``mean +- t.ppf(1 - a/2, n - 1) * s / sqrt(n)``.

    ``s`` is the sample standard deviation (``ddof=1``). NaN dropped; fewer than two values give a
    NaN interval around the mean (no spread can be estimated), a zero spread gives ``[mean, mean]``.
    ``bounds=(lo, hi)``: the range every value lies in (``(0, 1)`` for NDCG, ``(-1, 1)`` for a
    difference of two such values); the interval is clipped to it, since the mean cannot leave it
    (with few values, the symmetric t-interval does), and ``method`` says so (``"t, clipped to [0, 1]"``).

    >>> ci = t_interval([1.0, 2.0, 3.0])
    >>> round(ci.low, 4), round(ci.high, 4)   # 2 -+ 4.3027 * 1 / sqrt(3)
    (-0.4841, 4.4841)
    >>> ci = t_interval([0.9, 1.0], bounds=(0, 1))
    >>> round(ci.low, 4), ci.high, ci.method   # 0.95 -+ 12.7062 * 0.0707 / sqrt(2)
    (0.3147, 1.0, 't, clipped to [0, 1]')
    """
    ci = _t_interval(values, confidence)
    if bounds is None:
        return ci
    lo, hi = float(bounds[0]), float(bounds[1])
    low, high = (min(max(ci.low, lo), hi), max(min(ci.high, hi), lo)) if not np.isnan(ci.low) else (ci.low, ci.high)
    return ConfidenceInterval(ci.mean, low, high, ci.confidence, ci.n, f"t, clipped to [{lo:g}, {hi:g}]")


def _t_interval(values, confidence: float) -> ConfidenceInterval:
    _check_confidence(confidence)
    x = _as_1d(values, "values")
    x = x[~np.isnan(x)]
    n = int(x.shape[0])
    if n == 0:
        return ConfidenceInterval(float("nan"), float("nan"), float("nan"), confidence, 0, "t")
    mean = float(x.mean())
    if n < 2:
        return ConfidenceInterval(mean, float("nan"), float("nan"), confidence, n, "t")
    half = float(_scipy_stats().t.ppf(0.5 + confidence / 2.0, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return ConfidenceInterval(mean, mean - half, mean + half, confidence, n, "t")


def normal_interval(center, se, *, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Normal-approximation interval ``(center - z * se, center + z * se)``, ``z = Phi^-1(1/2 + c/2)``.

    ``center`` and ``se`` are estimates and their standard errors, scalars or arrays of any
    broadcastable shapes; the bounds come back with the broadcast shape (float64). NaN in either
    gives NaN bounds, ``se = 0`` gives ``[center, center]``. Unlike :func:`t_interval`, this takes a
    standard error computed elsewhere (delta method, ratio estimators, IPS means).

    >>> low, high = normal_interval([0.5, 1.0], [0.1, 0.0])
    >>> low.round(4).tolist(), high.round(4).tolist()   # 0.5 -+ 1.96 * 0.1
    ([0.304, 1.0], [0.696, 1.0])
    """
    _check_confidence(confidence)
    center = np.asarray(center, dtype=np.float64)
    se = np.asarray(se, dtype=np.float64)
    z = _scipy_stats().norm.ppf(0.5 + confidence / 2.0)
    return center - z * se, center + z * se


def paired_t_test(a, b) -> PairedTestResult:
    """Paired t-test of ``mean(a - b) == 0`` (two-sided), as ``scipy.stats.ttest_rel``.

    ``t = mean(d) / (sd(d) / sqrt(n))`` with ``d = a - b`` over the pairs where neither side is NaN,
    ``n - 1`` degrees of freedom. One departure from scipy: all differences exactly zero give
    ``t = 0, p = 1`` (scipy: NaN, which would poison a Holm correction); a constant non-zero
    difference gives ``t = +-inf, p = 0`` as in scipy. Fewer than two pairs give NaN.

    >>> r = paired_t_test([0.5, 0.6, 0.7, 0.9], [0.4, 0.6, 0.5, 0.6])
    >>> round(r.statistic, 4), round(r.p_value, 4)   # d = .1, 0, .2, .3: .15 / (.1291 / 2)
    (2.3238, 0.1027)
    """
    a, b = _paired(a, b)
    n = int(a.shape[0])
    d = a - b
    mean_diff = float(d.mean()) if n else float("nan")
    if n < 2:
        return PairedTestResult(mean_diff, float("nan"), float("nan"), n, "paired-t")
    if np.all(d == 0.0):
        return PairedTestResult(0.0, 0.0, 1.0, n, "paired-t")
    if np.all(d == d[0]):  # scipy's limit, without its precision-loss warning
        return PairedTestResult(mean_diff, float(np.sign(d[0]) * np.inf), 0.0, n, "paired-t")
    res = _scipy_stats().ttest_rel(a, b)
    return PairedTestResult(mean_diff, float(res.statistic), float(res.pvalue), n, "paired-t")


def paired_bootstrap_test(a, b, *, n_resamples: int = 10_000, seed: int = 0,
                          batch: int | None = 1000) -> PairedTestResult:
    """Two-sided paired bootstrap test of ``mean(a - b) == 0`` over the pairs (units = queries).

    The differences ``d`` are centred to obey the null (``d0 = d - mean(d)``), resampled with
    replacement, and the p-value is the share of resampled means at least as far from zero as the
    observed one, counting the observed sample itself:
    ``p = (1 + #{|mean(d0*)| >= |mean(d)|}) / (n_resamples + 1)``, so ``p > 0`` always.
    ``statistic`` is the observed mean divided by the bootstrap standard error. NaN pairs dropped;
    all differences zero give ``p = 1``.

    >>> r = paired_bootstrap_test([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    >>> r.p_value
    1.0
    """
    d, settled = _differences(a, b, "paired-bootstrap")
    if settled is not None:
        return settled
    n = int(d.shape[0])
    observed = float(d.mean())
    boot = bootstrap_means(d - observed, n_resamples, seed=seed, batch=batch)
    # A tiny tolerance so that resamples equal to the observed mean up to rounding count as extreme.
    extreme = np.count_nonzero(np.abs(boot) >= abs(observed) * (1.0 - 1e-12))
    p = (1.0 + extreme) / (n_resamples + 1.0)
    se = float(boot.std(ddof=1)) if n_resamples > 1 else float("nan")
    stat = observed / se if se > 0 else float(np.sign(observed) * np.inf)
    return PairedTestResult(observed, stat, float(p), n, "paired-bootstrap")


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (family-wise error control, any dependence).

    With the ``m`` non-NaN p-values sorted ascending ``p_(1) <= ... <= p_(m)``:
    ``adj_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j))``, returned in the input order. Rejecting
    where ``adj <= alpha`` is Holm's step-down procedure. NaN stays NaN and does not count in ``m``.
    Adjusted values are ``>= `` the raw ones and keep their order.

    >>> holm([0.01, 0.04, 0.03]).round(4).tolist()
    [0.03, 0.06, 0.06]
    """
    p = _as_1d(p_values, "p_values")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.shape[0]
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def _sign_flip_means(d: np.ndarray, signs: np.ndarray) -> np.ndarray:
    return (signs * d).mean(axis=-1)


def paired_randomization_test(a, b, *, n_resamples: int = 10_000, seed: int = 0, exact: bool | None = None,
                              batch: int = 1000) -> PairedTestResult:
    """Two-sided paired randomization (sign-flip) test of ``mean(a - b) == 0``.

    Under the null each difference d_q = a_q - b_q is as likely to have the other sign, so the
    p-value is the share of sign vectors s in {-1, 1}^n with ``|mean(s d)| >= |mean(d)|``:

    - exact (``exact=True``, or None and 2^n <= n_resamples): over all 2^n vectors (the observed one
      included);
    - Monte Carlo: ``p = (1 + #{extreme among n_resamples random vectors}) / (n_resamples + 1)``,
      vectors drawn from ``np.random.default_rng(seed)``; it converges to the exact p-value.

    ``statistic`` is the observed mean difference over its standard error. NaN pairs are dropped;
    all differences zero give ``p = 1``.

    >>> paired_randomization_test([1.0, 2.0, 3.0], [0.0, 1.0, 2.0]).p_value   # 2 of the 8 flips
    0.25
    """
    d, settled = _differences(a, b, "paired-randomization")
    if settled is not None:
        return settled
    n = int(d.shape[0])
    observed = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    stat = observed / (sd / np.sqrt(n)) if sd > 0 else float(np.sign(observed) * np.inf)
    cut = abs(observed) * (1.0 - 1e-12)  # flips equal to the observed mean up to rounding count as extreme
    if exact is None:
        exact = n <= 30 and 2 ** n <= n_resamples
    if exact:
        if n > 30:
            raise ValueError(f"the exact test enumerates 2^n sign vectors; n = {n} is too many")
        extreme = 0
        for start in range(0, 2 ** n, 1 << 16):
            codes = np.arange(start, min(start + (1 << 16), 2 ** n), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> np.arange(n)) & 1)
            extreme += int(np.count_nonzero(np.abs(_sign_flip_means(d, signs)) >= cut))
        return PairedTestResult(observed, stat, extreme / 2.0 ** n, n, "paired-randomization-exact")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, (size, n))
        extreme += int(np.count_nonzero(np.abs(_sign_flip_means(d, signs)) >= cut))
    return PairedTestResult(observed, stat, (1.0 + extreme) / (n_resamples + 1.0), n, "paired-randomization")


def bonferroni(p_values) -> np.ndarray:
    """Bonferroni adjusted p-values: ``min(1, m p)`` over the m non-NaN values (NaN stays NaN).

    >>> bonferroni([0.01, 0.04, float("nan")]).tolist()
    [0.02, 0.08, nan]
    """
    p = _as_1d(p_values, "p_values")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = int(np.count_nonzero(~np.isnan(p)))
    return np.minimum(1.0, m * p)


CORRECTIONS = ("holm", "bonferroni", "none")


def adjust_p_values(p_values, correction: str = "holm") -> np.ndarray:
    """p-values adjusted for multiple comparisons: ``"holm"``, ``"bonferroni"`` or ``"none"``."""
    if correction == "holm":
        return holm(p_values)
    if correction == "bonferroni":
        return bonferroni(p_values)
    if correction == "none":
        return _as_1d(p_values, "p_values").copy()
    raise ValueError(f"unknown correction {correction!r}: use one of {', '.join(CORRECTIONS)}")
