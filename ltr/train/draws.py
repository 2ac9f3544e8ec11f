"""Training's random draws keyed by what they fall on, so that N processes draw what one process draws.

Input noise and dropout are drawn per *query*, not per batch or per process: the values that fall on
query ``q`` of the training set in sampler epoch ``e`` come from a generator seeded with

    key(seed, e, q, site) = splitmix64 of the four numbers in turn,

where ``site`` counts the draws of one forward pass in order (the input noise is site 0, the first
dropout layer site 1, ...). Query ``q``'s values fill its ``L_q`` real rows ``[L_q, W]``; padding gets
nothing it could pass on. Why per query: under ``ltr train --nproc N`` each process takes a slice of
every batch and pads it to the slice's own longest list, so a draw shaped like the padded batch (as
``torch.randn_like``) would give each item other values than one process gives it. Keyed by query,
an item sees the same noise whatever batch, padding or process it is scored in, so the N-process
gradient is the one-process gradient (tests/test_distributed.py) and a resumed run draws what an
uninterrupted one does without restoring any generator state.

The trainer opens a :func:`keyed` context around each training forward pass; scorers call
:func:`normal_like` (input noise) and :class:`KeyedDropout` (dropout), which fall back to torch's
global generator outside such a context (a model trained by hand in train mode).

>>> import torch
>>> draws = QueryDraws(seed=0, epoch=1, query_index=torch.tensor([7, 3]), lengths=torch.tensor([2, 1]))
>>> a = draws.normal((2, 2, 4), torch.float32)
>>> b = QueryDraws(0, 1, torch.tensor([3]), torch.tensor([1])).normal((1, 3, 4), torch.float32)
>>> torch.equal(a[1, :1], b[0, :1]), float(a[1, 1:].abs().sum()), float(b[0, 1:].abs().sum())
(True, 0.0, 0.0)
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import torch
from torch import nn

__all__ = ["QueryDraws", "keyed", "current", "normal_like", "KeyedDropout", "splitmix64"]

_MASK64 = (1 << 64) - 1
_current: contextvars.ContextVar["QueryDraws | None"] = contextvars.ContextVar("ltr_query_draws", default=None)


def splitmix64(*parts: int) -> int:
    """A 64-bit key mixing ``parts`` in order (splitmix64's finaliser after each one); in [0, 2^63).

    >>> splitmix64(0, 1, 2) == splitmix64(0, 1, 2), splitmix64(0, 1, 2) == splitmix64(0, 2, 1)
    (True, False)
    """
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = (h + (int(part) & _MASK64) + 0x9E3779B97F4A7C15) & _MASK64
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK64
        h ^= h >> 31
    return h >> 1  # torch's manual_seed takes a non-negative int64


class QueryDraws:
    """The draws of one training forward pass over a padded batch of queries [B, L, ...].

    ``query_index`` [B]: the queries' positions in the training set; ``lengths`` [B]: their real
    lengths (``mask.sum(1)``). Each call takes the next draw site.
    """

    def __init__(self, seed: int, epoch: int, query_index: torch.Tensor, lengths: torch.Tensor):
        self.seed, self.epoch = int(seed), int(epoch)
        self.queries = [int(q) for q in query_index.reshape(-1).tolist()]
        self.lengths = [int(n) for n in lengths.reshape(-1).tolist()]
        if len(self.queries) != len(self.lengths):
            raise ValueError(f"{len(self.queries)} query indices for {len(self.lengths)} lengths")
        self.site = 0

    def _fill(self, shape, dtype, device, draw) -> torch.Tensor:
        """``draw(view, generator)`` fills each query's rows ``out[b, :n]`` in place (a contiguous view, so
        the values are those of a fresh ``torch.randn`` / ``torch.rand`` of that shape)."""
        shape = tuple(int(s) for s in shape)
        if len(shape) < 2 or shape[0] != len(self.queries):
            raise ValueError(f"keyed draws need a [B, L, ...] tensor of B = {len(self.queries)} queries, got {list(shape)}")
        out = torch.zeros(shape, dtype=dtype, device=device)
        for b, n, generator in self._seeded_queries(shape[1], device):
            draw(out[b, :n], generator)
        return out

    def _seeded_queries(self, max_length: int, device) -> Iterator[tuple[int, int, torch.Generator]]:
        """Take the next draw site; yield ``(row, length clipped to max_length, generator)`` for every query
        with items, the generator seeded by (seed, epoch, query, site)."""
        site, self.site = self.site, self.site + 1
        generator = torch.Generator(device=device)
        for b, (q, n) in enumerate(zip(self.queries, self.lengths)):
            n = min(n, max_length)
            if n:
                generator.manual_seed(splitmix64(self.seed, self.epoch, q, site))
                yield b, n, generator

    def normal(self, shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
        """Standard normal values of ``shape`` [B, L, ...]; 0 on padding."""
        return self._fill(shape, dtype, device, lambda view, g: view.normal_(generator=g))

    def uniform(self, shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
        """Uniform values in [0, 1) of ``shape`` [B, L, ...]; 1 on padding (never dropped, never used)."""
        out = self._fill(shape, dtype, device, lambda view, g: view.uniform_(generator=g))
        for b, n in enumerate(self.lengths):
            out[b, min(n, shape[1]):] = 1.0
        return out

    def uniform_pairs(self, shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
        """Uniform values of an attention map ``[B, H, L, L]``: query ``q``'s block ``[H, L_q, L_q]`` from its
        generator; 1 elsewhere (padding)."""
        shape = tuple(int(s) for s in shape)
        if len(shape) != 4 or shape[0] != len(self.queries) or shape[2] != shape[3]:
            raise ValueError(f"keyed attention draws need [B, H, L, L] with B = {len(self.queries)}, got {list(shape)}")
        out = torch.ones(shape, dtype=dtype, device=device)
        for b, n, generator in self._seeded_queries(shape[2], device):
            out[b, :, :n, :n] = torch.rand((shape[1], n, n), generator=generator, dtype=dtype, device=device)
        return out


@contextlib.contextmanager
def keyed(draws: QueryDraws | None) -> Iterator[QueryDraws | None]:
    """Make ``draws`` the source of :func:`normal_like` and :class:`KeyedDropout` inside the block."""
    token = _current.set(draws)
    try:
        yield draws
    finally:
        _current.reset(token)


def current(x: torch.Tensor) -> QueryDraws | None:
    """The draws of the open :func:`keyed` context when ``x`` is a padded batch [B, L, ...] of its B
    queries; None otherwise (no context, or a flat block of rows [N, F] being scored)."""
    draws = _current.get()
    return draws if draws is not None and x.dim() >= 3 and x.shape[0] == len(draws.queries) else None


def normal_like(x: torch.Tensor) -> torch.Tensor:
    """Standard normal noise shaped as ``x``: keyed by query inside :func:`keyed`, else ``randn_like``."""
    draws = current(x)
    return torch.randn_like(x) if draws is None else draws.normal(x.shape, x.dtype, x.device)


class KeyedDropout(nn.Dropout):
    """:class:`torch.nn.Dropout` whose mask is keyed by query inside :func:`keyed` (module docstring).

    ``y = x * (u >= p) / (1 - p)`` with ``u`` uniform per element; identical to ``nn.Dropout`` in eval
    mode and in its state dict (it has none), so model folders read the same.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        draws = current(x)
        if not self.training or self.p == 0.0 or draws is None:
            return super().forward(x)
        keep = draws.uniform(x.shape, x.dtype, x.device) >= self.p
        return x * keep / (1.0 - self.p)
