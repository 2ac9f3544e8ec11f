"""Variants of DLA's training loop on the unbiased-LTR study's PBM logs: which one puts every seed's
propensities within 10% of the truth at positions 1..10, and at what NDCG@10.

The logs are those of ``experiments/unbiased_ltr_study.py``'s PBM cell (same ``make_synthetic_splits``,
``production_ranker``, ``simulate_clicks`` and seeds; eta = 1, eps = 0.1, 10^6 sessions); the scorer
(MLP (64, 32)), its seeded initial weights, batch size 64, learning rate 3e-3, 40 epochs and patience 5
on the labelled validation split are the study's. The loop below is ``ltr.clicks.estimators.dla.fit_dla``'s with
knobs added; with none set it reproduces the study's DLA numbers digit for digit (``sgd``), and with
``update=full`` those of ``--dla-propensity-update full``. Knobs of a variant (``NAME:key=value,...``):

* ``init`` = flat | rem | true: the position logits start at 0 (theta = 1), at regression EM's curve on
  the same log (``estimate_rem_curve``, logistic relevance), or at the true theta (a diagnostic);
* ``plr``: the propensity logits' Adam learning rate (0.05 in ``fit_on_clicks``);
* ``warm``: the ranker's learning rate ramps linearly from lr/warm to lr over the first ``warm`` steps;
* ``freeze``: the propensity logits take no step for the first ``freeze`` ranker steps;
* ``psteps``: Adam steps of the propensity logits per ranker step (on the same minibatch);
* ``ploss`` = ratio | likelihood: the propensity loss, DLA's inverse-relevance-weighted softmax over
  positions ``-sum C[g,i] min(P_rel(first)/P_rel(i), W) log softmax_i(phi_{r_i})`` (ratio), or the
  click likelihood of the additive model with the ranker's scores held fixed,
  ``-sum C[g,i] log softmax_i(phi_{r_i} + f(x_i))`` (likelihood; its full-log optimum by the MM step
  ``theta_r <- sum_g C[g,r] / sum_g N_g a[g,r] / sum_s theta_s a[g,s]``, ``a = exp(f)``);
* ``pall`` = 1: the propensity step's loss is over all lists instead of the minibatch;
* ``update=full``: after every ranker step the logits are set to the full-log optimum (20 MM steps);
  ``ema``: then only moved that fraction of the way there;
* ``wd``: decoupled weight decay of the ranker (AdamW);
* ``restarts`` = K: the variant trained K times on the same log, restart j under the seed
  ``seed + 10007 j`` (``unbiased_ltr_study.restart_seeds``; j = 0 is the variant itself), the
  propensity curve the geometric mean of the K curves and the ranker the mean of the K rankers' scores;
* ``crossfit`` = 1: two rankers, each trained on half of the lists (even / odd list index), and the
  propensity loss of a list weighted by the relevance of the ranker that did *not* train on it (so
  the weights cannot come from a ranker that memorised that list's clicks); the ranker is the mean
  of the two scores. Only the ``plr`` knob applies with it.

    python experiments/dla_variants_study.py --out runs/dla_variants --seeds 10 \
        --variant sgd --variant full:update=full --variant plr0.1:plr=0.1

Prints one line per seed and variant (largest error over positions 1..10, test NDCG@10) and, per
variant, the number of seeds within 10% and the NDCG@10 difference to the first variant paired by seed
(mean [95% t-interval]); writes ``results.json`` and ``results.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import copy
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

KNOBS = {"init": str, "plr": float, "warm": int, "freeze": int, "psteps": int, "ploss": str, "pall": int,
         "update": str, "ema": float, "wd": float, "crossfit": int, "restarts": int}
CHOICES = {"init": ("flat", "rem", "true"), "ploss": ("ratio", "likelihood"), "update": ("sgd", "full")}


def parse_variant(text: str) -> tuple[str, dict]:
    """``NAME`` or ``NAME:key=value,...`` -> (name, knobs); unknown keys or bad values raise ValueError."""
    name, _, spec = text.partition(":")
    knobs: dict = {}
    for item in filter(None, spec.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in KNOBS:
            raise ValueError(f"variant {name!r}: {item!r} is not key=value with key one of {', '.join(KNOBS)}")
        knobs[key] = KNOBS[key](value)
        if key in CHOICES and knobs[key] not in CHOICES[key]:
            raise ValueError(f"variant {name!r}: {key} must be one of {', '.join(CHOICES[key])}, got {value!r}")
        if KNOBS[key] is not str and not (knobs[key] >= 0 and np.isfinite(knobs[key])):
            raise ValueError(f"variant {name!r}: {key} must be a finite number >= 0, got {value!r}")
        if key == "restarts" and knobs[key] < 1:
            raise ValueError(f"variant {name!r}: restarts must be >= 1, got {value!r}")
    if not name:
        raise ValueError(f"variant {text!r} has no name")
    return name, knobs


def _likelihood_loss(model, phi, x, c, pos, mask):
    import torch

    from ltr.clicks.estimators.dla import _masked_log_softmax

    with torch.no_grad():
        f = model(x, mask)
    logit = torch.where(mask, phi[(pos - 1).clamp(min=0)] + f, torch.zeros_like(f))
    c = c * mask
    return -(c * _masked_log_softmax(logit, mask)).sum() / c.sum().clamp(min=1.0)


def _likelihood_full(model, phi, x, c, mask, iterations=20):
    import torch

    was = model.training
    with torch.no_grad():
        model.eval()
        f = model(x, mask).double().masked_fill(~mask, -1e30)
        a = torch.exp(f - f.max(1, keepdim=True).values) * mask
        cm = (c * mask).double()
        s, n = cm.sum(0), cm.sum(1)
        theta = torch.exp(phi.detach() - phi.detach()[0]).double()
        for _ in range(iterations):
            den = (n[:, None] * a / (a * theta).sum(1).clamp(min=1e-300)[:, None]).sum(0)
            theta = torch.where((s > 0) & (den > 0), s / den.clamp(min=1e-300), theta)
            theta = theta / theta[0]
        phi.copy_(torch.log(theta.clamp(min=1e-12)).to(phi.dtype))
    model.train(was)


def _propensity_loss(k, model, phi, batch, everything, max_weight):
    from ltr.clicks.estimators.dla import _dla_losses

    x, c, pos, mask = everything if k.get("pall") else batch
    if k.get("ploss", "ratio") == "likelihood":
        return _likelihood_loss(model, phi, x, c, pos, mask)
    return _dla_losses(model, phi, x, c, pos, mask, max_weight)[1]


def _step(k, step, model, phi, opt_r, opt_p, batch, everything, lr, max_weight):
    """One ranker step and the propensity model's move(s) of the variant ``k``."""
    import torch

    from ltr.clicks.estimators.dla import _dla_losses, _full_propensity_update

    for group in opt_r.param_groups:
        group["lr"] = lr * min(1.0, (step + 1) / k["warm"]) if k.get("warm") else lr
    full = k.get("update", "sgd") == "full"
    for j in range(max(1, k.get("psteps", 1))):
        loss_rank = _dla_losses(model, phi, *batch, max_weight)[0] if j == 0 else None
        loss_exam = _propensity_loss(k, model, phi, batch, everything, max_weight)
        opt_r.zero_grad()
        opt_p.zero_grad()
        (loss_rank + (0 if full else loss_exam) if j == 0 else loss_exam).backward()
        if j == 0:
            opt_r.step()
        if not full and step >= k.get("freeze", 0):
            opt_p.step()
    if full:
        old = phi.detach().clone()
        if k.get("ploss", "ratio") == "likelihood":
            _likelihood_full(model, phi, everything[0], everything[1], everything[3])
        else:
            _full_propensity_update(model, phi, everything[0], everything[1], everything[3], max_weight)
        if k.get("ema", 1.0) < 1.0:
            with torch.no_grad():
                phi.copy_((1 - k["ema"]) * old + k["ema"] * phi.detach())


def fit_variant(lists, features, model, valid, seed, k, init_theta=None, *, epochs=40, batch_size=64, lr=3e-3,
                max_weight=100.0, patience=5, clicks=None):
    """``fit_dla``'s loop (Adam, batches of lists, best validation epoch kept) with the knobs ``k``;
    ``clicks`` [G, K] overrides ``lists.clicks``; without ``valid`` the last epoch is kept. Returns
    ``(model, theta, best_epoch)``."""
    import torch

    from ltr.clicks.estimators.dla import list_tensors

    everything = list_tensors(lists, features, clicks)
    torch.manual_seed(seed)
    phi = torch.nn.Parameter(torch.zeros(lists.docs.shape[1]))
    if init_theta is not None:
        with torch.no_grad():
            phi.copy_(torch.log(torch.as_tensor(np.asarray(init_theta[: len(phi)]), dtype=torch.float32)))
    opt_r = (torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=k["wd"]) if k.get("wd")
             else torch.optim.Adam(model.parameters(), lr=lr))
    opt_p = torch.optim.Adam([phi], lr=k.get("plr", 0.05))
    steps = [0]

    def one_step(b):
        _step(k, steps[0], model, phi, opt_r, opt_p, tuple(t[b] for t in everything), everything, lr, max_weight)
        steps[0] += 1

    return _epochs(model, phi, len(everything[0]), one_step, valid, seed, epochs=epochs, batch_size=batch_size,
                   patience=patience)


def _epochs(model, phi, n_lists, step, valid, seed, *, epochs, batch_size, patience):
    """The epochs of ``fit_dla``'s loop: batches of list indices in an order drawn under ``seed``, ``step(b)``
    on each; after each epoch the validation NDCG@10 (without ``valid``: the epoch number, so the last epoch
    wins), the best epoch's weights and position logits kept, a stop after ``patience`` epochs without a
    better one. Returns ``(model with the kept weights, theta = exp(phi - phi_1), kept epoch)``."""
    import torch

    from ltr.clicks.estimators.dla import _valid_ndcg

    gen = torch.Generator().manual_seed(seed)
    best = (-np.inf, None, None, 0)
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(n_lists, generator=gen)
        for start in range(0, len(order), batch_size):
            step(order[start : start + batch_size])
        value = _valid_ndcg(model, valid) if valid is not None else float(epoch)
        model.train()
        if value > best[0]:
            best = (value, copy.deepcopy(model.state_dict()), phi.detach().clone(), epoch)
        elif epoch - best[3] >= patience:
            break
    model.load_state_dict(best[1])
    model.eval()
    return model, torch.exp(best[2] - best[2][0]).double().numpy(), best[3]


def _crossfit_losses(models, phi, batch, fold, max_weight):
    """DLA's two losses with two rankers: list g's ranker loss on ranker fold[g], its propensity weights
    from ranker 1 - fold[g]."""
    import torch

    from ltr.clicks.estimators.dla import _masked_log_softmax

    x, c, pos, mask = batch
    logs = [_masked_log_softmax(m(x, mask), mask) for m in models]
    own = torch.where(fold[:, None] == 0, logs[0], logs[1])
    other = torch.where(fold[:, None] == 0, logs[1], logs[0]).detach()
    logit = torch.where(mask, phi[(pos - 1).clamp(min=0)], torch.zeros_like(own))
    log_exam = _masked_log_softmax(logit, mask)
    with torch.no_grad():
        w_prop = torch.clamp(1.0 / torch.exp(phi - phi[0])[(pos - 1).clamp(min=0)], max=max_weight)
        w_rel = torch.clamp(torch.exp(other[:, :1] - other), max=max_weight)
    c = c * mask
    total = c.sum().clamp(min=1.0)
    return -(c * w_prop * own).sum() / total, -(c * w_rel * log_exam).sum() / total


def fit_crossfit(lists, features, model, valid, seed, k, *, epochs=40, batch_size=64, lr=3e-3, max_weight=100.0,
                 patience=5, clicks=None):
    """The ``crossfit`` variant: as :func:`fit_variant` (sgd update), two rankers (the second a copy of
    ``model``'s initial weights); returns ``(mean of the two rankers, theta, best_epoch)``."""
    import torch

    from ltr.clicks.estimators.dla import list_tensors

    everything = list_tensors(lists, features, clicks)
    fold = torch.arange(len(everything[0])) % 2
    models = [model, copy.deepcopy(model)]
    both = _MeanOf(models)
    torch.manual_seed(seed)
    phi = torch.nn.Parameter(torch.zeros(lists.docs.shape[1]))
    opt = torch.optim.Adam([{"params": both.parameters(), "lr": lr}, {"params": [phi], "lr": k.get("plr", 0.05)}])

    def one_step(b):
        loss_rank, loss_exam = _crossfit_losses(models, phi, tuple(t[b] for t in everything), fold[b], max_weight)
        opt.zero_grad()
        (loss_rank + loss_exam).backward()
        opt.step()

    return _epochs(both, phi, len(fold), one_step, valid, seed, epochs=epochs, batch_size=batch_size,
                   patience=patience)


def _average_fits(fits):
    """``restarts`` > 1: the geometric mean of the restarts' propensity curves (the mean of their position
    logits), the mean of their rankers' scores, and the first restart's kept epoch."""
    from unbiased_ltr_study import geometric_mean_curve

    return _MeanOf([m for m, _, _ in fits]), geometric_mean_curve([theta for _, theta, _ in fits]), fits[0][2]


class _MeanOf:
    """The mean of several scorers' scores (a torch module built on first use)."""

    def __new__(cls, models):
        import torch

        class MeanOf(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.members = torch.nn.ModuleList(models)

            def forward(self, x, mask=None):
                outs = [m(x) if mask is None else m(x, mask) for m in self.members]
                return torch.stack(outs).mean(0)

        return MeanOf()


def seed_log(seed: int, need_rem: bool):
    """The study's PBM cell at 10^6 sessions for ``seed``: (train, valid, test, shown lists, EM curve or None)."""
    from ltr.clicks.simulate.click_models import simulate_clicks
    from ltr.clicks.logs.lists import group_sessions
    from ltr.clicks.estimators.training import estimate_rem_curve
    from ltr.data import make_synthetic_splits
    from unbiased_ltr_study import production_ranker

    train, valid, test = make_synthetic_splits(1000, 40, mean_list_length=30, max_list_length=120, empty_query_share=0.0,
                                               valid_share=0.1, test_share=0.2, seed=seed)
    spq = max(1, int(round(1_000_000 / train.n_queries)))
    log = simulate_clicks(train.labels, train.query_offsets, production_ranker(train, 10, seed)(train), model="pbm",
                          eta=1.0, eps=0.1, max_label=4, top_k=10, sessions_per_query=spq, seed=seed)
    rem = estimate_rem_curve(train, log, seed=seed) if need_rem else None
    return train, valid, test, group_sessions(log), rem


def run_seed(seed: int, variants) -> list[dict]:
    from ltr.clicks.simulate.click_models import pbm_examination
    from ltr.train.trainer import seed_everything
    from unbiased_ltr_study import make_factory, ndcg10, restart_seeds

    train, valid, test, lists, rem = seed_log(seed, any(k.get("init") == "rem" for _, k in variants))
    theta = pbm_examination(10, 1.0)
    rows = []
    for name, k in variants:
        t0 = time.time()
        init = {"rem": rem, "true": theta}.get(k.get("init", "flat"))
        fit = fit_crossfit if k.get("crossfit") else fit_variant
        fits = []
        for s in restart_seeds(seed, max(1, k.get("restarts", 1))):  # each its own initial weights and batch order
            seed_everything(s)
            model = make_factory(train, (64, 32))(train)
            fits.append(fit(lists, train.features, model, valid, s, k, *([] if k.get("crossfit") else [init])))
        model, est, best_epoch = fits[0] if len(fits) == 1 else _average_fits(fits)
        err = np.abs(est[:10] / theta - 1)
        rows.append({"variant": name, "seed": seed, "max_err": float(err.max()), "worst_position": int(err.argmax()) + 1,
                     "ndcg10": ndcg10(model, test), "best_epoch": best_epoch, "theta": est[:10].tolist(),
                     "seconds": round(time.time() - t0, 1)})
        print(f"  seed {seed} {name}: max err {err.max():.4f} (position {err.argmax() + 1}), NDCG@10 "
              f"{rows[-1]['ndcg10']:.4f}, epoch {best_epoch} ({rows[-1]['seconds']} s)", flush=True)
    return rows


def markdown(rows, variants) -> str:
    from ltr.study.report_table import markdown_table

    first = {r["seed"]: r["ndcg10"] for r in rows if r["variant"] == variants[0][0]}
    table = []
    for name, k in variants:
        mine = [r for r in rows if r["variant"] == name]
        worst = [r["max_err"] for r in mine]
        diff = [r["ndcg10"] - first[r["seed"]] for r in mine if r["seed"] in first]
        knobs = ", ".join(f"{a}={b}" for a, b in k.items()) or "(fit_dla's loop)"
        table.append([name, knobs, ", ".join(f"{w:.4f}" for w in worst), f"{max(worst):.4f}", f"{np.mean(worst):.4f}",
                      f"{sum(w <= 0.10 for w in worst)} of {len(worst)}", f"{np.mean([r['ndcg10'] for r in mine]):.4f}",
                      _t_interval(diff)])
    head = ["variant", "knobs", "max error per seed", "worst", "mean", "within 10%", "NDCG@10 (mean)",
            f"NDCG@10 − {variants[0][0]}"]
    seeds = sorted({r["seed"] for r in rows})
    return f"Seeds {seeds[0]}–{seeds[-1]}; PBM, η = 1, 10^6 sessions.\n\n" + markdown_table(head, table) + "\n"


def _t_interval(values) -> str:
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2 or v.std() == 0:
        return f"{v.mean():+.4f}"
    h = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return f"{v.mean():+.4f} [{v.mean() - h:+.4f}, {v.mean() + h:+.4f}]"


def main(argv=None) -> int:
    from ltr.base.io_utils import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, default=10, help="how many seeds, from --first-seed on")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--variant", action="append", default=None, help="NAME or NAME:key=value,... (repeatable)")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        p.error(f"--seeds must be >= 1 and --first-seed >= 0, got {args.seeds} and {args.first_seed}")
    try:
        variants = [parse_variant(v) for v in (args.variant or ["sgd"])]
    except ValueError as exc:
        p.error(f"--variant: {exc}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows += run_seed(seed, variants)
        atomic_write_json(out / "results.json", {"args": vars(args), "rows": rows})
    text = markdown(rows, variants)
    atomic_write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
