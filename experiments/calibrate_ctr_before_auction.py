"""Calibrate a CTR model before it sets prices: down-sampling, Platt, isotonic, and the auction bill.

Synthetic, seeded set-up (:mod:`ltr.calibrate.ctr`; nothing is downloaded): one world of advertisers and
requests with known true click probabilities, split by request into train / calibration / test.

1. A pointwise BCE CTR model (MLP, :class:`ltr.train.trainer.Trainer` + :class:`losses.PointwiseBCE`) is
   trained on the training requests after negative down-sampling at rate ``w`` (every click, a share
   ``w`` of the non-clicks), the common practice that inflates every predicted CTR.
2. Its predictions are calibrated on the held-out calibration requests (not down-sampled) with each
   method: none, the analytic correction ``p / (p + (1 - p) / w)``, Platt, isotonic, strict isotonic.
3. On the test requests: AUC (global and per request), LogLoss, ECE (equal-width and equal-mass
   bins), ties created, and GSP auctions (one per request: 3 slots, position effects, a reserve on
   the rank score and a pCTR threshold) against the oracle that knows the true CTRs.
4. The chapter's point: monotone distortions of a calibrated model (squaring, doubling, a sigmoid
   sharpening) keep AUC to the fourth decimal while LogLoss and ECE grow severalfold, and cost money
   in the auction; re-calibration on held-out data brings them back.

Prints markdown tables; writes reliability diagrams (PNG) and results.json under ``--out``.

    .venv/bin/python experiments/calibrate_ctr_before_auction.py --out runs/calibrate_ctr
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

from ltr.calibrate import (
    check_auc_invariance,
    make_calibrator,
    save_reliability_diagram,
)
from ltr.calibrate.auction import oracle_comparison, pad_groups
from ltr.calibrate.ctr import (
    correct_downsampling,
    distort,
    downsample_negatives,
    generate_impressions,
    train_ctr_model,
)
from ltr.io_utils import atomic_write_json, atomic_write_text
from ltr.study import markdown_table
from metrics.classification import auc, ece, grouped_auc, log_loss


def auction_kwargs(args) -> dict:
    return {
        "slots": args.slots,
        "position_effects": [0.6 ** s for s in range(args.slots)],
        "score_reserve": args.score_reserve,
        "threshold": args.threshold,
    }


def evaluate(name, p, test, offsets, akw, raw=None) -> dict:
    """Every column of the tables for predictions ``p`` on the test impressions."""
    bids, mask = pad_groups(test.bids, offsets)
    true, _ = pad_groups(test.true_ctr, offsets)
    pctr, _ = pad_groups(np.clip(p, 0.0, 1.0), offsets)
    money = oracle_comparison(bids, pctr, true, mask, **akw)
    row = {
        "method": name,
        "auc": auc(test.clicks, p),
        "gauc": grouped_auc(test.clicks, p, test.request_ids, weighting="pairs").value,
        "log_loss": log_loss(test.clicks, p),
        "ece_width": ece(test.clicks, p, n_bins=15, strategy="width"),
        "ece_mass": ece(test.clicks, p, n_bins=15, strategy="mass"),
        "mean_pctr": float(np.mean(p)),
        **{k: money[k] for k in ("revenue_ratio", "welfare_ratio", "allocation_agreement", "shown")},
        "oracle_revenue": money["oracle_revenue"],
        "oracle_welfare": money["oracle_welfare"],
    }
    if raw is not None:
        inv = check_auc_invariance(raw, p, test.clicks, groups=test.request_ids)
        row["ties_created"] = inv.tied_pairs_created
        row["auc_diff"] = inv.auc_difference
    return row


def table(rows, cols) -> str:
    """Markdown table of ``rows`` (dicts); ``cols``: (title, key, format); a missing key is an empty cell."""
    cells = [[fmt.format(r[key]) if r.get(key, "") != "" else "" for _, key, fmt in cols] for r in rows]
    return markdown_table([c[0] for c in cols], cells, align="l" + "r" * (len(cols) - 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=12000, help="requests (page views) in the world")
    ap.add_argument("--ads", type=int, default=8, help="candidate ads per request")
    ap.add_argument("--rate", type=float, default=0.1, help="negative down-sampling rate w of the training data")
    ap.add_argument("--slots", type=int, default=3, help="ad slots per request (position effect 0.6^s)")
    ap.add_argument("--score-reserve", type=float, default=0.06, help="reserve on bid x pCTR (money per impression)")
    ap.add_argument("--threshold", type=float, default=0.02, help="show an ad only if its pCTR >= this")
    ap.add_argument("--epochs", type=int, default=8, help="training epochs of the CTR model")
    ap.add_argument("--seed", type=int, default=0, help="seed of the world, the splits and the training")
    ap.add_argument("--out", type=Path, default=Path("runs/calibrate_ctr_before_auction"), help="output folder")
    ap.add_argument("--progress", action="store_true", help="show the trainer's progress bars")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    akw = auction_kwargs(args)

    world = generate_impressions(args.requests, args.ads, seed=args.seed)
    train_full, calib, test = world.split_requests((0.6, 0.2, 0.2), seed=args.seed)
    fit_part, valid_part = train_full.split_requests((0.85, 0.15), seed=args.seed + 1)
    train = downsample_negatives(fit_part, args.rate, seed=args.seed + 2)
    valid = downsample_negatives(valid_part, args.rate, seed=args.seed + 3)
    print(f"world: {world.n} impressions, click rate {world.clicks.mean():.4f}; training on {train.n} rows after "
          f"down-sampling negatives at w = {args.rate} (click rate {train.clicks.mean():.4f}); "
          f"calibration {calib.n} rows, test {test.n} rows")

    trainer, fit = train_ctr_model(train, valid, hidden=(32,), epochs=args.epochs, batch_size=32, lr=3e-3,
                                   seed=args.seed, progress=args.progress)
    q_calib = expit(trainer.predict(calib.to_ranking_dataset()))
    q_test = expit(trainer.predict(test.to_ranking_dataset()))
    print(f"CTR model: MLP(32) + PointwiseBCE, best epoch {fit.best_epoch} of {fit.epochs_run}")

    offsets = test.request_offsets
    preds = {"none (raw, down-sampled)": q_test, "analytic correction": correct_downsampling(q_test, args.rate)}
    for method in ("platt", "isotonic", "isotonic-strict"):
        cal = make_calibrator(method).fit(q_calib, calib.clicks, held_out=True)
        preds[method] = cal.predict(q_test)
    rows = [evaluate("oracle (true CTR)", test.true_ctr, test, offsets, akw)]
    rows += [evaluate(name, p, test, offsets, akw, raw=q_test) for name, p in preds.items()]

    cols1 = [
        ("method", "method", "{}"), ("AUC", "auc", "{:.4f}"), ("GAUC", "gauc", "{:.4f}"),
        ("ΔAUC", "auc_diff", "{:+.1e}"), ("ties created", "ties_created", "{:d}"),
        ("LogLoss", "log_loss", "{:.4f}"), ("ECE width", "ece_width", "{:.4f}"), ("ECE mass", "ece_mass", "{:.4f}"),
        ("mean pCTR", "mean_pctr", "{:.4f}"), ("revenue / oracle", "revenue_ratio", "{:.3f}"),
        ("welfare / oracle", "welfare_ratio", "{:.3f}"), ("same allocation", "allocation_agreement", "{:.3f}"),
        ("ads shown", "shown", "{:d}"),
    ]
    out = [f"### Calibrating a CTR model trained on down-sampled data (w = {args.rate})", "",
           f"Test: {test.n} impressions in {len(offsets) - 1} auctions ({args.slots} slots, position effects "
           f"{', '.join(f'{v:.2f}' for v in akw['position_effects'])}, score reserve {args.score_reserve}, pCTR "
           f"threshold {args.threshold}); base rate {test.clicks.mean():.4f}. ΔAUC and ties are against the raw "
           "model's scores.", "", table(rows, cols1), ""]

    # The chapter's point: monotone distortions of a calibrated model.
    base_name = "platt"
    base_cal = make_calibrator(base_name).fit(q_calib, calib.clicks)
    base_test, base_calib = base_cal.predict(q_test), base_cal.predict(q_calib)
    drows = [evaluate("calibrated (Platt)", base_test, test, offsets, akw)]
    recal = {}
    for kind, label in (("square", "p^2"), ("double", "min(2p, 1)"), ("sharpen", "sigmoid(2 logit p)")):
        d_test, d_calib = distort(base_test, kind), distort(base_calib, kind)
        r = evaluate(f"{label}", d_test, test, offsets, akw, raw=base_test)
        for method in ("platt", "isotonic-strict"):
            back = make_calibrator(method).fit(d_calib, calib.clicks).predict(d_test)
            recal[(kind, method)] = evaluate(f"{label} -> {method}", back, test, offsets, akw, raw=base_test)
        drows.append(r)
        drows += [recal[(kind, "platt")], recal[(kind, "isotonic-strict")]]
    base = drows[0]
    for r in drows:
        r["ll_ratio"] = r["log_loss"] / base["log_loss"]
        r["ece_ratio"] = r["ece_mass"] / base["ece_mass"]
    cols2 = [
        ("predictions", "method", "{}"), ("AUC", "auc", "{:.4f}"), ("ΔAUC", "auc_diff", "{:+.1e}"),
        ("LogLoss", "log_loss", "{:.4f}"), ("× LogLoss", "ll_ratio", "{:.2f}"), ("ECE mass", "ece_mass", "{:.4f}"),
        ("× ECE", "ece_ratio", "{:.1f}"), ("ECE width", "ece_width", "{:.4f}"), ("ties created", "ties_created", "{:d}"),
        ("revenue / oracle", "revenue_ratio", "{:.3f}"), ("welfare / oracle", "welfare_ratio", "{:.3f}"),
    ]
    out += ["### Monotone distortions of a calibrated model, and re-calibration on held-out data", "",
            "Re-calibration is fitted on the distorted calibration-split predictions. Platt works on logit p, so it "
            "undoes the sharpening exactly and the others approximately; strict isotonic is non-parametric. "
            "ΔAUC and ties are against the calibrated model.", "",
            table(drows, cols2), ""]
    text = "\n".join(out)
    print()
    print(text)

    args.out.mkdir(parents=True, exist_ok=True)
    save_reliability_diagram(args.out / "reliability_methods.png", test.clicks,
                             {k: v for k, v in preds.items()}, n_bins=15,
                             title=f"CTR model trained on down-sampled data (w = {args.rate}): test reliability")
    save_reliability_diagram(args.out / "reliability_distortions.png", test.clicks,
                             {"calibrated (Platt)": base_test, "p^2": distort(base_test, "square"),
                              "min(2p, 1)": distort(base_test, "double"),
                              "sigmoid(2 logit p)": distort(base_test, "sharpen")}, n_bins=15,
                             title="Monotone distortions: same AUC, different probabilities")
    atomic_write_json(args.out / "results.json", {"args": {k: str(v) for k, v in vars(args).items()},
                                                  "methods": rows, "distortions": drows})
    atomic_write_text(args.out / "tables.md", text + "\n")
    print(f"wrote {args.out}/tables.md, results.json, reliability_methods.png, reliability_distortions.png "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
