"""Team-draft against probabilistic interleaving: agreement with offline NDCG and sessions needed.

Rankers of graded quality on the test split of a data set: ranker sigma scores every item by its label
plus N(0, sigma^2) noise (one draw per ranker, seed fixed), so that a smaller sigma means a higher
NDCG@10 on the labels. Every pair of rankers is interleaved by team draft and by probabilistic
interleaving (softmax rankers, tau = 3) on simulated users (``--models``), ``--sessions-per-query``
sessions on every test query, and :func:`ltr.clicks.interleaving.compare_interleaving` reports per pair

* whether each method prefers the ranker with the higher NDCG@10 (agreement), and its p-value;
* the sessions needed to detect the measured preference at 5% (two-sided) with 80% power, from the
  per-session outcomes (sign of the credit difference for team draft, the marginalised expected
  outcome for probabilistic interleaving): ``((z_0.975 + z_0.8) sd / mean)^2``.

    python experiments/interleaving_study.py --out runs/interleaving_study

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

BINS = [(0.0, 0.01), (0.01, 0.02), (0.02, 0.05), (0.05, 0.1), (0.1, 1.0)]


def markdown(rows, args) -> str:
    from ltr.study.report_table import markdown_table

    lines = [f"{args.queries} synthetic test queries, rankers label + N(0, σ²) for σ in {args.sigmas}; "
             f"{args.sessions_per_query} sessions per query and pair; probabilistic interleaving with τ = 3", ""]
    per_model = []
    for model in args.models.split(","):
        sub = [r for r in rows if r["model"] == model]
        per_model.append([model, str(len(sub)), f"{sum(r['td_agrees'] for r in sub)}/{len(sub)}",
                          f"{sum(r['pi_agrees'] for r in sub)}/{len(sub)}",
                          f"{sum(r['td_p'] < 0.05 for r in sub)}/{len(sub)}", f"{sum(r['pi_p'] < 0.05 for r in sub)}/{len(sub)}"])
    lines.append(markdown_table(["click model", "pairs", "team draft agrees", "probabilistic agrees",
                                 "team draft p < 0.05", "probabilistic p < 0.05"], per_model))
    lines += ["", "Sessions needed to detect the preference (median over the pairs in each band of |ΔNDCG@10|):", ""]
    table = []
    for model in args.models.split(","):
        for lo, hi in BINS:
            sub = [r for r in rows if r["model"] == model and lo <= abs(r["delta_ndcg"]) < hi]
            if sub:
                table.append([model, f"[{lo}, {hi})", str(len(sub)), f"{np.median([r['td_sessions'] for r in sub]):,.0f}",
                              f"{np.median([r['pi_sessions'] for r in sub]):,.0f}",
                              f"{np.median([r['pi_sessions'] / r['td_sessions'] for r in sub]):.2f}"])
    lines.append(markdown_table(["click model", "|ΔNDCG@10|", "pairs", "team draft", "probabilistic",
                                 "probabilistic / team draft"], table))
    lines += ["", "Every pair:", ""]
    lines.append(markdown_table(
        ["click model", "A", "B", "ΔNDCG@10", "TD pref. A", "TD sessions", "PI pref. A", "PI sessions"],
        [[r["model"], r["a"], r["b"], f"{r['delta_ndcg']:+.4f}", f"{r['td_preference']:.4f}", f"{r['td_sessions']:,.0f}",
          f"{r['pi_preference']:.4f}", f"{r['pi_sessions']:,.0f}"] for r in rows]))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from ltr.clicks.interleaving import compare_interleaving
    from ltr.data import make_synthetic_splits
    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--queries", type=int, default=1000, help="synthetic queries (the test split is 20% of them)")
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.6, 0.8, 1.0, 1.3, 1.7, 2.5])
    p.add_argument("--models", default="pbm,cascade")
    p.add_argument("--sessions-per-query", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    _, _, test = make_synthetic_splits(args.queries, 40, mean_list_length=30, max_list_length=120,
                                       empty_query_share=0.0, valid_share=0.1, test_share=0.2, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    rankers = {f"σ={s}": test.labels + rng.normal(0.0, s, test.n_items) for s in args.sigmas}
    rows, t0 = [], time.time()
    for model in args.models.split(","):
        for r in compare_interleaving(test.labels, test.query_offsets, rankers, sessions_per_query=args.sessions_per_query,
                                      seed=args.seed, model=model, max_label=4.0):
            rows.append({"model": model, **r})
            print(f"{model} {r['a']} vs {r['b']}: ΔNDCG {r['delta_ndcg']:+.4f}, TD {r['td_preference']:.4f} "
                  f"({r['td_sessions']:,.0f} sessions), PI {r['pi_preference']:.4f} ({r['pi_sessions']:,.0f})", flush=True)
    atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows, "seconds": round(time.time() - t0, 1)})
    text = markdown(rows, args)
    atomic_write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
