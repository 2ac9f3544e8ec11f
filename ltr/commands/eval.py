"""``ltr eval``: evaluate a TREC run against qrels with stated conventions."""

from __future__ import annotations

import argparse
import functools

from ltr.commands import (
    add_convention_options, add_force_option, add_json_option, add_threads_option, check_one_stdin, convention_overrides, metric_threads,
    text_stream,
)
from ltr.base.errors import LtrError

DEFAULT_METRICS = "ndcg@10,map,mrr@10,p@10,recall@100"
DEFAULT_DIVERSITY = "alpha_ndcg@5,alpha_ndcg@10,alpha_ndcg@20"


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
    parser.add_argument("--qrels", required=True, metavar="FILE", help="TREC qrels file: qid iter docno rel ('-': standard input)")
    parser.add_argument("--run", required=True, action="append", metavar="FILE",
                        help="TREC run file: qid Q0 docno rank score tag ('-': standard input); one run "
                        "(compare several with `ltr compare`)")
    parser.add_argument(
        "--metrics",
        default=DEFAULT_METRICS,
        help="comma-separated metrics: ndcg, dcg, map/ap, mrr/rr, p/precision, recall, hit/hitrate, rprec, err, "
        "dcg_burges, ndcg_burges, each with an optional @K; rbp[.P], rbp_resid[.P], opa, arp, arp_graded; every trec_eval "
        "measure by its name (P_10, ndcg_cut_10, bpref, infAP, iprec_at_recall_0.10, ...), trec_eval's "
        "parameter syntax (P.5,10) and all_trec for all of them",
    )
    add_convention_options(parser)
    add_threads_option(parser)
    parser.add_argument("--diversity", action="store_true",
                        help="--qrels holds TREC diversity qrels (qid subtopic docno rel); the metrics are "
                        "alpha_ndcg@K (Clarke et al. 2008, greedy ideal over every judged document)")
    parser.add_argument("--alpha", type=float, default=0.5, help="alpha of alpha_ndcg (with --diversity)")
    parser.add_argument("--per-query", action="store_true", help="also report every query's values")
    add_json_option(parser, '{"mean": {name: value}, "metrics": {name: {"stamped", "mean", "queries", '
                    '"per_query"}}} with names as asked (per_query with --per-query; a skipped query is null)')
    parser.add_argument("--output", metavar="FILE", default=None,
                        help="also write the JSON report to FILE (atomically)")
    add_force_option(parser, "--json FILE and --output FILE")
    parser.set_defaults(func=run)


def scored_note(evaluated: int, scored: list[int], result) -> str:
    """How many of the evaluated queries the means count: the others have no relevant document and
    are skipped by the ``empty`` convention (``empty=skip``, the toolkit's default).

    >>> scored_note(156, [105], None)
    'scored: 105 (51 skipped: no relevant document, empty=skip)'
    >>> scored_note(3, [3], None)
    'scored: all 3'
    """
    if len(scored) > 1:
        return f"scored: {scored[0]} to {scored[-1]}, by metric (the queries column)"
    if scored[0] == evaluated:
        return f"scored: all {evaluated}"
    return f"scored: {scored[0]} ({evaluated - scored[0]} skipped: no relevant document, empty=skip)"


def run(args: argparse.Namespace) -> int:
    from ltr.data.trec import (
        align_diversity, evaluate_aligned, evaluate_diversity, read_diversity_qrels, read_run,
    )
    from ltr.commands import check_output_files
    from ltr.base.io_utils import write_json_report

    if len(args.run) > 1:
        raise LtrError(f"--run was given {len(args.run)} times, but ltr eval evaluates one run; to compare runs "
                       "use `ltr compare --qrels FILE --run A --run B ...` (differences, tests, wins/losses)")
    run_path = args.run[0]
    check_one_stdin(qrels=args.qrels, run=run_path)
    inputs = [("--qrels", args.qrels), ("--run", run_path)]
    check_output_files(args, [("--output", args.output), ("--json", args.json)], inputs)
    if not [m for m in args.metrics.split(",") if m.strip()]:
        raise LtrError(f"--metrics names no metric ({args.metrics!r}); e.g. --metrics ndcg@10,map")
    if args.diversity:
        aligned = align_diversity(read_run(run_path), read_diversity_qrels(args.qrels))
        aligned.dropped_run_queries = aligned.dropped_qrels_queries = []
    else:
        from ltr.data.trec_tables import align_tables, read_qrels_table, read_run_table

        aligned = align_tables(read_run_table(run_path), read_qrels_table(args.qrels), complete=args.complete)
    if not aligned.query_ids:
        raise LtrError(f"no query of {run_path} has judgments in {args.qrels}: nothing to evaluate")
    if args.diversity:
        metric_names = DEFAULT_DIVERSITY if args.metrics == DEFAULT_METRICS else args.metrics
        result = evaluate_diversity(aligned, metric_names, args.alpha, args.preset, **convention_overrides(args))
    else:
        result = evaluate_aligned(aligned, args.metrics, args.preset, threads=metric_threads(args),
                                  **convention_overrides(args))
    scored = sorted(set(result.counted.values()))
    report = {
        "queries": {"evaluated": len(aligned.query_ids), "run_only": len(aligned.dropped_run_queries),
                    "qrels_only": len(aligned.dropped_qrels_queries),
                    "scored": {short: result.counted[st] for short, st in result.names.items()}},
        "preset": args.preset,
        **result.as_dict(per_query=args.per_query),
    }
    if args.output:
        write_json_report(args.output, report)
    if args.json:
        write_json_report(args.json, report)
    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr
    say(f"queries evaluated: {len(aligned.query_ids)} (run only: {len(aligned.dropped_run_queries)}, "
        f"qrels only: {len(aligned.dropped_qrels_queries)}); {scored_note(len(aligned.query_ids), scored, result)}; "
        f"preset: {args.preset}")
    say(result.table())
    if args.per_query:
        width = max(len(n) for n in result.names)
        say()
        say(f"{'metric':<{width}}  {'query':<12}  value")
        for short, stamped in result.names.items():
            for i, q in enumerate(aligned.query_ids):
                say(f"{short:<{width}}  {q:<12}  {float(result.per_query[stamped][i]):.6f}")
    return 0
