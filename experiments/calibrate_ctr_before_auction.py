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

Part two (``--study fields``): calibration by field. A seeded world with fields
(:mod:`ltr.calibrate.fields_data`: advertiser, site, device, position, hour), a pooled model that misses
most of the advertiser and all of the device effect, globally calibrated by Platt; fitted on one half
of the impressions, judged on the other: NE, PCOC, F-RCE, the worst field value, global and
within-field AUC and fit time for global Platt / isotonic / beta / spline, field-aware calibration,
multicalibration, MCGrad (when the ``mcgrad`` package is installed) and the true probabilities; then
GSP and VCG auctions with reserve prices on requests of the same world: revenue, welfare and regret
against the oracle that knows the true CTRs, and the winners' PCOC (maximization bias).

Prints markdown tables; writes reliability diagrams (PNG) and results.json under ``--out``.

    .venv/bin/python experiments/calibrate_ctr_before_auction.py --out runs/calibrate_ctr
    .venv/bin/python experiments/calibrate_ctr_before_auction.py --study fields --impressions 400000 --out runs/calibrate_fields
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
from ltr.base.io_utils import atomic_write_json, atomic_write_text
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


FIELDS = ("advertiser", "site", "device", "position")


def _fit_methods(fit, with_mcgrad: bool):
    """Fit every calibrator on the fit half; returns {name: (predict(scores, fields), seconds)}."""
    from ltr.calibrate.calibrators import PlattCalibrator
    from ltr.calibrate.field_calibrators import make_global_map

    ff = {f: fit.fields[f] for f in FIELDS}
    s, y = fit.pooled_logit, fit.clicks
    out = {}
    for name in ("platt", "isotonic-strict", "beta", "spline"):
        t = time.perf_counter()
        cal = PlattCalibrator(input="score") if name == "platt" else (
            make_calibrator(name) if name.startswith("isotonic") else make_global_map(name, s))
        cal.fit(s, y)
        out[f"global {name}"] = ((lambda c: lambda sc, fl: c.predict(sc))(cal), time.perf_counter() - t)
    for name, kw in (("field-aware", {}), ("multicalibration", {"n_bins": 4, "learning_rate": 0.5})):
        t = time.perf_counter()
        cal = make_calibrator(name, fields=list(FIELDS), **kw).fit(s, y, ff)
        out[name] = ((lambda c: lambda sc, fl: c.predict(sc, fl))(cal), time.perf_counter() - t)
    if with_mcgrad:
        out["MCGrad (defaults)"] = _fit_mcgrad(fit)
    return out


def _fit_mcgrad(fit):
    """MCGrad with its defaults on the Platt-calibrated pooled model, the fields as categorical features.
    The fit time includes the Platt fit it starts from."""
    import warnings

    import pandas as pd
    from mcgrad.methods import MCGrad

    from ltr.calibrate.calibrators import PlattCalibrator

    def frame(p, fields):
        d = pd.DataFrame({f: np.asarray(fields[f]).astype(str) for f in FIELDS})
        d["score"] = p
        return d

    t = time.perf_counter()
    platt = PlattCalibrator(input="score").fit(fit.pooled_logit, fit.clicks)
    d = frame(platt.predict(fit.pooled_logit), fit.fields)
    d["label"] = fit.clicks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MCGrad().fit(d, "score", "label", categorical_feature_column_names=list(FIELDS))
    seconds = time.perf_counter() - t

    def predict(sc, fl):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.predict(frame(platt.predict(sc), fl), "score", categorical_feature_column_names=list(FIELDS))

    return predict, seconds


def _judge(name, p, judge, seconds, min_count) -> dict:
    from metrics.calibration import field_calibration, normalized_entropy, pcoc

    jf = {f: judge.fields[f] for f in FIELDS}
    fc = field_calibration(judge.clicks, p, jf, min_count=min_count, n_boot=20)
    worst = next(r for r in fc.rows if r["count"] >= min_count)
    cells = np.zeros(judge.n, dtype=np.int64)
    for f in FIELDS:
        cells = cells * 1000 + judge.fields[f]
    from ltr.calibrate.field_calibrators import check_within_field_order

    order = check_within_field_order(judge.pooled_logit, p, cells)
    return {"method": name, "ne": normalized_entropy(judge.clicks, p), "pcoc": pcoc(judge.clicks, p),
            "order_kept": "yes" if not any(order.values()) else f"no ({order['reversed']} reversed, "
                          f"{order['ties_created']} ties)",
            "f_rce": fc.mean_f_rce, **{f"f_rce_{f}": fc.fields[f]["f_rce"] for f in FIELDS},
            "worst": worst["abs_error"], "worst_value": f"{worst['field']} {worst['value']}",
            "pcoc_pos0": next(r["pcoc"] for r in fc.rows if r["field"] == "position" and r["value"] == 0),
            "auc": auc(judge.clicks, p), "gauc_adv": grouped_auc(judge.clicks, p, judge.fields["advertiser"]).value,
            "gauc_cells": grouped_auc(judge.clicks, p, cells).value, "seconds": seconds}


def _requests_pctr(world, predict, seed, args):
    """Requests of the world and the pCTRs of ``predict`` for every candidate (position 0), ``[A, K]``."""
    req = world.requests(args.requests_fields, args.ads, seed=seed)
    flat = {f: req.fields[f].reshape(-1) for f in ("advertiser", "site", "device")}
    flat["position"] = np.zeros(flat["advertiser"].shape[0], dtype=np.int64)
    if predict is None:
        return req, req.ad_ctr
    return req, np.clip(predict(req.pooled_logit.reshape(-1), flat), 0.0, 1.0).reshape(req.bids.shape)


def _reserves(req, args):
    from ltr.calibrate.auction import field_reserves

    return field_reserves(req.fields["device"], {0: args.reserve, 1: args.reserve * 0.8, 2: args.reserve * 1.2})


def _winners_recalibration(world, predict, theta, args):
    """Calibrate on winners: run GSP on other requests with these pCTRs, log the winners with clicks
    drawn from the truth, fit a field-aware map (global Platt on logit pCTR + one offset per slot) on
    that log; return the map from pCTR to the recalibrated top-slot pCTR."""
    from scipy.special import logit

    from ltr.calibrate.auction import log_winners, run_auctions
    from ltr.calibrate.field_calibrators import FieldAwareCalibrator

    req, p = _requests_pctr(world, predict, args.seed + 6, args)
    res = run_auctions(req.bids, p, req.ad_ctr, slots=args.slots, position_effects=theta, reserve=_reserves(req, args))
    log = log_winners(res, p, seed=args.seed + 7)
    x = logit(np.clip(log["pctr"], 1e-9, 1 - 1e-9))
    cal = FieldAwareCalibrator(["slot"], global_method="platt").fit(x, log["click"], {"slot": log["slot"]})

    def apply(q):
        z = logit(np.clip(q.reshape(-1), 1e-9, 1 - 1e-9))
        return cal.predict(z, {"slot": np.zeros(z.shape[0], dtype=np.int64)}).reshape(q.shape)

    return apply


def _auction_rows(world, predictors, args) -> list:
    """GSP and VCG auctions on requests of the same world, pCTRs from each calibrator (position 0);
    for the global Platt and field-aware pCTRs also after calibrating on logged winners."""
    from ltr.calibrate.auction import oracle_comparison, run_auctions

    theta = world.position_effects[: args.slots]
    runs = []
    for name, (predict, _) in predictors.items():
        req, p = _requests_pctr(world, predict, args.seed + 5, args)
        runs.append((name, p))
        if name in ("global platt", "field-aware"):
            runs.append((f"{name}, then calibrated on winners", _winners_recalibration(world, predict, theta, args)(p)))
    reserve = _reserves(req, args)
    rows = []
    for name, p in runs:
        row = {"method": name}
        for mech in ("gsp", "vcg"):
            kw = dict(slots=args.slots, position_effects=theta, reserve=reserve, mechanism=mech)
            cmp_ = oracle_comparison(req.bids, p, req.ad_ctr, **kw)
            row.update({f"{mech}_revenue_ratio": cmp_["revenue_ratio"], f"{mech}_welfare_ratio": cmp_["welfare_ratio"],
                        f"{mech}_regret": cmp_["regret"], f"{mech}_cpc": cmp_["cost_per_click"]})
        row["winners_pcoc"] = run_auctions(req.bids, p, req.ad_ctr, slots=args.slots, position_effects=theta,
                                           reserve=reserve).winners_pcoc
        row["all_pcoc"] = float(p.sum() / req.ad_ctr.sum())
        rows.append(row)
    return rows


def fields_study(args) -> str:
    """Part two: calibration by field, and what it is worth in GSP / VCG auctions with reserves."""
    from ltr.calibrate.fields_data import make_field_world

    world = make_field_world(seed=args.seed)
    imps = world.impressions(args.impressions, seed=args.seed + 1)
    fit, judge = imps.halves(seed=args.seed + 2)
    with_mcgrad = not args.no_mcgrad
    if with_mcgrad:
        try:
            import mcgrad  # noqa: F401
        except ImportError:
            print("mcgrad is not installed (pip install mcgrad, or the 'bench' extra): its row is left out")
            with_mcgrad = False
    predictors = _fit_methods(fit, with_mcgrad)
    min_count = args.impressions / 20
    rows = [_judge(n, pr(judge.pooled_logit, {f: judge.fields[f] for f in FIELDS}), judge, sec, min_count)
            for n, (pr, sec) in predictors.items()]
    rows.append(_judge("true probabilities", judge.true_ctr, judge, 0.0, min_count))
    cols = [("method", "method", "{}"), ("NE", "ne", "{:.4f}"), ("PCOC", "pcoc", "{:.3f}"),
            ("F-RCE (mean)", "f_rce", "{:.4f}")] + [(f"F-RCE {f}", f"f_rce_{f}", "{:.3f}") for f in FIELDS] + [
           ("worst |PCOC-1|", "worst", "{:.3f}"), ("worst value", "worst_value", "{}"),
           ("PCOC position 0", "pcoc_pos0", "{:.3f}"), ("AUC", "auc", "{:.5f}"),
           ("AUC within advertiser", "gauc_adv", "{:.5f}"), ("AUC within cells", "gauc_cells", "{:.6f}"),
           ("order kept in cells", "order_kept", "{}"),
           ("fit s", "seconds", "{:.1f}")]
    predictors["oracle (true CTR)"] = (None, 0.0)
    arows = _auction_rows(world, predictors, args)
    acols = [("pCTR from", "method", "{}"), ("PCOC all candidates", "all_pcoc", "{:.3f}"),
             ("winners' PCOC", "winners_pcoc", "{:.3f}"), ("GSP revenue / oracle", "gsp_revenue_ratio", "{:.3f}"),
             ("GSP welfare / oracle", "gsp_welfare_ratio", "{:.4f}"), ("GSP regret", "gsp_regret", "{:.1f}"),
             ("GSP cost per click", "gsp_cpc", "{:.3f}"), ("VCG revenue / oracle", "vcg_revenue_ratio", "{:.3f}"),
             ("VCG regret", "vcg_regret", "{:.1f}"), ("VCG cost per click", "vcg_cpc", "{:.3f}")]
    n_fit = fit.n
    text = "\n".join([
        f"### Calibration by field ({args.impressions} impressions, fit on {n_fit}, judged on {judge.n})", "",
        f"Pooled model: misses {1 - world.advertiser_known:.0%} of the advertiser and {1 - world.device_known:.0%} of "
        f"the device effect; click rate {judge.clicks.mean():.4f}. Worst |PCOC - 1| over field values with at least "
        f"{min_count:.0f} judged impressions. AUC within cells: pairs-weighted AUC inside groups sharing all four "
        "field values; order kept in cells: no pair of rows sharing all four field values changes order "
        "against the pooled model's score (adjacent pairs counted).", "", table(rows, cols), "",
        f"### Auctions with reserve prices ({args.requests_fields} requests, {args.ads} candidates, {args.slots} slots, "
        f"position effects {', '.join(f'{v:.2f}' for v in world.position_effects[: args.slots])}; reserve per click "
        f"by device {args.reserve:g} / {args.reserve * 0.8:g} / {args.reserve * 1.2:g})", "",
        "Regret = oracle welfare - welfare (money); PCOC all candidates / winners: predicted over true expected "
        "clicks of every candidate / of the ads shown (GSP). \"Calibrated on winners\": a field-aware map (Platt on "
        f"logit pCTR + one offset per slot) fitted on the winners of {args.requests_fields} other GSP auctions with "
        "clicks drawn from the truth, applied at slot 0.", "", table(arows, acols), ""])
    args.results_fields = {"methods": rows, "auctions": arows}
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", choices=("downsampling", "fields"), default="downsampling",
                    help="downsampling: part one (the CTR model trained on down-sampled data); fields: part two")
    ap.add_argument("--impressions", type=int, default=400_000, help="fields study: impressions (half fit, half judged)")
    ap.add_argument("--requests-fields", type=int, default=50_000, help="fields study: auctions")
    ap.add_argument("--reserve", type=float, default=0.4, help="fields study: reserve price per click (device 0)")
    ap.add_argument("--no-mcgrad", action="store_true", help="fields study: leave MCGrad out")
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
    if args.study == "fields":
        text = fields_study(args)
        print(text)
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out / "results_fields.json", {"args": {k: str(v) for k, v in vars(args).items()
                                                                      if k != "results_fields"},
                                                             **args.results_fields})
        atomic_write_text(args.out / "tables_fields.md", text + "\n")
        print(f"wrote {args.out}/tables_fields.md, results_fields.json ({time.perf_counter() - t0:.0f} s)")
        return 0
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
