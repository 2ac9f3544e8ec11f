"""``ltr synth``: write seeded MSLR-like train/valid/test SVMlight files and a JSON description.

Each file is written atomically; ``description.json`` holds every parameter, the seed, the generator
version, the recipe and the realised statistics of the whole set and of each split, so the files can
be made again bit for bit with the same command.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ltr.errors import LtrError

FILES = ("train.txt", "valid.txt", "test.txt")


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
    p.add_argument("--queries", type=int, default=DEFAULT["n_queries"], metavar="N", help="number of queries in all three files together")
    p.add_argument("--seed", type=int, default=DEFAULT["seed"], metavar="S", help="random seed of the generator and of the split")
    p.add_argument("--features", type=int, default=136, metavar="F", help="number of features")
    p.add_argument("--mean-length", type=float, default=120.0, metavar="M", help="mean number of documents per query")
    p.add_argument("--max-length", type=int, default=1000, metavar="L", help="largest number of documents per query")
    p.add_argument("--empty-share", type=float, default=0.05, metavar="X", help="share of queries with no relevant document (0..1)")
    p.add_argument("--label-noise", type=float, default=0.6, metavar="SD", help="standard deviation of the noise added to the teacher score before grading (higher: harder to learn)")
    p.add_argument("--users", type=int, default=None, metavar="U", help="number of users (default: as many as a Zipf law of queries per user needs)")
    p.add_argument("--valid-share", type=float, default=0.1, metavar="X", help="share of queries in valid.txt")
    p.add_argument("--test-share", type=float, default=0.1, metavar="X", help="share of queries in test.txt")
    p.add_argument("--by-user", action="store_true", help="keep all queries of a user in the same split")
    p.add_argument("--force", action="store_true", help="overwrite files already in DIR")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=run)


def run(args) -> int:
    from ltr.data import save_svmlight
    from ltr.data.synthetic import make_synthetic_splits
    from ltr.io_utils import atomic_write_json

    out = Path(args.out)
    existing = [name for name in FILES + ("description.json",) if (out / name).exists()]
    if existing and not args.force:
        raise LtrError(f"{out} already holds {', '.join(existing)}; pass --force to overwrite")
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
            valid_share=args.valid_share,
            test_share=args.test_share,
            by_user=args.by_user,
            seed=args.seed,
        )
    except ValueError as exc:
        raise LtrError(f"bad option: {exc}") from None
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
        + f" --valid-share {args.valid_share} --test-share {args.test_share}"
        + (" --by-user" if args.by_user else "")
    )
    atomic_write_json(out / "description.json", description)
    if not args.quiet:
        sizes = ", ".join(f"{n}: {p.n_queries} queries / {p.n_items} rows" for n, p in zip(FILES, parts))
        print(f"wrote {out} ({sizes}) in {time.perf_counter() - t0:.1f} s")
    return 0
