"""``ltr clicks train``: a neural scorer trained on a click log with an unbiased estimator; a model folder.

A Parquet log is streamed into per-(document, position) sums for naive / ips / rem / affine / policy-aware, or
into its distinct shown lists for dla / pairwise-debias. The GBDT engines are in
:mod:`ltr.commands.clicks.train_gbdt`.
"""

from __future__ import annotations

from ltr.base.checks import COUNT, SEED, number
from ltr.clicks.propensities.curves import EM_ITERATIONS
from ltr.commands.clicks.options import (GBDT_PATIENCE, GBDT_ROUNDS, add_log_read_options, add_propensity_options,
                                         add_quiet_option, progress)
from ltr.commands.clicks.curves import affine_parameters, log_curve, streamed_aggregate
from ltr.commands.clicks.reading import stream_lists, train_log
from ltr.commands.clicks.report import metrics_on, print_logger_notes, print_propensities, record_click_model, versions
from ltr.commands.clicks.train_gbdt import train_lightgbm, train_xgboost
from ltr.data.files import add_data_options, add_format_options, data_options, format_options, load_data_file
from ltr.base.errors import LtrError


def add_parser(sub, fmt) -> None:
    t = sub.add_parser("train", help="train a neural scorer on a click log with an unbiased estimator", formatter_class=fmt,
                       description="Train a linear or MLP scorer on the clicks of --log (simulated on --data) with one "
                       "estimator: naive (raw clicks), ips (clicks / max(p, clip), p the logged or an estimated "
                       "propensity), rem (ips with propensities from regression EM on the same log), dla (ranker and "
                       "propensities learned together), pairwise-debias (Hu et al.'s t+ / t- position biases), affine "
                       "(trust-bias correction (c - beta_r) / alpha_r) or policy-aware (for a stochastic top-k logger: "
                       "one list per query of all its items, label = its clicks / its expected examinations, 0 if never "
                       "shown), doubly-robust (as policy-aware, label = a regression of the click probability on the features "
                       "corrected by the item's clicks: the regression's estimate for an item never shown). The others group the log by shown list: label = mean corrected click, item weight = "
                       "number of sessions. Writes a model folder (model.pt, model.json) with clicks_training.json: "
                       "the estimator, the clip rule and the propensities used.")
    t.add_argument("--data", required=True, metavar="FILE", help="the labelled file the log was simulated on (its features train the model)")
    add_format_options(t)
    t.add_argument("--log", required=True, metavar="FILE", help="clicks.npz or clicks.parquet written by `ltr clicks simulate` on --data")
    t.add_argument("--valid", required=True, metavar="FILE",
                   help="labelled validation file: every estimator and engine keeps its epoch or round of best NDCG@10 on it")
    t.add_argument("--out", required=True, metavar="DIR", help="model folder to create")
    t.add_argument("--estimator", default="ips", choices=("naive", "ips", "dla", "rem", "pairwise-debias", "affine", "policy-aware", "doubly-robust",
                            "position-bias"),
                   help="how clicks are de-biased (position-bias: LightGBM's own position-bias model, --engine lightgbm)")
    add_propensity_options(t, "ips and policy-aware (neural and lightgbm engines; policy-aware with xgboost)")
    t.add_argument("--affine", default="simulator", choices=("simulator", "estimated"),
                   help="--estimator affine: trust bias's alpha and beta by position from the simulator's settings in "
                   "the log (a log of ltr clicks simulate --model trust), or estimated from the log by intervention "
                   "harvesting's trust-bias fit (it needs documents shown at several positions)")
    t.add_argument("--affine-file", default=None, metavar="FILE",
                   help="--estimator affine: alpha and beta from a file (the JSON of ltr clicks estimate --method harvest "
                   "--trust, or {\"alpha\": [...], \"beta\": [...]})")
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
    t.add_argument("--em-iterations", type=COUNT, default=EM_ITERATIONS,
                   help="rem and --propensity estimated: regression EM's iterations at most (it stops sooner once the "
                   "log-likelihood gains less than 1e-9 relative)")
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
    add_log_read_options(t)
    add_quiet_option(t)
    add_data_options(t)
    t.set_defaults(func=run_train)


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
    from ltr.base.io_utils import atomic_write_json
    from ltr.train.models import save_model
    from ltr.runs.folder import check_destination, run_folder
    from ltr.train.trainer import TrainConfig

    inputs = [("--data", args.data), ("--log", args.log), ("--valid", args.valid)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    _check_external_memory(args)
    _check_logged_propensity(args)
    train = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    valid = load_data_file(args.valid, "valid", train.n_features, data_options(args), **format_options(args, "data"))
    with_curve = ("policy-aware",) if args.engine == "xgboost" else ("ips", "policy-aware", "doubly-robust")
    if (args.propensity != "logged" or args.propensity_file) and args.estimator not in with_curve:
        given = "--propensity-file" if args.propensity_file else f"--propensity {args.propensity}"
        raise LtrError(f"{given} applies to --estimator {_listed(with_curve)} only")
    if (args.affine != "simulator" or args.affine_file) and args.estimator != "affine":
        raise LtrError("--affine and --affine-file apply to --estimator affine only")
    if args.propensity_file and args.propensity != "logged":
        raise LtrError(f"--propensity {args.propensity} and --propensity-file: give one of them")
    if args.em_relevance != "logistic" and args.estimator != "rem" and args.propensity != "estimated":
        raise LtrError(f"--em-relevance {args.em_relevance} applies to --estimator rem and --propensity estimated only")
    if args.em_iterations != EM_ITERATIONS and args.estimator != "rem" and args.propensity != "estimated":
        raise LtrError(f"--em-iterations {args.em_iterations} applies to --estimator rem and --propensity estimated only")
    try:
        loss = losses.get_loss(args.loss)
    except (ValueError, TypeError) as exc:
        raise LtrError(f"--loss: {exc}") from None
    if args.engine != "neural":
        args.rounds = args.rounds or GBDT_ROUNDS
        return (train_xgboost if args.engine == "xgboost" else train_lightgbm)(args, train, valid, inputs)
    if args.estimator == "position-bias":
        raise LtrError("--estimator position-bias is LightGBM's position-bias model: give --engine lightgbm")
    if args.rounds is not None:
        raise LtrError("--rounds applies to --engine xgboost and lightgbm: the neural engine trains --epochs")
    cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                      progress=progress(args), metrics=("ndcg@10",))
    model, info, n_sessions = _fit_from_log(args, train, valid, loss, cfg)
    info.update({"loss": args.loss, "log": str(args.log), "data": str(args.data), "n_sessions": n_sessions,
                 "versions": versions()})
    with run_folder(args.out, overwrite=args.force, kind="clicks-train", inputs=inputs) as tmp:
        save_model(model, tmp)
        atomic_write_json(tmp / "clicks_training.json", info)
    ev = metrics_on(model, valid)
    print(f"{args.estimator}: trained on {n_sessions} sessions; valid {ev}")
    print_logger_notes(info)
    print_propensities(info)
    print(f"wrote {args.out} (model.pt, model.json, clicks_training.json)")
    return 0


def _check_logged_propensity(args) -> None:
    """ips and policy-aware on a Parquet or CSV log without a propensity column and without --propensity or
    --propensity-file: refused before any data are read, naming the ways to get propensities."""
    from ltr.clicks.estimators.propensity_source import NEEDS_PROPENSITY, require_propensity
    from ltr.clicks.logs.reader import read_log_meta
    from ltr.clicks.logs.table import is_log_table

    if (args.estimator in NEEDS_PROPENSITY and args.propensity == "logged" and args.propensity_file is None
            and is_log_table(args.log)):
        require_propensity(read_log_meta(args.log), f"--estimator {args.estimator}", args.log)


def _check_external_memory(args) -> None:
    """--external-memory: XGBoost's naive / pairwise-debias on a Parquet log (refused before any data are read)."""
    from ltr.clicks.logs.table import is_log_table

    if not args.external_memory:
        return
    if args.engine != "xgboost" or args.estimator not in ("naive", "pairwise-debias"):
        raise LtrError(f"--external-memory pages XGBoost's binned sessions (--engine xgboost, --estimator naive or "
                       f"pairwise-debias), not --engine {args.engine} --estimator {args.estimator}")
    if not is_log_table(args.log):
        raise LtrError(f"--external-memory: --log {args.log} is read into memory (only a Parquet log is read in "
                       "record batches); write the log as Parquet, or leave --external-memory out")


def _fit_from_log(args, train, valid, loss, cfg):
    """``(model, info, n_sessions)``: a Parquet log streamed into per-cell sums for naive / ips / rem / affine,
    any other log (or estimator) read into memory."""
    from ltr.clicks.logs.table import is_log_table
    from ltr.clicks.estimators.training import LISTED, STREAMED, fit_on_aggregate, fit_on_clicks, fit_on_lists

    make = _make_model_factory(args, train)
    if is_log_table(args.log) and args.estimator in LISTED:  # the shown lists, summed in record batches
        streamed = stream_lists(args, train)
        if streamed is not None:
            lists, pairs, meta = streamed
            model, info = fit_on_lists(train, valid, lists, args.estimator, make, pairs=pairs, config=cfg,
                                       clip=args.clip, max_weight=args.max_weight,
                                       propensity_update=args.dla_propensity_update,
                                       relevance_reference=args.dla_relevance_reference,
                                       min_impressions=args.min_impressions)
            record_click_model(info, meta)
            return model, info, int(lists.sessions.sum())
    if is_log_table(args.log) and args.estimator in STREAMED:
        agg, curve, source = streamed_aggregate(args, train)
        affine, affine_source = (affine_parameters(args, train, None, int(agg.position.max()))
                                 if args.estimator == "affine" else (None, None))
        model, info = fit_on_aggregate(train, valid, agg, args.estimator, make, loss=loss, config=cfg, clip=args.clip,
                                       curve=curve, curve_source=source, em_relevance=args.em_relevance,
                                       em_iterations=args.em_iterations, min_impressions=args.min_impressions,
                                       affine_given=affine, affine_source=affine_source)
        record_click_model(info, agg.meta)
        return model, info, agg.n_sessions
    log = train_log(args, train)
    positions = int(log.position.max()) if log.n_entries else 1
    curve, source = log_curve(args, train, log, positions)
    affine, affine_source = affine_parameters(args, train, log, positions) if args.estimator == "affine" else (None, None)
    model, info = fit_on_clicks(train, valid, log, args.estimator, make, loss=loss, config=cfg, clip=args.clip,
                                curve=curve, curve_source=source, max_weight=args.max_weight, em_relevance=args.em_relevance,
                                em_iterations=args.em_iterations,
                                propensity_update=args.dla_propensity_update,
                                relevance_reference=args.dla_relevance_reference, min_impressions=args.min_impressions,
                                affine_given=affine, affine_source=affine_source)
    record_click_model(info, log.meta)
    return model, info, log.n_sessions


def _listed(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
