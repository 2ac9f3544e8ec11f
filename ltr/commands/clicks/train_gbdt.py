"""``ltr clicks train --engine xgboost|lightgbm``: gradient-boosted trees on a click log; a GBDT model folder."""

from __future__ import annotations

from pathlib import Path

from ltr.commands.clicks.options import GBDT_PATIENCE, progress
from ltr.commands.clicks.curves import log_curve, policy_aware_aggregate, propensity_curve
from ltr.commands.clicks.reading import check_log_meta, stream_lists, train_log, unless_unsorted
from ltr.commands.clicks.report import ndcg10, print_logger_notes, print_propensities, print_truth, record_click_model, versions
from ltr.base.errors import LtrError


#: ``clicks train --engine lightgbm``'s session estimators say on stderr how large their training matrix is
#: above this many bytes
SESSION_MATRIX_NOTE_BYTES = 1 << 30


def train_xgboost(args, train, valid, inputs) -> int:
    """``ltr clicks train --engine xgboost``: a GBDT model folder and clicks_training.json with the learned biases."""
    from ltr.clicks.logs.table import is_log_table
    from ltr.clicks.engines.xgboost import fit_xgboost_clicks

    if args.estimator not in ("pairwise-debias", "naive", "policy-aware"):
        raise LtrError(f"--engine xgboost trains --estimator pairwise-debias (lambdarank_unbiased), naive or "
                       f"policy-aware, not {args.estimator}")
    if args.estimator == "policy-aware":
        return _train_xgboost_policy_aware(args, train, valid, inputs)
    # run_train refused --propensity: XGBoost learns its position biases itself
    options = dict(unbiased=args.estimator == "pairwise-debias", bias_norm=args.bias_norm, rounds=args.rounds,
                   seed=args.seed, valid=valid, early_stopping_rounds=GBDT_PATIENCE, progress=progress(args))
    fitted = _fit_xgboost_sessions_streamed(args, train, options) if is_log_table(args.log) else None
    if fitted is None:
        log = train_log(args, train)
        fitted = (*fit_xgboost_clicks(train, log, **options), log.meta)
    booster, info, meta = fitted
    n_sessions = info["n_groups"]
    # naive uses no propensities (t+ stays 1): none is recorded, so none is set against the truth
    info.update({"estimator": args.estimator, "propensity": info["t_plus"] if args.estimator != "naive" else None,
                 "log": str(args.log), "data": str(args.data),
                 "propensity_source": "XGBoost lambdarank_unbiased (t+ of clicked items)" if args.estimator != "naive"
                 else "none (lambdarank_unbiased off)", "n_sessions": n_sessions, "versions": versions()})
    _save_xgboost_run(args, train, valid, booster, info, meta, n_sessions, inputs)
    print("position biases t+ (clicked, relative to 1): " + ", ".join(f"{p:.3f}" for p in info["t_plus"]))
    print("position biases t- (unclicked): " + ", ".join(f"{p:.3f}" for p in info["t_minus"]))
    print_truth(info)
    print(f"wrote {args.out} (xgboost.json, model.json, clicks_training.json)")
    return 0


def _fit_xgboost_sessions_streamed(args, train, options: dict):
    """``(booster, info, log meta)`` of XGBoost's naive / pairwise-debias from the Parquet --log read in record
    batches of --read-rows rows (every session, its features gathered block by block), or None (with a note)
    when its session ids go back, so that it is read whole."""
    from ltr.clicks.logs.stream import read_log_meta
    from ltr.clicks.engines.xgboost import fit_xgboost_streamed_sessions

    meta = read_log_meta(args.log)
    check_log_meta(args, train, meta)
    if not args.external_memory:
        fitted = unless_unsorted(lambda: fit_xgboost_streamed_sessions(train, args.log, ids=args.log_ids,
                                                                        batch_size=args.read_rows, **options))
    else:
        fitted = _fit_paged(args, lambda parent: fit_xgboost_streamed_sessions(
            train, args.log, ids=args.log_ids, batch_size=args.read_rows, external_memory=parent, **options))
    return None if fitted is None else (*fitted, meta)


def _fit_paged(args, fit):
    """``fit(folder)`` with XGBoost's page cache made in the folder that will hold --out; a log whose session ids
    go back is refused (read whole, it would not be paged)."""
    from ltr.clicks.logs.list_stream import UnsortedSessionsError

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
    from ltr.base.io_utils import atomic_write_json
    from ltr.runs.folder import run_folder

    record_click_model(info, meta)
    with run_folder(args.out, overwrite=args.force, kind="clicks-train", inputs=inputs) as tmp:
        save_gbdt("xgboost", booster, tmp, info, n_features=train.n_features)
        atomic_write_json(tmp / "clicks_training.json", info)
    print(f"{args.estimator} (xgboost, {info['best_iteration']} of at most {args.rounds} rounds): trained on {n_sessions} "
          f"sessions; valid NDCG@10 = {ndcg10(predict_gbdt('xgboost', booster, valid.features), valid):.4f}")
    print_logger_notes(info)


def _train_xgboost_policy_aware(args, train, valid, inputs) -> int:
    """``ltr clicks train --engine xgboost --estimator policy-aware``: an XGBoost model folder and
    clicks_training.json."""
    from ltr.clicks.estimators.training import _aggregate_curve, _record_propensity
    from ltr.clicks.engines.xgboost import fit_xgboost_policy_aware

    agg, curve, source, log_read = policy_aware_aggregate(args, train)
    booster, info = fit_xgboost_policy_aware(train, valid, agg, clip=args.clip, curve=curve, rounds=args.rounds,
                                             seed=args.seed, early_stopping_rounds=GBDT_PATIENCE, progress=progress(args))
    _record_propensity(info, curve, source, lambda: _aggregate_curve(agg), agg.meta)
    info.update({"log": str(args.log), "data": str(args.data), "n_sessions": agg.n_sessions, "log_read": log_read,
                 "versions": versions()})
    _save_xgboost_run(args, train, valid, booster, info, agg.meta, agg.n_sessions, inputs)
    print_propensities(info)
    print(f"wrote {args.out} (xgboost.json, model.json, clicks_training.json)")
    return 0


def train_lightgbm(args, train, valid, inputs) -> int:
    """``ltr clicks train --engine lightgbm``: a LightGBM model folder and clicks_training.json."""
    from ltr.clicks.engines.lightgbm import LIGHTGBM_ESTIMATORS
    from ltr.gbdt.engines import predict_gbdt, save_gbdt
    from ltr.base.io_utils import atomic_write_json
    from ltr.runs.folder import run_folder

    if args.estimator not in LIGHTGBM_ESTIMATORS:  # run_train refused --propensity for the others already
        raise LtrError(f"--engine lightgbm trains --estimator {', '.join(LIGHTGBM_ESTIMATORS)}, not {args.estimator}")
    booster, info, n_sessions, meta = _fit_lightgbm_from_log(args, train, valid)
    info.update({"log": str(args.log), "data": str(args.data), "n_sessions": n_sessions, "versions": versions()})
    record_click_model(info, meta)
    with run_folder(args.out, overwrite=args.force, kind="clicks-train", inputs=inputs) as tmp:
        save_gbdt("lightgbm", booster, tmp, info, n_features=train.n_features)
        # LightGBM's per-round curves and importances stay out of the record (ltr gbdt's folders keep them)
        atomic_write_json(tmp / "clicks_training.json", {k: v for k, v in info.items() if k not in ("evals_result", "importance")})
    print(f"{args.estimator} (lightgbm, {info['best_iteration']} of at most {args.rounds} rounds): trained on {n_sessions} sessions; "
          f"valid NDCG@10 = {ndcg10(predict_gbdt('lightgbm', booster, valid.features), valid):.4f}")
    print_logger_notes(info)
    print_propensities(info)
    print(f"wrote {args.out} (model.txt, model.json, clicks_training.json)")
    return 0


def _fit_lightgbm_from_log(args, train, valid):
    """``(booster, info, n_sessions, log meta)`` of ``--engine lightgbm``. From a Parquet log read in record
    batches: pairwise-debias from its shown lists and policy-aware from its per-cell sums (bounded memory),
    naive / ips / position-bias from its sessions with a click (one row per shown item of those, without their
    float features); from a log in memory otherwise."""
    from ltr.clicks.logs.table import is_log_table
    from ltr.clicks.engines.lightgbm import fit_lightgbm_clicks, fit_pairwise_debias_on_lists, fit_policy_aware_lightgbm

    if args.estimator in ("policy-aware", "doubly-robust"):
        agg, curve, source, log_read = policy_aware_aggregate(args, train)
        booster, info = fit_policy_aware_lightgbm(train, valid, agg, clip=args.clip, curve=curve, curve_source=source,
                                                  rounds=args.rounds, early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
                                                  progress=progress(args), estimator=args.estimator)
        info["log_read"] = log_read
        return booster, info, agg.n_sessions, agg.meta
    streamed = stream_lists(args, train) if args.estimator == "pairwise-debias" and is_log_table(args.log) else None
    if streamed is not None:
        lists, pairs, meta = streamed
        booster, info = fit_pairwise_debias_on_lists(train, valid, lists, pairs, rounds=args.rounds,
                                                     early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
                                                     progress=progress(args))
        info["log_read"] = "streamed per shown list"
        return booster, info, int(lists.sessions.sum()), meta
    if args.estimator in ("naive", "ips", "position-bias") and is_log_table(args.log):
        fitted = _fit_lightgbm_sessions_streamed(args, train, valid)
        if fitted is not None:
            return fitted
    log = train_log(args, train)
    if args.estimator != "pairwise-debias":
        _note_session_matrix(log, train.n_features, args.estimator)
    curve, source = log_curve(args, train, log, int(log.position.max()) if log.n_entries else 1)
    booster, info = fit_lightgbm_clicks(train, valid, log, args.estimator, clip=args.clip, curve=curve, curve_source=source,
                                        rounds=args.rounds, early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
                                        progress=progress(args))
    return booster, info, log.n_sessions, log.meta


def _fit_lightgbm_sessions_streamed(args, train, valid):
    """``(booster, info, n_sessions, log meta)`` of naive / ips / position-bias from the Parquet --log read in
    record batches of --read-rows rows (the sessions with a click, their features gathered block by block), or
    None (with a note) when its session ids go back, so that it is read whole."""
    from ltr.clicks.logs.stream import read_log_meta
    from ltr.clicks.engines.lightgbm import fit_lightgbm_streamed_sessions

    meta = read_log_meta(args.log)
    check_log_meta(args, train, meta)
    curve, source = None, None
    found = propensity_curve(args, train)
    if found is not None:
        curve, source = found.curve(_max_position(args.log))
    fitted = unless_unsorted(lambda: fit_lightgbm_streamed_sessions(
        train, valid, args.log, args.estimator, clip=args.clip, curve=curve, curve_source=source, ids=args.log_ids,
        batch_size=args.read_rows, rounds=args.rounds, early_stopping_rounds=GBDT_PATIENCE, seed=args.seed,
        progress=progress(args)))
    return None if fitted is None else (*fitted, meta)


def _max_position(path) -> int:
    """The largest shown position of a Parquet log (its position column read alone)."""
    from ltr.clicks.logs.stream import iter_log_batches

    return max((int(cols["position"].max()) for _, cols in iter_log_batches(path, ["position"]) if len(cols["position"])),
               default=1)


def _note_session_matrix(log, n_features: int, estimator: str) -> None:
    """A note on stderr when LightGBM's training matrix (one float32 row per shown item of every session
    with a click) passes SESSION_MATRIX_NOTE_BYTES, before it is built."""
    import sys

    from ltr.clicks.estimators.ips import sessions_with_click

    if log.n_entries == 0:
        return
    rows = int(sessions_with_click(log)[log.session].sum())
    size = rows * n_features * 4
    if size > SESSION_MATRIX_NOTE_BYTES:
        print(f"note: --estimator {estimator} trains on one row per shown item of every session with a click: "
              f"{rows:,} rows x {n_features} features, {size / 2**30:.1f} GiB of float32 (from a Parquet log in "
              "session order it gathers them block by block instead; pairwise-debias trains on the distinct shown "
              "lists)", file=sys.stderr)
