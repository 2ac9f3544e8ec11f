r"""Built-in pair weights for the pair engine: the label difference |y_i - y_j|.

A pair weight is an object with ``block(p0, p1, q0, q1) -> [B, p1-p0, q1-q0]`` in rank coordinates
(see ``losses.pair_engine``). ``"label_diff"`` weighs the pair (i, j) by ``|y_i - y_j|``, so a
pair that is two grades apart counts twice as much as neighbours (TF-Ranking's
``LabelDiffLambdaWeight``, Rax's ``labeldiff_lambdaweight``; with RankNet it is ARP-Loss2 of Wang
et al. 2018 in natural log). It can multiply another pair weight, e.g. LambdaRank's |ΔNDCG|.

>>> import torch
>>> y = torch.tensor([[3.0, 0.0, 1.0]]); m = torch.ones(1, 3, dtype=torch.bool)
>>> LabelDiffWeights(y, m, torch.tensor([[0, 1, 2]])).block(0, 1, 1, 3)
tensor([[[3., 2.]]])
"""

from __future__ import annotations

import torch

__all__ = ["PAIR_WEIGHTS", "LabelDiffWeights", "check_pair_weight"]

PAIR_WEIGHTS = ("label_diff",)


def check_pair_weight(pair_weight):
    """Return ``pair_weight`` if it is None or one of ``PAIR_WEIGHTS``, else raise a ValueError."""
    if pair_weight is not None and pair_weight not in PAIR_WEIGHTS:
        raise ValueError(f"pair_weight must be None or one of {PAIR_WEIGHTS}, got {pair_weight!r}")
    return pair_weight


class LabelDiffWeights:
    """``|y_p - y_q|`` for rank positions p, q (times ``base``'s weight when one is given).

    Args:
        labels, mask: checked ``[B, L]`` tensors in item order.
        order: ``[B, L]`` rank order (padding last), the one the engine is given.
        base: None or another pair weight with ``block`` (and optionally ``unmasked_block``).
    """

    def __init__(self, labels: torch.Tensor, mask: torch.Tensor, order: torch.Tensor, base=None):
        self.order = order
        self.labels = labels.gather(1, order)
        self.valid = mask.gather(1, order)
        self._base = None if base is None else getattr(base, "unmasked_block", base.block)

    def unmasked_block(self, p0: int, p1: int, q0: int, q1: int) -> torch.Tensor:
        """The weights without zeroing pairs that involve padding (the engine zeroes those)."""
        diff = (self.labels[:, p0:p1, None] - self.labels[:, None, q0:q1]).abs()
        return diff if self._base is None else diff * self._base(p0, p1, q0, q1)

    def block(self, p0: int, p1: int, q0: int, q1: int) -> torch.Tensor:
        """The weights of rank positions p in [p0, p1), q in [q0, q1); 0 on pairs with padding."""
        both = self.valid[:, p0:p1, None] & self.valid[:, None, q0:q1]
        return self.unmasked_block(p0, p1, q0, q1) * both.to(self.labels.dtype)
