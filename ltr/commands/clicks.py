"""``ltr clicks``: simulate click logs, estimate position bias, train and judge rankers on clicks, Open Bandit.

Sub-commands:

* ``simulate``: rank a labelled file with a logging ranker, simulate PBM, cascade, DBN, UBM or trust-bias
  clicks and write a run folder (``clicks.npz``, or ``clicks.parquet`` written chunk by chunk, + ``summary.json``); prints CTR by
  position and, when the log has randomized or swap traffic, the propensity estimate against the truth.
* ``estimate``: propensity estimate from an existing log (randomized or swap traffic, or regression EM
  on production traffic alone).
* ``train``: a neural scorer trained on a log with an unbiased estimator (a Parquet log streamed into
  per-(document, position) sums for naive / ips / rem / affine), or XGBoost with ``lambdarank_unbiased``
  (``--engine xgboost``); a model folder.
* ``evaluate``: naive, IPS and SNIPS click-DCG of a new ranker from a log, beside the true values.
* ``interleave``: team-draft or probabilistic interleaving of two rankers on simulated users, beside their NDCG@10.
* ``open-bandit``: the Open Bandit sample: CTR by position with intervals, and an off-policy IPS
  estimate of the uniform-random policy's CTR from the Thompson-sampling log.
"""

from __future__ import annotations

import argparse
import functools
import math
from pathlib import Path

import numpy as np

from ltr.checks import COUNT, SEED, integer, number
from ltr.commands import add_json_option, text_stream
from ltr.data.files import add_data_options, add_format_options, data_options, format_options, load_data_file
from ltr.errors import LtrError
from ltr.study.report_table import markdown_table

#: queries of --data the default logging ranker is fitted on (--logger-ridge)
DEFAULT_LOGGER_QUERIES = 10
#: ``clicks train --rounds`` of the GBDT engines: at most this many, stopping early on --valid (as ``ltr gbdt``)
GBDT_ROUNDS = 1000
#: rounds without a better --valid NDCG@10 before a GBDT engine stops (as ``ltr gbdt``)
GBDT_PATIENCE = 50
#: ``clicks train --engine lightgbm``'s session estimators say on stderr how large their training matrix is
#: above this many bytes
SESSION_MATRIX_NOTE_BYTES = 1 << 30


# long: argparse declarations of the sub-commands, one statement per option; splitting them would scatter the CLI's help
def register(subparsers) -> None:
    p = subparsers.add_parser(
        "clicks",
        help="click models, position-bias estimation, unbiased training, IPS evaluation, interleaving, Open Bandit data",
        description="Simulate clicks with position bias on a labelled data set, estimate the examination "
        "propensities from intervention traffic or from one ranker's logs, train rankers on clicks with "
        "unbiased estimators, judge rankers with naive / IPS / SNIPS click metrics or by interleaving, "
        "and summarise the Open Bandit sample.",
    )
    sub = p.add_subparsers(dest="clicks_command", metavar="ACTION")
    sub.required = True
    fmt = argparse.ArgumentDefaultsHelpFormatter

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
    _register_train(sub, fmt)
    _register_interleave(sub, fmt)

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
    e.add_argument("--data", default=None, metavar="FILE", help="--method em: the labelled file the log was simulated on (its features)")
    add_format_options(e)
    add_data_options(e)
    e.add_argument("--resamples", type=COUNT, default=30, help="--method em / harvest: bootstrap resamples of the queries")
    e.add_argument("--relevance", default="logistic", choices=("logistic", "gbdt"),
                   help="--method em: the relevance model of the M-step (logistic regression or LightGBM cross-entropy)")
    e.add_argument("--positions", type=integer(min=1), default=None, help="number of positions to estimate (default: all shown positions)")
    e.add_argument("--confidence", type=number(above=0, below=1), default=0.95, help="confidence level of the intervals")
    _add_log_read_options(e)
    _add_quiet_option(e)
    add_json_option(e, "the estimate")
    e.set_defaults(func=run_estimate)

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
    v.add_argument("--propensity", default="logged", choices=("logged", "randomized", "swap"),
                   help="propensities: the logged (true) ones, or estimated from the log's intervention traffic")
    add_json_option(v, "the numbers")
    add_data_options(v)
    _add_log_read_options(v)
    _add_quiet_option(v)
    v.set_defaults(func=run_evaluate)

    o = sub.add_parser("open-bandit", help="CTR by position with intervals on the Open Bandit sample", formatter_class=fmt,
                       description="Load the Open Bandit Dataset sample (ZOZOTOWN; random and Bernoulli-Thompson-"
                       "sampling logs), print CTR by position with intervals and the position ratio CTR_r / CTR_1, "
                       "and an off-policy IPS / SNIPS estimate of the uniform-random policy's CTR from the bts log "
                       "next to its on-policy CTR.")
    o.add_argument("--data", required=True, metavar="DIR", help="folder with <policy>/<campaign>/<campaign>.csv (e.g. open-bandit-dataset-small)")
    o.add_argument("--policy", default="both", choices=("random", "bts", "both"), help="which logging policy to summarise")
    o.add_argument("--campaign", default="all", help="campaign folder name")
    o.add_argument("--interval", default="wilson", choices=("wilson", "bootstrap"), help="interval for each CTR")
    o.add_argument("--confidence", type=number(above=0, below=1), default=0.95, help="confidence level")
    o.add_argument("--resamples", type=COUNT, default=2000, help="bootstrap resamples (with --interval bootstrap)")
    o.add_argument("--seed", type=SEED, default=0, help="bootstrap seed")
    add_json_option(o, "the numbers")
    o.set_defaults(func=run_open_bandit)


def _progress(args) -> bool:
    """Progress bars (on stderr) unless --quiet: reading a Parquet log, EM's iterations and resamples,
    training epochs."""
    return not getattr(args, "quiet", True)


def _add_quiet_option(p) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (reading a Parquet log, regression EM's iterations and bootstrap fits, training epochs)")


def _add_log_read_options(p) -> None:
    p.add_argument("--log-ids", default="auto", choices=("auto", "index", "id"),
                   help="Parquet --log: its query and doc columns hold indices into --data (index, what simulate writes) "
                   "or the data set's query ids and document ids (id: qid / query column, #docid comments / "
                   "--doc-id-column); auto = id when either column holds text")
    p.add_argument("--read-rows", type=COUNT, default=1_000_000,
                   help="Parquet --log: rows per record batch when it is streamed (memory ~ this batch plus one "
                   "count per shown (document, position), or per distinct shown list for dla / pairwise-debias)")


def _register_interleave(sub, fmt) -> None:
    i = sub.add_parser("interleave", help="team-draft or probabilistic interleaving of two rankers on simulated users", formatter_class=fmt,
                       description="Interleave the rankings of --a and --b by team draft (or --method probabilistic: "
                       "softmax rankers, each click's credit marginalised over the rankers that could have placed it) on "
                       "every query of --data, simulate clicks on the interleaved lists (--model), credit each ranker with "
                       "the clicks on its picks, and report wins, ties, the preference for A with a sign test (a t-test of "
                       "the mean outcome for probabilistic), the sessions needed to detect the measured preference, and "
                       "both rankers' NDCG@10 on the labels.")
    i.add_argument("--data", required=True, metavar="FILE", help="labelled data: SVMlight/LETOR file, Parquet file or folder, or a store")
    add_format_options(i)
    i.add_argument("--a", required=True, metavar="PATH", help="ranker A: a model folder, or a scores file (one number per row of --data)")
    i.add_argument("--b", required=True, metavar="PATH", help="ranker B: a model folder, or a scores file (one number per row of --data)")
    i.add_argument("--method", default="team-draft", choices=("team-draft", "probabilistic"),
                   help="team draft, or probabilistic interleaving (softmax rankers, outcomes marginalised over the assignments)")
    i.add_argument("--tau", type=number(above=0), default=3.0, help="probabilistic: softmax ranker P(d) proportional to rank^-tau")
    i.add_argument("--model", default="pbm", choices=("pbm", "cascade", "dbn", "ubm", "trust"), help="click model of the simulated users")
    i.add_argument("--eta", type=number(min=0), default=1.0, help="position-bias strength (pbm, trust, ubm)")
    i.add_argument("--eps", type=number(min=0, max=1), default=0.1, help="click probability of an examined irrelevant item")
    i.add_argument("--top-k", type=COUNT, default=10, help="length of the interleaved list")
    i.add_argument("--sessions-per-query", type=COUNT, default=20, help="simulated sessions per query")
    i.add_argument("--seed", type=SEED, default=0, help="random seed")
    add_json_option(i, "the numbers")
    add_data_options(i)
    i.set_defaults(func=run_interleave)


def _register_train(sub, fmt) -> None:
    t = sub.add_parser("train", help="train a neural scorer on a click log with an unbiased estimator", formatter_class=fmt,
                       description="Train a linear or MLP scorer on the clicks of --log (simulated on --data) with one "
                       "estimator: naive (raw clicks), ips (clicks / max(p, clip), p the logged or an estimated "
                       "propensity), rem (ips with propensities from regression EM on the same log), dla (ranker and "
                       "propensities learned together), pairwise-debias (Hu et al.'s t+ / t- position biases), affine "
                       "(trust-bias correction (c - beta_r) / alpha_r) or policy-aware (for a stochastic top-k logger: "
                       "one list per query of all its items, label = its clicks / its expected examinations, 0 if never "
                       "shown). The others group the log by shown list: label = mean corrected click, item weight = "
                       "number of sessions. Writes a model folder (model.pt, model.json) with clicks_training.json: "
                       "the estimator, the clip rule and the propensities used.")
    t.add_argument("--data", required=True, metavar="FILE", help="the labelled file the log was simulated on (its features train the model)")
    add_format_options(t)
    t.add_argument("--log", required=True, metavar="FILE", help="clicks.npz or clicks.parquet written by `ltr clicks simulate` on --data")
    t.add_argument("--valid", required=True, metavar="FILE",
                   help="labelled validation file: every estimator and engine keeps its epoch or round of best NDCG@10 on it")
    t.add_argument("--out", required=True, metavar="DIR", help="model folder to create")
    t.add_argument("--estimator", default="ips", choices=("naive", "ips", "dla", "rem", "pairwise-debias", "affine", "policy-aware", "position-bias"),
                   help="how clicks are de-biased (position-bias: LightGBM's own position-bias model, --engine lightgbm)")
    t.add_argument("--propensity", default="logged", choices=("logged", "randomized", "swap"),
                   help="ips and policy-aware (neural and lightgbm engines): the logged (true) propensities, or estimated "
                   "from the log's intervention traffic")
    t.add_argument("--clip", type=number(above=0, max=1), default=0.01, help="propensities (and trust alpha) floored at this value: weights at most 1/clip")
    t.add_argument("--max-weight", type=number(min=1), default=100.0, help="dla: clip of its inverse-propensity and inverse-relevance weights")
    t.add_argument("--dla-propensity-update", default="sgd", choices=("sgd", "full", "refit"),
                   help="dla: the propensity model steps with the ranker's minibatches (sgd), is set to its optimum on "
                   "the whole log given the ranker after every ranker step (full), or steps as sgd and is set to that "
                   "optimum once, at the kept ranker (refit: the propensities to report from a stochastic logger's log)")
    t.add_argument("--dla-relevance-reference", default=None, choices=("first", "geomean"),
                   help="dla: the reference relevance in its propensity loss's inverse-relevance weights, in training and "
                   "in the refit: the list's first item (Ai et al.), or the geometric mean of the list's relevance, which "
                   "weights every position's clicks alike when the ranker's errors do not depend on the position "
                   "(default: first in training, geomean in the refit of --dla-propensity-update refit)")
    t.add_argument("--em-relevance", default="logistic", choices=("logistic", "gbdt"),
                   help="rem: the relevance model of regression EM's M-step (logistic regression, or LightGBM "
                   "cross-entropy, 50 trees per step)")
    t.add_argument("--loss", default="softmax", help="a loss of `losses` that takes item weights (softmax, listnet, ranknet, lambdarank, mse, ...)")
    t.add_argument("--model", default="mlp", choices=("linear", "mlp"), help="the scorer: linear or a multi-layer perceptron")
    t.add_argument("--hidden", default="64,32", help="mlp hidden widths, comma separated")
    t.add_argument("--epochs", type=COUNT, default=30, help="training epochs (early stopping on --valid for naive/ips/rem/affine)")
    t.add_argument("--batch-size", type=COUNT, default=64, help="lists per batch")
    t.add_argument("--lr", type=number(above=0), default=3e-3, help="Adam step size")
    t.add_argument("--seed", type=SEED, default=0, help="random seed")
    t.add_argument("--force", action="store_true", help="replace --out if it is a run folder made by ltr")
    t.add_argument("--engine", default="neural", choices=("neural", "xgboost", "lightgbm"),
                   help="xgboost: XGBoost's rank:ndcg on the sessions (one group per session, clicks as labels) with "
                   "lambdarank_unbiased for --estimator pairwise-debias (Unbiased LambdaMART) or without it for naive, "
                   "or with each label as its own gain on the policy-aware lists (policy-aware); "
                   "lightgbm: LightGBM lambdarank on the sessions with raw clicks (naive), inverse-propensity item "
                   "weights (ips) or the shown positions for its position-bias model (position-bias), Unbiased "
                   "LambdaMART on the shown lists (pairwise-debias), or lambdarank on the policy-aware lists with "
                   "each label as its own gain (policy-aware)")
    t.add_argument("--rounds", type=COUNT, default=None,
                   help=f"--engine xgboost and lightgbm: at most this many boosting rounds (default {GBDT_ROUNDS}), "
                   f"stopping early on --valid's NDCG@10 (patience {GBDT_PATIENCE}); the model keeps the best round")
    t.add_argument("--bias-norm", type=number(min=0), default=None,
                   help="--engine xgboost: lambdarank_bias_norm p, the position biases' exponent 1/(p+1) (default: XGBoost's)")
    t.add_argument("--external-memory", action="store_true",
                   help="--engine xgboost, naive or pairwise-debias, Parquet --log: keep XGBoost's binned sessions in a "
                   "page cache on disk (ExtMemQuantileDMatrix; a temporary folder beside --out, removed at the end) "
                   "instead of RAM")
    _add_log_read_options(t)
    _add_quiet_option(t)
    add_data_options(t)
    t.set_defaults(func=run_train)


# ---------------------------------------------------------------------------------------------- helpers
def _table(rows: list[dict], columns: list[str], digits: int = 4) -> str:
    """A markdown table of ``rows`` (floats rounded to ``digits``)."""

    def fmt(v):
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return "nan" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    return markdown_table(columns, [[fmt(r.get(c, "")) for c in columns] for r in rows])


def _read_scores(path: str, n_rows: int, what: str) -> np.ndarray:
    from ltr.data.columns import read_number_column

    values = read_number_column(path, what="score", option=what)
    if len(values) != n_rows:
        raise LtrError(f"{what} {path}: {len(values)} scores, the data has {n_rows} rows")
    return values


def _model_scores(folder: str, ds, option: str, data_path: str) -> np.ndarray:
    from ltr.models.folder import check_width, load_scorer

    score, n_features = load_scorer(folder, option=option)
    check_width(ds, n_features, "--data", data_path)
    return np.asarray(score(ds.features, ds.query_offsets), dtype=np.float64)


def _versions() -> dict:
    # ltr.runs.folder.versions() imports torch and LightGBM (seconds); the simulator needs neither.
    import platform

    import scipy

    import ltr

    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "ltr": ltr.__version__, "platform": platform.platform()}


def _load_log(path: str, ids=None, modes=None):
    import zipfile

    from ltr.clicks.click_models import ClickLog
    from ltr.clicks.log_table import is_log_table, read_log_parquet

    if is_log_table(path):
        return read_log_parquet(path, ids=ids, modes=modes)
    # A click log is a .npz (a zip archive); anything else would reach numpy, whose message about
    # pickled data does not tell a CLI user what went wrong.
    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise LtrError(f"--log {path}: not a click log; expected the clicks.npz or clicks.parquet that "
                       "`ltr clicks simulate --out DIR` writes")
    return ClickLog.load(path)


def _estimate(log, method: str, positions: int | None, confidence: float):
    from ltr.clicks.propensity import estimate_from_randomized, estimate_from_swaps

    if not 0 < confidence < 1:
        raise LtrError(f"--confidence must be in (0, 1), got {confidence}")
    fn = estimate_from_randomized if method == "randomized" else estimate_from_swaps
    return fn(log, positions, confidence=confidence)


def _estimate_rows(meta: dict, est) -> list[dict]:
    from ltr.clicks.propensity import compare_to_truth

    truth = meta.get("examination") if meta.get("model") in ("pbm", "trust") else None
    if truth is not None:
        return compare_to_truth(est, truth)
    return est.as_rows()


# ---------------------------------------------------------------------------------------------- actions
def _ndcg10(scores: np.ndarray, ds) -> float:
    """The mean NDCG@10 of ``scores`` on the labels of ``ds`` (the toolkit's conventions)."""
    import metrics

    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, ["ndcg@10"])
    return float(ev.mean[ev.names["ndcg@10"]])


def _ridge_scores(ds, args) -> tuple[np.ndarray, str]:
    """The default logger's scores of every row of --data and its name for the summary."""
    from ltr.clicks.logging_ranker import ridge_logger

    n = args.logger_ridge or DEFAULT_LOGGER_QUERIES
    # its own stream (seed, 2): the queries it is fitted on do not shift the clicks' draws
    scores = ridge_logger(ds, n, [args.seed, 2])(ds)
    return scores, f"ridge({min(n, ds.n_queries)} queries)"


def run_simulate(args) -> int:
    from ltr.clicks.click_models import simulate_clicks
    from ltr.io_utils import atomic_write_json
    from ltr.runs.folder import check_destination, run_folder

    inputs = [("--data", args.data), ("--logger-scores", args.logger_scores), ("--logger-model", args.logger_model)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    if args.randomize_fraction + args.swap_fraction > 1.0 + 1e-12:
        raise LtrError(f"--randomize-fraction {args.randomize_fraction} + --swap-fraction {args.swap_fraction} "
                       "must not exceed 1 (they are shares of the same sessions)")
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    if args.logger_scores:
        scores, logger = _read_scores(args.logger_scores, ds.n_items, "--logger-scores"), f"scores:{args.logger_scores}"
    elif args.logger_model:
        scores, logger = _model_scores(args.logger_model, ds, "--logger-model", args.data), f"model:{args.logger_model}"
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
    swap sessions only their sums are kept (:mod:`ltr.clicks.intervention_sums`: the propensity estimates)."""
    from ltr.clicks.click_models import simulate_click_chunks
    from ltr.clicks.intervention_sums import sums_from_rows, sums_of_log
    from ltr.clicks.log_stream import write_log_stream

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
    from ltr.clicks.logging_ranker import plackett_luce_ndcg

    return plackett_luce_ndcg(scores, ds, args.logger_temperature, seed=[args.seed, 2])


def _simulation_summary(args, meta, stats, interventions, logger, logger_ndcg: float) -> tuple[dict, list[str]]:
    """The summary.json object and the report's lines: the counts, CTR by position and the intervention
    estimates. ``logger_ndcg``: the logging ranker's NDCG@10 on the labels of --data (how good the
    production ranker is; :func:`_logger_ndcg`)."""
    clicks, shown = stats["ctr"]
    ctr = [{"position": r, "impressions": int(n), "clicks": int(c), "ctr": c / n if n else float("nan")}
           for r, (c, n) in enumerate(zip(clicks, shown), 1)]
    while ctr and ctr[-1]["impressions"] == 0:  # a top-k longer than every list
        ctr.pop()
    summary = {"meta": meta, "n_sessions": stats["n_sessions"], "n_entries": stats["n_entries"],
               "n_clicks": stats["n_clicks"], "ctr_by_position": ctr, "logger_ndcg@10": logger_ndcg,
               "versions": _versions()}
    if args.logger_temperature:
        logger = f"{logger} drawn by Plackett-Luce at temperature {args.logger_temperature:g}"
    seen = " (the mean of 20 draws per query)" if args.logger_temperature else ""
    lines = [f"{stats['n_sessions']} sessions, {stats['n_entries']} impressions, {stats['n_clicks']} clicks "
             f"({args.model}, logger {logger}: NDCG@10 {logger_ndcg:.4f}{seen} on the labels of --data)",
             _table(ctr, ["position", "impressions", "clicks", "ctr"])]
    for method, share in (("randomized", args.randomize_fraction), ("swap", args.swap_fraction)):
        if share > 0:
            try:
                est = _estimate(interventions, method, len(ctr) or None, 0.95)
            except LtrError as exc:
                lines.append(f"\n{method} estimate not available: {exc}")
                continue
            rows = _estimate_rows(meta, est)
            summary[f"propensity_{method}"] = rows
            lines.append(f"\npropensity from {method} traffic (theta_r / theta_1, 95% interval):")
            lines.append(_table(rows, [c for c in ("position", "truth", "theta", "se", "low", "high", "covered") if c in rows[0]]))
    return summary, lines


def run_estimate(args) -> int:
    from ltr.checks import output_file
    from ltr.clicks.propensity import fit_power_law
    from ltr.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr

    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--log", path) for path in args.log])
    if args.method == "harvest":
        return _run_estimate_harvest(args, say)
    if len(args.log) > 1:
        raise LtrError(f"--method {args.method} reads one --log, got {len(args.log)} (several logs are for --method harvest)")
    args = argparse.Namespace(**{**vars(args), "log": args.log[0]})
    if args.method == "em":
        return _run_estimate_em(args, say)
    # A Parquet log is read in batches for the sums of its randomized or swap sessions (the production traffic
    # may not fit in memory).
    source, meta, _ = _interventions(args)
    est = _estimate(source, args.method, args.positions, args.confidence)
    rows = _estimate_rows(meta, est)
    say(f"propensity from {args.method} traffic ({int(est.sessions.max())} sessions at most per position), "
          f"{args.confidence:.0%} interval:")
    say(_table(rows, [c for c in ("position", "truth", "theta", "se", "low", "high", "covered") if c in rows[0]]))
    eta = fit_power_law(est)
    say(f"fitted power law: theta_r = r^-{eta:.4f}" + (f" (simulator eta {meta['eta']})" if meta.get("eta") is not None else ""))
    if args.json:
        write_json_report(args.json, {"method": args.method, "rows": rows, "eta_fit": eta})
    return 0


def _run_estimate_em(args, say) -> int:
    from ltr.clicks.log_table import is_log_table
    from ltr.clicks.regression_em import bootstrap_em, observations_from_log, regression_em
    from ltr.io_utils import write_json_report

    if args.data is None:
        raise LtrError("--method em needs --data, the labelled file the log was simulated on (its features)")
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    if is_log_table(args.log):  # streamed: per (document, position) sums of the production sessions
        agg = _stream_log(args, ds, modes=(0,))
        obs, meta = agg.observations(), agg.meta
    else:
        log = _train_log(args, ds)  # the same checks that the log belongs to --data
        obs, meta = observations_from_log(log.select_sessions(log.session_mode == 0)), log.meta
    k = min(int(args.positions or obs.position.max()), int(obs.position.max()))
    keep = obs.position <= k
    obs = obs.subset(np.flatnonzero(keep))
    res = regression_em(obs, relevance=args.relevance, features=ds.features, n_positions=k, iterations=200,
                        progress=_progress(args))
    low, high = bootstrap_em(obs, args.resamples, args.confidence, relevance=args.relevance, features=ds.features,
                             n_positions=k, iterations=200, progress=_progress(args))
    truth = meta.get("examination") if meta.get("model") in ("pbm", "trust") else None
    rows = []
    for r in range(k):
        row = {"position": r + 1, "theta": float(res.theta[r]), "low": float(low[r]), "high": float(high[r])}
        if truth is not None:
            row["truth"] = truth[r] / truth[0]
            row["covered"] = bool(low[r] <= row["truth"] <= high[r]) if r else True
        rows.append(row)
    say(f"propensity from regression EM on {int(obs.n.sum())} production impressions ({res.iterations} iterations), "
        f"{args.confidence:.0%} bootstrap interval over queries ({args.resamples} resamples):")
    say(_table(rows, [c for c in ("position", "truth", "theta", "low", "high", "covered") if c in rows[0]]))
    if args.json:
        write_json_report(args.json, {"method": "em", "rows": rows, "iterations": res.iterations})
    return 0


def _run_estimate_harvest(args, say) -> int:
    from ltr.clicks.intervention_harvesting import counts_from_cells, estimate_harvest
    from ltr.io_utils import write_json_report

    cells = [_harvest_cells(path, args) for path in args.log]
    est = estimate_harvest(counts_from_cells(cells, args.positions), method=args.pairs, resamples=args.resamples,
                           confidence=args.confidence)
    metas = [c.meta for c in cells]
    same_pbm = all(m.get("model") == "pbm" and m.get("examination") == metas[0].get("examination") for m in metas)
    rows = est.as_rows(metas[0]["examination"] if same_pbm else None)
    say(f"propensity by intervention harvesting ({args.pairs}) from {len(cells)} logs, {sum(c.n_sessions for c in cells)} "
        f"sessions; {args.confidence:.0%} bootstrap interval over queries ({est.resamples} resamples):")
    say(_table(rows, [c for c in ("position", "truth", "theta", "low", "high", "keys", "covered") if c in rows[0]]))
    if args.json:
        write_json_report(args.json, {"method": "harvest", "pairs": args.pairs, "rows": rows, "logs": list(args.log)})
    return 0


def _harvest_cells(path: str, args):
    """The per-cell sums of one --log for --method harvest: a Parquet log read in record batches of --read-rows
    rows, unless its session ids go back (then read whole, with a note), any other log read whole."""
    from ltr.clicks.harvest_stream import cells_of_log, stream_harvest_cells
    from ltr.clicks.log_table import is_log_table

    cells = None
    if is_log_table(path):
        cells = _unless_unsorted(lambda: stream_harvest_cells(path, batch_size=args.read_rows, progress=_progress(args)))
    return cells if cells is not None else cells_of_log(_load_log(path))


def _unless_unsorted(read):
    """``read()`` of a Parquet --log in record batches, or None, with a note on stderr, when the log's session ids
    go back (:class:`ltr.clicks.list_stream.UnsortedSessionsError`): the caller then reads it whole."""
    import sys

    from ltr.clicks.list_stream import UnsortedSessionsError

    try:
        return read()
    except UnsortedSessionsError as exc:
        print(f"note: {exc}; reading the log whole", file=sys.stderr)
        return None


def run_evaluate(args) -> int:
    import metrics
    from ltr.clicks.click_models import attraction
    from ltr.clicks.ips import expected_click_dcg
    from ltr.checks import output_file
    from ltr.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr

    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--log", args.log), ("--data", args.data), ("--scores", args.scores), ("--ranker", args.ranker)])
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    def get_scores():  # after the log is checked against --data, so that a log of other data is named first
        if args.scores:
            return _read_scores(args.scores, ds.n_items, "--scores")
        return _model_scores(args.ranker, ds, "--ranker", args.data)

    out, scores, support, sessions_q, meta = _click_estimates(args, ds, get_scores)
    a = attraction(ds.labels, max_label=meta.get("max_label", float(ds.labels.max())), eps=meta.get("eps", 0.1),
                   gain=meta.get("gain", "exp2"))
    shown_q = sessions_q > 0
    out["true_click_dcg"] = float(expected_click_dcg(scores, a, ds.query_offsets, k=args.k, support=support)[shown_q].mean())
    out["true_click_dcg_normalized"] = float(np.nanmean(
        expected_click_dcg(scores, a, ds.query_offsets, k=args.k, support=support, normalize=True)[shown_q]))
    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, [f"ndcg@{args.k}"])
    name = ev.names[f"ndcg@{args.k}"]
    out[name] = float(ev.mean[name])
    rows = [{"estimate": k, "value": v} for k, v in out.items()]
    say(f"click-DCG@{args.k} of the ranker from {int(sessions_q.sum())} sessions (propensity: {args.propensity}, clip: {args.clip}):")
    say(_table(rows, ["estimate", "value"]))
    say("IPS and policy-aware target true_click_dcg (over items the log showed; IPS falls short of it when the "
        "logger is stochastic); SNIPS targets true_click_dcg_normalized.")
    if args.json:
        write_json_report(args.json, out)
    return 0


ESTIMATES = ("naive", "ips", "snips", "policy-aware")  # what ltr clicks evaluate prints (ltr.clicks.ips)


def _click_estimates(args, ds, get_scores):
    """``({naive, ips, snips}, scores, support [rows], sessions per query, meta)`` of ``ltr clicks evaluate``: a Parquet
    --log read in record batches of --read-rows rows (:mod:`ltr.clicks.ips_stream`) unless its session ids go
    back, any other log read whole."""
    from ltr.clicks.ips_stream import click_dcg_from_cells, stream_click_cells
    from ltr.clicks.log_stream import read_log_meta
    from ltr.clicks.log_table import is_log_table

    if not is_log_table(args.log):
        return _click_estimates_whole(args, ds, get_scores)
    _check_log_meta(args, ds, read_log_meta(args.log))
    cells = _unless_unsorted(lambda: stream_click_cells(args.log, ds, ids=args.log_ids, batch_size=args.read_rows,
                                                        clip=args.clip, progress=_progress(args)))
    if cells is None:
        return _click_estimates_whole(args, ds, get_scores)
    scores = get_scores()
    traffic = _traffic_estimate(args, ds)  # the intervention sessions' sums, streamed too
    curve = None if traffic is None else traffic.curve(int(cells.position.max()))[0]
    out = {name: float(np.nanmean(click_dcg_from_cells(cells, scores, ds.query_offsets, estimator=name, k=args.k,
                                                        curve=curve)))
           for name in ESTIMATES}
    support = np.zeros(ds.n_items, dtype=bool)
    support[cells.doc] = True
    return out, scores, support, cells.sessions, cells.meta


def _click_estimates_whole(args, ds, get_scores):
    from ltr.clicks.ips import click_dcg, logged_support
    from ltr.clicks.propensity import propensities_from_curve

    log = _load_log(args.log, _log_ids(args, ds))  # a Parquet log may name queries and documents by id
    if (log.meta.get("n_rows") not in (None, ds.n_items) or (log.n_entries and log.doc.max() >= ds.n_items)
            or (log.n_sessions and log.session_query.max() >= ds.n_queries)
            or (log.n_entries and log.query.max() >= ds.n_queries)):
        raise LtrError(f"--log {args.log} was not simulated on --data {args.data} (its rows or queries are not this file's)")
    scores = get_scores()
    prop = None
    if args.propensity != "logged":
        est = _estimate(log, args.propensity, None, 0.95)
        prop = propensities_from_curve(log, est.curve(int(log.position.max())))
    out = {name: float(np.nanmean(click_dcg(log, scores, ds.query_offsets, estimator=name, k=args.k, clip=args.clip,
                                            propensity=prop)))
           for name in ESTIMATES}
    return out, scores, logged_support(log, ds.n_items), log.sessions_per_query(ds.n_queries), log.meta


def _log_ids(args, ds):
    """How a Parquet --log names the rows of --data (:class:`ltr.clicks.log_ids.LogIds`); None for a .npz log."""
    from ltr.clicks.log_ids import LogIds
    from ltr.clicks.log_stream import id_mode
    from ltr.clicks.log_table import is_log_table

    if not is_log_table(args.log):
        if getattr(args, "log_ids", "auto") == "id":
            raise LtrError(f"--log-ids id: --log {args.log} is a .npz log, which holds indices; ids come in Parquet logs")
        return None
    return LogIds(ds, id_mode(args.log, getattr(args, "log_ids", "auto")))


def _check_log_meta(args, ds, meta: dict) -> None:
    if meta.get("n_rows") not in (None, ds.n_items):
        raise LtrError(f"--log {args.log} was simulated on {meta['n_rows']} rows, --data {args.data} has {ds.n_items}")


def _train_log(args, ds, modes=None):
    ids = _log_ids(args, ds)
    log = _load_log(args.log, ids, modes)
    _check_log_meta(args, ds, log.meta)
    if ((log.n_entries and log.doc.max() >= ds.n_items) or (log.n_entries and log.query.max() >= ds.n_queries)):
        raise LtrError(f"--log {args.log} was not simulated on --data {args.data} (its rows or queries are not this file's)")
    return log


def _interventions(args, ds=None):
    """``(source, meta, max position)`` of the --log's randomized and swap traffic for the propensity estimators:
    a Parquet log's sums streamed in record batches of --read-rows rows (:mod:`ltr.clicks.intervention_sums`),
    else (a .npz log, or session ids that go back) its intervention sessions read into memory."""
    import sys

    from ltr.clicks.intervention_sums import stream_intervention_sums
    from ltr.clicks.list_stream import UnsortedSessionsError
    from ltr.clicks.log_stream import read_log_meta
    from ltr.clicks.log_table import is_log_table

    if is_log_table(args.log):
        meta = read_log_meta(args.log)
        if ds is not None:
            _check_log_meta(args, ds, meta)
        try:
            sums = stream_intervention_sums(args.log, batch_size=args.read_rows, progress=_progress(args))
            return sums, meta, sums.max_position
        except UnsortedSessionsError as exc:
            print(f"note: {exc}; reading its randomized and swap sessions whole", file=sys.stderr)
    log = _train_log(args, ds, modes=(1, 2)) if ds is not None else _load_log(args.log, modes=(1, 2))
    if not log.n_entries:
        raise LtrError(f"--log {args.log}: the click log has no randomized or swap sessions")
    return log, log.meta, int(log.position.max())


def _stream_log(args, ds, modes=None, clip: float = 0.01):
    """The Parquet --log summed per (document, position) in record batches of --read-rows rows."""
    from ltr.clicks.log_stream import aggregate_log, read_log_meta

    _check_log_meta(args, ds, read_log_meta(args.log))
    return aggregate_log(args.log, ds, ids=args.log_ids, batch_size=args.read_rows, modes=modes, clip=clip,
                         progress=_progress(args))


def _make_model_factory(args, train):
    from ltr.train.models import FeatureTransform, LinearScorer, MLPScorer

    try:
        hidden = tuple(int(h) for h in args.hidden.split(",") if h.strip())
    except ValueError:
        raise LtrError(f"--hidden {args.hidden!r}: expected comma-separated integers such as 64,32") from None

    def make(_ds):
        model = LinearScorer(train.n_features) if args.model == "linear" else MLPScorer(train.n_features, hidden=hidden)
        return model.set_normalizer(FeatureTransform.fit(train.features, "standard"))

    return make


def run_train(args) -> int:
    import losses
    from ltr.io_utils import atomic_write_json
    from ltr.train.models import save_model
    from ltr.runs.folder import check_destination, run_folder
    from ltr.train.trainer import TrainConfig

    inputs = [("--data", args.data), ("--log", args.log), ("--valid", args.valid)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    _check_external_memory(args)
    train = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    valid = load_data_file(args.valid, "valid", train.n_features, data_options(args), **format_options(args, "data"))
    with_curve = ("policy-aware",) if args.engine == "xgboost" else ("ips", "policy-aware")
    if args.propensity != "logged" and args.estimator not in with_curve:
        raise LtrError(f"--propensity {args.propensity} applies to --estimator {' and '.join(with_curve)} only")
    if args.em_relevance != "logistic" and args.estimator != "rem":
        raise LtrError(f"--em-relevance {args.em_relevance} applies to --estimator rem only")
    try:
        loss = losses.get_loss(args.loss)
    except (ValueError, TypeError) as exc:
        raise LtrError(f"--loss: {exc}") from None
    if args.engine != "neural":
        args.rounds = args.rounds or GBDT_ROUNDS
        return (_train_xgboost if args.engine == "xgboost" else _train_lightgbm)(args, train, valid, inputs)
    if args.estimator == "position-bias":
        raise LtrError("--estimator position-bias is LightGBM's position-bias model: give --engine lightgbm")
    if args.rounds is not None:
        raise LtrError("--rounds applies to --engine xgboost and lightgbm: the neural engine trains --epochs")
    cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                      progress=_progress(args), metrics=("ndcg@10",))
    model, info, n_sessions = _fit_from_log(args, train, valid, loss, cfg)
    info.update({"loss": args.loss, "log": str(args.log), "data": str(args.data), "n_sessions": n_sessions,
                 "versions": _versions()})
    with run_folder(args.out, overwrite=args.force, kind="clicks-train", inputs=inputs) as tmp:
        save_model(model, tmp)
        atomic_write_json(tmp / "clicks_training.json", info)
    ev = metrics_on(model, valid)
    print(f"{args.estimator}: trained on {n_sessions} sessions; valid {ev}")
    _print_logger_notes(info)
    _print_propensities(info)
    print(f"wrote {args.out} (model.pt, model.json, clicks_training.json)")
    return 0


def _check_external_memory(args) -> None:
    """--external-memory: XGBoost's naive / pairwise-debias on a Parquet log (refused before any data are read)."""
    from ltr.clicks.log_table import is_log_table

    if not args.external_memory:
        return
    if args.engine != "xgboost" or args.estimator not in ("naive", "pairwise-debias"):
        raise LtrError(f"--external-memory pages XGBoost's binned sessions (--engine xgboost, --estimator naive or "
                       f"pairwise-debias), not --engine {args.engine} --estimator {args.estimator}")
    if not is_log_table(args.log):
        raise LtrError(f"--external-memory: --log {args.log} is read into memory (only a Parquet log is read in "
                       "record batches); write the log as Parquet, or leave --external-memory out")


def _train_xgboost(args, train, valid, inputs) -> int:
    """``ltr clicks train --engine xgboost``: a GBDT model folder and clicks_training.json with the learned biases."""
    from ltr.clicks.log_table import is_log_table
    from ltr.clicks.unbiased_xgboost import fit_xgboost_clicks

    if args.estimator not in ("pairwise-debias", "naive", "policy-aware"):
        raise LtrError(f"--engine xgboost trains --estimator pairwise-debias (lambdarank_unbiased), naive or "
                       f"policy-aware, not {args.estimator}")
    if args.estimator == "policy-aware":
        return _train_xgboost_policy_aware(args, train, valid, inputs)
    # run_train refused --propensity: XGBoost learns its position biases itself
    options = dict(unbiased=args.estimator == "pairwise-debias", bias_norm=args.bias_norm, rounds=args.rounds,
                   seed=args.seed, valid=valid, early_stopping_rounds=GBDT_PATIENCE, progress=_progress(args))
    fitted = _fit_xgboost_sessions_streamed(args, train, options) if is_log_table(args.log) else None
    if fitted is None:
        log = _train_log(args, train)
        fitted = (*fit_xgboost_clicks(train, log, **options), log.meta)
    booster, info, meta = fitted
    n_sessions = info["n_groups"]
    # naive uses no propensities (t+ stays 1): none is recorded, so none is set against the truth
    info.update({"estimator": args.estimator, "propensity": info["t_plus"] if args.estimator != "naive" else None,
                 "log": str(args.log), "data": str(args.data),
                 "propensity_source": "XGBoost lambdarank_unbiased (t+ of clicked items)" if args.estimator != "naive"
                 else "none (lambdarank_unbiased off)", "n_sessions": n_sessions, "versions": _versions()})
    _save_xgboost_run(args, train, valid, booster, info, meta, n_sessions, inputs)
    print("position biases t+ (clicked, relative to 1): " + ", ".join(f"{p:.3f}" for p in info["t_plus"]))
    print("position biases t- (unclicked): " + ", ".join(f"{p:.3f}" for p in info["t_minus"]))
    _print_truth(info)
    print(f"wrote {args.out} (xgboost.json, model.json, clicks_training.json)")
    return 0


def _fit_xgboost_sessions_streamed(args, train, options: dict):
    """``(booster, info, log meta)`` of XGBoost's naive / pairwise-debias from the Parquet --log read in record
    batches of --read-rows rows (every session, its features gathered block by block), or None (with a note)
    when its session ids go back, so that it is read whole."""
    from ltr.clicks.log_stream import read_log_meta
    from ltr.clicks.unbiased_xgboost import fit_xgboost_streamed_sessions

    meta = read_log_meta(args.log)
    _check_log_meta(args, train, meta)
    if not args.external_memory:
        fitted = _unless_unsorted(lambda: fit_xgboost_streamed_sessions(train, args.log, ids=args.log_ids,
                                                                        batch_size=args.read_rows, **options))
    else:
        fitted = _fit_paged(args, lambda parent: fit_xgboost_streamed_sessions(
            train, args.log, ids=args.log_ids, batch_size=args.read_rows, external_memory=parent, **options))
    return None if fitted is None else (*fitted, meta)


def _fit_paged(args, fit):
    """``fit(folder)`` with XGBoost's page cache made in the folder that will hold --out; a log whose session ids
    go back is refused (read whole, it would not be paged)."""
    from ltr.clicks.list_stream import UnsortedSessionsError

    parent = Path(args.out).expanduser().absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    try:
        return fit(parent)
    except UnsortedSessionsError as exc:
        raise LtrError(f"--external-memory: {exc}; read whole it would not be paged (leave --external-memory out "
                       "to read it whole)") from None


def _save_xgboost_run(args, train, valid, booster, info: dict, meta: dict, n_sessions: int, inputs) -> None:
    """``--engine xgboost``'s model folder with clicks_training.json (the log's click model recorded), then the
    kept round, the validation NDCG@10 and what the estimator assumed of the logger."""
    from ltr.gbdt.engines import predict_gbdt, save_gbdt
    from ltr.io_utils import atomic_write_json
    from ltr.runs.folder import run_folder

    _record_click_model(info, meta)
    with run_folder(args.out, overwrite=args.force, kind="clicks-train", inputs=inputs) as tmp:
        save_gbdt("xgboost", booster, tmp, info, n_features=train.n_features)
        atomic_write_json(tmp / "clicks_training.json", info)
    print(f"{args.estimator} (xgboost, {info['best_iteration']} of at most {args.rounds} rounds): trained on {n_sessions} "
          f"sessions; valid NDCG@10 = {_ndcg10(predict_gbdt('xgboost', booster, valid.features), valid):.4f}")
    _print_logger_notes(info)


def _train_xgboost_policy_aware(args, train, valid, inputs) -> int:
    """``ltr clicks train --engine xgboost --estimator policy-aware``: an XGBoost model folder and
    clicks_training.json."""
    from ltr.clicks.unbiased_training import _aggregate_curve, _record_propensity
    from ltr.clicks.unbiased_xgboost import fit_xgboost_policy_aware

    agg, curve, source, log_read = _policy_aware_aggregate(args, train)
    booster, info = fit_xgboost_policy_aware(train, valid, agg, clip=args.clip, curve=curve, rounds=args.rounds,
                                             seed=args.seed, early_stopping_rounds=GBDT_PATIENCE, progress=_progress(args))
    _record_propensity(info, curve, source, lambda: _aggregate_curve(agg))
    info.update({"log": str(args.log), "data": str(args.data), "n_sessions": agg.n_sessions, "log_read": log_read,
                 "versions": _versions()})
    _save_xgboost_run(args, train, valid, booster, info, agg.meta, agg.n_sessions, inputs)
    _print_propensities(info)
    print(f"wrote {args.out} (xgboost.json, model.json, clicks_training.json)")
    return 0


def _train_lightgbm(args, train, valid, inputs) -> int:
    """``ltr clicks train --engine lightgbm``: a LightGBM model folder and clicks_training.json."""
    from ltr.clicks.unbiased_lightgbm import LIGHTGBM_ESTIMATORS
    from ltr.gbdt.engines import predict_gbdt, save_gbdt
    from ltr.io_utils import atomic_write_json
    from ltr.runs.folder import run_folder

    if args.estimator not in LIGHTGBM_ESTIMATORS:  # run_train refused --propensity for the others already
        raise LtrError(f"--engine lightgbm trains --estimator {', '.join(LIGHTGBM_ESTIMATORS)}, not {args.estimator}")
    booster, info, n_sessions, meta = _fit_lightgbm_from_log(args, train, valid)
    info.update({"log": str(args.log), "data": str(args.data), "n_sessions": n_sessions, "versions": _versions()})
    _record_click_model(info, meta)
    with run_folder(args.out, overwrite=args.force, kind="clicks-train", inputs=inputs) as tmp:
        save_gbdt("lightgbm", booster, tmp, info, n_features=train.n_features)
        # LightGBM's per-round curves and importances stay out of the record (ltr gbdt's folders keep them)
        atomic_write_json(tmp / "clicks_training.json", {k: v for k, v in info.items() if k not in ("evals_result", "importance")})
    print(f"{args.estimator} (lightgbm, {info['best_iteration']} of at most {args.rounds} rounds): trained on {n_sessions} sessions; "
          f"valid NDCG@10 = {_ndcg10(predict_gbdt('lightgbm', booster, valid.features), valid):.4f}")
    _print_logger_notes(info)
    _print_propensities(info)
    print(f"wrote {args.out} (model.txt, model.json, clicks_training.json)")
    return 0


def _fit_lightgbm_from_log(args, train, valid):
    """``(booster, info, n_sessions, log meta)`` of ``--engine lightgbm``. From a Parquet log read in record
    batches: pairwise-debias from its shown lists and policy-aware from its per-cell sums (bounded memory),
    naive / ips / position-bias from its sessions with a click (one row per shown item of those, without their
    float features); from a log in memory otherwise."""
    from ltr.clicks.log_table import is_log_table
    from ltr.clicks.unbiased_lightgbm import fit_lightgbm_clicks, fit_pairwise_debias_on_lists, fit_policy_aware_lightgbm

    if args.estimator == "policy-aware":
        agg, curve, source, log_read = _policy_aware_aggregate(args, train)
        booster, info = fit_policy_aware_lightgbm(train, valid, agg, clip=args.clip, curve=curve, curve_source=source,
                                                  rounds=args.rounds, early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
                                                  progress=_progress(args))
        info["log_read"] = log_read
        return booster, info, agg.n_sessions, agg.meta
    streamed = _stream_lists(args, train) if args.estimator == "pairwise-debias" and is_log_table(args.log) else None
    if streamed is not None:
        lists, pairs, meta = streamed
        booster, info = fit_pairwise_debias_on_lists(train, valid, lists, pairs, rounds=args.rounds,
                                                     early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
                                                     progress=_progress(args))
        info["log_read"] = "streamed per shown list"
        return booster, info, int(lists.sessions.sum()), meta
    if args.estimator in ("naive", "ips", "position-bias") and is_log_table(args.log):
        fitted = _fit_lightgbm_sessions_streamed(args, train, valid)
        if fitted is not None:
            return fitted
    log = _train_log(args, train)
    if args.estimator != "pairwise-debias":
        _note_session_matrix(log, train.n_features, args.estimator)
    curve, source = _estimated_curve(args, log)
    booster, info = fit_lightgbm_clicks(train, valid, log, args.estimator, clip=args.clip, curve=curve, curve_source=source,
                                        rounds=args.rounds, early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
                                        progress=_progress(args))
    return booster, info, log.n_sessions, log.meta


def _fit_lightgbm_sessions_streamed(args, train, valid):
    """``(booster, info, n_sessions, log meta)`` of naive / ips / position-bias from the Parquet --log read in
    record batches of --read-rows rows (the sessions with a click, their features gathered block by block), or
    None (with a note) when its session ids go back, so that it is read whole."""
    from ltr.clicks.log_stream import read_log_meta
    from ltr.clicks.unbiased_lightgbm import fit_lightgbm_streamed_sessions

    meta = read_log_meta(args.log)
    _check_log_meta(args, train, meta)
    curve, source = None, None
    traffic = _traffic_estimate(args, train)
    if traffic is not None:
        curve, source = traffic.curve(_max_position(args.log))
    fitted = _unless_unsorted(lambda: fit_lightgbm_streamed_sessions(
        train, valid, args.log, args.estimator, clip=args.clip, curve=curve, curve_source=source, ids=args.log_ids,
        batch_size=args.read_rows, rounds=args.rounds, early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
        progress=_progress(args)))
    return None if fitted is None else (*fitted, meta)


def _max_position(path) -> int:
    """The largest shown position of a Parquet log (its position column read alone)."""
    from ltr.clicks.log_stream import iter_log_batches

    return max((int(cols["position"].max()) for _, cols in iter_log_batches(path, ["position"]) if len(cols["position"])),
               default=1)


def _note_session_matrix(log, n_features: int, estimator: str) -> None:
    """A note on stderr when LightGBM's training matrix (one float32 row per shown item of every session
    with a click) passes SESSION_MATRIX_NOTE_BYTES, before it is built."""
    import sys

    from ltr.clicks.ips import sessions_with_click

    if log.n_entries == 0:
        return
    rows = int(sessions_with_click(log)[log.session].sum())
    size = rows * n_features * 4
    if size > SESSION_MATRIX_NOTE_BYTES:
        print(f"note: --estimator {estimator} trains on one row per shown item of every session with a click: "
              f"{rows:,} rows x {n_features} features, {size / 2**30:.1f} GiB of float32 (from a Parquet log in "
              "session order it gathers them block by block instead; pairwise-debias trains on the distinct shown "
              "lists)", file=sys.stderr)


def _stream_lists(args, train):
    """``(lists, pairs, meta)`` of the Parquet --log read in record batches of --read-rows rows, or None (with a
    note) when its session ids go back, so that it is read whole."""
    from ltr.clicks.list_stream import stream_shown_lists
    from ltr.clicks.log_stream import read_log_meta

    _check_log_meta(args, train, read_log_meta(args.log))
    return _unless_unsorted(lambda: stream_shown_lists(args.log, train, ids=args.log_ids, batch_size=args.read_rows,
                                                       pairs=args.estimator == "pairwise-debias",
                                                       progress=_progress(args)))


def _fit_from_log(args, train, valid, loss, cfg):
    """``(model, info, n_sessions)``: a Parquet log streamed into per-cell sums for naive / ips / rem / affine,
    any other log (or estimator) read into memory."""
    from ltr.clicks.log_table import is_log_table
    from ltr.clicks.unbiased_training import LISTED, STREAMED, fit_on_aggregate, fit_on_clicks, fit_on_lists

    make = _make_model_factory(args, train)
    if is_log_table(args.log) and args.estimator in LISTED:  # the shown lists, summed in record batches
        streamed = _stream_lists(args, train)
        if streamed is not None:
            lists, pairs, meta = streamed
            model, info = fit_on_lists(train, valid, lists, args.estimator, make, pairs=pairs, config=cfg,
                                       clip=args.clip, max_weight=args.max_weight,
                                       propensity_update=args.dla_propensity_update,
                                       relevance_reference=args.dla_relevance_reference)
            _record_click_model(info, meta)
            return model, info, int(lists.sessions.sum())
    if is_log_table(args.log) and args.estimator in STREAMED:
        agg, curve, source = _streamed_aggregate(args, train)
        model, info = fit_on_aggregate(train, valid, agg, args.estimator, make, loss=loss, config=cfg, clip=args.clip,
                                       curve=curve, curve_source=source, em_relevance=args.em_relevance)
        _record_click_model(info, agg.meta)
        return model, info, agg.n_sessions
    log = _train_log(args, train)
    curve, source = _estimated_curve(args, log)
    model, info = fit_on_clicks(train, valid, log, args.estimator, make, loss=loss, config=cfg, clip=args.clip,
                                curve=curve, curve_source=source, max_weight=args.max_weight, em_relevance=args.em_relevance,
                                propensity_update=args.dla_propensity_update,
                                relevance_reference=args.dla_relevance_reference)
    _record_click_model(info, log.meta)
    return model, info, log.n_sessions


def _policy_aware_aggregate(args, train):
    """``(aggregate, curve, source, how the log was read)`` for policy-aware on a GBDT engine: a Parquet --log's
    per-cell sums read in record batches (:func:`_streamed_aggregate`), else those of the log read into memory,
    with its estimated curve."""
    from ltr.clicks.log_stream import aggregate_from_log
    from ltr.clicks.log_table import is_log_table

    if is_log_table(args.log):
        return (*_streamed_aggregate(args, train), "streamed per (query, document, position)")
    log = _train_log(args, train)
    curve, source = _estimated_curve(args, log)
    return aggregate_from_log(log, train), curve, source, "per (query, document, position)"


def _streamed_aggregate(args, train):
    """``(aggregate, curve, source)`` of a Parquet --log read in record batches: its per-cell sums and, for
    --propensity randomized|swap, the curve estimated from its intervention sessions (streamed too) over every
    shown position; ``curve`` and ``source`` are None for the logged propensities."""
    traffic = _traffic_estimate(args, train)  # before the log is read, so that a log without such traffic fails at once
    agg = _stream_log(args, train, clip=args.clip)
    curve, source = (None, None) if traffic is None else traffic.curve(int(agg.position.max()))
    return agg, curve, source


class _TrafficEstimate:
    """--propensity randomized|swap estimated from a Parquet log's intervention sessions (their sums streamed)."""

    def __init__(self, estimate, max_position: int, kind: str):
        self.estimate, self.max_position, self.kind = estimate, max_position, kind

    def curve(self, log_positions: int) -> tuple[np.ndarray, str]:
        """``(curve, source)`` over the positions of the intervention traffic and at least ``log_positions``."""
        return self.estimate.curve(max(self.max_position, log_positions)), f"estimated from {self.kind} traffic"


def _traffic_estimate(args, train) -> _TrafficEstimate | None:
    """The propensity estimate of --propensity randomized|swap from the Parquet --log, or None for the logged ones."""
    if args.propensity == "logged":
        return None
    inter, _, max_position = _interventions(args, train)
    return _TrafficEstimate(_estimate(inter, args.propensity, None, 0.95), max_position, args.propensity)


def _print_logger_notes(info: dict) -> None:
    """What the estimator assumed of the logger: policy-aware's count of the items it labelled 0 because the log
    never showed them; for the other de-biasing estimators, a note on stderr when the logger drew its rankings
    at random."""
    import sys

    if info.get("logger_temperature") and info.get("estimator") not in ("naive", "policy-aware"):
        print(f"note: the log's logger drew each session's ranking (Plackett-Luce, temperature "
              f"{info['logger_temperature']:g}), so an item is shown in some sessions only; --estimator "
              f"{info['estimator']} corrects the position bias of the sessions that showed it, not that share: "
              "--estimator policy-aware does", file=sys.stderr)
    if "never_shown" in info:
        print(f"policy-aware: {info['never_shown']} items of the logged queries were never shown, labelled 0 (it assumes "
              "the logger could show every item, as a stochastic one can; --estimator ips leaves them out)")


def _estimated_curve(args, log) -> tuple[np.ndarray | None, str | None]:
    """``(curve, source)`` of --propensity randomized|swap from the intervention sessions of a log held in
    memory, over every shown position; ``(None, None)`` for the logged propensities."""
    if args.propensity == "logged":
        return None, None
    est = _estimate(log, args.propensity, None, 0.95)
    return est.curve(int(log.position.max())), f"estimated from {args.propensity} traffic"


def _record_click_model(info: dict, meta: dict) -> None:
    """The log's click model into the training record, and under PBM the simulator's examination θ_r
    (θ_1 = 1): the truth the learned propensities are printed beside; a simulated Plackett-Luce logger's
    temperature."""
    info["click_model"] = meta.get("model")
    if meta.get("logger_temperature"):
        info["logger_temperature"] = float(meta["logger_temperature"])
    if meta.get("model") == "pbm" and meta.get("examination") is not None:
        info["true_propensity"] = [float(v) for v in meta["examination"]]


def _print_propensities(info: dict) -> None:
    """The propensities the estimator learned or used and, on a simulated PBM log, the truth beside them."""
    if info.get("propensity") is not None:
        print("propensities by position (relative to 1): " + ", ".join(f"{p:.3f}" for p in info["propensity"]))
    _print_truth(info)


def _print_truth(info: dict) -> None:
    """The line of :func:`_truth_line`, when the log carries a truth."""
    line = _truth_line(info)
    if line:
        print(line)


def _truth_line(info: dict) -> str | None:
    """The simulator's truth beside the propensities the estimator used, with the largest relative
    error; None when the log carries no truth (not simulated, or not PBM)."""
    learned, truth = info.get("propensity"), info.get("true_propensity")
    n = min(len(learned or []), len(truth or []))
    if n < 2:
        return None
    err = np.abs(np.asarray(learned[:n]) - truth[:n]) / np.asarray(truth[:n])
    worst = int(np.argmax(err))
    return ("the simulator's examination (the truth): " + ", ".join(f"{p:.3f}" for p in truth[:n])
            + f"; largest relative error {err[worst]:.1%}, at position {worst + 1}")


def metrics_on(model, ds) -> str:
    from ltr.train.trainer import predict_scores

    return f"NDCG@10 = {_ndcg10(predict_scores(model, ds.features, query_offsets=ds.query_offsets), ds):.4f}"


def _ranker_scores(path: str, ds, option: str, data_path: str) -> np.ndarray:
    if Path(path).is_dir():
        return _model_scores(path, ds, option, data_path)
    return _read_scores(path, ds.n_items, option)


def run_interleave(args) -> int:
    from ltr.checks import output_file
    from ltr.clicks.interleaving import interleave_sessions, probabilistic_sessions, sessions_to_detect, sessions_to_detect_mean
    from ltr.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr
    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--data", args.data), ("--a", args.a), ("--b", args.b)])
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    a = _ranker_scores(args.a, ds, "--a", args.data)
    b = _ranker_scores(args.b, ds, "--b", args.data)
    common = {"sessions_per_query": args.sessions_per_query, "top_k": args.top_k, "model": args.model, "eta": args.eta,
              "eps": args.eps, "seed": args.seed}
    if args.method == "probabilistic":
        res = probabilistic_sessions(ds.labels, ds.query_offsets, a, b, tau=args.tau, **common)
        out = {"method": "probabilistic", "tau": args.tau, **res.summary()}
        if res.mean != 0:
            out["sessions_to_detect"] = sessions_to_detect_mean(res.outcome)
    else:
        res = interleave_sessions(ds.labels, ds.query_offsets, a, b, **common)
        out = {"method": "team-draft", **res.summary()}
        decided = out["wins_a"] + out["wins_b"]
        if decided and out["wins_a"] != out["wins_b"]:
            out["sessions_to_detect"] = sessions_to_detect(out["wins_a"] / decided, out["ties"] / out["sessions"])
    for name, scores in (("a", a), ("b", b)):
        out[f"ndcg@10_{name}"] = _ndcg10(scores, ds)
    test = "t-test of the mean outcome" if args.method == "probabilistic" else "sign test"
    say(f"{args.method} interleaving, {out['sessions']} {args.model} sessions: A wins {out['wins_a']}, B wins "
        f"{out['wins_b']}, ties {out['ties']}; preference for A {out['preference_a']:.4f} ({test} p = {out['p_value']:.3g})")
    if "sessions_to_detect" in out:
        say(f"sessions to detect this preference (5% two-sided, 80% power): {out['sessions_to_detect']:.0f}")
    say(f"NDCG@10 on the labels: A {out['ndcg@10_a']:.4f}, B {out['ndcg@10_b']:.4f}")
    if args.json:
        write_json_report(args.json, out)
    return 0


def run_open_bandit(args) -> int:
    from ltr.checks import input_folder, output_file
    from ltr.clicks.open_bandit import ctr_by_position, ips_value, load_open_bandit
    from ltr.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr

    input_folder(args.data, "--data")
    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--data", args.data)])
    policies = ("random", "bts") if args.policy == "both" else (args.policy,)
    out: dict = {}
    logs = {}
    for policy in policies:
        log = load_open_bandit(args.data, policy, args.campaign)
        logs[policy] = log
        rows = ctr_by_position(log, confidence=args.confidence, interval=args.interval,
                               n_resamples=args.resamples, seed=args.seed)
        out[policy] = {"n_rounds": log.n_rounds, "clicks": int(log.click.sum()), "ctr_by_position": rows}
        say(f"{policy}: {log.n_rounds} rounds, {int(log.click.sum())} clicks, {log.n_items} items "
              f"({args.interval} {args.confidence:.0%} intervals)")
        say(_table(rows, ["position", "impressions", "clicks", "ctr", "low", "high", "relative"], digits=5))
        say()
    if "bts" in logs:
        n_items = logs["bts"].n_items
        est = ips_value(logs["bts"], 1.0 / n_items, confidence=args.confidence)
        out["random_policy_from_bts"] = est
        line = (f"off-policy CTR of the uniform-random policy from the bts log: IPS {est['ips']:.5f} "
                f"[{est['ips_low']:.5f}, {est['ips_high']:.5f}], SNIPS {est['snips']:.5f} "
                f"(max weight {est['max_weight']:.1f}, effective n {est['ess']:.0f})")
        if "random" in logs:
            on = ips_value(logs["random"], 1.0 / n_items, confidence=args.confidence)
            out["random_policy_on_policy"] = on
            line += f"; on-policy CTR of the random log: {on['ips']:.5f} [{on['ips_low']:.5f}, {on['ips_high']:.5f}]"
        say(line)
    if args.json:
        write_json_report(args.json, out)
    return 0
