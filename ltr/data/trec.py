"""TREC qrels and run files: read, write, and align them into the flat layout ``metrics`` evaluates.

Formats (whitespace separated, as trec_eval reads them):

* qrels: ``qid iter docno rel`` (4 fields; ``rel`` an integer or a number below 1024; negative =
  judged non-relevant, worth 0 as in trec_eval: see :mod:`ltr.data.labels`)
* run:   ``qid Q0 docno rank score [tag]`` (5 or 6 fields; trec_eval ignores the rank column and
  anything after the tag, and so do we)
* diversity qrels: ``qid subtopic docno rel`` (TREC Web track diversity task; for α-nDCG)

Lines starting with ``#`` and blank lines are skipped; a UTF-8 byte order mark at the start of the
file is not part of the first query id. A malformed line raises
:class:`ltr.base.errors.DataFormatError` naming the file, the line and what was wrong; so does a
document listed twice for one query.

:func:`align` turns a run and qrels into flat arrays: per query (those in both files, sorted by
id, as trec_eval does) the retrieved documents in file order with their labels (NaN = unjudged),
and the labels of *every* judged document of the query (for |R| and the ideal DCG).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from ltr.data.columns import parse_number
from ltr.data.labels import label_problem
from ltr.base.errors import DataFormatError, LtrError
from ltr.base.io_utils import atomic_write_text, open_text, write_text_or_stdout

__all__ = ["read_qrels", "read_run", "write_qrels", "write_run", "align", "AlignedRun", "run_from_arrays",
           "evaluate_aligned", "read_diversity_qrels", "align_diversity", "AlignedDiversityRun", "evaluate_diversity"]


def _lines(path: str | os.PathLike):
    """``(line number, fields)`` of every line to read (``"-"``: standard input)."""
    with open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            yield number, stripped.split()


def read_qrels(path: str | os.PathLike) -> dict[str, dict[str, float]]:
    """Read a qrels file into ``{qid: {docno: label}}`` (queries and documents in file order)."""
    qrels: dict[str, dict[str, float]] = {}
    for line, fields in _lines(path):
        if len(fields) != 4:
            raise DataFormatError(path, line, f"expected 4 fields 'qid iter docno rel', found {len(fields)}")
        qid, _, doc, rel = fields
        label = parse_number(rel, path, line, "relevance")
        if label_problem(label):
            raise DataFormatError(path, line, f"relevance {rel!r}: {label_problem(label)}")
        docs = qrels.setdefault(qid, {})
        if doc in docs:
            raise DataFormatError(path, line, f"document {doc!r} is judged twice for query {qid!r}")
        docs[doc] = label
    return qrels


def read_run(path: str | os.PathLike) -> dict[str, list[tuple[str, float]]]:
    """Read a run file into ``{qid: [(docno, score), ...]}`` in file order."""
    run: dict[str, list[tuple[str, float]]] = {}
    seen: dict[str, set] = {}
    for line, fields in _lines(path):
        if len(fields) < 5:
            raise DataFormatError(
                path, line, f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}"
            )
        qid, doc, score = fields[0], fields[2], fields[4]
        value = parse_number(score, path, line, "score")
        docs = seen.setdefault(qid, set())
        if doc in docs:
            raise DataFormatError(path, line, f"document {doc!r} is listed twice for query {qid!r}")
        docs.add(doc)
        run.setdefault(qid, []).append((doc, value))
    return run


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def write_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, float]]) -> None:
    """Write ``{qid: {docno: label}}`` as a qrels file (atomically)."""
    lines = [f"{q} 0 {d} {_fmt(rel)}" for q, docs in qrels.items() for d, rel in docs.items()]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def write_run(path: str | os.PathLike, run: Mapping[str, Iterable[tuple[str, float]]], tag: str = "ltr") -> None:
    """Write ``{qid: [(docno, score), ...]}`` as a run file, each query ranked by score (atomically;
    ``"-"``: standard output).

    Ranks are 1-based by descending score, ties in the given order; scores are written with full
    precision (``repr``), so reading the file back gives the same floats.
    """
    if not tag or any(c.isspace() for c in tag):
        raise LtrError(f"run tag must be one word, got {tag!r}")
    lines = []
    for q, items in run.items():
        items = list(items)
        order = sorted(range(len(items)), key=lambda i: -items[i][1])  # sorted() is stable
        for rank, i in enumerate(order, start=1):
            doc, score = items[i]
            lines.append(f"{q} Q0 {doc} {rank} {float(score)!r} {tag}")
    write_text_or_stdout(path, "\n".join(lines) + ("\n" if lines else ""))


def run_from_arrays(query_ids, doc_ids, scores, query_offsets) -> dict[str, list[tuple[str, float]]]:
    """Flat arrays (one query per ``query_offsets`` segment) to ``{qid: [(docno, score), ...]}``."""
    offsets = np.asarray(query_offsets, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    return {
        str(q): [(str(doc_ids[i]), float(scores[i])) for i in range(offsets[j], offsets[j + 1])]
        for j, q in enumerate(query_ids)
    }


@dataclass
class AlignedRun:
    """A run joined with its qrels, in the flat layout of :func:`metrics.evaluate`."""

    query_ids: list[str]
    scores: np.ndarray          # [N] retrieved documents, query by query, in file order
    labels: np.ndarray          # [N] qrels label, NaN when the document is not judged
    doc_ids: np.ndarray         # [N]
    query_offsets: np.ndarray   # [Q+1]
    qrels_labels: np.ndarray    # [M] labels of every judged document of each query
    qrels_offsets: np.ndarray   # [Q+1]
    dropped_run_queries: list[str]    # in the run but not in the qrels (not evaluated)
    dropped_qrels_queries: list[str]  # in the qrels but not in the run (not evaluated unless complete)


def align(
    run: Mapping[str, list[tuple[str, float]]], qrels: Mapping[str, Mapping[str, float]], *, complete: bool = False
) -> AlignedRun:
    """Join a run and qrels over the queries present in both (trec_eval's default), sorted by id.

    ``complete=True`` keeps every query of the qrels, with an empty ranking where the run has none
    (``trec_eval -c``: such a query then scores 0 and counts in the means).
    """
    both = sorted(set(qrels) if complete else set(run) & set(qrels))
    scores, labels, docs, offsets = [], [], [], [0]
    q_labels, q_offsets = [], [0]
    for q in both:
        judged = qrels[q]
        for doc, score in run.get(q, ()):
            scores.append(score)
            labels.append(judged.get(doc, math.nan))
            docs.append(doc)
        offsets.append(len(scores))
        q_labels.extend(judged.values())
        q_offsets.append(len(q_labels))
    return AlignedRun(
        query_ids=both,
        scores=np.asarray(scores, dtype=np.float64),
        labels=np.asarray(labels, dtype=np.float64),
        doc_ids=np.asarray(docs, dtype=object) if docs else np.zeros(0, dtype=object),
        query_offsets=np.asarray(offsets, dtype=np.int64),
        qrels_labels=np.asarray(q_labels, dtype=np.float64),
        qrels_offsets=np.asarray(q_offsets, dtype=np.int64),
        dropped_run_queries=sorted(set(run) - set(qrels)),
        dropped_qrels_queries=[] if complete else sorted(set(qrels) - set(run)),
    )


def evaluate_aligned(aligned: AlignedRun, metric_names, preset=None, *, threads: int = 1, **conventions):
    """:func:`metrics.evaluate` of an aligned run: doc ids (for trec_eval's ties), the qrels (|R| and
    the ideal DCG over every judged document) and the query ids come along. A bad metric name or
    convention is a :class:`LtrError`.

    Negative qrels labels mean judged non-relevant (:mod:`ltr.data.labels`): unless the preset has a
    rule of its own for them (trec_eval, ranx) or ``zero_gain_below`` is given, they get gain 0, and
    the stamped names say ``zero_gain_below=0``. ``threads`` splits the queries across threads
    (:func:`metrics.evaluate`; the same values).
    """
    import metrics

    has_negative = aligned.qrels_labels.size and float(aligned.qrels_labels.min()) < 0
    if has_negative and preset not in ("trec_eval", "ranx") and conventions.get("zero_gain_below") is None:
        conventions = {**conventions, "zero_gain_below": 0.0}
    try:
        return metrics.evaluate(
            aligned.scores, aligned.labels, aligned.query_offsets, metric_names, preset=preset,
            doc_ids=aligned.doc_ids, qrels_labels=aligned.qrels_labels, qrels_offsets=aligned.qrels_offsets,
            query_ids=aligned.query_ids, threads=threads, **conventions,
        )
    except ValueError as exc:
        raise LtrError(str(exc)) from None


# ---------------------------------------------------------------------------- diversity qrels
def read_diversity_qrels(path: str | os.PathLike) -> dict[str, dict[str, dict[str, float]]]:
    """Read TREC diversity qrels ``qid subtopic docno rel`` into ``{qid: {docno: {subtopic: rel}}}``."""
    qrels: dict[str, dict[str, dict[str, float]]] = {}
    for line, fields in _lines(path):
        if len(fields) != 4:
            raise DataFormatError(path, line, f"expected 4 fields 'qid subtopic docno rel', found {len(fields)}")
        qid, subtopic, doc, rel = fields
        label = parse_number(rel, path, line, "relevance")
        topics = qrels.setdefault(qid, {}).setdefault(doc, {})
        if subtopic in topics:
            raise DataFormatError(path, line, f"document {doc!r} is judged twice for subtopic {subtopic!r} of {qid!r}")
        topics[subtopic] = label
    return qrels


@dataclass
class AlignedDiversityRun:
    """A run joined with diversity qrels, for :func:`metrics.alpha_ndcg`: per query, subtopics are
    columns 0..s_q-1 (in order of first appearance in the qrels), the rest of the S columns 0."""

    query_ids: list[str]
    scores: np.ndarray            # [N]
    judgements: np.ndarray        # [N, S] relevance of each retrieved document to each subtopic (0: none)
    doc_ids: np.ndarray           # [N]
    query_offsets: np.ndarray     # [Q+1]
    qrels_judgements: np.ndarray  # [M, S] every judged document of each query
    qrels_offsets: np.ndarray     # [Q+1]


def align_diversity(run: Mapping[str, list[tuple[str, float]]],
                    qrels: Mapping[str, Mapping[str, Mapping[str, float]]]) -> AlignedDiversityRun:
    """Join a run and diversity qrels over the queries in both, sorted by id (as :func:`align`)."""
    both = sorted(set(run) & set(qrels))
    columns = {q: {} for q in both}
    for q in both:
        for topics in qrels[q].values():
            for t in topics:
                columns[q].setdefault(t, len(columns[q]))
    n_sub = max([len(c) for c in columns.values()] + [1])
    rows, scores, docs, offsets, q_rows, q_offsets = [], [], [], [0], [], [0]

    def row(q, topics):
        r = np.zeros(n_sub)
        for t, rel in topics.items():
            r[columns[q][t]] = rel
        return r

    for q in both:
        for doc, score in run[q]:
            scores.append(score)
            docs.append(doc)
            rows.append(row(q, qrels[q].get(doc, {})))
        offsets.append(len(scores))
        q_rows.extend(row(q, topics) for topics in qrels[q].values())
        q_offsets.append(len(q_rows))
    return AlignedDiversityRun(
        both, np.asarray(scores, dtype=np.float64), np.asarray(rows).reshape(-1, n_sub),
        np.asarray(docs, dtype=object), np.asarray(offsets, dtype=np.int64),
        np.asarray(q_rows).reshape(-1, n_sub), np.asarray(q_offsets, dtype=np.int64),
    )


def evaluate_diversity(aligned: AlignedDiversityRun, metric_names, alpha: float = 0.5, preset=None, **conventions):
    """α-nDCG of an aligned diversity run for names ``alpha_ndcg[@K]`` (or ``alpha-ndcg``), as an
    :class:`metrics.EvaluationResult` whose stamped names carry α and the conventions."""
    import metrics
    from metrics.evaluate import EvaluationResult, metric_names as split_names

    try:
        conv = metrics.get_conventions(preset, **conventions)
        result = EvaluationResult(conventions=conv, query_ids=aligned.query_ids)
        for name in split_names(metric_names):
            base, _, k = name.partition("@")
            if base.lower() not in ("alpha_ndcg", "alpha-ndcg") or (k and not k.isdigit()):
                raise ValueError(f"with diversity qrels the metrics are alpha_ndcg or alpha_ndcg@K, not {name!r}")
            values = metrics.alpha_ndcg(aligned.scores, aligned.judgements, aligned.query_offsets,
                                        int(k) if k else None, alpha=alpha, qrels_judgements=aligned.qrels_judgements,
                                        qrels_offsets=aligned.qrels_offsets, preset=conv, doc_ids=aligned.doc_ids)
            stamped = (f"{name}[alpha={alpha:g},rel>={conv.threshold:g},empty={conv.empty},ties={conv.ties},"
                       "R=qrels]")
            ok = ~np.isnan(values)
            result.names[name], result.per_query[stamped] = stamped, values
            result.counted[stamped] = int(ok.sum())
            result.mean[stamped] = float(values[ok].mean()) if ok.any() else float("nan")
    except ValueError as exc:
        raise LtrError(str(exc)) from None
    return result
