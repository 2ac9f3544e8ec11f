"""TREC qrels and run files: read, write, and align them into the flat layout ``metrics`` evaluates.

Formats (whitespace separated, as trec_eval reads them):

* qrels: ``qid iter docno rel`` (4 fields; ``rel`` an integer or a number; negative = judged
  non-relevant, worth 0 as in trec_eval)
* run:   ``qid Q0 docno rank score [tag]`` (5 or 6 fields; trec_eval ignores the rank column and
  anything after the tag, and so do we)

Lines starting with ``#`` and blank lines are skipped. A malformed line raises
:class:`ltr.errors.DataFormatError` naming the file, the line and what was wrong; so does a
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
from ltr.errors import DataFormatError, LtrError
from ltr.io_utils import atomic_write_text, open_text, write_text_or_stdout

__all__ = ["read_qrels", "read_run", "write_qrels", "write_run", "align", "AlignedRun", "run_from_arrays",
           "evaluate_aligned"]


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


def evaluate_aligned(aligned: AlignedRun, metric_names, preset=None, **conventions):
    """:func:`metrics.evaluate` of an aligned run: doc ids (for trec_eval's ties), the qrels (|R| and
    the ideal DCG over every judged document) and the query ids come along. A bad metric name or
    convention is a :class:`LtrError`."""
    import metrics

    try:
        return metrics.evaluate(
            aligned.scores, aligned.labels, aligned.query_offsets, metric_names, preset=preset,
            doc_ids=aligned.doc_ids, qrels_labels=aligned.qrels_labels, qrels_offsets=aligned.qrels_offsets,
            query_ids=aligned.query_ids, **conventions,
        )
    except ValueError as exc:
        raise LtrError(str(exc)) from None
