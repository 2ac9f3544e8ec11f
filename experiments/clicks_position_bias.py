"""Position bias in logged clicks: judging and training rankers on them, naive vs IPS.

A weak production ranker (ridge regression fitted on a few labelled training queries) shows its
lists; simulated users click under the position-based model (theta_r = 1/r^eta, attraction
eps + (1-eps)(2^rel-1)/(2^max-1)). Then:

(a) Counterfactual evaluation on the test queries (whole lists shown, so every item has support):
    the naive click-DCG@10, IPS and SNIPS estimates of several rankers (a copy of the production
    ranker, a better one, the ideal ranking by label, a random one) beside the true expected
    click-DCG@10 and NDCG@10 from the labels; 95% bootstrap intervals over queries.
(b) Unbiased training on clicks logged on the training queries (top 10 shown): LambdaRank and
    RankNet (MLP scorer) on raw clicks, on IPS-weighted clicks with the true propensities and with
    propensities estimated from a randomized share of the traffic, LightGBM lambdarank on raw clicks
    with and without its position-bias option, and LambdaRank on the true labels (skyline); all
    judged by NDCG@10 on the test labels, over several seeds (95% t-interval over seeds).
    Model selection (early stopping) uses the same small labelled validation set for every method.

Data: the toolkit's synthetic MSLR-like generator and LETOR 4.0 MQ2008 (skipped when absent).
Writes ``results.md`` (tables), ``results.json`` and ``clicks_position_bias.png`` under ``--out``.

    .venv/bin/python experiments/clicks_position_bias.py --out runs/clicks_position_bias
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LTR_SHARED_DIR", ROOT.parent / "shared")) / "data"


# ---------------------------------------------------------------------------------------------- data
def load_data(name: str, seed: int):
    from ltr.data import load_svmlight, split_by_query

    if name == "synthetic":
        from ltr.data import make_synthetic_splits

        return make_synthetic_splits(800, 40, mean_list_length=30, max_list_length=120, empty_query_share=0.0,
                                     valid_share=0.1, test_share=0.2, seed=seed)
    if name == "mq2008":
        from ltr.data import concat_datasets

        paths = [SHARED / "letor4-mq2008" / f"S{i}.txt" for i in range(1, 6)]
        if not all(p.exists() for p in paths):
            return None
        # S1..S5 together hold every MQ2008 query once (784 queries).
        ds = concat_datasets([load_svmlight(p) for p in paths])
        return split_by_query(ds, (0.7, 0.1, 0.2), seed=seed)
    raise ValueError(name)


def production_ranker(train, share: float, seed: int):
    """Ridge regression on the labels of a small share of the training queries: a weak ranker."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ltr.data.normalize import signed_log1p

    rng = np.random.default_rng(seed)
    n = max(3, int(round(share * train.n_queries)))
    queries = np.sort(rng.choice(train.n_queries, n, replace=False))
    part = train.subset(queries)
    model = make_pipeline(StandardScaler(), Ridge(alpha=10.0)).fit(signed_log1p(part.features), part.labels)
    return lambda ds: model.predict(signed_log1p(ds.features))


def lightgbm_scores(train, valid, test, *, position=None, seed=0):
    from ltr.gbdt import predict_booster, train_lightgbm

    params = {"num_leaves": 15, "learning_rate": 0.1, "min_data_in_leaf": 20, "num_threads": 2, "verbosity": -1}
    booster, _ = train_lightgbm(train, valid, params, position=position, num_boost_round=300,
                                early_stopping_rounds=30, seed=seed)
    return predict_booster(booster, test.features)


def neural_scores(train, valid, test, loss_name: str, seed: int, epochs: int):
    import torch

    import losses
    from ltr.train import FeatureTransform, MLPScorer, TrainConfig, Trainer

    torch.set_num_threads(1)  # tiny models: threads only add contention on a shared machine
    torch.manual_seed(seed)
    model = MLPScorer(train.n_features, hidden=(64, 32))
    model.set_normalizer(FeatureTransform.fit(train.features, kind="log1p_standard"))
    cfg = TrainConfig(epochs=epochs, batch_size=64, lr=2e-3, patience=4, monitor="ndcg@10", metrics=("ndcg@10",),
                      seed=seed, progress=False)
    trainer = Trainer(model, losses.get_loss(loss_name), cfg)
    trainer.fit(train, valid)
    return trainer.predict(test)


# ---------------------------------------------------------------------------------------------- (a)
def evaluation_study(name, train, valid, test, produce, args, seed):
    """Naive / IPS / SNIPS / truth of several rankers on a log of the production ranker."""
    import metrics
    from ltr.clicks import click_dcg, expected_click_dcg
    from ltr.clicks.simulate.click_models import attraction, simulate_clicks
    from metrics.stats import bootstrap_ci

    max_label = float(max(train.labels.max(), test.labels.max()))
    prod = produce(test)
    log = simulate_clicks(test.labels, test.query_offsets, prod, eta=args.eta, eps=args.eps, max_label=max_label,
                          top_k=None, sessions_per_query=args.eval_sessions, seed=seed)
    a = attraction(test.labels, max_label=max_label, eps=args.eps)
    rng = np.random.default_rng(seed + 17)
    rankers = {
        "production (logger copy)": prod,
        "better (LightGBM on labels)": lightgbm_scores(train, valid, test, seed=seed),
        "ideal (sorted by label)": test.labels + 1e-6 * rng.random(test.n_items),
        "random": rng.random(test.n_items),
    }
    rows = []
    for ranker, scores in rankers.items():
        per_q = {
            "naive": click_dcg(log, scores, test.query_offsets, estimator="naive", k=10),
            "IPS": click_dcg(log, scores, test.query_offsets, estimator="ips", k=10),
            "IPS clip 0.1": click_dcg(log, scores, test.query_offsets, estimator="ips", k=10, clip=0.1),
            "SNIPS": click_dcg(log, scores, test.query_offsets, estimator="snips", k=10),
            "true click-DCG": expected_click_dcg(scores, a, test.query_offsets, k=10),
            "true SNIPS target": expected_click_dcg(scores, a, test.query_offsets, k=10, normalize=True),
        }
        ev = metrics.evaluate(scores, test.labels, test.query_offsets, ["ndcg@10"])
        per_q["NDCG@10 (labels)"] = ev.per_query[ev.names["ndcg@10"]]
        row = {"data": name, "ranker": ranker}
        for key, values in per_q.items():
            ci = bootstrap_ci(values, n_resamples=2000, seed=seed)
            row[key] = {"mean": ci.mean, "low": ci.low, "high": ci.high}
        rows.append(row)
    info = {"sessions": log.n_sessions, "clicks": log.n_clicks, "queries": test.n_queries}
    return rows, info


# ---------------------------------------------------------------------------------------------- (b)
def training_study(name, train, valid, test, produce, args, seed):
    """NDCG@10 on test labels of rankers trained on raw / IPS-weighted clicks, and the skyline."""
    import metrics
    from ltr.clicks import click_training_set, simulate_clicks
    from ltr.clicks.propensities.interventions import (
        estimate_from_randomized,
        fit_power_law,
        propensities_from_curve,
    )

    max_label = float(max(train.labels.max(), test.labels.max()))
    log = simulate_clicks(train.labels, train.query_offsets, produce(train), eta=args.eta, eps=args.eps,
                          max_label=max_label, top_k=10, sessions_per_query=args.train_sessions,
                          randomize_fraction=args.randomize_fraction, seed=1000 + seed)
    est = estimate_from_randomized(log, 10)
    # The power law fitted to the randomized estimate: a raw ratio from a few hundred sessions can
    # be near 0 at deep positions, and its inverse would dominate the loss.
    est_prop = propensities_from_curve(log, est.curve(10, smooth=True))
    raw, position = click_training_set(train, log, weighting="none")
    ips_true, _ = click_training_set(train, log, weighting="ips")
    ips_est, _ = click_training_set(train, log, weighting="ips", propensity=est_prop)

    def ndcg(scores):
        ev = metrics.evaluate(scores, test.labels, test.query_offsets, ["ndcg@10"])
        return ev.per_query[ev.names["ndcg@10"]]

    out = {"production ranker (logger)": ndcg(produce(test))}
    e = args.epochs
    out["LambdaRank, raw clicks"] = ndcg(neural_scores(raw, valid, test, "lambdarank", seed, e))
    out["LambdaRank, IPS (true propensity)"] = ndcg(neural_scores(ips_true, valid, test, "lambdarank", seed, e))
    out["LambdaRank, IPS (estimated propensity)"] = ndcg(neural_scores(ips_est, valid, test, "lambdarank", seed, e))
    out["RankNet, raw clicks"] = ndcg(neural_scores(raw, valid, test, "ranknet", seed, e))
    out["RankNet, IPS (true propensity)"] = ndcg(neural_scores(ips_true, valid, test, "ranknet", seed, e))
    out["LightGBM, raw clicks"] = ndcg(lightgbm_scores(raw, valid, test, seed=seed))
    out["LightGBM, raw clicks + position"] = ndcg(lightgbm_scores(raw, valid, test, position=position, seed=seed))
    out["LambdaRank, true labels (skyline)"] = ndcg(neural_scores(train, valid, test, "lambdarank", seed, e))
    info = {"sessions": log.n_sessions, "clicks": log.n_clicks, "train_lists": raw.n_queries,
            "eta_fit": fit_power_law(est),
            "propensity_estimate": est.theta.tolist()}
    return out, info


# ---------------------------------------------------------------------------------------------- report
def eval_table(rows):
    from ltr.study import format_interval, markdown_table

    cols = ["naive", "IPS", "IPS clip 0.1", "SNIPS", "true click-DCG", "true SNIPS target", "NDCG@10 (labels)"]
    cells = [[r["data"], r["ranker"]] + [format_interval(r[c]["mean"], r[c]["low"], r[c]["high"]) for c in cols]
             for r in rows]
    return markdown_table(["data", "ranker"] + cols, cells)


def train_table(results):
    from ltr.study import format_interval, markdown_table
    from metrics.stats import t_interval

    cells = []
    summary = {}
    for name, per_method in results.items():
        for method, per_seed in per_method.items():
            means = np.array([np.nanmean(v) for v in per_seed])
            ci = t_interval(means)
            summary.setdefault(name, {})[method] = {"mean": ci.mean, "low": ci.low, "high": ci.high, "seeds": means.tolist()}
            cells.append([name, method, format_interval(ci.mean, ci.low, ci.high), ", ".join(f"{m:.4f}" for m in means)])
    header = ["data", "method", "NDCG@10 on test labels (mean over seeds, 95% t-interval)", "per seed"]
    return markdown_table(header, cells), summary


PAIRS = (
    ("LambdaRank, IPS (true propensity)", "LambdaRank, raw clicks"),
    ("LambdaRank, IPS (estimated propensity)", "LambdaRank, raw clicks"),
    ("RankNet, IPS (true propensity)", "RankNet, raw clicks"),
    ("LightGBM, raw clicks + position", "LightGBM, raw clicks"),
)


def paired_table(results):
    """Debiased minus raw: per-seed differences (t-interval) and a paired bootstrap over test queries
    of the seed-averaged per-query NDCG@10."""
    from ltr.study import format_interval, markdown_table
    from metrics.stats import paired_bootstrap_test, t_interval

    cells = []
    out = {}
    for name, per_method in results.items():
        for a, b in PAIRS:
            if a not in per_method or b not in per_method:
                continue
            diffs = np.array([np.nanmean(x) - np.nanmean(y) for x, y in zip(per_method[a], per_method[b])])
            ci = t_interval(diffs)
            qa = np.nanmean(np.vstack(per_method[a]), axis=0)
            qb = np.nanmean(np.vstack(per_method[b]), axis=0)
            test = paired_bootstrap_test(qa, qb, n_resamples=5000, seed=0)
            out.setdefault(name, {})[f"{a} - {b}"] = {"mean": ci.mean, "low": ci.low, "high": ci.high,
                                                     "query_diff": test.mean_difference, "p": test.p_value}
            cells.append([name, f"{a} - {b.split(', ', 1)[1]}", format_interval(ci.mean, ci.low, ci.high, "+.4f"),
                          f"{test.mean_difference:+.4f}, p = {test.p_value:.4f}"])
    header = ["data", "debiased - raw", "mean difference over seeds [95% t-interval]",
              "paired bootstrap over queries: difference, p"]
    return markdown_table(header, cells), out


def plot(eval_rows, train_summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ltr.base.io_utils import atomic_path

    names = sorted({r["data"] for r in eval_rows}, key=lambda n: n != "synthetic")
    fig, axes = plt.subplots(2, len(names), figsize=(7 * len(names), 9), squeeze=False)
    for j, name in enumerate(names):
        ax = axes[0, j]
        rows = [r for r in eval_rows if r["data"] == name]
        keys = ["naive", "IPS", "true click-DCG"]
        width = 0.8 / len(keys)
        for i, key in enumerate(keys):
            m = np.array([r[key]["mean"] for r in rows])
            err = np.array([[r[key]["mean"] - r[key]["low"] for r in rows], [r[key]["high"] - r[key]["mean"] for r in rows]])
            ax.bar(np.arange(len(rows)) + (i - 1) * width, m, width, yerr=err, capsize=3, label=key)
        ax.set_xticks(np.arange(len(rows)))
        ax.set_xticklabels([r["ranker"].replace(" (", "\n(") for r in rows], fontsize=8)
        ax.set_ylabel("click-DCG@10 per session")
        ax.set_title(f"{name}: judging rankers on the production ranker's clicks")
        ax.legend(fontsize=8)
        ax = axes[1, j]
        per = train_summary.get(name, {})
        methods = list(per)
        m = np.array([per[k]["mean"] for k in methods])
        err = np.array([[per[k]["mean"] - per[k]["low"] for k in methods], [per[k]["high"] - per[k]["mean"] for k in methods]])
        err = np.nan_to_num(err)
        ax.barh(np.arange(len(methods)), m, xerr=err, capsize=3, color="tab:gray")
        ax.set_yticks(np.arange(len(methods)))
        ax.set_yticklabels(methods, fontsize=8)
        ax.invert_yaxis()
        lo = np.nanmin(m - err[0]) if len(m) else 0
        ax.set_xlim(max(0.0, lo - 0.05), min(1.0, np.nanmax(m + err[1]) + 0.02) if len(m) else 1)
        ax.set_xlabel("NDCG@10 on test labels (95% t-interval over seeds)")
        ax.set_title(f"{name}: training on clicks")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default="runs/clicks_position_bias", help="output folder")
    p.add_argument("--data", default="synthetic,mq2008", help="comma-separated: synthetic, mq2008")
    p.add_argument("--seeds", type=int, default=3, help="seeds for the training study")
    p.add_argument("--eta", type=float, default=1.0, help="position bias theta_r = 1/r^eta")
    p.add_argument("--eps", type=float, default=0.05, help="click probability of an examined irrelevant item")
    p.add_argument("--production-share", type=float, default=0.01, help="share of labelled training queries the production ranker was fitted on")
    p.add_argument("--eval-sessions", type=int, default=50, help="sessions per test query for (a)")
    p.add_argument("--train-sessions", type=int, default=30, help="sessions per training query for (b)")
    p.add_argument("--randomize-fraction", type=float, default=0.1, help="share of randomized training sessions (propensity estimate)")
    p.add_argument("--epochs", type=int, default=15, help="maximum epochs of the neural rankers")
    p.add_argument("--quick", action="store_true", help="smoke run: synthetic only, 1 seed, 10 training sessions per query, 5 epochs")
    args = p.parse_args(argv)
    if args.quick:
        args.data, args.seeds, args.train_sessions, args.epochs, args.eval_sessions = "synthetic", 1, 10, 5, 20

    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    t0 = time.time()
    out = Path(args.out)
    eval_rows, eval_info, train_results, train_info = [], {}, {}, {}
    for name in [n.strip() for n in args.data.split(",") if n.strip()]:
        for seed in range(args.seeds):
            parts = load_data(name, seed=0)
            if parts is None:
                print(f"{name}: data not found, skipped", file=sys.stderr)
                break
            train, valid, test = parts
            produce = production_ranker(train, args.production_share, seed=seed)
            if seed == 0:
                rows, info = evaluation_study(name, train, valid, test, produce, args, seed)
                eval_rows += rows
                eval_info[name] = info
                print(f"[{time.time() - t0:6.1f}s] {name}: evaluation study done", file=sys.stderr)
            per_method, info = training_study(name, train, valid, test, produce, args, seed)
            for method, values in per_method.items():
                train_results.setdefault(name, {}).setdefault(method, []).append(values)
            train_info.setdefault(name, []).append(info)
            print(f"[{time.time() - t0:6.1f}s] {name}: training study seed {seed} done", file=sys.stderr)

    table_a = eval_table(eval_rows)
    table_b, train_summary = train_table(train_results)
    table_c, paired = paired_table(train_results)
    text = (
        f"# Position bias: naive vs IPS (eta={args.eta}, eps={args.eps})\n\n"
        f"Command: `.venv/bin/python experiments/clicks_position_bias.py {' '.join(argv or sys.argv[1:])}`\n\n"
        "## (a) Judging rankers on the production ranker's clicks (whole lists shown; 95% bootstrap over queries)\n\n"
        f"{table_a}\n\n"
        "IPS targets the true click-DCG (expected clicks x discount); SNIPS the normalised target.\n\n"
        "## (b) Training on clicks (top 10 shown), judged on test labels\n\n"
        f"{table_b}\n\n"
        "Debiased minus raw clicks (same seeds, same clicks):\n\n"
        f"{table_c}\n\n"
        f"Runtime: {time.time() - t0:.0f} s.\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.md", text)
    atomic_write_json(out / "results.json", {"args": vars(args), "evaluation": eval_rows, "evaluation_info": eval_info,
                                             "training": train_summary, "paired": paired, "training_info": train_info})
    plot(eval_rows, train_summary, out / "clicks_position_bias.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
