"""Options and settings that several ``ltr clicks`` actions share."""

from __future__ import annotations

from ltr.base.checks import COUNT
from ltr.clicks.propensities.curves import MIN_IMPRESSIONS

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


def add_propensity_options(p, applies: str) -> None:
    """``--propensity``, ``--propensity-file`` and ``--min-impressions``: the curve an action divides clicks by
    (:mod:`ltr.commands.clicks.curves`); ``applies`` says to what, for the help."""
    p.add_argument("--propensity", default="logged", choices=("logged", "randomized", "swap", "estimated"),
                   help=f"{applies}: the log's propensity column (logged; a log without one is refused), estimated "
                   "from its randomized or swap sessions, or estimated from whatever it holds (estimated: its "
                   "randomized sessions, else its swap sessions, else regression EM on its production sessions)")
    p.add_argument("--propensity-file", default=None, metavar="CURVE",
                   help=f"{applies}: propensities by position from a file instead (the JSON of `ltr clicks estimate "
                   "--json`, a clicks_training.json, a list, or one number per line; nan for an unknown position)")
    p.add_argument("--min-impressions", type=COUNT, default=MIN_IMPRESSIONS,
                   help="a position shown fewer times than this is unidentified: an estimate reports no propensity "
                   "for it, and training gives it the propensity of the nearest identified position above")
