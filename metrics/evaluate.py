"""``metrics.evaluate``: many ranking metrics at once, one shared ordering, conventions-stamped names.

Metric name grammar (case-insensitive kind, optional ``@K``)::

    ndcg | dcg | map | ap | mrr | rr | p | precision | recall | hit | hitrate | rprec   [@K]
    err[@K] | rbp[.P] | rbp_resid[.P] | opa | arp | arp_graded | dcg_burges[@K] | ndcg_burges[@K]
    fallout[@K] | judged[@K]

``rbp.95``, ``rbp.0.95`` and ``rbp.p=0.95`` set the persistence (default 0.8); ``dcg_burges`` and
``ndcg_burges`` are DCG / NDCG with the exponential gain 2^rel - 1 (ranx's names); ``arp_graded``
is ARP weighted by the graded label (:mod:`metrics.order_metrics`); ``fallout`` (torchmetrics'
``RetrievalFallOut``) and ``judged`` (ir_measures' ``Judged``) are in :mod:`metrics.coverage`. trec_eval's
names work too: ``ndcg_cut_K``, ``map_cut_K``, ``P_K``, ``recall_K``, ``success_K``,
``recip_rank``, ``Rprec`` and every other per-query measure of ``trec_eval -m all_trec`` (see
:mod:`metrics.trec_eval`), with trec_eval's parameter syntax (``P.5,10``) and ``all_trec``.
A name may carry a bracketed suffix in the stamped format (``ndcg@10[gain=linear,...]``): its
conventions override the call's for that metric. Each result is keyed by its stamped name, which
begins with the name exactly as asked.

Means are over the queries with a value (NaN = skipped), optionally weighted per query
(``query_weights``); the gm_ measures average as trec_eval does, ``exp(mean of the logs)``, and
trec_eval's counts (``num_ret``, ``num_rel``, ``num_rel_ret``, ``num_nonrel_judged_ret``) are summed
over the queries, trec_eval's and ir_measures' summary figure for them ("sum of individual topics,
not average"): :func:`aggregate_of` names the rule of each measure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from metrics.conventions import Conventions, get_conventions
from metrics.coverage import fallout_values, judged_values
from metrics.order_metrics import arp_values, opa_values
from metrics.plan import top_candidates, top_cutoff
from metrics.ranking import KINDS, RankedLists, _check_offsets, _flat_inputs, _has_nan, _numpy
from metrics.trec_eval import (
    GEOMETRIC_KINDS, SUMMED_KINDS, TREC_KINDS, TrecLists, TrecSpec, expand_trec_name, is_param_token, parse_trec_name,
)
from metrics.user_models import err_values, rbp_values

__all__ = ["evaluate", "EvaluationResult", "parse_metric_name", "higher_is_better", "metric_names", "aggregate_of",
           "unit_bounded"]

# kinds beyond the RankedLists ones: name -> (kind, convention overrides)
_EXTRA = {
    "err": ("err", {}),
    "rbp": ("rbp", {}),
    "rbp_resid": ("rbp_resid", {}),
    "opa": ("opa", {}),
    "ordered_pair_accuracy": ("opa", {}),
    "arp": ("arp", {}),
    "arp_graded": ("arp_graded", {}),
    "dcg_burges": ("dcg", {"gain": "exp2"}),
    "ndcg_burges": ("ndcg", {"gain": "exp2"}),
    "fallout": ("fallout", {}),
    "fall_out": ("fallout", {}),
    "judged": ("judged", {}),
}
_NO_CUTOFF = ("rbp", "rbp_resid", "opa", "arp", "arp_graded")
_NO_AVERAGE_TIES = ("err", "rbp", "rbp_resid", "judged", *TREC_KINDS)
LOWER_IS_BETTER = ("arp", "arp_graded", "num_nonrel_judged_ret", "rbp_resid", "fallout")
# the measures whose every value lies in [0, 1] (an interval of their mean, or of a mean difference in [-1, 1],
# can be clipped there): all but the unnormalised DCGs, ranks and counts
_UNBOUNDED = ("dcg", "arp", "arp_graded", "utility", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
DEFAULT_RBP_P = 0.8

_KIND_ALIASES = {
    "ndcg": "ndcg",
    "dcg": "dcg",
    "map": "ap",
    "ap": "ap",
    "mrr": "rr",
    "rr": "rr",
    "recip_rank": "rr",
    "p": "p",
    "precision": "p",
    "recall": "recall",
    "hit": "hit",
    "hitrate": "hit",
    "hit_rate": "hit",
    "success": "hit",
    "rprec": "rprec",
    "r-precision": "rprec",
    "r_precision": "rprec",
}
_TREC_CUT = re.compile(r"^(ndcg_cut|map_cut|p|recall|success)_(\d+)$", re.IGNORECASE)
_PLAIN = re.compile(r"^([a-z_\-]+)(?:@(\d+))?$", re.IGNORECASE)

# stamped-name field -> Conventions field (fields that only describe, like ideal=, are checked)
_STAMP_FIELDS = {"gain", "discount", "ideal", "empty", "ties", "rel", "norm", "zero_gain_below", "unjudged_below",
                 "unjudged", "scores", "R", "denom", "gmax", "p"}


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: short name as asked, kind, cutoff, convention overrides, parameters."""

    short: str
    kind: str
    k: int | None
    overrides: dict
    params: tuple = ()


def parse_metric_name(name: str) -> tuple[str, str, int | None, dict]:
    """Split a metric name into (short name as asked, kind, cutoff, convention overrides).

    >>> parse_metric_name("ndcg@10")
    ('ndcg@10', 'ndcg', 10, {})
    >>> parse_metric_name("P_5")
    ('P_5', 'p', 5, {})
    >>> parse_metric_name("map@10[rel>=2,norm=min(R,K),empty=zero,ties=stable]")[3]
    {'threshold': 2.0, 'map_norm': 'min(R,K)', 'empty': 'zero', 'ties': 'stable'}
    >>> parse_metric_name("bpref")[1], parse_metric_name("dcg_burges@5")[1:]
    ('bpref', ('dcg', 5, {'gain': 'exp2'}))
    """
    spec = _parse(name)
    return spec.short, spec.kind, spec.k, spec.overrides


def _parse(name: str) -> MetricSpec:
    raw = name.strip()
    overrides: dict = {}
    short = raw
    if raw.endswith("]") and "[" in raw:
        short, inner = raw[:-1].split("[", 1)
        overrides = _parse_stamp(inner, raw)
    m = _TREC_CUT.match(short)
    if m:
        prefix = m.group(1).lower()
        kind = {"ndcg_cut": "ndcg", "map_cut": "ap", "p": "p", "recall": "recall", "success": "hit"}[prefix]
        k = int(m.group(2))
        if k < 1:
            raise ValueError(f"metric {name!r}: the cutoff must be at least 1")
        return MetricSpec(short, kind, k, overrides)
    trec = parse_trec_name(short)
    if trec is not None:
        return MetricSpec(short, trec.kind, None, overrides, trec.params)
    base, _, param = short.partition(".")
    m = _PLAIN.match(base)
    word = m.group(1).lower() if m else None
    if word in ("rbp", "rbp_resid") and (param or "@" not in base):
        return MetricSpec(short, word, None, overrides, (_persistence(name, param),))
    if not m or param or (word not in _KIND_ALIASES and word not in _EXTRA):
        raise ValueError(
            f"unknown metric {name!r}: use ndcg, dcg, map/ap, mrr/rr, p/precision, recall, hit/hitrate, rprec, "
            "err, rbp, rbp_resid, opa, arp, arp_graded, dcg_burges, ndcg_burges, fallout or judged, optionally with @K "
            "(e.g. ndcg@10), "
            "or a trec_eval measure name (all_trec lists them all)"
        )
    k = None if m.group(2) is None else int(m.group(2))
    if k is not None and k < 1:
        raise ValueError(f"metric {name!r}: the cutoff must be at least 1")
    if word in _KIND_ALIASES:
        return MetricSpec(short, _KIND_ALIASES[word], k, overrides)
    kind, forced = _EXTRA[word]
    if k is not None and kind in _NO_CUTOFF:
        raise ValueError(f"metric {name!r}: {word} takes no @K cutoff")
    return MetricSpec(short, kind, k, {**forced, **overrides})


def _persistence(name: str, param: str) -> float:
    """RBP's p from ``rbp``, ``rbp.0.95``, ``rbp.95`` (ranx: the digits after "0.") or ``rbp.p=0.95``."""
    if not param:
        return DEFAULT_RBP_P
    text = param[2:] if param.startswith("p=") else param
    try:
        p = float(text) if ("." in text or text.startswith("p=") or param.startswith("p=")) else float("0." + text)
    except ValueError:
        raise ValueError(f"metric {name!r}: cannot read the persistence {param!r} (e.g. rbp.0.95)") from None
    if not 0.0 < p < 1.0:
        raise ValueError(f"metric {name!r}: the persistence must lie strictly between 0 and 1")
    return p


def higher_is_better(name: str) -> bool:
    """Whether larger values of metric ``name`` (short or stamped) are better: False for ARP,
    num_nonrel_judged_ret and the RBP residual.

    >>> higher_is_better("ndcg@10"), higher_is_better("arp[rel>=1,empty=skip,ties=stable]")
    (True, False)
    """
    return _parse(name).kind not in LOWER_IS_BETTER


def aggregate_of(name: str) -> str:
    """How the summary of measure ``name`` is made from its per-query values: ``"mean"``,
    ``"geometric mean"`` (gm_map, gm_bpref) or ``"sum"`` (trec_eval's counts).

    >>> aggregate_of("ndcg@10"), aggregate_of("num_rel_ret"), aggregate_of("gm_map")
    ('mean', 'sum', 'geometric mean')
    """
    try:
        kind = _parse(name.split("[", 1)[0]).kind  # the stamp does not change the rule
    except ValueError:  # a measure of another module (alpha_ndcg): a mean
        return "mean"
    return "sum" if kind in SUMMED_KINDS else "geometric mean" if kind in GEOMETRIC_KINDS else "mean"


def unit_bounded(name: str) -> bool:
    """Whether every per-query value of measure ``name`` lies in [0, 1] (NDCG, MAP, P, fall-out...;
    not DCG, ARP, utility or the counts).

    >>> unit_bounded("ndcg@10"), unit_bounded("dcg@10"), unit_bounded("num_ret")
    (True, False, False)
    """
    try:
        return _parse(name.split("[", 1)[0]).kind not in _UNBOUNDED
    except ValueError:  # a measure of another module: no range known
        return False


def _split_outside(text: str, opening: str, closing: str) -> list[str]:
    """Split ``text`` on the commas that are not inside brackets (any of ``opening`` / ``closing``).

    >>> _split_outside("a,min(R,K),b", "(", ")")
    ['a', 'min(R,K)', 'b']
    """
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch in opening
        depth -= ch in closing
        cur += ch
    parts.append(cur)
    return parts


def _parse_stamp(inner: str, name: str) -> dict:
    out: dict = {}
    parts = _split_outside(inner, "(", ")")  # commas inside min(R,K) do not split
    if not parts[-1]:
        parts.pop()
    for part in parts:
        if part.startswith("rel>="):
            out["threshold"] = float(part[5:])
            continue
        if "=" not in part:
            raise ValueError(f"metric {name!r}: cannot read convention {part!r}")
        key, value = part.split("=", 1)
        if key not in _STAMP_FIELDS:
            raise ValueError(f"metric {name!r}: unknown convention {key!r}")
        if key == "ideal":
            if value != "min(R,K)":
                raise ValueError(f"metric {name!r}: only ideal=min(R,K) is implemented")
        elif key in ("R", "p"):
            pass  # describes the data (qrels given) or repeats the name's parameter
        elif key == "denom":
            out["p_denominator"] = value
        elif key == "gmax":
            out["max_grade"] = float(value)
        elif key == "norm":
            out["map_norm"] = value
        elif key == "scores":
            out["score_dtype"] = value
        elif key in ("zero_gain_below", "unjudged_below"):
            out[key] = float(value)
        elif key == "discount" and value != "log2":
            raise ValueError(f"metric {name!r}: discount {value!r} cannot be given by name; pass discount=")
        elif key == "gain" and value not in ("exp2", "linear"):
            raise ValueError(f"metric {name!r}: gain {value!r} cannot be given by name; pass gain=")
        else:
            out[key] = value
    return out


@dataclass
class EvaluationResult:
    """Per-query values and means of several metrics, keyed by stamped name.

    per_query : {stamped name: [Q] float64 (NaN where a query is skipped)}
    mean : {stamped name: mean over the non-NaN queries (NaN if none); weighted by
        ``query_weights`` when given; exp(mean of the logs) for the gm_ measures; the sum for
        trec_eval's counts (:func:`aggregate_of`)}
    names : {short name as asked: stamped name}
    counted : {stamped name: number of queries in the mean}
    query_ids : the query ids, when given
    """

    per_query: dict = field(default_factory=dict)
    mean: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)
    counted: dict = field(default_factory=dict)
    conventions: Conventions | None = None
    query_ids: Any = None
    query_weights: Any = None

    def __getitem__(self, short_name: str) -> float:
        """Mean of a metric by its short name (``result["ndcg@10"]``) or stamped name."""
        return self.mean[self.names.get(short_name, short_name)]

    def short_names(self) -> dict:
        """{stamped name: short name as asked}."""
        return {stamped: short for short, stamped in self.names.items()}

    def as_dict(self, per_query: bool = False) -> dict:
        """JSON-ready, keyed by the short names as asked (a skipped value stays NaN)::

            {"mean": {short: mean},
             "metrics": {short: {"stamped": stamped name, "mean": mean, "queries": n counted,
                                 "aggregate": "mean" | "geometric mean" | "sum"}},
             "per_query": {query id: {short: value}}}      (only when ``per_query``)

        Query ids are ``query_ids`` when given, else the positions "0", "1", ...
        """
        out: dict = {"mean": {}, "metrics": {}}
        for short, stamped in self.names.items():
            out["mean"][short] = self.mean[stamped]
            out["metrics"][short] = {"stamped": stamped, "mean": self.mean[stamped], "queries": self.counted[stamped],
                                     "aggregate": aggregate_of(short)}
        if per_query:
            n = len(next(iter(self.per_query.values()), []))
            ids = [str(q) for q in self.query_ids] if self.query_ids is not None else [str(i) for i in range(n)]
            out["per_query"] = {q: {short: float(self.per_query[stamped][i]) for short, stamped in self.names.items()}
                                for i, q in enumerate(ids)}
        return out

    def table(self) -> str:
        """A plain-text table: stamped name, mean, number of queries counted; a last line names the
        measures summarised otherwise (trec_eval's counts: summed; gm_ measures: geometric mean)."""
        width = max((len(n) for n in self.mean), default=6)
        lines = [f"{'metric':<{width}}  {'mean':>10}  {'queries':>7}"]
        for name, value in self.mean.items():
            lines.append(f"{name:<{width}}  {value:>10.6f}  {self.counted[name]:>7d}")
        other = {rule: [s for s in self.names if aggregate_of(s) == rule] for rule in ("sum", "geometric mean")}
        notes = [f"{', '.join(names)}: the {rule} over the queries" for rule, names in other.items() if names]
        if notes:
            lines.append(f"({'; '.join(notes)}, as trec_eval summarises them)")
        return "\n".join(lines)


def _metric_list(metrics: str | Iterable[str]) -> list[str]:
    if isinstance(metrics, str):
        # commas inside brackets do not split, so stamped names can be listed
        tokens = [m.strip() for m in _split_outside(metrics, "([", ")]") if m.strip()]
    else:
        tokens = [str(m) for m in metrics]
    # trec_eval's parameter lists (P.5,10 / ndcg.1=3,2=9): a bare number continues the previous name
    merged: list[str] = []
    for token in tokens:
        if merged and "." in merged[-1] and "[" not in merged[-1] and is_param_token(token):
            merged[-1] += "," + token
        else:
            merged.append(token)
    return merged


def metric_names(metrics: str | Iterable[str]) -> list[str]:
    """The single metric names a metrics argument asks for (``all_trec`` and ``P.5,10`` expanded).

    >>> metric_names("ndcg@10,P.5,10,map")
    ['ndcg@10', 'P_5', 'P_10', 'map']
    """
    out: list[str] = []
    for name in _metric_list(metrics):
        short, bracket = (name.split("[", 1) + [""])[:2] if name.endswith("]") else (name, "")
        expanded = expand_trec_name(short.strip())
        if expanded is None:
            out.append(name)
        else:
            out.extend(e + (f"[{bracket}" if bracket else "") for e in expanded)
    return out


class _Lists:
    """The orderings one evaluate() call shares: one RankedLists / TrecLists per conventions.

    ``plan`` maps ``id(conventions)`` to the cutoff K of a group whose measures read the top K only
    (:func:`metrics.plan.top_cutoff`): that group ranks the top-K candidates of each query alone.
    """

    def __init__(self, s, labels, offsets, doc_ids, item_gain, qrels_labels, qrels_offsets, plan=None):
        self.args = (s, labels, offsets)
        self.doc_ids, self.item_gain = doc_ids, item_gain
        self.qrels = (qrels_labels, qrels_offsets)
        self.plan = plan or {}
        self._ranked: dict = {}  # id(conventions) -> (conventions, lists); tables and callables are unhashable
        self._trec: dict = {}

    def ranked(self, conv: Conventions) -> RankedLists:
        if id(conv) not in self._ranked:
            lists = self._top_lists(conv, self.plan[id(conv)]) if id(conv) in self.plan else None
            if lists is None:
                lists = RankedLists(
                    *self.args, conv, doc_ids=self.doc_ids, item_gain=self.item_gain,
                    qrels_labels=self.qrels[0], qrels_offsets=self.qrels[1],
                )
            self._ranked[id(conv)] = (conv, lists)
        return self._ranked[id(conv)][1]

    def _top_lists(self, conv: Conventions, k: int) -> RankedLists | None:
        """The lists of each query's top-``k`` candidates (:func:`metrics.plan.top_candidates`), with
        |R| and the ideal DCG taken from the whole lists (as qrels); None for the whole ordering
        (no saving, or an input whose error the whole path words)."""
        s, labels, offsets = self.args
        try:
            offsets = _check_offsets(offsets, s.size)
            y = _numpy(labels, np.float64).reshape(-1)
            ids = None if self.doc_ids is None else np.asarray(self.doc_ids).reshape(-1)
            if y.size != s.size or _has_nan(s) or (ids is not None and ids.size != s.size):
                return None
        except (TypeError, ValueError):
            return None
        if conv.score_dtype == "float32":  # the ties that rounding makes decide the candidates
            s = s.astype(np.float32).astype(np.float64)
        rows = top_candidates(s, offsets, k)
        if rows is None:
            return None
        qrels_labels, qrels_offsets = self.qrels
        if qrels_labels is None:
            qrels_labels, qrels_offsets = y, offsets
        return RankedLists(s[rows], y[rows], np.searchsorted(rows, offsets), conv,
                           doc_ids=None if ids is None else ids[rows],
                           qrels_labels=qrels_labels, qrels_offsets=qrels_offsets)

    def trec(self, conv: Conventions) -> TrecLists:
        if self.item_gain is not None:
            raise ValueError("trec_eval's measures read relevance levels; item_gain cannot be used with them")
        if id(conv) not in self._trec:
            # the toolkit's ordering of the same rows serves when it keeps every row and ignores labels
            # (a group planned on the top K never reaches here: trec_eval's measures read every rank)
            share = conv.unjudged == "nonrelevant" and conv.ties != "pessimistic"
            self._trec[id(conv)] = (conv, TrecLists(
                *self.args, conv, doc_ids=self.doc_ids, qrels_labels=self.qrels[0], qrels_offsets=self.qrels[1],
                perm=self.ranked(conv).perm if share else None,
            ))
        return self._trec[id(conv)][1]


def _fill(values: np.ndarray, is_empty: np.ndarray, rule: str) -> np.ndarray:
    return np.where(is_empty, {"skip": np.nan, "zero": 0.0, "one": 1.0}[rule], values)


def _values(spec: MetricSpec, conv: Conventions, lists: _Lists) -> np.ndarray:
    """[Q] per-query values of one parsed metric."""
    if conv.ties == "average" and spec.kind in _NO_AVERAGE_TIES:
        raise ValueError(f"metric {spec.short!r}: ties='average' is not defined for it (use stable, docid_desc "
                         "or pessimistic)")
    if spec.kind in KINDS:
        return lists.ranked(conv).metric(spec.kind, spec.k)
    if spec.kind in TREC_KINDS:
        return lists.trec(conv).values(TrecSpec(spec.kind, spec.params), conv.empty)
    rl = lists.ranked(conv)
    if spec.kind == "err":
        return err_values(rl, spec.k)
    if spec.kind in ("rbp", "rbp_resid"):
        return rbp_values(rl, spec.params[0], residual=spec.kind == "rbp_resid")
    if spec.kind == "opa":
        values, pairs = opa_values(rl)
        return _fill(values, pairs <= 0, conv.empty)
    if spec.kind in ("arp", "arp_graded"):
        values, n_rel = arp_values(rl, graded=spec.kind == "arp_graded")
        return _fill(values, n_rel <= 0, conv.empty)
    if spec.kind == "fallout":
        return fallout_values(rl, spec.k)
    if spec.kind == "judged":
        return judged_values(rl, spec.k)
    raise ValueError(f"unknown metric kind {spec.kind!r}")


def _plan(specs: list, item_gain: bool) -> dict:
    """{id(conventions): K} for each group of measures sharing conventions that reads the top K only."""
    groups: dict = {}
    for spec, conv, _ in specs:
        groups.setdefault(id(conv), (conv, []))[1].append(spec)
    plan = {key: top_cutoff(group, conv, item_gain) for key, (conv, group) in groups.items()}
    return {key: k for key, k in plan.items() if k is not None}


def _mean(values: np.ndarray, weights: np.ndarray | None, geometric: bool, summed: bool = False) -> float:
    ok = ~np.isnan(values)
    if not ok.any():
        return float("nan")
    v = values[ok]
    if summed:  # trec_eval's counts: the total over the queries (weighted: sum_q w_q v_q)
        return float(np.sum(v if weights is None else weights[ok] * v))
    if weights is None:
        m = float(np.mean(v))
    else:
        w = weights[ok]
        m = float(np.sum(w * v) / np.sum(w)) if np.sum(w) > 0 else float("nan")
    return float(np.exp(m)) if geometric else m


def evaluate(
    scores: Any,
    labels: Any,
    query_offsets: Any = None,
    metrics: str | Iterable[str] = ("ndcg@10", "map", "mrr@10", "p@10", "recall@100"),
    preset: str | Conventions | None = None,
    *,
    mask: Any = None,
    doc_ids: Any = None,
    item_gain: Any = None,
    qrels_labels: Any = None,
    qrels_offsets: Any = None,
    query_ids: Any = None,
    query_weights: Any = None,
    threads: int = 1,
    **conventions: Any,
) -> EvaluationResult:
    """Evaluate several ranking metrics over many queries, sharing one ordering.

    ``scores``/``labels`` are flat [N] with ``query_offsets`` [Q+1], or padded [Q, L] with ``mask``.
    ``preset`` is None (the toolkit's conventions), ``"trec_eval"``, ``"sklearn"``, ``"lightgbm"``,
    ``"ranx"`` or a :class:`Conventions`; keyword ``conventions`` (gain, discount, empty, ties,
    map_norm, p_denominator, max_grade, threshold, unjudged, zero_gain_below, score_dtype) override
    it. ``doc_ids`` [N] are needed for ``ties="docid_desc"``; ``qrels_labels``/``qrels_offsets`` give
    every judged document per query (|R| and the ideal DCG then include judged documents that were
    not retrieved). ``query_weights`` [Q] (>= 0) weight the means: sum_q w_q v_q / sum_q w_q over
    the queries with a value. Large inputs are evaluated in chunks of whole queries (about
    :data:`CHUNK_ITEMS` items each); ``threads`` > 1 evaluates the chunks on that many threads
    (numpy's sorts and element-wise steps release the GIL). Every per-query value, hence every
    mean, is the same bit for bit whatever the chunks and the threads.

    >>> r = evaluate([3., 2., 1., .5, .2], [3, 0, 2, 0, 1], [0, 3, 5], ["ndcg@3", "mrr", "p@2"])
    >>> r.names["ndcg@3"]
    'ndcg@3[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]'
    >>> r.per_query[r.names["ndcg@3"]].round(4).tolist()
    [0.9558, 0.6309]
    >>> round(r["mrr"], 4), r["p@2"]
    (0.75, 0.5)
    >>> evaluate([3., 2., 1., .5, .2], [3, 0, 2, 0, 1], [0, 3, 5], "mrr", query_weights=[3, 1])["mrr"]
    0.875
    """
    base = get_conventions(preset, **conventions)
    s, labels, query_offsets, doc_ids, item_gain = _flat_inputs(scores, labels, query_offsets, mask, doc_ids, item_gain)
    weights = None
    if query_weights is not None:
        weights = np.asarray(query_weights, dtype=np.float64).reshape(-1)
        n_q = np.asarray(query_offsets).size - 1
        if weights.size != n_q:
            raise ValueError(f"query_weights has {weights.size} entries for {n_q} queries")
        if np.any(~np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("query_weights must be finite and non-negative")

    result = EvaluationResult(conventions=base, query_ids=query_ids, query_weights=weights)
    names = metric_names(metrics)
    if not names:
        raise ValueError("no metric asked")
    specs = []
    for name in names:
        spec = _parse(name)
        conv = base.replace(**spec.overrides) if spec.overrides else base
        stamped = conv.stamp(spec.short, spec.kind, item_gain=item_gain is not None,
                             qrels=qrels_labels is not None)
        if spec.kind in ("rbp", "rbp_resid"):
            stamped = stamped.replace("[", f"[p={spec.params[0]:g},", 1)
        specs.append((spec, conv, stamped))
    # large inputs go in chunks of whole queries (on ``threads`` threads): see _chunk_bounds
    per_query = _threaded_values(specs, _thread_count(threads), s, labels, query_offsets, doc_ids, item_gain,
                                 qrels_labels, qrels_offsets)
    if per_query is None:  # a small input, or an input whose error the whole-input path words best
        lists = _Lists(s, labels, query_offsets, doc_ids, item_gain, qrels_labels, qrels_offsets,
                       _plan(specs, item_gain is not None))
        per_query = [_values(spec, conv, lists) for spec, conv, _ in specs]
    for (spec, _, stamped), values in zip(specs, per_query):
        result.names[spec.short] = stamped
        result.per_query[stamped] = values
        result.counted[stamped] = int(np.count_nonzero(~np.isnan(values)))
        result.mean[stamped] = _mean(values, weights, spec.kind in GEOMETRIC_KINDS, spec.kind in SUMMED_KINDS)
    return result


#: below this many items per thread, one thread is faster than starting more
MIN_ITEMS_PER_THREAD = 50_000
#: queries are evaluated in chunks of about this many items (whole queries): each chunk's arrays stay
#: in the core's cache between the steps, and a thread takes one chunk after another
CHUNK_ITEMS = 1 << 18


def _thread_count(threads: Any) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    return int(threads)


def _share_bounds(n_items: int, labels: Any, query_offsets: Any, parts: int) -> np.ndarray | None:
    """Query indices ``[0, q_1, ..., Q]`` cutting the queries into ``<= parts`` shares of about equal items.

    None when the input is not well formed (the whole-input path then raises its located error) or
    too small to cut.
    """
    try:
        offsets = np.asarray(query_offsets)
        ok = (offsets.ndim == 1 and offsets.size >= 2 and np.issubdtype(offsets.dtype, np.integer)
              and len(labels) == n_items and offsets[0] == 0 and offsets[-1] == n_items
              and bool(np.all(np.diff(offsets) >= 0)))
    except TypeError:
        return None
    parts = min(parts, n_items // MIN_ITEMS_PER_THREAD, offsets.size - 1)
    if not ok or parts < 2:
        return None
    cuts = np.searchsorted(offsets, np.linspace(0, n_items, parts + 1)[1:-1])
    return np.unique(np.concatenate([[0], cuts, [offsets.size - 1]]))


def _chunk_bounds(n_items: int, labels: Any, query_offsets: Any, threads: int) -> np.ndarray | None:
    """Query indices cutting the queries into chunks of about :data:`CHUNK_ITEMS` items, a multiple of
    ``threads`` of them (:func:`_share_bounds`); None to evaluate the whole input at once.

    A multiple, so that every thread gets as many chunks: 13 chunks on 2 threads would leave one
    thread a seventh chunk to do alone (at most 13 / 7 = 1.86x), 14 share evenly.
    """
    chunks = -(-n_items // CHUNK_ITEMS)
    return _share_bounds(n_items, labels, query_offsets, -(-chunks // threads) * threads)


def _threaded_values(specs, threads, s, labels, query_offsets, doc_ids, item_gain, qrels_labels, qrels_offsets):
    """Per-query values of every spec, chunk by chunk of the queries (``threads`` threads take the
    chunks in turn); None to evaluate the whole input at once.

    Each chunk is evaluated as a run of its own (rows ``a:b`` of every flat input, offsets shifted
    to start at 0): a few large numpy calls per step (the sorts and the element-wise work release
    the GIL), on arrays that stay in cache. Every measure is a function of one query's rows, so the
    concatenated values equal the whole input's bit for bit (tests/test_evaluate_threads.py and
    tests/test_evaluate_chunks.py hold each kind to it).
    """
    from concurrent.futures import ThreadPoolExecutor

    bounds = _chunk_bounds(s.size, labels, query_offsets, threads)
    if bounds is None:
        return None
    offsets = np.asarray(query_offsets, dtype=np.int64)
    q_offsets = None if qrels_offsets is None else np.asarray(qrels_offsets, dtype=np.int64)
    if q_offsets is not None and (q_offsets.shape != offsets.shape or q_offsets[-1] != len(qrels_labels)):
        return None
    plan = _plan(specs, item_gain is not None)

    def share(q0: int, q1: int) -> list:
        a, b = int(offsets[q0]), int(offsets[q1])
        cut = (lambda x: None if x is None else x[a:b])
        qrels = (None, None)
        if q_offsets is not None:
            qa, qb = int(q_offsets[q0]), int(q_offsets[q1])
            qrels = (qrels_labels[qa:qb], q_offsets[q0:q1 + 1] - qa)
        lists = _Lists(s[a:b], cut(labels), offsets[q0:q1 + 1] - a, cut(doc_ids), cut(item_gain), *qrels, plan)
        return [_values(spec, conv, lists) for spec, conv, _ in specs]

    try:
        if threads == 1:
            parts = [share(q0, q1) for q0, q1 in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
        else:
            with ThreadPoolExecutor(max_workers=min(threads, bounds.size - 1)) as pool:
                parts = list(pool.map(share, bounds[:-1].tolist(), bounds[1:].tolist()))
    except Exception:  # noqa: BLE001  the whole-input path words the error with whole-input positions
        return None
    return [np.concatenate([part[i] for part in parts]) for i in range(len(specs))]
