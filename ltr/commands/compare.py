"""``ltr compare``: several TREC runs against one baseline, query by query, with significance tests.

Each run is evaluated as ``ltr eval`` would (same metrics, presets and convention options), then
:func:`metrics.compare` takes the queries every run was evaluated on and reports each run's means,
its mean difference from the baseline with a 95% interval, p-values corrected for the number of
comparisons per metric, and wins / ties / losses. Output: a markdown table on the screen, the JSON
report with ``--json`` (standard output or a file, as every command's ``--json``), a LaTeX table
with ``--latex FILE`` and a per-query difference plot with ``--plot FILE.png``.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from ltr.commands import (
    add_convention_options, add_force_option, add_json_option, add_threads_option, check_one_stdin, convention_overrides, metric_threads,
    text_stream,
)
from ltr.base.checks import COUNT, SEED, number
from ltr.base.errors import LtrError

DEFAULT_METRICS = "ndcg@10,map"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare TREC runs against a baseline with significance tests",
        description="Evaluate several TREC runs against one qrels file and compare each with the baseline: "
        "means, mean difference with its interval, paired test p-values corrected for multiple comparisons, "
        "wins/ties/losses over queries. Queries evaluated for every run are compared.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--qrels", required=True, metavar="FILE", help="TREC qrels file: qid iter docno rel ('-': standard input)")
    p.add_argument("--run", required=True, action="append", metavar="FILE",
                   help="a TREC run file (give --run once per run, at least twice; '-': standard input, once)")
    p.add_argument("--name", action="append", default=None, metavar="NAME",
                   help="names of the runs, in --run order (default: the file names without extension)")
    p.add_argument("--metrics", default=DEFAULT_METRICS, help="comma-separated metric names, as in ltr eval")
    p.add_argument("--baseline", default=None, metavar="NAME", help="the run the others are compared with (default: the first)")
    p.add_argument("--test", choices=["t", "randomization", "bootstrap"], default="t",
                   help="paired test: Student t, sign-flip randomization (exact for few queries) or bootstrap")
    p.add_argument("--correction", choices=["holm", "bonferroni", "none"], default="holm",
                   help="multiple-comparison correction over the runs compared, per metric")
    p.add_argument("--confidence", type=number(above=0, below=1), default=0.95, help="level of the difference intervals")
    p.add_argument("--resamples", type=COUNT, default=10_000, help="resamples of the randomization and bootstrap tests")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the randomization and bootstrap tests")
    add_convention_options(p)
    add_threads_option(p)
    add_json_option(p, "the comparison")
    p.add_argument("--latex", default=None, metavar="FILE", help="also write the table as LaTeX to FILE")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="also draw the per-query differences to FILE.png")
    add_force_option(p, "--json FILE, --latex FILE and --plot FILE")
    p.set_defaults(func=run)


def run_names(paths: list[str], names: list[str] | None) -> list[str]:
    """Run names: the ones given, else the file names without extension (made unique)."""
    if names is not None:
        if len(names) != len(paths):
            raise LtrError(f"--name was given {len(names)} times for {len(paths)} runs")
        out = list(names)
    else:
        stems = ["stdin" if p == "-" else Path(p).stem for p in paths]
        # a name given twice is numbered from its second use on: a, a#2, a#3
        out = [n if stems[:i].count(n) == 0 else f"{n}#{stems[:i].count(n) + 1}" for i, n in enumerate(stems)]
    if len(set(out)) != len(out):
        raise LtrError(f"run names must differ, got {', '.join(out)}")
    return out


def run(args) -> int:
    import metrics
    from ltr.data.trec import evaluate_aligned
    from ltr.data.trec_tables import align_tables, read_qrels_table, read_run_table
    from ltr.base.io_utils import atomic_write_text, write_json_report
    from ltr.study.compare_report import comparison_latex, comparison_markdown, plot_differences

    if len(args.run) < 2:
        raise LtrError("ltr compare needs at least two --run (to evaluate one run, use ltr eval)")
    check_one_stdin(qrels=args.qrels, run=args.run)
    from ltr.commands import check_output_files

    inputs = [("--qrels", args.qrels)] + [("--run", r) for r in args.run]
    check_output_files(args, [("--latex", args.latex), ("--plot", args.plot), ("--json", args.json)], inputs)
    names = run_names(args.run, args.name)
    qrels = read_qrels_table(args.qrels)
    results = {}
    for name, path in zip(names, args.run):
        aligned = align_tables(read_run_table(path), qrels, complete=args.complete)
        if not aligned.query_ids:
            raise LtrError(f"no query of {path} has judgments in {args.qrels}: nothing to compare")
        results[name] = evaluate_aligned(aligned, args.metrics, args.preset, threads=metric_threads(args),
                                         **convention_overrides(args))
    try:
        comparison = metrics.compare(results, baseline=args.baseline, test=args.test, correction=args.correction,
                                     confidence=args.confidence, n_resamples=args.resamples, seed=args.seed)
    except ValueError as exc:
        raise LtrError(str(exc)) from None
    if comparison.query_ids is not None and not comparison.query_ids:
        raise LtrError("the runs have no evaluated query in common")
    report = {"preset": args.preset, "queries": len(comparison.query_ids or []), **comparison.as_dict()}
    report["mean"] = {m: {r.run: r.mean for r in comparison.rows if r.metric == m} for m in comparison.metrics}
    # the queries each metric's statistics use (those without a relevant item are skipped)
    report["queries_used"] = {m: min(r.n for r in comparison.rows if r.metric == m) for m in comparison.metrics}
    if args.latex:
        atomic_write_text(args.latex, comparison_latex(comparison))
    if args.plot:
        plot_differences(comparison, args.plot)
    if args.json:
        write_json_report(args.json, report)
    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr
    say(comparison_markdown(comparison), end="")
    for what, path in (("LaTeX table", args.latex), ("difference plot", args.plot)):
        if path:
            say(f"wrote {what} to {path}")
    return 0
