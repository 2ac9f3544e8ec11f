"""Print every table of the two seed chapters (metrics; retrieval and ranking metrics) from the package.

    .venv/bin/python experiments/seed_tables.py

Every number is computed by ``metrics`` (nothing is typed in): the three arrangements of one
output, linear vs exponential gain, the log discount, the four swaps (NDCG before and after each
swap, and the swap delta from ``metrics.swap`` when it is available), the MRR and NDCG@3 examples,
and the recall@300 / precision@5 examples.
"""

from __future__ import annotations

import numpy as np

import metrics


def ranked(labels):
    """Scores that rank the given labels in the given order."""
    labels = np.asarray(labels, dtype=float)
    return np.arange(labels.size, 0, -1, dtype=float), labels


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def f4(x):
    return f"{x:.4f}"


def three_arrangements():
    rows = []
    for slate in ("1110000000", "0001110000", "0000000111"):
        s, y = ranked([int(c) for c in slate])
        r = metrics.evaluate(s, y, [0, 10], ["p@10", "recall@10", "rr", "ap", "ndcg@10"], gain="linear")
        rows.append([slate] + [f4(r[m]) for m in ("p@10", "recall@10", "rr", "ap", "ndcg@10")])
    table("One output, three arrangements (binary labels, 3 relevant of 10)",
          ["ranked labels", "P@10", "R@10", "RR", "AP", "NDCG@10"], rows)


def gains():
    rows, vals = [], []
    for labels in ((3, 0, 0, 1, 1), (1, 1, 0, 0, 3)):
        s, y = ranked(labels)
        lin = metrics.ndcg(s, y, k=5, gain="linear")[0]
        exp = metrics.ndcg(s, y, k=5, gain="exp2")[0]
        vals.append((lin, exp))
        rows.append([str(list(labels)), f4(lin), f4(exp)])
    rows.append(["gap", f4(vals[0][0] - vals[1][0]), f4(vals[0][1] - vals[1][1])])
    table("Gain: linear vs exponential (NDCG@5)", ["ranked labels", "linear rel", "2^rel - 1"], rows)


def discounts():
    ranks = np.array([1, 2, 3, 5, 10])
    d = metrics.discount_values(ranks)
    table("The discount 1/log2(rank + 1)", ["rank", "discount"], [[int(r), f"{v:.2f}"] for r, v in zip(ranks, d)])


def swaps():
    s = np.arange(10, 0, -1, dtype=float)
    swap_fn = getattr(metrics, "ndcg_swap_deltas", None)
    rows = []
    deltas = []
    for r in (1, 2, 3, 9):
        before = np.eye(10)[r - 1]
        after = np.eye(10)[r]
        nb, na = metrics.ndcg(s, before, k=10)[0], metrics.ndcg(s, after, k=10)[0]
        row = [f"{r} <-> {r + 1}", f4(nb), f4(na), f4(nb - na)]
        if swap_fn is not None:
            row.append(f4(float(swap_fn(s, before, k=10)[r - 1, r])))
        deltas.append(nb - na)
        rows.append(row)
    header = ["swap", "NDCG before", "NDCG after", "delta"] + (["metrics.swap delta"] if swap_fn else [])
    table("The number ranking losses grow out of: one relevant item moved down one place", header, rows)
    print(f"ratio of the top swap's delta to the 9<->10 delta: {deltas[0] / deltas[-1]:.1f}")


def mrr_example():
    s = np.tile([3.0, 2.0, 1.0], 3)
    y = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0], dtype=float)
    rr = metrics.reciprocal_rank(s, y, [0, 3, 6, 9], empty="zero")
    table("MRR: first hits at ranks 1 and 3, and one miss", ["query", "RR"],
          [[f"q{i + 1}", f4(v)] for i, v in enumerate(rr)] + [["MRR", f4(rr.mean())]])


def ndcg3_example():
    s, y = ranked([3, 0, 2])
    g = metrics.gain_values(y)
    dcg = metrics.dcg(s, y, k=3)[0]
    idcg = float(metrics.ideal_dcg(g, k=3))
    table("NDCG@3 of grades [3, 0, 2] (gain 2^rel - 1, log2 discount)", ["quantity", "value"],
          [["gains", str(g.tolist())], ["DCG@3", f4(dcg)], ["ideal DCG@3", f4(idcg)],
           ["NDCG@3", f4(metrics.ndcg(s, y, k=3)[0])]])


def recall_precision():
    y = np.zeros(300)
    y[[0, 10, 50, 99, 150, 200, 299]] = 1
    s = np.arange(300, 0, -1, dtype=float)
    qrels = np.r_[np.ones(10), np.zeros(5)]
    rec = metrics.recall(s, y, k=300, qrels_labels=qrels, qrels_offsets=[0, 15])[0]
    prec = metrics.precision(np.arange(5, 0, -1.0), [1, 0, 1, 1, 0], k=5)[0]
    table("Recall and precision", ["example", "value"],
          [["recall@300: 7 of 10 relevant in a shortlist of 300", f4(rec)],
           ["precision@5: 3 relevant among 5 displayed", f4(prec)]])


def main() -> None:
    three_arrangements()
    gains()
    discounts()
    swaps()
    mrr_example()
    ndcg3_example()
    recall_precision()


if __name__ == "__main__":
    main()
