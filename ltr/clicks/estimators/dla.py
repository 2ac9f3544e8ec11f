"""Dual learning algorithm (Ai et al., SIGIR 2018): a ranker and a propensity model learned together.

Data: the logged lists grouped by shown list (:mod:`ltr.clicks.logs.lists`): per group g, the
items' features, the summed clicks ``C[g, i]`` over the group's sessions and the positions. Two
models, each a softmax over the items of a list:

* the ranker f: ``P_rel(i) = softmax_i(f(x_i))`` over the list;
* the propensity model, one logit ``phi_r`` per position: ``P_exam(i) = softmax_i(phi_{r_i})``; the
  relative propensity it stands for is ``theta_r / theta_1 = exp(phi_r - phi_1)``.

Each is trained by softmax cross-entropy on the clicks, weighted by the *other* model's inverse
(the weights are constants for the gradient, and clipped at ``max_weight``)::

    loss_rank = - sum_g sum_i C[g, i] * min(theta_1 / theta_{r_i}, W) * log P_rel(i)
    loss_exam = - sum_g sum_i C[g, i] * min(P_rel(ref_g) / P_rel(i), W) * log P_exam(i)

Under PBM ``E[C[g, i]] = n_g theta_{r_i} a_i``: with the true propensities the ranker's target is
proportional to ``a_i`` within each list, and with the true relevance the propensity model's target
is proportional to ``theta_{r_i}``; each model is the other's inverse-propensity (inverse-relevance)
weight, and the pair's fixed point is the truth when both are expressive enough.

The reference relevance ``P_rel(ref_g)`` of each list is a constant per list, so with the true
relevance either choice has the same fixed point (``relevance_reference`` picks one for training
and the refit; by default training uses ``"first"`` and the ``"refit"`` update below ``"geomean"``):

* ``"first"`` (the default; Ai et al.): the list's first shown item, ``P_rel(first)``;
* ``"geomean"``: the geometric mean of the relevance of the list's K_g shown items,
  ``exp(mean_j log P_rel(j))``.

They differ when the ranker is off. Say ``P_rel(i)`` is proportional to ``a_i exp(e_i)``, with
errors ``e_i`` drawn independently of the position. Under ``"first"`` a click at position 1 has
weight exactly 1, while a click lower down has ``exp(e_first - e_i) a_first / a_i``. On average that
is larger by the factor ``E[exp(e_first)] E[exp(-e_i)] >= 1`` (Jensen; ``exp(s^2)`` for normal
errors of variance s^2), so every ``theta_r / theta_1`` for r >= 2 comes out too high by about that
factor. Under ``"geomean"`` the weight is ``(A_g / a_i) exp(mean_j e_j - e_i)``, where A_g is the
geometric mean of the list's ``a``. The error term ``mean_j e_j - e_i`` has the same distribution at
every position of the list, so its mean factor is a constant of the list and cancels.

How the propensity model follows the ranker (``propensity_update``):

* ``"sgd"`` (the default): ``phi`` takes an Adam step on ``loss_exam`` of the same minibatch as the
  ranker (learning rate ``propensity_lr``);
* ``"full"``: after every ranker step, ``phi`` is set to the minimiser of ``loss_exam`` over the whole
  grouped log given the current ranker, found by the MM (minorise-maximise) iteration of a
  multinomial-logit likelihood, warm-started from the current ``theta``::

      u[g, i] = C[g, i] * min(P_rel(ref_g) / P_rel(i), W)      (constants for the step)
      S_r = sum_g sum_{i at r} u[g, i],   U_g = sum_i u[g, i],   Z_g = sum_{i in g} theta_{r_i}
      theta_r <- S_r / sum_{g showing r} U_g / Z_g ;   theta <- theta / theta_1

  each iteration lowers ``loss_exam`` (``FULL_ITERATIONS`` per step). With a deterministic logger
  the pair's fixed points form a ridge (a ranker that absorbs part of the position effect fits the
  clicks as well), so where training ends on it depends on how closely ``phi`` tracks the ranker
  from the first steps: a lagging ``phi`` lets the ranker absorb position bias early. ``"full"``
  costs one forward pass of the ranker over all G lists per step (G^2 / batch_size rows per epoch).
* ``"refit"``: training as ``"sgd"``; then, at the kept ranker, ``phi`` is set once to the minimiser of
  ``loss_exam`` over the whole log by the same MM iteration (with the ``"geomean"`` reference unless
  ``relevance_reference`` names one). The ranker is ``"sgd"``'s, only the propensities reported
  differ: an Adam step per minibatch leaves ``phi`` jittering around its optimum when an epoch has
  many steps (a stochastic logger shows close to one distinct list per session), one forward pass
  over the lists removes that noise, and the geometric-mean reference removes the kept ranker's
  error factor from the positions below the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ltr.clicks.logs.lists import ShownLists
from ltr.base.errors import LtrError

__all__ = ["DLAResult", "fit_dla", "list_tensors", "PROPENSITY_UPDATES", "RELEVANCE_REFERENCES", "FULL_ITERATIONS",
           "resolved_references"]

PROPENSITY_UPDATES = ("sgd", "full", "refit")
#: the reference relevance of each list in the propensity loss's weights (module docstring)
RELEVANCE_REFERENCES = ("first", "geomean")
#: MM iterations of the ``"full"`` propensity update after each ranker step (warm-started).
FULL_ITERATIONS = 20


def resolved_references(relevance_reference: str | None) -> tuple[str, str]:
    """(reference of the training loss, reference of the refit) that ``relevance_reference`` names;
    None keeps the first item in training and the geometric mean in the refit (module docstring); any
    other name than those of ``RELEVANCE_REFERENCES`` is an error.

    >>> resolved_references(None), resolved_references("first")
    (('first', 'geomean'), ('first', 'first'))
    """
    if relevance_reference is None:
        return "first", "geomean"
    if relevance_reference not in RELEVANCE_REFERENCES:
        raise LtrError(f"DLA's relevance_reference must be one of {', '.join(RELEVANCE_REFERENCES)}, "
                       f"got {relevance_reference!r}")
    return relevance_reference, relevance_reference


@dataclass
class DLAResult:
    """The trained ranker (``model``), relative propensities ``theta`` [K] (NaN at the positions the lists do not
    identify, ``identified`` false), per-epoch losses and (with a validation set) per-epoch validation NDCG@10
    and the epoch kept."""

    model: object
    theta: np.ndarray
    history: list = field(default_factory=list)
    valid_history: list = field(default_factory=list)
    best_epoch: int | None = None
    identified: np.ndarray | None = None


def list_tensors(lists: ShownLists, features: np.ndarray, clicks: np.ndarray | None = None):
    """``(x [G, K, F], clicks [G, K], positions [G, K], mask [G, K])`` as torch tensors."""
    import torch

    mask = lists.mask
    x = np.asarray(features, dtype=np.float32)[np.where(mask, lists.docs, 0)]
    x[~mask] = 0.0
    c = lists.clicks if clicks is None else clicks
    return (torch.from_numpy(x), torch.from_numpy(np.asarray(c, dtype=np.float32)),
            torch.from_numpy(lists.positions.astype(np.int64)), torch.from_numpy(mask))


def _masked_log_softmax(values, mask):
    import torch

    return torch.log_softmax(values.masked_fill(~mask, torch.finfo(values.dtype).min), dim=1)


def _relevance_weights(log_rel, mask, max_weight, reference):
    """``min(P_rel(ref_g) / P_rel(i), W)`` [G, K] from the ranker's log-softmax ``log_rel``; the
    reference is the list's first item or the geometric mean of its items' relevance (module docstring)."""
    import torch

    if reference == "first":
        log_ref = log_rel[:, :1]
    else:
        # where, not a product: a masked entry of log_rel is the float minimum, and 0 * -inf would be NaN
        log_ref = torch.where(mask, log_rel, 0.0).sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1)
    return torch.clamp(torch.exp(log_ref - log_rel), max=max_weight)


def _dla_losses(model, phi, x, c, pos, mask, max_weight, reference="first", held=None):
    """``(loss_rank, loss_exam)`` of one batch of lists; see the module docstring. ``held`` [K]: the position whose
    propensity weighs the ranker's clicks at each position (itself, or for an unidentified one the nearest
    identified position above: :mod:`ltr.clicks.propensities.curves`)."""
    import torch

    log_rel = _masked_log_softmax(model(x, mask), mask)
    logit = torch.where(mask, phi[(pos - 1).clamp(min=0)], torch.zeros_like(log_rel))
    log_exam = _masked_log_softmax(logit, mask)
    with torch.no_grad():
        at = (pos - 1).clamp(min=0) if held is None else held[(pos - 1).clamp(min=0)]
        rel_theta = torch.exp(phi - phi[0])[at]
        w_prop = torch.clamp(1.0 / rel_theta, max=max_weight)
        w_rel = _relevance_weights(log_rel, mask, max_weight, reference)
    c = c * mask
    total = c.sum().clamp(min=1.0)
    return -(c * w_prop * log_rel).sum() / total, -(c * w_rel * log_exam).sum() / total


def _full_propensity_update(model, phi, x, c, mask, max_weight, iterations=FULL_ITERATIONS, reference="first"):
    """Set ``phi`` to the minimiser of ``loss_exam`` over all lists given the current ranker, by the MM
    iteration of the module docstring (warm-started from ``phi``; positions without a click, or never
    shown, keep their value)."""
    import torch

    was_training = model.training
    with torch.no_grad():
        model.eval()
        log_rel = _masked_log_softmax(model(x, mask), mask)
        u = (c * mask * _relevance_weights(log_rel, mask, max_weight, reference)).double()
        m = mask.double()
        s, total = u.sum(0), u.sum(1)
        theta = torch.exp(phi.detach() - phi.detach()[0]).double()
        ok = s > 0
        for _ in range(iterations):
            den = (m * (total / (m * theta).sum(1).clamp(min=1e-300))[:, None]).sum(0)
            theta = torch.where(ok & (den > 0), s / den.clamp(min=1e-300), theta)
            theta = theta / theta[0]
        phi.copy_(torch.log(theta.clamp(min=1e-12)).to(phi.dtype))
    model.train(was_training)


def fit_dla(
    lists: ShownLists,
    features: np.ndarray,
    model,
    *,
    epochs: int = 30,
    batch_size: int = 256,
    lr: float = 1e-2,
    propensity_lr: float | None = None,
    propensity_update: str = "sgd",
    relevance_reference: str | None = None,
    max_weight: float = 100.0,
    seed: int = 0,
    clicks: np.ndarray | None = None,
    valid=None,
    patience: int | None = 5,
    min_impressions: int = 1,
    progress: bool = False,
) -> DLAResult:
    """Train ``model`` (a scorer of :mod:`ltr.train.models`) and the propensity logits jointly by Adam
    over batches of lists; ``clicks`` [G, K] overrides ``lists.clicks`` (e.g. expected counts).
    ``propensity_update`` (``"sgd"``, ``"full"`` or ``"refit"``): how the propensity logits follow the
    ranker, see the module docstring (``propensity_lr`` is used by ``"sgd"`` and ``"refit"``).
    ``relevance_reference`` (``"first"`` or ``"geomean"``): the reference relevance of each list in
    the propensity loss's weights, in training and in the refit; None (the default): ``"first"`` in
    training, ``"geomean"`` in the refit.

    ``valid`` (a labelled :class:`ltr.data.RankingDataset`): after each epoch the ranker's NDCG@10 on it
    is measured, and the ranker and propensities of the best epoch are returned (training stops after
    ``patience`` epochs without improvement). A ranker that memorises the logged items can explain
    the clicks with any propensities (the pair's fixed points are then not unique), so without a
    validation set long training drifts. ``progress``: a bar over the epochs with the validation value.

    ``min_impressions``: a position shown fewer times gets NaN, its clicks the weight of the nearest identified
    position above (:mod:`ltr.clicks.propensities.curves`).
    """
    import copy

    import torch
    from tqdm.auto import tqdm

    _check_dla_args(epochs, batch_size, max_weight, propensity_update)
    training_reference, refit_reference = resolved_references(relevance_reference)
    x, c, pos, mask = list_tensors(lists, features, clicks)
    if float(c.sum()) <= 0:
        raise LtrError("DLA needs at least one click in the log")
    known, held = _identified(lists, min_impressions)
    torch.manual_seed(seed)
    phi = torch.nn.Parameter(torch.zeros(lists.docs.shape[1]))
    opt = torch.optim.Adam([{"params": model.parameters(), "lr": lr},
                            {"params": [phi], "lr": propensity_lr or lr}])
    gen = torch.Generator().manual_seed(seed)
    history, valid_history = [], []
    best = BestEpoch(patience)
    model.train()
    bar = tqdm(total=epochs, desc="DLA epochs", unit="epoch", disable=not progress)
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        history.append(_dla_epoch(model, phi, opt, (x, c, pos, mask), order, batch_size, max_weight,
                                  propensity_update, training_reference, held))
        stop = False
        if valid is not None:
            value = _valid_ndcg(model, valid)
            valid_history.append(value)
            model.train()
            stop = best.see(value, epoch, lambda: (copy.deepcopy(model.state_dict()), phi.detach().clone()))
            bar.set_postfix_str(best.note(value))
        bar.update()
        if stop:
            break
    bar.close()
    if valid is not None:
        model.load_state_dict(best.saved[0])
        phi = best.saved[1]
    model.eval()
    if propensity_update == "refit":
        phi = phi.detach().clone()
        _full_propensity_update(model, phi, x, c, mask, max_weight, reference=refit_reference)
    theta = np.where(known, torch.exp(phi.detach() - phi.detach()[0]).double().numpy(), np.nan)
    return DLAResult(model, theta, history, valid_history, best.epoch if valid is not None else None, known)


def _check_dla_args(epochs: int, batch_size: int, max_weight: float, propensity_update: str) -> None:
    if epochs < 1 or batch_size < 1 or max_weight < 1:
        raise LtrError(f"DLA needs epochs >= 1, batch_size >= 1 and max_weight >= 1, got {epochs}, {batch_size}, {max_weight}")
    if propensity_update not in PROPENSITY_UPDATES:
        raise LtrError(f"DLA's propensity_update must be one of {', '.join(PROPENSITY_UPDATES)}, got {propensity_update!r}")


def _identified(lists: ShownLists, min_impressions: int):
    """``(identified [K], held [K] torch)``: the positions shown at least ``min_impressions`` times over the lists'
    sessions, and for each position the one whose propensity weighs its clicks (itself, or the nearest
    identified position above)."""
    import torch

    from ltr.clicks.propensities.curves import identified_positions

    shown = (lists.sessions[:, None] * lists.mask).sum(axis=0)
    known = identified_positions(shown, min_impressions)
    known[0] = True  # every propensity is relative to position 1
    held = np.maximum.accumulate(np.where(known, np.arange(len(known)), 0))
    return known, torch.from_numpy(held.astype(np.int64))


def _dla_epoch(model, phi, opt, tensors, order, batch_size: int, max_weight: float, propensity_update: str,
               reference: str = "first", held=None) -> float:
    """One pass over the lists in ``order``: a step of the ranker (and of ``phi`` under ``"sgd"`` and
    ``"refit"``) per batch, ``phi`` set to its optimum after each step under ``"full"``; the summed losses."""
    x, c, pos, mask = tensors
    total = 0.0
    for start in range(0, len(x), batch_size):
        b = order[start : start + batch_size]
        loss_rank, loss_exam = _dla_losses(model, phi, x[b], c[b], pos[b], mask[b], max_weight, reference, held)
        opt.zero_grad()
        (loss_rank if propensity_update == "full" else loss_rank + loss_exam).backward()
        opt.step()
        if propensity_update == "full":
            _full_propensity_update(model, phi, x, c, mask, max_weight, reference=reference)
        total += float(loss_rank.detach()) + float(loss_exam.detach())
    return total


class BestEpoch:
    """The epoch of best validation value so far and what was saved at it; early stopping after
    ``patience`` epochs without a gain (None: never)."""

    def __init__(self, patience: int | None):
        self.patience, self.value, self.epoch, self.saved = patience, -np.inf, 0, None

    def see(self, value: float, epoch: int, snapshot) -> bool:
        """Record an epoch's value (``snapshot()`` is saved when it is the best); True = stop training."""
        if value > self.value:
            self.value, self.epoch, self.saved = value, epoch, snapshot()
            return False
        return self.patience is not None and epoch - self.epoch >= self.patience

    def note(self, value: float) -> str:
        """The progress bar's note after an epoch: its validation NDCG@10 and the best so far (1-based epoch)."""
        return f"valid NDCG@10 {value:.4f}, best {self.value:.4f} at epoch {self.epoch + 1}"


def _valid_ndcg(model, ds) -> float:
    import metrics
    from ltr.train.trainer import predict_scores

    model.eval()
    scores = predict_scores(model, ds.features, query_offsets=ds.query_offsets)
    ev = metrics.evaluate(scores, ds.labels, ds.query_offsets, ["ndcg@10"])
    return float(ev.mean[ev.names["ndcg@10"]])
