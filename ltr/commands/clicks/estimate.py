"""``ltr clicks estimate``: examination propensities by position from a click log.

Randomized or swap traffic, regression EM on production traffic alone, or intervention harvesting from the
logs of several rankers.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from ltr.base.checks import COUNT, integer, number
from ltr.clicks.propensities.curves import EM_ITERATIONS, MIN_IMPRESSIONS
from ltr.commands import add_force_option, add_json_option, text_stream
from ltr.commands.clicks.options import add_log_read_options, add_quiet_option, progress
from ltr.commands.clicks.reading import estimate_propensity, interventions, load_log, stream_log, train_log, unless_unsorted
from ltr.commands.clicks.report import estimate_rows, format_table, honest_rows, interval_notes, model_notes
from ltr.data.files import add_data_options, add_format_options, data_options, format_options, load_data_file
from ltr.base.errors import LtrError


def add_parser(sub, fmt) -> None:
    e = sub.add_parser("estimate", help="estimate examination propensity by position from a click log", formatter_class=fmt,
                       description="theta_r / theta_1 from randomized sessions (CTR ratio) or swap interventions "
                       "(click rate of the top item moved to r over left at 1), with delta-method intervals; "
                       "compared with the simulator's truth when the log was simulated with PBM. --method em needs no "
                       "intervention: regression EM (Wang et al. 2018) on the production sessions, relevance a logistic "
                       "regression on the features of --data, with a percentile bootstrap over queries. --method harvest "
                       "needs no intervention either: intervention harvesting (Agarwal et al. 2019) from the logs of several "
                       "rankers (give --log several times), which put the same documents at different positions.")
    e.add_argument("--log", required=True, action="extend", nargs="+", metavar="FILE",
                   help="clicks.npz or clicks.parquet written by `ltr clicks simulate` (--method harvest: one per logging ranker)")
    e.add_argument("--method", default="randomized", choices=("randomized", "swap", "em", "harvest"), help="which traffic and estimator to use")
    e.add_argument("--pairs", default="allpairs", choices=("allpairs", "adjacent"),
                   help="--method harvest: AllPairs likelihood over every pair of positions, or the chain of adjacent ratios")
    e.add_argument("--trust", action="store_true",
                   help="--method harvest: fit trust bias's affine click model, alpha and beta by position on the scale "
                   "of position 1 (for --estimator affine --affine-file), instead of the position-based propensity")
    e.add_argument("--data", default=None, metavar="FILE", help="--method em: the labelled file the log was simulated on (its features)")
    add_format_options(e)
    add_data_options(e)
    e.add_argument("--resamples", type=COUNT, default=30, help="--method em / harvest: bootstrap resamples of the queries")
    e.add_argument("--relevance", default="logistic", choices=("logistic", "gbdt"),
                   help="--method em: the relevance model of the M-step (logistic regression or LightGBM cross-entropy)")
    e.add_argument("--positions", type=integer(min=1), default=None, help="number of positions to estimate (default: all shown positions)")
    e.add_argument("--confidence", type=number(above=0, below=1), default=0.95, help="confidence level of the intervals")
    e.add_argument("--min-impressions", type=COUNT, default=MIN_IMPRESSIONS,
                   help="a position shown fewer times than this is unidentified: no propensity is reported for it "
                   "(and, for em, its impressions are left out of the fit)")
    add_log_read_options(e)
    add_quiet_option(e)
    add_json_option(e, "the estimate")
    add_force_option(e, "--json FILE")
    e.set_defaults(func=run_estimate)


def run_estimate(args) -> int:
    from ltr.base.checks import output_file
    from ltr.clicks.propensities.interventions import fit_power_law
    from ltr.base.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr

    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--log", path) for path in args.log], force=args.force)
    if args.method == "harvest":
        return _run_estimate_harvest(args, say)
    if args.trust:
        raise LtrError("--trust applies to --method harvest only")
    if len(args.log) > 1:
        raise LtrError(f"--method {args.method} reads one --log, got {len(args.log)} (several logs are for --method harvest)")
    args = argparse.Namespace(**{**vars(args), "log": args.log[0]})
    if args.method == "em":
        return _run_estimate_em(args, say)
    # A Parquet log is read in batches for the sums of its randomized or swap sessions (the production traffic
    # may not fit in memory).
    from ltr.clicks.propensities.curves import unidentified_note

    source, meta, _ = interventions(args)
    est = estimate_propensity(source, args.method, args.positions, args.confidence)
    identified = np.isfinite(est.theta) & (est.sessions >= args.min_impressions)
    identified[0] = True
    rows = estimate_rows(meta, est)
    for row, known in zip(rows, identified):
        row["identified"] = bool(known)
        if not known:
            row.update({k: float("nan") for k in ("theta", "se", "low", "high") if k in row})
            row.pop("covered", None)
    rows = honest_rows(rows)
    say(f"propensity from {args.method} traffic ({int(est.sessions.max())} sessions at most per position), "
          f"{args.confidence:.0%} interval:")
    say(format_table(rows, [c for c in ("position", "truth", "theta", "se", "low", "high", "covered") if c in rows[0]]))
    eta = fit_power_law(est)
    say(f"fitted power law: theta_r = r^-{eta:.4f}" + (f" (simulator eta {meta['eta']})" if meta.get("eta") is not None else ""))
    notes = [n for n in [unidentified_note(identified)] if n] + model_notes(meta, args.method)
    for note in notes:
        say(note)
    if args.json:
        write_json_report(args.json, {"method": args.method, "rows": rows, "eta_fit": eta, "notes": notes})
    return 0


def _em_observations(args, ds):
    """``(observations, meta)`` of the --log's production sessions: a Parquet log streamed into its per
    (document, position) sums, any other log read whole (with the same checks that it belongs to --data)."""
    from ltr.clicks.logs.counts import observations_from_log
    from ltr.clicks.logs.table import is_log_table

    if is_log_table(args.log):
        agg = stream_log(args, ds, modes=(0,))
        return agg.observations(), agg.meta
    log = train_log(args, ds)
    return observations_from_log(log.select_sessions(log.session_mode == 0)), log.meta


def _run_estimate_em(args, say) -> int:
    from ltr.clicks.propensities.curves import unidentified_note
    from ltr.clicks.propensities.regression_em import bootstrap_em, regression_em
    from ltr.base.io_utils import write_json_report

    if args.data is None:
        raise LtrError("--method em needs --data, the labelled file the log was simulated on (its features)")
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    obs, meta = _em_observations(args, ds)
    k = min(int(args.positions or obs.position.max()), int(obs.position.max()))
    obs = obs.subset(np.flatnonzero(obs.position <= k))
    res = regression_em(obs, relevance=args.relevance, features=ds.features, n_positions=k, iterations=EM_ITERATIONS,
                        min_impressions=args.min_impressions, progress=progress(args))
    obs = obs.subset(np.flatnonzero(res.identified[obs.position - 1]))  # the resamples fit what the estimate fits
    low, high = bootstrap_em(obs, args.resamples, args.confidence, relevance=args.relevance, features=ds.features,
                             n_positions=k, iterations=EM_ITERATIONS, progress=progress(args))
    truth = meta.get("examination") if meta.get("model") in ("pbm", "trust") else None
    rows = []
    for r in range(k):
        row = {"position": r + 1, "theta": float(res.theta[r]), "low": float(low[r]), "high": float(high[r]),
               "identified": bool(res.identified[r])}
        if not res.identified[r]:
            row["low"] = row["high"] = float("nan")
        if truth is not None and r < len(truth):
            row["truth"] = truth[r] / truth[0]
            row["covered"] = bool(low[r] <= row["truth"] <= high[r]) if r and res.identified[r] else r == 0
        rows.append(row)
    rows = honest_rows(rows)
    say(f"propensity from regression EM on {int(obs.n.sum())} production impressions ({res.iterations} iterations), "
        f"{args.confidence:.0%} bootstrap interval over queries ({args.resamples} resamples):")
    say(format_table(rows, [c for c in ("position", "truth", "theta", "low", "high", "covered") if c in rows[0]]))
    notes = [n for n in [unidentified_note(res.identified)] if n]  # (truth and covered: where the simulator shows)
    notes += interval_notes(rows, args.confidence, args.resamples) + model_notes(meta, "em")
    for note in notes:
        say(note)
    if args.json:
        write_json_report(args.json, {"method": "em", "rows": rows, "iterations": res.iterations,
                                      "min_impressions": args.min_impressions, "notes": notes})
    return 0


def _run_estimate_harvest(args, say) -> int:
    from ltr.clicks.propensities.curves import unidentified_note
    from ltr.clicks.propensities.harvesting import counts_from_cells, estimate_harvest
    from ltr.base.io_utils import write_json_report

    cells = [_harvest_cells(path, args) for path in args.log]
    if args.trust:
        return _run_estimate_trust(args, say, cells)
    est = estimate_harvest(counts_from_cells(cells, args.positions), method=args.pairs, resamples=args.resamples,
                           confidence=args.confidence)
    metas = [c.meta for c in cells]
    same_pbm = all(m.get("model") == "pbm" and m.get("examination") == metas[0].get("examination") for m in metas)
    rows = est.as_rows(metas[0]["examination"] if same_pbm else None)
    for row in rows:
        row["identified"] = bool(np.isfinite(row["theta"]))
    rows = honest_rows(rows)
    say(f"propensity by intervention harvesting ({args.pairs}) from {len(cells)} logs, {sum(c.n_sessions for c in cells)} "
        f"sessions; {args.confidence:.0%} bootstrap interval over queries ({est.resamples} resamples):")
    say(format_table(rows, [c for c in ("position", "truth", "theta", "low", "high", "keys", "covered") if c in rows[0]]))
    notes = [n for n in [unidentified_note(np.isfinite(est.theta), "no clicked swap links them to position 1")] if n]
    notes += interval_notes(rows, args.confidence, est.resamples) + model_notes(metas[0], "harvest")
    for note in notes:
        say(note)
    if args.json:
        write_json_report(args.json, {"method": "harvest", "pairs": args.pairs, "rows": rows, "logs": list(args.log),
                                      "notes": notes})
    return 0


def _trust_truth(metas: list[dict], k: int):
    """``(a [k], b [k])`` of the simulator's trust bias on the scale of position 1, when every log was simulated
    with the same trust-bias settings; else None."""
    from ltr.clicks.simulate.browsing import trust_affine

    first = metas[0]
    same = all(m.get("model") == "trust" and all(m.get(f) == first.get(f) for f in ("examination", "eps_plus", "eps_minus"))
               for m in metas)
    if not same or first.get("examination") is None or len(first["examination"]) < k:
        return None
    alpha, beta = trust_affine(np.asarray(first["examination"][:k]), np.asarray(first["eps_plus"][:k]),
                               np.asarray(first["eps_minus"][:k]))
    a = alpha / alpha[0]
    return a, beta - a * beta[0]


def _run_estimate_trust(args, say, cells) -> int:
    """``--method harvest --trust``: the trust-bias fit (:mod:`ltr.clicks.propensities.trust`), beside the
    simulator's settings when every log has the same."""
    from ltr.clicks.propensities.curves import unidentified_note
    from ltr.clicks.propensities.harvesting import counts_from_cells
    from ltr.clicks.propensities.trust import estimate_trust
    from ltr.base.io_utils import write_json_report

    est = estimate_trust(counts_from_cells(cells, args.positions))
    rows = est.as_rows()
    truth = _trust_truth([c.meta for c in cells], len(rows))
    if truth is not None:
        for row, a, b in zip(rows, *truth):
            row.update({"alpha_truth": float(a), "beta_truth": float(b)})
    rows = honest_rows(rows)
    say(f"trust bias by intervention harvesting from {len(cells)} logs, {est.keys} (query, document) keys seen at two "
        "or more positions: P(click at k) = alpha_k P1 + beta_k, P1 the click probability at position 1")
    say(format_table(rows, [c for c in ("position", "alpha_truth", "alpha", "beta_truth", "beta") if c in rows[0]]))
    notes = [n for n in [unidentified_note(est.identified, "no clicked swap links them to position 1")] if n]
    for note in notes:
        say(note)
    if args.json:
        write_json_report(args.json, {"method": "harvest-trust", "rows": rows, "keys": est.keys, "logs": list(args.log),
                                      "notes": notes})
    return 0


def _harvest_cells(path: str, args):
    """The per-cell sums of one --log for --method harvest: a Parquet log read in record batches of --read-rows
    rows, unless its session ids go back (then read whole, with a note), any other log read whole."""
    from ltr.clicks.propensities.harvest_stream import cells_of_log, stream_harvest_cells
    from ltr.clicks.logs.table import is_log_table

    cells = None
    if is_log_table(path):
        cells = unless_unsorted(lambda: stream_harvest_cells(path, batch_size=args.read_rows, progress=progress(args)))
    return cells if cells is not None else cells_of_log(load_log(path))
