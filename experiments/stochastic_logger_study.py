"""A stochastic (Plackett-Luce) logger on held-out data of two generators: how much of the naive -> full-information
gap the estimators close, the best one picked on a labelled validation set.

Two generators, so that the result is not one of data the estimators were tuned on:

* ``synth``: :func:`ltr.data.synthetic.make_mslr_like` (``ltr synth``'s recipe), 40 features, lists of 30 items on
  average (heavy-tailed);
* ``web``: :func:`web_like` below, a generator of this study's own: 24 features of three kinds (dense scores, binary
  flags whose rates follow relevance, pure noise), lists of 20 to 120 items (uniform), relevance a nonlinear
  function of them (a saturating score, an interaction of two flags, a query-level offset) cut into grades 0-4
  per query.

Each seed draws train (1,800) / valid (300) / test (600) queries of one generator (the scale of the issue that asked
for the study: 540,000 sessions a seed); the logger is a ridge regression on the labels of 10
training queries (the CLI's default logger), its scores standardised to a standard deviation of 1 and drawn by
Plackett-Luce at temperature ``--temperature`` (0.3) each session; the top 10 are shown to ``--sessions`` (300) PBM users
per training query (theta_r = 1/r, eps = 0.1). On the same log, LightGBM (the toolkit's defaults, early stopping on
the validation labels, patience 50):

    naive           lambdarank on the sessions with a click, clicks as labels
    policy-aware    one list per query of all its items, clicks over expected examinations (0 if never shown)
    doubly-robust   the same lists, labels R + (C - E R) / max(E, 0.01 S) with R a regression of the click
                    probability on the features (ltr.clicks.estimators.doubly_robust)
    pa+dr           the two boosters above together: the sum of their scores, each over its standard deviation on the
                    training items (an ensemble of estimators, a candidate like the others)
    full            lambdarank on the true labels of the training queries

"best" is the click estimator of highest validation NDCG@10 (labelled valid queries, as the issue's rule has it);
gap closed = (test NDCG@10 of best - naive) / (full - naive), on test queries no estimator saw.

    nice -n 10 python experiments/stochastic_logger_study.py --out runs/stochastic_logger        # 5 seeds each
    python experiments/stochastic_logger_study.py --out runs/small --seeds 3 --sessions 100 \
        --train-queries 300 --valid-queries 100 --test-queries 200                                # the small setting

Writes ``results.json`` (after every seed) and ``results.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the estimators trained on one list per query; "pa+dr" sums their scores
LIST_ESTIMATORS = ("policy-aware", "doubly-robust")
ESTIMATORS = ("naive", *LIST_ESTIMATORS, "pa+dr")
GENERATORS = ("synth", "web")


def web_like(n_queries: int, seed: int):
    """A labelled data set of this study's own (module docstring): ``RankingDataset`` with 24 float32 features,
    lists of 20..120 items, grades 0..4. Deterministic given ``seed``."""
    from ltr.data import RankingDataset

    rng = np.random.default_rng([seed, 47])
    lengths = rng.integers(20, 121, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    qidx = np.repeat(np.arange(n_queries), lengths)
    dense = rng.normal(size=(n, 8)) + rng.normal(0, 0.5, (n_queries, 8))[qidx]  # per-query shifts of the scores
    latent = np.tanh(dense[:, :4] @ np.array([0.9, -0.6, 0.5, 0.3])) + 0.4 * dense[:, 4] * (dense[:, 5] > 0)
    flags = (rng.random((n, 8)) < 1 / (1 + np.exp(-(latent[:, None] + rng.normal(0, 1.0, (n, 8)))))).astype(float)
    latent = latent + 0.8 * flags[:, 0] * flags[:, 1] + rng.normal(0, 0.5, n_queries)[qidx] + rng.normal(0, 0.35, n)
    noise = rng.normal(size=(n, 8))
    labels = np.zeros(n)
    for q in range(n_queries):  # grades by the query's own quantiles: most items irrelevant, a few perfect
        s = slice(offsets[q], offsets[q + 1])
        cut = np.quantile(latent[s], [0.55, 0.8, 0.92, 0.98])
        labels[s] = np.searchsorted(cut, latent[s], side="right")
    features = np.concatenate([dense, flags, noise], axis=1).astype(np.float32)
    return RankingDataset(features, labels, offsets, np.arange(n_queries))


def splits(generator: str, seed: int, n_train: int, n_valid: int, n_test: int):
    """``(train, valid, test)`` of one generator and seed (disjoint queries of one draw)."""
    from ltr.data.synthetic import make_mslr_like

    total = n_train + n_valid + n_test
    if generator == "web":
        ds = web_like(total, seed)
    else:
        ds = make_mslr_like(total, 40, mean_list_length=30, max_list_length=200, empty_query_share=0.0, seed=seed)
    order = np.random.default_rng([seed, 48]).permutation(total)
    cut = (order[:n_train], order[n_train:n_train + n_valid], order[n_train + n_valid:])
    return tuple(ds.subset(np.sort(part)) for part in cut)


def ndcg10(scores, ds) -> float:
    import metrics

    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, ["ndcg@10"])
    return float(ev.mean[ev.names["ndcg@10"]])


def run_seed(generator: str, seed: int, args) -> dict:
    """One generator and seed: the log, LightGBM on the labels and on the clicks by each estimator."""
    from ltr.clicks.engines.lightgbm import fit_lightgbm_clicks, fit_policy_aware_lightgbm
    from ltr.clicks.logs.stream import aggregate_from_log
    from ltr.clicks.simulate.click_models import simulate_clicks
    from ltr.clicks.simulate.logging_ranker import plackett_luce_ndcg, ridge_logger
    from ltr.gbdt.lightgbm import predict_booster, train_lightgbm

    train, valid, test = splits(generator, seed, args.train_queries, args.valid_queries, args.test_queries)
    scores = ridge_logger(train, 10, [seed, 2])(train)
    scores = scores / max(float(np.std(scores)), 1e-12)
    log = simulate_clicks(train.labels, train.query_offsets, scores, top_k=10, sessions_per_query=args.sessions,
                          seed=seed, logger_temperature=args.temperature)
    row = {"generator": generator, "seed": seed, "sessions": log.n_sessions,
           "logger_ndcg@10": plackett_luce_ndcg(scores, train, args.temperature, seed=[seed, 2])}
    common = dict(rounds=args.rounds, early_stopping_rounds=50, seed=seed)
    fits = {"full": train_lightgbm(train, valid, num_boost_round=args.rounds, early_stopping_rounds=50, seed=seed)[0],
            "naive": fit_lightgbm_clicks(train, valid, log, "naive", **common)[0]}
    agg = aggregate_from_log(log, train)
    for name in LIST_ESTIMATORS:
        fits[name] = fit_policy_aware_lightgbm(train, valid, agg, estimator=name, **common)[0]
    scores = {name: {part: predict_booster(booster, ds.features) for part, ds in (("valid", valid), ("test", test))}
              for name, booster in fits.items()}
    scale = {name: max(float(np.std(predict_booster(fits[name], train.features))), 1e-12)
             for name in LIST_ESTIMATORS}
    scores["pa+dr"] = {part: sum(scores[name][part] / scale[name] for name in scale) for part in ("valid", "test")}
    for name, by_part in scores.items():
        row[f"valid_{name}"] = ndcg10(by_part["valid"], valid)
        row[f"test_{name}"] = ndcg10(by_part["test"], test)
    best = max(ESTIMATORS, key=lambda name: row[f"valid_{name}"])
    row["best"] = best
    row["gap_closed"] = (row[f"test_{best}"] - row["test_naive"]) / (row["test_full"] - row["test_naive"])
    return row


def report(rows: list[dict]) -> str:
    """The markdown table: per generator and seed the test NDCG@10 of each, the one picked and the gap closed."""
    head = ["generator", "seed", "sessions", "logger", *ESTIMATORS, "full", "picked", "gap closed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([r["generator"], str(r["seed"]), f"{r['sessions']:,}", f"{r['logger_ndcg@10']:.4f}",
                                        *(f"{r['test_' + n]:.4f}" for n in (*ESTIMATORS, "full")),
                                        r["best"], f"{r['gap_closed']:.0%}"]) + " |")
    for g in sorted({r["generator"] for r in rows}):
        mine = [r for r in rows if r["generator"] == g]
        means = {n: np.mean([r[f"test_{n}"] for r in mine]) for n in (*ESTIMATORS, "full")}
        picked = np.mean([r[f"test_{r['best']}"] for r in mine])
        gap = (picked - means["naive"]) / (means["full"] - means["naive"])
        lines.append(f"| {g} | mean | {np.mean([r['sessions'] for r in mine]):,.0f} | "
                     f"{np.mean([r['logger_ndcg@10'] for r in mine]):.4f} | "
                     + " | ".join(f"{means[n]:.4f}" for n in (*ESTIMATORS, "full"))
                     + f" | (picked: {picked:.4f}) | {gap:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--generators", default=",".join(GENERATORS))
    p.add_argument("--sessions", type=int, default=300, help="sessions per training query")
    p.add_argument("--temperature", type=float, default=0.3)
    p.add_argument("--train-queries", type=int, default=1800)
    p.add_argument("--valid-queries", type=int, default=300)
    p.add_argument("--test-queries", type=int, default=600)
    p.add_argument("--rounds", type=int, default=1000)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for generator in args.generators.split(","):
        for seed in range(args.seeds):
            start = time.time()
            rows.append({**run_seed(generator, seed, args), "seconds": round(time.time() - start, 1)})
            (out / "results.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
            print(f"{generator} seed {seed}: picked {rows[-1]['best']}, gap closed {rows[-1]['gap_closed']:.0%} "
                  f"({rows[-1]['seconds']} s)", flush=True)
    (out / "results.md").write_text(report(rows))
    print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
