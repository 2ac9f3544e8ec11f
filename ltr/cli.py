"""The ``ltr`` command line: one sub-command per module in :mod:`ltr.commands`.

Each sub-command lives in ``ltr/commands/<name>.py`` and exposes ``register(subparsers)``, which adds
its parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code).
Errors meant for the user are raised as :class:`ltr.errors.LtrError` and printed without a traceback;
so are the operating system's refusals (:class:`OSError`: a full disk, a read-only folder, a file that
vanished), in the words of :func:`ltr.checks.describe_os_error`. Both exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ltr import __version__
from ltr.errors import LtrError

# The order is the order shown in ``ltr --help``.
COMMANDS = ("synth", "eval", "compare", "train", "gbdt", "predict", "ablate", "calibrate", "clicks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ltr",
        description="Learning-to-rank toolkit: synthetic data, metric-aware training, LightGBM baseline, "
        "evaluation with stated conventions, ablations, calibration and click studies.",
    )
    parser.add_argument("--version", action="version", version=f"ltr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"ltr.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ltr.commands.{name}":
                continue  # sub-command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except LtrError as exc:
        print(f"ltr {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        from ltr.checks import describe_os_error

        print(f"ltr {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"ltr {args.command}: error: out of memory (the input is too large for this machine's memory)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ltr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
