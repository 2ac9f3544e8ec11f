"""``metrics.evaluate``: many ranking metrics at once, one shared ordering, conventions-stamped names.

Metric name grammar (case-insensitive kind, optional ``@K``)::

    ndcg | dcg | map | ap | mrr | rr | p | precision | recall | hit | hitrate | rprec   [@K]

and trec_eval's spellings ``ndcg_cut_K``, ``map_cut_K``, ``P_K``, ``recall_K``, ``success_K``,
``recip_rank``, ``Rprec``. A name may carry a bracketed suffix in the stamped format
(``ndcg@10[gain=linear,...]``): its conventions override the call's for that metric.
Each result is keyed by its stamped name, which begins with the name exactly as asked.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from metrics.conventions import Conventions, get_conventions
from metrics.ranking import RankedLists, _flat_inputs

__all__ = ["evaluate", "EvaluationResult", "parse_metric_name"]

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
_STAMP_FIELDS = {"gain", "discount", "ideal", "empty", "ties", "rel", "norm", "zero_gain_below", "unjudged_below", "unjudged", "scores", "R"}


def parse_metric_name(name: str) -> tuple[str, str, int | None, dict]:
    """Split a metric name into (short name as asked, kind, cutoff, convention overrides).

    >>> parse_metric_name("ndcg@10")
    ('ndcg@10', 'ndcg', 10, {})
    >>> parse_metric_name("P_5")
    ('P_5', 'p', 5, {})
    >>> parse_metric_name("map@10[rel>=2,norm=min(R,K),empty=zero,ties=stable]")[3]
    {'threshold': 2.0, 'map_norm': 'min(R,K)', 'empty': 'zero', 'ties': 'stable'}
    """
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
        return short, kind, int(m.group(2)), overrides
    m = _PLAIN.match(short)
    if not m or m.group(1).lower() not in _KIND_ALIASES:
        raise ValueError(
            f"unknown metric {name!r}: use ndcg, dcg, map/ap, mrr/rr, p/precision, recall, hit/hitrate or "
            "rprec, optionally with @K (e.g. ndcg@10)"
        )
    k = None if m.group(2) is None else int(m.group(2))
    if k is not None and k < 1:
        raise ValueError(f"metric {name!r}: the cutoff must be at least 1")
    return short, _KIND_ALIASES[m.group(1).lower()], k, overrides


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
        elif key == "R":
            pass  # describes the data (qrels given), not a choice
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
    mean : {stamped name: mean over the non-NaN queries (NaN if none)}
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

    def __getitem__(self, short_name: str) -> float:
        """Mean of a metric by its short name (``result["ndcg@10"]``) or stamped name."""
        return self.mean[self.names.get(short_name, short_name)]

    def table(self) -> str:
        """A plain-text table: stamped name, mean, number of queries counted."""
        width = max((len(n) for n in self.mean), default=6)
        lines = [f"{'metric':<{width}}  {'mean':>10}  {'queries':>7}"]
        for name, value in self.mean.items():
            lines.append(f"{name:<{width}}  {value:>10.6f}  {self.counted[name]:>7d}")
        return "\n".join(lines)


def _metric_list(metrics: str | Iterable[str]) -> list[str]:
    if isinstance(metrics, str):
        # commas inside brackets do not split, so stamped names can be listed
        return [m.strip() for m in _split_outside(metrics, "([", ")]") if m.strip()]
    return [str(m) for m in metrics]


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
    **conventions: Any,
) -> EvaluationResult:
    """Evaluate several ranking metrics over many queries, sharing one ordering.

    ``scores``/``labels`` are flat [N] with ``query_offsets`` [Q+1], or padded [Q, L] with ``mask``.
    ``preset`` is None (the toolkit's conventions), ``"trec_eval"``, ``"sklearn"``, ``"lightgbm"``,
    ``"ranx"`` or a :class:`Conventions`; keyword ``conventions`` (gain, discount, empty, ties,
    map_norm, threshold, unjudged, zero_gain_below, score_dtype) override it. ``doc_ids`` [N] are
    needed for ``ties="docid_desc"``; ``qrels_labels``/``qrels_offsets`` give every judged document
    per query (|R| and the ideal DCG then include judged documents that were not retrieved).

    >>> r = evaluate([3., 2., 1., .5, .2], [3, 0, 2, 0, 1], [0, 3, 5], ["ndcg@3", "mrr", "p@2"])
    >>> r.names["ndcg@3"]
    'ndcg@3[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]'
    >>> r.per_query[r.names["ndcg@3"]].round(4).tolist()
    [0.9558, 0.6309]
    >>> round(r["mrr"], 4), r["p@2"]
    (0.75, 0.5)
    """
    base = get_conventions(preset, **conventions)
    s, labels, query_offsets, doc_ids, item_gain = _flat_inputs(scores, labels, query_offsets, mask, doc_ids, item_gain)
    lists: dict = {}  # id(conventions) -> (conventions, RankedLists); tables and callables are unhashable

    def ranked(conv: Conventions) -> RankedLists:
        if id(conv) not in lists:
            lists[id(conv)] = (conv, RankedLists(
                s, labels, query_offsets, conv, doc_ids=doc_ids, item_gain=item_gain,
                qrels_labels=qrels_labels, qrels_offsets=qrels_offsets,
            ))
        return lists[id(conv)][1]

    result = EvaluationResult(conventions=base, query_ids=query_ids)
    names = _metric_list(metrics)
    if not names:
        raise ValueError("no metric asked")
    for name in names:
        short, kind, k, overrides = parse_metric_name(name)
        conv = base.replace(**overrides) if overrides else base
        rl = ranked(conv)
        stamped = conv.stamp(short, kind, item_gain=item_gain is not None, qrels=rl.has_qrels)
        values = rl.metric(kind, k)
        result.names[short] = stamped
        result.per_query[stamped] = values
        counted = int(np.count_nonzero(~np.isnan(values)))
        result.counted[stamped] = counted
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result.mean[stamped] = float(np.nanmean(values)) if counted else float("nan")
    return result
