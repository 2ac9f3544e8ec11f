"""Regression EM's propensities by relevance model, on the logs of experiments/unbiased_ltr_study.py.

The same data, production ranker, click model and seeds as that study (its ``run_cell``): for each
seed, ``make_synthetic_splits(1000, 40, ...)``, the ridge logger of 10 training queries, PBM clicks
(theta_r = 1/r^eta, eps = 0.1) on the top 10 of every training query. Only the propensity estimate
is run (no ranker is trained): regression EM on the log's (item, position) observations with each
relevance model of ``--settings``, and its relative error ``|theta_hat_r / theta_r - 1|`` at
positions 1..10 against the simulator's truth.

A setting is ``logistic`` or ``gbdt:ROUNDS`` (LightGBM cross-entropy, ROUNDS trees per M-step),
optionally ``@ITERATIONS`` (EM iterations, default 200, the study's). ``per-item`` is not offered: one
ranker shows each item at one position, and per-item EM cannot separate examination from relevance.

    python experiments/rem_relevance_study.py --out runs/rem_relevance --sessions 1000000 \\
        --settings logistic,gbdt:50,gbdt:200

Writes ``results.json`` and ``results.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from unbiased_ltr_study import production_ranker  # noqa: E402  (sets one BLAS thread before numpy work)


def parse_setting(text: str) -> tuple[str, int, int]:
    """``logistic`` / ``gbdt:ROUNDS``, optionally ``@ITERATIONS`` -> (relevance, gbdt_rounds, iterations)."""
    name, _, iters = text.partition("@")
    relevance, _, rounds = name.partition(":")
    return relevance, int(rounds or 50), int(iters or 200)


def estimate(log, train, setting: str, seed: int, theta) -> dict:
    from ltr.clicks.propensities.regression_em import observations_from_log, regression_em

    relevance, rounds, iterations = parse_setting(setting)
    t0 = time.time()
    res = regression_em(observations_from_log(log), relevance=relevance, features=train.features,
                        iterations=iterations, seed=seed, gbdt_rounds=rounds)
    err = np.abs(res.theta[:10] / theta - 1)
    return {"setting": setting, "seed": seed, "sessions": log.n_sessions, "theta": res.theta[:10].tolist(),
            "rel_error": err.tolist(), "max_error": float(err.max()), "iterations": res.iterations,
            "seconds": round(time.time() - t0, 1)}


def markdown(rows) -> str:
    from ltr.study.report_table import markdown_table

    out = []
    for n in sorted({r["sessions"] for r in rows}):
        for setting in dict.fromkeys(r["setting"] for r in rows):
            group = [r for r in rows if r["setting"] == setting and r["sessions"] == n]
            if not group:
                continue
            mean_err = np.mean([r["rel_error"] for r in group], axis=0)
            per_seed = [r["max_error"] for r in group]
            out.append([f"{n:,}", setting, " / ".join(f"{e:.3f}" for e in per_seed), f"{max(per_seed):.3f}",
                        f"{mean_err.max():.3f}", f"{np.mean([r['rel_error'] for r in group]):.3f}",
                        "/".join(str(r["iterations"]) for r in group), f"{np.mean([r['seconds'] for r in group]):.1f}"])
    head = ["sessions", "relevance", "max error per seed", "worst seed", "max of mean (1..10)", "mean (1..10)",
            "EM iterations", "s per fit"]
    return markdown_table(head, out) + "\n"


def main(argv=None) -> int:
    from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
    from ltr.data import make_synthetic_splits
    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--sessions", default="1000000")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--settings", default="logistic,gbdt:50")
    p.add_argument("--eta", type=float, default=1.0)
    p.add_argument("--eps", type=float, default=0.1)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    theta = pbm_examination(10, args.eta)
    rows = []
    for seed in range(args.seeds):
        train, _, _ = make_synthetic_splits(1000, 40, mean_list_length=30, max_list_length=120, empty_query_share=0.0,
                                            valid_share=0.1, test_share=0.2, seed=seed)
        logger = production_ranker(train, 10, seed)(train)
        for n in (int(float(s)) for s in args.sessions.split(",")):
            spq = max(1, int(round(n / train.n_queries)))
            log = simulate_clicks(train.labels, train.query_offsets, logger, model="pbm", eta=args.eta, eps=args.eps,
                                  max_label=4, top_k=10, sessions_per_query=spq, seed=seed)
            for setting in args.settings.split(","):
                row = estimate(log, train, setting, seed, theta)
                rows.append(row)
                print(f"seed {seed} {log.n_sessions} {setting}: max error {row['max_error']:.3f} "
                      f"({row['iterations']} iterations, {row['seconds']} s)", flush=True)
                atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows})
    text = markdown(rows)
    atomic_write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
