"""losses: torch ranking losses with one interface, ``loss(scores, labels, mask, weights=None)``.

Inputs are padded ``[B, L]`` tensors with a bool ``mask`` (True = real item); padding never changes
a value or a gradient. Pairwise and listwise losses reduce per query (``"mean"`` = average of the
per-query sums over queries with at least one real item); pointwise ones per item. The metric-aware
weights (LambdaRank, LambdaLoss) come from :mod:`metrics.swap`, so training and evaluation share
one definition of gain, discount and ideal DCG.
"""

from losses.lambdaloss import NDCGLoss2, NDCGLoss2PP
from losses.lambdarank import LambdaRank
from losses.listwise import ListNet
from losses.pairwise import RankNet
from losses.pointwise import PointwiseBCE, PointwiseMSE
from losses.registry import LOSSES, get_loss, loss_names

__all__ = [
    "RankNet",
    "LambdaRank",
    "NDCGLoss2",
    "NDCGLoss2PP",
    "ListNet",
    "PointwiseBCE",
    "PointwiseMSE",
    "LOSSES",
    "get_loss",
    "loss_names",
]
