"""What ``ltr clicks`` actions print and record: tables, versions, NDCG@10, the propensities beside the truth."""

from __future__ import annotations

import math

import numpy as np

from ltr.study.report_table import markdown_table


# ---------------------------------------------------------------------------------------------- helpers
def format_table(rows: list[dict], columns: list[str], digits: int = 4) -> str:
    """A markdown table of ``rows`` (floats rounded to ``digits``, None as ``-``)."""

    def fmt(v):
        if v is None:  # an unidentified position, an undefined value
            return "-"
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return "nan" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    return markdown_table(columns, [[fmt(r.get(c, "")) for c in columns] for r in rows])


def versions() -> dict:
    # ltr.runs.folder.versions() imports torch and LightGBM (seconds); the simulator needs neither.
    import platform

    import scipy

    import ltr

    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "ltr": ltr.__version__, "platform": platform.platform()}


# ---------------------------------------------------------------------------------------------- actions
def ndcg10(scores: np.ndarray, ds) -> float:
    """The mean NDCG@10 of ``scores`` on the labels of ``ds`` (the toolkit's conventions)."""
    import metrics

    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, ["ndcg@10"])
    return float(ev.mean[ev.names["ndcg@10"]])


def metrics_on(model, ds) -> str:
    from ltr.train.trainer import predict_scores

    return f"NDCG@10 = {ndcg10(predict_scores(model, ds.features, query_offsets=ds.query_offsets), ds):.4f}"


def estimate_rows(meta: dict, est) -> list[dict]:
    from ltr.clicks.propensities.interventions import compare_to_truth

    truth = meta.get("examination") if meta.get("model") in ("pbm", "trust") else None
    if truth is not None:
        return compare_to_truth(est, truth)
    return est.as_rows()


def record_click_model(info: dict, meta: dict) -> None:
    """The log's click model into the training record, and under PBM the simulator's examination θ_r
    (θ_1 = 1): the truth the learned propensities are printed beside; a simulated Plackett-Luce logger's
    temperature."""
    info["click_model"] = meta.get("model")
    if meta.get("logger_temperature"):
        info["logger_temperature"] = float(meta["logger_temperature"])
    if meta.get("model") == "pbm" and meta.get("examination") is not None:
        info["true_propensity"] = [float(v) for v in meta["examination"]]


def print_logger_notes(info: dict) -> None:
    """What the estimator assumed of the logger: policy-aware's count of the items it labelled 0 because the log
    never showed them; for the other de-biasing estimators, a note on stderr when the logger drew its rankings
    at random."""
    import sys

    if info.get("logger_temperature") and info.get("estimator") not in ("naive", "policy-aware"):
        print(f"note: the log's logger drew each session's ranking (Plackett-Luce, temperature "
              f"{info['logger_temperature']:g}), so an item is shown in some sessions only; --estimator "
              f"{info['estimator']} corrects the position bias of the sessions that showed it, not that share: "
              "--estimator policy-aware does", file=sys.stderr)
    if "never_shown" in info:
        print(f"policy-aware: {info['never_shown']} items of the logged queries were never shown, labelled 0 (it assumes "
              "the logger could show every item, as a stochastic one can; --estimator ips leaves them out)")


def print_propensities(info: dict) -> None:
    """The propensities the estimator learned or used and, on a simulated PBM log, the truth beside them."""
    if info.get("propensity") is not None:
        print("propensities by position (relative to 1): " + ", ".join("-" if p is None else f"{p:.3f}"
                                                                       for p in info["propensity"]))
    print_truth(info)


def print_truth(info: dict) -> None:
    """The line of :func:`truth_line`, when the log carries a truth."""
    line = truth_line(info)
    if line:
        print(line)


def truth_line(info: dict) -> str | None:
    """The simulator's truth beside the propensities the estimator used, with the largest relative
    error; None when the log carries no truth (not simulated, or not PBM)."""
    learned, truth = info.get("propensity"), info.get("true_propensity")
    n = min(len(learned or []), len(truth or []))
    if n < 2:
        return None
    got = np.array([np.nan if v is None else v for v in learned[:n]], dtype=np.float64)  # None: unidentified
    err = np.abs(got - truth[:n]) / np.asarray(truth[:n])
    if not np.isfinite(err).any():
        return None
    worst = int(np.nanargmax(err))
    return ("the simulator's examination (the truth): " + ", ".join(f"{p:.3f}" for p in truth[:n])
            + f"; largest relative error {err[worst]:.1%}, at position {worst + 1}")


def honest_rows(rows: list[dict]) -> list[dict]:
    """``rows`` with every float that is not a number (an unidentified position, an undefined rate) as None, which
    a JSON record writes as null."""
    return [{k: (None if isinstance(v, (float, np.floating)) and not math.isfinite(v) else v) for k, v in row.items()}
            for row in rows]


def interval_notes(rows: list[dict], confidence: float, resamples: int) -> list[str]:
    """Notes on a bootstrap interval that leaves out its own estimate (too few resamples, or resampled fits not
    centred on the full one)."""
    out = [r["position"] for r in rows if r.get("theta") is not None and r.get("low") is not None
           and not r["low"] - 1e-12 <= r["theta"] <= r["high"] + 1e-12]
    if not out:
        return []
    return [f"note: the {confidence:.0%} interval of {resamples} resamples leaves out the estimate itself at position(s) "
            f"{', '.join(map(str, out))}: too few resamples to trust it (ask for 200 or more with --resamples), or the "
            "resampled fits are not centred on the full one"]


def model_notes(meta: dict, method: str) -> list[str]:
    """A note when the log's click model is not the position-based model that ``method`` assumes."""
    model = meta.get("model")
    if model is None or model == "pbm" or method == "harvest-trust":
        return []
    why = {"trust": "trust bias clicks a non-relevant item with a probability that depends on the position, so "
                    "these ratios mix examination with that rate (--method harvest --trust estimates both)",
           "cascade": "under the cascade model examination depends on the items above, not on the position alone",
           "dbn": "under the DBN examination depends on the items above and the clicks, not on the position alone",
           "ubm": "under the UBM examination depends on the distance to the last click, not on the position alone"}
    return [f"note: the log was simulated with the {model} model; --method {method} assumes the position-based "
            f"model: {why.get(model, 'its examination is not a function of the position alone')}, and the estimate "
            "need not match the simulator's examination"]
