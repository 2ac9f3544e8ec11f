"""Unbiased learning to rank from one click log: the estimators of ``ltr clicks train``.

Every estimator turns the log into a training set of *shown lists* (:mod:`ltr.clicks.logs.lists`):
one list per distinct (query, shown order), with per item

    label  = the mean over the list's n_g sessions of the item's corrected click ``v``
    weight = n_g                                   (every item of the list)

so that any loss of :mod:`losses` that takes item weights trains on them through the ordinary
:class:`ltr.train.trainer.Trainer` (for losses linear in the labels, such as softmax cross-entropy,
this is the per-session objective summed over sessions). The corrected click of an entry at
position r:

* ``naive``: ``v = c``;
* ``ips``:   ``v = c / max(p, tau)``, p the logged (true) propensity of the entry, or a curve;
* ``rem``:   ``v = c / max(theta_r, tau)``, theta estimated by regression EM on the same log;
* ``policy-aware`` (Oosterhuis and de Rijke, SIGIR 2020, for a stochastic top-k logger): one list per
  query of all its items, label = the item's clicks / its expected examinations over the log (0 for
  an item never shown; :mod:`ltr.clicks.estimators.policy_aware`), weight = the query's sessions;
* ``doubly-robust`` (after Oosterhuis, TOIS 2023): as ``policy-aware``, label = a regression of the click
  probability on the features corrected by the item's clicks, ``R + (C - E R) / max(E, tau S_q)``, so that an
  item the log rarely or never showed gets the regression's estimate instead of 0
  (:mod:`ltr.clicks.estimators.doubly_robust`);
* ``affine`` (Vardasbi et al., CIKM 2020, for trust bias ``P(c) = alpha_r rho + beta_r``):
  ``v = (c - beta_r) / max(alpha_r, tau)``; E[v] = rho, and the list means are cut at 0 (a
  negative mean label has no meaning for a ranking loss; the cut only moves lists whose sample
  mean fell below 0 by chance).

Clipping rule (stated once, used everywhere): propensities (and alpha) are floored at ``tau``
(``clip``, default 0.01), so no weight exceeds ``1 / tau``; an entry with propensity below tau is
under-weighted, a downward bias on items that the logger hides deep in its lists.

``dla`` trains the ranker together with a propensity model (:mod:`ltr.clicks.estimators.dla`), and
``pairwise-debias`` (Hu et al., WWW 2019, the Unbiased LambdaMART pairwise debiasing, here with a
RankNet pair loss on a neural scorer) learns the position biases of clicks ``t+`` and of non-clicks
``t-`` while it trains: a pair (clicked i at r_i, unclicked j at r_j) seen ``P_ij`` times weighs
``P_ij / (t+_{r_i} t-_{r_j})``, and after each epoch, with ``L_ij`` the pair's logistic loss::

    t+_k = [ sum_{i at k} P_ij L_ij / t-_{r_j} ] / [ same at k = 1 ]   (to the power 1 / (p + 1))
    t-_k = [ sum_{j at k} P_ij L_ij / t+_{r_i} ] / [ same at k = 1 ]   (to the power 1 / (p + 1))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.logs.lists import ShownLists, group_sessions, pair_counts
from ltr.base.errors import LtrError

__all__ = ["ESTIMATORS", "DEFAULT_CLIP", "corrected_clicks", "lists_dataset", "trust_parameters",
           "fit_pairwise_debias", "position_curve"]

ESTIMATORS = ("naive", "ips", "dla", "rem", "pairwise-debias", "affine", "policy-aware", "doubly-robust")
DEFAULT_CLIP = 0.01


def _check_clip(clip: float) -> float:
    if not 0.0 < clip <= 1.0:
        raise LtrError(f"clip must be in (0, 1], got {clip}")
    return float(clip)


def position_curve(log: ClickLog, curve: Any) -> np.ndarray:
    """Per-entry values ``curve[position - 1]``, with a clear error when the curve is too short."""
    c = np.asarray(curve, dtype=np.float64).ravel()
    if log.n_entries and log.position.max() > len(c):
        raise LtrError(f"the propensity curve has {len(c)} positions, the log shows up to {log.position.max()}")
    return c[log.position - 1]


def trust_parameters(log: ClickLog) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha [K], beta [K])`` of a trust-bias log from its simulator settings (``meta``)."""
    from ltr.clicks.simulate.browsing import trust_affine

    meta = log.meta
    if meta.get("model") != "trust" or meta.get("eps_plus") is None:
        raise LtrError(f"the affine estimator needs trust bias's alpha and beta by position (a trust-bias log of ltr "
                       f"clicks simulate --model trust carries them), and this log's click model "
                       f"is {'not known (it was not simulated)' if meta.get('model') is None else repr(meta.get('model'))}: "
                       "give --affine estimated (intervention harvesting's trust-bias fit on this log, which needs "
                       "documents shown at several positions: the logs of several rankers, or swap or randomized "
                       "sessions) or --affine-file FILE (the JSON of `ltr clicks estimate --method harvest --trust`)")
    theta = np.asarray(meta["examination"], dtype=np.float64)
    return trust_affine(theta, np.asarray(meta["eps_plus"]), np.asarray(meta["eps_minus"]))


def corrected_clicks(log: ClickLog, estimator: str, *, clip: float = DEFAULT_CLIP, curve: Any = None,
                     affine: tuple[Any, Any] | None = None) -> np.ndarray:
    """Per-entry corrected clicks ``v`` of ``naive``, ``ips``/``rem``/``dla`` (given ``curve``: theta by
    position; else the logged propensities) or ``affine`` (``affine = (alpha, beta)`` by position)."""
    c = log.click.astype(np.float64)
    clip = _check_clip(clip)
    if estimator == "naive":
        return c
    if estimator == "affine":
        alpha, beta = affine if affine is not None else trust_parameters(log)
        return (c - position_curve(log, beta)) / np.maximum(position_curve(log, alpha), clip)
    if estimator in ("ips", "rem", "dla"):
        p = log.propensity if curve is None else position_curve(log, curve)
        return c / np.maximum(p, clip)
    raise LtrError(f"unknown estimator {estimator!r}: use one of {', '.join(ESTIMATORS)}")


def lists_dataset(dataset, log: ClickLog, values: np.ndarray | None = None, lists: ShownLists | None = None):
    """The shown lists as a :class:`ltr.data.RankingDataset`: label = mean corrected click over the list's
    sessions (cut at 0), weight = its number of sessions; ``query_ids`` = the lists' query indices."""
    from ltr.data import RankingDataset

    if lists is None:
        lists = group_sessions(log, {"v": log.click if values is None else values})
    mask = lists.mask
    mean = lists.sums["v"] / lists.sessions[:, None]
    lengths = mask.sum(axis=1)
    rows = lists.docs[mask]
    if rows.max() >= dataset.n_items:
        raise LtrError(f"the click log refers to rows beyond the data set ({dataset.n_items} rows): was it simulated on other data?")
    return RankingDataset(
        features=np.ascontiguousarray(dataset.features[rows], dtype=np.float32),
        labels=np.maximum(mean[mask], 0.0),
        query_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        query_ids=lists.query.astype(np.int64),
        weights=np.repeat(lists.sessions.astype(np.float64), lengths),
    )


def _pair_terms(model, x, pos, mask):
    """Scores and the [B, K, K] logistic pair losses log(1 + exp(-(s_i - s_j)))."""
    import torch

    s = model(x, mask)
    return torch.nn.functional.softplus(-(s[:, :, None] - s[:, None, :]))


def _update_biases(model, x, pos, mask, pairs, t_plus, t_minus, power, batch):
    """One closed-form update of ``t+`` and ``t-`` from the pair losses (see the module docstring)."""
    import torch

    k = len(t_plus)
    num_plus, num_minus = torch.zeros(k, dtype=torch.float64), torch.zeros(k, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, len(x), batch):
            sl = slice(start, start + batch)
            lp = (_pair_terms(model, x[sl], pos[sl], mask[sl]) * pairs[sl]).double()
            ri, rj = (pos[sl] - 1).clamp(min=0), (pos[sl] - 1).clamp(min=0)
            num_plus.index_add_(0, ri.reshape(-1), (lp / t_minus[rj][:, None, :]).sum(dim=2).reshape(-1))
            num_minus.index_add_(0, rj.reshape(-1), (lp / t_plus[ri][:, :, None]).sum(dim=1).reshape(-1))
    new_plus = (num_plus / num_plus[0].clamp(min=1e-300)).clamp(min=1e-6) ** (1.0 / (power + 1))
    new_minus = (num_minus / num_minus[0].clamp(min=1e-300)).clamp(min=1e-6) ** (1.0 / (power + 1))
    return new_plus, new_minus


def fit_pairwise_debias(log: ClickLog, lists: ShownLists, features: np.ndarray, model, *, epochs: int = 20,
                        batch_size: int = 256, lr: float = 1e-2, power: float = 0.0, clip: float = DEFAULT_CLIP,
                        seed: int = 0, valid=None, patience: int | None = 5,
                        pairs: np.ndarray | None = None, progress: bool = False) -> tuple[Any, np.ndarray, np.ndarray]:
    """Train ``model`` by pairwise debiasing; returns ``(model, t_plus [K], t_minus [K])`` (relative to
    position 1; each floored at ``clip`` inside the weights). With ``valid``, the epoch of best
    validation NDCG@10 is kept (biases included), stopping after ``patience`` epochs without gain.
    ``pairs``: the pair counts of ``lists`` when already summed (a streamed log, ``log`` then None),
    else :func:`ltr.clicks.logs.lists.pair_counts` of ``log``. ``progress``: a bar over the epochs
    with the validation value."""
    import copy

    import torch
    from tqdm.auto import tqdm

    from ltr.clicks.estimators.dla import BestEpoch, _valid_ndcg, list_tensors

    if epochs < 1 or power < 0:
        raise LtrError(f"pairwise debiasing needs epochs >= 1 and power >= 0, got {epochs}, {power}")
    x, _, pos, mask = list_tensors(lists, features)
    pairs = torch.from_numpy((pair_counts(log, lists) if pairs is None else np.asarray(pairs)).astype(np.float32))
    total = float(pairs.sum())
    if total <= 0:
        raise LtrError("pairwise debiasing needs sessions with a click and an unclicked item")
    k = lists.docs.shape[1]
    t_plus, t_minus = torch.ones(k, dtype=torch.float64), torch.ones(k, dtype=torch.float64)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    best = BestEpoch(patience)
    model.train()
    bar = tqdm(total=epochs, desc="pairwise debiasing epochs", unit="epoch", disable=not progress)
    for epoch in range(epochs):
        for b in torch.randperm(len(x), generator=gen).split(batch_size):
            ri = (pos[b] - 1).clamp(min=0)
            w = 1.0 / (t_plus.clamp(min=clip)[ri][:, :, None] * t_minus.clamp(min=clip)[ri][:, None, :]).float()
            loss = (_pair_terms(model, x[b], pos[b], mask[b]) * pairs[b] * w).sum() / total
            opt.zero_grad()
            loss.backward()
            opt.step()
        t_plus, t_minus = _update_biases(model, x, pos, mask, pairs, t_plus, t_minus, power, batch_size)
        stop = False
        if valid is not None:
            value = _valid_ndcg(model, valid)
            model.train()
            stop = best.see(value, epoch, lambda: (copy.deepcopy(model.state_dict()), t_plus, t_minus))
            bar.set_postfix_str(best.note(value))
        bar.update()
        if stop:
            break
    bar.close()
    if valid is not None:
        model.load_state_dict(best.saved[0])
        t_plus, t_minus = best.saved[1], best.saved[2]
    model.eval()
    return model, t_plus.numpy(), t_minus.numpy()
