"""trec_eval's per-query measures under trec_eval's names, vectorized over many queries.

trec_eval (9.0.x, as pytrec_eval runs it) first turns each query's run into a ranked list of
relevance *codes*: the judged level (a non-negative integer) of each retrieved document, ``-1`` for
a document absent from the qrels (not in the pool) and ``-2`` for one whose qrels level is negative
(in the pool but not judged). It also counts, over the qrels, how many documents each level has.
Every measure reads only these. With rank r = 1..n, t the relevance level (``-l``, the
conventions' ``threshold``), rel_r = [code_r >= t], hits(r) = sum_{i<=r} rel_i, R the number of
qrels documents of level >= t and N the number of qrels documents of level in [0, t):

    bpref      = (1/R) sum_{rel r} (1 - min(nr_r, R) / min(N, R)  if nr_r > 0 else 1)
                 nr_r = judged non-relevant (level in [0, t)) ranked above r
    infAP      = (1/R) sum_{rel r} (1 if r = 1 else 1/r + ((r-1)/r) * (a_r/(r-1))
                 * (rb_r + e) / (rb_r + nr_r + 2e)),  rb_r = relevant above r,
                 a_r = rb_r + nr_r + (pool-unjudged above r), e = 1e-5
    gm_map     = log(max(AP, 1e-5))      gm_bpref = log(max(bpref, 1e-5))  (mean: exp of the mean)
    iprec_at_recall_x = max_{r >= r_c} hits(r)/r,  r_c = rank of the c-th relevant document,
                 c = floor(x R + 0.9); 0 when c > hits(n); c = 0 gives max_r hits(r)/r
    11pt_avg   = mean of iprec_at_recall over its recall levels (default 0, 0.1, ..., 1)
    relative_P_k = hits(min(k, n)) / min(k, R)
    Rprec_mult_x = hits(min(c, n)) / c,  c = floor(x R + 0.9) (0 when c = 0)
    binG       = (1/R) sum_{rel r} 1 / log2(2 + non-relevant ranked above r)
    G          = (1/sum I) sum_r g_r / log2(2 + sum_{i<=r} max(I_i, 1) - sum_{i<=r} g_i)
    ndcg       = DCG / IDCG over all ranks (gains per level, default the level itself)
    ndcg_rel   = (1/|I|) [sum_{r: g_r > 0} DCG@r / IDCG@min(r, |I|) + (|I| - #{r: g_r > 0}) DCG / IDCG]
    Rndcg      = mean over the ideal's gain boundaries b (I_b != I_{b+1}) of DCG@min(b, n) / IDCG@b,
                 with one more term DCG@n / IDCG when n > |I| + 1 (0 when R = 0)
    set_P = hits(n)/n   set_recall = hits(n)/R   set_F = (b+1) P Rc / (b P + Rc)   set_map = P Rc
    set_relative_P = hits(n) / min(n, R)
    utility    = a hits(n) + b (n - hits(n)) + c (R - hits(n)) + d (-n - R + hits(n))  (default 1,-1,0,0)
    num_ret = n, num_rel = R, num_rel_ret = hits(n), num_nonrel_judged_ret = judged with level < t

where g_r is the gain of the document at rank r (0 for codes < 0) and I_1 >= I_2 >= ... the
positive gains of every qrels document sorted descending (the ideal ranking). The measures that
trec_eval shares with the toolkit (map, ndcg, ndcg_cut_k, map_cut_k, P_k, recall_k, Rprec,
recip_rank, success_k) are computed by :class:`metrics.ranking.RankedLists`.

Names and trec_eval's parameter syntax (``-m P.5,10``): ``P_5``, ``iprec_at_recall_0.10``,
``Rprec_mult_0.20`` and ``relative_P_5`` name one value; ``P.5,10`` expands to ``P_5, P_10``;
``ndcg.1=3,2=9`` (gains per level; also ndcg_rel, Rndcg, G), ``utility.2,-1,0,0``, ``set_F.0.5`` and
``11pt_avg.0.2,0.5,0.8`` keep their parameters in the name. A bare cutoff family with no meaning of
its own (``relative_P``, ``iprec_at_recall``, ``Rprec_mult``, ``map_cut``, ``ndcg_cut``) expands to
trec_eval's default cutoffs; ``all_trec`` expands to every per-query measure of ``trec_eval -m all_trec``.

Where the conventions differ from trec_eval's, these measures follow them: ``ties`` and
``score_dtype`` order the list, ``threshold`` is t, ``unjudged="remove"`` is ``-J`` (codes < 0
dropped after ranking), and a query with R = 0 (for the gain measures: no positive ideal gain)
scores by ``empty`` (the counts and utility are never empty). Labels are read as trec_eval reads
qrels: integers, negative meaning "in the pool, not judged", NaN (absent from the qrels) "not in the
pool". One deliberate difference: trec_eval sorts custom gains after truncating their differences
to integers (its comparison returns ``(int)(g1 - g2)``), so custom gains closer than 1 may order
arbitrarily there; here they are sorted exactly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from metrics._cached import cached_attribute
from typing import Any

import numpy as np

# COUNT_KINDS and GAIN_KINDS live in metrics.conventions (the stamped names need them); they stay
# importable from here.
from metrics.conventions import COUNT_KINDS, GAIN_KINDS, Conventions  # noqa: F401
from metrics.gains import gain_values
from metrics.ranking import RankedLists, _numpy

__all__ = [
    "TREC_CUTOFFS",
    "TREC_SUCCESS_CUTOFFS",
    "TREC_RECALL_LEVELS",
    "TREC_RPREC_MULTS",
    "ALL_TREC",
    "TREC_KINDS",
    "TrecLists",
    "expand_trec_name",
    "parse_trec_name",
]

TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
TREC_SUCCESS_CUTOFFS = (1, 5, 10)
TREC_RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
TREC_RPREC_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
MIN_GEO_MEAN = 1e-5  # trec_eval's floor before the log of the gm_ measures
INFAP_EPSILON = 1e-5


def _cut(prefix: str, values) -> list[str]:
    return [f"{prefix}_{v}" for v in values]


def _level(prefix: str, values) -> list[str]:
    return [f"{prefix}_{v:.2f}" for v in values]


# trec_eval 9.0.x `-m all_trec -q`, in its order (runid, num_q and relstring are not per-query numbers)
ALL_TREC = [
    "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    *_level("iprec_at_recall", TREC_RECALL_LEVELS), *_cut("P", TREC_CUTOFFS),
    *_cut("relative_P", TREC_CUTOFFS), *_cut("recall", TREC_CUTOFFS), "infAP", "gm_bpref",
    *_level("Rprec_mult", TREC_RPREC_MULTS), "utility", "11pt_avg", "binG", "G", "ndcg", "ndcg_rel",
    "Rndcg", *_cut("ndcg_cut", TREC_CUTOFFS), *_cut("map_cut", TREC_CUTOFFS), "num_nonrel_judged_ret",
    "set_P", "set_recall", "set_map", "set_F", "set_relative_P", *_cut("success", TREC_SUCCESS_CUTOFFS),
]

# lower-case trec name -> kind (the measures RankedLists computes are mapped by metrics.evaluate)
_SINGLE = {
    "bpref": "bpref", "gm_bpref": "gm_bpref", "gm_map": "gm_map", "infap": "infap", "11pt_avg": "11pt_avg",
    "ndcg_rel": "ndcg_rel", "rndcg": "rndcg", "g": "g", "bing": "bing", "set_p": "set_p",
    "set_recall": "set_recall", "set_f": "set_f", "set_map": "set_map", "set_relative_p": "set_relative_p",
    "num_ret": "num_ret", "num_rel": "num_rel", "num_rel_ret": "num_rel_ret",
    "num_nonrel_judged_ret": "num_nonrel_judged_ret", "utility": "utility",
}
TREC_KINDS = tuple(sorted(set(_SINGLE.values()) | {"iprec", "relative_p", "rprec_mult", "trec_ndcg"}))
GEOMETRIC_KINDS = ("gm_map", "gm_bpref")
# trec_eval's summary of these is the sum over the queries, not the mean ("Summary figure is sum of
# individual topics, not average", m_num_ret.c and its siblings); utility's is the mean
SUMMED_KINDS = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")

_INT_FAMILIES = {"p": "P", "recall": "recall", "relative_p": "relative_P", "map_cut": "map_cut",
                 "ndcg_cut": "ndcg_cut", "success": "success"}
_FLOAT_FAMILIES = {"iprec_at_recall": "iprec_at_recall", "rprec_mult": "Rprec_mult"}
_DEFAULTS = {"relative_p": TREC_CUTOFFS, "map_cut": TREC_CUTOFFS, "ndcg_cut": TREC_CUTOFFS,
             "iprec_at_recall": TREC_RECALL_LEVELS, "rprec_mult": TREC_RPREC_MULTS}
_GAIN_PARAM = re.compile(r"^(\d+)=(-?\d*\.?\d+(?:[eE]-?\d+)?)$")
_NUMBER = re.compile(r"^-?\d*\.?\d+(?:[eE][-+]?\d+)?$")


def is_param_token(token: str) -> bool:
    """Whether a comma-separated token continues a dotted parameter list (``P.5,10``: the ``10``)."""
    return bool(_NUMBER.match(token) or _GAIN_PARAM.match(token))


def expand_trec_name(name: str) -> list[str] | None:
    """trec_eval's expansions: ``all_trec``, cutoff lists ``P.5,10`` and bare cutoff families.

    Returns the list of names, or None when ``name`` is not an expansion.

    >>> expand_trec_name("P.5,10")
    ['P_5', 'P_10']
    >>> expand_trec_name("iprec_at_recall.0.1,.25")
    ['iprec_at_recall_0.10', 'iprec_at_recall_0.25']
    >>> expand_trec_name("ndcg_cut")[:2]
    ['ndcg_cut_5', 'ndcg_cut_10']
    """
    if name == "all_trec":
        return list(ALL_TREC)
    family, _, params = name.partition(".")
    low = family.lower()
    if low in _DEFAULTS and not params and "[" not in name:
        return _expand(low, _DEFAULTS[low])
    if not params or (low not in _INT_FAMILIES and low not in _FLOAT_FAMILIES):
        return None
    values = [v for v in params.split(",") if v]
    try:
        parsed = [int(v) for v in values] if low in _INT_FAMILIES else [float(v) for v in values]
    except ValueError:
        raise ValueError(f"metric {name!r}: {family} takes a comma-separated list of "
                         f"{'integer cutoffs' if low in _INT_FAMILIES else 'numbers'}") from None
    if not parsed:
        raise ValueError(f"metric {name!r}: no parameter after the dot")
    return _expand(low, parsed)


def _expand(low: str, values) -> list[str]:
    if low in _INT_FAMILIES:
        return _cut(_INT_FAMILIES[low], values)
    return _level(_FLOAT_FAMILIES[low], values)


@dataclass(frozen=True)
class TrecSpec:
    """A parsed trec_eval-only measure: its kind and parameters."""

    kind: str
    params: tuple = ()


def parse_trec_name(short: str) -> TrecSpec | None:
    """The trec_eval-only measure named ``short`` (one value), or None if it is not one.

    >>> parse_trec_name("iprec_at_recall_0.10")
    TrecSpec(kind='iprec', params=(0.1,))
    >>> parse_trec_name("utility.2,-1,0,0")
    TrecSpec(kind='utility', params=(2.0, -1.0, 0.0, 0.0))
    >>> parse_trec_name("ndcg.1=3,2=9")
    TrecSpec(kind='trec_ndcg', params=((1, 3.0), (2, 9.0)))
    >>> parse_trec_name("iprec_at_recall_1.5")
    Traceback (most recent call last):
    ...
    ValueError: metric 'iprec_at_recall_1.5': a recall level must be in [0, 1], got 1.5
    """
    spec = _parse_trec_name(short)
    return spec if spec is None else _check_params(short, spec)


# the parameters each parameterised measure accepts: (test, what it must be)
_PARAM_RULES = {
    "iprec": (lambda x: 0.0 <= x <= 1.0, "a recall level must be in [0, 1]"),
    "11pt_avg": (lambda x: 0.0 <= x <= 1.0, "a recall level must be in [0, 1]"),
    "rprec_mult": (lambda x: 0.0 < x < math.inf, "the multiple of R must be a finite number > 0"),
    "set_f": (lambda x: 0.0 <= x < math.inf, "the weight of recall must be a finite number >= 0"),
    "utility": (math.isfinite, "the coefficients must be finite numbers"),
}


def _check_params(short: str, spec: TrecSpec) -> TrecSpec:
    """Refuse a parameter outside the measure's domain (``iprec_at_recall_1.5`` would be 0 for every
    query, silently; trec_eval itself takes any number)."""
    if spec.kind in GAIN_KINDS:
        bad = [g for _, g in spec.params if not math.isfinite(g)]
        if bad:
            raise ValueError(f"metric {short!r}: a gain must be a finite number, got {bad[0]}")
        return spec
    rule = _PARAM_RULES.get(spec.kind)
    if rule is not None:
        for x in spec.params:
            if not rule[0](x):
                raise ValueError(f"metric {short!r}: {rule[1]}, got {x:g}")
    return spec


def _parse_trec_name(short: str) -> TrecSpec | None:
    m = re.match(r"^(iprec_at_recall|rprec_mult|relative_p)_(\d*\.?\d+)$", short.lower())
    base, _, params = short.partition(".")
    low = base.lower()
    if m:
        family, value = m.groups()
        if family == "relative_p":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"metric {short!r}: the cutoff must be a positive integer")
            return TrecSpec("relative_p", (int(value),))
        return TrecSpec("iprec" if family == "iprec_at_recall" else "rprec_mult", (float(value),))
    if low in ("ndcg", "ndcg_rel", "rndcg", "g") and (params or low != "ndcg"):
        kind = {"ndcg": "trec_ndcg"}.get(low, low)
        return TrecSpec(kind, _gain_params(short, params))
    if low not in _SINGLE:
        return None
    kind = _SINGLE[low]
    if not params:
        return TrecSpec(kind, _DEFAULT_PARAMS.get(kind, ()))
    values = _numbers(short, params)
    if kind == "utility" and len(values) != 4:
        raise ValueError(f"metric {short!r}: utility takes 4 coefficients (retrieved relevant, retrieved "
                         "non-relevant, missed relevant, non-retrieved non-relevant)")
    if kind == "set_f" and len(values) != 1:
        raise ValueError(f"metric {short!r}: set_F takes one parameter (the weight of recall)")
    if kind not in ("utility", "set_f", "11pt_avg"):
        raise ValueError(f"metric {short!r}: {base} takes no parameter")
    return TrecSpec(kind, values)


_DEFAULT_PARAMS = {"utility": (1.0, -1.0, 0.0, 0.0), "set_f": (1.0,), "11pt_avg": TREC_RECALL_LEVELS}


def _numbers(short: str, params: str) -> tuple:
    try:
        return tuple(float(v) for v in params.split(",") if v)
    except ValueError:
        raise ValueError(f"metric {short!r}: parameters must be numbers") from None


def _gain_params(short: str, params: str) -> tuple:
    pairs = []
    for part in (p for p in params.split(",") if p):
        m = _GAIN_PARAM.match(part)
        if not m:
            raise ValueError(f"metric {short!r}: gains are given as level=gain pairs (ndcg.1=3,2=9)")
        pairs.append((int(m.group(1)), float(m.group(2))))
    return tuple(pairs)


# ---------------------------------------------------------------------------- the ranked codes
def _seg_cumsum(x: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum of ``x`` restarting at each segment.

    Integers: one running sum minus its value at each segment start (exact). Floats: each
    segment's sum runs from 0 in rank order, ``out[a + p] = out[a + p - 1] + x[a + p]``, as
    trec_eval adds; subtracting a running sum over all the segments before would make the last bits
    depend on the queries before (and a share of the queries evaluated alone would differ).
    """
    if x.size == 0 or np.issubdtype(x.dtype, np.integer):
        c = np.cumsum(x)
        return c if c.size == 0 else c - np.repeat(np.concatenate([[0], c])[starts], lengths)
    out = np.empty(x.shape, dtype=np.result_type(x.dtype, np.float64))
    long = lengths > _LONG_SEGMENT
    for a, n in zip(starts[long].tolist(), lengths[long].tolist()):
        np.cumsum(x[a:a + n], out=out[a:a + n])  # np.cumsum adds in order
    by_length = np.argsort(-np.where(long, 0, lengths), kind="stable")  # the short segments, longest first
    first, n_active = starts[by_length], np.where(long, 0, lengths)[by_length]
    for p in range(int(n_active[0]) if n_active.size else 0):
        k = int(np.searchsorted(-n_active, -p, side="left"))  # segments with more than p items
        idx = first[:k] + p
        out[idx] = x[idx] if p == 0 else out[idx - 1] + x[idx]
    return out


_LONG_SEGMENT = 512  # longer segments are summed one by one (np.cumsum), shorter ones by rank position


class TrecLists:
    """trec_eval's ranked relevance codes and level counts of many queries, and its measures.

    ``labels`` [N]: qrels level of each retrieved document (NaN = not in the qrels, negative = in
    the pool but not judged); ``qrels_labels``/``qrels_offsets``: every judged document of each query
    (None: the retrieved ones). Ordering follows ``conventions`` (ties, score dtype), as does
    ``unjudged="remove"`` (trec_eval -J).
    """

    def __init__(self, scores: Any, labels: Any, query_offsets: Any, conventions: Conventions, *,
                 doc_ids: Any = None, qrels_labels: Any = None, qrels_offsets: Any = None,
                 perm: Any = None) -> None:
        y = _numpy(labels, np.float64).reshape(-1)
        judged = y[~np.isnan(y)]
        if judged.size and not np.array_equal(judged, np.floor(judged)):
            raise ValueError("trec_eval's measures read integer relevance levels; the labels have fractions")
        codes = np.where(np.isnan(y), -1.0, np.where(y < 0, -2.0, y))
        if perm is None:  # (``perm``: the same rows already ranked under these conventions, to share a sort)
            order_conv = conventions.replace(unjudged="nonrelevant", unjudged_below=None, zero_gain_below=None)
            rl = RankedLists(scores, codes, query_offsets, order_conv, doc_ids=doc_ids)
            perm, offsets = rl.perm, rl.offsets
        else:
            offsets = np.asarray(query_offsets, dtype=np.int64)
        ranked = codes[perm].astype(np.int64)
        if conventions.unjudged == "remove":  # trec_eval -J: drop codes < 0, keeping the order
            keep = ranked >= 0
            ck = np.concatenate([[0], np.cumsum(keep)])
            offsets = ck[offsets].astype(np.int64)
            ranked = ranked[keep]
        self.conventions = conventions
        self.threshold = float(conventions.threshold)
        self.codes = ranked
        self.offsets = offsets
        self.lengths = np.diff(offsets)
        self.starts = offsets[:-1]
        self.n_queries = self.lengths.size
        self.qidx = np.repeat(np.arange(self.n_queries, dtype=np.int64), self.lengths)
        self.pos = np.arange(ranked.size, dtype=np.int64) - np.repeat(self.starts, self.lengths)
        self.levels = self._level_counts(y, query_offsets, qrels_labels, qrels_offsets)
        self._gain_cache: dict = {}

    def _level_counts(self, y, query_offsets, qrels_labels, qrels_offsets) -> np.ndarray:
        """[Q, L] number of judged documents (level >= 0) at each level 0..L-1, over the qrels."""
        if qrels_labels is None:
            lab, off = y, np.asarray(query_offsets, dtype=np.int64)
        else:
            lab = _numpy(qrels_labels, np.float64).reshape(-1)
            off = np.asarray(qrels_offsets, dtype=np.int64)
            if off.size != self.n_queries + 1:
                raise ValueError(f"qrels_offsets describes {off.size - 1} queries, the run {self.n_queries}")
            ok = lab[~np.isnan(lab)]
            if ok.size and not np.array_equal(ok, np.floor(ok)):
                raise ValueError("trec_eval's measures read integer relevance levels; the qrels have fractions")
        q = np.repeat(np.arange(self.n_queries, dtype=np.int64), np.diff(off))
        keep = lab >= 0  # NaN and negative levels are not judged
        lv, q = lab[keep].astype(np.int64), q[keep]
        n_levels = int(lv.max()) + 1 if lv.size else 1
        counts = np.bincount(q * n_levels + lv, minlength=self.n_queries * n_levels)
        return counts.reshape(self.n_queries, n_levels)

    # ---- shared counts ----------------------------------------------------------------------
    @cached_attribute
    def is_rel(self) -> np.ndarray:
        return self.codes >= self.threshold

    @cached_attribute
    def hits(self) -> np.ndarray:
        """[N'] relevant documents at ranks 1..r (inclusive)."""
        return _seg_cumsum(self.is_rel.astype(np.int64), self.starts, self.lengths)

    def _count(self, flags: np.ndarray) -> np.ndarray:
        return np.bincount(self.qidx, weights=flags, minlength=self.n_queries)

    @cached_attribute
    def num_rel(self) -> np.ndarray:
        lv = np.arange(self.levels.shape[1])
        return self.levels[:, lv >= self.threshold].sum(axis=1).astype(np.float64)

    @cached_attribute
    def num_nonrel(self) -> np.ndarray:
        lv = np.arange(self.levels.shape[1])
        return self.levels[:, lv < self.threshold].sum(axis=1).astype(np.float64)

    @cached_attribute
    def rel_ret(self) -> np.ndarray:
        return self._count(self.is_rel)

    def hits_at(self, k: np.ndarray) -> np.ndarray:
        """[Q] relevant documents among the first min(k, n) (k a [Q] integer array)."""
        k = np.minimum(np.asarray(k, dtype=np.int64), self.lengths)
        at = np.concatenate([[0], self.hits])[np.where(k > 0, self.starts + k, 0)]
        return np.where(k > 0, at, 0).astype(np.float64)

    def _before(self, flags: np.ndarray) -> np.ndarray:
        """[N'] number of ``flags`` strictly above each rank."""
        f = flags.astype(np.int64)
        return _seg_cumsum(f, self.starts, self.lengths) - f

    @cached_attribute
    def _judged_nonrel(self) -> np.ndarray:
        return (self.codes >= 0) & ~self.is_rel

    def _per_relevant(self, values: np.ndarray) -> np.ndarray:
        """[Q] sum over the relevant retrieved documents of ``values`` [N']."""
        return np.bincount(self.qidx[self.is_rel], weights=values[self.is_rel], minlength=self.n_queries)

    @staticmethod
    def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)

    # ---- measures ---------------------------------------------------------------------------
    def measure(self, spec: TrecSpec) -> np.ndarray:
        """[Q] per-query values of the trec_eval measure ``spec`` (before the empty rule)."""
        return getattr(self, "_m_" + spec.kind)(*spec.params)

    def values(self, spec: TrecSpec, empty: str) -> np.ndarray:
        """[Q] per-query values with the ``empty`` rule applied (for gm_, to the value before the log)."""
        fill = {"skip": np.nan, "zero": 0.0, "one": 1.0}[empty]
        is_empty = self.is_empty(spec.kind)
        if spec.kind in GEOMETRIC_KINDS:
            base = self._ap() if spec.kind == "gm_map" else self._m_bpref()
            return np.log(np.maximum(np.where(is_empty, fill, base), MIN_GEO_MEAN))  # NaN stays NaN
        return np.where(is_empty, fill, self.measure(spec))

    def is_empty(self, kind: str) -> np.ndarray:
        """[Q] queries that score by the ``empty`` rule for ``kind`` (none for counts and utility)."""
        if kind in COUNT_KINDS:
            return np.zeros(self.n_queries, dtype=bool)
        if kind in ("trec_ndcg", "ndcg_rel", "g"):
            return self._ideal_total <= 0
        if kind == "rndcg":
            return (self.num_rel <= 0) | (self._ideal_total <= 0)
        return self.num_rel <= 0

    def _m_num_ret(self):
        return self.lengths.astype(np.float64)

    def _m_num_rel(self):
        return self.num_rel.copy()

    def _m_num_rel_ret(self):
        return self.rel_ret.copy()

    def _m_num_nonrel_judged_ret(self):
        return self._count(self._judged_nonrel)

    def _m_utility(self, a, b, c, d):
        n, rr, r = self.lengths.astype(np.float64), self.rel_ret, self.num_rel
        return a * rr + b * (n - rr) + c * (r - rr) + d * (rr - n - r)  # trec_eval's -N is 0

    def _m_set_p(self):
        return self._div(self.rel_ret, self.lengths.astype(np.float64))

    def _m_set_recall(self):
        return self._div(self.rel_ret, self.num_rel)

    def _m_set_map(self):
        return self._m_set_p() * self._m_set_recall()

    def _m_set_relative_p(self):
        return self._div(self.rel_ret, np.minimum(self.lengths, self.num_rel))

    def _m_set_f(self, beta):
        p, r = self._m_set_p(), self._m_set_recall()
        return self._div((beta + 1.0) * p * r, beta * p + r)

    def _m_relative_p(self, k):
        return self._div(self.hits_at(np.full(self.n_queries, k)), np.minimum(k, self.num_rel))

    def _m_rprec_mult(self, x):
        c = (x * self.num_rel + 0.9).astype(np.int64)  # trec_eval's (long)(x * R + 0.9)
        return self._div(self.hits_at(c), c.astype(np.float64))

    def _ap(self) -> np.ndarray:
        prec = self.hits / (self.pos + 1.0)
        return self._div(self._per_relevant(prec), self.num_rel)

    def _m_gm_map(self):
        return np.log(np.maximum(self._ap(), MIN_GEO_MEAN))

    def _m_bpref(self):
        nr = self._before(self._judged_nonrel).astype(np.float64)
        r = self.num_rel[self.qidx]
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(nr > 0, 1.0 - np.minimum(nr, r) / np.minimum(self.num_nonrel[self.qidx], r), 1.0)
        return self._div(self._per_relevant(term), self.num_rel)

    def _m_gm_bpref(self):
        return np.log(np.maximum(self._m_bpref(), MIN_GEO_MEAN))

    def _m_infap(self):
        j = self.pos.astype(np.float64)  # 0-based rank
        rb = (self.hits - 1).astype(np.float64)
        nr = self._before(self._judged_nonrel).astype(np.float64)
        unj = self._before(self.codes == -2).astype(np.float64)
        e = INFAP_EPSILON
        with np.errstate(divide="ignore", invalid="ignore"):
            later = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((rb + nr + unj) / j) * ((rb + e) / (rb + nr + 2 * e))
        term = np.where(j == 0, 1.0, later)
        return self._div(self._per_relevant(term), self.num_rel)

    def _m_bing(self):
        nonrel_before = (self.pos + 1 - self.hits).astype(np.float64)  # ranks above r not relevant
        return self._div(self._per_relevant(1.0 / np.log2(2.0 + nonrel_before)), self.num_rel)

    @cached_attribute
    def _interpolated(self) -> np.ndarray:
        """[Q, ...] flat over relevant retrieved documents: max precision at or below each one."""
        rel_pos = np.flatnonzero(self.is_rel)
        prec = self.hits[rel_pos] / (self.pos[rel_pos] + 1.0)
        if prec.size == 0:
            return prec
        # reverse cumulative max per query, exact: on integer ranks of the values, queries offset
        uniq, inv = np.unique(prec, return_inverse=True)
        q = self.qidx[rel_pos]
        key = inv.reshape(-1).astype(np.int64) + (self.n_queries - q) * (uniq.size + 1)
        best = np.maximum.accumulate(key[::-1])[::-1]
        return uniq[best - (self.n_queries - q) * (uniq.size + 1)]

    def _m_iprec(self, x):
        c = (x * self.num_rel + 0.9).astype(np.int64)  # trec_eval 9.0.x: (long)(x * R + 0.9)
        rr = self.rel_ret.astype(np.int64)
        first = np.concatenate([[0], np.cumsum(rr)])[:-1]  # index of each query's first relevant doc
        ok = (rr > 0) & (c <= rr)
        idx = first + np.maximum(c, 1) - 1
        inter = self._interpolated
        return np.where(ok, inter[np.minimum(idx, max(inter.size - 1, 0))] if inter.size else 0.0, 0.0)

    def _m_11pt_avg(self, *levels):
        if not levels:
            raise ValueError("11pt_avg needs at least one recall level")
        return np.mean([self._m_iprec(x) for x in levels], axis=0)

    # ---- gain measures ------------------------------------------------------------------------
    def _level_gains(self, pairs: tuple) -> np.ndarray:
        """Gain of each level 0..L-1 (the conventions' gain of the level, overridden by ``pairs``)."""
        n = max([self.levels.shape[1]] + [lv + 1 for lv, _ in pairs])
        g = np.asarray(gain_values(np.arange(n, dtype=np.float64), self.conventions.gain), dtype=np.float64)
        for lv, value in pairs:
            g[lv] = value
        return g

    def _gains(self, pairs: tuple):
        """(results gains [N'], ideal gains flat, ideal offsets [Q+1]) for level gains ``pairs``."""
        if pairs not in self._gain_cache:
            g_level = self._level_gains(pairs)
            codes = self.codes
            g = np.where(codes >= 0, g_level[np.maximum(codes, 0)], 0.0)
            counts = np.zeros((self.n_queries, g_level.size), dtype=np.int64)
            counts[:, :self.levels.shape[1]] = self.levels
            order = np.argsort(-g_level, kind="stable")
            order = order[g_level[order] > 0]  # the ideal holds the positive gains only
            c = counts[:, order]
            ideal = np.repeat(np.tile(g_level[order], self.n_queries), c.reshape(-1))
            ideal_off = np.concatenate([[0], np.cumsum(c.sum(axis=1))]).astype(np.int64)
            self._gain_cache[pairs] = (g, ideal, ideal_off)
        return self._gain_cache[pairs]

    @cached_attribute
    def _ideal_total(self) -> np.ndarray:
        _, ideal, off = self._gains(())
        return np.add.reduceat(np.append(ideal, 0.0), off[:-1]) * (np.diff(off) > 0)

    def _dcg_prefix(self, g: np.ndarray, starts, lengths) -> np.ndarray:
        """[N] DCG at each rank (inclusive) of per-segment gain sequences ``g``."""
        pos = np.arange(g.size) - np.repeat(starts, lengths)
        return _seg_cumsum(g / np.log2(pos + 2.0), starts, lengths)

    def _dcg_tables(self, pairs: tuple):
        g, ideal, ioff = self._gains(pairs)
        dcg = self._dcg_prefix(g, self.starts, self.lengths)
        idcg = self._dcg_prefix(ideal, ioff[:-1], np.diff(ioff))
        n_ideal = np.diff(ioff)
        dcg_full = np.concatenate([[0.0], dcg])[np.where(self.lengths > 0, self.offsets[1:], 0)]
        dcg_full = np.where(self.lengths > 0, dcg_full, 0.0)
        idcg_full = np.where(n_ideal > 0, np.concatenate([[0.0], idcg])[ioff[1:]], 0.0)
        return g, dcg, dcg_full, idcg, ioff, n_ideal, idcg_full

    def _m_trec_ndcg(self, *pairs):
        _, _, dcg_full, _, _, _, idcg_full = self._dcg_tables(pairs)
        return self._div(dcg_full, idcg_full)

    def _m_ndcg_rel(self, *pairs):
        g, dcg, dcg_full, idcg, ioff, n_ideal, idcg_full = self._dcg_tables(pairs)
        pos_gain = g > 0
        q = self.qidx[pos_gain]
        r = self.pos[pos_gain] + 1
        at = ioff[q] + np.minimum(r, n_ideal[q]) - 1  # IDCG@min(r, |I|)
        ok = n_ideal[q] > 0
        terms = np.where(ok, dcg[pos_gain] / np.where(ok, idcg[np.maximum(at, 0)], 1.0), 0.0)
        total = np.bincount(q, weights=terms, minlength=self.n_queries)
        n_pos = np.bincount(q, minlength=self.n_queries)
        total += (n_ideal - n_pos) * self._div(dcg_full, idcg_full)
        return np.where(total > 0, self._div(total, n_ideal.astype(np.float64)), 0.0)

    def _m_rndcg(self, *pairs):
        g, dcg, dcg_full, idcg, ioff, n_ideal, idcg_full = self._dcg_tables(pairs)
        _, ideal, _ = self._gains(pairs)
        if ideal.size == 0:
            return np.zeros(self.n_queries)
        qi = np.repeat(np.arange(self.n_queries), n_ideal)
        nxt = np.append(ideal[1:], 0.0)
        last = np.zeros(ideal.size, dtype=bool)
        last[ioff[1:][n_ideal > 0] - 1] = True
        boundary = last | (ideal != nxt)  # the ideal gain changes after position b
        b = (np.arange(ideal.size) - ioff[qi] + 1)[boundary]
        qb = qi[boundary]
        n = self.lengths[qb]
        m = np.minimum(b, n)
        dcg_b = np.where(m > 0, np.concatenate([[0.0], dcg])[np.where(m > 0, self.starts[qb] + m, 0)], 0.0)
        terms = dcg_b / idcg[boundary]
        total = np.bincount(qb, weights=terms, minlength=self.n_queries)
        count = np.bincount(qb, minlength=self.n_queries).astype(np.float64)
        extra = self.lengths > n_ideal + 1  # trec_eval's implied last boundary at num_ret
        total += np.where(extra, self._div(dcg_full, idcg_full), 0.0)
        count += extra
        return np.where(self.num_rel > 0, self._div(total, count), 0.0)

    def _m_g(self, *pairs):
        g, ideal, ioff = self._gains(pairs)
        n_ideal = np.diff(ioff)
        # ideal gain at each retrieved rank (0 past the ideal's end), and the running cost
        r = self.pos
        inside = r < n_ideal[self.qidx]
        ig = np.where(inside, ideal[np.minimum(ioff[self.qidx] + r, max(ideal.size - 1, 0))] if ideal.size else 0.0, 0.0)
        cost = _seg_cumsum(np.maximum(ig, 1.0), self.starts, self.lengths)
        got = _seg_cumsum(g, self.starts, self.lengths)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(g != 0, g / np.log2(2.0 + cost - got), 0.0)
        total = np.bincount(self.qidx, weights=terms, minlength=self.n_queries)
        ideal_sum = np.add.reduceat(np.append(ideal, 0.0), ioff[:-1]) * (n_ideal > 0)
        return self._div(total, ideal_sum)
