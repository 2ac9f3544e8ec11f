"""Padded, length-bucketed torch batches of queries.

A batch of B queries is padded to the length L of its longest query: features [B, L, F], labels
[B, L] and a boolean mask [B, L] (True on real items). Padding costs memory and compute, so the
sampler groups queries of similar length: it shuffles the queries, cuts the shuffled order into
buckets of ``bucket_size`` queries, sorts each bucket by length, cuts it into batches and shuffles
the batches. Every query appears exactly once per epoch, and ``set_epoch`` gives a reproducible
reshuffle per epoch.

The cuts of a sorted bucket start at a random phase: the first batch of a bucket holds ``r`` queries,
``r`` drawn in ``[1, batch_size]`` each epoch, and the next batches ``batch_size`` each. Without it, a
data set smaller than one bucket (240 queries, batch 64, bucket 3200) would be sorted whole and cut
at the same places every epoch, so every epoch would see the same batches in a new order; with it,
neighbours in the length order land in different batches from epoch to epoch while the padding stays
that of sorted batches. (A bucket no larger than a batch is one batch, as before.)

padding ratio = padded slots / all slots = 1 - sum(lengths) / sum_b(B_b * L_b).

The gather that builds a batch is vectorised: a [B, L] index matrix into the flat rows, one
``take`` for the features, and the padded slots zeroed. Features may be memory-mapped (a store of
:mod:`ltr.data.store`): a batch reads only its own rows, and :func:`make_batch` hands the pages
mapped for it back to the kernel after its gather, so an epoch over a store larger than RAM keeps a
bounded resident set, whoever draws the batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from ltr.data.dataset import RankingDataset
from ltr.data.store import is_mapped, release_pages

__all__ = ["PaddedBatch", "BucketBatchSampler", "iterate_batches", "make_batch", "padding_ratio", "pad_flat"]


@dataclass
class PaddedBatch:
    """A padded batch of queries (torch tensors).

    features [B, L, F] float32; labels [B, L] float32 (0 on padding); mask [B, L] bool (True on real
    items); query_index [B] int64 (positions of the queries in the data set); weights [B, L] float32
    or None (0 on padding).
    """

    features: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor
    query_index: torch.Tensor
    weights: torch.Tensor | None = None

    def to(self, device) -> "PaddedBatch":
        return PaddedBatch(
            features=self.features.to(device),
            labels=self.labels.to(device),
            mask=self.mask.to(device),
            query_index=self.query_index.to(device),
            weights=None if self.weights is None else self.weights.to(device),
        )

    @property
    def batch_size(self) -> int:
        return int(self.mask.shape[0])

    @property
    def list_length(self) -> int:
        return int(self.mask.shape[1])

    def __len__(self) -> int:
        return self.batch_size


class BucketBatchSampler:
    """Batches of query positions, grouped by similar length; every query once per epoch.

    Parameters
    ----------
    lengths : [Q] list lengths.
    batch_size : queries per batch (at most).
    shuffle : when False, batches are consecutive runs of the queries sorted by length (stable), in
        that order; when True, see the module docstring.
    seed : base seed; the epoch's permutation uses ``(seed, epoch)``.
    bucket_size : queries sorted together (default ``50 * batch_size``); 1 batch wide buckets give
        random batches, a bucket of all queries gives the least padding and the least randomness.
    max_items : optional cap on B * L (padded slots) per batch; a batch is closed early when adding the
        next query would exceed it (a query longer than the cap gets a batch of its own).

    Iterating yields lists of int positions (usable as a torch ``DataLoader`` ``batch_sampler``).

    >>> s = BucketBatchSampler([3, 1, 2, 8, 7, 1], batch_size=2, shuffle=False)
    >>> list(s)
    [[1, 5], [2, 0], [4, 3]]
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        bucket_size: int | None = None,
        max_items: int | None = None,
    ):
        self.lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1; got {batch_size}")
        if np.any(self.lengths < 0):
            raise ValueError("lengths must be non-negative")
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.bucket_size = int(bucket_size) if bucket_size is not None else 50 * self.batch_size
        if self.bucket_size < 1:
            raise ValueError("bucket_size must be at least 1")
        self.max_items = None if max_items is None else int(max_items)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose reshuffle the next iteration gives (reproducible)."""
        self.epoch = int(epoch)

    def batches(self) -> list[np.ndarray]:
        """This epoch's batches as int64 arrays."""
        n = len(self.lengths)
        if n == 0:
            return []
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            return self._cut(order)
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(n)
        batches: list[np.ndarray] = []
        for lo in range(0, n, self.bucket_size):
            bucket = order[lo : lo + self.bucket_size]
            bucket = bucket[np.argsort(self.lengths[bucket], kind="stable")]
            # random phase of the cuts (module docstring): the first batch holds 1..batch_size queries
            first = int(rng.integers(1, self.batch_size + 1)) if len(bucket) > self.batch_size else len(bucket)
            batches.extend(self._cut(bucket[:first]))
            if first < len(bucket):
                batches.extend(self._cut(bucket[first:]))
        perm = rng.permutation(len(batches))
        return [batches[i] for i in perm]

    def _cut(self, order: np.ndarray) -> list[np.ndarray]:
        if self.max_items is None:
            return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        out = []
        start = 0
        longest = 0
        lengths = self.lengths[order]
        for i in range(len(order)):
            size = i - start
            longest_if = max(longest, int(lengths[i]))
            if size and (size >= self.batch_size or (size + 1) * longest_if > self.max_items):
                out.append(order[start:i])
                start, longest = i, int(lengths[i])
            else:
                longest = longest_if
        out.append(order[start:])
        return out

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.batches():
            yield batch.tolist()

    def __len__(self) -> int:
        if self.max_items is None and not self.shuffle:
            return -(-len(self.lengths) // self.batch_size)
        return len(self.batches())  # the random phase and max_items make it depend on the epoch


def batch_rows(query_offsets: np.ndarray, query_index) -> tuple[np.ndarray, np.ndarray]:
    """The rows [B, L] of the queries ``query_index`` padded to the longest (padding points at row 0) and
    the mask [B, L] of the real ones.

    >>> rows, mask = batch_rows(np.array([0, 2, 5]), [1, 0])
    >>> rows.tolist(), mask.tolist()
    ([[2, 3, 4], [0, 1, 0]], [[True, True, True], [True, True, False]])
    """
    qi = np.asarray(query_index, dtype=np.int64).reshape(-1)
    starts = query_offsets[qi]
    lengths = query_offsets[qi + 1] - starts
    width = int(lengths.max()) if len(qi) else 0
    positions = np.arange(width, dtype=np.int64)
    mask = positions[None, :] < lengths[:, None]
    return np.where(mask, starts[:, None] + positions[None, :], 0), mask


def make_batch(ds: RankingDataset, query_index, *, device="cpu") -> PaddedBatch:
    """Pad the queries ``query_index`` of ``ds`` into one :class:`PaddedBatch`."""
    qi = np.asarray(query_index, dtype=np.int64).reshape(-1)
    rows, mask = batch_rows(ds.query_offsets, qi)  # padded slots point at row 0 and are zeroed afterwards
    if ds.n_items == 0:
        rows = np.zeros_like(rows)
        feats = np.zeros(rows.shape + (ds.n_features,), dtype=np.float32)
        labels = np.zeros(rows.shape, dtype=np.float32)
    else:
        feats = np.take(ds.features, rows, axis=0)
        if is_mapped(ds.features):  # a store gives back the pages this batch mapped (about 0.1 ms)
            release_pages(ds.features)
        feats[~mask] = 0.0
        labels = np.where(mask, ds.labels[rows], 0.0).astype(np.float32)
    weights = None
    if ds.weights is not None:
        weights = torch.from_numpy(np.where(mask, ds.weights[rows], 0.0).astype(np.float32))
    batch = PaddedBatch(
        features=torch.from_numpy(feats),
        labels=torch.from_numpy(labels),
        mask=torch.from_numpy(mask),
        query_index=torch.from_numpy(qi.copy()),
        weights=weights,
    )
    return batch if str(device) == "cpu" else batch.to(device)


def iterate_batches(
    ds: RankingDataset,
    batch_size: int = 64,
    *,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    device="cpu",
    bucket_size: int | None = None,
    max_items: int | None = None,
) -> Iterator[PaddedBatch]:
    """Yield the whole data set as length-bucketed :class:`PaddedBatch` es (every query once).

    ``shuffle=False`` gives a fixed order (queries sorted by length), for evaluation and prediction;
    ``query_index`` says which queries each batch holds. ``shuffle=True`` with ``epoch`` gives the
    sampler's reproducible reshuffle for that epoch.
    """
    sampler = BucketBatchSampler(
        ds.query_lengths, batch_size, shuffle=shuffle, seed=seed, bucket_size=bucket_size, max_items=max_items
    )
    sampler.set_epoch(epoch)
    for batch in sampler.batches():
        yield make_batch(ds, batch, device=device)


def padding_ratio(lengths: Sequence[int] | np.ndarray, batches: Iterable[Sequence[int]]) -> float:
    """Padded slots / all slots over ``batches`` (lists of query positions into ``lengths``).

    >>> padding_ratio([1, 3, 2, 2], [[0, 1], [2, 3]])  # slots 2*3 + 2*2 = 10, items 8
    0.2
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    slots = 0
    used = 0
    for batch in batches:
        b = lengths[np.asarray(batch, dtype=np.int64)]
        if b.size:
            slots += int(b.size) * int(b.max())
            used += int(b.sum())
    return 0.0 if slots == 0 else (slots - used) / slots


def pad_flat(values, query_offsets, fill=0.0) -> tuple[np.ndarray, np.ndarray]:
    """Flat per-item ``values`` [N] -> padded [Q, L] array and mask [Q, L] (numpy).

    >>> padded, mask = pad_flat(np.array([1., 2., 3.]), np.array([0, 2, 3]))
    >>> padded.tolist(), mask.tolist()
    ([[1.0, 2.0], [3.0, 0.0]], [[True, True], [True, False]])
    """
    values = np.asarray(values)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    positions = np.arange(width)
    mask = positions[None, :] < lengths[:, None]
    rows = np.where(mask, offsets[:-1, None] + positions[None, :], 0)
    if values.size == 0:
        return np.full(mask.shape, fill, dtype=values.dtype), mask
    return np.where(mask, values[rows], fill), mask
