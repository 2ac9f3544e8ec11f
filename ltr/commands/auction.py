"""``ltr auction``: GSP and VCG auctions on a table of requests x candidate ads, with reserve prices per
field value fitted on one day and applied on another, and the numbers that say what the pCTRs cost.

The table (``--table``: Parquet file / folder or CSV with a header) has one row per candidate: request
id, ad id, bid per click, and the pCTR at the top slot, either a column of probabilities
(``--pctr-column``, calibrated or raw) or a score column put through a saved calibrator
(``--calibrator CAL_DIR`` with ``--score-column``; a field calibrator reads its fields from the
table). Slots: ``--slots`` with ``--position-effects`` (the separable position curve). With
``--true-ctr-column`` (simulations) the oracle that knows the true CTRs runs the same auctions:
revenue and welfare over the oracle's, regret, allocation agreement, and the winners' PCOC (predicted
over true expected clicks of the ads that won). Reserves: ``--reserve`` (one per-click price),
``--fit-reserves --reserve-field F`` (per value of F, maximising the expected revenue under the
pCTRs; written to ``reserves.json``), or ``--reserves FILE`` (a ``reserves.json`` of an earlier run).
Written into ``--out`` (a new folder, or ``--force``): ``report.json``, ``report.txt``,
``auction.png`` (and ``reserves.png`` when fitted). The rules are in :mod:`ltr.calibrate.auction`,
the table, the reserves and the intervals in :mod:`ltr.calibrate.auction_table`.
"""

from __future__ import annotations

import argparse
import sys
import time

from ltr.base.checks import SEED, integer, number
from ltr.base.errors import LtrError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "auction",
        help="run GSP / VCG auctions on a table of requests x ads: revenue, welfare, reserves per field value, "
        "winners' PCOC, the true-CTR oracle",
        description="Run GSP and VCG auctions (rank by bid x pCTR) on a table with one row per candidate ad of a "
        "request, with reserve prices (one, or per field value fitted here or read from an earlier run), and "
        "report revenue, welfare and cost per click with intervals over requests; with true CTRs also the "
        "oracle comparison and the winners' PCOC.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--table", required=True, metavar="PATH", help="a Parquet file, a folder of Parquet files, or a CSV file with a header")
    p.add_argument("--request-column", default="request", help="the request (auction) id of each row")
    p.add_argument("--ad-column", default="ad", help="the ad id of each row")
    p.add_argument("--bid-column", default="bid", help="the bid per click")
    p.add_argument("--pctr-column", default=None, help="the pCTR at the top slot, probabilities (calibrated or raw)")
    p.add_argument("--calibrator", default=None, metavar="CAL_DIR",
                   help="instead of --pctr-column: an `ltr calibrate` run folder (or calibrator.json) applied to --score-column")
    p.add_argument("--score-column", default="score", help="--calibrator: the column of model scores")
    p.add_argument("--true-ctr-column", default=None, help="the true click probability at the top slot (simulations): adds the oracle")
    p.add_argument("--field-columns", default="", metavar="A,B", help="field columns (for --reserve-field)")
    p.add_argument("--slots", type=integer(min=1), default=3, help="slots per request")
    p.add_argument("--position-effects", default=None, metavar="T0,T1,...",
                   help="click-through of each slot relative to the top (the position curve; default 1 for every slot)")
    p.add_argument("--mechanisms", default="gsp,vcg", help="gsp, vcg or both (comma-separated)")
    p.add_argument("--reserve", type=number(min=0), default=0.0, help="one per-click reserve price for every ad")
    p.add_argument("--reserve-field", default=None, help="--fit-reserves: the field whose values get their own reserve")
    p.add_argument("--fit-reserves", action="store_true",
                   help="fit a reserve per value of --reserve-field on this table (expected GSP revenue under the pCTRs); "
                   "written to reserves.json")
    p.add_argument("--reserves", default=None, metavar="FILE", help="apply the reserves.json of an earlier --fit-reserves run")
    p.add_argument("--drop-invalid", action="store_true",
                   help="leave out rows with a bad bid, pCTR or true CTR or an empty id or field, and count them (default: refuse)")
    p.add_argument("--bootstrap", type=integer(min=10), default=200, help="replicates of the intervals over requests")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the bootstrap")
    p.add_argument("--out", required=True, metavar="DIR", help="a new folder for report.json, report.txt, auction.png")
    p.add_argument("--force", action="store_true", help="replace --out if it is a run folder made by ltr (never any other folder)")
    p.set_defaults(func=run)


def _theta(args) -> list[float]:
    if args.position_effects is None:
        return [1.0] * args.slots
    try:
        theta = [float(v) for v in args.position_effects.split(",")]
    except ValueError:
        raise LtrError(f"--position-effects must be numbers separated by commas, got {args.position_effects!r}") from None
    if len(theta) != args.slots:
        raise LtrError(f"--position-effects needs one value per slot ({args.slots}), got {len(theta)}")
    if not all(0 < t <= 1 for t in theta) or any(b > a for a, b in zip(theta, theta[1:])):
        raise LtrError(f"--position-effects must lie in (0, 1] and not increase down the page, got {args.position_effects}")
    return theta


def _check(args) -> tuple[list, list]:
    mechs = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    if not mechs or any(m not in ("gsp", "vcg") for m in mechs) or len(set(mechs)) != len(mechs):
        raise LtrError(f"--mechanisms takes gsp, vcg or both, got {args.mechanisms!r}")
    if (args.pctr_column is None) == (args.calibrator is None):
        raise LtrError("give the pCTR as --pctr-column, or as --calibrator CAL_DIR applied to --score-column")
    reserve_ways = sum([args.reserve > 0, args.fit_reserves, args.reserves is not None])
    if reserve_ways > 1:
        raise LtrError("--reserve, --fit-reserves and --reserves are three ways to set reserves: give one")
    if args.fit_reserves and not args.reserve_field:
        raise LtrError("--fit-reserves needs --reserve-field (the field whose values get their own reserve)")
    if args.reserve_field and not args.fit_reserves:
        raise LtrError("--reserve-field goes with --fit-reserves (--reserves FILE names its field)")
    fields = [c.strip() for c in args.field_columns.split(",") if c.strip()]
    return mechs, fields


def _reserve_spec(args):
    if args.reserves is None:
        return None
    from ltr.base.checks import read_json_object

    spec = read_json_object(args.reserves, "--reserves")
    if not isinstance(spec.get("reserves"), dict) or "field" not in spec or "default" not in spec:
        raise LtrError(f"--reserves {args.reserves}: not a reserves.json of `ltr auction --fit-reserves`")
    return spec


def _reserves_figure(spec: dict, top: int = 6):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for value, curve in list(spec["curves"].items())[:top]:
        r, rev = zip(*curve)
        line, = ax.plot(r, rev, marker="o", ms=3, label=f"{spec['field']} = {value}")
        ax.axvline(spec["reserves"][value], color=line.get_color(), ls=":", lw=1)
    ax.set_xlabel("reserve per click")
    ax.set_ylabel("expected GSP revenue under the pCTRs")
    ax.set_title(f"reserve per {spec['field']} (dotted: chosen)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _auction_figure(rep: dict):
    """Revenue and welfare (over the oracle's when known) and the winners' PCOC, with intervals."""
    from matplotlib.figure import Figure

    keys = (["revenue_over_oracle", "welfare_over_oracle", "winners_pcoc"] if "all_candidates_pcoc" in rep
            else ["revenue", "welfare", "cost_per_click"])
    fig = Figure(figsize=(3.2 * len(keys), 3.8))
    axes = fig.subplots(1, len(keys))
    for ax, key in zip(axes, keys):
        for i, (mech, d) in enumerate(rep["mechanisms"].items()):
            v = d[key]
            ax.bar(i, v["value"], color=f"C{i}")
            ax.errorbar(i, v["value"], yerr=[[v["value"] - v["low"]], [v["high"] - v["value"]]], color="black", lw=1)
        ax.set_xticks(range(len(rep["mechanisms"])), [m.upper() for m in rep["mechanisms"]])
        if key in ("revenue_over_oracle", "welfare_over_oracle", "winners_pcoc"):
            ax.axhline(1.0, ls="--", color="grey", lw=1)
            lo = min(d[key]["low"] for d in rep["mechanisms"].values())
            ax.set_ylim(min(0.9, lo - 0.02), None)
        ax.set_title(key.replace("_", " "))
    fig.tight_layout()
    return fig


def _save(fig, path) -> None:
    from ltr.base.io_utils import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)


def run(args) -> int:
    from ltr.calibrate.auction_table import (auction_report, auction_report_text, fit_reserves, read_auction_table,
                                             reserves_array)
    from ltr.base.io_utils import atomic_write_json, atomic_write_text
    from ltr.runs.folder import check_destination, run_folder

    mechs, fields = _check(args)
    theta = _theta(args)
    inputs = [("--table", args.table), ("--calibrator", args.calibrator), ("--reserves", args.reserves)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    spec = _reserve_spec(args)
    calibrator = None
    if args.calibrator is not None:
        from ltr.calibrate.apply_table import resolve_calibrator

        calibrator = resolve_calibrator(args.calibrator, "--calibrator")
    t0 = time.perf_counter()
    need = fields + [f for f in (args.reserve_field, spec["field"] if spec else None) if f and f not in fields]
    t = read_auction_table(args.table, request_column=args.request_column, ad_column=args.ad_column,
                           bid_column=args.bid_column, pctr_column=args.pctr_column, score_column=args.score_column,
                           calibrator=calibrator, true_ctr_column=args.true_ctr_column, field_columns=need,
                           drop_invalid=args.drop_invalid)
    print(f"ltr auction: read {t.rows} candidates of {t.n_requests} requests ({time.perf_counter() - t0:.1f} s)",
          file=sys.stderr)
    if args.fit_reserves:
        spec = fit_reserves(t, args.reserve_field, slots=args.slots, position_effects=theta)
        print(f"ltr auction: fitted reserves per {args.reserve_field} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    reserve = reserves_array(t, spec) if spec is not None else args.reserve
    rep = auction_report(t, slots=args.slots, position_effects=theta, reserve=reserve, mechanisms=mechs,
                         n_boot=args.bootstrap, seed=args.seed)
    rep["inputs"] = {"table": str(args.table), "rows": t.rows, "dropped": t.dropped, "pctr_from": args.pctr_column or
                     f"calibrator {args.calibrator} on {args.score_column}", "true_ctr": args.true_ctr_column,
                     "reserve": args.reserve if spec is None else {"field": spec["field"], "default": spec["default"],
                                                                   "from": args.reserves or "fitted here"}}
    text = auction_report_text(rep)
    if spec is not None:
        shown = ", ".join(f"{k} {v:.3g}" for k, v in sorted(spec["reserves"].items(), key=lambda kv: kv[0])[:12])
        text += f"reserves per {spec['field']} ({'fitted here' if args.fit_reserves else args.reserves}): {shown}; " \
                f"other values {spec['default']:.3g}\n"
    with run_folder(args.out, overwrite=args.force, kind="auction", inputs=inputs) as tmp:
        atomic_write_json(tmp / "report.json", rep)
        atomic_write_text(tmp / "report.txt", text)
        _save(_auction_figure(rep), tmp / "auction.png")
        written = ["report.json", "report.txt", "auction.png"]
        if args.fit_reserves:
            atomic_write_json(tmp / "reserves.json", spec)
            _save(_reserves_figure(spec), tmp / "reserves.png")
            written += ["reserves.json", "reserves.png"]
    print(text, end="")
    print(f"wrote {args.out}/" + ", ".join(written))
    return 0
