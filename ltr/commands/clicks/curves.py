"""The propensity curve an ``ltr clicks`` action divides by, and where it came from.

``--propensity``:

* ``logged`` (the default): the log's ``propensity`` column; a log without one is refused by the estimators
  that need it (:mod:`ltr.clicks.estimators.propensity_source`), never read as 1.0;
* ``randomized`` / ``swap``: estimated from the log's randomized or swap sessions;
* ``estimated``: from this log, whatever it holds: its randomized sessions, else its swap sessions, else
  regression EM (``--em-relevance``) on its production sessions.

``--propensity-file CURVE`` gives the curve instead (:func:`ltr.clicks.propensities.curves.read_curve_file`).
Every curve goes through the one rule for positions it does not identify
(:func:`ltr.clicks.propensities.curves.complete_curve`), and its source names the estimator and the
unidentified positions.
"""

from __future__ import annotations

import numpy as np

from ltr.clicks.propensities.curves import EM_ITERATIONS
from ltr.commands.clicks.options import progress
from ltr.commands.clicks.reading import estimate_propensity, interventions, stream_log, train_log
from ltr.base.errors import LtrError


class CurveSource:
    """A propensity curve by position (NaN where unknown), the positions it identifies, and its source."""

    def __init__(self, theta, identified, source: str):
        self.theta = np.asarray(theta, dtype=np.float64)
        self.identified = None if identified is None else np.asarray(identified, dtype=bool)
        self.source = source

    def curve(self, log_positions: int) -> tuple[np.ndarray, str]:
        """``(curve, source)`` over at least ``log_positions`` positions (the log's largest shown one), completed
        by the rule of :mod:`ltr.clicks.propensities.curves`; the source names the log's unidentified positions."""
        from ltr.clicks.propensities.curves import complete_curve, unidentified_note

        theta, known = complete_curve(self.theta, max(int(log_positions), len(self.theta)), self.identified)
        note = unidentified_note(known[: int(log_positions)])
        return theta, self.source if note is None else f"{self.source}; {note}"


def _traffic(args, train, log, kind: str) -> CurveSource:
    """The curve of the log's ``kind`` (randomized or swap) sessions; a position is identified when its estimate
    is a number above 0 from at least --min-impressions sessions."""
    source = log if log is not None else interventions(args, train)[0]
    est = estimate_propensity(source, kind, None, 0.95)
    identified = np.isfinite(est.theta) & (est.theta > 0) & (est.sessions >= args.min_impressions)
    identified[0] = True
    return CurveSource(est.theta, identified, f"estimated from {kind} traffic")


def _any_traffic(args, train, log) -> CurveSource | None:
    """The randomized sessions' curve, else the swap sessions', else None (the log has neither)."""
    for kind in ("randomized", "swap"):
        try:
            return _traffic(args, train, log, kind)
        except LtrError:
            continue
    return None


def _em_curve(args, train, log) -> CurveSource:
    """Regression EM on the log's production sessions (``--em-relevance``), its unidentified positions NaN."""
    from ltr.clicks.logs.counts import observations_from_log
    from ltr.clicks.propensities.regression_em import regression_em

    if log is not None:
        obs = observations_from_log(log.select_sessions(log.session_mode == 0))
    else:
        obs = stream_log(args, train, modes=(0,)).observations()
    relevance = getattr(args, "em_relevance", "logistic")
    res = regression_em(obs, relevance=relevance, features=train.features,
                        iterations=getattr(args, "em_iterations", EM_ITERATIONS), seed=getattr(args, "seed", 0),
                        min_impressions=args.min_impressions, progress=progress(args))
    return CurveSource(res.theta, res.identified,
                       f"estimated by regression EM ({relevance}) on the log's production sessions")


def propensity_curve(args, train, log=None) -> CurveSource | None:
    """The curve of ``--propensity`` / ``--propensity-file`` (module docstring) from the --log (``log`` when it
    is held in memory, else the Parquet file read in record batches); None for the logged propensities."""
    from ltr.clicks.propensities.curves import read_curve_file

    if args.propensity_file is not None:
        theta = read_curve_file(args.propensity_file)
        return CurveSource(theta, np.isfinite(theta), f"file {args.propensity_file}")
    if args.propensity == "logged":
        return None
    if args.propensity in ("randomized", "swap"):
        return _traffic(args, train, log, args.propensity)
    found = _any_traffic(args, train, log)
    return found if found is not None else _em_curve(args, train, log)


def log_curve(args, train, log, log_positions: int) -> tuple[np.ndarray | None, str | None]:
    """``(curve, source)`` over ``log_positions`` positions, ``(None, None)`` for the logged propensities."""
    found = propensity_curve(args, train, log)
    return (None, None) if found is None else found.curve(log_positions)


def streamed_aggregate(args, train):
    """``(aggregate, curve, source)`` of a Parquet --log read in record batches: its per-cell sums and the curve of
    --propensity / --propensity-file over every shown position; ``curve`` and ``source`` are None for the logged
    propensities."""
    found = propensity_curve(args, train)  # before the log is read, so that a log without such traffic fails at once
    agg = stream_log(args, train, clip=args.clip)
    curve, source = (None, None) if found is None else found.curve(int(agg.position.max()))
    return agg, curve, source


def policy_aware_aggregate(args, train):
    """``(aggregate, curve, source, how the log was read)`` for policy-aware on a GBDT engine: a Parquet --log's
    per-cell sums read in record batches (:func:`streamed_aggregate`), else those of the log read into memory,
    with its curve."""
    from ltr.clicks.logs.stream import aggregate_from_log
    from ltr.clicks.logs.table import is_log_table

    if is_log_table(args.log):
        return (*streamed_aggregate(args, train), "streamed per (query, document, position)")
    log = train_log(args, train)
    curve, source = log_curve(args, train, log, int(log.position.max()) if log.n_entries else 1)
    return aggregate_from_log(log, train), curve, source, "per (query, document, position)"


def _held(values: np.ndarray, known: np.ndarray, n: int) -> np.ndarray:
    """``values`` over ``n`` positions, each unknown one (and every one beyond) holding the nearest known above."""
    out = np.empty(n)
    last = values[0]
    for r in range(n):
        if r < len(values) and known[r]:
            last = values[r]
        out[r] = last
    return out


def affine_parameters(args, train, log=None, log_positions: int = 1):
    """``((alpha, beta), source)`` of ``--estimator affine`` from ``--affine-file`` or ``--affine estimated`` (the
    trust-bias fit of intervention harvesting on the --log, :mod:`ltr.clicks.propensities.trust`), completed over
    the log's positions by the rule of :mod:`ltr.clicks.propensities.curves`; ``(None, None)`` for the
    simulator's settings in the log's meta."""
    from ltr.clicks.propensities.curves import unidentified_note
    from ltr.clicks.propensities.trust import trust_from_file

    if args.affine_file is not None:
        alpha, beta = trust_from_file(args.affine_file)
        source = f"file {args.affine_file}"
    elif args.affine == "estimated":
        from ltr.clicks.propensities.harvesting import counts_from_cells
        from ltr.clicks.propensities.trust import estimate_trust

        est = estimate_trust(counts_from_cells([_harvest_cells(args, log)]))
        alpha, beta = est.alpha, est.beta
        source = "estimated by intervention harvesting's trust-bias fit on this log (on the scale of position 1)"
    else:
        return None, None
    known = np.isfinite(alpha) & np.isfinite(beta)
    n = max(int(log_positions), len(alpha))
    note = unidentified_note(np.r_[known, np.zeros(max(0, int(log_positions) - len(known)), bool)][: int(log_positions)])
    return (_held(alpha, known, n), _held(beta, known, n)), source + (f"; {note}" if note else "")


def _harvest_cells(args, log):
    """The per (query, document, position) sums of the --log for the trust-bias fit: the log in memory, or the
    Parquet / CSV log read in record batches (whole, with a note, when its session ids go back)."""
    from ltr.clicks.propensities.harvest_stream import cells_of_log, stream_harvest_cells
    from ltr.commands.clicks.reading import load_log, unless_unsorted

    if log is not None:
        return cells_of_log(log)
    cells = unless_unsorted(lambda: stream_harvest_cells(args.log, batch_size=args.read_rows, progress=progress(args)))
    return cells if cells is not None else cells_of_log(load_log(args.log))
