"""The AUC-invariance check that runs after every calibration.

Calibration must change the numbers, never the order. Platt scaling with a positive slope is strictly
increasing, so AUC is unchanged exactly; isotonic regression is only non-decreasing and can merge
distinct scores into ties worth 1/2, which moves AUC. This module measures both: AUC (global and
grouped) before and after, and the pairs whose scores a transformation tied.
"""


from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ltr.calibrate.calibrators import _as_labels, _as_scores
from ltr.base.errors import LtrError
from metrics.classification import auc, grouped_auc

__all__ = ["AucInvarianceReport", "check_auc_invariance", "count_created_ties"]


def _tie_stats(keys: list[np.ndarray], y: np.ndarray) -> tuple[int, int]:
    """Pairs tied on all ``keys`` jointly, and how many of them are positive-negative pairs."""
    n = y.shape[0]
    if n < 2:
        return 0, 0
    order = np.lexsort(tuple(reversed(keys)))
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for k in keys:
        ks = k[order]
        new[1:] |= ks[1:] != ks[:-1]
    run = np.cumsum(new) - 1
    counts = np.bincount(run).astype(np.int64)
    pos = np.bincount(run, weights=y[order]).astype(np.int64)
    pairs = int(np.sum(counts * (counts - 1) // 2))
    mixed = int(np.sum(pos * (counts - pos)))
    return pairs, mixed


def count_created_ties(before, after, labels=None, groups=None) -> dict[str, int]:
    """Count pairs whose scores were distinct before and are equal after a transformation.

    ``tied_pairs_created`` = pairs tied after minus pairs tied both before and after (each from the
    sizes of the runs of equal values: ``sum C(n_run, 2)``, one sort, O(n log n));
    ``tied_pos_neg_pairs_created`` = those with one positive and one negative (the pairs whose AUC
    credit drops from 1 or 0 to 1/2); ``ties_broken`` = pairs tied before but not after. With ``groups``
    only pairs inside one group are counted.

    >>> count_created_ties([0.1, 0.2, 0.3, 0.3], [0.5, 0.5, 0.7, 0.7], [0, 1, 0, 1])
    {'tied_pairs_created': 1, 'tied_pos_neg_pairs_created': 1, 'ties_broken': 0}
    """
    b = np.asarray(before, dtype=np.float64)
    a = np.asarray(after, dtype=np.float64)
    y = np.zeros(b.shape[0]) if labels is None else np.asarray(labels, dtype=np.float64)
    g = [] if groups is None else [np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)]
    tied_after, mixed_after = _tie_stats(g + [a], y)
    tied_before, _ = _tie_stats(g + [b], y)
    tied_both, mixed_both = _tie_stats(g + [b, a], y)
    return {
        "tied_pairs_created": tied_after - tied_both,
        "tied_pos_neg_pairs_created": mixed_after - mixed_both,
        "ties_broken": tied_before - tied_both,
    }


@dataclass
class AucInvarianceReport:
    """AUC before and after a calibration (global, and grouped when groups were given).

    ``unchanged`` is True when the global (and grouped) AUC is bit-for-bit equal.
    """

    auc_before: float
    auc_after: float
    auc_difference: float
    tied_pairs_created: int
    tied_pos_neg_pairs_created: int
    ties_broken: int
    grouped_weighting: str | None = None
    grouped_auc_before: float | None = None
    grouped_auc_after: float | None = None
    grouped_auc_difference: float | None = None
    max_group_abs_difference: float | None = None
    n_groups: int | None = None
    n_groups_skipped: int | None = None
    tied_pairs_created_within_groups: int | None = None

    @property
    def unchanged(self) -> bool:
        same = self.auc_before == self.auc_after or (math.isnan(self.auc_before) and math.isnan(self.auc_after))
        if self.grouped_auc_before is not None:
            gb, ga = self.grouped_auc_before, self.grouped_auc_after
            same = same and (gb == ga or (math.isnan(gb) and math.isnan(ga)))
        return bool(same)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["unchanged"] = self.unchanged
        return d

    def to_text(self) -> str:
        lines = [
            f"AUC before {self.auc_before:.6f}  after {self.auc_after:.6f}  difference {self.auc_difference:+.3e}"
            f"  ({'unchanged' if self.unchanged else 'CHANGED'})",
            f"pairs of distinct scores the calibration made equal: {self.tied_pairs_created}"
            f" ({self.tied_pos_neg_pairs_created} of them positive-negative, whose AUC credit became 1/2);"
            f" pairs of equal scores it made distinct: {self.ties_broken}",
        ]
        if self.grouped_auc_before is not None:
            lines.append(
                f"grouped AUC ({self.grouped_weighting}-weighted, {self.n_groups} groups, {self.n_groups_skipped}"
                f" single-class skipped) before {self.grouped_auc_before:.6f} after {self.grouped_auc_after:.6f}"
                f" difference {self.grouped_auc_difference:+.3e}; max |group difference|"
                f" {self.max_group_abs_difference:.3e}; tied pairs created within groups"
                f" {self.tied_pairs_created_within_groups}"
            )
        return "\n".join(lines)


def check_auc_invariance(before, after, labels, groups=None, weighting: str = "pairs") -> AucInvarianceReport:
    """Compare the ranking quality of scores ``before`` and probabilities ``after`` a calibration.

    Runs on the same rows; ``groups`` (query, request or user per row) adds the grouped AUC
    (:func:`metrics.grouped_auc` with ``weighting``) and the per-group differences.
    """
    b = _as_scores(before, "scores before")
    a = np.asarray(after, dtype=np.float64)
    if a.shape != b.shape:
        raise LtrError(f"scores after calibration have shape {a.shape}, before {b.shape}")
    y = _as_labels(labels, b.shape[0])
    auc_b, auc_a = auc(y, b), auc(y, a)
    ties = count_created_ties(b, a, y)
    rep = AucInvarianceReport(
        auc_before=auc_b, auc_after=auc_a, auc_difference=auc_a - auc_b, **ties
    )
    if groups is not None:
        gb = grouped_auc(y, b, groups, weighting=weighting)
        ga = grouped_auc(y, a, groups, weighting=weighting)
        diffs = ga.per_group - gb.per_group
        rep.grouped_weighting = weighting
        rep.grouped_auc_before = gb.value
        rep.grouped_auc_after = ga.value
        rep.grouped_auc_difference = ga.value - gb.value
        rep.max_group_abs_difference = float(np.nanmax(np.abs(diffs))) if np.isfinite(diffs).any() else 0.0
        rep.n_groups = gb.n_groups
        rep.n_groups_skipped = gb.n_skipped
        rep.tied_pairs_created_within_groups = count_created_ties(b, a, y, groups)["tied_pairs_created"]
    return rep


