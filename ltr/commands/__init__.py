"""Sub-commands of the ``ltr`` command line (see :mod:`ltr.cli`), and the options several share.

Shared here (and nowhere else, since a command never imports another):

- ``--json [FILE]``: the same in every command that has it: the JSON report on standard output
  (``--json`` alone or ``--json -``; the command's text then goes to standard error), or written
  atomically to FILE;
- the metric conventions of ``ltr eval`` and ``ltr compare`` (``--preset``, ``--gain``, ...);
- the rule that standard input (``-``) can be read by one option of a command only;
- ``--force`` of the commands that write files, and :func:`check_output_files`: an existing file is
  replaced only with ``--force`` and an input never (:func:`ltr.base.checks.output_file` holds the rule).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ltr.base.checks import COUNT, number
from ltr.base.errors import LtrError

PRESETS = ("toolkit", "trec_eval", "sklearn", "lightgbm", "ranx")


def add_json_option(parser: argparse.ArgumentParser, what: str = "the report") -> None:
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                        help=f"write {what} as JSON: on standard output with --json alone (or --json -), else to FILE")


def text_stream(args: argparse.Namespace) -> TextIO:
    """Where a command's text goes: standard error when its JSON report takes standard output."""
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


def add_convention_options(parser: argparse.ArgumentParser) -> None:
    """The options that say how metrics are computed (as ``ltr eval`` has always had them)."""
    parser.add_argument("--preset", choices=PRESETS, default="toolkit",
                        help="conventions to follow; trec_eval reproduces trec_eval 9.x (linear gain, ties by docno "
                        "descending, float32 scores, empty queries 0)")
    parser.add_argument("--gain", choices=["exp2", "linear"], default=None,
                        help="override the preset's gain: 2^rel-1 or rel")
    parser.add_argument("--ties", choices=["stable", "docid_desc", "average", "pessimistic"], default=None,
                        help="override the preset's tie rule (stable = run file order)")
    parser.add_argument("--empty", choices=["skip", "zero", "one"], default=None,
                        help="override the value of a query without relevant documents (skip = left out of means)")
    parser.add_argument("--relevance-level", type=number(), default=None, metavar="L",
                        help="binary metrics count a document relevant when rel >= L (trec_eval -l)")
    parser.add_argument("--p-denominator", choices=["K", "min(K,n)"], default=None,
                        help="P@K divides by K (trec_eval) or by the number of documents shown, min(K, n) "
                        "(TF-Ranking, Rax)")
    parser.add_argument("--max-grade", type=number(above=0), default=None, metavar="G",
                        help="g_max of ERR's stop probability (2^g - 1) / 2^g_max (default 4)")
    parser.add_argument("--judged-only", action="store_true",
                        help="remove unjudged documents from the ranking first (trec_eval -J)")
    parser.add_argument("--complete", action="store_true",
                        help="also evaluate queries of the qrels that the run does not have, as empty rankings "
                        "(trec_eval -c; with --empty skip a query without relevant documents is still skipped)")


def add_force_option(parser: argparse.ArgumentParser, files: str = "the output files") -> None:
    """``--force``: replace existing files at the destinations (never an input, nor a run folder's file)."""
    parser.add_argument("--force", action="store_true",
                        help=f"replace {files} when they exist already (never an input file, nor a file of a run folder)")


def check_output_files(args: argparse.Namespace, targets, inputs) -> None:
    """Check each ``(option, path)`` destination of ``targets`` before any work (``None`` and ``-``,
    standard output, skipped) by :func:`ltr.base.checks.output_file`, with the command's ``--force``."""
    from ltr.base.checks import output_file

    for option, target in targets:
        if target is not None and str(target) != "-":
            output_file(target, option, inputs=inputs, force=getattr(args, "force", None))


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: the metrics split the queries across N threads (same values as one thread)."""
    parser.add_argument("--threads", type=COUNT, default=None, metavar="N",
                        help="threads that evaluate chunks of the queries (numpy's sorts run in parallel; the "
                        "values are the same as with one) (default: LTR_THREADS if set, else 1)")


def metric_threads(args: argparse.Namespace) -> int:
    """The thread count of ``--threads``, else ``LTR_THREADS``, else 1."""
    from ltr.base.threads import configured_threads

    return args.threads or configured_threads() or 1


def convention_overrides(args: argparse.Namespace) -> dict:
    """Keyword conventions for :func:`metrics.evaluate` from the options (None = the preset's)."""
    return {
        "gain": args.gain,
        "ties": args.ties,
        "empty": args.empty,
        "threshold": args.relevance_level,
        "unjudged": "remove" if args.judged_only else None,
        "p_denominator": args.p_denominator,
        "max_grade": args.max_grade,
    }


def check_one_stdin(**paths) -> None:
    """Refuse ``-`` (standard input) for more than one input: it can be read once."""
    on_stdin = [f"--{name.replace('_', '-')}" for name, value in paths.items()
                for v in (value if isinstance(value, (list, tuple)) else [value]) if v == "-"]
    if len(on_stdin) > 1:
        raise LtrError(f"only one input can be read from standard input ('-'), got {', '.join(on_stdin)}")
