"""``ltr eval``: evaluate a TREC run against qrels with stated conventions."""

from __future__ import annotations

import argparse
import json
import math
import sys

from ltr.errors import LtrError

DEFAULT_METRICS = "ndcg@10,map,mrr@10,p@10,recall@100"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a TREC run file against a qrels file",
        description=(
            "Evaluate a TREC run (qid Q0 docno rank score tag) against qrels (qid iter docno rel). "
            "Queries present in both files are evaluated (as trec_eval does); unjudged retrieved "
            "documents are non-relevant unless --judged-only; judged documents that were not "
            "retrieved count in |R| and in the ideal DCG. Every metric name is printed with the "
            "conventions that produced it, e.g. ndcg@10[gain=exp2,discount=log2,...]."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--qrels", required=True, metavar="FILE", help="TREC qrels file: qid iter docno rel")
    parser.add_argument("--run", required=True, metavar="FILE", help="TREC run file: qid Q0 docno rank score tag")
    parser.add_argument(
        "--metrics",
        default=DEFAULT_METRICS,
        help="comma-separated metrics: ndcg, dcg, map/ap, mrr/rr, p/precision, recall, hit/hitrate, rprec, "
        "each with an optional @K (trec_eval spellings such as P_10, ndcg_cut_10, recip_rank, Rprec work too)",
    )
    parser.add_argument(
        "--preset",
        choices=["toolkit", "trec_eval", "sklearn", "lightgbm", "ranx"],
        default="toolkit",
        help="conventions to follow; trec_eval reproduces trec_eval 9.x (linear gain, ties by docno "
        "descending, float32 scores, empty queries 0)",
    )
    parser.add_argument("--gain", choices=["exp2", "linear"], default=None,
                        help="override the preset's gain: 2^rel-1 or rel")
    parser.add_argument("--ties", choices=["stable", "docid_desc", "average", "pessimistic"], default=None,
                        help="override the preset's tie rule (stable = run file order)")
    parser.add_argument("--empty", choices=["skip", "zero", "one"], default=None,
                        help="override the value of a query without relevant documents (skip = left out of means)")
    parser.add_argument("--relevance-level", type=float, default=None, metavar="L",
                        help="binary metrics count a document relevant when rel >= L (trec_eval -l)")
    parser.add_argument("--judged-only", action="store_true",
                        help="remove unjudged documents from the ranking first (trec_eval -J)")
    parser.add_argument("--complete", action="store_true",
                        help="also evaluate queries of the qrels that the run does not have, as empty rankings "
                        "(trec_eval -c; with --empty skip a query without relevant documents is still skipped)")
    parser.add_argument("--per-query", action="store_true", help="also report every query's values")
    parser.add_argument("--json", action="store_true",
                        help='print JSON {"mean": {name: value}, "per_query": {qid: {name: value}}} '
                        "(per_query only with --per-query; NaN = skipped query is written as null)")
    parser.add_argument("--output", metavar="FILE", default=None,
                        help="also write the JSON report to FILE (atomically)")
    parser.set_defaults(func=run)


def _clean(x: float):
    return None if isinstance(x, float) and math.isnan(x) else x


def run(args: argparse.Namespace) -> int:
    import metrics
    from ltr.data.trec import align, read_qrels, read_run
    from ltr.io_utils import atomic_write_json

    qrels = read_qrels(args.qrels)
    trec_run = read_run(args.run)
    aligned = align(trec_run, qrels, complete=args.complete)
    if not aligned.query_ids:
        raise LtrError(f"no query of {args.run} has judgments in {args.qrels}: nothing to evaluate")
    overrides = {
        "gain": args.gain,
        "ties": args.ties,
        "empty": args.empty,
        "threshold": args.relevance_level,
        "unjudged": "remove" if args.judged_only else None,
    }
    try:
        result = metrics.evaluate(
            aligned.scores,
            aligned.labels,
            aligned.query_offsets,
            args.metrics,
            preset=args.preset,
            doc_ids=aligned.doc_ids,
            qrels_labels=aligned.qrels_labels,
            qrels_offsets=aligned.qrels_offsets,
            query_ids=aligned.query_ids,
            **overrides,
        )
    except ValueError as exc:
        raise LtrError(str(exc)) from None
    report = {"mean": {name: _clean(v) for name, v in result.mean.items()}}
    if args.per_query:
        report["per_query"] = {
            q: {name: _clean(float(values[i])) for name, values in result.per_query.items()}
            for i, q in enumerate(aligned.query_ids)
        }
    if args.output:
        atomic_write_json(args.output, report)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"queries evaluated: {len(aligned.query_ids)} (run only: {len(aligned.dropped_run_queries)}, "
          f"qrels only: {len(aligned.dropped_qrels_queries)}); preset: {args.preset}")
    print(result.table())
    if args.per_query:
        width = max(len(n) for n in result.names)
        print()
        print(f"{'metric':<{width}}  {'query':<12}  value")
        for short, stamped in result.names.items():
            for i, q in enumerate(aligned.query_ids):
                print(f"{short:<{width}}  {q:<12}  {float(result.per_query[stamped][i]):.6f}")
    return 0
