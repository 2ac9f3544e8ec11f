"""The ablation report: means with confidence intervals, paired tests against a reference, outputs.

Statistics (all from :mod:`metrics.stats`):

- per data set, method and metric, each seed's value is the mean over the test queries (over all
  folds' test queries together for a folds data set; queries whose value is NaN, such as queries
  without a relevant item under ``empty=skip``, are left out). The interval over the S seeds is the
  Student-t interval ``mean +- t_{1-a/2, S-1} * sd / sqrt(S)``: it measures training randomness
  (initialisation, batch order) on a fixed test set.
- against the reference method, a paired comparison over the test queries: each query's value is
  first averaged over the seeds (the seeds are not independent observations of a query, so they are
  not pooled as separate pairs), then a paired t-test (``scipy.stats.ttest_rel``) and a two-sided
  paired bootstrap test (``n_resamples``, seed 0) of the mean difference. These measure test-set
  sampling: would the difference hold on other queries like these.
- Holm-Bonferroni correction across the methods compared with the reference, separately for each
  data set, metric and test (the family is "which methods differ from the reference on this metric").
- with a single seed there is no spread over seeds: the table then shows the bootstrap interval
  over test queries of the mean (``query_interval``, always in ``results.json``) and says so.

Beside the statistics: each method's mean wall time per cell (training, tuning and ensemble members
included, on ``threads_per_cell`` threads), the list of cells whose best epoch (or boosting round)
was their last, i.e. that stopped at the cap while still improving, and, when ``quality_reference``
is set, the time each method's chosen model needed to reach that method's validation value on the
same split and seed (from the validation curves the cells record, against the reference's own
training time).

Outputs (all written atomically): ``results.json`` (strict JSON: NaN becomes null), ``results.md``,
``means.png`` (means with their intervals) and ``tensorboard/<dataset>/<method>/<seed[-fold]>``
(one HParams run per cell; the folder is rebuilt whole and swapped in).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ltr.base.errors import LtrError
from ltr.base.io_utils import atomic_path, atomic_write_json, atomic_write_text
from ltr.study.ablation import AblationConfig, _json_safe
from ltr.study.methods import resolve_method
from ltr.study.report_table import counted, format_interval, markdown_table
from metrics.evaluate import unit_bounded
from metrics.stats import (
    bootstrap_ci,
    holm,
    paired_bootstrap_test,
    paired_t_test,
    t_interval,
)

__all__ = ["RESULTS_FORMAT", "summarize", "render_markdown", "plot_summary", "write_tensorboard", "write_report"]

RESULTS_FORMAT = "ltr-ablation-results-1"


def _per_query_by_seed(records: list[dict], config: AblationConfig):
    """{dataset: {method: {seed: {short: values [Q]}}}}, folds concatenated in fold order; checks
    that every method and seed saw the same test queries in the same order."""
    names: dict[str, str] = {}
    grouped: dict[str, dict[str, dict[int, list[dict]]]] = {}
    for r in records:
        for short, stamped in r["metric_names"].items():
            if names.setdefault(short, stamped) != stamped:
                raise LtrError(f"cells disagree on the conventions of {short}: {names[short]} vs {stamped}")
        grouped.setdefault(r["dataset"], {}).setdefault(r["method"], {}).setdefault(int(r["seed"]), []).append(r)
    out: dict[str, dict[str, dict[int, dict[str, np.ndarray]]]] = {}
    qids: dict[str, list[str]] = {}
    for ds, by_method in grouped.items():
        for method, by_seed in by_method.items():
            for seed, recs in by_seed.items():
                recs = sorted(recs, key=lambda r: -1 if r.get("fold") is None else int(r["fold"]))
                ids = [q for r in recs for q in r["query_ids"]]
                if qids.setdefault(ds, ids) != ids:
                    raise LtrError(f"data set {ds}: method {method} seed {seed} was tested on other queries than the "
                                   "first cell; delete the stale cells and run again")
                vals = {}
                for short in config.metrics:
                    stamped = names[short]
                    vals[short] = np.concatenate([
                        np.array([np.nan if v is None else v for v in r["per_query"][stamped]], dtype=np.float64)
                        for r in recs])
                out.setdefault(ds, {}).setdefault(method, {})[seed] = vals
    return out, names, qids


def summarize(records: list[dict], config: AblationConfig, *, cells: dict | None = None) -> dict:
    """The ``results.json`` object (see the module docstring for the statistics)."""
    data, names, qids = _per_query_by_seed(records, config)
    conf = float(config.confidence)
    summary: dict[str, Any] = {
        "format": RESULTS_FORMAT,
        "reference": config.reference,
        "primary": config.primary,
        "confidence": conf,
        "metrics": {short: names.get(short, short) for short in config.metrics},
        "interval": f"Student-t over seeds of each seed's mean over test queries ({conf:.0%})",
        "tests": ("paired over test queries, each query's value averaged over seeds: paired t-test "
                  f"(scipy.stats.ttest_rel) and paired bootstrap ({config.n_resamples} resamples, seed 0; its smallest "
                  f"possible p is 1/{config.n_resamples + 1}); "
                  "Holm across the methods compared with the reference, per data set, metric and test"),
        "code_versions": sorted({str(r.get("code", "unknown")) for r in records}),
        "datasets": [],
        "cells": dict(cells or {}),
        "config": config.to_dict(),
    }
    for spec in config.datasets:
        summary["datasets"].append(_dataset_entry(spec, data, names, qids, records, config))
    return summary


def _dataset_entry(spec, data: dict, names: dict[str, str], qids: dict[str, list[str]], records: list[dict],
                   config: AblationConfig) -> dict:  # fmt: skip
    """One data set's entry of ``results.json``: per-method intervals, comparisons with the reference,
    cells stopped at their cap and (when asked) time to the reference's quality."""
    if spec.name not in data:
        raise LtrError(f"no finished cells for data set {spec.name}")
    by_method = data[spec.name]
    missing = [m for m in config.methods if m not in by_method]
    if missing:
        raise LtrError(f"data set {spec.name}: no finished cells for methods {missing}")
    methods_out, seed_avg = _method_rows(by_method, names, config)
    comparisons = _comparisons(seed_avg, names, config)
    primary_any = seed_avg[config.reference][config.primary]
    mine = [r for r in records if r["dataset"] == spec.name]
    for row in methods_out:
        times = [float(r.get("wall_time_s", np.nan)) for r in mine if r["method"] == row["method"]]
        row["wall_time_s"] = float(np.mean(times)) if times else float("nan")
    entry = {
        "name": spec.name, "kind": spec.kind, "folds": [f for f in spec.folds() if f is not None],
        "n_test_queries": len(qids[spec.name]),
        "n_scored_queries": int(np.count_nonzero(~np.isnan(primary_any))),
        "methods": methods_out, "comparisons": comparisons,
        "at_cap": cells_at_cap(mine),
    }
    if config.quality_reference:
        entry["time_to_quality"] = time_to_quality(mine, config.quality_reference, config.methods)
    return entry


def _method_rows(by_method: dict, names: dict[str, str], config: AblationConfig) -> tuple[list[dict], dict[str, dict[str, np.ndarray]]]:
    """Per method and metric: the Student-t interval over seeds and the bootstrap interval over
    queries; also returns each method's per-query values averaged over seeds (``seed_avg``)."""
    conf = float(config.confidence)
    seed_avg: dict[str, dict[str, np.ndarray]] = {}
    methods_out = []
    for method in config.methods:
        by_seed = by_method[method]
        seeds = sorted(by_seed)
        row = {"method": method, "seeds": seeds, "metrics": {}}
        seed_avg[method] = {}
        for short in config.metrics:
            stack = np.stack([by_seed[s][short] for s in seeds])  # [S, Q]
            with np.errstate(invalid="ignore"):
                per_seed = np.array([np.nanmean(v) if np.any(~np.isnan(v)) else np.nan for v in stack])
            avg = stack.mean(axis=0)  # a NaN query is NaN in every seed (it depends on labels only)
            seed_avg[method][short] = avg
            # a mean of values in [0, 1] stays there; so does its interval (few seeds: a wide t-interval)
            ci = t_interval(per_seed, confidence=conf, bounds=(0.0, 1.0) if unit_bounded(names[short]) else None)
            qci = bootstrap_ci(avg, confidence=conf, n_resamples=min(config.n_resamples, 5000), seed=0)
            row["metrics"][short] = {
                "name": names[short], "mean": ci.mean, "low": ci.low, "high": ci.high,
                "per_seed": per_seed.tolist(), "n_seeds": len(seeds),
                "query_interval": {"low": qci.low, "high": qci.high, "n_queries": qci.n},
            }
        methods_out.append(row)
    return methods_out, seed_avg


def _comparisons(seed_avg: dict[str, dict[str, np.ndarray]], names: dict[str, str], config: AblationConfig) -> list[dict]:
    """Each method against the reference per metric: paired t-test and paired bootstrap over queries,
    wins/losses/ties, and Holm-adjusted p-values across the methods of one metric."""
    comparisons = []
    others = [m for m in config.methods if m != config.reference]
    for short in config.metrics:
        ref = seed_avg[config.reference][short]
        block = []
        for method in others:
            a = seed_avg[method][short]
            t = paired_t_test(a, ref)
            b = paired_bootstrap_test(a, ref, n_resamples=config.n_resamples, seed=0)
            ok = ~(np.isnan(a) | np.isnan(ref))
            block.append({
                "method": method, "reference": config.reference, "metric": short, "name": names[short],
                "mean_difference": t.mean_difference, "t_statistic": t.statistic,
                "t_p": t.p_value, "bootstrap_p": b.p_value, "n_queries": t.n,
                "wins": int(np.count_nonzero(a[ok] > ref[ok])), "losses": int(np.count_nonzero(a[ok] < ref[ok])),
                "ties": int(np.count_nonzero(a[ok] == ref[ok])),
            })
        for key in ("t_p", "bootstrap_p"):
            adj = holm([row[key] for row in block]) if block else []
            for row, p in zip(block, adj):
                row[f"{key}_holm"] = float(p)
        comparisons.extend(block)
    return comparisons


def cells_at_cap(records: list[dict]) -> list[dict]:
    """The cells whose best epoch (LightGBM: best round) was the last one run: stopped while improving.

    Older records without ``hit_cap`` are judged by ``best_epoch == epochs_run``.
    """
    out = []
    for r in records:
        info = r.get("train_info") or {}
        hit = info.get("hit_cap")
        if hit is None and "epochs_run" in info:
            hit = int(info.get("best_epoch", -1)) == int(info["epochs_run"])
        if hit:
            last = info.get("epochs_run", info.get("num_boost_round"))
            out.append({"method": r["method"], "seed": int(r["seed"]), "fold": r.get("fold"),
                        "best": info.get("best_epoch", info.get("best_iteration")), "last": last})
    return sorted(out, key=lambda c: (c["method"], c["seed"], -1 if c["fold"] is None else c["fold"]))


def time_to_quality(records: list[dict], reference: str, methods: list[str]) -> list[dict]:
    """Per method: on how many (seed, fold) splits its chosen model's validation curve reached the
    reference's best validation value, the median seconds it took there, and the median training
    seconds of the method's and the reference's chosen models."""
    key = lambda r: (int(r["seed"]), r.get("fold"))  # noqa: E731
    ref = {key(r): r for r in records if r["method"] == reference}
    out = []
    for method in methods:
        reached, own = [], []
        n = 0
        for r in (r for r in records if r["method"] == method and key(r) in ref):
            info, target = r.get("train_info") or {}, (ref[key(r)].get("train_info") or {}).get("valid_best")
            timing = info.get("timing") or {}
            curve, seconds = info.get("curve") or [], timing.get("curve_seconds") or []
            if target is None or not curve or len(seconds) != len(curve):
                continue
            n += 1
            own.append(float(timing.get("train_seconds", np.nan)))
            hit = next((t for v, t in zip(curve, seconds) if v >= float(target)), None)
            if hit is not None:
                reached.append(float(hit))
        ref_secs = [float(((r.get("train_info") or {}).get("timing") or {}).get("train_seconds", np.nan))
                    for r in ref.values()]
        out.append({"method": method, "n_splits": n, "n_reached": len(reached),
                    "median_seconds_to_reach": float(np.median(reached)) if reached else None,
                    "median_train_seconds": float(np.median(own)) if own else None,
                    "reference_median_train_seconds": float(np.median(ref_secs)) if ref_secs else None})
    return out


def _fmt_p(p: float | None) -> str:
    if p is None or not np.isfinite(p):
        return "n/a"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def render_markdown(summary: dict) -> str:
    """``results.md``: per data set, the means with intervals and the paired comparisons."""
    conf = summary["confidence"]
    ref = summary["reference"]
    shorts = list(summary["metrics"])
    lines = ["# Ablation results", ""]
    lines.append(f"Intervals: {summary['interval']}. Tests: {summary['tests']}.")
    lines.append("")
    lines.append("Metrics (conventions stamped):")
    for short, stamped in summary["metrics"].items():
        lines.append(f"- `{stamped}`")
    versions = summary.get("code_versions") or []
    if len(versions) > 1:
        lines.append("")
        lines.append(f"**Warning**: the cells were computed by {len(versions)} different versions of the code "
                     f"({', '.join(versions)}); delete OUT/cells and run again for a table from one version.")
    cells = summary.get("cells") or {}
    if cells:
        lines.append("")
        lines.append(f"Cells: {cells.get('total')} in the grid, {cells.get('run')} run now, {cells.get('reused')} reused.")
    for ds in summary["datasets"]:
        folds = f", folds {ds['folds']}" if ds["folds"] else ""
        n_seeds = ds["methods"][0]["metrics"][shorts[0]]["n_seeds"]
        lines += ["", f"## {ds['name']} ({ds['kind']}{folds}; {ds['n_test_queries']} test queries, "
                      f"{ds['n_scored_queries']} with a relevant item; {counted(n_seeds, 'seed')})", ""]
        one_seed = n_seeds == 1
        lines.append(f"Mean over test queries [{conf:.0%} bootstrap interval over queries: one seed, no spread "
                     "over seeds to measure]; s/cell: mean wall time of a cell (tuning included):" if one_seed else
                     f"Mean over seeds [{conf:.0%} t-interval, clipped to [0, 1] for measures in [0, 1]]; s/cell: mean "
                     "wall time of a cell (tuning included):")
        lines.append("")
        best = {s: max(m["metrics"][s]["mean"] for m in ds["methods"]) for s in shorts}
        rows = []
        for m in ds["methods"]:
            row = [m["method"]]
            for s in shorts:
                v = m["metrics"][s]
                low, high = (v["query_interval"]["low"], v["query_interval"]["high"]) if one_seed else (v["low"], v["high"])
                txt = format_interval(v["mean"], low, high, missing="n/a")
                row.append(f"**{txt}**" if v["mean"] == best[s] else txt)
            wall = m.get("wall_time_s")
            row.append("n/a" if wall is None or not np.isfinite(wall) else f"{wall:.1f}")
            rows.append(row)
        lines.append(markdown_table(["method", *shorts, "s/cell"], rows))
        lines.append("")
        lines.append(f"Difference from {ref} over queries (mean of method - {ref}; Holm-adjusted p: paired t / "
                     "paired bootstrap; * where both are below 0.05):")
        lines.append("")
        by = {(c["method"], c["metric"]): c for c in ds["comparisons"]}
        rows = []
        for m in ds["methods"]:
            if m["method"] == ref:
                continue
            row = [m["method"]]
            for s in shorts:
                c = by[(m["method"], s)]
                star = "*" if (c["t_p_holm"] < 0.05 and c["bootstrap_p_holm"] < 0.05) else ""
                row.append(f"{c['mean_difference']:+.4f}{star} ({_fmt_p(c['t_p_holm'])} / {_fmt_p(c['bootstrap_p_holm'])})")
            rows.append(row)
        lines.append(markdown_table(["method", *shorts], rows))
        lines += ["", *_render_at_cap(ds.get("at_cap", []))]
        if ds.get("time_to_quality"):
            lines += ["", *_render_time_to_quality(ds["time_to_quality"], summary["config"].get("quality_reference"))]
    lines.append("")
    return "\n".join(lines)


def _render_at_cap(at_cap: list[dict]) -> list[str]:
    if not at_cap:
        return ["Cells whose best epoch was their last (stopped at the cap while still improving): none."]
    lines = [f"**Cells whose best epoch was their last** (stopped at the cap while still improving; "
             f"{len(at_cap)}):", ""]
    for c in at_cap:
        fold = "" if c["fold"] is None else f" fold {c['fold']}"
        lines.append(f"- {c['method']} seed {c['seed']}{fold}: best {c['best']} of {c['last']}")
    return lines


def _render_time_to_quality(rows: list[dict], reference: str | None) -> list[str]:
    lines = [f"Time to quality: splits (seed, fold) where the chosen model's validation curve reached "
             f"{reference}'s best validation value, the median seconds it took, and the median training "
             f"seconds of the method's and of {reference}'s chosen models (tuning not included):", ""]
    fmt = lambda v: "n/a" if v is None else f"{v:.1f}"  # noqa: E731
    table = [[r["method"], f"{r['n_reached']}/{r['n_splits']}", fmt(r["median_seconds_to_reach"]),
              fmt(r["median_train_seconds"]), fmt(r["reference_median_train_seconds"])] for r in rows
             if r["method"] != reference]
    lines.append(markdown_table(["method", "reached", "s to reach", "s to train", f"s {reference}"], table))
    return lines


def plot_summary(summary: dict, path: str | os.PathLike) -> Path:
    """Means with their intervals: one panel per data set, metrics on the x axis, one marker per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shorts = list(summary["metrics"])
    n = len(summary["datasets"])
    fig, axes = plt.subplots(1, n, figsize=(max(6.0, 1.1 * len(shorts) + 3) * n, 4.5), squeeze=False)
    for ax, ds in zip(axes[0], summary["datasets"]):
        methods = ds["methods"]
        width = 0.8 / max(len(methods), 1)
        for i, m in enumerate(methods):
            x = np.arange(len(shorts)) - 0.4 + width * (i + 0.5)
            mean = np.array([m["metrics"][s]["mean"] for s in shorts], dtype=float)
            low = np.array([m["metrics"][s]["low"] for s in shorts], dtype=float)
            high = np.array([m["metrics"][s]["high"] for s in shorts], dtype=float)
            err = np.vstack([np.nan_to_num(mean - low), np.nan_to_num(high - mean)])
            ax.errorbar(x, mean, yerr=err, fmt="o", ms=4, capsize=3, label=m["method"])
        ax.set_xticks(np.arange(len(shorts)), shorts)
        ax.set_title(f"{ds['name']} ({ds['n_test_queries']} test queries)")
        ax.set_ylabel(f"test value, mean over seeds, {summary['confidence']:.0%} CI")
        ax.grid(axis="y", alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


def write_tensorboard(records: list[dict], config: AblationConfig, folder: str | os.PathLike) -> Path:
    """One TensorBoard HParams run per cell under ``folder/<dataset>/<method>/<seed[-fold]>``.

    The hyper-parameters are the cell's coordinates and settings; the metrics are its test means
    (stamped names). The whole folder is written beside the destination and swapped in at the end.
    """
    from ltr.runs.folder import run_folder
    from ltr.runs.tensorboard_log import TensorBoardLogger

    folder = Path(folder)
    with run_folder(folder, overwrite=True) as tmp:
        for r in records:
            stem = f"seed{r['seed']}" + ("" if r.get("fold") is None else f"-fold{r['fold']}")
            logger = TensorBoardLogger(tmp / r["dataset"] / r["method"] / stem)
            hp: dict[str, Any] = {"dataset": r["dataset"], "method": r["method"], "seed": int(r["seed"]),
                                  "fold": -1 if r.get("fold") is None else int(r["fold"])}
            spec = resolve_method(r["method"], config)
            if spec.kind in ("lightgbm", "xgboost", "catboost"):
                hp.update({f"{spec.kind}.{k}": v for k, v in getattr(spec, spec.kind).items()})
                hp.update({f"gbdt.{k}": v for k, v in spec.gbdt.items()})
            else:
                hp.update({f"train.{k}": v for k, v in spec.train.items()})
                hp.update({f"model.{k}": v for k, v in spec.model.items()})
                hp.update({f"loss.{k}": v for k, v in spec.loss_options.items()})
            info = r.get("train_info") or {}
            hp.update({k: v for k, v in info.items() if isinstance(v, (int, float, str, bool))})
            hp.update({f"chosen.{k}": v for k, v in (info.get("chosen") or {}).items()})
            means = {k: (np.nan if v is None else float(v)) for k, v in r["mean"].items()}
            logger.hparams(hp, {"test": means}, 0)
            logger.close()
    return folder


def write_report(records: list[dict], config: AblationConfig, out: str | os.PathLike, *,
                 cells: dict | None = None, tensorboard: bool = True) -> dict:
    """Write results.json, results.md, means.png (and TensorBoard runs); return the summary."""
    out = Path(out)
    summary = summarize(records, config, cells=cells)
    atomic_write_json(out / "results.json", _json_safe(summary))
    atomic_write_text(out / "results.md", render_markdown(summary))
    plot_summary(summary, out / "means.png")
    if tensorboard:
        write_tensorboard(records, config, out / "tensorboard")
    return summary
