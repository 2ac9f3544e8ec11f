"""``ltr calibrate``: fit a calibrator on a held-out part, report before and after; or apply a saved one.

Methods: platt, isotonic, isotonic-strict, beta, spline (global maps), field-aware, field-joint and
multicalibration (they read field columns). Input is either a table (``--table``: a Parquet file, a
folder of Parquet files, or a CSV file with a header; columns named by ``--score-column``,
``--label-column``, ``--field-columns a,b``, ``--weight-column``) or one file per column:

* text: one value per line (surrounding white space ignored; an empty line before the last value
  is an error, so that row counts cannot drift silently; there are no comment lines);
* ``.npy``: a 1-D array (read with ``allow_pickle=False``).

Both are read by :mod:`ltr.data.columns`.

``--scores``: numbers (probabilities in [0, 1], or raw scores such as logits); ``--labels``: 0 / 1;
``--groups`` (optional): a query / request / user id per row (any text), for the grouped AUC and a
split that never cuts a group.

The rows are split into a fit part (``--fit-fraction``) and an evaluation part by a seeded hash of
each row's position in the input (:func:`ltr.calibrate.stream_stats.hash_split_rows`: the same rows
in memory and with ``--stream``), or, with ``--groups``, by a seeded draw of the groups. The
calibrator is fitted on the fit part only and every number in the report is measured on the
evaluation part; ``--fit-fraction 1`` fits on every row and writes no evaluation (judge the
calibrator on another day's table with ``--apply``). With fields the report adds normalized
entropy, PCOC, the per-field table (worst values first, F-RCE per field) and the AUC within each
field; weights weight those metrics (the fit itself is unweighted). Written into ``--out``, a new
folder (or, with ``--force``, a replaced earlier run folder; it appears whole or not at all):
``calibrator.json`` (reloadable with :func:`ltr.calibrate.factory.load_calibrator`), ``report.json``,
``report.txt``, ``reliability.png`` (and one picture per field).

``--apply CAL_DIR``: the day-2 pass, :mod:`ltr.calibrate.apply_table`.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import numpy as np

from ltr.base.checks import SEED, integer, number
from ltr.commands import check_one_stdin
from ltr.data.columns import read_id_column, read_number_column
from ltr.base.errors import LtrError

FORMATS_HELP = "one value per line, or a .npy 1-D array"
# = ltr.calibrate.calibrators.ALL_METHODS (written out so that `ltr --help` does not import the package)
ALL_METHODS = ("platt", "isotonic", "isotonic-strict", "beta", "spline", "field-aware", "field-joint", "multicalibration")
FIELD_METHODS = ("field-aware", "field-joint", "multicalibration")
# below these the evaluation part's numbers are mostly noise: said on stderr and in the report
SMALL_EVAL_ROWS, SMALL_EVAL_CLICKS = 1000, 50


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="calibrate scores into probabilities (global maps, field-aware, multicalibration) with an order "
        "check; apply a saved calibrator to a new day (--apply)",
        description="Fit a calibrator on a held-out part of (score, label) rows and report, on the other part, "
        "LogLoss, Brier, ECE and MCE (equal-width and equal-mass bins) before and after, the AUC before and "
        "after (global, and grouped with --groups) with the number of tied pairs the calibration created, and "
        "a reliability diagram with per-bin counts and intervals; with --table and --field-columns also NE, "
        "PCOC and the per-field table. --apply writes a saved calibrator's probabilities for a new table "
        f"and judges it there. Input files: {FORMATS_HELP}, same row order in every file.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--scores", default=None, metavar="FILE", help=f"model scores, {FORMATS_HELP} ('-': standard input)")
    p.add_argument("--labels", default=None, metavar="FILE", help=f"0/1 labels (click / no click), {FORMATS_HELP} ('-': standard input)")
    p.add_argument("--table", default=None, metavar="PATH",
                   help="instead of --scores/--labels: a Parquet file, a folder of Parquet files, or a CSV file with a header")
    p.add_argument("--score-column", default="score", help="--table: the column of model scores")
    p.add_argument("--label-column", default="label", help="--table: the column of 0/1 labels")
    p.add_argument("--field-columns", default="", metavar="A,B",
                   help="--table: comma-separated field columns (advertiser,site,device,position): the per-field report, "
                   "and what field-aware / field-joint / multicalibration calibrate on; values are compared as values "
                   "(3, 3.0 and \"3\" are one value)")
    p.add_argument("--weight-column", default=None, help="--table: a column of row weights for the reported metrics")
    p.add_argument("--global-map", choices=("platt", "beta", "spline"), default=None,
                   help="field-aware / multicalibration: the global map under the field offsets "
                   "(default: spline for field-aware, platt for multicalibration)")
    p.add_argument("--prior-clicks", type=number(min=0), default=30.0,
                   help="field methods: shrinkage of each value's offset towards the global map, "
                   "in clicks (offset ~ (clicks - predicted) / (predicted + this)); field-joint: its starting value")
    p.add_argument("--min-count", type=number(min=0), default=1000.0,
                   help="per-field table: values with fewer rows are listed after the others")
    p.add_argument("--groups", default=None, metavar="FILE",
                   help=f"optional query / request / user id per row ({FORMATS_HELP}): grouped AUC, group-wise split")
    p.add_argument("--method", default=None, choices=ALL_METHODS,
                   help="(required unless --apply) platt: logistic fit on the score or its logit; isotonic: scikit-learn's "
                   "PAV (may create ties, reported); isotonic-strict: isotonic with the created ties broken in score "
                   "order (AUC unchanged); beta: logistic fit on (ln s, -ln(1-s)); spline: monotone piecewise-linear in "
                   "the logit; field-aware: global map + shrunk offset per field value (order kept inside each cell of "
                   "the fields); field-joint: the spline and the offsets fitted jointly, penalties by empirical Bayes, "
                   "field x score-segment slopes kept where held-out data supports them (order kept inside each "
                   "cell); multicalibration: rounds "
                   "of offsets per field value x score bin, stopped on held-out data")
    p.add_argument("--fit-fraction", type=number(above=0, max=1), default=0.5,
                   help="share of rows (of groups, with --groups) used to fit; the rest is the evaluation part "
                   "(1: fit on every row, no evaluation)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the fit / evaluation split")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="a new folder for calibrator.json, report.json, report.txt, reliability.png (--apply: "
                   "calibrated.parquet and, with labels, the report)")
    p.add_argument("--force", action="store_true", help="replace --out if it is a run folder made by ltr (never any other folder)")
    p.add_argument("--bins", type=integer(min=1), default=15, help="bins of ECE, MCE and the reliability diagram")
    p.add_argument("--platt-input", choices=("auto", "logit", "score"), default="auto",
                   help="Platt's input: logit of probability scores, or the raw score; auto = by --score-scale")
    p.add_argument("--smoothed-targets", action="store_true",
                   help="Platt with Platt's smoothed targets (N+ + 1)/(N+ + 2) and 1/(N- + 2) (finite on separable data)")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="also log the reliability diagrams (overall and one per field) to this TensorBoard folder")
    p.add_argument("--stream", action="store_true",
                   help="--table: one pass in record batches, fitting on binned sufficient statistics (tables larger "
                   "than memory; methods platt, isotonic, isotonic-strict, beta, spline, field-aware; no PNG diagrams)")
    p.add_argument("--batch-size", type=integer(min=1), default=262_144,
                   help="--stream / --apply: rows per record batch (the temporaries of one batch take about 300 bytes a row)")
    p.add_argument("--bin-width", type=number(above=0), default=0.05,
                   help="--stream / --apply: width of the score bins in the logit (bins on [-16, 16] plus two tails)")
    p.add_argument("--score-scale", choices=("auto", "probability", "logit"), default="auto",
                   help="probabilities in [0, 1] or logits; auto = probabilities when every score is in [0, 1] "
                   "(with --stream: decided on the first batch); probability refuses a score outside [0, 1]")
    p.add_argument("--drop-invalid", action="store_true",
                   help="--table: leave out rows whose score is not a finite number, whose label is not 0/1, whose "
                   "field value is empty or whose weight is bad, and count them in the report (default: refuse them)")
    p.add_argument("--apply", default=None, metavar="CAL_DIR",
                   help="apply the calibrator of an earlier run (its folder, or a calibrator.json) to --table in one "
                   "streamed pass: --out gets calibrated.parquet (the table's columns plus 'calibrated') and, when the "
                   "table has the label column, the report judging the calibrator on it")
    p.add_argument("--baseline", default=None, metavar="CAL_DIR|COLUMN",
                   help="--apply: judge against this calibrator (a folder or calibrator.json) applied to the same "
                   "scores, or this column of probabilities: RCE = 1 - log loss / the baseline's log loss")
    p.set_defaults(func=run)


def split_rows(n: int, fit_fraction: float, seed: int, groups=None, positions=None) -> np.ndarray:
    """Boolean mask of the fit rows: the seeded hash of each row's position (``positions``: the rows'
    positions in the file, default ``0 .. n-1``), or a seeded share of the groups with ``groups``."""
    if not 0.0 < fit_fraction <= 1.0:
        raise LtrError(f"--fit-fraction must be in (0, 1], got {fit_fraction}")
    if groups is None:
        from ltr.calibrate.stream_stats import hash_split_rows

        return hash_split_rows(np.arange(n) if positions is None else positions, fit_fraction, seed)
    rng = np.random.default_rng(seed)
    keys, codes = np.unique(groups, return_inverse=True)
    k = int(round(fit_fraction * keys.shape[0]))
    chosen = np.zeros(keys.shape[0], dtype=bool)
    chosen[rng.permutation(keys.shape[0])[:k]] = True
    return chosen[codes.reshape(-1)]


class Progress:
    """One line per stage on standard error, with the seconds since the start."""

    def __init__(self, what: str = "ltr calibrate"):
        self.what, self.t0 = what, time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"{self.what}: {message} ({time.perf_counter() - self.t0:.1f} s)", file=sys.stderr, flush=True)


def _read_inputs(args) -> dict:
    """scores, labels, groups, fields, weights, inputs, and from --table rows / dropped / n_read."""
    if (args.table is None) == (args.scores is None and args.labels is None):
        raise LtrError("give either --table (with --score-column / --label-column) or --scores and --labels")
    if args.table is not None:
        from ltr.calibrate.tables import read_calibration_table

        if args.groups is not None:
            raise LtrError("--groups goes with --scores/--labels; with --table name the field columns in --field-columns")
        t = read_calibration_table(args.table, score_column=args.score_column, label_column=args.label_column,
                                   field_columns=_field_names(args), weight_column=args.weight_column,
                                   drop_invalid=args.drop_invalid)
        return {"scores": t.scores, "labels": t.labels, "groups": None, "fields": t.fields, "weights": t.weights,
                "inputs": [("--table", args.table)], "rows": t.rows, "dropped": t.dropped, "n_read": t.n_read,
                "where": f"{args.table}: column {args.score_column!r}"}
    if args.scores is None or args.labels is None:
        raise LtrError("--scores and --labels go together")
    if args.field_columns or args.weight_column or args.drop_invalid:
        raise LtrError("--field-columns, --weight-column and --drop-invalid need --table")
    check_one_stdin(scores=args.scores, labels=args.labels, groups=args.groups)
    scores = read_number_column(args.scores, what="score", option="--scores")
    labels = read_number_column(args.labels, what="label", allowed=(0, 1), option="--labels")
    if labels.shape != scores.shape:
        raise LtrError(f"{args.labels} has {labels.shape[0]} rows but {args.scores} has {scores.shape[0]}")
    groups = None
    if args.groups is not None:
        groups = read_id_column(args.groups, option="--groups")
        if groups.shape != scores.shape:
            raise LtrError(f"{args.groups} has {groups.shape[0]} rows but {args.scores} has {scores.shape[0]}")
    inputs = [("--scores", args.scores), ("--labels", args.labels), ("--groups", args.groups)]
    return {"scores": scores, "labels": labels, "groups": groups, "fields": {}, "weights": None, "inputs": inputs,
            "rows": None, "dropped": None, "n_read": int(scores.shape[0]), "where": f"{args.scores}"}


def _field_names(args) -> list[str]:
    return [c.strip() for c in args.field_columns.split(",") if c.strip()]


def _fit(args, scores, labels, fields, fit, probabilities):
    from ltr.calibrate.factory import make_calibrator

    scale = "probability" if probabilities else "logit"
    if args.method in FIELD_METHODS:
        if not fields:
            raise LtrError(f"--method {args.method} needs --table with --field-columns")
        kwargs = {"prior_clicks": args.prior_clicks, "score_scale": scale}
        if args.method == "field-joint":
            if args.global_map not in (None, "spline"):
                raise LtrError("--method field-joint fits a spline jointly with the offsets; --global-map does not apply")
            kwargs["seed"] = args.seed  # of its held-out share
        else:
            kwargs["global_method"] = args.global_map or ("spline" if args.method == "field-aware" else "platt")
        cal = make_calibrator(args.method, fields=list(fields), **kwargs)
        return cal.fit(scores[fit], labels[fit], {k: v[fit] for k, v in fields.items()}, held_out=True)
    if args.method in ("beta", "spline"):
        from ltr.calibrate.field_calibrators import make_global_map

        return make_global_map(args.method, scores, probabilities=probabilities).fit(scores[fit], labels[fit], held_out=True)
    kwargs = {}
    if args.method == "platt":
        kwargs = {"input": ("logit" if probabilities else "score") if args.platt_input == "auto" else args.platt_input,
                  "smoothed_targets": args.smoothed_targets}
    return make_calibrator(args.method, **kwargs).fit(scores[fit], labels[fit], held_out=True)


def _dropped_line(dropped: dict | None, n_read: int) -> str:
    if not dropped:
        return ""
    return (f"left out {dropped['total']} invalid rows of {n_read} (--drop-invalid): a score that is not finite "
            f"{dropped['score']}, a label other than 0/1 {dropped['label']}, an empty field {dropped['fields']}, "
            f"a bad weight {dropped['weight']}\n")


def _run_stream(args) -> int:
    """``--stream``: one pass over the table into binned statistics, fit and report from them."""
    from ltr.calibrate.field_report import field_report_text
    from ltr.calibrate.stream_fit import STREAM_METHODS, fit_binned
    from ltr.calibrate.stream_report import binned_report
    from ltr.calibrate.stream_stats import BinGrid, stream_table
    from ltr.base.io_utils import atomic_write_json, atomic_write_text
    from ltr.runs.folder import check_destination, run_folder

    if args.table is None or args.scores is not None or args.labels is not None or args.groups is not None:
        raise LtrError("--stream reads --table (a Parquet file / folder or a CSV file); not --scores / --labels / --groups")
    if args.smoothed_targets or args.platt_input != "auto":
        raise LtrError("--stream fits Platt on the logit of probability scores, or on raw scores (--score-scale); "
                       "--platt-input and --smoothed-targets need the rows in memory")
    if args.method not in STREAM_METHODS:
        raise LtrError(f"--stream fits {', '.join(STREAM_METHODS)}; --method {args.method} needs the rows in memory (drop --stream)")
    inputs = [("--table", args.table)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    if args.tensorboard:
        from ltr.base.checks import output_folder

        output_folder(args.tensorboard, "--tensorboard", inputs=inputs)
    names = _field_names(args)
    progress = Progress()
    t0 = time.perf_counter()
    stats = stream_table(args.table, score_column=args.score_column, label_column=args.label_column, field_columns=names,
                         weight_column=args.weight_column, score_scale=args.score_scale, fit_fraction=args.fit_fraction,
                         seed=args.seed, grid=BinGrid(width=args.bin_width), batch_size=args.batch_size,
                         drop_invalid=args.drop_invalid)
    t1 = time.perf_counter()
    progress(f"read and binned {stats.n_rows} rows")
    cal = fit_binned(stats, args.method, global_method=args.global_map, prior_clicks=args.prior_clicks)
    progress(f"fitted {args.method}")
    has_eval = stats.canonical().eval.keys.shape[0] > 0
    rep = binned_report(stats, cal, field_method=args.method == "field-aware", min_count=args.min_count) if has_eval else None
    t2 = time.perf_counter()
    timing = {"read_and_bin_s": t1 - t0, "fit_and_report_s": t2 - t1, "rows_per_s": stats.n_rows / max(t2 - t0, 1e-9)}
    summary = {"method": args.method, "calibrator": cal.to_dict(), "field_report": rep, "timing": timing,
               "inputs": {"table": str(args.table), "fields": names, "weight_column": args.weight_column,
                          "rows": stats.n_rows, "rows_read": stats.n_read, "dropped": stats.dropped,
                          "fit_rows": int(stats.fit.col("rows").sum()), "eval_rows": int(stats.eval.col("rows").sum()),
                          "fit_fraction": args.fit_fraction, "seed": args.seed,
                          "split": "hash of the row position (ltr.calibrate.stream_stats.hash_split_rows)",
                          "scores_are": "probabilities" if stats.probabilities else "logits"}}
    head = (f"ltr calibrate --stream --method {args.method}: {stats.n_rows} rows in one pass "
            f"({timing['rows_per_s']:.0f} rows/s)")
    if rep is None:
        text = head + "\n" + _no_evaluation_text(summary["inputs"]["fit_rows"])
    else:
        text = (head + f", {rep['binning']['entries_eval']} evaluation entries of bin width {args.bin_width}; "
                "before-calibration sums exact, after-calibration numbers and AUCs binned\n" + field_report_text(rep))
    text = _dropped_line(stats.dropped, stats.n_read) + text
    with run_folder(args.out, overwrite=args.force, kind="calibrate", inputs=inputs) as tmp:
        cal.save(tmp / "calibrator.json")
        atomic_write_json(tmp / "report.json", summary)
        atomic_write_text(tmp / "report.txt", text)
    if args.tensorboard and rep is not None:
        from ltr.calibrate.tensorboard import log_binned_calibration

        log_binned_calibration(args.tensorboard, args.method, rep)
    print(text, end="")
    print(f"wrote {args.out}/calibrator.json, report.json, report.txt")
    return 0


def _no_evaluation_text(n_fit: int) -> str:
    return (f"fitted on all {n_fit} rows (--fit-fraction 1): there is no evaluation part, so nothing is judged here; "
            "judge the calibrator on another day's table with ltr calibrate --apply\n")


def _split(args, data: dict) -> tuple[np.ndarray, np.ndarray]:
    """The fit and evaluation masks, both classes checked; a small evaluation part is said on stderr."""
    labels = data["labels"]
    fit = split_rows(labels.shape[0], args.fit_fraction, args.seed, data["groups"], data["rows"])
    ev = ~fit
    for name, m in (("fit", fit), ("evaluation", ev)):
        n_pos = int(labels[m].sum())
        if (name == "fit" or m.any()) and (n_pos == 0 or n_pos == int(m.sum())):
            raise LtrError(f"the {name} part has {n_pos} positives in {int(m.sum())} rows: both classes are needed "
                           "(change --fit-fraction or --seed)")
    n_ev, c_ev = int(ev.sum()), int(labels[ev].sum())
    if 0 < n_ev and (n_ev < SMALL_EVAL_ROWS or min(c_ev, n_ev - c_ev) < SMALL_EVAL_CLICKS):
        data["small_eval"] = (f"warning: the evaluation part has only {n_ev} rows ({c_ev} clicks): its numbers are "
                              "mostly noise; fit on every row with --fit-fraction 1 and judge on another day with --apply")
        print(f"ltr calibrate: {data['small_eval']}", file=sys.stderr)
    return fit, ev


def _evaluate(args, data: dict, cal, ev, probabilities: bool):
    """The report on the evaluation part: (summary dict, text, series for the pictures)."""
    from scipy.special import expit  # here, so that the command's parser does not load scipy

    from ltr.calibrate.field_report import BoundFields, field_report, field_report_text
    from ltr.calibrate.report import CalibrationReport, reliability_bins

    scores, labels, fields, weights = data["scores"], data["labels"], data["fields"], data["weights"]
    f_ev = {k: v[ev] for k, v in fields.items()}
    applied = BoundFields(cal, f_ev) if args.method in FIELD_METHODS else cal
    # "Before" judges the scores as probabilities when they are read as such, else their sigmoid.
    before = scores[ev] if probabilities else expit(scores[ev])
    before_is = "the scores" if probabilities else "sigmoid(scores) (the scores are read as logits)"
    groups = None if data["groups"] is None else data["groups"][ev]
    report = CalibrationReport.build(args.method, applied, scores[ev], labels[ev], eval_probs_before=before,
                                     groups=groups, n_bins=args.bins, before_is=before_is)
    after = applied.predict(scores[ev])
    w_ev = None if weights is None else weights[ev]
    frep = field_report(labels[ev], before, after, f_ev, scores=scores[ev], weights=w_ev, min_count=args.min_count,
                        calibrated_fields=list(fields) if args.method in FIELD_METHODS else (), seed=args.seed)
    summary = report.to_dict()
    summary["field_report"] = frep
    summary["reliability"] = {name: {s: reliability_bins(labels[ev], p, args.bins, s) for s in ("width", "mass")}
                              for name, p in (("before", before), ("after", after))}
    text = report.to_text() + "\n" + field_report_text(frep)
    return summary, text, {"before": before, f"after ({args.method})": after}, f_ev


def _write_pictures(args, folder, labels, series: dict, f_ev: dict) -> list[str]:
    from ltr.calibrate.field_report import save_field_reliability
    from ltr.calibrate.report import save_reliability_diagram

    save_reliability_diagram(folder / "reliability.png", labels, series, n_bins=args.bins,
                             title=f"ltr calibrate --method {args.method}")
    names = ["reliability.png"]
    before, after = series.values()
    for name, values in f_ev.items():
        png = f"reliability_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png"
        save_field_reliability(folder / png, labels, {"before": before, "after": after}, values, name,
                               n_bins=min(args.bins, 10), seed=args.seed)
        names.append(png)
    return names


def run(args) -> int:
    if args.apply is not None:
        from ltr.calibrate.apply_table import run_apply

        return run_apply(args, Progress())
    if args.method is None:
        raise LtrError("--method is required (or --apply CAL_DIR to apply a saved calibrator)")
    if args.baseline is not None:
        raise LtrError("--baseline goes with --apply")
    if args.stream:
        return _run_stream(args)
    from ltr.calibrate.tables import scores_are_probabilities
    from ltr.base.checks import output_folder
    from ltr.base.io_utils import atomic_write_json, atomic_write_text
    from ltr.runs.folder import check_destination, run_folder

    progress = Progress()
    data = _read_inputs(args)
    scores, labels, inputs = data["scores"], data["labels"], data["inputs"]
    progress(f"read {scores.shape[0]} rows" + (f", left out {data['dropped']['total']} invalid" if data["dropped"] else ""))
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    if args.tensorboard:
        output_folder(args.tensorboard, "--tensorboard", inputs=inputs)
    probabilities = scores_are_probabilities(scores, args.score_scale, where=data["where"], rows=data["rows"])
    fit, ev = _split(args, data)
    cal = _fit(args, scores, labels, data["fields"], fit, probabilities)
    progress(f"fitted {args.method} on {int(fit.sum())} rows")
    info = {**{k.lstrip("-"): None if v is None else str(v) for k, v in inputs},
            "fields": list(data["fields"]), "weight_column": args.weight_column if args.table else None,
            "rows": int(scores.shape[0]), "rows_read": data["n_read"], "dropped": data["dropped"],
            "fit_rows": int(fit.sum()), "eval_rows": int(ev.sum()), "fit_fraction": args.fit_fraction, "seed": args.seed,
            "split": "groups drawn by seed" if data["groups"] is not None else
            "hash of the row position (ltr.calibrate.stream_stats.hash_split_rows)",
            "before_is": "the scores" if probabilities else "sigmoid(scores)", "warning": data.get("small_eval")}
    head = _dropped_line(data["dropped"], data["n_read"]) + (data["small_eval"] + "\n" if data.get("small_eval") else "")
    if ev.any():
        summary, text, series, f_ev = _evaluate(args, data, cal, ev, probabilities)
        progress("measured the evaluation part")
    else:
        summary, series = {"method": args.method, "n_fit": int(fit.sum()), "evaluation": None,
                           "calibrator": cal.to_dict()}, None
        text = f"calibration: {args.method}\n" + _no_evaluation_text(int(fit.sum()))
    summary["inputs"] = info
    text = head + text
    with run_folder(args.out, overwrite=args.force, kind="calibrate", inputs=inputs) as tmp:
        cal.save(tmp / "calibrator.json")
        atomic_write_json(tmp / "report.json", summary)
        atomic_write_text(tmp / "report.txt", text)
        pictures = _write_pictures(args, tmp, labels[ev], series, f_ev) if series else []
    if series:
        progress("drew the pictures")
    if args.tensorboard and series:
        from ltr.calibrate.tensorboard import log_calibration

        before, after = series.values()
        log_calibration(args.tensorboard, args.method, labels[ev], {"before": before, "after": after}, f_ev,
                        summary["field_report"], n_bins=args.bins, seed=args.seed)
    print(text, end="")
    print(f"wrote {args.out}/" + ", ".join(["calibrator.json", "report.json", "report.txt"] + pictures))
    return 0
