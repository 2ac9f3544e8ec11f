"""Losses by name: ``get_loss("lambdarank", k=10)`` builds ``LambdaRank(k=10)``.

The names are the ones the CLI and the configuration files use.

>>> get_loss("ranknet", sigma=2.0)
RankNet(sigma=2.0, reduction='mean')
>>> get_loss("hinge", margin=0.5)
PairwiseHinge(margin=0.5, reduction='mean')
>>> get_loss("lambdamart")
Traceback (most recent call last):
...
ValueError: unknown loss 'lambdamart'; valid names: approx_ndcg, arp_loss1, arp_loss2, bce, hinge, lambdarank, listmle, listnet, mse, ndcg_loss1, ndcg_loss2, ndcg_loss2pp, neural_ndcg, neural_sort_ce, ranknet, softmax
"""

from __future__ import annotations

from torch import nn

from losses.approx_ndcg import ApproxNDCG
from losses.lambdaloss import NDCGLoss1, NDCGLoss2, NDCGLoss2PP
from losses.lambdaloss_arp import ARPLoss1, ARPLoss2
from losses.lambdarank import LambdaRank
from losses.listmle import ListMLE
from losses.listwise import ListNet, SoftmaxCrossEntropy
from losses.neural_ndcg import NeuralNDCG
from losses.neural_sort_ce import NeuralSortCrossEntropy
from losses.pairwise import PairwiseHinge, RankNet
from losses.pointwise import PointwiseBCE, PointwiseMSE

__all__ = ["LOSSES", "get_loss", "loss_names"]

LOSSES: dict[str, type[nn.Module]] = {
    "ranknet": RankNet,
    "hinge": PairwiseHinge,
    "lambdarank": LambdaRank,
    "ndcg_loss1": NDCGLoss1,
    "ndcg_loss2": NDCGLoss2,
    "ndcg_loss2pp": NDCGLoss2PP,
    "arp_loss1": ARPLoss1,
    "arp_loss2": ARPLoss2,
    "listnet": ListNet,
    "softmax": SoftmaxCrossEntropy,
    "listmle": ListMLE,
    "approx_ndcg": ApproxNDCG,
    "neural_ndcg": NeuralNDCG,
    "neural_sort_ce": NeuralSortCrossEntropy,
    "bce": PointwiseBCE,
    "mse": PointwiseMSE,
}


def loss_names() -> list[str]:
    """The valid loss names, sorted."""
    return sorted(LOSSES)


def get_loss(name: str, **kwargs) -> nn.Module:
    """Build the loss registered under ``name`` (case-insensitive) with ``kwargs``.

    Raises ValueError listing the valid names for an unknown one, and a TypeError naming the loss
    for an option it does not take.
    """
    key = str(name).strip().lower()
    if key not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; valid names: {', '.join(loss_names())}")
    try:
        return LOSSES[key](**kwargs)
    except TypeError as exc:
        raise TypeError(f"loss {key!r}: {exc}") from None
