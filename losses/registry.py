"""Losses by name: ``get_loss("lambdarank", k=10)`` builds ``LambdaRank(k=10)``.

The names are the ones the CLI and the configuration files use.

>>> get_loss("ranknet", sigma=2.0)
RankNet(sigma=2.0, reduction='mean')
>>> get_loss("hinge")
Traceback (most recent call last):
...
ValueError: unknown loss 'hinge'; valid names: bce, lambdarank, listnet, mse, ndcg_loss2, ndcg_loss2pp, ranknet
"""

from __future__ import annotations

from torch import nn

from losses.lambdaloss import NDCGLoss2, NDCGLoss2PP
from losses.lambdarank import LambdaRank
from losses.listwise import ListNet
from losses.pairwise import RankNet
from losses.pointwise import PointwiseBCE, PointwiseMSE

__all__ = ["LOSSES", "get_loss", "loss_names"]

LOSSES: dict[str, type[nn.Module]] = {
    "ranknet": RankNet,
    "lambdarank": LambdaRank,
    "ndcg_loss2": NDCGLoss2,
    "ndcg_loss2pp": NDCGLoss2PP,
    "listnet": ListNet,
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
