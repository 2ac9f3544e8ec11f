"""``ltr predict``: score a data file with a trained model folder and write its scores.

``--format`` (default ``trec``): ``trec`` a TREC run file (below); ``tsv`` one score per line in the
data file's row order (what ``ltr calibrate --scores`` and ``ltr clicks evaluate --scores`` read);
``parquet`` a table with the columns ``qid``, ``docid``, ``rank`` and ``score`` in row order (needs
pyarrow); without ``--format``, an ``--out`` ending in ``.parquet`` means ``parquet``. ``--out -``
writes to standard output.

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
from ltr.errors import LtrError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict",
        help="score a data file with a trained model and write a TREC run file",
        description="Load a model folder written by `ltr train` or `ltr gbdt`, score every row of --data and "
        "write a TREC run file (qid Q0 docid rank score tag) atomically.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", required=True, metavar="DIR", help="run folder holding model.json (from ltr train or ltr gbdt)")
    p.add_argument("--data", required=True, metavar="FILE", help="data to score: SVMlight/LETOR, a Parquet file or folder (feature columns: the model's, by name, "
                   "when it has names), or a store from `ltr convert`")
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


def doc_ids_of(ds) -> np.ndarray:
    """The data set's ``doc_ids``, or each row's index within its query ("0", "1", ...)."""
    if getattr(ds, "doc_ids", None) is not None:
        return np.asarray(ds.doc_ids)
    offsets = np.asarray(ds.query_offsets)
    return (np.arange(offsets[-1]) - np.repeat(offsets[:-1], np.diff(offsets))).astype(str)


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
    from ltr.io_utils import write_text_or_stdout

    write_text_or_stdout(path, "".join(f"{float(s)!r}\n" for s in scores))


def ranks_in_queries(scores: np.ndarray, query_offsets) -> np.ndarray:
    """[N] 1-based rank of each row within its query by descending score (ties keep row order)."""
    import metrics

    off = np.asarray(query_offsets)
    perm = metrics.rank_order(scores, off)
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[perm] = np.arange(len(scores)) - np.repeat(off[:-1], np.diff(off)) + 1
    return ranks


def write_parquet(ds, scores: np.ndarray, path: str | os.PathLike) -> None:
    """A parquet table ``qid, docid, rank, score`` in row order (atomically; ``"-"``: standard output)."""
    import sys

    from ltr.io_utils import STDIO, atomic_path

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


SCORE_ROWS = 65536  # the rows load_scorer's scorers take at a time (ltr.train.trainer.predict_scores, the GBDT scorer)


def open_data(args):
    """``--data``: a store or a Parquet file/folder (without ``--sort-by-query``) opened to be read in
    row blocks (:func:`ltr.data.streamed.open_streamed`: labels, queries and ids in memory, never the
    feature matrix); anything else read into memory. A Parquet file's feature columns are picked by
    the model's feature names, when it has them."""
    from ltr.data.files import data_format, data_options, format_options, load_data_file
    from ltr.data.streamed import open_streamed
    from ltr.models.folder import model_feature_names

    options, names = data_options(args), model_feature_names(args.model)
    where = Path(args.data).expanduser()  # a FIFO or device is left to the reader, which refuses it unopened
    if (where.is_file() or where.is_dir()) and data_format(args.data) in ("store", "parquet") and not options.sort_by_query:
        return open_streamed(args.data, "data", None, options, feature_names=names)
    return load_data_file(args.data, "data", None, options, feature_names=names, **format_options(args, "data"))


def score_data(score, ds, rows: int | None = None) -> np.ndarray:
    """Scores [N] of ``ds`` by ``score`` (:func:`ltr.models.folder.load_scorer`'s).

    A data set in memory is scored in one call. A streamed one (:mod:`ltr.data.streamed`) is scored
    in blocks of about ``rows`` rows (default: about 64 MB of features), so that the features are
    never held whole: blocks of whole queries for a scorer that needs them (``score.whole_queries``:
    a listwise model, a blend); otherwise blocks of a multiple of :data:`SCORE_ROWS` rows, so that
    the scorer's own batches are those of the one call on the whole matrix and the scores are the
    same bit for bit. (A listwise model pads the queries of a block into batches that can differ
    from the one call's at the blocks' edges: the same scores to float rounding.)
    """
    from ltr.data.streamed import block_rows, is_streamed, predict_in_blocks, predict_in_query_blocks

    if not is_streamed(ds):
        return score(ds.features, ds.query_offsets)
    rows = block_rows(ds.n_features) if rows is None else int(rows)
    if getattr(score, "whole_queries", True):
        return predict_in_query_blocks(score, ds, rows)
    # exact blocks of a multiple of SCORE_ROWS rows, whatever the sizes of a Parquet file's batches
    return predict_in_blocks(score, ds, max(1, rows // SCORE_ROWS) * SCORE_ROWS, exact=True)


def run(args) -> int:
    import sys

    from ltr.checks import same_file
    from ltr.commands import check_output_files
    from ltr.models.folder import check_width, load_scorer

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
    ds = open_data(args)
    check_width(ds, n_features, "--data", args.data)
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
    # the message goes to standard error when the scores go to standard output
    print(f"wrote {ds.n_items} {what} for {ds.n_queries} queries to {args.out}",
          file=sys.stderr if args.out == "-" else sys.stdout)
    return 0
