"""``ltr predict``: score a data file with a trained model folder and write its scores.

``--format`` (default ``trec``): ``trec`` a TREC run file (below); ``tsv`` one score per line in the
data file's row order (what ``ltr calibrate --scores`` and ``ltr clicks evaluate --scores`` read);
``parquet`` a table with the columns ``qid``, ``docid``, ``rank`` and ``score`` in row order (needs
pyarrow); without ``--format``, an ``--out`` ending in ``.parquet`` means ``parquet``. ``--out -``
writes to standard output.

The data need no labels: a Parquet or CSV table without the label column is scored all the same
(the message says that no metrics were computed), and an SVMlight file's label field is ignored.
With ``--qrels FILE`` the data's labels are written too, as TREC qrels with the same document ids,
so that ``ltr eval --qrels FILE --run RUN`` scores the run.

The model folder is one written by ``ltr train`` (``model.pt`` + ``model.json``) or ``ltr gbdt``
(``model.txt`` + ``model.json``). The run file has one line per row of the data file,
``qid Q0 docid rank score tag``, ranks 1.. within each query by descending score (ties keep file
order). Document ids are the data set's ``doc_ids`` when it has them, else the row's index within
its query (0, 1, ...), the rule ``ltr eval`` uses to match qrels built from the same file.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from ltr.commands import add_force_option
from ltr.data.files import add_data_options, add_format_options
from ltr.base.errors import LtrError
from ltr.models.predict import doc_ids_of, ranks_in_queries  # numpy only: the parser stays light


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict",
        help="score a data file with a trained model and write a TREC run file",
        description="Load a model folder written by `ltr train`, `ltr gbdt` or `ltr blend`, score every row of --data "
        "and write a TREC run file (qid Q0 docid rank score tag) atomically. The data need no labels: a Parquet or "
        "CSV table without the label column is scored (no metrics are computed); each score keeps its row's "
        "document id (--doc-id-column, else the row's index within its query).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", required=True, metavar="DIR", help="model folder (from ltr train, ltr gbdt or ltr blend)")
    p.add_argument("--data", required=True, metavar="FILE", help="data to score: SVMlight/LETOR, a Parquet file or folder or a CSV file with a "
                   "header (feature columns: the model's, by name, when it has names; no label column needed), or a store from `ltr convert`")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write ('-': standard output)")
    p.add_argument("--format", choices=["trec", "tsv", "parquet"], default=None,
                   help="trec: TREC run file; tsv: one score per line in row order; parquet: qid, docid, rank, score "
                   "(default: parquet when --out ends in .parquet, else trec)")
    p.add_argument("--qrels", default=None, metavar="FILE", help="also write the data's labels as a TREC qrels file with the same document ids, for `ltr eval --qrels FILE --run RUN`")
    p.add_argument("--tag", default=None, help="run tag, the sixth column (default: the model folder's name)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (neural models only)")
    add_force_option(p, "--out and --qrels")
    add_format_options(p)
    add_data_options(p)
    p.set_defaults(func=run)


def check_unique_doc_ids(ds, path) -> None:
    """Refuse document ids repeated within a query: a run or qrels file names each document of a
    query once (``ltr eval`` refuses a run that repeats one), so the run is refused here, naming
    the first repeat (by query, then id) and how many there are."""
    if getattr(ds, "doc_ids", None) is None:
        return
    docs = np.asarray(ds.doc_ids)
    off = np.asarray(ds.query_offsets)
    q = np.repeat(np.arange(len(off) - 1), np.diff(off))
    order = np.lexsort((docs, q))
    repeat = (q[order][1:] == q[order][:-1]) & (docs[order][1:] == docs[order][:-1])
    if repeat.any():
        k = int(np.flatnonzero(repeat)[0])
        first, second = sorted((int(order[k]), int(order[k + 1])))
        raise LtrError(f"--data {path}: document id {str(docs[first])!r} appears twice in query {ds.query_ids[q[first]]} "
                       f"(rows {first} and {second}; {int(repeat.sum())} repeat(s) in all): a run names each document "
                       "of a query once; give ids unique within each query, or --format tsv")


def write_run(ds, scores: np.ndarray, path: str | os.PathLike, tag: str) -> None:
    """Write the run file atomically with :func:`ltr.data.trec.write_run` (stable ranking, exact scores)."""
    from ltr.data.trec import run_from_arrays
    from ltr.data.trec import write_run as write_trec_run

    write_trec_run(path, run_from_arrays(ds.query_ids, doc_ids_of(ds), scores, ds.query_offsets), tag=tag)


def write_qrels(ds, path: str | os.PathLike) -> None:
    """The data set's labels as TREC qrels (``qid 0 docid label``), doc ids as in :func:`write_run`."""
    from ltr.data.trec import write_qrels as write_trec_qrels

    docs, labels = doc_ids_of(ds), np.asarray(ds.labels)  # read once (a streamed set makes its labels at each access)
    off = np.asarray(ds.query_offsets)
    qrels = {str(q): {str(docs[i]): float(labels[i]) for i in range(off[j], off[j + 1])} for j, q in enumerate(ds.query_ids)}
    write_trec_qrels(path, qrels)


def write_tsv(scores: np.ndarray, path: str | os.PathLike) -> None:
    """One score per line, in row order, with full precision (``repr``); ``"-"``: standard output."""
    from ltr.base.io_utils import write_text_or_stdout

    write_text_or_stdout(path, "".join(f"{float(s)!r}\n" for s in scores))


def write_parquet(ds, scores: np.ndarray, path: str | os.PathLike) -> None:
    """A parquet table ``qid, docid, rank, score`` in row order (atomically; ``"-"``: standard output)."""
    import sys

    from ltr.base.io_utils import STDIO, atomic_path

    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise LtrError("--format parquet needs pyarrow (pip install pyarrow)") from None
    off = np.asarray(ds.query_offsets)
    table = pa.table({
        "qid": np.repeat(np.asarray(ds.query_ids).astype(str), np.diff(off)),
        "docid": doc_ids_of(ds).astype(str),
        "rank": ranks_in_queries(scores, off),
        "score": np.asarray(scores, dtype=np.float64),
    })
    if str(path) == STDIO:
        pq.write_table(table, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp)


def run(args) -> int:
    import sys

    from ltr.base.checks import same_file
    from ltr.commands import check_output_files
    from ltr.data.files import data_options, format_options, is_labelled
    from ltr.models.folder import check_width, load_scorer
    from ltr.models.predict import open_for_scoring, score_data

    if args.qrels == "-" or (args.qrels and args.qrels == args.out):
        raise LtrError("--qrels needs a file of its own (standard output is for --out)")
    inputs = [("--data", args.data), ("--model", args.model)]
    check_output_files(args, [("--out", args.out), ("--qrels", args.qrels)], inputs)
    if args.qrels:
        if args.out != "-" and same_file(args.qrels, args.out):
            raise LtrError(f"--qrels {args.qrels} is the same file as --out; give two names")
    tag = args.tag or Path(args.model).resolve().name.replace(" ", "_")
    if not tag or any(c.isspace() for c in tag):
        raise LtrError(f"--tag must be one word (no spaces), got {tag!r}")
    score, n_features = load_scorer(args.model, args.device)
    ds = open_for_scoring(args.data, args.model, data_options(args), **format_options(args, "data"))
    check_width(ds, n_features, "--data", args.data)
    if args.qrels and not is_labelled(ds):
        raise LtrError(f"--qrels: --data {args.data} has no label column {args.label_column!r}, so there are no labels "
                       "to write (leave --qrels out to score it, or set --label-column)")
    if args.format is None:
        args.format = "parquet" if str(args.out).lower().endswith(".parquet") else "trec"
    if args.format != "tsv" or args.qrels:
        check_unique_doc_ids(ds, args.data)
    scores = score_data(score, ds)
    if args.format == "trec":
        write_run(ds, scores, args.out, tag)
    elif args.format == "tsv":
        write_tsv(scores, args.out)
    else:
        write_parquet(ds, scores, args.out)
    if args.qrels:
        write_qrels(ds, args.qrels)
    what = "lines" if args.format != "parquet" else "rows"
    labels = "" if is_labelled(ds) else f" (no label column {args.label_column!r}: scores only, no metrics computed)"
    # the message goes to standard error when the scores go to standard output
    print(f"wrote {ds.n_items} {what} for {ds.n_queries} queries to {args.out}{labels}",
          file=sys.stderr if args.out == "-" else sys.stdout)
    return 0
