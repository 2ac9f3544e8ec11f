"""Unbiased learning to rank from one production ranker's click logs, without randomized traffic.

A weak production ranker (ridge regression fitted on the labels of a few training queries) shows
the top 10 of every training query; simulated users click under a click model (PBM with
theta_r = 1/r^eta, or PBM with trust bias: eps+ = 1, eps-_r = 0.65/r). Each estimator of
``ltr clicks train`` trains the same MLP scorer on the log; everything is judged by NDCG@10 on the
*true labels* of the test queries, beside

* naive (raw clicks) and the full-information model (the same scorer and loss on the true labels,
  target a(rel) = eps + (1 - eps)(2^rel - 1)/15, the attraction the clicks measure);
* the propensities each estimator used, against the simulator's truth (relative error per
  position, positions 1..10).

Gap closed by an estimator = (NDCG(estimator) - NDCG(naive)) / (NDCG(full) - NDCG(naive)).
Model selection: every estimator keeps the epoch of best NDCG@10 on a labelled validation split
(patience 5); dla and pairwise-debias keep their propensities of that epoch too.

    python experiments/unbiased_ltr_study.py --out runs/unbiased_ltr_study            # the docs' tables (5 seeds)
    python experiments/unbiased_ltr_study.py --quick --out runs/unbiased_quick        # minutes
    python experiments/unbiased_ltr_study.py --out runs/dla_pbm_1e6 --models pbm --sessions 1000000 \
        --estimators naive,dla --dla-propensity-update full                          # one estimator, one cell

Each estimator's line prints, for rem / dla / pairwise-debias, the seed's largest propensity error
over positions 1..10 (``max err``).

Writes ``results.json`` and ``results.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# One BLAS / OpenMP thread: the machine has 2 cores, and oversubscribed BLAS made regression EM's
# Newton steps 40x slower. Set before numpy and torch load.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the logging ranker: a ridge regression on the labels of a few training queries, the default logger of
# `ltr clicks simulate` too
from ltr.clicks.simulate.logging_ranker import ridge_logger as production_ranker  # noqa: E402


def ndcg10(model_or_scores, ds) -> float:
    import metrics
    from ltr.train.trainer import predict_scores

    scores = model_or_scores if isinstance(model_or_scores, np.ndarray) else predict_scores(
        model_or_scores, ds.features, query_offsets=ds.query_offsets)
    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, ["ndcg@10"])
    return float(ev.mean[ev.names["ndcg@10"]])


#: restart j of a run with seed s trains under the seed s + RESTART_STRIDE * j (j = 0: the seed itself);
#: ``--restarts`` of unbiased_ltr_grid.py and ``restarts=K`` of dla_variants_study.py
RESTART_STRIDE = 10_007


def restart_seeds(seed: int, restarts: int) -> list[int]:
    """The seeds of ``restarts`` runs on the same log: ``seed`` first, then ``seed + RESTART_STRIDE * j``."""
    return [seed + RESTART_STRIDE * j for j in range(restarts)]


def geometric_mean_curve(curves) -> np.ndarray:
    """The restarts' propensity curves averaged on the log scale (the mean of their position logits),
    relative to position 1."""
    theta = np.exp(np.log(np.clip(np.asarray(curves, dtype=np.float64), 1e-12, None)).mean(axis=0))
    return theta / theta[0]


def make_factory(train, hidden):
    from ltr.train.models import FeatureTransform, MLPScorer

    def make(_ds):
        return MLPScorer(train.n_features, hidden=hidden).set_normalizer(FeatureTransform.fit(train.features, "standard"))

    return make


def full_information(train, valid, make, cfg, eps):
    """The same scorer and loss on the true labels, target a(rel) (the attraction clicks measure)."""
    import losses
    from ltr.clicks.simulate.click_models import attraction
    from ltr.train.trainer import Trainer, seed_everything

    target = type(train)(train.features, attraction(train.labels, max_label=4, eps=eps), train.query_offsets,
                         train.query_ids)
    seed_everything(cfg.seed)  # the initial weights under the seed, as fit_on_clicks draws the estimators'
    return Trainer(make(target), losses.get_loss("softmax"), cfg).fit(target, valid).model


ETA = [1.0]  # set by main from --eta (the propensity truth of the LightGBM rows)


def lightgbm_rows(train, valid, test, log, seed, full_cache) -> dict:
    """LightGBM on the click lists: naive lambdas, unbiased LambdaMART, and lambdarank on the true labels."""
    import lightgbm

    from ltr.clicks.engines.lambdamart import fit_unbiased_lambdamart

    params = {"num_leaves": 31, "learning_rate": 0.05, "min_data_in_leaf": 20}
    out = {}
    for name, debias in (("lgbm_naive", False), ("lgbm_unbiased", True)):
        t0 = time.time()
        model = fit_unbiased_lambdamart(train, log, rounds=200, params=params, seed=seed, debias=debias)
        out[name] = ndcg10(model.predict(test.features), test)
        out[f"{name}_s"] = round(time.time() - t0, 1)
        if debias:
            out["lgbm_unbiased_propensity"] = model.t_plus.tolist()
            theta = 1.0 / np.arange(1, len(model.t_plus) + 1) ** ETA[0]
            out["lgbm_unbiased_rel_error"] = np.abs(model.t_plus / theta - 1).tolist()
    key = ("lgbm_full", seed)
    if key not in full_cache:
        ds = lightgbm.Dataset(train.features, train.labels, group=train.query_lengths)
        booster = lightgbm.train({**params, "objective": "lambdarank", "verbosity": -1, "seed": seed, "num_threads": 1,
                                  "deterministic": True, "force_col_wise": True}, ds, num_boost_round=200)
        full_cache[key] = ndcg10(booster.predict(test.features), test)
    out["lgbm_full"] = full_cache[key]
    print(f"  lightgbm: naive {out['lgbm_naive']:.4f}, unbiased {out['lgbm_unbiased']:.4f}, full {out['lgbm_full']:.4f}",
          flush=True)
    return out


def run_cell(data, click_model, n_sessions, seed, args, full_cache):
    """One (click model, log size, seed): every estimator's NDCG@10 and propensity error."""
    from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
    from ltr.clicks.estimators.training import fit_on_clicks
    from ltr.train.trainer import TrainConfig

    train, valid, test, logger, _ = data
    spq = max(1, int(round(n_sessions / train.n_queries)))
    t0 = time.time()
    log = simulate_clicks(train.labels, train.query_offsets, logger, model=click_model, eta=args.eta, eps=args.eps,
                          max_label=4, top_k=10, sessions_per_query=spq, seed=seed)
    sim_s = time.time() - t0
    theta = pbm_examination(10, args.eta)
    cfg = TrainConfig(epochs=args.epochs, batch_size=64, lr=args.lr, patience=5, seed=seed, progress=False,
                      metrics=("ndcg@10",))
    make = make_factory(train, tuple(args.hidden))
    if seed not in full_cache:
        full_cache[seed] = ndcg10(full_information(train, valid, make, cfg, args.eps), test)
    row = {"click_model": click_model, "sessions": log.n_sessions, "seed": seed, "clicks": log.n_clicks,
           "simulate_s": round(sim_s, 2), "full": full_cache[seed], "logger": ndcg10(data[4], test)}
    estimators = ["naive", "ips", "rem", "dla", "pairwise-debias"] + (["affine"] if click_model == "trust" else [])
    estimators = [e for e in estimators if e in args.estimators.split(",")]
    if "lgbm" in args.estimators.split(","):
        row.update(lightgbm_rows(train, valid, test, log, seed, full_cache))
    for est in estimators:
        t0 = time.time()
        model, info = fit_on_clicks(train, valid, log, est, make, config=cfg, clip=0.01,
                                    propensity_update=args.dla_propensity_update)
        row[est] = ndcg10(model, test)
        row[f"{est}_s"] = round(time.time() - t0, 1)
        if est in ("rem", "dla", "pairwise-debias") and info.get("propensity") is not None:
            p = np.asarray(info["propensity"])
            row[f"{est}_propensity"] = p.tolist()
            row[f"{est}_rel_error"] = (np.abs(p / theta[: len(p)] - 1)).tolist()
        err = f", max err {max(row[f'{est}_rel_error'][:10]):.4f}" if f"{est}_rel_error" in row else ""
        print(f"  {click_model} {log.n_sessions} seed {seed} {est}: {row[est]:.4f} ({row[f'{est}_s']} s){err}", flush=True)
    return row


def markdown(rows, args) -> str:
    from ltr.study.report_table import markdown_table

    lines = [f"η = {args.eta}, ε = {args.eps}; {args.queries} synthetic queries, {args.features} features; "
             f"MLP {tuple(args.hidden)}, softmax cross-entropy; seeds {args.seeds}; DLA's propensity update "
             f"{getattr(args, 'dla_propensity_update', 'sgd')}", ""]
    ests = ["naive", "ips", "rem", "dla", "pairwise-debias", "affine"]
    head = ["click model", "sessions", "logger", "full info"] + ests + ["best gap closed"]
    table = []
    for (cm, n), group in _groups(rows).items():
        def mean(key):
            vals = [r[key] for r in group if key in r]
            return float(np.mean(vals)) if vals else float("nan")

        naive, full = mean("naive"), mean("full")
        best = max((mean(e) for e in ests[1:] if not np.isnan(mean(e))), default=float("nan"))
        cells = [cm, f"{n:,}", f"{mean('logger'):.4f}", f"{full:.4f}"]
        cells += ["" if np.isnan(mean(e)) else f"{mean(e):.4f}" for e in ests]
        cells.append(f"{(best - naive) / (full - naive):.0%}" if full != naive else "")
        table.append(cells)
    lines.append(markdown_table(head, table))
    lines += ["", "Paired differences over seeds (mean [95% t-interval]):", ""]
    diffs = []
    for (cm, n), group in _groups(rows).items():
        pairs = [("ips", "naive"), ("rem", "naive"), ("dla", "ips"), ("rem", "ips")] + (
            [("affine", "ips"), ("affine", "naive")] if cm == "trust" else [])
        pairs = [(a, b) for a, b in pairs if a in group[0] and b in group[0]]
        diffs.append([cm, f"{n:,}", "; ".join(f"{a} − {b} {_t_interval([r[a] - r[b] for r in group])}" for a, b in pairs)])
    lines.append(markdown_table(["click model", "sessions", "differences"], diffs))
    lines += ["", "LightGBM on the same click lists (200 rounds, 31 leaves, no early stopping): lambdas on raw clicks, "
              "unbiased LambdaMART, and lambdarank on the true labels:", ""]
    gb = []
    for (cm, n), group in _groups(rows).items():
        if "lgbm_naive" not in group[0]:
            continue
        m = {key: float(np.mean([r[key] for r in group])) for key in ("lgbm_naive", "lgbm_unbiased", "lgbm_full")}
        gap = (m["lgbm_unbiased"] - m["lgbm_naive"]) / (m["lgbm_full"] - m["lgbm_naive"])
        gb.append([cm, f"{n:,}", f"{m['lgbm_naive']:.4f}", f"{m['lgbm_unbiased']:.4f}", f"{m['lgbm_full']:.4f}", f"{gap:.0%}"])
    lines.append(markdown_table(["click model", "sessions", "naive", "unbiased LambdaMART", "full info", "gap closed"], gb))
    lines += ["", "Relative propensity error |θ̂_r/θ_r − 1| at positions 2, 5 and 10 (mean over seeds):", ""]
    perr = []
    for (cm, n), group in _groups(rows).items():
        for est in ("rem", "dla", "pairwise-debias", "lgbm_unbiased"):
            errs = [r[f"{est}_rel_error"] for r in group if f"{est}_rel_error" in r]
            if errs:
                e = np.mean(np.array(errs), axis=0)
                perr.append([cm, f"{n:,}", est, f"{e[1]:.3f}", f"{e[4]:.3f}", f"{e[9]:.3f}", f"{e.max():.3f}"])
    lines.append(markdown_table(["click model", "sessions", "estimator", "pos 2", "pos 5", "pos 10", "max (1..10)"], perr))
    lines += ["", "Largest error max_r |θ̂_r/θ_r − 1| over positions 1..10, per seed (seeds in order), its mean and the "
              "number of seeds within 10%:", ""]
    per_seed = []
    for (cm, n), group in _groups(rows).items():
        for est in ("rem", "dla", "pairwise-debias", "lgbm_unbiased"):
            worst = [max(r[f"{est}_rel_error"][:10]) for r in group if f"{est}_rel_error" in r]
            if worst:
                per_seed.append([cm, f"{n:,}", est, ", ".join(f"{w:.4f}" for w in worst), f"{np.mean(worst):.4f}",
                                 f"{sum(w <= 0.10 for w in worst)} of {len(worst)}"])
    lines.append(markdown_table(["click model", "sessions", "estimator", "per seed", "mean", "within 10%"], per_seed))
    return "\n".join(lines) + "\n"


def _t_interval(values) -> str:
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    m = v.mean()
    if len(v) < 2:
        return f"{m:+.4f}"
    h = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return f"{m:+.4f} [{m - h:+.4f}, {m + h:+.4f}]"


def _groups(rows):
    out: dict = {}
    for r in rows:
        out.setdefault((r["click_model"], r["sessions"]), []).append(r)
    return out


def main(argv=None) -> int:
    from ltr.data import make_synthetic_splits
    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true", help="10^4 sessions, one seed, fewer epochs")
    p.add_argument("--sessions", default="10000,100000,1000000")
    p.add_argument("--models", default="pbm,trust")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--report-only", action="store_true", help="rewrite results.md from --out/results.json")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--features", type=int, default=40)
    p.add_argument("--eta", type=float, default=1.0)
    p.add_argument("--eps", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 32])
    p.add_argument("--estimators", default="naive,ips,rem,dla,pairwise-debias,affine,lgbm",
                   help="the estimators to run (lgbm: the three LightGBM rows); naive is needed for the gap")
    p.add_argument("--dla-propensity-update", default="sgd", choices=("sgd", "full", "refit"),
                   help="how DLA's propensity model follows the ranker (ltr.clicks.estimators.dla)")
    args = p.parse_args(argv)
    ETA[0] = args.eta
    if args.quick:
        args.sessions, args.seeds, args.epochs = "10000", 1, 10
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        import json

        saved = json.loads((out / "results.json").read_text())
        text = markdown(saved["rows"], argparse.Namespace(**saved["args"]))
        atomic_write_text(out / "results.md", text)
        print(text)
        return 0
    rows = []
    for seed in range(args.seeds):
        train, valid, test = make_synthetic_splits(args.queries, args.features, mean_list_length=30, max_list_length=120,
                                                   empty_query_share=0.0, valid_share=0.1, test_share=0.2, seed=seed)
        score = production_ranker(train, 10, seed)
        data = (train, valid, test, score(train), score(test))
        full_cache: dict = {}
        for cm in args.models.split(","):
            for n in (int(float(s)) for s in args.sessions.split(",")):
                rows.append(run_cell(data, cm, n, seed, args, full_cache))
                atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows})
    text = markdown(rows, args)
    atomic_write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
