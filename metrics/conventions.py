"""Metric conventions as data: one dataclass, stamped metric names, and the peer presets.

Every number the toolkit reports carries the conventions that produced it in its name::

    ndcg@10[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]
    map[rel>=1,norm=R,empty=skip,ties=stable]

The name always begins with the short name exactly as asked (``ndcg@10``, ``precision@5``), then
lists, in brackets, the conventions that change that metric's value. Fields left at the toolkit's
default and irrelevant to the metric are omitted; ``scores=float32``, ``unjudged=remove``,
``zero_gain_below=..`` and ``R=qrels`` appear only when in force.

Presets reproduce established evaluators exactly (see ../shared/reference/CONVENTIONS.md):

=========  ======  =====  ============  ========  ==========  ===================  =======
preset     gain    empty  ties          AP norm   relevant    labels worth 0       scores
=========  ======  =====  ============  ========  ==========  ===================  =======
toolkit    exp2    skip   stable        R         label >= 1  (none)               float64
trec_eval  linear  zero   docid_desc    R         label >= 1  < 0 (as unjudged)    float32
sklearn    linear  zero   average       R         label >= 1  (none)               float64
lightgbm   exp2    one    stable        min(R,K)  label >= 1  (none)               float64
ranx       linear  zero   stable        R         label >= 1  < the threshold      float64
=========  ======  =====  ============  ========  ==========  ===================  =======

trec_eval and ranx count |R| and build the ideal DCG over the qrels (judged documents that were not
retrieved included) when those are passed (``qrels_labels``/``qrels_offsets``, as ``ltr eval`` does).
LightGBM's map@K counts label > 0.5 as relevant; its labels are integers, so that is label >= 1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Union

from metrics.discounts import discount_name
from metrics.gains import gain_name

__all__ = [
    "Conventions",
    "PRESETS",
    "get_conventions",
    "EMPTY_RULES",
    "TIE_RULES",
    "MAP_NORMS",
    "UNJUDGED_RULES",
    "P_DENOMINATORS",
]

EMPTY_RULES = ("skip", "zero", "one")
TIE_RULES = ("stable", "docid_desc", "average", "pessimistic")
MAP_NORMS = ("R", "min(R,K)")
P_DENOMINATORS = ("K", "min(K,n)")
UNJUDGED_RULES = ("nonrelevant", "remove")
SCORE_DTYPES = ("float64", "float32")

# Which conventions change which metric kind (the rest is left out of its stamped name).
_FIELDS_BY_KIND = {
    "ndcg": ("gain", "discount", "ideal", "empty", "ties"),
    "dcg": ("gain", "discount", "ties"),
    "ap": ("rel", "norm", "empty", "ties"),
    "rr": ("rel", "empty", "ties"),
    "p": ("rel", "empty", "ties"),
    "recall": ("rel", "empty", "ties"),
    "hit": ("rel", "empty", "ties"),
    "rprec": ("rel", "empty", "ties"),
    "err": ("gmax", "ties"),
    "rbp": ("rel", "ties"),
    "rbp_resid": ("rel", "ties"),
    "opa": ("empty", "ties"),
    "arp": ("rel", "empty", "ties"),
    "arp_graded": ("empty", "ties"),  # weighted by the label: no relevance threshold
    "fallout": ("rel", "empty", "ties"),
    "judged": ("empty", "ties"),  # judged or not, whatever the label
}
# trec_eval's measures (computed by metrics.trec_eval, which imports these two names from here):
# the counts, which ignore the order and the empty rule, and the measures built on gains. They are
# defined here, below metrics.trec_eval, because a measure's stamped name depends on them.
COUNT_KINDS = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret", "utility")
GAIN_KINDS = ("trec_ndcg", "ndcg_rel", "rndcg", "g")
# trec_eval's own measures (metrics.trec_eval): counts ignore the order and the empty rule
_TREC_FIELDS = ("rel", "empty", "ties")
_TREC_GAIN_FIELDS = ("gain", "rel", "empty", "ties")
_TREC_COUNT_FIELDS = ("rel",)


def _fmt_number(x: float) -> str:
    return f"{float(x):g}"


@dataclass(frozen=True)
class Conventions:
    """How a ranking metric is computed; every field is a choice some evaluator makes differently.

    gain : ``"exp2"`` (2^rel - 1), ``"linear"`` (rel) or a callable of the labels.
    discount : ``"log2"`` (1/log2(rank+1)), a callable of 1-based ranks, or a table of per-rank values.
    empty : what a query without any relevant item scores: ``"skip"`` (NaN, left out of means),
        ``"zero"`` or ``"one"``. For NDCG "without relevant item" means ideal DCG = 0.
    ties : order of equal scores: ``"stable"`` (input order), ``"docid_desc"`` (document id descending,
        as trec_eval), ``"average"`` (expected value over the orders of each tied group, as
        scikit-learn's ndcg_score, for dcg, ndcg, p, recall, rprec, rr and hit; for ap without
        cutoff scikit-learn's average_precision_score, one step per distinct score; ap@K raises)
        or ``"pessimistic"``
        (lowest labels first within a tie).
    map_norm : AP@K divides by ``"R"`` (number of relevant items) or ``"min(R,K)"`` (LightGBM).
    p_denominator : P@K divides by ``"K"`` (trec_eval, ranx) or ``"min(K,n)"``, the number of items
        shown when the list is shorter than K (TF-Ranking, Rax, XGBoost's pre@K).
    max_grade : g_max of ERR's stop probability (2^g - 1) / 2^g_max (4: gdeval's and the 0..4 scale
        of LETOR / MSLR); a label above it is an error.
    threshold : binary metrics count an item relevant when label >= threshold.
    unjudged : items whose label is NaN are ``"nonrelevant"`` (gain 0) or ``"remove"``d before ranking.
    zero_gain_below : labels below this value get gain 0 (trec_eval: 0; ranx: its relevance level);
        the string ``"threshold"`` means the value of ``threshold``; None keeps every gain.
    unjudged_below : labels below this value mean "judged as not part of the pool" and are treated
        as unjudged (NaN): trec_eval reads negative qrels so (0 in its preset); None = no such labels.
    score_dtype : ``"float32"`` rounds scores to float32 before ranking (trec_eval 9.0.x compares them so).
    """

    gain: Union[str, Callable[[Any], Any]] = "exp2"
    discount: Any = "log2"
    empty: str = "skip"
    ties: str = "stable"
    map_norm: str = "R"
    p_denominator: str = "K"
    max_grade: float = 4.0
    threshold: float = 1.0
    unjudged: str = "nonrelevant"
    zero_gain_below: Union[float, str, None] = None
    unjudged_below: Union[float, None] = None
    score_dtype: str = "float64"

    def __post_init__(self) -> None:
        for field, allowed in (
            ("empty", EMPTY_RULES),
            ("ties", TIE_RULES),
            ("map_norm", MAP_NORMS),
            ("p_denominator", P_DENOMINATORS),
            ("unjudged", UNJUDGED_RULES),
            ("score_dtype", SCORE_DTYPES),
        ):
            value = getattr(self, field)
            if value not in allowed:
                raise ValueError(f"{field}={value!r} is not one of {', '.join(allowed)}")
        if isinstance(self.gain, str) and self.gain not in ("exp2", "linear"):
            raise ValueError(f"gain={self.gain!r}: use 'exp2', 'linear' or a callable")
        if isinstance(self.discount, str) and self.discount != "log2":
            raise ValueError(f"discount={self.discount!r}: use 'log2', a callable or a table")
        if isinstance(self.zero_gain_below, str) and self.zero_gain_below != "threshold":
            raise ValueError("zero_gain_below must be a number, 'threshold' or None")

    @property
    def gain_floor(self) -> float | None:
        """The resolved ``zero_gain_below`` (a number or None)."""
        if self.zero_gain_below == "threshold":
            return float(self.threshold)
        return None if self.zero_gain_below is None else float(self.zero_gain_below)

    def replace(self, **changes: Any) -> "Conventions":
        return dataclasses.replace(self, **changes)

    def stamp(self, short_name: str, kind: str, *, item_gain: bool = False, qrels: bool = False) -> str:
        """The stamped name of metric ``kind`` asked for as ``short_name``.

        >>> Conventions().stamp("ndcg@10", "ndcg")
        'ndcg@10[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]'
        >>> get_conventions("trec_eval").stamp("map", "ap", qrels=True)
        'map[rel>=1,norm=R,empty=zero,ties=docid_desc,unjudged_below=0,scores=float32,R=qrels]'
        """
        parts = []
        for field in _fields(kind):
            if field == "gain":
                parts.append("gain=item" if item_gain else f"gain={gain_name(self.gain)}")
            elif field == "discount":
                parts.append(f"discount={discount_name(self.discount)}")
            elif field == "ideal":
                parts.append("ideal=min(R,K)")
            elif field == "rel":
                parts.append(f"rel>={_fmt_number(self.threshold)}")
            elif field == "norm":
                parts.append(f"norm={self.map_norm}")
            elif field == "gmax":
                parts.append(f"gmax={_fmt_number(self.max_grade)}")
            else:
                parts.append(f"{field}={getattr(self, field)}")
        if kind == "p" and self.p_denominator != "K":
            parts.append(f"denom={self.p_denominator}")
        floor = self.gain_floor
        if floor is not None and kind in ("ndcg", "dcg"):  # binary metrics do not use gains
            parts.append(f"zero_gain_below={_fmt_number(floor)}")
        if self.unjudged != "nonrelevant":
            parts.append(f"unjudged={self.unjudged}")
        if self.unjudged_below is not None:
            parts.append(f"unjudged_below={_fmt_number(self.unjudged_below)}")
        if self.score_dtype != "float64":
            parts.append(f"scores={self.score_dtype}")
        if qrels and kind not in ("dcg", "err", "rbp", "rbp_resid", "opa", "arp", "arp_graded", "judged"):  # |R|, ideal from the qrels
            parts.append("R=qrels")
        return f"{short_name}[{','.join(parts)}]"


def _fields(kind: str) -> tuple:
    if kind in _FIELDS_BY_KIND:
        return _FIELDS_BY_KIND[kind]
    if kind in COUNT_KINDS:
        return _TREC_COUNT_FIELDS
    return _TREC_GAIN_FIELDS if kind in GAIN_KINDS else _TREC_FIELDS


PRESETS: dict[str, Conventions] = {
    "toolkit": Conventions(),
    # trec_eval 9.0.x / pytrec_eval: gain = level, negative levels are unjudged (worth 0; -J removes them), ties by docno descending,
    # scores compared as float32, empty queries 0 and counted, |R| and the ideal from the qrels.
    "trec_eval": Conventions(
        gain="linear", empty="zero", ties="docid_desc", unjudged_below=0.0, score_dtype="float32"
    ),
    # scikit-learn ndcg_score / dcg_score: linear gain, tie-averaged DCG, a query without relevant item is 0.
    "sklearn": Conventions(gain="linear", empty="zero", ties="average"),
    # LightGBM ndcg@k / map@k: label_gain 2^i - 1, stable sort, empty query 1, AP@K / min(|R|, K).
    "lightgbm": Conventions(gain="exp2", empty="one", ties="stable", map_norm="min(R,K)"),
    # ranx: ndcg linear (its ndcg_burges = gain exp2), grades below the relevance level removed from
    # the qrels (so worth 0), input order on ties (short lists), empty query 0.
    "ranx": Conventions(gain="linear", empty="zero", ties="stable", zero_gain_below="threshold"),
}


def get_conventions(preset: str | Conventions | None = None, **overrides: Any) -> Conventions:
    """Conventions of ``preset`` (default: the toolkit's), with keyword ``overrides`` applied.

    >>> get_conventions("lightgbm").map_norm
    'min(R,K)'
    >>> get_conventions("trec_eval", threshold=2).threshold
    2
    """
    if isinstance(preset, Conventions):
        base = preset
    elif preset is None:
        base = PRESETS["toolkit"]
    else:
        try:
            base = PRESETS[preset]
        except KeyError:
            raise ValueError(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}") from None
    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(overrides) - {f.name for f in dataclasses.fields(Conventions)}
    if unknown:
        raise TypeError(f"unknown convention(s): {', '.join(sorted(unknown))}")
    return dataclasses.replace(base, **overrides) if overrides else base
