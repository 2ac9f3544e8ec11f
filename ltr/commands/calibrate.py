"""``ltr calibrate``: fit a calibrator on a held-out part, report before and after.

Methods: platt, isotonic, isotonic-strict, beta, spline (global maps), field-aware and
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

The rows are split at random (seeded) into a fit part (``--fit-fraction``) and an evaluation part;
the calibrator is fitted on the fit part only and every number in the report is measured on the
evaluation part. With fields the report adds normalized entropy, PCOC, the per-field table (worst
values first, F-RCE per field) and the AUC within each field; weights weight those metrics (the fit
itself is unweighted). Written atomically into ``--out``: ``calibrator.json`` (JSON, reloadable with
:func:`ltr.calibrate.factory.load_calibrator`), ``report.json``, ``report.txt``, ``reliability.png``.
"""

from __future__ import annotations

import argparse
import re

import numpy as np

from ltr.checks import SEED, integer, number
from ltr.commands import check_one_stdin
from ltr.data.columns import read_id_column, read_number_column
from ltr.errors import LtrError

FORMATS_HELP = "one value per line, or a .npy 1-D array"
# = ltr.calibrate.calibrators.ALL_METHODS (written out so that `ltr --help` does not import the package)
ALL_METHODS = ("platt", "isotonic", "isotonic-strict", "beta", "spline", "field-aware", "multicalibration")
FIELD_METHODS = ("field-aware", "multicalibration")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="calibrate scores into probabilities (Platt, isotonic, strict isotonic) with an AUC check",
        description="Fit a calibrator on a held-out part of (score, label) rows and report, on the other part, "
        "LogLoss, Brier, ECE and MCE (equal-width and equal-mass bins) before and after, the AUC before and "
        "after (global, and grouped with --groups) with the number of tied pairs the calibration created, and "
        f"a reliability diagram. Input files: {FORMATS_HELP}, same row order in every file.",
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
                   "and what field-aware / multicalibration calibrate on")
    p.add_argument("--weight-column", default=None, help="--table: a column of row weights for the reported metrics")
    p.add_argument("--global-map", choices=("platt", "beta", "spline"), default=None,
                   help="field-aware / multicalibration: the global map under the field offsets "
                   "(default: spline for field-aware, platt for multicalibration)")
    p.add_argument("--prior-clicks", type=number(min=0), default=30.0,
                   help="field-aware / multicalibration: shrinkage of each value's offset towards the global map, "
                   "in clicks (offset ~ (clicks - predicted) / (predicted + this))")
    p.add_argument("--min-count", type=number(min=0), default=1000.0,
                   help="per-field table: values with fewer rows are listed after the others")
    p.add_argument("--groups", default=None, metavar="FILE",
                   help=f"optional query / request / user id per row ({FORMATS_HELP}): grouped AUC, group-wise split")
    p.add_argument("--method", required=True, choices=ALL_METHODS,
                   help="platt: logistic fit on the score or its logit; isotonic: scikit-learn's PAV (may create "
                   "ties, reported); isotonic-strict: isotonic with the created ties broken in score order (AUC unchanged); "
                   "beta: logistic fit on (ln s, -ln(1-s)); spline: monotone piecewise-linear in the logit; "
                   "field-aware: global map + shrunk offset per field value (order kept inside each cell of the fields); "
                   "multicalibration: rounds of offsets per field value x score bin, stopped on held-out data")
    p.add_argument("--fit-fraction", type=number(above=0, below=1), default=0.5,
                   help="share of rows (of groups, with --groups) used to fit; the rest is the evaluation part")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the fit / evaluation split")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for calibrator.json, report.json, report.txt, reliability.png")
    p.add_argument("--bins", type=integer(min=1), default=15, help="bins of ECE, MCE and the reliability diagram")
    p.add_argument("--platt-input", choices=("auto", "logit", "score"), default="auto",
                   help="Platt's input: logit of probability scores, or the raw score; auto = logit when every "
                   "score is in [0, 1], else score")
    p.add_argument("--smoothed-targets", action="store_true",
                   help="Platt with Platt's smoothed targets (N+ + 1)/(N+ + 2) and 1/(N- + 2) (finite on separable data)")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="also log the reliability diagrams (overall and one per field) to this TensorBoard folder")
    p.add_argument("--stream", action="store_true",
                   help="--table: one pass in record batches, fitting on binned sufficient statistics (tables larger "
                   "than memory; methods platt, isotonic, isotonic-strict, beta, spline, field-aware; no PNG diagrams)")
    p.add_argument("--batch-size", type=integer(min=1), default=262_144,
                   help="--stream: rows per record batch (the temporaries of one batch take about 300 bytes a row)")
    p.add_argument("--bin-width", type=number(above=0), default=0.05,
                   help="--stream: width of the score bins in the logit (bins on [-16, 16] plus two tails)")
    p.add_argument("--score-scale", choices=("auto", "probability", "logit"), default="auto",
                   help="--stream: probabilities in [0, 1] or logits; auto decides on the first batch")
    p.set_defaults(func=run)


def split_rows(n: int, fit_fraction: float, seed: int, groups=None) -> np.ndarray:
    """Boolean mask of the fit rows: a seeded share of the rows, or of the groups with ``groups``."""
    if not 0.0 < fit_fraction < 1.0:
        raise LtrError(f"--fit-fraction must be strictly between 0 and 1, got {fit_fraction}")
    rng = np.random.default_rng(seed)
    if groups is None:
        k = int(round(fit_fraction * n))
        fit = np.zeros(n, dtype=bool)
        fit[rng.permutation(n)[:k]] = True
        return fit
    keys, codes = np.unique(groups, return_inverse=True)
    k = int(round(fit_fraction * keys.shape[0]))
    chosen = np.zeros(keys.shape[0], dtype=bool)
    chosen[rng.permutation(keys.shape[0])[:k]] = True
    return chosen[codes.reshape(-1)]


def _read_inputs(args):
    """(scores, labels, groups, fields, weights, inputs) from --table or the one-column files."""
    if (args.table is None) == (args.scores is None and args.labels is None):
        raise LtrError("give either --table (with --score-column / --label-column) or --scores and --labels")
    if args.table is not None:
        from ltr.calibrate.field_report import read_calibration_table

        if args.groups is not None:
            raise LtrError("--groups goes with --scores/--labels; with --table name the field columns in --field-columns")
        names = [c.strip() for c in args.field_columns.split(",") if c.strip()]
        t = read_calibration_table(args.table, score_column=args.score_column, label_column=args.label_column,
                                   field_columns=names, weight_column=args.weight_column)
        return t.scores, t.labels, None, t.fields, t.weights, [("--table", args.table)]
    if args.scores is None or args.labels is None:
        raise LtrError("--scores and --labels go together")
    if args.field_columns or args.weight_column:
        raise LtrError("--field-columns and --weight-column need --table")
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
    return scores, labels, groups, {}, None, inputs


def _fit(args, scores, labels, fields, fit, probabilities):
    from ltr.calibrate.factory import make_calibrator

    if args.method in FIELD_METHODS:
        if not fields:
            raise LtrError(f"--method {args.method} needs --table with --field-columns")
        gm = args.global_map or ("spline" if args.method == "field-aware" else "platt")
        cal = make_calibrator(args.method, fields=list(fields), global_method=gm, prior_clicks=args.prior_clicks)
        return cal.fit(scores[fit], labels[fit], {k: v[fit] for k, v in fields.items()}, held_out=True)
    if args.method in ("beta", "spline"):
        from ltr.calibrate.field_calibrators import make_global_map

        return make_global_map(args.method, scores).fit(scores[fit], labels[fit], held_out=True)
    kwargs = {}
    if args.method == "platt":
        kwargs = {"input": ("logit" if probabilities else "score") if args.platt_input == "auto" else args.platt_input,
                  "smoothed_targets": args.smoothed_targets}
    return make_calibrator(args.method, **kwargs).fit(scores[fit], labels[fit], held_out=True)


def _run_stream(args) -> int:
    """``--stream``: one pass over the table into binned statistics, fit and report from them."""
    import time

    from ltr.calibrate.field_report import field_report_text
    from ltr.calibrate.stream_fit import STREAM_METHODS, fit_binned
    from ltr.calibrate.stream_report import binned_report
    from ltr.calibrate.stream_stats import BinGrid, stream_table
    from ltr.io_utils import atomic_write_json, atomic_write_text
    from ltr.runs.folder import claim_folder

    if args.table is None or args.scores is not None or args.labels is not None or args.groups is not None:
        raise LtrError("--stream reads --table (a Parquet file / folder or a CSV file); not --scores / --labels / --groups")
    if args.smoothed_targets or args.platt_input != "auto":
        raise LtrError("--stream fits Platt on the logit of probability scores, or on raw scores (--score-scale); "
                       "--platt-input and --smoothed-targets need the rows in memory")
    if args.method not in STREAM_METHODS:
        raise LtrError(f"--stream fits {', '.join(STREAM_METHODS)}; --method {args.method} needs the rows in memory (drop --stream)")
    inputs = [("--table", args.table)]
    claim_folder(args.out, "calibrate", inputs=inputs, create=False)
    if args.tensorboard:
        from ltr.checks import output_folder

        output_folder(args.tensorboard, "--tensorboard", inputs=inputs)
    names = [c.strip() for c in args.field_columns.split(",") if c.strip()]
    t0 = time.perf_counter()
    stats = stream_table(args.table, score_column=args.score_column, label_column=args.label_column, field_columns=names,
                         weight_column=args.weight_column, score_scale=args.score_scale, fit_fraction=args.fit_fraction,
                         seed=args.seed, grid=BinGrid(width=args.bin_width), batch_size=args.batch_size)
    t1 = time.perf_counter()
    cal = fit_binned(stats, args.method, global_method=args.global_map, prior_clicks=args.prior_clicks)
    rep = binned_report(stats, cal, field_method=args.method == "field-aware", min_count=args.min_count)
    t2 = time.perf_counter()
    out = claim_folder(args.out, "calibrate", inputs=inputs)
    cal.save(out / "calibrator.json")
    timing = {"read_and_bin_s": t1 - t0, "fit_and_report_s": t2 - t1, "rows_per_s": stats.n_rows / max(t2 - t0, 1e-9)}
    summary = {"method": args.method, "field_report": rep, "timing": timing,
               "inputs": {"table": str(args.table), "fields": names, "weight_column": args.weight_column,
                          "rows": stats.n_rows, "fit_rows": int(stats.fit.col("rows").sum()),
                          "eval_rows": int(stats.eval.col("rows").sum()), "fit_fraction": args.fit_fraction,
                          "seed": args.seed, "split": "hash of the row position (ltr.calibrate.stream_stats.hash_split)",
                          "scores_are": "probabilities" if stats.probabilities else "logits"}}
    atomic_write_json(out / "report.json", summary)
    head = (f"ltr calibrate --stream --method {args.method}: {stats.n_rows} rows in one pass "
            f"({timing['rows_per_s']:.0f} rows/s), {rep['binning']['entries_eval']} evaluation entries of bin width "
            f"{args.bin_width}; before-calibration sums exact, after-calibration numbers and AUCs binned\n")
    text = head + field_report_text(rep)
    atomic_write_text(out / "report.txt", text)
    if args.tensorboard:
        from ltr.calibrate.tensorboard import log_binned_calibration

        log_binned_calibration(args.tensorboard, args.method, rep)
    print(text, end="")
    print(f"wrote {out}/calibrator.json, report.json, report.txt")
    return 0


def run(args) -> int:
    if args.stream:
        return _run_stream(args)
    from ltr.calibrate.field_report import BoundFields, field_report, field_report_text, save_field_reliability
    from ltr.calibrate.report import CalibrationReport, save_reliability_diagram
    from ltr.checks import output_folder
    from ltr.io_utils import atomic_write_json, atomic_write_text
    from ltr.runs.folder import claim_folder

    scores, labels, groups, fields, weights, inputs = _read_inputs(args)
    claim_folder(args.out, "calibrate", inputs=inputs, create=False)
    if args.tensorboard:
        output_folder(args.tensorboard, "--tensorboard", inputs=inputs)
    fit = split_rows(scores.shape[0], args.fit_fraction, args.seed, groups)
    ev = ~fit
    for name, m in (("fit", fit), ("evaluation", ev)):
        n_pos = int(labels[m].sum())
        if n_pos == 0 or n_pos == int(m.sum()):
            raise LtrError(f"the {name} part has {n_pos} positives in {int(m.sum())} rows: both classes are needed "
                           "(change --fit-fraction or --seed)")
    probabilities = bool(scores.min() >= 0.0 and scores.max() <= 1.0)
    cal = _fit(args, scores, labels, fields, fit, probabilities)
    f_ev = {k: v[ev] for k, v in fields.items()}
    applied = BoundFields(cal, f_ev) if args.method in FIELD_METHODS else cal
    # "Before" judges the scores as probabilities when they are in [0, 1], else as logits.
    from scipy.special import expit  # here, so that the command's parser does not load scipy

    before = scores[ev] if probabilities else expit(scores[ev])
    before_is = "the scores" if probabilities else "sigmoid(scores) (the scores are not in [0, 1]: read as logits)"
    report = CalibrationReport.build(args.method, applied, scores[ev], labels[ev], eval_probs_before=before,
                                     groups=None if groups is None else groups[ev], n_bins=args.bins, before_is=before_is)
    after = applied.predict(scores[ev])
    w_ev = None if weights is None else weights[ev]
    frep = field_report(labels[ev], before, after, f_ev, scores=scores[ev], weights=w_ev, min_count=args.min_count,
                        calibrated_fields=list(fields) if args.method in FIELD_METHODS else (), seed=args.seed)

    out = claim_folder(args.out, "calibrate", inputs=inputs)
    cal.save(out / "calibrator.json")
    summary = report.to_dict()
    summary["field_report"] = frep
    summary["inputs"] = {
        **{k.lstrip("-"): None if v is None else str(v) for k, v in inputs},
        "fields": list(fields), "weight_column": args.weight_column if args.table else None,
        "rows": int(scores.shape[0]), "fit_rows": int(fit.sum()), "eval_rows": int(ev.sum()),
        "fit_fraction": args.fit_fraction, "seed": args.seed,
        "before_is": "the scores" if probabilities else "sigmoid(scores)",
    }
    atomic_write_json(out / "report.json", summary)
    text = report.to_text() + "\n" + field_report_text(frep)
    atomic_write_text(out / "report.txt", text)
    save_reliability_diagram(out / "reliability.png", labels[ev], {"before": before, f"after ({args.method})": after},
                             n_bins=args.bins, title=f"ltr calibrate --method {args.method}")
    for name, values in f_ev.items():
        save_field_reliability(out / f"reliability_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png", labels[ev], {"before": before, "after": after},
                               values, name, n_bins=min(args.bins, 10), seed=args.seed)
    if args.tensorboard:
        from ltr.calibrate.tensorboard import log_calibration

        log_calibration(args.tensorboard, args.method, labels[ev], {"before": before, "after": after}, f_ev, frep,
                        n_bins=args.bins, seed=args.seed)
    print(text, end="")
    extra = "".join(f", reliability_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png" for name in f_ev)
    print(f"wrote {out}/calibrator.json, report.json, report.txt, reliability.png{extra}")
    return 0
