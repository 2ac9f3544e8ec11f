"""Recall of candidate sources at an equal latency budget, and the Pareto front of recall against cost.

Synthetic, seeded set-up (nothing is downloaded):

- a catalogue of items with Zipf-like popularity and a latent embedding; each query has a latent
  interest vector, and its relevant items are the top ``n_relevant`` by a true affinity
  ``<u_q, v_i> + a * log(popularity_i)``;
- three candidate sources, each a ranked list of candidates per query with a latency model
  ``fixed + per_candidate * depth`` (milliseconds):
  ``popular``  the global most-popular list (the same for every query): nearly free;
  ``ann``      an approximate nearest-neighbour index: the affinity through a quantised, noisy copy
               of the item embeddings; a few ms;
  ``neural``   a slow neural retriever: the affinity with little noise, expensive per candidate.

The script prints, for a range of budgets, each source's best recall within the budget and the
winner (it changes with the budget), the Pareto front over all (cost, recall) points, and saves a
PNG plot (written atomically).

    .venv/bin/python experiments/recall_budget_pareto.py --out runs/recall_budget_pareto.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ltr.base.io_utils import atomic_path
from metrics.retrieval import (
    best_source_at_budget,
    candidate_recall,
    linear_cost,
    pareto_front,
)

# (fixed ms, ms per candidate, embedding noise) of each source; the popular source ignores the query.
SOURCES = {
    "popular": (0.05, 0.00002, None),
    "ann": (1.5, 0.0015, 0.9),
    "neural": (12.0, 0.006, 0.25),
}


def simulate(n_items: int = 20_000, n_queries: int = 400, dim: int = 16, n_relevant: int = 20,
             max_depth: int = 2000, seed: int = 0):
    """Return ``(depths, curves)``: curves[name] = (cost [D], recall [D]) over the depth grid."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.9
    rng.shuffle(popularity)
    log_pop = np.log(popularity)
    items = rng.normal(size=(n_items, dim)) / np.sqrt(dim)
    users = rng.normal(size=(n_queries, dim)) * 2.0
    pop_weight = 0.15
    affinity = users @ items.T + pop_weight * log_pop
    relevant = np.argpartition(-affinity, n_relevant, axis=1)[:, :n_relevant]

    depths = np.unique(np.geomspace(1, max_depth, 40).astype(int))
    curves = {}
    for name, (fixed, per, noise) in SOURCES.items():
        if noise is None:
            ranked = np.tile(np.argsort(-popularity, kind="stable")[:max_depth], (n_queries, 1))
        else:
            noisy_items = items + rng.normal(scale=noise / np.sqrt(dim), size=items.shape)
            score = users @ noisy_items.T + pop_weight * log_pop
            top = np.argpartition(-score, max_depth, axis=1)[:, :max_depth]
            order = np.argsort(-np.take_along_axis(score, top, axis=1), axis=1, kind="stable")
            ranked = np.take_along_axis(top, order, axis=1)
        recall = candidate_recall(ranked, relevant, depths)
        curves[name] = (linear_cost(depths, fixed, per), recall)
    return depths, curves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/recall_budget_pareto.png", help="PNG plot path (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument("--queries", type=int, default=400, help="number of synthetic queries (default: %(default)s)")
    args = parser.parse_args(argv)

    depths, curves = simulate(n_queries=args.queries, seed=args.seed)
    budgets = np.array([0.02, 0.1, 1.0, 1.6, 2.0, 3.0, 4.5, 12.5, 15.0, 25.0])
    winners, table = best_source_at_budget(curves, budgets)

    names = list(curves)
    print(f"recall@budget (mean over {args.queries} queries, 20 relevant items each; seed {args.seed})")
    print("| budget (ms) | " + " | ".join(names) + " | winner |")
    print("|---:|" + "---:|" * len(names) + "---|")
    for b, budget in enumerate(budgets):
        cells = " | ".join(f"{table[s, b]:.3f}" for s in range(len(names)))
        print(f"| {budget:g} | {cells} | {winners[b]} |")
    changes = [winners[0]] + [w for prev, w in zip(winners, winners[1:]) if w != prev]
    print("winner as the budget grows: " + " -> ".join(changes))

    all_cost = np.concatenate([curves[n][0] for n in names])
    all_recall = np.concatenate([curves[n][1] for n in names])
    all_name = np.concatenate([[n] * len(depths) for n in names])
    all_depth = np.concatenate([depths] * len(names))
    front = pareto_front(all_cost, all_recall)
    print(f"\nPareto front: {len(front)} of {len(all_cost)} (cost, recall) points; by source:")
    print("| source | depths | cost (ms) | recall |")
    print("|---|---|---|---|")
    for n in names:
        seg = front[all_name[front] == n]
        if seg.size:
            print(f"| {n} | {all_depth[seg[0]]}..{all_depth[seg[-1]]} | {all_cost[seg[0]]:.3f}..{all_cost[seg[-1]]:.3f} "
                  f"| {all_recall[seg[0]]:.3f}..{all_recall[seg[-1]]:.3f} |")
        else:
            print(f"| {n} | (dominated everywhere) | | |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for n in names:
        ax.plot(curves[n][0], curves[n][1], marker=".", label=n)
    ax.step(all_cost[front], all_recall[front], where="post", color="black", lw=1, ls="--", label="Pareto front")
    ax.set_xscale("log")
    ax.set_xlabel("latency budget (ms, log scale)")
    ax.set_ylabel("recall of the relevant items")
    ax.set_title("Candidate sources: recall against cost")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(args.out)
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    print(f"\nplot written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
