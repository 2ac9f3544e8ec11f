r"""Lambda weights: the metric-aware weights of LambdaRank and LambdaLoss, for any pair or softmax loss.

TF-Ranking and Rax let any pairwise loss take any lambda weight; here the pairwise losses
(``RankNet``, ``PairwiseHinge``) take ``lambda_weight=`` and ``SoftmaxCrossEntropy`` takes the
per-item form. Everything is computed from the ranking induced by the current scores (stable
descending sort; r_i is the 1-based rank of item i), with G_i = g_i / IDCG@K the normalised gain of
:func:`metrics.normalised_gains` and D(r) = 1 / discount(r) (= log2(1 + r) for the default
discount). The weights are constants for autograd.

Pair weights (pairs with y_i > y_j):

* ``"ndcg"``: ``|G_i - G_j| * |1/D(r_i) - 1/D(r_j)|`` (discounts 0 beyond K) = |ΔNDCG@K_ij|, the
  weight of LambdaRank (:mod:`metrics.swap`). TF-Ranking: ``DCGLambdaWeight(normalized=True,
  smooth_fraction=1)``; Rax: ``dcg_lambdaweight(normalize=True)``.
* ``"ndcg2"``: ``|G_i - G_j| * |1/D(|r_i - r_j|) - 1/D(|r_i - r_j| + 1)|``, the weight of
  NDCG-Loss2 (Wang et al., CIKM 2018). TF-Ranking: ``DCGLambdaWeight(normalized=True,
  smooth_fraction=0)``; Rax: ``dcg2_lambdaweight(normalize=True)``. With ``k_method="jagerman"``
  and a cutoff K, the position term of a pair with max(r_i, r_j) > K is multiplied by
  ``1 / (1 - 1/D(max(r_i, r_j)))`` and every pair is kept (Jagerman et al., SIGIR 2022; Rax's
  ``dcg2_lambdaweight(topn=K)``).

With a cutoff K and ``k_method="truncate"`` (the default), IDCG is cut at K and only pairs with at
least one item in the current top K are built. Unlike TF-Ranking, the pair weights are not
multiplied by the list size (its heuristic to bring the loss back to the scale of the unweighted
one); scale the learning rate instead.

Item weights (``SoftmaxCrossEntropy(lambda_weight="ndcg")``): ``G_i / D(r_i)``, TF-Ranking's
``SoftmaxLoss`` with a ``DCGLambdaWeight(normalized=True)``, whose ``individual_weights`` replace the
labels. A cutoff K acts by ``k_rule`` (:data:`ITEM_K_RULES`):

* ``"items"`` (the default): each item's share of the current NDCG@K: IDCG cut at K and 0 below
  rank K, so an item ranked below K draws no gradient toward its label;
* ``"ideal"``: TF-Ranking's ``DCGLambdaWeight(topn=K)``, whose ``individual_weights`` cut only the
  ideal DCG (``inverse_max_dcg(topn=K)``) and keep ``G_i / D(r_i)`` at every rank. Same weights
  above rank K; below it ``"items"`` gives 0 where TF-Ranking does not (a relevant item at rank 2
  with K = 1 and labels [0, 1], exp2 gains: 0 against 1 / log2(3) = 0.6309).

>>> import torch
>>> y = torch.tensor([[0.0, 1.0]]); s = torch.tensor([[1.0, 0.0]])   # relevant item at rank 2
>>> w, order, top = pair_lambda_weights("ndcg", s, y, torch.ones(1, 2, dtype=torch.bool))
>>> round(float(w.block(0, 1, 1, 2)), 4)   # |G| * (1 - 1/log2(3)), G = 1
0.3691
"""

from __future__ import annotations

import torch

from losses.lambdaloss import K_METHODS, _LambdaLossWeights
from metrics.swap import prepare_swap_deltas

__all__ = ["LAMBDA_WEIGHTS", "ITEM_LAMBDA_WEIGHTS", "ITEM_K_RULES", "check_lambda_weight", "pair_lambda_weights",
           "item_lambda_weights"]

LAMBDA_WEIGHTS = ("ndcg", "ndcg2")
ITEM_LAMBDA_WEIGHTS = ("ndcg",)
ITEM_K_RULES = ("items", "ideal")


def check_lambda_weight(lambda_weight, k_method: str = "truncate", allowed=LAMBDA_WEIGHTS):
    """Return ``lambda_weight`` (None or one of ``allowed``) after checking it and ``k_method``."""
    if lambda_weight is not None and lambda_weight not in allowed:
        raise ValueError(f"lambda_weight must be None or one of {allowed}, got {lambda_weight!r}")
    if k_method not in K_METHODS:
        raise ValueError(f"k_method must be one of {K_METHODS}, got {k_method!r}")
    if k_method == "jagerman" and lambda_weight != "ndcg2":
        raise ValueError("k_method='jagerman' applies to lambda_weight='ndcg2' only")
    return lambda_weight


def pair_lambda_weights(lambda_weight: str, scores, labels, mask, *, k=None, k_method="truncate",
                        gain="exp2", discount="log2"):
    """``(pair_weight, order, top)`` for the pair engine (``losses.pair_engine``); see the module docstring.

    ``scores``, ``labels``, ``mask``: checked ``[B, L]`` tensors; ``top`` is the truncation the
    engine must apply (K for ``"truncate"``, None otherwise).
    """
    check_lambda_weight(lambda_weight, k_method)
    ndcg = prepare_swap_deltas("ndcg", scores, labels, mask, k=k, gain=gain, discount=discount)
    jagerman = k_method == "jagerman" and k is not None
    top = None if jagerman else k
    if lambda_weight == "ndcg":
        return ndcg, ndcg.order, top
    weight = _LambdaLossWeights(ndcg, discount, 1.0, False, k if jagerman else None, in_log2=False)
    return weight, ndcg.order, top


def item_lambda_weights(lambda_weight: str, scores, labels, mask, *, k=None, gain="exp2",
                        discount="log2", k_rule: str = "items") -> torch.Tensor:
    """``[B, L]`` item weights ``G_i / D(r_i)`` (item order; 0 on padding; with a cutoff K, 0 below
    rank K for ``k_rule="items"``, every rank kept for ``"ideal"``: the module docstring).

    >>> import torch
    >>> s, y, m = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]), torch.ones(1, 2, dtype=torch.bool)
    >>> [round(float(item_lambda_weights("ndcg", s, y, m, k=1, k_rule=r)[0, 1]), 4) for r in ITEM_K_RULES]
    [0.0, 0.6309]
    """
    check_lambda_weight(lambda_weight, allowed=ITEM_LAMBDA_WEIGHTS)
    if k_rule not in ITEM_K_RULES:
        raise ValueError(f"k_rule must be one of {ITEM_K_RULES}, got {k_rule!r}")
    ndcg = prepare_swap_deltas("ndcg", scores, labels, mask, k=k, gain=gain, discount=discount)
    discounts = ndcg.discounts
    if k_rule == "ideal" and k is not None:  # the same order; the discounts of every rank
        discounts = prepare_swap_deltas("ndcg", scores, labels, mask, gain=gain, discount=discount).discounts
    in_rank = (ndcg.normalised * discounts[None, :]).to(scores.dtype)
    return torch.zeros_like(scores).scatter_(1, ndcg.order, in_rank).masked_fill(~mask, 0.0)
