"""``ltr synth``: write seeded MSLR-like train/valid/test SVMlight files and a JSON description.

Each file is written atomically; ``description.json`` holds every parameter, the seed, the generator
version, the recipe and the realised statistics of the whole set and of each split, so the files can
be made again bit for bit with the same command.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ltr.base.checks import COUNT, SEED, integer, number
from ltr.base.errors import LtrError

FILES = ("train.txt", "valid.txt", "test.txt")
# the generator's argument names -> the options that set them, for its error messages
_OPTIONS = {"n_queries": "--queries", "n_features": "--features", "mean_list_length": "--mean-length",
            "max_list_length": "--max-length", "empty_query_share": "--empty-share", "label_noise": "--label-noise",
            "n_users": "--users", "valid_share": "--valid-share", "test_share": "--test-share",
            "query_relative": "--query-relative"}


def register(subparsers) -> None:
    from ltr.data.synthetic import DEFAULT

    p = subparsers.add_parser(
        "synth",
        help="write seeded MSLR-like synthetic train/valid/test SVMlight files",
        description="Generate MSLR-like ranking data (heavy-tailed list lengths, grades 0..4 from a "
        "hidden non-linear teacher plus noise, a share of queries without relevant documents, users "
        "with heavy-tailed activity), split it by query and write DIR/train.txt, DIR/valid.txt, "
        "DIR/test.txt (SVMlight with qid; the user of each query is in the line comment as "
        "'user = U') and DIR/description.json (parameters, seed, recipe, statistics). The same "
        "options and seed give identical files.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the files into (created if missing)")
    p.add_argument("--queries", type=COUNT, default=DEFAULT["n_queries"], metavar="N", help="number of queries in all three files together")
    p.add_argument("--seed", type=SEED, default=DEFAULT["seed"], metavar="S", help="random seed of the generator and of the split")
    p.add_argument("--features", type=COUNT, default=136, metavar="F", help="number of features")
    p.add_argument("--mean-length", type=number(min=1), default=120.0, metavar="M", help="mean number of documents per query")
    p.add_argument("--max-length", type=COUNT, default=1000, metavar="L", help="largest number of documents per query")
    p.add_argument("--empty-share", type=number(min=0, max=1), default=0.05, metavar="X", help="share of queries with no relevant document (0..1)")
    p.add_argument("--label-noise", type=number(min=0), default=0.6, metavar="SD", help="standard deviation of the noise added to the teacher score before grading (higher: harder to learn)")
    p.add_argument("--query-relative", type=number(min=0), default=0.0, metavar="R",
                   help="give the informative score columns a per-query location and scale, so that only their order within "
                        "a query carries the signal: x' = R sd eta + exp(R eta / 4) x, eta ~ N(0, 1) per query and column, mostly shared by a query's columns "
                        "(0: off, the files of earlier versions; 2: about 80%% of such a column's variance lies between queries)")
    p.add_argument("--users", type=integer(min=1), default=None, metavar="U", help="number of users (default: as many as a Zipf law of queries per user needs)")
    p.add_argument("--valid-share", type=number(min=0, below=1), default=0.1, metavar="X", help="share of queries in valid.txt")
    p.add_argument("--test-share", type=number(min=0, below=1), default=0.1, metavar="X", help="share of queries in test.txt")
    p.add_argument("--by-user", action="store_true", help="keep all queries of a user in the same split")
    p.add_argument("--force", action="store_true", help="overwrite the files of an earlier `ltr synth` in DIR (never files it did not write)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=run)


def _written_by_synth(out: Path) -> bool:
    import json

    try:
        d = json.loads((out / "description.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and str(d.get("command", "")).startswith("ltr synth")


def run(args) -> int:
    from ltr.data import save_svmlight
    from ltr.data.synthetic import make_synthetic_splits
    from ltr.base.io_utils import atomic_write_json

    from ltr.base.checks import output_folder

    out = output_folder(args.out, "--out")
    existing = [name for name in FILES + ("description.json",) if (out / name).exists()]
    if existing and not _written_by_synth(out):  # first: --force would not help
        raise LtrError(f"--out {out} holds {', '.join(existing)} that `ltr synth` did not write (no description.json "
                       "of its own), which --force never overwrites: choose another --out")
    if existing and not args.force:
        raise LtrError(f"{out} already holds {', '.join(existing)} of an earlier `ltr synth`; choose another --out "
                       "or pass --force to overwrite them")
    if args.valid_share + args.test_share >= 1.0:
        raise LtrError(f"--valid-share {args.valid_share} + --test-share {args.test_share} must stay below 1 "
                       "(the rest is the training share)")
    t0 = time.perf_counter()
    try:
        parts = make_synthetic_splits(
            args.queries,
            args.features,
            mean_list_length=args.mean_length,
            max_list_length=args.max_length,
            empty_query_share=args.empty_share,
            label_noise=args.label_noise,
            n_users=args.users,
            query_relative=args.query_relative,
            valid_share=args.valid_share,
            test_share=args.test_share,
            by_user=args.by_user,
            seed=args.seed,
        )
    except ValueError as exc:
        text = str(exc)
        for name, option in _OPTIONS.items():
            text = text.replace(name, option)
        raise LtrError(f"bad option: {text}") from None
    description = dict(parts[0].meta["description"])
    description["files"] = {}
    for name, part in zip(FILES, parts):
        save_svmlight(part, out / name, progress=False if args.quiet else None)
        description["files"][name] = {"queries": part.n_queries, "items": part.n_items}
    description["command"] = (
        f"ltr synth --out DIR --queries {args.queries} --seed {args.seed} --features {args.features} "
        f"--mean-length {args.mean_length} --max-length {args.max_length} --empty-share {args.empty_share} "
        f"--label-noise {args.label_noise}"
        + (f" --users {args.users}" if args.users is not None else "")
        + (f" --query-relative {args.query_relative}" if args.query_relative > 0 else "")
        + f" --valid-share {args.valid_share} --test-share {args.test_share}"
        + (" --by-user" if args.by_user else "")
    )
    atomic_write_json(out / "description.json", description)
    if not args.quiet:
        sizes = ", ".join(f"{n}: {p.n_queries} queries / {p.n_items} rows" for n, p in zip(FILES, parts))
        print(f"wrote {out} ({sizes}) in {time.perf_counter() - t0:.1f} s")
    return 0
