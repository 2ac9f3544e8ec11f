"""A context-aware scorer: self-attention over the items of each query (Transformer encoder, masked).

Pobrotyn, Bartczak, Synowiec, Białobrzeski, Bojar, "Context-Aware Learning to Rank with
Self-Attention" (SIGIR eCom 2020; allRank's ranker): the score of an item depends on the other items
of its list. Architecture, for a list ``x [L, F]`` with real items ``mask [L]``::

    h = Linear(F -> width)(transform(x))                 the per-item embedding
    h = TransformerEncoder(h, key padding = ~mask)       ``layers`` pre-norm blocks of ``heads`` heads,
                                                         feed-forward 2 * width, GELU, ``dropout``
    score = Linear(width -> 1)(LayerNorm(h))

There is no positional encoding, so the scorer is permutation-equivariant: permuting a query's
items permutes its scores. Padded items are masked out as keys: they never change a real item's
score. A query of one item attends to itself only. Cost per list: O(L^2 * width) time and
O(heads * L^2) memory per layer.

Because scores depend on the whole list, prediction goes query by query
(``listwise = True``; :func:`ltr.train.trainer.predict_scores` with ``query_offsets``). A 2-D input
``[L, F]`` is taken as one list.

>>> import torch
>>> m = ContextAwareScorer(4, width=8, heads=2, layers=1).eval()
>>> m(torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)).shape
torch.Size([2, 3])
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ltr.base.errors import LtrError
from ltr.train import draws as keyed_draws
from ltr.train.scorers import _Scorer

__all__ = ["ContextAwareScorer", "KeyedMultiheadAttention"]


class KeyedMultiheadAttention(nn.MultiheadAttention):
    """:class:`torch.nn.MultiheadAttention` whose attention-weight dropout is keyed by query in training
    (:mod:`ltr.train.draws`); the same parameters and state dict, and torch's own code everywhere else.

    Keyed path (batch first, self-attention): ``A = softmax(Q K^T / sqrt(d) - inf * padded_key)``,
    ``A' = A * (u >= p) / (1 - p)`` with ``u`` drawn per query, output ``out_proj(A' V)`` per head.
    """

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        draws = keyed_draws.current(query)
        if not self.training or self.dropout == 0.0 or draws is None or attn_mask is not None or not self.batch_first:
            return super().forward(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights,
                                   attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal)
        b, length, width = query.shape
        heads, d = self.num_heads, width // self.num_heads
        q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, length, heads, d).transpose(1, 2) for t in (q, k, v))
        logits = q @ k.transpose(-2, -1) / math.sqrt(d)
        if key_padding_mask is not None:  # the encoder hands it on as an additive float mask (-inf on padding)
            pad = key_padding_mask[:, None, None, :]
            logits = logits.masked_fill(pad, float("-inf")) if pad.dtype == torch.bool else logits + pad
        weights = torch.softmax(logits, dim=-1)
        weights = weights * (draws.uniform_pairs(weights.shape, weights.dtype, weights.device) >= self.dropout) / (1.0 - self.dropout)
        out = (weights @ v).transpose(1, 2).reshape(b, length, width)
        return self.out_proj(out), None


def _keyed_blocks(encoder: nn.TransformerEncoder) -> None:
    """Give every block of ``encoder`` keyed dropout (its three Dropout modules and the attention's),
    keeping the parameters: N processes then train exactly what one process trains."""
    for layer in encoder.layers:
        for name in ("dropout", "dropout1", "dropout2"):
            setattr(layer, name, keyed_draws.KeyedDropout(getattr(layer, name).p))
        old = layer.self_attn
        new = nn.utils.skip_init(KeyedMultiheadAttention, old.embed_dim, old.num_heads, dropout=old.dropout,
                                 batch_first=old.batch_first)
        new.load_state_dict(old.state_dict(), assign=True)  # the same tensors (meta ones too, when a folder is loaded)
        layer.self_attn = new


class ContextAwareScorer(_Scorer):
    """Masked Transformer encoder over each query's items; see the module docstring.

    Args:
        n_features: input width F.
        width: embedding width (default 64); must be a multiple of ``heads``.
        heads: attention heads per layer (default 2).
        layers: encoder blocks (default 2).
        dropout: dropout inside the blocks (default 0.1).
        input_noise: Gaussian noise on the normalised inputs while training (default 0).
    """

    kind = "attention"
    listwise = True  # type: ignore[assignment]

    def __init__(self, n_features: int, width: int = 64, heads: int = 2, layers: int = 2, dropout: float = 0.1,
                 input_noise: float = 0.0, query_norm: str = "none"):
        super().__init__(n_features, input_noise, query_norm)
        width, heads, layers = int(width), int(heads), int(layers)
        if width < 1 or heads < 1 or layers < 1:
            raise LtrError(f"width, heads and layers must be >= 1, got {width}, {heads}, {layers}")
        if width % heads:
            raise LtrError(f"width ({width}) must be a multiple of heads ({heads})")
        if not 0.0 <= float(dropout) < 1.0:
            raise LtrError(f"dropout must be in [0, 1), got {dropout}")
        self.width, self.heads, self.layers, self.dropout = width, heads, layers, float(dropout)
        self.embed = nn.Linear(self.input_width, width)
        block = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width, dropout=self.dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        _keyed_blocks(self.encoder)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        one_list = x.dim() == 2
        if one_list:
            x = x.unsqueeze(0)
            mask = None if mask is None else mask.unsqueeze(0)
        if x.dim() != 3:
            raise LtrError(f"the context-aware scorer takes lists [B, L, F] (or one list [L, F]), got {tuple(x.shape)}")
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        # padding may hold anything (NaN included): zero it before it enters any sum
        h = self.embed(self._prepare(x.masked_fill(~mask[..., None], 0.0), mask))
        h = self.encoder(h, src_key_padding_mask=~mask)
        scores = self.out(self.norm(h)).squeeze(-1).masked_fill(~mask, 0.0)
        return scores[0] if one_list else scores

    def _arch(self) -> dict[str, Any]:
        return {"type": "attention", "n_features": self.n_features, "width": self.width, "heads": self.heads,
                "layers": self.layers, "dropout": self.dropout}
