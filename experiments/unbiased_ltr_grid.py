"""Unbiased learning to rank across click models, bias severities and data sets, and estimators that
label the items the logger never showed.

The setting of ``experiments/unbiased_ltr_study.py`` (one production ranker, a ridge regression on
the labels of 10 training queries, shows the top 10; NDCG@10 on the test labels; the same MLP and
softmax cross-entropy for every estimator; "full info" = that recipe on the true labels, target the
attraction a(rel) = eps + (1 - eps)(2^rel - 1)/(2^max - 1)), run over

* data: ``synthetic`` (``make_synthetic_splits(1000, 40, ...)``, a new draw per seed), ``mq2008``
  (LETOR 4.0 fold 1: train S1-S3, valid S4, test S5), ``mslr`` (the MSLR-WEB10K fold 1 sample: 5,000
  rows each of train and test; 8 train queries held out for validation);
* click models given as ``name[:eta]``: ``pbm:0.5``, ``pbm:2`` (theta_r = r^-eta), ``trust:1`` (PBM
  with trust bias), ``cascade``, ``dbn`` (these two have no eta);
* estimators of ``ltr clicks train`` (naive, ips with the simulator's propensities, dla, rem, policy-aware, affine
  on trust logs; rem-gbdt is rem with ``--em-relevance gbdt``) and three that also label the items the logger did not show, from regression EM
  (logistic relevance gamma(x), propensities theta_r) fitted on the same log:

      dm:      label = gamma(x) for every item of a training query (the direct method)
      dr:      label = mean over sessions of c / max(theta_r, clip) on shown items, gamma(x) on the others
      dr-true: the same with the simulator's propensities (the logged ones) instead of EM's
      dr-mlp:  IPS labels (logged propensities) on shown items; on the others the prediction of the same
               MLP fitted by squared error to those IPS labels (a direct model as flexible as the ranker)
      dr-zero: IPS labels (logged propensities) on shown items, 0 on the others (the unshown taken as non-relevant)
      policy-aware-shown: policy-aware (``ltr clicks train --estimator policy-aware``) with the items never
               shown left out of the lists instead of labelled 0
      shown-oracle: not an estimator, a ceiling: the true attraction a(rel) as the label of the shown lists
               (what a perfect de-biasing of the clicks would give, without the items never shown)

  A deterministic logger shows each item at one position, so the doubly robust label
  ``gamma + (c - theta gamma) / theta`` of a shown item is its IPS label ``c / theta``; what the
  direct method adds is the label of the unshown items, which no click-only estimator has. These
  train on whole queries like the full-information model (no item weights).

``--shown K`` (default 10) makes the logger show the top K of each list, ``--shown all`` the whole list, under
the same click model (PBM: examination r^-eta at every shown position r); the items it does not show are the
ones no click estimator sees.

Gap closed = (estimator - naive) / (full info - naive).

``--restarts K`` (default 1) trains every model K times on the same log, restart j under the seed
``seed + 10007 j`` (its own initial weights and batch order; j = 0 is the run without restarts), and
scores the mean of the K models' scores: naive, full info and each estimator alike, so the gap closed
compares ensembles with ensembles. A propensity curve is then the geometric mean of the K curves.

    python experiments/unbiased_ltr_grid.py --out runs/ultr_gap --data synthetic --models pbm:1 \\
        --sessions 1000000 --seeds 3 --estimators naive,ips,dla,rem,dm,dr,dr-true
    python experiments/unbiased_ltr_grid.py --out runs/ultr_grid --data mq2008,mslr \\
        --models pbm:0.5,pbm:2,trust:1,cascade,dbn --sessions 100000 --estimators naive,ips,dla,affine,dr \\
        --plot docs/assets/unbiased_ltr_grid.png

Writes ``results.json`` (every cell, after each one) and ``results.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
SHARED = ROOT.parent / "shared" / "data"

from unbiased_ltr_study import (geometric_mean_curve, make_factory, ndcg10, production_ranker,  # noqa: E402
                                restart_seeds)


def load_data(name: str, seed: int):
    """(train, valid, test, max_label) of a data set; the synthetic one is drawn anew per seed."""
    from ltr.data import concat_datasets, load_svmlight, make_synthetic_splits, split_by_query

    if name == "synthetic":
        train, valid, test = make_synthetic_splits(1000, 40, mean_list_length=30, max_list_length=120,
                                                   empty_query_share=0.0, valid_share=0.1, test_share=0.2, seed=seed)
        return train, valid, test, 4.0
    if name == "mq2008":
        parts = {i: load_svmlight(SHARED / "letor4-mq2008" / f"S{i}.txt", n_features=46) for i in range(1, 6)}
        return concat_datasets([parts[1], parts[2], parts[3]]), parts[4], parts[5], 2.0
    if name == "mslr":
        base = SHARED / "mslr-web10k-fold1-5k"
        full = load_svmlight(base / "msn1.fold1.train.5k.txt", n_features=136)
        n_valid = 8 / full.n_queries
        train, valid = split_by_query(full, (1 - n_valid, n_valid), seed=0)
        return train, valid, load_svmlight(base / "msn1.fold1.test.5k.txt", n_features=136), 4.0
    raise SystemExit(f"unknown data set {name!r}: synthetic, mq2008 or mslr")


def parse_model(spec: str) -> tuple[str, float]:
    name, _, eta = spec.partition(":")
    return name, float(eta) if eta else 1.0


def fit_full(train, valid, make, cfg, eps, max_label, labels=None):
    """The MLP with softmax cross-entropy on whole training queries, target ``labels`` (default a(rel))."""
    import losses
    from ltr.clicks.simulate.click_models import attraction
    from ltr.train.trainer import Trainer, seed_everything

    target = attraction(train.labels, max_label=max_label, eps=eps) if labels is None else labels
    ds = type(train)(train.features, np.asarray(target, dtype=np.float64), train.query_offsets, train.query_ids)
    seed_everything(cfg.seed)  # the initial weights under the seed, as fit_on_clicks draws the estimators'
    return Trainer(make(ds), losses.get_loss("softmax"), cfg).fit(ds, valid).model


def direct_labels(train, log, em, propensity=None, clip: float = 0.01) -> np.ndarray:
    """Per training row: the mean of c / max(p, clip) over its logged entries if it was shown (p = EM's
    theta_r, or the logged ``propensity``), else EM's relevance gamma(x) (0 when ``em`` is None: dr-zero);
    ``propensity="dm"``: gamma for every row."""
    gamma = np.zeros(train.n_items) if em is None else em.predict(train.features)
    if propensity == "dm":
        return gamma
    p = log.propensity if propensity == "logged" else em.theta[log.position - 1]
    v = log.click / np.maximum(p, clip)
    n = np.bincount(log.doc, minlength=train.n_items)
    total = np.bincount(log.doc, weights=v, minlength=train.n_items)
    return np.where(n > 0, total / np.maximum(n, 1), gamma)


def mlp_direct_labels(train, valid, log, make, cfg, clip: float = 0.01) -> np.ndarray:
    """dr-mlp's labels: IPS labels (logged propensities) on shown rows; on the others the prediction of a direct
    model, the same MLP fitted by squared error to the IPS labels of the shown items (a regression of
    relevance on the features), cut to [0, 1]."""
    import losses
    from ltr.clicks.estimators.unbiased import corrected_clicks, lists_dataset
    from ltr.train.trainer import Trainer, predict_scores, seed_everything

    values = corrected_clicks(log, "ips", clip=clip)
    lists = lists_dataset(train, log, values)
    seed_everything(cfg.seed)
    dm = Trainer(make(lists), losses.get_loss("mse"), cfg).fit(lists, valid).model
    guess = np.clip(predict_scores(dm, train.features, query_offsets=train.query_offsets), 0.0, 1.0)
    n = np.bincount(log.doc, minlength=train.n_items)
    total = np.bincount(log.doc, weights=values, minlength=train.n_items)
    return np.where(n > 0, total / np.maximum(n, 1), guess)


def click_estimators(train, valid, log, est, make, cfg, em, args):
    """(model, propensity curve or None) of one estimator."""
    import losses
    from ltr.clicks.estimators.training import _trainer_fit, fit_on_clicks

    if est == "shown-oracle":  # not an estimator: the true attraction on the shown lists only (the support ceiling)
        from ltr.clicks.simulate.click_models import attraction
        from ltr.clicks.estimators.unbiased import lists_dataset

        a = attraction(train.labels, max_label=float(log.meta["max_label"]), eps=args.eps)
        return _trainer_fit(lists_dataset(train, log, a[log.doc]), valid, make, losses.get_loss("softmax"), cfg)[0], None
    if est == "policy-aware-shown":  # policy-aware with the items never shown left out of the lists, not labelled 0
        return _trainer_fit(shown_items(*_policy_aware_lists(train, log)), valid, make, losses.get_loss("softmax"), cfg)[0], None
    if est == "dr-mlp":
        return fit_full(train, valid, make, cfg, args.eps, None, mlp_direct_labels(train, valid, log, make, cfg)), None
    if est == "dr-zero":  # IPS labels (logged propensities) on shown items, 0 on the items never shown
        return fit_full(train, valid, make, cfg, args.eps, None, direct_labels(train, log, None, "logged")), None
    if est in ("dm", "dr", "dr-true"):
        kind = {"dm": "dm", "dr": "em", "dr-true": "logged"}[est]
        return fit_full(train, valid, make, cfg, args.eps, None, direct_labels(train, log, em, kind)), None
    if est == "rem":
        model, info = fit_on_clicks(train, valid, log, "ips", make, config=cfg, clip=0.01, curve=em.theta)
        return model, em.theta
    if est == "rem-gbdt":  # regression EM with LightGBM relevance (50 trees per M-step), what --em-relevance gbdt runs
        model, info = fit_on_clicks(train, valid, log, "rem", make, config=cfg, clip=0.01, em_relevance="gbdt")
        return model, info["propensity"]
    model, info = fit_on_clicks(train, valid, log, est, make, config=cfg, clip=0.01,
                                propensity_update=getattr(args, "dla_propensity_update", "sgd"),
                                relevance_reference=getattr(args, "dla_relevance_reference", None))
    return model, info.get("propensity") if est == "dla" else None


def _policy_aware_lists(train, log):
    """The policy-aware training lists of ``log`` (every item of the logged queries) and the rows they hold."""
    from ltr.clicks.logs.stream import aggregate_from_log
    from ltr.clicks.estimators.policy_aware import policy_aware_dataset

    lists, _ = policy_aware_dataset(train, aggregate_from_log(log, train))
    shown = np.zeros(train.n_items, dtype=bool)
    shown[log.doc] = True
    return lists, shown[train.row_indices(lists.query_ids)]


def shown_items(lists, keep):
    """``lists`` with only the items of ``keep`` (a query keeps its place while it has one)."""
    from ltr.data import RankingDataset

    q = np.repeat(np.arange(lists.n_queries), np.diff(lists.query_offsets))[keep]
    lengths = np.bincount(q, minlength=lists.n_queries)
    return RankingDataset(lists.features[keep], lists.labels[keep], np.concatenate([[0], np.cumsum(lengths[lengths > 0])]),
                          lists.query_ids[lengths > 0], weights=lists.weights[keep])


def shown_k(args) -> int | None:
    """The logger's shown list length from ``--shown``: the top k (an integer), or ``all`` (None: the whole list).
    Results from before the option existed were all run with the top 10."""
    shown = str(getattr(args, "shown", "10"))
    if shown == "all":
        return None
    if not shown.isdigit() or int(shown) < 1:
        raise SystemExit(f"--shown {shown!r}: a positive integer (the top k shown) or 'all'")
    return int(shown)


def restart_configs(cfg, restarts: int) -> list:
    """The training configurations of ``--restarts``: ``cfg`` itself, then ``cfg`` under the seeds of restarts
    1..K-1 (:func:`unbiased_ltr_study.restart_seeds`)."""
    from dataclasses import replace

    return [cfg, *(replace(cfg, seed=s) for s in restart_seeds(cfg.seed, restarts)[1:])]


def mean_scores(models, ds) -> np.ndarray:
    """The mean of the models' scores on ``ds`` (one model: its scores)."""
    from ltr.train.trainer import predict_scores

    return np.mean([predict_scores(m, ds.features, query_offsets=ds.query_offsets) for m in models], axis=0)


def simulate_log(train, logger_scores, max_label, spec: str, n_sessions: int, seed: int, *, eps: float, shown,
                 temperature: float = 0.0):
    """A cell's click log: the logger's scores of ``train`` shown to about ``n_sessions`` users (a whole number
    per query) clicking under ``spec`` (:func:`parse_model`); ``shown``: the top k shown, or None for all
    (:func:`shown_k`); ``temperature`` > 0: a Plackett-Luce logger drawing each session's ranking (0: the
    ranking by the scores). ``experiments/gbdt_clicks_study.py`` draws its logs here too, so they are the grid's."""
    from ltr.clicks.simulate.click_models import simulate_clicks

    model_name, eta = parse_model(spec)
    spq = max(1, int(round(n_sessions / train.n_queries)))
    return simulate_clicks(train.labels, train.query_offsets, logger_scores, model=model_name, eta=eta, eps=eps,
                           max_label=max_label, top_k=shown, sessions_per_query=spq, seed=seed,
                           logger_temperature=temperature)


def run_cell(data, name, spec, n_sessions, seed, args, cache):
    """One (data set, click model, log size, seed): NDCG@10 of every estimator, beside naive and full info."""
    from ltr.clicks.propensities.regression_em import observations_from_log, regression_em
    from ltr.train.trainer import TrainConfig

    train, valid, test, max_label, logger, logger_on_test = data
    model_name, _ = parse_model(spec)
    temperature = getattr(args, "logger_temperature", 0.0)
    log = simulate_log(train, logger, max_label, spec, n_sessions, seed, eps=args.eps, shown=shown_k(args),
                       temperature=temperature)
    cfg = TrainConfig(epochs=args.epochs, batch_size=64, lr=args.lr, patience=args.patience, seed=seed, progress=False,
                      metrics=("ndcg@10",))
    make = make_factory(train, tuple(args.hidden))
    cfgs = restart_configs(cfg, getattr(args, "restarts", 1))
    if (name, seed) not in cache:
        cache[(name, seed)] = ndcg10(mean_scores([fit_full(train, valid, make, c, args.eps, max_label) for c in cfgs],
                                                 test), test)
    row = {"data": name, "click_model": spec, "sessions": log.n_sessions, "seed": seed, "clicks": log.n_clicks,
           "shown": getattr(args, "shown", "10"), "full": cache[(name, seed)],
           "logger": ndcg10(logger_on_test, test), "logger_temperature": temperature}
    if temperature:  # what the stochastic logger's users see, on the training queries it ranked
        from ltr.clicks.simulate.logging_ranker import plackett_luce_ndcg

        row["logger_seen"] = plackett_luce_ndcg(logger, train, temperature, seed=seed)
        row["logger_seen_deterministic"] = ndcg10(logger, train)
    ests = [e for e in args.estimators.split(",") if e != "affine" or model_name == "trust"]
    em = None
    if any(e in ("rem", "dm", "dr", "dr-true") for e in ests):
        em = regression_em(observations_from_log(log), relevance="logistic", features=train.features, iterations=200,
                           seed=seed)
        row["em_propensity"] = em.theta.tolist()
    for est in ests:
        t0 = time.time()
        fits = [click_estimators(train, valid, log, est, make, c, em, args) for c in cfgs]
        models = [m for m, _ in fits]
        row[est], row[f"{est}_s"] = ndcg10(mean_scores(models, test), test), round(time.time() - t0, 1)
        row[f"{est}_valid"] = ndcg10(mean_scores(models, valid), valid)
        if fits[0][1] is not None:
            curve = fits[0][1] if len(fits) == 1 else geometric_mean_curve([c for _, c in fits])
            row[f"{est}_propensity"] = list(map(float, curve))
        print(f"  {name} {spec} {log.n_sessions} seed {seed} {est}: {row[est]:.4f} ({row[f'{est}_s']} s)", flush=True)
    return row



NOT_ESTIMATORS = ("naive", "shown-oracle")  # a baseline and a ceiling: never "best" nor "selected"


def selected(row, ests) -> str:
    """The estimator (naive and shown-oracle excluded) with the best NDCG@10 on the labelled validation split:
    a choice made without the test labels, as early stopping already uses that split."""
    return max((e for e in ests if e not in NOT_ESTIMATORS and f"{e}_valid" in row), key=lambda e: row[f"{e}_valid"])


MIN_GAP = 0.02


def _t_interval(values) -> str:
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return f"{v.mean():+.4f}"
    h = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return f"{v.mean():+.4f} [{v.mean() - h:+.4f}, {v.mean() + h:+.4f}]"


def _mean(group, key):
    vals = [r[key] for r in group if key in r]
    return float(np.mean(vals)) if vals else float("nan")


def markdown(rows, args) -> str:
    from ltr.study.report_table import markdown_table

    ests = args.estimators.split(",")
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["data"], r["click_model"], r["sessions"]), []).append(r)
    head = ["data", "click model", "sessions", "seeds", "logger", "full info"] + ests + ["best", "best gap closed",
                                                                                      "selected on valid", "its gap closed"]
    table = []
    for (data, cm, n), group in groups.items():
        naive, full = _mean(group, "naive"), _mean(group, "full")
        means = {e: _mean(group, e) for e in ests}
        scored = {e: v for e, v in means.items() if e not in NOT_ESTIMATORS and not np.isnan(v)}
        best = max(scored, key=scored.get) if scored else ""
        # a ratio over a gap of a few thousandths of NDCG is noise: printed only when the gap is >= MIN_GAP
        gap = f"{(scored[best] - naive) / (full - naive):.0%}" if best and full - naive >= MIN_GAP else "n/a"
        picks = [selected(r, ests) for r in group]
        pick_mean = float(np.mean([r[e] for r, e in zip(group, picks)]))
        pick_gap = f"{(pick_mean - naive) / (full - naive):.0%}" if full - naive >= MIN_GAP else "n/a"
        table.append([data, cm, f"{n:,}", str(len(group)), f"{_mean(group, 'logger'):.4f}", f"{full:.4f}"]
                     + ["" if np.isnan(means[e]) else f"{means[e]:.4f}" for e in ests]
                     + [best, gap, "/".join(dict.fromkeys(picks)) + f" {pick_mean:.4f}", pick_gap])
    shown = getattr(args, "shown", "10")
    temperature = getattr(args, "logger_temperature", 0.0)
    drawn = f" of a Plackett-Luce draw at temperature {temperature:g}" if temperature else ""
    lines = [f"logger shows {'the whole list' if shown == 'all' else f'the top {shown}'}{drawn}; "
             f"ε = {args.eps}; MLP {tuple(args.hidden)}, softmax cross-entropy, {args.epochs} epochs at most "
             f"(patience {args.patience}); NDCG@10 on the test labels, mean over seeds", "", markdown_table(head, table)]
    if "naive" not in ests:  # the differences to naive need it
        return "\n".join(lines) + "\n"
    diffs = []
    for (data, cm, n), group in groups.items():
        cells = [f"full {_t_interval([r['full'] - r['naive'] for r in group])}"]
        for e in [e for e in ests if e != "naive" and any(e in r for r in group)]:
            cells.append(f"{e} {_t_interval([r[e] - r['naive'] for r in group if e in r])}")
        diffs.append([data, cm, f"{n:,}", "; ".join(cells)])
    lines += ["", "NDCG@10 minus naive's, paired by seed (mean [95% t-interval]):", "",
              markdown_table(["data", "click model", "sessions", "difference to naive"], diffs)]
    return "\n".join(lines) + "\n"


def plot(rows, args, path) -> None:
    """One panel per (log size, data set): each estimator's NDCG@10 minus naive's per click model (bars, mean
    over seeds) and the full-information model's (a black tick)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ltr.base.io_utils import atomic_path

    ests = [e for e in args.estimators.split(",") if e != "naive"]
    datasets = list(dict.fromkeys(r["data"] for r in rows))
    sizes = sorted({round(r["sessions"], -3) for r in rows})
    fig, axes = plt.subplots(len(sizes), len(datasets), figsize=(5 * len(datasets), 3.2 * len(sizes)), squeeze=False)
    for i, size in enumerate(sizes):
        for ax, data in zip(axes[i], datasets):
            sub = [r for r in rows if r["data"] == data and round(r["sessions"], -3) == size]
            models = list(dict.fromkeys(r["click_model"] for r in sub))
            groups = [[r for r in sub if r["click_model"] == m] for m in models]
            width = 0.8 / len(ests)
            for j, est in enumerate(ests):
                vals = [_mean(g, est) - _mean(g, "naive") for g in groups]
                ax.bar(np.arange(len(models)) + (j - (len(ests) - 1) / 2) * width, vals, width, label=est)
            ax.scatter(np.arange(len(models)), [_mean(g, "full") - _mean(g, "naive") for g in groups], marker="_",
                       s=500, color="black", label="full info", zorder=3)
            ax.axhline(0, color="black", lw=0.8)
            ax.set_xticks(np.arange(len(models)))
            ax.set_xticklabels(models, fontsize=8)
            ax.set_ylabel("NDCG@10 − naive", fontsize=8)
            seeds = len(groups[0]) if groups else 0
            ax.set_title(f"{data}, ~{size:,} sessions ({seeds} seed{'s' if seeds != 1 else ''})", fontsize=9)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def main(argv=None) -> int:
    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--data", default="mq2008,mslr")
    p.add_argument("--models", default="pbm:0.5,pbm:2,trust:1,cascade,dbn")
    p.add_argument("--sessions", default="100000")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--first-seed", type=int, default=0, help="the seeds run are first-seed .. first-seed + seeds - 1")
    p.add_argument("--estimators", default="naive,ips,dla,affine,dr")
    p.add_argument("--eps", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--patience", type=int, default=5)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 32])
    p.add_argument("--shown", default="10",
                   help="how many items of each list the logger shows: the top k, or 'all' (examination stays θ_r = r^-η)")
    p.add_argument("--logger-temperature", type=float, default=0.0,
                   help="0 (default): the logger shows its ranking in every session; T > 0: a Plackett-Luce logger "
                        "(each session ranks by score/T + Gumbel noise before the top k is cut)")
    p.add_argument("--dla-propensity-update", default="sgd", choices=("sgd", "full", "refit"),
                   help="how dla's propensity model follows the ranker (ltr.clicks.estimators.dla; default sgd)")
    p.add_argument("--dla-relevance-reference", default=None, choices=("first", "geomean"),
                   help="the reference relevance of dla's propensity loss weights, in training and refit (ltr.clicks.estimators.dla; "
                        "default: first in training, geomean in the refit)")
    p.add_argument("--restarts", type=int, default=1,
                   help="train every model this many times on the same log (seeds s + 10007 j) and score the mean "
                        "of their scores (default 1)")
    p.add_argument("--plot", default=None, help="PNG of the gap closed per cell")
    p.add_argument("--report-only", action="store_true", help="rewrite results.md (and --plot) from results.json")
    p.add_argument("--combine", nargs="+", default=None, metavar="DIR",
                   help="with --report-only: the rows of these runs' results.json together (their estimators in the order given)")
    args = p.parse_args(argv)
    if args.restarts < 1:
        p.error(f"--restarts {args.restarts}: at least 1")
    if args.first_seed < 0:
        p.error(f"--first-seed {args.first_seed}: at least 0")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        import json

        combine = args.combine
        saved = [json.loads((Path(d) / "results.json").read_text()) for d in (combine or [out])]
        ests = list(dict.fromkeys(e for run in saved for e in run["args"]["estimators"].split(",")))
        rows = [r for run in saved for r in run["rows"]]
        args = argparse.Namespace(**{**saved[0]["args"], "plot": args.plot, "estimators": ",".join(ests), "combine": combine})
        if combine:
            atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows, "combined": combine})
    else:
        rows = []
        t_start = time.time()
        for name in args.data.split(","):
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                train, valid, test, max_label = load_data(name, seed)
                score = production_ranker(train, 10, seed)
                data = (train, valid, test, max_label, score(train), score(test))
                cache: dict = {}
                for spec in args.models.split(","):
                    for n in (int(float(s)) for s in args.sessions.split(",")):
                        rows.append(run_cell(data, name, spec, n, seed, args, cache))
                        atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows,
                                                                 "seconds": round(time.time() - t_start, 1)})
    text = markdown(rows, args)
    atomic_write_text(out / "results.md", text)
    if args.plot:
        plot(rows, args, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
