"""Options and settings that several ``ltr clicks`` actions share."""

from __future__ import annotations

from ltr.checks import COUNT

#: ``clicks train --rounds`` of the GBDT engines: at most this many, stopping early on --valid (as ``ltr gbdt``)
GBDT_ROUNDS = 1000
#: rounds without a better --valid NDCG@10 before a GBDT engine stops (as ``ltr gbdt``)
GBDT_PATIENCE = 50


def progress(args) -> bool:
    """Progress bars (on stderr) unless --quiet: reading a Parquet log, EM's iterations and resamples,
    training epochs."""
    return not getattr(args, "quiet", True)


def add_quiet_option(p) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (reading a Parquet log, regression EM's iterations and bootstrap fits, training epochs)")


def add_log_read_options(p) -> None:
    p.add_argument("--log-ids", default="auto", choices=("auto", "index", "id"),
                   help="Parquet --log: its query and doc columns hold indices into --data (index, what simulate writes) "
                   "or the data set's query ids and document ids (id: qid / query column, #docid comments / "
                   "--doc-id-column); auto = id when either column holds text")
    p.add_argument("--read-rows", type=COUNT, default=1_000_000,
                   help="Parquet --log: rows per record batch when it is streamed (memory ~ this batch plus one "
                   "count per shown (document, position), or per distinct shown list for dla / pairwise-debias)")
