"""``ltr calibrate --apply CAL_DIR --table T --out DIR``: a saved calibrator on a new day, in one pass.

The table is read in record batches (all its columns); every batch is written to
``DIR/calibrated.parquet`` with one more column, ``calibrated`` (null on a row left out by
``--drop-invalid``), so memory holds one batch at a time. When the table has the label column the
same pass judges the calibrator there (``report.json``, ``report.txt``, ``reliability.png``,
``pcoc_<field>.png``):

* **exact** (sums over rows, as in :mod:`ltr.calibrate.stream_stats`): NE, PCOC, log loss, F-RCE,
  field ECE and every value's count / clicks / predicted clicks / PCOC, before (the scores read as
  probabilities, or their sigmoid) and after (the calibrated probabilities): each side has its own
  accumulator of per-(cell, logit bin) sums, fed the side's own probability of every row;
* **binned**: the AUCs (rows of one bin tied), the value ECE, the reliability bins (an entry's rows in
  the bin of its mean) and the PCOC intervals (delta method);
* the **order inside cells** of the calibrator's fields (for a global map: one cell) is checked on the
  rows of each record batch (adjacent pairs within a batch; a field-aware map keeps it by
  construction, which the count confirms);
* **unseen values**: per field, the values the fit never saw (they take no offset for that field),
  with their rows and impressions (the weight column's sum, else rows), and the rows where every
  field was unseen (the global map alone);
* ``--baseline``: another calibrator applied to the same scores, or a column of probabilities; its
  NE and PCOC, and RCE = 1 - log loss / the baseline's log loss (positive: better than the
  baseline), after and before.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["run_apply", "resolve_calibrator", "calibrator_scale", "APPLY_COLUMN"]

APPLY_COLUMN = "calibrated"


def resolve_calibrator(path, option: str = "--apply"):
    """A saved calibrator from a run folder (its ``calibrator.json``) or the JSON file itself."""
    from ltr.calibrate.factory import load_calibrator

    p = Path(path)
    if p.is_dir():
        p = p / "calibrator.json"
        if not p.exists():
            raise LtrError(f"{option} {path}: the folder holds no calibrator.json (give an `ltr calibrate` run folder)")
    return load_calibrator(p)


def calibrator_scale(cal) -> str | None:
    """How ``cal`` reads scores: "probability", "logit", or None (isotonic: either)."""
    inner = getattr(cal, "global_", None) or cal
    reads = {("platt", "logit"): "probability", ("platt", "score"): "logit", ("beta", "probability"): "probability",
             ("beta", "logit"): "logit", ("spline", "probability"): "probability", ("spline", "score"): "logit"}
    return reads.get((inner.kind, getattr(inner, "input", None)))


def _fields_of(cal) -> tuple:
    return tuple(getattr(cal, "fields", ()) or ())


def _predict(cal, s, values: dict):
    fields = _fields_of(cal)
    return cal.predict(s, {f: values[f] for f in fields}) if fields else cal.predict(s)


class _Unseen:
    """Per field, the values a field calibrator never saw, with rows and impressions (see the module)."""

    def __init__(self, cal):
        self.fields = _fields_of(cal)
        self.vocab = {f: dict.fromkeys(cal.fitted_values(f), 0.0) for f in self.fields}
        self.values = {f: {} for f in self.fields}
        self.rows_any = self.rows_all = 0
        self.imps_any = self.imps_all = 0.0

    def add(self, values: dict, w) -> None:
        from ltr.calibrate.field_calibrators import FieldCodes, unseen_values

        if not self.fields:
            return
        any_, all_ = None, None
        for f in self.fields:
            u = unseen_values(self.vocab[f], FieldCodes(values[f]), w)
            for key, (r, imp) in u["values"].items():
                acc = self.values[f].setdefault(key, [0, 0.0])
                acc[0], acc[1] = acc[0] + r, acc[1] + imp
            any_ = u["mask"] if any_ is None else any_ | u["mask"]
            all_ = u["mask"] if all_ is None else all_ & u["mask"]
        ww = np.ones(any_.shape[0]) if w is None else w
        self.rows_any += int(any_.sum())
        self.rows_all += int(all_.sum())
        self.imps_any += float(ww[any_].sum())
        self.imps_all += float(ww[all_].sum())

    def to_dict(self, top: int = 20) -> dict:
        per = {}
        for f, vals in self.values.items():
            ranked = sorted(vals.items(), key=lambda kv: (-kv[1][0], kv[0]))
            per[f] = {"values": len(vals), "rows": int(sum(v[0] for v in vals.values())),
                      "impressions": float(sum(v[1] for v in vals.values())),
                      "top": [{"value": k, "rows": v[0], "impressions": v[1]} for k, v in ranked[:top]]}
        return {"fields": per, "rows_with_an_unseen_value": self.rows_any, "impressions_with_an_unseen_value": self.imps_any,
                "rows_all_unseen": self.rows_all, "impressions_all_unseen": self.imps_all}


class _Judge:
    """The exact sums of each side (before, after, baseline), the order counts and the unseen values."""

    def __init__(self, fields, weighted: bool, before_prob: bool, grid, baseline: bool):
        from ltr.calibrate.stream_stats import BinnedStats

        def acc(prob):
            return BinnedStats(fields, probabilities=prob, grid=grid, fit_fraction=0.0, weighted=weighted)

        self.sides = {"before": acc(before_prob), "after": acc(True)}
        if baseline:
            self.sides["baseline"] = acc(True)
        self.order = {"reversed": 0, "ties_created": 0, "ties_broken": 0}

    def add(self, side_scores: dict, y, texts, w, rows, s, p, cells) -> None:
        from ltr.calibrate.field_calibrators import check_within_field_order

        for name, acc in self.sides.items():
            acc.add_batch(side_scores[name], y, texts, w, rows=rows)
        for k, v in check_within_field_order(s, p, cells).items():
            self.order[k] += v


def _check_options(args) -> None:
    given = [opt for opt, on in (("--method", args.method is not None), ("--stream", args.stream),
                                 ("--scores", args.scores is not None), ("--labels", args.labels is not None),
                                 ("--groups", args.groups is not None), ("--global-map", args.global_map is not None),
                                 ("--smoothed-targets", args.smoothed_targets),
                                 ("--platt-input", args.platt_input != "auto")) if on]
    if given:
        raise LtrError(f"--apply uses the saved calibrator as it is: {', '.join(given)} does not go with it")
    if args.table is None:
        raise LtrError("--apply needs --table (a Parquet file / folder or a CSV file with the scores of the new day)")


def _baseline(args, names: list, path):
    """("column", name), ("calibrator", cal) or None."""
    if args.baseline is None:
        return None
    if args.baseline in names:
        return ("column", args.baseline)
    if Path(args.baseline).exists():
        return ("calibrator", resolve_calibrator(args.baseline, "--baseline"))
    raise LtrError(f"--baseline {args.baseline}: neither a column of {path} (the columns are {', '.join(names)}) "
                   "nor a calibrator folder or file")


def _checked_probabilities(path, col, v, where) -> np.ndarray:
    bad = ~np.isfinite(v) | (v < 0) | (v > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise LtrError(f"{path}: column {col!r}, row {int(where[i]) + 1} holds {float(v[i])!r}, which is not a "
                       "probability in [0, 1]")
    return v


def _scale_of(args, cal, s, path, where) -> bool:
    """Whether the scores are probabilities (the calibrator says, else --score-scale, else the first batch)."""
    from ltr.calibrate.tables import scores_are_probabilities

    reads = calibrator_scale(cal)
    if reads is not None and args.score_scale not in ("auto", reads):
        raise LtrError(f"the calibrator reads its scores as {reads}s; --score-scale {args.score_scale} contradicts it")
    scale = reads or args.score_scale
    return scores_are_probabilities(s, scale, where=f"{path}: column {args.score_column!r}", rows=where)


class _Pass:
    """State of the one pass: the calibrator, the writer, the judge, the counts."""

    def __init__(self, args, cal, path, dataset, progress):
        self.args, self.cal, self.path, self.progress = args, cal, path, progress
        names = dataset.schema.names
        if APPLY_COLUMN in names:
            raise LtrError(f"{path} already has a column {APPLY_COLUMN!r}; rename it before --apply")
        self.has_labels = args.label_column in names
        self.baseline = _baseline(args, names, path)
        report_fields = [c.strip() for c in args.field_columns.split(",") if c.strip()] or list(_fields_of(cal))
        base_fields = _fields_of(self.baseline[1]) if self.baseline and self.baseline[0] == "calibrator" else ()
        self.fields = list(dict.fromkeys(report_fields + list(_fields_of(cal)) + list(base_fields)))
        wanted = [args.score_column] + self.fields + ([args.weight_column] if args.weight_column else [])
        wanted += [args.label_column] if self.has_labels else []
        wanted += [self.baseline[1]] if self.baseline and self.baseline[0] == "column" else []
        absent = [c for c in dict.fromkeys(wanted) if c not in names]
        if absent:
            raise LtrError(f"{path}: no column {absent[0]!r}; the columns are {', '.join(names)}")
        self.report_fields = report_fields
        self.names = {"score": args.score_column, "label": args.label_column if self.has_labels else None,
                      "fields": self.fields, "weight": args.weight_column}
        self.unseen, self.judge, self.prob = _Unseen(cal), None, None
        self.read = self.written = 0
        self.dropped: dict = {}

    def batch(self, batch, writer) -> None:
        import pyarrow as pa

        from ltr.calibrate.stream_stats import batch_columns

        args = self.args
        b = batch_columns(self.path, batch, self.names, self.read, args.drop_invalid)
        for k, v in b["dropped"].items():
            self.dropped[k] = self.dropped.get(k, 0) + v
        kept = np.arange(batch.num_rows) if b["keep"] is None else np.flatnonzero(b["keep"])
        where = self.read + kept
        self.read += batch.num_rows
        full = np.full(batch.num_rows, np.nan)
        s = b["s"]
        if s.shape[0]:
            if self.prob is None:
                self.prob = _scale_of(args, self.cal, s, self.path, where)
                self._start_judge()
            elif self.prob:  # a later batch must hold probabilities too
                from ltr.calibrate.tables import scores_are_probabilities

                scores_are_probabilities(s, "probability", where=f"{self.path}: column {args.score_column!r}", rows=where)
            values = {f: np.asarray(words, dtype=object)[idx] if len(words) else np.zeros(0, dtype=object)
                      for f, (idx, words) in zip(self.fields, b["texts"])}
            p = _predict(self.cal, s, values)
            full[kept] = p
            self.unseen.add(values, b["w"])
            if self.judge is not None:
                self._judge(batch, b, s, p, values, kept, where)
        writer.write_batch(batch.append_column(APPLY_COLUMN, pa.array(full, mask=np.isnan(full))))
        self.written += batch.num_rows

    def _start_judge(self) -> None:
        from ltr.calibrate.stream_stats import BinGrid

        if self.has_labels:
            self.judge = _Judge(self.report_fields, self.args.weight_column is not None, self.prob,
                                BinGrid(width=self.args.bin_width), self.baseline is not None)

    def _judge(self, batch, b, s, p, values, kept, where) -> None:
        from ltr.calibrate.field_calibrators import cell_codes, field_codes

        sides = {"before": s, "after": p}
        if self.baseline is not None:
            kind, what = self.baseline
            if kind == "column":
                from ltr.calibrate.stream_stats import _column_numbers

                sides["baseline"] = _checked_probabilities(self.path, what, _column_numbers(batch.column(what))[kept],
                                                           where)
            else:
                sides["baseline"] = _predict(what, s, values)
        texts = [b["texts"][self.fields.index(f)] for f in self.report_fields]
        cal_fields = _fields_of(self.cal)
        cells = (cell_codes(field_codes(values, cal_fields, s.shape[0]).values()) if cal_fields
                 else np.zeros(s.shape[0], dtype=np.int64))
        self.judge.add(sides, b["y"], texts, b["w"], where, s, p, cells)


def _report(pss: _Pass, args) -> dict | None:
    """The judged sides, the order checks and the baseline (None without labels)."""
    from ltr.calibrate.stream_report import binned_order, exact_side

    if pss.judge is None:
        return None
    sides = {name: acc.canonical() for name, acc in pss.judge.sides.items()}
    rep = {name: exact_side(acc, min_count=args.min_count) for name, acc in sides.items()}
    ob, oa = binned_order(sides["before"]), binned_order(sides["after"])
    order = {"auc_before": ob["auc"], "auc_after": oa["auc"], "within_field_auc": {
        f: {"before": ob["within_field_auc"][f], "after": oa["within_field_auc"][f],
            "unchanged": bool(ob["within_field_auc"][f] == oa["within_field_auc"][f])} for f in pss.report_fields}}
    order["within_cells"] = {"fields": list(_fields_of(pss.cal)) or ["(all rows: a global map)"],
                             "counted_over": f"adjacent pairs within record batches of {args.batch_size} rows",
                             **pss.judge.order}
    rep["order"] = order
    if "baseline" in rep:
        ll = {k: float(sides[k].eval.col("wll").sum()) for k in sides}
        what = f"column {pss.baseline[1]}" if pss.baseline[0] == "column" else f"calibrator {args.baseline}"
        rep["rce"] = {"baseline": what, "after": 1.0 - ll["after"] / ll["baseline"], "before": 1.0 - ll["before"] / ll["baseline"],
                      "log_loss": {k: v / float(sides[k].eval.col("w").sum()) for k, v in ll.items()}}
    rep["overall"] = {"rows": int(sides["after"].eval.col("rows").sum()), "clicks": float(sides["after"].eval.col("pos").sum())}
    return rep


def _text(pss: _Pass, args, rep, unseen: dict) -> str:
    from ltr.calibrate.field_report import field_report_text

    cal = pss.cal
    lines = [f"ltr calibrate --apply {args.apply} ({cal.kind}, fitted on {cal.n_fit_} rows) to {args.table}: "
             f"{pss.written} rows written to {APPLY_COLUMN}.parquet"]
    if args.drop_invalid and pss.dropped.get("total"):
        d = pss.dropped
        lines.append(f"left out {d['total']} invalid rows of {pss.read} (--drop-invalid; '{APPLY_COLUMN}' is null there): "
                     f"score {d['score']}, label {d.get('label', 0)}, fields {d['fields']}, weight {d.get('weight', 0)}")
    for f, u in unseen["fields"].items():
        if u["values"]:
            shown = ", ".join(f"{t['value']} ({t['rows']})" for t in u["top"][:5])
            lines.append(f"unseen {f} values (no offset for {f}): {u['values']} values, {u['rows']} rows, "
                         f"{u['impressions']:g} impressions; most rows: {shown}")
    if unseen["fields"]:
        lines.append(f"rows with a value unseen at fit time: {unseen['rows_with_an_unseen_value']} "
                     f"({unseen['impressions_with_an_unseen_value']:g} impressions); with every field unseen (the "
                     f"global map alone): {unseen['rows_all_unseen']} ({unseen['impressions_all_unseen']:g} impressions)")
    if rep is None:
        lines.append(f"no column {args.label_column!r} in the table: nothing judged")
        return "\n".join(lines) + "\n"
    lines += ["", "judged on this table (exact sums; AUCs binned; order counted within record batches):"]
    text = "\n".join(lines) + "\n" + field_report_text(rep)
    if "rce" in rep:
        r = rep["rce"]
        text += (f"baseline ({r['baseline']}): log loss {r['log_loss']['baseline']:.6f}, NE "
                 f"{rep['baseline']['normalized_entropy']:.5f}, PCOC {rep['baseline']['pcoc']:.4f}; "
                 f"RCE after {r['after']:+.5f}, before {r['before']:+.5f}\n")
    return text


def _pictures(pss: _Pass, args, rep, folder: Path) -> list[str]:
    from ltr.calibrate.report import reliability_figure_from_bins
    from ltr.calibrate.stream_report import binned_reliability
    from ltr.calibrate.tensorboard import pcoc_figure
    from ltr.base.io_utils import atomic_path

    def save(fig, name):
        with atomic_path(folder / name) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        return name

    curves = {name: {s: binned_reliability(acc, args.bins, s) for s in ("width", "mass")}
              for name, acc in pss.judge.sides.items()}
    out = [save(reliability_figure_from_bins(curves, n_bins=args.bins, title=f"ltr calibrate --apply {args.apply}"),
                "reliability.png")]
    for f in pss.report_fields:
        out.append(save(pcoc_figure(rep, f), f"pcoc_{re.sub(r'[^A-Za-z0-9_.-]', '_', f)}.png"))
    return out


# long: the pass from checks through writing, one story with its folder context manager
def run_apply(args, progress) -> int:
    """The ``--apply`` command (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.calibrate.stream_stats import _open_dataset
    from ltr.base.io_utils import atomic_write_json, atomic_write_text
    from ltr.runs.folder import check_destination, run_folder

    _check_options(args)
    cal = resolve_calibrator(args.apply)
    path = Path(args.table)
    if not path.exists():
        raise LtrError(f"{path}: no such file or folder")
    inputs = [("--table", args.table), ("--apply", args.apply)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    if args.tensorboard:
        from ltr.base.checks import output_folder

        output_folder(args.tensorboard, "--tensorboard", inputs=inputs)
    dataset = _open_dataset(path, [args.score_column])
    pss = _Pass(args, cal, path, dataset, progress)
    schema = dataset.schema.append(pa.field(APPLY_COLUMN, pa.float64()))
    t0 = time.perf_counter()
    with run_folder(args.out, overwrite=args.force, kind="calibrate", inputs=inputs) as tmp:
        with pq.ParquetWriter(tmp / f"{APPLY_COLUMN}.parquet", schema) as writer:
            for i, batch in enumerate(dataset.to_batches(batch_size=int(args.batch_size))):
                if batch.num_rows:
                    pss.batch(batch, writer)
                if i % 20 == 19:
                    progress(f"applied {pss.read} rows")
        if pss.read == 0:
            raise LtrError(f"{path}: the table has no rows")
        progress(f"applied {pss.read} rows in one pass")
        rep = _report(pss, args)
        unseen = pss.unseen.to_dict()
        summary = {"apply": {"calibrator": str(args.apply), "kind": cal.kind, "n_fit": cal.n_fit_,
                             "fields": list(_fields_of(cal)), "field_types": getattr(cal, "field_types_", None)},
                   "inputs": {"table": str(path), "rows_read": pss.read, "rows_written": pss.written,
                              "rows_calibrated": pss.read - pss.dropped.get("total", 0),
                              "dropped": pss.dropped if args.drop_invalid else None, "has_labels": pss.has_labels,
                              "label_column": args.label_column, "weight_column": args.weight_column,
                              "fields": pss.report_fields, "scores_are": "probabilities" if pss.prob else "logits"},
                   "unseen": unseen, "field_report": rep, "seconds": time.perf_counter() - t0}
        text = _text(pss, args, rep, unseen)
        atomic_write_json(tmp / "report.json", summary)
        atomic_write_text(tmp / "report.txt", text)
        written = [f"{APPLY_COLUMN}.parquet", "report.json", "report.txt"]
        if rep is not None:
            written += _pictures(pss, args, rep, tmp)
    if args.tensorboard and rep is not None:
        from ltr.calibrate.tensorboard import log_binned_calibration

        log_binned_calibration(args.tensorboard, "apply", rep)
    print(text, end="")
    print(f"wrote {args.out}/" + ", ".join(written))
    return 0
