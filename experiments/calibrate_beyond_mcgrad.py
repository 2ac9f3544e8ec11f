"""Beyond MCGrad: the joint field fit (``field-joint``) against field-aware calibration, multicalibration
and Meta's MCGrad, on a world with a known truth where the pooled score already carries part of the
field effects and one field changes the score's slope.

The world: :func:`ltr.calibrate.fields_data.make_joint_world` (seed ``--seed``). ``--impressions``
rows, fit on one seeded half, judged on the other. Every calibrator reads the four fields advertiser,
site, device, position and starts from the pooled model's raw logit; MCGrad runs with its defaults
on the Platt probabilities with the fields as categorical features (its fit time includes the Platt
fit), as in ``calibrate_ctr_before_auction.py --study fields``. Judged: NE, PCOC, F-RCE (mean and per
field), the worst ``|PCOC - 1|`` over values with at least ``--min-count`` judged impressions, the
order inside cells of the four fields, and the fit's wall seconds (all in this one process, one after
the other, so their ratios compare like with like). The targets of issue 46 are checked at the end.

    .venv/bin/python experiments/calibrate_beyond_mcgrad.py --impressions 400000 --out runs/beyond_mcgrad
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

FIELDS = ("advertiser", "site", "device", "position")


def _mcgrad(fit):
    """MCGrad with its defaults on the Platt probabilities; returns (predict(scores, fields), seconds)."""
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


def fit_methods(fit, with_mcgrad: bool) -> dict:
    """{name: (predict(scores, fields), seconds)} of every method, fitted on ``fit``."""
    from ltr.calibrate.factory import make_calibrator

    ff = {f: fit.fields[f] for f in FIELDS}
    out = {}
    for name, method, kw in (("field-aware", "field-aware", {}), ("multicalibration", "multicalibration", {}),
                             ("field-joint, no interactions", "field-joint", {"interactions": False}),
                             ("field-joint", "field-joint", {})):
        t = time.perf_counter()
        cal = make_calibrator(method, fields=list(FIELDS), **kw).fit(fit.pooled_logit, fit.clicks, ff)
        out[name] = ((lambda c: lambda sc, fl: c.predict(sc, fl))(cal), time.perf_counter() - t)
        if method == "field-joint" and kw.get("interactions", True):
            out[name] += (cal,)
    if with_mcgrad:
        out["MCGrad (defaults)"] = _mcgrad(fit)
    return out


def judge_row(name, p, judge, seconds, min_count) -> dict:
    from ltr.calibrate.field_calibrators import cell_codes, check_within_field_order
    from metrics.calibration import field_calibration, normalized_entropy, pcoc

    jf = {f: judge.fields[f] for f in FIELDS}
    fc = field_calibration(judge.clicks, p, jf, min_count=min_count, n_boot=20)
    worst = next(r for r in fc.rows if r["count"] >= min_count)
    order = check_within_field_order(judge.pooled_logit, p, cell_codes([jf[f] for f in FIELDS]))
    return {"method": name, "ne": normalized_entropy(judge.clicks, p), "pcoc": pcoc(judge.clicks, p),
            "f_rce": fc.mean_f_rce, **{f"f_rce_{f}": fc.fields[f]["f_rce"] for f in FIELDS},
            "worst": worst["abs_error"], "worst_value": f"{worst['field']} {worst['value']}",
            "order_kept": "yes" if not any(order.values()) else f"no ({order['reversed']} reversed)", "seconds": seconds}


def targets(rows: dict) -> list[str]:
    """The issue's targets, each with its numbers."""
    j, t = rows["field-joint"], rows["true probabilities"]
    out = [f"F-RCE {j['f_rce']:.4f} = {j['f_rce'] / t['f_rce']:.2f}x the truth's {t['f_rce']:.4f} (target <= 1.3x): "
           f"{'met' if j['f_rce'] <= 1.3 * t['f_rce'] else 'missed'}",
           f"worst value {j['worst']:.3f} (target <= 0.08): {'met' if j['worst'] <= 0.08 else 'missed'}"]
    if "MCGrad (defaults)" in rows:
        m = rows["MCGrad (defaults)"]
        out += [f"F-RCE {j['f_rce']:.4f} against MCGrad's {m['f_rce']:.4f}: {'met' if j['f_rce'] <= m['f_rce'] else 'missed'}",
                f"NE {j['ne']:.5f} against MCGrad's {m['ne']:.5f}: {'met' if j['ne'] <= m['ne'] else 'missed'}",
                f"fit {j['seconds']:.1f} s against MCGrad's {m['seconds']:.1f} s: {m['seconds'] / j['seconds']:.1f}x faster "
                f"(target >= 10x): {'met' if m['seconds'] >= 10 * j['seconds'] else 'missed'}"]
    return out


def main(argv=None) -> int:
    from ltr.calibrate.fields_data import make_joint_world
    from ltr.base.io_utils import atomic_write_json, atomic_write_text
    from ltr.study import markdown_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impressions", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-count", type=float, default=20_000, help="judged impressions of a value for the worst column")
    ap.add_argument("--no-mcgrad", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    world = make_joint_world(seed=args.seed)
    fit, judge = world.impressions(args.impressions, seed=args.seed + 1).halves(seed=args.seed + 2)
    with_mcgrad = not args.no_mcgrad
    if with_mcgrad:
        try:
            import mcgrad  # noqa: F401
        except ImportError:
            print("mcgrad is not installed (pip install mcgrad, or the 'bench' extra): its row is left out")
            with_mcgrad = False
    methods = fit_methods(fit, with_mcgrad)
    jf = {f: judge.fields[f] for f in FIELDS}
    rows = {name: judge_row(name, m[0](judge.pooled_logit, jf), judge, m[1], args.min_count) for name, m in methods.items()}
    rows["true probabilities"] = judge_row("true probabilities", judge.true_ctr, judge, 0.0, args.min_count)
    joint = methods["field-joint"][2]
    cols = [("method", "method", "{}"), ("NE", "ne", "{:.5f}"), ("PCOC", "pcoc", "{:.3f}"), ("F-RCE (mean)", "f_rce", "{:.4f}")]
    cols += [(f"F-RCE {f}", f"f_rce_{f}", "{:.3f}") for f in FIELDS]
    cols += [("worst |PCOC-1|", "worst", "{:.3f}"), ("worst value", "worst_value", "{}"),
             ("order kept in cells", "order_kept", "{}"), ("fit s", "seconds", "{:.1f}")]
    table = markdown_table([c[0] for c in cols], [[fmt.format(r[key]) for _, key, fmt in cols] for r in rows.values()],
                           align="l" + "r" * (len(cols) - 1))
    kept = [h["field"] for h in joint.held_out_ if h.get("kept")]
    text = "\n".join([f"Beyond MCGrad ({args.impressions} impressions of make_joint_world(seed={args.seed}), fit on "
                      f"{fit.n}, judged on {judge.n}; worst over values with >= {args.min_count:.0f} judged impressions)",
                      "", table, "",
                      f"field-joint: penalties {', '.join(f'{f} {v:.3g}' for f, v in joint.penalties_.items())}; "
                      f"interactions kept by the held-out log loss: {', '.join(kept) or 'none'}", "",
                      *[f"- {t}" for t in targets(rows)], ""])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "table.md", text)
    atomic_write_json(out / "results.json", {"rows": list(rows.values()), "penalties": joint.penalties_,
                                              "held_out": joint.held_out_, "impressions": args.impressions})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
