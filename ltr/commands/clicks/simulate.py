"""``ltr clicks simulate``: rank a labelled file with a logging ranker, simulate clicks, write a run folder.

PBM, cascade, DBN, UBM or trust-bias clicks into ``clicks.npz``, or ``clicks.parquet`` written chunk by chunk,
and ``summary.json``; prints CTR by position and, when the log has randomized or swap traffic, the propensity
estimate against the truth.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ltr.base.checks import COUNT, SEED, integer, number
from ltr.commands.clicks.reading import estimate_propensity, model_scores, read_scores
from ltr.commands.clicks.report import estimate_rows, format_table, honest_rows, versions
from ltr.data.files import add_data_options, add_format_options, data_options, format_options, load_data_file
from ltr.base.errors import LtrError


#: queries of --data the default logging ranker is fitted on (--logger-ridge)
DEFAULT_LOGGER_QUERIES = 10


def add_parser(sub, fmt) -> None:
    s = sub.add_parser("simulate", help="simulate a click log on a labelled data file", formatter_class=fmt,
                       description="Rank each query of --data with a logging ranker, show the top --top-k items and "
                       "simulate clicks (pbm: P(click at r) = theta_r a(rel), theta_r = 1/r^eta; cascade: the user "
                       "stops at the first click); a(rel) = eps + (1-eps)(2^rel-1)/(2^max_label-1). Writes "
                       "DIR/clicks.npz and DIR/summary.json.")
    s.add_argument("--data", required=True, metavar="FILE", help="labelled data: SVMlight/LETOR file, Parquet file or folder, or a store from ltr convert")
    add_format_options(s)
    s.add_argument("--out", required=True, metavar="DIR", help="run folder to create")
    s.add_argument("--model", default="pbm", choices=("pbm", "cascade", "dbn", "ubm", "trust"),
                   help="click model: position-based, cascade, dynamic Bayesian network, user browsing model, PBM with trust bias")
    s.add_argument("--gamma", type=number(min=0, max=1), default=0.9, help="dbn: perseverance, the probability of going on after an unsatisfied position")
    s.add_argument("--ubm-xi", type=number(min=0), default=None, help="ubm: examination r^-(eta-xi) d^-xi with d the distance to the last click (default eta/2; 0 = PBM)")
    s.add_argument("--eps-plus", type=number(min=0, max=1), default=None, help="trust: click probability of an examined relevant item (default 1)")
    s.add_argument("--eps-minus", type=number(min=0, max=1), default=None, help="trust: click probability of an examined non-relevant item (default 0.65/r, by position)")
    s.add_argument("--noise", type=number(min=0, max=1), default=0.0, help="probability of a spurious click on every shown item, after the model's clicks")
    s.add_argument("--format", default="npz", choices=("npz", "parquet"), help="log file: DIR/clicks.npz or DIR/clicks.parquet (one row per shown item)")
    s.add_argument("--eta", type=number(min=0), default=1.0, help="PBM position-bias strength: theta_r = 1/r^eta")
    s.add_argument("--eps", type=number(min=0, max=1), default=0.1, help="click probability of an examined irrelevant item")
    s.add_argument("--max-label", type=number(above=0), default=None, help="label with click probability 1; unset = the largest label in --data")
    s.add_argument("--top-k", type=integer(min=0), default=10, help="items shown per session (0: the whole list)")
    s.add_argument("--sessions-per-query", type=COUNT, default=10, help="sessions simulated per query")
    s.add_argument("--randomize-fraction", type=number(min=0, max=1), default=0.0, help="share of sessions shown in a random order (for propensity estimation)")
    s.add_argument("--swap-fraction", type=number(min=0, max=1), default=0.0, help="share of sessions that swap position 1 with a uniform position k")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--logger-ridge", type=integer(min=1), default=None, metavar="N",
                   help="logging ranker = ridge regression on the labels of N queries of --data, drawn under --seed "
                   "(the default logger, N = %d: ranks by the features, as a production ranker does)" % DEFAULT_LOGGER_QUERIES)
    g.add_argument("--logger-noise", type=number(min=0), default=None, metavar="SIGMA",
                   help="logging ranker = labels + N(0, SIGMA^2) noise (sees the labels: confounds EM and DLA)")
    g.add_argument("--logger-scores", default=None, metavar="FILE", help="logging ranker scores, one number per row of --data (text, one per line, or a .npy 1-D array)")
    g.add_argument("--logger-model", default=None, metavar="DIR", help="logging ranker = a model folder from ltr train / ltr gbdt")
    s.add_argument("--logger-temperature", type=number(min=0), default=0.0, metavar="T",
                   help="0: every session of a query shows the logger's ranking; T > 0: a stochastic (Plackett-Luce) "
                   "logger, each session ranks by score/T + Gumbel noise before the top k is cut, so every item is "
                   "shown now and then (train with --estimator policy-aware)")
    s.add_argument("--seed", type=SEED, default=0, help="random seed (the log is a deterministic function of it)")
    s.add_argument("--force", action="store_true", help="replace --out if it is a run folder made by ltr (never any other folder)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    add_data_options(s)
    s.set_defaults(func=run_simulate)


def _ridge_scores(ds, args) -> tuple[np.ndarray, str]:
    """The default logger's scores of every row of --data and its name for the summary."""
    from ltr.clicks.simulate.logging_ranker import ridge_logger

    n = args.logger_ridge or DEFAULT_LOGGER_QUERIES
    # its own stream (seed, 2): the queries it is fitted on do not shift the clicks' draws
    scores = ridge_logger(ds, n, [args.seed, 2])(ds)
    return scores, f"ridge({min(n, ds.n_queries)} queries)"


def run_simulate(args) -> int:
    from ltr.clicks.simulate.click_models import simulate_clicks
    from ltr.base.io_utils import atomic_write_json
    from ltr.runs.folder import check_destination, run_folder

    inputs = [("--data", args.data), ("--logger-scores", args.logger_scores), ("--logger-model", args.logger_model)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    if args.randomize_fraction + args.swap_fraction > 1.0 + 1e-12:
        raise LtrError(f"--randomize-fraction {args.randomize_fraction} + --swap-fraction {args.swap_fraction} "
                       "must not exceed 1 (they are shares of the same sessions)")
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    if args.logger_scores:
        scores, logger = read_scores(args.logger_scores, ds.n_items, "--logger-scores"), f"scores:{args.logger_scores}"
    elif args.logger_model:
        scores, logger = model_scores(args.logger_model, ds, "--logger-model", args.data), f"model:{args.logger_model}"
    elif args.logger_noise is not None:
        if args.logger_noise < 0:
            raise LtrError(f"--logger-noise must be >= 0, got {args.logger_noise}")
        # The noise has its own stream (seed + 1) so that changing it does not change the clicks' draws.
        rng = np.random.default_rng([args.seed, 1])
        scores = ds.labels + rng.normal(0.0, args.logger_noise, ds.n_items)
        logger = f"labels+N(0,{args.logger_noise}^2)"
    else:
        scores, logger = _ridge_scores(ds, args)
    options = dict(model=args.model, eta=args.eta, eps=args.eps, max_label=args.max_label, top_k=args.top_k or None,
                   sessions_per_query=args.sessions_per_query, randomize_fraction=args.randomize_fraction,
                   swap_fraction=args.swap_fraction, seed=args.seed, gamma=args.gamma, ubm_xi=args.ubm_xi,
                   eps_plus=args.eps_plus, eps_minus=args.eps_minus, noise=args.noise,
                   logger_temperature=args.logger_temperature)
    extra = {"logger": logger, "data": str(args.data)}
    name = f"clicks.{args.format}"
    with run_folder(args.out, overwrite=args.force, kind="clicks-simulate", inputs=inputs) as tmp:
        try:
            if args.format == "parquet":
                meta, stats, interventions = _simulate_parquet(ds, scores, options, extra, tmp / name, not args.quiet)
            else:
                log = simulate_clicks(ds.labels, ds.query_offsets, scores, progress=not args.quiet, **options)
                log.meta.update(extra)
                log.save(tmp / name)
                meta, interventions = log.meta, log
                stats = {"n_sessions": log.n_sessions, "n_entries": log.n_entries, "n_clicks": log.n_clicks,
                         "ctr": log.ctr_by_position()}
        except ValueError as exc:
            raise LtrError(str(exc)) from None
        summary, report = _simulation_summary(args, meta, stats, interventions, logger, _logger_ndcg(args, scores, ds))
        atomic_write_json(tmp / "summary.json", summary)
    # printed once the folder is in place: a reader that stops early (`| head`) loses nothing
    print("\n".join(report))
    print(f"\nwrote {Path(args.out) / name} and summary.json")
    return 0


def _simulate_parquet(ds, scores, options, extra, path, progress):
    """Simulate chunk by chunk into a Parquet file: ``(meta, stats, interventions)``; of the randomized and
    swap sessions only their sums are kept (:mod:`ltr.clicks.propensities.intervention_sums`: the propensity estimates)."""
    from ltr.clicks.simulate.click_models import simulate_click_chunks
    from ltr.clicks.propensities.intervention_sums import sums_from_rows, sums_of_log
    from ltr.clicks.logs.stream import write_log_stream

    meta, chunks = simulate_click_chunks(ds.labels, ds.query_offsets, scores, progress=progress, **options)
    meta.update(extra)
    k = int(meta["top_k"])
    stats = {"n_sessions": 0, "n_entries": 0, "n_clicks": 0, "ctr": (np.zeros(k), np.zeros(k))}
    kept = []  # the running sums (chunks hold whole sessions)

    def count(_start, log):
        stats["n_sessions"] += log.n_sessions
        stats["n_entries"] += log.n_entries
        stats["n_clicks"] += log.n_clicks
        c, n = log.ctr_by_position(k)
        stats["ctr"][0][:] += c
        stats["ctr"][1][:] += n
        part = sums_of_log(log)
        kept[:] = [kept[0].merge(part) if kept else part]

    write_log_stream(chunks, path, meta, on_chunk=count)
    return meta, stats, kept[0] if kept else sums_from_rows(*(np.zeros(0, dtype=np.int64),) * 6)


def _logger_ndcg(args, scores, ds) -> float:
    """The NDCG@10 users see from the logger on the labels of --data: its ranking's, or with
    --logger-temperature the mean over 20 Plackett-Luce draws per query."""
    from ltr.clicks.simulate.logging_ranker import plackett_luce_ndcg

    return plackett_luce_ndcg(scores, ds, args.logger_temperature, seed=[args.seed, 2])


def _ndcg_text(value: float) -> str:
    """The logger's NDCG@10 for the report; not defined when no query of --data has a relevant item."""
    return f"{value:.4f}" if math.isfinite(value) else "not defined (no query of --data has a relevant item)"


def _simulation_summary(args, meta, stats, interventions, logger, logger_ndcg: float) -> tuple[dict, list[str]]:
    """The summary.json object and the report's lines: the counts, CTR by position and the intervention
    estimates. ``logger_ndcg``: the logging ranker's NDCG@10 on the labels of --data (how good the
    production ranker is; :func:`_logger_ndcg`)."""
    clicks, shown = stats["ctr"]
    # a position nothing was shown at has no click rate: null, not NaN (summary.json is strict JSON)
    ctr = [{"position": r, "impressions": int(n), "clicks": int(c), "ctr": float(c / n) if n else None}
           for r, (c, n) in enumerate(zip(clicks, shown), 1)]
    while ctr and ctr[-1]["impressions"] == 0:  # a top-k longer than every list
        ctr.pop()
    summary = {"meta": meta, "n_sessions": stats["n_sessions"], "n_entries": stats["n_entries"],
               "n_clicks": stats["n_clicks"], "ctr_by_position": ctr,
               "logger_ndcg@10": logger_ndcg if math.isfinite(logger_ndcg) else None,
               "versions": versions()}
    if args.logger_temperature:
        logger = f"{logger} drawn by Plackett-Luce at temperature {args.logger_temperature:g}"
    seen = " (the mean of 20 draws per query)" if args.logger_temperature else ""
    lines = [f"{stats['n_sessions']} sessions, {stats['n_entries']} impressions, {stats['n_clicks']} clicks "
             f"({args.model}, logger {logger}: NDCG@10 {_ndcg_text(logger_ndcg)}{seen} on the labels of --data)",
             format_table(ctr, ["position", "impressions", "clicks", "ctr"])]
    for method, share in (("randomized", args.randomize_fraction), ("swap", args.swap_fraction)):
        if share > 0:
            try:
                est = estimate_propensity(interventions, method, len(ctr) or None, 0.95)
            except LtrError as exc:
                lines.append(f"\n{method} estimate not available: {exc}")
                continue
            rows = honest_rows(estimate_rows(meta, est))  # an undefined estimate is null in summary.json
            summary[f"propensity_{method}"] = rows
            lines.append(f"\npropensity from {method} traffic (theta_r / theta_1, 95% interval):")
            lines.append(format_table(rows, [c for c in ("position", "truth", "theta", "se", "low", "high", "covered") if c in rows[0]]))
    return summary, lines
