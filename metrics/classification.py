"""Classification and calibration metrics for click / relevance probabilities.

Ranking quality of a scorer (AUC, globally or per query / user) and the quality of its numbers as
probabilities (LogLoss, Brier, ECE, MCE, the calibration curve). numpy and scipy only.

Conventions, stated once:

* Labels are binary (0/1, or booleans); anything else is a ``ValueError``. :func:`log_loss` and
  :func:`brier` also take two other label values with ``pos_label`` (``{1, 2}``, ``{"no", "yes"}``)
  and ``{-1, 1}`` without it, as scikit-learn's ``brier_score_loss(pos_label=)`` does.
* AUC gives half credit to a tied positive-negative pair (the trapezoid rule), exactly as
  ``sklearn.metrics.roc_auc_score``; a single-class input has no AUC and returns NaN (no warning).
* Calibration bins follow ``sklearn.calibration.calibration_curve``: a prediction equal to an inner
  edge falls in the LOWER bin, so the bins are ``[e0, e1], (e1, e2], ..., (e_{B-1}, e_B]``.
  Equal-width edges are ``linspace(0, 1, B + 1)``; equal-mass edges are the empirical quantiles of the
  predictions (``numpy.percentile``, linear interpolation), so equal predictions always share a bin and
  bins hold equal counts only up to ties. Empty bins are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "auc",
    "grouped_auc",
    "GroupedAUC",
    "log_loss",
    "brier",
    "ece",
    "mce",
    "calibration_curve",
    "CalibrationCurve",
]


# ----------------------------------------------------------------------------- input checks
def _binary_labels(y_true, name: str = "y_true") -> np.ndarray:
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {y.shape}")
    if y.dtype == bool:
        return y.astype(np.float64)
    y = y.astype(np.float64)
    bad = ~((y == 0) | (y == 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must hold binary labels 0/1; position {i} holds {y[i]!r}")
    return y


def _labels_with_positive(y_true, pos_label) -> np.ndarray:
    """0/1 labels from ``y_true``: ``y == pos_label`` when given (at most two distinct values, as
    scikit-learn asks), else labels in {0, 1} or {-1, 1} (1 positive; scikit-learn's rule when
    ``pos_label`` is None) or booleans."""
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise ValueError(f"y_true must be one-dimensional, got shape {y.shape}")
    values = np.unique(y)
    if values.size > 2:
        raise ValueError(f"y_true must hold two label values at most (a binary task), got {values.size}: "
                         f"{values[:5].tolist()}")
    if pos_label is not None:
        return (y == pos_label).astype(np.float64)
    if y.dtype == bool:
        return y.astype(np.float64)
    if y.dtype.kind not in "iuf" or not set(values.tolist()) <= {-1.0, 0.0, 1.0} or {-1.0, 0.0} <= set(values.tolist()):
        raise ValueError(f"y_true holds the labels {values.tolist()}: without pos_label they must be 0/1 or -1/1; "
                         "give pos_label, the label of the positive class")
    return (y == 1).astype(np.float64)


def _scores(y_score, n: int, name: str = "y_score", probability: bool = False) -> np.ndarray:
    s = np.asarray(y_score, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {s.shape}")
    if s.shape[0] != n:
        raise ValueError(f"{name} has {s.shape[0]} values but the labels have {n}")
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"{name} must be finite; position {i} holds {s[i]!r}")
    if probability and s.size and (s.min() < 0.0 or s.max() > 1.0):
        i = int(np.flatnonzero((s < 0) | (s > 1))[0])
        raise ValueError(f"{name} must be probabilities in [0, 1]; position {i} holds {s[i]!r}")
    return s


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values`` (ascending), tied values sharing the mean of their ranks.

    A run of equal values at sorted positions ``i .. j - 1`` (0-based) gets ``(i + 1 + j) / 2``, as
    ``scipy.stats.rankdata(method="average")`` gives, without importing scipy. Finite input only.

    >>> average_ranks(np.array([0.3, 0.1, 0.3, 0.2])).tolist()
    [3.5, 1.0, 3.5, 2.0]
    """
    n = values.shape[0]
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], n]
    mean_rank = (starts + 1 + ends) / 2.0
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def _weights(sample_weight, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or (w < 0).any():
        raise ValueError("sample_weight must be finite and non-negative")
    return w


# ----------------------------------------------------------------------------- AUC
def auc(y_true, y_score, *, sample_weight=None) -> float:
    r"""Area under the ROC curve, tie-aware (equal to ``sklearn.metrics.roc_auc_score``).

    Mann-Whitney form with average ranks ``r`` of the scores over all ``n = P + N`` items::

        AUC = (sum_{i positive} r_i - P (P + 1) / 2) / (P N)

    which equals ``P(s_pos > s_neg) + 0.5 P(s_pos = s_neg)`` over all positive-negative pairs.
    With ``sample_weight`` w (scikit-learn's and XGBoost's instance weights) each pair counts
    ``w_i w_j``::

        AUC = sum_{i pos, j neg} w_i w_j ([s_i > s_j] + [s_i = s_j] / 2) / (W_pos W_neg)

    the area under the weighted ROC curve (trapezoids over the tied groups), as
    ``roc_auc_score(sample_weight=w)``. O(n log n). Returns NaN when only one class is present
    (or has weight).

    >>> auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    >>> auc([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9])   # the tied pair counts 1/2
    0.875
    >>> auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], sample_weight=[1, 3, 1, 1])   # (1 + 3*0 + 1 + 3) / (2 * 4)
    0.625
    """
    y = _binary_labels(y_true)
    s = _scores(y_score, y.shape[0])
    w = _weights(sample_weight, y.shape[0])
    if w is not None:
        return _weighted_auc(y, s, w)
    n_pos = float(y.sum())
    n_neg = float(y.shape[0] - n_pos)
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = average_ranks(s)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _weighted_auc(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> float:
    """AUC with per-item weights: for each positive, the negative weight below its score plus half
    the negative weight tied with it, over one sort of the scores."""
    order = np.argsort(s, kind="stable")
    s_sorted = s[order]
    group = np.cumsum(np.r_[True, s_sorted[1:] != s_sorted[:-1]]) - 1
    pos_w = np.bincount(group, weights=(w * y)[order])
    neg_w = np.bincount(group, weights=(w * (1.0 - y))[order])
    total_pos, total_neg = float(pos_w.sum()), float(neg_w.sum())
    if total_pos <= 0 or total_neg <= 0:
        return float("nan")
    below = np.cumsum(neg_w) - neg_w
    return float(np.sum(pos_w * (below + 0.5 * neg_w)) / (total_pos * total_neg))


@dataclass(frozen=True)
class GroupedAUC:
    """AUC per group and their weighted mean.

    ``value`` is ``sum_g w_g AUC_g / sum_g w_g`` over the groups with both classes; ``weighting`` says
    what ``w_g`` is (``"pairs"``: P_g N_g, ``"size"``: n_g, ``"uniform"``: 1). Single-class groups have
    NaN in ``per_group``, weight 0, and are counted in ``n_skipped``.
    """

    value: float
    weighting: str
    groups: np.ndarray  # [G] group keys, sorted (as np.unique returns them)
    per_group: np.ndarray  # [G] AUC (NaN where the group has one class)
    weights: np.ndarray  # [G] weight of each group in ``value`` (0 where skipped)
    n_groups: int
    n_skipped: int


def _group_codes(groups, n: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups must have shape ({n},), got {g.shape}")
    keys, codes = np.unique(g, return_inverse=True)
    return keys, codes.reshape(-1)


def _within_group_average_ranks(scores: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """1-based average ranks of ``scores`` within each group (ties share the mean of their ranks)."""
    n = scores.shape[0]
    order = np.lexsort((scores, codes))
    g_sorted = codes[order]
    s_sorted = scores[order]
    # A block is a run of equal (group, score); a group starts where the code changes.
    new_block = np.ones(n, dtype=bool)
    new_block[1:] = (g_sorted[1:] != g_sorted[:-1]) | (s_sorted[1:] != s_sorted[:-1])
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = g_sorted[1:] != g_sorted[:-1]
    pos = np.arange(n)
    block_id = np.cumsum(new_block) - 1
    block_start = pos[new_block]
    block_end = np.append(block_start[1:], n) - 1  # inclusive
    group_start = pos[new_group][np.cumsum(new_group) - 1]
    avg_rank_sorted = (block_start[block_id] + block_end[block_id]) / 2.0 - group_start + 1.0
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = avg_rank_sorted
    return ranks


def grouped_auc(y_true, y_score, groups, weighting: str = "pairs") -> GroupedAUC:
    r"""AUC within each group (query, request or user) and their weighted mean.

    For group ``g`` with ``P_g`` positives and ``N_g`` negatives, ``AUC_g`` is :func:`auc` on its rows
    only (pairs across groups are never compared). The summary is
    ``sum_g w_g AUC_g / sum_g w_g`` with

    * ``weighting="pairs"``: ``w_g = P_g N_g``, the AUC over all within-group positive-negative pairs;
    * ``weighting="size"``: ``w_g = n_g`` (impressions), the usual "GAUC" of CTR papers;
    * ``weighting="uniform"``: ``w_g = 1``, a plain macro mean.

    Groups with one class only have no AUC: they are skipped and counted in ``n_skipped``.
    O(n log n), one sort for all groups.

    >>> r = grouped_auc([1, 0, 0, 1, 0, 0, 0], [0.9, 0.2, 0.5, 0.1, 0.3, 0.7, 0.7], [1, 1, 1, 2, 2, 2, 3])
    >>> r.per_group.tolist()[:2], r.n_skipped, round(r.value, 4)
    ([1.0, 0.0], 1, 0.5)
    """
    if weighting not in ("pairs", "size", "uniform"):
        raise ValueError(f"weighting must be 'pairs', 'size' or 'uniform', got {weighting!r}")
    y = _binary_labels(y_true)
    s = _scores(y_score, y.shape[0])
    keys, codes = _group_codes(groups, y.shape[0])
    n_groups = keys.shape[0]
    ranks = _within_group_average_ranks(s, codes)
    n_g = np.bincount(codes, minlength=n_groups).astype(np.float64)
    p_g = np.bincount(codes, weights=y, minlength=n_groups)
    q_g = n_g - p_g
    rank_sum_pos = np.bincount(codes, weights=ranks * y, minlength=n_groups)
    valid = (p_g > 0) & (q_g > 0)
    per_group = np.full(n_groups, np.nan)
    per_group[valid] = (rank_sum_pos[valid] - p_g[valid] * (p_g[valid] + 1) / 2.0) / (p_g[valid] * q_g[valid])
    if weighting == "pairs":
        w = p_g * q_g
    elif weighting == "size":
        w = n_g.copy()
    else:
        w = np.ones(n_groups)
    w = np.where(valid, w, 0.0)
    value = float(np.sum(w[valid] * per_group[valid]) / np.sum(w)) if valid.any() else float("nan")
    return GroupedAUC(
        value=value,
        weighting=weighting,
        groups=keys,
        per_group=per_group,
        weights=w,
        n_groups=int(n_groups),
        n_skipped=int(n_groups - valid.sum()),
    )


# ----------------------------------------------------------------------------- proper scores
def log_loss(y_true, y_prob, *, eps: float | str = "auto", sample_weight=None, pos_label=None) -> float:
    r"""Mean binary cross-entropy: ``-mean(y log p + (1 - y) log(1 - p))``.

    ``p`` is clipped to ``[eps, 1 - eps]`` first so that a confident mistake costs ``-log(eps)``
    instead of infinity. ``eps="auto"`` is the machine epsilon of float64 (2.2e-16), the rule of
    scikit-learn >= 1.5, so the value equals ``sklearn.metrics.log_loss``. With ``sample_weight`` the
    mean is weighted. ``p`` is the probability of ``pos_label`` (y = 1 where ``y_true == pos_label``);
    without it the labels are 0/1 or -1/1 (module docstring). scikit-learn's ``log_loss`` reads a
    one-column ``p`` as the probability of the greater of the two labels: ``pos_label=2`` for {1, 2}.

    >>> round(log_loss([1, 0], [0.8, 0.4]), 6)   # (-log 0.8 - log 0.6) / 2
    0.366985
    >>> round(log_loss(["yes", "no"], [0.8, 0.4], pos_label="yes"), 6)
    0.366985
    """
    y = _labels_with_positive(y_true, pos_label)
    p = _scores(y_prob, y.shape[0], "y_prob", probability=True)
    w = _weights(sample_weight, y.shape[0])
    e = np.finfo(np.float64).eps if eps == "auto" else float(eps)
    if not 0.0 <= e < 0.5:
        raise ValueError(f"eps must be in [0, 0.5), got {eps!r}")
    p = np.clip(p, e, 1.0 - e)
    losses = -(y * np.log(p) + (1.0 - y) * np.log1p(-p))
    return float(np.average(losses, weights=w))


def brier(y_true, y_prob, *, sample_weight=None, pos_label=None) -> float:
    r"""Brier score: ``mean((p - y)^2)`` (``sklearn.metrics.brier_score_loss``), y = 1 where
    ``y_true == pos_label`` (without it: 0/1 or -1/1 labels, 1 positive, as scikit-learn).

    >>> round(brier([1, 0, 1], [0.9, 0.2, 0.6]), 12)   # (0.01 + 0.04 + 0.16) / 3
    0.07
    >>> round(brier([2, 1, 2], [0.9, 0.2, 0.6], pos_label=2), 12), round(brier([1, -1, 1], [0.9, 0.2, 0.6]), 12)
    (0.07, 0.07)
    """
    y = _labels_with_positive(y_true, pos_label)
    p = _scores(y_prob, y.shape[0], "y_prob", probability=True)
    w = _weights(sample_weight, y.shape[0])
    return float(np.average((p - y) ** 2, weights=w))


# ----------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class CalibrationCurve:
    """Per-bin statistics of a reliability diagram, non-empty bins only, in increasing order.

    ``mean_predicted[b]`` = mean p in bin b, ``fraction_positive[b]`` = mean y in bin b, ``counts[b]`` =
    items in bin b, ``bin_index[b]`` = its index among the ``n_bins`` bins, ``edges`` = the ``n_bins + 1``
    edges (for ``strategy="mass"`` they may repeat where predictions are tied).
    """

    mean_predicted: np.ndarray
    fraction_positive: np.ndarray
    counts: np.ndarray
    bin_index: np.ndarray
    edges: np.ndarray
    strategy: str

    @property
    def gaps(self) -> np.ndarray:
        """``|mean p - mean y|`` per bin."""
        return np.abs(self.mean_predicted - self.fraction_positive)

    @property
    def shares(self) -> np.ndarray:
        """Share of the items in each bin (sums to 1)."""
        return self.counts / self.counts.sum()


def _bin_edges(p: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    if strategy in ("width", "uniform"):
        return np.linspace(0.0, 1.0, n_bins + 1)
    if strategy in ("mass", "quantile"):
        return np.percentile(p, np.linspace(0.0, 1.0, n_bins + 1) * 100.0)
    raise ValueError(f"strategy must be 'width' or 'mass', got {strategy!r}")


def calibration_curve(y_true, y_prob, n_bins: int = 10, strategy: str = "width") -> CalibrationCurve:
    r"""Bin the predictions and return mean prediction, click rate and count per non-empty bin.

    ``strategy="width"``: edges ``linspace(0, 1, n_bins + 1)``; ``strategy="mass"``: edges at the
    empirical quantiles of ``p`` (equal counts up to ties, which matters when positives are rare and
    most predictions crowd near 0). A value on an inner edge goes to the lower bin (sklearn's rule:
    ``searchsorted(edges[1:-1], p, side="left")``). With ``strategy`` "uniform" / "quantile" (the
    sklearn spellings) the arrays equal ``sklearn.calibration.calibration_curve``'s
    ``(prob_pred, prob_true)``.

    >>> c = calibration_curve([0, 0, 1, 1], [0.1, 0.3, 0.6, 0.8], n_bins=2)
    >>> c.mean_predicted.round(12).tolist(), c.fraction_positive.tolist(), c.counts.tolist()
    ([0.2, 0.7], [0.0, 1.0], [2, 2])
    """
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    n_bins = int(n_bins)
    y = _binary_labels(y_true)
    p = _scores(y_prob, y.shape[0], "y_prob", probability=True)
    if p.size == 0:
        raise ValueError("calibration needs at least one prediction")
    edges = _bin_edges(p, n_bins, strategy)
    ids = np.searchsorted(edges[1:-1], p, side="left")
    counts = np.bincount(ids, minlength=n_bins)
    sum_p = np.bincount(ids, weights=p, minlength=n_bins)
    sum_y = np.bincount(ids, weights=y, minlength=n_bins)
    nz = counts > 0
    return CalibrationCurve(
        mean_predicted=sum_p[nz] / counts[nz],
        fraction_positive=sum_y[nz] / counts[nz],
        counts=counts[nz],
        bin_index=np.flatnonzero(nz),
        edges=edges,
        strategy="width" if strategy in ("width", "uniform") else "mass",
    )


def ece(y_true, y_prob, n_bins: int = 15, strategy: str = "width") -> float:
    r"""Expected calibration error: ``sum_b (n_b / n) |mean_{i in b} p_i - mean_{i in b} y_i|``.

    Bins as in :func:`calibration_curve` (``strategy="width"`` or ``"mass"``). With rare positives
    equal-width bins put almost everything in the first bin and hide the miscalibration inside it;
    equal-mass bins resolve that region.

    >>> round(ece([0, 0, 1, 1], [0.1, 0.3, 0.6, 0.8], n_bins=2), 12)   # (2/4)|0.2 - 0| + (2/4)|0.7 - 1|
    0.25
    """
    c = calibration_curve(y_true, y_prob, n_bins=n_bins, strategy=strategy)
    return float(np.sum(c.shares * c.gaps))


def mce(y_true, y_prob, n_bins: int = 15, strategy: str = "width") -> float:
    r"""Maximum calibration error: ``max_b |mean_{i in b} p_i - mean_{i in b} y_i|`` over non-empty bins.

    >>> round(mce([0, 0, 1, 1], [0.1, 0.3, 0.6, 0.8], n_bins=2), 12)
    0.3
    """
    c = calibration_curve(y_true, y_prob, n_bins=n_bins, strategy=strategy)
    return float(np.max(c.gaps))
