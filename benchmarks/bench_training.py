"""Seconds per epoch: the trainer (MLP 136-128-64-1 + LambdaRank) vs an allRank-style training loop.

Both run in this process, on one thread (``torch.set_num_threads(1)``), on the same synthetic
MSLR-like training queries (``ltr.data.synthetic.make_mslr_like``; 136 features, about 120 documents per
query), with the same MLP, the same initial weights, the same input normalisation (log1p then
standardised, inside the model) and Adam with the same learning rate.

- **ltr trainer**: ``ltr.train.trainer.Trainer`` with ``losses.LambdaRank`` (swap deltas from
  ``metrics.swap``), 64 queries a batch, length-bucketed batches (``--buckets``: the sampler sorts
  each bucket of that many shuffled queries by length; 64 = random batches, larger = less padding). Its seconds per epoch include the
  per-epoch validation (scoring + metrics), so they are an upper bound of the training time.
- **allRank-style loop**: the plain loop of allRank (allegro/allRank): 64 queries a batch in random
  order, each batch padded to its longest list (padding label -1), every padded slot scored, and the
  loss ``lambdaLoss(weighing_scheme="lambdaRank_scheme")`` over all [L, L] pairs of the slate. When
  allRank is installed (``pip install --no-deps allRank==1.4.3``; see pyproject.toml's ``bench``
  extra) its own function is used, loaded from its ``models/losses/lambdaLoss.py`` file alone (the
  package ``__init__`` imports torchvision and gcsfs); otherwise a re-implementation written from
  allRank's published formulas, labelled as such in the output (it agrees with allRank's to 1e-7
  relative on a padded float64 batch):

      G_i = (2^y_i - 1) / maxDCG,  D_r = log2(1 + r),  over pairs (i, j) in predicted-rank order with y_i > y_j:
      loss = - sum  |1/D_i - 1/D_j| * |G_i - G_j| * log2(clamp(sigmoid(s_i - s_j), eps))

Times are wall-clock and CPU time of this process (on a shared machine the CPU time is the fairer
measure: both methods run on one thread, and waiting for a core is not their cost).

After the same number of epochs both models are judged on a validation split by
``metrics.evaluate`` NDCG@10 (the toolkit's conventions; the stamped name is printed).

Run (full size: a few GB and ~10 CPU-minutes per allRank-style epoch; use --queries to shrink)::

    .venv/bin/python benchmarks/bench_training.py --queries 10000 --epochs 2
    .venv/bin/python benchmarks/bench_training.py --queries 1000 --epochs 3 --buckets default,256,128,64
"""

from __future__ import annotations

import os

# Idle OpenMP threads yield the core instead of spinning (a shared machine); set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from allrank_loader import load_allrank_lambdaloss  # noqa: E402  (benchmarks/ is sys.path[0])

import losses  # noqa: E402
import metrics  # noqa: E402
from ltr.data import make_batch  # noqa: E402
from ltr.train import (  # noqa: E402  # noqa: E402
    FeatureTransform,
    MLPScorer,
    TrainConfig,  # noqa: E402
    Trainer,
    predict_scores,
)

EPS = 1e-10
PAD = -1.0


def lambda_loss_lambdarank_scheme(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """Re-implementation of allRank's ``lambdaLoss(..., weighing_scheme="lambdaRank_scheme")``
    (k=None, sigma=1, reduction="sum", binary log), from its published formulas; ``y_true == -1``
    marks padding."""
    padded = y_true == PAD
    pred = y_pred.masked_fill(padded, float("-inf"))
    true = y_true.masked_fill(padded, float("-inf"))
    pred_sorted, order = pred.sort(dim=-1, descending=True)
    true_ideal, _ = true.sort(dim=-1, descending=True)
    true_by_pred = true.gather(1, order)
    diff = true_by_pred[:, :, None] - true_by_pred[:, None, :]
    pairs = torch.isfinite(diff) & (diff > 0)
    true_by_pred = true_by_pred.clamp(min=0.0)
    true_ideal = true_ideal.clamp(min=0.0)
    n = y_pred.shape[1]
    discount = torch.log2(1.0 + torch.arange(1, n + 1, dtype=y_pred.dtype, device=y_pred.device))[None, :]
    max_dcg = ((2.0 ** true_ideal - 1.0) / discount).sum(-1).clamp(min=EPS)
    gain = (2.0 ** true_by_pred - 1.0) / max_dcg[:, None]
    weight = (1.0 / discount[:, :, None] - 1.0 / discount[:, None, :]).abs() * (gain[:, :, None] - gain[:, None, :]).abs()
    s_diff = (pred_sorted[:, :, None] - pred_sorted[:, None, :]).clamp(min=-1e8, max=1e8)
    s_diff = torch.nan_to_num(s_diff, nan=0.0)
    prob = (torch.sigmoid(s_diff).clamp(min=EPS) ** weight).clamp(min=EPS)
    return -torch.log2(prob)[pairs].sum()


def allrank_loss():
    """allRank's own ``lambdaLoss`` (lambdaRank_scheme) when allRank is installed, else the labelled
    re-implementation above. Returns (function(y_pred, y_true), description)."""
    loss, where = load_allrank_lambdaloss()
    if loss is None:
        return lambda_loss_lambdarank_scheme, "re-implementation of allRank lambdaLoss(lambdaRank_scheme) (allrank not installed)"
    return (lambda p, t: loss(p, t, weighing_scheme="lambdaRank_scheme")), where


def allrank_style_epoch(model, optimizer, ds, loss_fn, seed: int, epoch: int, batch_size: int = 64) -> float:
    """One epoch of the plain loop: random batches of queries, padded to the longest list."""
    model.train()
    order = np.random.default_rng([seed, epoch]).permutation(ds.n_queries)
    total = 0.0
    for start in range(0, ds.n_queries, batch_size):
        batch = make_batch(ds, order[start : start + batch_size])
        y = batch.labels.masked_fill(~batch.mask, PAD)
        scores = model(batch.features)  # padded slots are scored too, as in allRank
        loss = loss_fn(scores, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
    return total


def make_model(train, seed):
    torch.manual_seed(seed)
    model = MLPScorer(train.n_features, hidden=(128, 64))
    return model.set_normalizer(FeatureTransform.fit(train.features, "log1p_standard"))


def ndcg10(model, ds):
    ev = metrics.evaluate(predict_scores(model, ds.features), ds.labels, ds.query_offsets, ["ndcg@10"])
    name = ev.names["ndcg@10"]
    return ev.mean[name], name


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="seconds per epoch: ltr trainer vs an allRank-style loop")
    p.add_argument("--queries", type=int, default=10_000, help="training queries (the issue's size: 10000, ~1.2M documents)")
    p.add_argument("--epochs", type=int, default=2, help="epochs of each method")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate of both")
    p.add_argument("--seed", type=int, default=0, help="data, weights and batch order seed")
    p.add_argument("--buckets", default="default,128", help="comma-separated bucket sizes of the trainer's sampler to time ('default' = 50 batches)")
    p.add_argument("--skip-allrank", action="store_true", help="time the ltr trainer only")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    t0 = time.perf_counter()
    n_total = int(round(args.queries / 0.9))
    train, valid = _splits(n_total, args.seed)
    print(f"data: {train.n_queries} training queries, {train.n_items} documents, {valid.n_queries} validation queries "
          f"({time.perf_counter() - t0:.1f} s to generate)", flush=True)
    out = {"queries": train.n_queries, "documents": int(train.n_items), "epochs": args.epochs, "threads": 1}

    rows = []
    for bucket in args.buckets.split(","):
        bucket_size = None if bucket == "default" else int(bucket)
        model = make_model(train, args.seed)
        cfg = TrainConfig(epochs=args.epochs, batch_size=64, lr=args.lr, patience=None, metrics=("ndcg@10",),
                          seed=args.seed, progress=False, histograms=False, bucket_size=bucket_size)
        c0 = time.process_time()
        result = Trainer(model, losses.LambdaRank(), cfg).fit(train, valid)
        cpu_epoch = (time.process_time() - c0) / args.epochs
        wall_epoch = float(np.mean([h["seconds"] for h in result.history]))
        name = result.monitor
        final = result.history[-1]["valid"][name]
        label = "sampler default (50 batches)" if bucket_size is None else f"{bucket_size} queries"
        print(f"ltr trainer, LambdaRank, bucket {label}: {wall_epoch:.2f} s/epoch wall, {cpu_epoch:.2f} s/epoch CPU, "
              f"NDCG@10 by epoch {['%.4f' % h['valid'][name] for h in result.history]}", flush=True)
        rows.append({"bucket_size": bucket, "wall_s_per_epoch": wall_epoch, "cpu_s_per_epoch": cpu_epoch, "ndcg10": float(final),
                     "ndcg10_by_epoch": [h["valid"][name] for h in result.history]})
    out.update(ltr=rows, metric=name)

    if not args.skip_allrank:
        loss_fn, label = allrank_loss()
        model_b = make_model(train, args.seed)
        opt = torch.optim.Adam(model_b.parameters(), lr=args.lr)
        times, cpu = [], []
        for epoch in range(args.epochs):
            t, c = time.perf_counter(), time.process_time()
            allrank_style_epoch(model_b, opt, train, loss_fn, args.seed, epoch)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            print(f"  allRank-style epoch {epoch + 1}: {times[-1]:.1f} s wall, {cpu[-1]:.1f} s CPU", flush=True)
            if epoch < args.epochs - 1:
                print(f"    NDCG@10 {ndcg10(model_b, valid)[0]:.4f}", flush=True)
        theirs_ndcg, _ = ndcg10(model_b, valid)
        print(f"allRank-style loop ({label}): {np.mean(times):.2f} s/epoch wall, {np.mean(cpu):.2f} s/epoch CPU, "
              f"NDCG@10 after {args.epochs} epochs {theirs_ndcg:.4f}")
        print(f"\n| method | s/epoch wall | s/epoch CPU | speed-up (CPU) | NDCG@10 after {args.epochs} epochs | vs allRank-style |")
        print("|---|---|---|---|---|---|")
        print(f"| allRank-style loop | {np.mean(times):.1f} | {np.mean(cpu):.1f} | 1.0x | {theirs_ndcg:.4f} | |")
        for r in rows:
            r["speedup_cpu"] = float(np.mean(cpu) / r["cpu_s_per_epoch"])
            r["speedup_wall"] = float(np.mean(times) / r["wall_s_per_epoch"])
            print(f"| ltr trainer, bucket {r['bucket_size']} | {r['wall_s_per_epoch']:.1f} | {r['cpu_s_per_epoch']:.1f} | "
                  f"{r['speedup_cpu']:.1f}x | {r['ndcg10']:.4f} | {r['ndcg10'] - theirs_ndcg:+.4f} |")
        out.update(allrank_seconds_per_epoch=float(np.mean(times)), allrank_cpu_seconds_per_epoch=float(np.mean(cpu)),
                   allrank_ndcg10=float(theirs_ndcg), allrank_impl=label)
    print(f"metric: {name}")
    if args.json:
        from ltr.base.io_utils import atomic_write_json

        atomic_write_json(args.json, out)
    return 0


def _splits(n_total: int, seed: int):
    from ltr.data import make_mslr_like, split_by_query

    ds = make_mslr_like(n_total, 136, seed=seed)
    train, valid = split_by_query(ds, (0.9, 0.1), seed=seed)
    return train, valid


if __name__ == "__main__":
    sys.exit(main())
