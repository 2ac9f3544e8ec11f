"""The ``ltr`` command line: one sub-command per module in :mod:`ltr.commands`.

Each sub-command lives in ``ltr/commands/<name>.py`` and exposes ``register(subparsers)``, which adds
its parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code).
Errors meant for the user are raised as :class:`ltr.base.errors.LtrError` and printed without a traceback;
so are the operating system's refusals (:class:`OSError`: a full disk, a read-only folder, a file that
vanished), in the words of :func:`ltr.base.checks.describe_os_error`. Both exit with status 2.

Before anything imports torch or LightGBM, :func:`ltr.base.threads.configure_threads` sets passive OpenMP
waiting (and ``LTR_THREADS``'s thread count), which keeps the commands fast on a busy machine, and
:func:`ltr.base.collector.configure_collector` spaces the garbage collector's full passes, which would
otherwise walk the libraries' objects again and again while they load.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ltr import __version__
from ltr.base.collector import configure_collector
from ltr.base.errors import LtrError
from ltr.base.threads import THREADS_ENV, configure_threads

# The order is the order shown in ``ltr --help``.
COMMANDS = ("synth", "eval", "compare", "train", "gbdt", "predict", "convert", "ablate", "calibrate", "auction", "clicks", "export", "tune", "importance", "blend")

#: each command's one-line summary, as its module registers it: ``ltr --help`` lists the commands from
#: here without importing their modules (and numpy with them), which keeps it near the interpreter's
#: own start-up; tests/test_cli_frictions.py holds every entry equal to its module's help
SUMMARIES = {
    "synth": "write seeded MSLR-like synthetic train/valid/test SVMlight files",
    "eval": "evaluate a TREC run file against a qrels file",
    "compare": "compare TREC runs against a baseline with significance tests",
    "train": "train a linear, MLP or context-aware (attention) ranker with a ranking loss (early stopping, "
             "TensorBoard, checkpoints)",
    "gbdt": "train a GBDT baseline (LightGBM, XGBoost or CatBoost) and judge it with the project's metrics",
    "predict": "score a data file with a trained model and write a TREC run file",
    "convert": "convert SVMlight or Parquet data into a memory-mapped store (data larger than RAM)",
    "ablate": "ablation grid (data sets x methods x seeds): means with CIs, paired tests vs a reference, resumable",
    "calibrate": "calibrate scores into probabilities (global maps, field-aware, multicalibration) with an order check; "
                 "apply a saved calibrator to a new day (--apply)",
    "auction": "run GSP / VCG auctions on a table of requests x ads: revenue, welfare, reserves per field value, "
               "winners' PCOC, the true-CTR oracle",
    "clicks": "click models, position-bias estimation, unbiased training, IPS evaluation, interleaving, "
              "Open Bandit data",
    "export": "export a trained model (neural, GBDT or blend) to ONNX, or a neural one to TorchScript, for serving",
    "tune": "hyper-parameter search with Optuna (TPE, pruning, resumable SQLite study, best config as TOML)",
    "importance": "permutation importance of each feature: drop of NDCG@10 with a bootstrap interval over queries",
    "blend": "combine trained models with weights fitted on a validation set",
}


class HelpFormatter(argparse.HelpFormatter):
    """Adds "(default: X)" to an option's help once, and only where it tells something.

    Left out: when the help already states its default ("(default ..."), for required options,
    for defaults of None or False (an unset option, a flag that is off) and for positionals.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "(default" in text
            or action.required
            or not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line, as every other error of the toolkit:
    ``ltr train: error: argument --epochs: must be an integer >= 1, got '0'`` and exit status 2,
    without argparse's usage block (``--help`` shows it). The sub-commands' parsers are of this
    class too (``add_subparsers`` makes them of the parent's class)."""

    def error(self, message: str):
        hint = f" (see {self.prog} --help)" if message.startswith(("the following arguments", "unrecognized")) else ""
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")


def _use_formatter(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every sub-command's parser below it :class:`HelpFormatter`."""
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _use_formatter(child)


def build_parser(commands: tuple | None = None) -> argparse.ArgumentParser:
    """The ``ltr`` parser with the sub-commands in ``commands`` built by their modules (default: all).

    ``()`` (``ltr --help``): every command listed by its summary only (:data:`SUMMARIES`), no module
    imported. A named command (``main`` parsing ``ltr eval ...``): that command's parser alone, since
    the others' would never be read (1-2 ms of every in-process call)."""
    parser = Parser(
        prog="ltr",
        description="Learning-to-rank toolkit: synthetic data, metric-aware training, LightGBM baseline, "
        "evaluation with stated conventions, ablations, calibration and click studies.",
        epilog=f"Threads: OpenMP waits passively unless OMP_WAIT_POLICY says otherwise; {THREADS_ENV}=N sets the "
        "thread count of torch, LightGBM, OpenMP and BLAS (default: each library's own, one per core).",
    )
    parser.add_argument("--version", action="version", version=f"ltr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        if commands is not None and name not in commands:
            if not commands:  # `ltr --help`: the list; with a command named, the others are never read
                sub.add_parser(name, help=SUMMARIES[name])
            continue
        try:
            module = importlib.import_module(f"ltr.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ltr.commands.{name}":
                continue  # sub-command not built yet
            raise
        module.register(sub)
    _use_formatter(parser)
    return parser


def _command_in(argv: list[str]) -> tuple:
    """The sub-command ``argv`` names (its first word that is not an option), as a 1-tuple, or ()."""
    for word in argv:
        if not word.startswith("-"):
            return (word,) if word in COMMANDS else ()
    return ()


def main(argv: list[str] | None = None) -> int:
    configure_collector()
    try:
        configure_threads()  # before any command imports torch or LightGBM
    except LtrError as exc:
        print(f"ltr: error: {exc}", file=sys.stderr)
        return 2
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_in(argv))  # only the command asked for imports its module
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the sub-command they were given to, not by the top-level parser
        prog = " ".join(["ltr", args.command] + ([args.clicks_command] if getattr(args, "clicks_command", None) else []))
        print(f"{prog}: error: unrecognized arguments: {' '.join(unknown)} (see {prog} --help)", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except LtrError as exc:
        print(f"ltr {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout went away (`ltr ... | head`): stop quietly, as Unix tools do
        _silence_stdout()
        return 141
    except OSError as exc:
        from ltr.base.checks import describe_os_error

        print(f"ltr {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"ltr {args.command}: error: out of memory (the input is too large for this machine's memory)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ltr {args.command}: interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not fail on the closed pipe again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (stdout replaced in-process): nothing to flush
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
