r"""NeuralSort cross-entropy (TF-Ranking's ``NeuralSortCrossEntropyLoss``): the relaxed sort of the
scores against the relaxed sort of the labels, row by row.

NeuralSort (Grover, Wang, Zweig, Ermon, ICLR 2019; :func:`losses.neural_ndcg.neural_sort`) turns a
list of n values v into a row-stochastic matrix whose row i is a soft one-hot of the item at
rank i::

    P(v; tau)[i, :] = softmax( ((n + 1 - 2i) * v - A_v 1) / tau ),   (A_v)_jk = |v_j - v_k|

For one query with n real items, scores s and labels y::

    loss_q = (1/n) * sum_{i=1..n} -sum_j P(y; 1)[i, j] * log(P(s; T)[i, j] + eps)

so each rank's target is where the labels (softly) put their i-th item, and the model is asked to
put the same item there. The label matrix uses temperature 1, the score matrix the loss's
``temperature`` T, and ``eps`` = 1e-20 floors the logarithm, all as TF-Ranking. A query whose
labels sum to 0 contributes 0 (TF-Ranking gives it weight 0). Item weights w multiply each column
term (w_j inside the sum). Padding is left out of n, the sorts and the sums. Cost O(B L^2).
No Sinkhorn scaling (unlike :class:`losses.NeuralNDCG`).

>>> import torch
>>> loss = NeuralSortCrossEntropy(reduction="sum")
>>> round(float(loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]]))), 4)   # same order
0.5822
"""

from __future__ import annotations

import torch
from torch import nn

from losses._inputs import check_inputs, check_reduction, reduce_per_query
from losses.neural_ndcg import neural_sort

__all__ = ["NeuralSortCrossEntropy"]


class NeuralSortCrossEntropy(nn.Module):
    """NeuralSort cross-entropy: ``loss(scores, labels, mask, weights=None)``; see the module docstring.

    Args:
        temperature: T of the scores' NeuralSort (default 1, TF-Ranking's default).
        eps: floor added inside the logarithm (default 1e-20, as TF-Ranking; 0 = none).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``[B]``).
    """

    def __init__(self, temperature: float = 1.0, reduction: str = "mean", *, eps: float = 1e-20):
        super().__init__()
        if not float(temperature) > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if not float(eps) >= 0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        self.temperature = float(temperature)
        self.eps = float(eps)
        self.reduction = check_reduction(reduction)

    def forward(self, scores, labels, mask=None, weights=None) -> torch.Tensor:
        out_dtype = getattr(scores, "dtype", None)
        scores, labels, mask, weights = check_inputs(scores, labels, mask, weights, widen=True)
        target = neural_sort(labels, mask, 1.0)  # rows beyond n and padded columns are 0
        p = neural_sort(scores, mask, self.temperature)
        log_p = torch.log(p + self.eps) if self.eps > 0 else torch.log(p.clamp(min=torch.finfo(p.dtype).tiny))
        terms = target * log_p
        if weights is not None:
            terms = terms * weights[:, None, :]
        n = mask.sum(dim=1).to(scores.dtype)
        per_query = -terms.sum(dim=(1, 2)) / n.clamp(min=1.0)
        per_query = torch.where(labels.sum(dim=1) > 0, per_query, torch.zeros_like(per_query))
        return reduce_per_query(per_query, mask, self.reduction).to(out_dtype)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, reduction={self.reduction!r}, eps={self.eps}"
