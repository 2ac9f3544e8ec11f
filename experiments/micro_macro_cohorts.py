"""Micro versus macro averaging by user cohort: hurting newcomers barely moves micro, visibly moves macro.

Synthetic users from :func:`ltr.data.synthetic.make_mslr_like` (heavy-tailed activity: about 60% of
users are newcomers with one query, and they hold about 14% of the queries). A ranker scores each
item as ``label + noise``; the "after" ranker is the same except that newcomers' queries get much
noisier scores (a cold-start regression). NDCG@10 per query comes from ``metrics.evaluate``; the
averages and their bootstrap intervals from :func:`metrics.averaging.averages_by_cohort` (micro:
mean over queries, resampling queries; macro: mean of per-user means, resampling users).

    .venv/bin/python experiments/micro_macro_cohorts.py [--queries 3000] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

import metrics
from ltr.data import make_mslr_like
from ltr.study import format_interval, markdown_table
from metrics.averaging import activity_cohorts, averages_by_cohort


def per_query_ndcg(ds, noise_per_query: np.ndarray, seed: int) -> tuple[np.ndarray, str]:
    """NDCG@10 per query of the ranker ``label + noise`` (noise scale given per query)."""
    rng = np.random.default_rng(seed)
    scale = np.repeat(noise_per_query, ds.query_lengths)
    scores = ds.labels + scale * rng.standard_normal(ds.n_items)
    res = metrics.evaluate(scores, ds.labels, ds.query_offsets, ["ndcg@10"])
    name = res.names["ndcg@10"]
    return res.per_query[name], name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=3000, help="synthetic queries (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the rankers' noise (default: %(default)s)")
    parser.add_argument("--noise", type=float, default=1.0, help="score noise of the good ranker (default: %(default)s)")
    parser.add_argument("--newcomer-noise", type=float, default=4.0,
                        help="score noise on newcomers' queries after the regression (default: %(default)s)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default: %(default)s)")
    args = parser.parse_args(argv)

    ds = make_mslr_like(args.queries, 20, mean_list_length=30, seed=args.seed)
    cohorts = activity_cohorts(ds.user_ids)
    newcomer = cohorts == "newcomer"
    before, name = per_query_ndcg(ds, np.full(ds.n_queries, args.noise), args.seed + 1)
    # the same draws, so the only change is the newcomers' noise scale
    after, _ = per_query_ndcg(ds, np.where(newcomer, args.newcomer_noise, args.noise), args.seed + 1)

    users, counts = np.unique(ds.user_ids, return_counts=True)
    print(f"{ds.n_queries} queries from {len(users)} users; newcomers (1 query): "
          f"{np.mean(counts == 1):.0%} of users, {np.mean(newcomer):.0%} of queries")
    print(f"metric: {name}; queries without a relevant item are skipped\n")

    kw = dict(n_resamples=args.resamples, seed=args.seed)
    tb = averages_by_cohort(before, ds.user_ids, cohorts, **kw)
    ta = averages_by_cohort(after, ds.user_ids, cohorts, **kw)
    rows = []
    for cohort in tb:
        for kind in ("micro", "macro"):
            b, a = getattr(tb[cohort], kind), getattr(ta[cohort], kind)
            rows.append([f"{cohort} ({tb[cohort].n_users} users, {tb[cohort].n_queries} queries)", kind,
                         format_interval(b.mean, b.low, b.high), format_interval(a.mean, a.low, a.high),
                         f"{a.mean - b.mean:+.4f}"])
    print(markdown_table(["cohort", "average", "before [95% CI]", "after [95% CI]", "change"], rows, align="llllr"))
    d_micro = ta["all"].micro.mean - tb["all"].micro.mean
    d_macro = ta["all"].macro.mean - tb["all"].macro.mean
    d_new = ta["newcomer"].micro.mean - tb["newcomer"].micro.mean
    print(f"\nnewcomers lost {d_new:+.4f}; over all users the micro average moved {d_micro:+.4f} and the "
          f"macro average {d_macro:+.4f} ({d_macro / d_micro:.1f}x as much).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
