"""How ``ltr clicks`` actions read a --log, a scores file or a model folder, and the propensity curve a log gives.

A Parquet --log is read in record batches where the action allows it (:func:`unless_unsorted` falls back
to reading it whole, with a note, when its session ids go back); a ``.npz`` log is read whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ltr.commands.clicks.options import progress
from ltr.base.errors import LtrError


def read_scores(path: str, n_rows: int, what: str) -> np.ndarray:
    from ltr.data.columns import read_number_column

    values = read_number_column(path, what="score", option=what)
    if len(values) != n_rows:
        raise LtrError(f"{what} {path}: {len(values)} scores, the data has {n_rows} rows")
    return values


def model_scores(folder: str, ds, option: str, data_path: str) -> np.ndarray:
    from ltr.models.folder import check_width, load_scorer

    score, n_features = load_scorer(folder, option=option)
    check_width(ds, n_features, "--data", data_path)
    return np.asarray(score(ds.features, ds.query_offsets), dtype=np.float64)


def load_log(path: str, ids=None, modes=None):
    import zipfile

    from ltr.clicks.logs.click_log import ClickLog
    from ltr.clicks.logs.table import is_log_table, read_log_parquet

    if is_log_table(path):
        return read_log_parquet(path, ids=ids, modes=modes)
    # A click log is a .npz (a zip archive); anything else would reach numpy, whose message about
    # pickled data does not tell a CLI user what went wrong.
    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise LtrError(f"--log {path}: not a click log; expected the clicks.npz or clicks.parquet that "
                       "`ltr clicks simulate --out DIR` writes")
    return ClickLog.load(path)


def estimate_propensity(log, method: str, positions: int | None, confidence: float):
    from ltr.clicks.propensities.interventions import estimate_from_randomized, estimate_from_swaps

    if not 0 < confidence < 1:
        raise LtrError(f"--confidence must be in (0, 1), got {confidence}")
    fn = estimate_from_randomized if method == "randomized" else estimate_from_swaps
    return fn(log, positions, confidence=confidence)


def unless_unsorted(read):
    """``read()`` of a Parquet --log in record batches, or None, with a note on stderr, when the log's session ids
    go back (:class:`ltr.clicks.logs.list_stream.UnsortedSessionsError`): the caller then reads it whole."""
    import sys

    from ltr.clicks.logs.list_stream import UnsortedSessionsError

    try:
        return read()
    except UnsortedSessionsError as exc:
        print(f"note: {exc}; reading the log whole", file=sys.stderr)
        return None


def log_ids(args, ds):
    """How a Parquet --log names the rows of --data (:class:`ltr.clicks.logs.ids.LogIds`); None for a .npz log."""
    from ltr.clicks.logs.ids import LogIds
    from ltr.clicks.logs.stream import id_mode
    from ltr.clicks.logs.table import is_log_table

    if not is_log_table(args.log):
        if getattr(args, "log_ids", "auto") == "id":
            raise LtrError(f"--log-ids id: --log {args.log} is a .npz log, which holds indices; ids come in Parquet logs")
        return None
    return LogIds(ds, id_mode(args.log, getattr(args, "log_ids", "auto")))


def check_log_meta(args, ds, meta: dict) -> None:
    if meta.get("n_rows") not in (None, ds.n_items):
        raise LtrError(f"--log {args.log} was simulated on {meta['n_rows']} rows, --data {args.data} has {ds.n_items}")


def train_log(args, ds, modes=None):
    ids = log_ids(args, ds)
    log = load_log(args.log, ids, modes)
    check_log_meta(args, ds, log.meta)
    if ((log.n_entries and log.doc.max() >= ds.n_items) or (log.n_entries and log.query.max() >= ds.n_queries)):
        raise LtrError(f"--log {args.log} was not simulated on --data {args.data} (its rows or queries are not this file's)")
    return log


def interventions(args, ds=None):
    """``(source, meta, max position)`` of the --log's randomized and swap traffic for the propensity estimators:
    a Parquet log's sums streamed in record batches of --read-rows rows (:mod:`ltr.clicks.propensities.intervention_sums`),
    else (a .npz log, or session ids that go back) its intervention sessions read into memory."""
    import sys

    from ltr.clicks.propensities.intervention_sums import stream_intervention_sums
    from ltr.clicks.logs.list_stream import UnsortedSessionsError
    from ltr.clicks.logs.stream import read_log_meta
    from ltr.clicks.logs.table import is_log_table

    if is_log_table(args.log):
        meta = read_log_meta(args.log)
        if ds is not None:
            check_log_meta(args, ds, meta)
        try:
            sums = stream_intervention_sums(args.log, batch_size=args.read_rows, progress=progress(args))
            return sums, meta, sums.max_position
        except UnsortedSessionsError as exc:
            print(f"note: {exc}; reading its randomized and swap sessions whole", file=sys.stderr)
    log = train_log(args, ds, modes=(1, 2)) if ds is not None else load_log(args.log, modes=(1, 2))
    if not log.n_entries:
        raise LtrError(f"--log {args.log}: the click log has no randomized or swap sessions")
    return log, log.meta, int(log.position.max())


def stream_log(args, ds, modes=None, clip: float = 0.01):
    """The Parquet --log summed per (document, position) in record batches of --read-rows rows."""
    from ltr.clicks.logs.stream import aggregate_log, read_log_meta

    check_log_meta(args, ds, read_log_meta(args.log))
    return aggregate_log(args.log, ds, ids=args.log_ids, batch_size=args.read_rows, modes=modes, clip=clip,
                         progress=progress(args))


def stream_lists(args, train):
    """``(lists, pairs, meta)`` of the Parquet --log read in record batches of --read-rows rows, or None (with a
    note) when its session ids go back, so that it is read whole."""
    from ltr.clicks.logs.list_stream import stream_shown_lists
    from ltr.clicks.logs.stream import read_log_meta

    check_log_meta(args, train, read_log_meta(args.log))
    return unless_unsorted(lambda: stream_shown_lists(args.log, train, ids=args.log_ids, batch_size=args.read_rows,
                                                       pairs=args.estimator == "pairwise-debias",
                                                       progress=progress(args)))
