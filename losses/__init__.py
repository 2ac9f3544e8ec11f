"""losses: torch ranking losses with one interface, ``loss(scores, labels, mask, weights=None)``.

Inputs are padded ``[B, L]`` tensors with a bool ``mask`` (True = real item); padding never changes
a value or a gradient. Pairwise and listwise losses reduce per query (``"mean"`` = average of the
per-query sums over queries with at least one real item); pointwise ones per item; pairwise ones
can also average over pairs (``"pair_mean"``) or over pair weights (``"weight_mean"``). The metric-aware
weights (LambdaRank, LambdaLoss) come from :mod:`metrics.swap`, so training and evaluation share
one definition of gain, discount and ideal DCG.
"""

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
from losses.registry import LOSSES, get_loss, loss_names

__all__ = [
    "RankNet",
    "PairwiseHinge",
    "LambdaRank",
    "NDCGLoss1",
    "NDCGLoss2",
    "NDCGLoss2PP",
    "ARPLoss1",
    "ARPLoss2",
    "ListNet",
    "SoftmaxCrossEntropy",
    "ListMLE",
    "ApproxNDCG",
    "NeuralNDCG",
    "NeuralSortCrossEntropy",
    "PointwiseBCE",
    "PointwiseMSE",
    "LOSSES",
    "get_loss",
    "loss_names",
]
