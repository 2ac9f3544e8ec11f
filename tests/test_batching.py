"""ltr.data.batching: padded batches, the bucketed sampler, padding ratio."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ltr.data import RankingDataset
from ltr.data.batching import (
    BucketBatchSampler,
    iterate_batches,
    make_batch,
    pad_flat,
    padding_ratio,
)


def ragged(seed=0, n_queries=300, n_features=4, weights=False):
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(3.0, 1.0, size=n_queries)), 1, 400).astype(int)
    n = int(lengths.sum())
    return RankingDataset(
        features=rng.normal(size=(n, n_features)),
        labels=rng.integers(0, 5, size=n),
        query_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        query_ids=np.arange(n_queries) + 100,
        weights=rng.random(n) + 0.5 if weights else None,
    )


def test_batch_content_matches_the_flat_rows():
    ds = ragged(weights=True)
    batch = make_batch(ds, [5, 2, 9])
    assert batch.features.dtype == torch.float32 and batch.mask.dtype == torch.bool
    lengths = ds.query_lengths[[5, 2, 9]]
    assert batch.features.shape == (3, lengths.max(), 4)
    assert batch.mask.sum(1).tolist() == lengths.tolist()
    for b, q in enumerate([5, 2, 9]):
        lo, hi = ds.query_offsets[q], ds.query_offsets[q + 1]
        n = hi - lo
        assert np.array_equal(batch.features[b, :n].numpy(), ds.features[lo:hi])
        assert np.array_equal(batch.labels[b, :n].numpy(), ds.labels[lo:hi].astype(np.float32))
        assert np.allclose(batch.weights[b, :n].numpy(), ds.weights[lo:hi])
        assert not batch.features[b, n:].any() and not batch.labels[b, n:].any() and not batch.weights[b, n:].any()
    assert batch.query_index.tolist() == [5, 2, 9]


@pytest.mark.parametrize("shuffle", [False, True])
def test_every_query_once_per_epoch(shuffle):
    ds = ragged()
    sampler = BucketBatchSampler(ds.query_lengths, 16, shuffle=shuffle, seed=1, bucket_size=64)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert all(1 <= len(b) <= 16 for b in batches)
        assert sorted(q for b in batches for q in b) == list(range(ds.n_queries))
    seen = [q for b in iterate_batches(ds, 16, shuffle=shuffle, seed=1) for q in b.query_index.tolist()]
    assert sorted(seen) == list(range(ds.n_queries))
    assert sum(int(b.mask.sum()) for b in iterate_batches(ds, 16)) == ds.n_items


def test_reshuffle_is_reproducible_and_changes_with_epoch():
    lengths = ragged().query_lengths
    a = BucketBatchSampler(lengths, 8, seed=3)
    b = BucketBatchSampler(lengths, 8, seed=3)
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b)
    b.set_epoch(3)
    assert list(a) != list(b)


def test_bucketing_pads_much_less_than_random_batches():
    lengths = ragged(n_queries=2000).query_lengths
    bucketed = padding_ratio(lengths, BucketBatchSampler(lengths, 32, seed=0))
    random_batches = padding_ratio(lengths, BucketBatchSampler(lengths, 32, seed=0, bucket_size=32))
    sorted_batches = padding_ratio(lengths, BucketBatchSampler(lengths, 32, shuffle=False))
    # log-normal lengths (sigma 1): random batches waste most slots; buckets of 1600 sorted queries few
    assert random_batches > 0.6
    assert bucketed < 0.2 * random_batches
    assert sorted_batches <= bucketed


def test_max_items_caps_padded_slots():
    lengths = ragged().query_lengths
    sampler = BucketBatchSampler(lengths, 64, seed=0, max_items=2000)
    batches = list(sampler)
    assert sorted(q for b in batches for q in b) == list(range(len(lengths)))
    for b in batches:
        slots = len(b) * lengths[b].max()
        assert slots <= 2000 or len(b) == 1


def test_padding_ratio_by_hand():
    assert padding_ratio([4, 1, 2, 2], [[0, 1], [2, 3]]) == pytest.approx(3 / 12)
    assert padding_ratio([3, 3], [[0, 1]]) == 0.0


def test_pad_flat_inverts_to_flat():
    ds = ragged(n_queries=20)
    padded, mask = pad_flat(ds.labels, ds.query_offsets, fill=-1)
    assert np.array_equal(padded[mask], ds.labels)
    assert np.all(padded[~mask] == -1)


def test_batch_composition_changes_between_epochs_on_a_set_smaller_than_a_bucket():
    # 240 queries of distinct lengths, batch 64, default bucket (3200): one bucket sorted whole. Cut at
    # fixed places, every epoch would hold the same four batches; the random phase of the cuts mixes them.
    lengths = np.random.default_rng(0).permutation(np.arange(1, 241))
    sampler = BucketBatchSampler(lengths, 64, seed=0)
    compositions = []
    for epoch in range(4):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(q for b in batches for q in b) == list(range(240))
        assert all(len(b) <= 64 for b in batches) and len(batches) == len(sampler)
        compositions.append({frozenset(b) for b in batches})
    assert all(compositions[i] != compositions[j] for i in range(4) for j in range(i))
    # ... while each batch is still a run of neighbouring lengths (the padding of sorted batches)
    for b in batches:
        assert lengths[b].max() - lengths[b].min() == len(b) - 1
