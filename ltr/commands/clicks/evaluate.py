"""``ltr clicks evaluate``: naive, IPS, SNIPS and policy-aware click-DCG of a new ranker from a log, beside the
true values from the labels."""

from __future__ import annotations

import functools

import numpy as np

from ltr.base.checks import COUNT, number
from ltr.commands import add_force_option, add_json_option, text_stream
from ltr.commands.clicks.options import add_log_read_options, add_propensity_options, add_quiet_option, progress
from ltr.commands.clicks.curves import propensity_curve
from ltr.commands.clicks.reading import check_log_meta, load_log, log_ids, model_scores, read_scores, unless_unsorted
from ltr.commands.clicks.report import format_table
from ltr.data.files import add_data_options, add_format_options, data_options, format_options, load_data_file
from ltr.base.errors import LtrError


def add_parser(sub, fmt) -> None:
    v = sub.add_parser("evaluate", help="naive / IPS / SNIPS / policy-aware click-DCG of a ranker from a click log", formatter_class=fmt,
                       description="Judge a new ranker on a click log: naive click-DCG@k, IPS and SNIPS (weights "
                       "1/max(p, clip)) and policy-aware (weights 1/max(rho, clip), rho an item's expected examination "
                       "over its query's sessions: for a stochastic logger), beside the true expected click-DCG and "
                       "NDCG@k from the labels of --data.")
    v.add_argument("--log", required=True, metavar="FILE", help="clicks.npz written by `ltr clicks simulate` on --data")
    v.add_argument("--data", required=True, metavar="FILE", help="the labelled file the log was simulated on")
    add_format_options(v)
    rg = v.add_mutually_exclusive_group(required=True)
    rg.add_argument("--scores", default=None, metavar="FILE", help="the new ranker's scores, one number per row of --data (text, one per line, or a .npy 1-D array)")
    rg.add_argument("--ranker", default=None, metavar="DIR", help="the new ranker as a model folder from ltr train / ltr gbdt")
    v.add_argument("--k", type=COUNT, default=10, help="DCG cutoff: the metric is DCG@k (and NDCG@k for the labels)")
    v.add_argument("--clip", type=number(above=0, max=1), default=None, help="lower bound on propensities (weights at most 1/clip)")
    add_propensity_options(v, "the propensities IPS, SNIPS and policy-aware divide by")
    add_json_option(v, "the numbers")
    add_force_option(v, "--json FILE")
    add_data_options(v)
    add_log_read_options(v)
    add_quiet_option(v)
    v.set_defaults(func=run_evaluate)


def run_evaluate(args) -> int:
    import metrics
    from ltr.base.checks import output_file
    from ltr.base.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr

    if args.json and args.json != "-":
        inputs = [("--log", args.log), ("--data", args.data), ("--scores", args.scores), ("--ranker", args.ranker)]
        output_file(args.json, "--json", inputs=inputs, force=args.force)
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    def get_scores():  # after the log is checked against --data, so that a log of other data is named first
        if args.scores:
            return read_scores(args.scores, ds.n_items, "--scores")
        return model_scores(args.ranker, ds, "--ranker", args.data)

    out, scores, support, sessions_q, meta = _click_estimates(args, ds, get_scores)
    truth = _truth(args, ds, scores, support, sessions_q, meta)
    out.update(truth)
    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, [f"ndcg@{args.k}"])
    name = ev.names[f"ndcg@{args.k}"]
    out[name] = float(ev.mean[name])
    rows = [{"estimate": k, "value": v} for k, v in out.items() if k != "propensity_source"]
    say(f"click-DCG@{args.k} of the ranker from {int(sessions_q.sum())} sessions (propensities: "
        f"{out['propensity_source']}; clip: {args.clip}):")
    say(format_table(rows, ["estimate", "value"]))
    if truth:
        say("IPS and policy-aware target true_click_dcg (over items the log showed; IPS falls short of it when the "
            "logger is stochastic); SNIPS targets true_click_dcg_normalized; the direct method (dm) and doubly "
            "robust (dr) target true_click_dcg_all, over every item of the logged queries.")
    else:
        say("the log was not simulated, so the true click-DCG is not known: the labels of --data give "
            f"{name.split('[')[0]} only")
    if args.json:
        write_json_report(args.json, out)
    return 0


def _truth(args, ds, scores, support, sessions_q, meta) -> dict:
    """The true expected click-DCG (and its normalised form) of the ranker under the log's click model, from the
    labels of --data; {} for a log that was not simulated (its click model is not known)."""
    from ltr.clicks.estimators.ips import expected_click_dcg
    from ltr.clicks.simulate.click_models import attraction

    if not meta.get("model"):
        return {}
    a = attraction(ds.labels, max_label=meta.get("max_label", float(ds.labels.max())), eps=meta.get("eps", 0.1),
                   gain=meta.get("gain", "exp2"))
    shown_q = sessions_q > 0
    return {"true_click_dcg": float(expected_click_dcg(scores, a, ds.query_offsets, k=args.k, support=support)[shown_q].mean()),
            "true_click_dcg_normalized": float(np.nanmean(
                expected_click_dcg(scores, a, ds.query_offsets, k=args.k, support=support, normalize=True)[shown_q])),
            "true_click_dcg_all": float(expected_click_dcg(scores, a, ds.query_offsets, k=args.k)[shown_q].mean())}


ESTIMATES = ("naive", "ips", "snips", "policy-aware")  # what ltr clicks evaluate prints (ltr.clicks.estimators.ips)


def _click_estimates(args, ds, get_scores):
    """``({naive, ips, snips}, scores, support [rows], sessions per query, meta)`` of ``ltr clicks evaluate``: a Parquet
    --log read in record batches of --read-rows rows (:mod:`ltr.clicks.estimators.ips_stream`) unless its session ids go
    back, any other log read whole."""
    from ltr.clicks.estimators.ips_stream import click_dcg_from_cells, stream_click_cells
    from ltr.clicks.logs.stream import read_log_meta
    from ltr.clicks.logs.table import is_log_table

    if not is_log_table(args.log):
        return _click_estimates_whole(args, ds, get_scores)
    check_log_meta(args, ds, read_log_meta(args.log))
    cells = unless_unsorted(lambda: stream_click_cells(args.log, ds, ids=args.log_ids, batch_size=args.read_rows,
                                                        clip=args.clip, progress=progress(args)))
    if cells is None:
        return _click_estimates_whole(args, ds, get_scores)
    found = propensity_curve(args, ds)  # the intervention sessions' sums, streamed too
    curve, source = (None, _logged(cells.meta, args)) if found is None else found.curve(int(cells.position.max()))
    scores = get_scores()
    out = {name: float(np.nanmean(click_dcg_from_cells(cells, scores, ds.query_offsets, estimator=name, k=args.k,
                                                        curve=curve)))
           for name in ESTIMATES}
    support = np.zeros(ds.n_items, dtype=bool)
    support[cells.doc] = True
    examined = cells.examined if curve is None else cells.shown * np.asarray(curve)[cells.position - 1]
    out.update(_direct(args, ds, scores, cells.doc, cells.clicks, examined, cells.sessions))
    out["propensity_source"] = source
    return out, scores, support, cells.sessions, cells.meta


def _logged(meta: dict, args) -> str:
    """The source of the log's own propensities, or the refusal naming the ways to get them."""
    from ltr.clicks.estimators.propensity_source import require_propensity

    return require_propensity(meta, "ltr clicks evaluate (ips, snips and policy-aware)", args.log)


def _click_estimates_whole(args, ds, get_scores):
    from ltr.clicks.estimators.ips import click_dcg, logged_support
    from ltr.clicks.propensities.interventions import propensities_from_curve

    log = load_log(args.log, log_ids(args, ds))  # a Parquet log may name queries and documents by id
    if (log.meta.get("n_rows") not in (None, ds.n_items) or (log.n_entries and log.doc.max() >= ds.n_items)
            or (log.n_sessions and log.session_query.max() >= ds.n_queries)
            or (log.n_entries and log.query.max() >= ds.n_queries)):
        raise LtrError(f"--log {args.log} was not simulated on --data {args.data} (its rows or queries are not this file's)")
    found = propensity_curve(args, ds, log)
    curve, source = (None, _logged(log.meta, args)) if found is None else found.curve(int(log.position.max()))
    prop = None if curve is None else propensities_from_curve(log, curve)
    scores = get_scores()
    out = {name: float(np.nanmean(click_dcg(log, scores, ds.query_offsets, estimator=name, k=args.k, clip=args.clip,
                                            propensity=prop)))
           for name in ESTIMATES}
    sessions_q = log.sessions_per_query(ds.n_queries)
    out.update(_direct(args, ds, scores, log.doc, log.click.astype(np.float64),
                       log.propensity if prop is None else prop, sessions_q))
    out["propensity_source"] = source
    return out, scores, logged_support(log, ds.n_items), sessions_q, log.meta


def _direct(args, ds, scores, doc, clicks, examined, sessions_q) -> dict:
    """The direct method and the doubly-robust click-DCG (:mod:`ltr.clicks.estimators.doubly_robust`): a regression
    of the click probability on the features of --data, fitted to the log's clicks given its examinations, over
    every item of the logged queries."""
    from ltr.clicks.estimators.doubly_robust import dm_dr_click_dcg, fit_direct_model, item_sums

    c, e = item_sums(np.asarray(doc), np.asarray(clicks, dtype=np.float64), np.asarray(examined, dtype=np.float64),
                     ds.n_items)
    r_hat = fit_direct_model(ds.features, c, e, seed=0)
    dm, dr = dm_dr_click_dcg(scores, ds.query_offsets, r_hat, c, e, sessions_q, k=args.k, clip=args.clip)
    return {"dm": float(np.nanmean(dm)), "dr": float(np.nanmean(dr))}
