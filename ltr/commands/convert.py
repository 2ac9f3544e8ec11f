"""``ltr convert``: turn an SVMlight/LETOR file or a Parquet file/folder into a memory-mapped store.

The store (a folder: ``features.npy`` [N, F] float32 plus labels, query offsets and ids, see
:mod:`ltr.data.store`) is written in one streaming pass with bounded memory, and every command that
takes a data file takes it (``ltr train --train STORE ...``): its features are memory-mapped, never
loaded whole, so data larger than RAM trains with a bounded resident set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ltr.base.checks import COUNT
from ltr.data.files import add_data_options


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert SVMlight or Parquet data into a memory-mapped store (data larger than RAM)",
        description="Read SRC (an SVMlight/LETOR file, or a Parquet file or folder) block by block and write a "
        "memory-mapped store (a folder) that `ltr train`, `ltr gbdt`, `ltr predict` and `ltr clicks` read "
        "without loading its features. One pass, bounded memory; the rows of a query must be contiguous in SRC. "
        "The store appears whole or not at all.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("src", metavar="SRC", help="SVMlight/LETOR file, or Parquet file or folder")
    p.add_argument("--out", required=True, metavar="STORE", help="store folder to create")
    p.add_argument("--force", action="store_true", help="replace --out if it is a store written by ltr convert (never any other folder)")
    p.add_argument("--n-features", type=COUNT, default=None, metavar="F",
                   help="SVMlight: number of feature columns (default: the largest index in the file; give the training data's width for a sparse valid/test file)")
    p.add_argument("--zero-based", action="store_true", help="SVMlight: feature indices start at 0")
    p.add_argument("--query-file", default=None, metavar="FILE", help="SVMlight: LightGBM group sizes (default: SRC.query when it exists)")
    p.add_argument("--block-rows", type=COUNT, default=65536, help="Parquet: rows read at a time")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ltr.data.files import data_options
    from ltr.data.store import convert_to_store, open_store
    from ltr.base.errors import LtrError

    from ltr.base.checks import input_file

    if not os.path.isdir(args.src):  # a folder is a Parquet data set; a FIFO or device would block the reader
        input_file(args.src, "SRC")
    if args.query_file is not None:
        input_file(args.query_file, "--query-file")
    options = data_options(args)
    if options.sort_by_query:
        raise LtrError("--sort-by-query: a store is written in one streaming pass and cannot regroup rows; sort SRC by query first")
    from ltr.runs.folder import clean_stale_partials

    clean_stale_partials(args.out)  # a conversion killed with SIGKILL left .NAME.partial-PID, store-sized
    t0 = time.perf_counter()
    columns = options.parquet_kwargs()
    del columns["sort_by_query"]
    out = convert_to_store(
        args.src, args.out, overwrite=args.force, n_features=args.n_features, zero_based=args.zero_based,
        query_file=args.query_file, block_rows=args.block_rows, progress=False if args.quiet else None, **columns,
    )  # fmt: skip
    ds = open_store(out)
    manifest = json.loads((out / "store.json").read_text())
    if manifest.get("negative_labels"):
        print(f"note: {args.src}: {manifest['negative_labels']} negative label(s) read as 0 (judged non-relevant)", file=sys.stderr)
    size = ds.features.nbytes / 2**30
    print(f"wrote {out}: {ds.n_queries} queries, {ds.n_items} rows, {ds.n_features} features ({size:.2f} GiB) in {time.perf_counter() - t0:.1f} s")
    return 0
