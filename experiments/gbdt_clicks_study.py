"""LightGBM on click logs: raw clicks, inverse-propensity weights and LightGBM's own position-bias
model, against LightGBM on the true labels.

The setting of ``experiments/unbiased_ltr_grid.py`` (its data sets and ``load_data``; the logger, a
ridge regression on the labels of 10 training queries, shows the top ``--shown`` items; PBM clicks
with θ_r = r^-η and ε = 0.1; NDCG@10 on the test labels), with the GBDT side of ``ltr clicks train``:

    full           LightGBM lambdarank on the true labels (the toolkit's defaults), early stopping on valid
    naive          ``--engine lightgbm --estimator naive``: one query group per session with a click, clicks as labels
    ips            ``--estimator ips``: clicked items weighted by 1 / max(θ_r, 0.01) (the simulator's θ)
    position-bias  ``--estimator position-bias``: LightGBM's position-bias model on the shown positions
    pairwise-debias  ``--estimator pairwise-debias``: Unbiased LambdaMART on the shown lists
    policy-aware   ``--estimator policy-aware``: lambdarank on one list per query of all its items, labelled by
                   their clicks over their expected examinations (for a stochastic logger, ``--logger-temperature``)

each boosted for at most ``--rounds`` rounds with early stopping on the validation labels (patience
50); ``--pairwise-rounds N`` boosts pairwise-debias exactly N rounds instead (200: the LightGBM rows
of ``experiments/unbiased_ltr_study.py``, which it reproduces). Gap closed = (estimator − naive) /
(full − naive), per seed and of the means.

``--logger-temperature T`` makes the logger stochastic: each session shows the top of a Plackett-Luce
ranking drawn from the logger's scores at temperature T (the grid's logs at that temperature).

``--engine xgboost`` runs the XGBoost side instead: XGBoost ``rank:ndcg`` on the true labels
(the toolkit's defaults, early stopping on valid) against ``--engine xgboost --estimator naive``,
``pairwise-debias`` (its ``lambdarank_unbiased``) and ``policy-aware`` (``ndcg_exp_gain=False``), each
stopped early on valid the same way.

    python experiments/gbdt_clicks_study.py --out runs/gbdt_clicks --seeds 3 --sessions 1000000
    python experiments/gbdt_clicks_study.py --out runs/gbdt_clicks_xgb --seeds 3 --sessions 1000000 --engine xgboost
    python experiments/gbdt_clicks_study.py --out runs/gbdt_clicks_pl --seeds 3 --sessions 1000000 \
        --logger-temperature 1 --estimators naive,position-bias,policy-aware

Writes ``results.json`` (after every seed) and ``results.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from unbiased_ltr_grid import _t_interval, load_data, shown_k, simulate_log  # noqa: E402
from unbiased_ltr_study import ndcg10, production_ranker  # noqa: E402

ESTIMATORS = ("naive", "ips", "position-bias", "pairwise-debias", "policy-aware")
#: the estimators of each engine (``--engine``); XGBoost's pairwise-debias is its ``lambdarank_unbiased``
ENGINE_ESTIMATORS = {"lightgbm": ESTIMATORS, "xgboost": ("naive", "pairwise-debias", "policy-aware")}
ENGINE_NAMES = {"lightgbm": "LightGBM", "xgboost": "XGBoost"}


def run_seed(name: str, seed: int, args) -> dict:
    """One seed: the log, the engine on the labels and on the clicks by each estimator (test NDCG@10)."""
    from ltr.gbdt.engines import predict_gbdt, train_gbdt

    engine = getattr(args, "engine", "lightgbm")
    train, valid, test, max_label = load_data(name, seed)
    logger = production_ranker(train, 10, seed)
    temperature = getattr(args, "logger_temperature", 0.0)
    log = simulate_log(train, logger(train), max_label, args.model, args.sessions, seed, eps=0.1, shown=shown_k(args),
                       temperature=temperature)
    row = {"data": name, "seed": seed, "sessions": log.n_sessions, "clicks": log.n_clicks, "logger": ndcg10(logger(test), test),
           "logger_temperature": temperature}
    if temperature:  # what the stochastic logger's users see, on the training queries it ranked
        from ltr.clicks.simulate.logging_ranker import plackett_luce_ndcg

        row["logger_seen"] = plackett_luce_ndcg(logger(train), train, temperature, seed=seed)
    t0 = time.time()
    model, _ = train_gbdt(engine, train, valid, seed=seed, threads=1 if engine == "xgboost" else None)  # defaults
    row["full"], row["full_s"] = ndcg10(predict_gbdt(engine, model, test.features), test), round(time.time() - t0, 1)
    for est in chosen(args):
        t0 = time.time()
        model, info = fit_clicks(engine, train, valid, log, est, args, seed)
        row[est] = ndcg10(predict_gbdt(engine, model, test.features), test)
        row[f"{est}_valid"] = ndcg10(predict_gbdt(engine, model, valid.features), valid)  # what a temperature is picked on
        row[f"{est}_s"], row[f"{est}_rounds"] = round(time.time() - t0, 1), int(info["best_iteration"])
        print(f"  {name} seed {seed} {engine} {est}: {row[est]:.4f} ({row[f'{est}_s']} s, {row[f'{est}_rounds']} rounds)",
              flush=True)
    return row


def fit_clicks(engine: str, train, valid, log, est: str, args, seed: int):
    """``(model, info)`` of ``ltr clicks train --engine ENGINE --estimator EST`` on ``log`` (at most
    ``--rounds`` rounds, early stopping on ``valid``; ``--pairwise-rounds N``: LightGBM's
    pairwise-debias boosts exactly N rounds)."""
    if engine == "xgboost" and est == "policy-aware":
        from ltr.clicks.logs.stream import aggregate_from_log
        from ltr.clicks.engines.xgboost import fit_xgboost_policy_aware

        return fit_xgboost_policy_aware(train, valid, aggregate_from_log(log, train), rounds=args.rounds, seed=seed,
                                        early_stopping_rounds=50)
    if engine == "xgboost":
        from ltr.clicks.engines.xgboost import fit_xgboost_clicks

        return fit_xgboost_clicks(train, log, unbiased=est == "pairwise-debias", rounds=args.rounds, seed=seed,
                                  valid=valid, early_stopping_rounds=50)
    from ltr.clicks.engines.lightgbm import fit_lightgbm_clicks

    exact = est == "pairwise-debias" and args.pairwise_rounds is not None
    return fit_lightgbm_clicks(train, None if exact else valid, log, est,
                               rounds=args.pairwise_rounds if exact else args.rounds, seed=seed)


def chosen(args) -> list[str]:
    """The estimators of ``--estimators`` in the study's order, naive first (every gap is measured from it)."""
    offered = ENGINE_ESTIMATORS[getattr(args, "engine", "lightgbm")]
    asked = set((getattr(args, "estimators", None) or ",".join(offered)).split(","))
    unknown = asked - set(offered)
    if unknown:
        raise SystemExit(f"--estimators: unknown {', '.join(sorted(unknown))} (choose from {', '.join(offered)})")
    return [e for e in offered if e in asked | {"naive"}]


def markdown(rows: list[dict], args) -> str:
    """The per-seed table, the means with the gap closed, and each estimator against naive (t-interval)."""
    from ltr.study.report_table import markdown_table

    def gap(r, est):
        return (r[est] - r["naive"]) / (r["full"] - r["naive"])

    ests = chosen(args)
    cols = ["full", *ests]
    body = [[r["data"], str(r["seed"]), f"{r['logger']:.4f}", *(f"{r[c]:.4f}" for c in cols),
             *(f"{gap(r, e):.0%}" for e in ests[1:])] for r in rows]
    means = {c: float(np.mean([r[c] for r in rows])) for c in ["logger", *cols]}
    body.append(["mean", f"{len(rows)} seeds", f"{means['logger']:.4f}", *(f"{means[c]:.4f}" for c in cols),
                 *(f"{(means[e] - means['naive']) / (means['full'] - means['naive']):.0%}" for e in ests[1:])])
    on_labels = f"{ENGINE_NAMES[getattr(args, 'engine', 'lightgbm')]} on labels"
    head = ["data", "seed", "logger", on_labels, *ests, *(f"{e} gap closed" for e in ests[1:])]
    temperature = getattr(args, "logger_temperature", 0.0)
    drawn = f" of a Plackett-Luce ranking at temperature {temperature:g}" if temperature else ""
    lines = [f"{args.model} clicks, {rows[0]['sessions']:,} sessions, the logger shows the top {args.shown}{drawn}; "
             "NDCG@10 on the test labels", "", markdown_table(head, body), ""]
    for est in ests[1:]:
        lines.append(f"- {est} − naive, paired by seed: {_t_interval([r[est] - r['naive'] for r in rows])}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for results.json and results.md")
    p.add_argument("--data", default="synthetic", help="synthetic, mq2008 or mslr (unbiased_ltr_grid.load_data)")
    p.add_argument("--model", default="pbm:1", help="click model name[:eta] (unbiased_ltr_grid.parse_model)")
    p.add_argument("--sessions", type=int, default=1_000_000, help="logged sessions")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (data draw, logger, log and boosting)")
    p.add_argument("--shown", default="10", help="items the logger shows: the top k, or 'all'")
    p.add_argument("--rounds", type=int, default=300, help="at most this many boosting rounds on the clicks")
    p.add_argument("--pairwise-rounds", type=int, default=None,
                   help="pairwise-debias: exactly this many boosting rounds, without early stopping")
    p.add_argument("--engine", default="lightgbm", choices=sorted(ENGINE_ESTIMATORS),
                   help="the GBDT engine, on the labels and on the clicks (xgboost: naive, pairwise-debias and policy-aware)")
    p.add_argument("--estimators", default=None, help="comma-separated subset of the engine's (naive always runs)")
    p.add_argument("--logger-temperature", type=float, default=0.0,
                   help="> 0: a Plackett-Luce logger drawing each session's ranking at this temperature (0: fixed)")
    args = p.parse_args(argv)
    if not (np.isfinite(args.logger_temperature) and args.logger_temperature >= 0):
        raise SystemExit("--logger-temperature must be a finite number >= 0")
    chosen(args)  # unknown estimators refused before any work
    if args.engine == "xgboost" and args.pairwise_rounds is not None:
        raise SystemExit("--pairwise-rounds applies to --engine lightgbm")
    if min(args.seeds, args.sessions, args.rounds, 1 if args.pairwise_rounds is None else args.pairwise_rounds) < 1:
        raise SystemExit("--seeds, --sessions, --rounds and --pairwise-rounds must be positive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(args.data, seed, args))
        atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows})
    text = markdown(rows, args)
    atomic_write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
