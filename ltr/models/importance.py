"""Feature importance: LightGBM's gain and split counts, and permutation importance for any model.

LightGBM (:func:`booster_importance`): ``gain`` is the total loss reduction of the splits on a
feature, ``split`` the number of those splits, both counted up to the booster's best iteration.
They describe the trees, not the data, and say nothing about how much a feature matters for the
ranking metric.

Permutation importance (:func:`permutation_importance`) asks that directly: shuffle one feature's
column across all rows of the data (as scikit-learn's ``permutation_importance`` does), score
again, and measure the drop of the ranking metric (NDCG@10 by default, the toolkit's conventions)::

    drop_j[q] = metric[q](original scores) - mean_r metric[q](scores with column j shuffled, repeat r)
    importance_j = mean over queries q of drop_j[q]

Queries the metric skips (no relevant item under ``empty=skip``) are left out. The interval is a
percentile bootstrap over queries of that mean (:func:`metrics.stats.bootstrap_ci`), so it shows how
much the number would move on other queries from the same source; a feature whose interval holds 0
cannot be told apart from noise on this data.

Feature names: the data set's ``feature_names`` when it has them, else ``f1 .. fF`` (the 1-based
column number, which is the feature index of a LETOR file).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ltr.base.errors import LtrError
from ltr.data.dataset import feature_names_of
from ltr.gbdt.lightgbm import booster_importance
from ltr.base.io_utils import atomic_path, atomic_write_json

__all__ = ["feature_names_of", "booster_importance", "permutation_importance", "write_importance", "importance_figure"]


def _per_query(score: Callable[[np.ndarray], np.ndarray], features: np.ndarray, ds, metric: str, evaluate_kw) -> np.ndarray:
    import metrics

    ev = metrics.evaluate(score(features), ds.labels, ds.query_offsets, [metric], **evaluate_kw)
    return np.asarray(ev.per_query[ev.names[metric]], dtype=np.float64)


def permutation_importance(
    score: Callable[[np.ndarray], np.ndarray],
    ds,
    *,
    metric: str = "ndcg@10",
    n_repeats: int = 5,
    seed: int = 0,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    features: Sequence[int] | None = None,
    preset: str | None = None,
    conventions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Drop of ``metric`` when each feature is shuffled; see the module docstring.

    ``score(features [N, F]) -> scores [N]``; ``features``: column indices to test (default: all).
    Returns ``{"metric": stamped name, "base": value, "feature": [...], "importance": [...],
    "low": [...], "high": [...], "n_queries": counted queries, ...}`` in the order of ``features``.
    """
    import metrics
    from metrics.stats import bootstrap_ci

    if n_repeats < 1:
        raise LtrError(f"n_repeats must be >= 1, got {n_repeats}")
    evaluate_kw = {"preset": preset, **(conventions or {})}
    x = np.array(ds.features, dtype=np.float32, copy=True)
    cols = list(range(x.shape[1])) if features is None else [int(j) for j in features]
    bad = [j for j in cols if not 0 <= j < x.shape[1]]
    if bad:
        raise LtrError(f"feature column {bad[0]} is out of range (the data has {x.shape[1]} features)")
    base = _per_query(score, x, ds, metric, evaluate_kw)
    if np.all(np.isnan(base)):
        raise LtrError(f"no query of the data counts for {metric} (none has a relevant item)")
    stamped = metrics.evaluate(np.zeros(2), np.array([1.0, 0.0]), np.array([0, 2]), [metric], **evaluate_kw).names[metric]
    rng = np.random.default_rng(seed)
    names = feature_names_of(ds, x.shape[1])
    out: dict[str, list] = {"feature": [], "column": [], "importance": [], "low": [], "high": []}
    for j in cols:
        original = x[:, j].copy()
        shuffled = np.zeros_like(base)
        for _ in range(n_repeats):
            x[:, j] = original[rng.permutation(len(original))]
            shuffled += _per_query(score, x, ds, metric, evaluate_kw)
        x[:, j] = original
        ci = bootstrap_ci(base - shuffled / n_repeats, confidence=confidence, n_resamples=n_resamples, seed=seed)
        out["feature"].append(names[j])
        out["column"].append(j)
        out["importance"].append(ci.mean)
        out["low"].append(ci.low)
        out["high"].append(ci.high)
    return {
        "kind": "permutation",
        "metric": stamped,
        "base": float(np.nanmean(base)),
        "n_queries": int(np.count_nonzero(~np.isnan(base))),
        "n_repeats": int(n_repeats),
        "seed": int(seed),
        "confidence": float(confidence),
        "interval": f"percentile bootstrap over queries ({n_resamples} resamples) of the mean drop",
        **out,
    }


def importance_figure(importance: dict[str, Any], top: int = 20):
    """A matplotlib figure of horizontal bars, the ``top`` features first.

    LightGBM and XGBoost importances get two panels (gain, split), CatBoost's one
    (prediction_values_change); permutation importances one, with the
    bootstrap interval as error bars.
    """
    from matplotlib.figure import Figure

    names = np.asarray(importance["feature"])
    if importance["kind"] in ("lightgbm", "xgboost", "catboost"):  # the engines' own importances
        panels = [(k, np.asarray(importance[k], dtype=float), None) for k in ("gain", "split", "prediction_values_change") if k in importance]
        order = np.argsort(-panels[0][1], kind="stable")[:top]
    else:
        value = np.asarray(importance["importance"], dtype=float)
        err = np.vstack([value - np.asarray(importance["low"]), np.asarray(importance["high"]) - value])
        short, _, stamp = importance["metric"].partition("[")
        panels = [(f"drop of {short}" + (f"\n[{stamp}" if stamp else ""), value, err)]
        order = np.argsort(-np.nan_to_num(value, nan=-np.inf), kind="stable")[:top]
    height = 1.2 + 0.28 * len(order)
    fig = Figure(figsize=(5.0 * len(panels), height))
    _place_panels(fig, names[order], max(t.count("\n") + 1 for t, _, _ in panels), len(panels))
    for i, (title, values, err) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        y = np.arange(len(order))[::-1]  # the most important feature at the top
        ax.barh(y, values[order], xerr=None if err is None else err[:, order], color="#4c72b0")
        ax.set_yticks(y)
        ax.set_yticklabels(names[order], fontsize=8)
        ax.set_title(title, fontsize=8)
        ax.axvline(0.0, color="black", linewidth=0.5)
    return fig


def _place_panels(fig, labels, title_lines: int, n_panels: int) -> None:
    """Margins from the widest feature name (8-point text, measured from the font without drawing) and
    the titles' lines: the layout tight_layout would find, without its measuring pass over every label
    (a third of the figure's CPU time)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    from ltr.base.figures import set_margins

    font = FontProperties(size=8)
    widest = max((text_to_path.get_text_width_height_descent(str(t), font, ismath=False)[0] for t in labels), default=0.0)
    label = widest / 72 + 0.15  # points to inches, and the tick with its pad
    set_margins(fig, left=label + 0.1, right=0.3, bottom=0.35, top=0.12 + title_lines * 8 * 1.25 / 72,
                wgap=label + 0.4, ncols=n_panels)


def write_importance(folder: str | os.PathLike, importance: dict[str, Any], stem: str = "importance", top: int = 20) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.png`` (bar chart of the ``top`` features) atomically."""
    folder = Path(folder)
    json_path, png_path = folder / f"{stem}.json", folder / f"{stem}.png"
    atomic_write_json(json_path, importance)
    fig = importance_figure(importance, top)
    with atomic_path(png_path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return json_path, png_path
