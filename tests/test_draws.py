"""Training's random draws keyed by query (ltr.train.draws): a batch split as ``ltr train --nproc N``
splits it (each share padded to its own longest list) gets the values the whole batch gets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ltr.train.attention import ContextAwareScorer
from ltr.train.draws import KeyedDropout, QueryDraws, keyed, normal_like, splitmix64
from ltr.train.scorers import MLPScorer

LENGTHS = torch.tensor([7, 3, 5, 1, 6])
QUERIES = torch.tensor([40, 2, 17, 9, 33])  # positions in a training set


def padded(lengths, width, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), int(lengths.max()), width, generator=g)
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    return x * mask[..., None], mask


def scores_by_shares(model, x, mask, shares, epoch=3):
    """The scores a rank computes for its share of the batch, one share after the other."""
    out = torch.zeros(mask.shape)
    for share in shares:
        n = int(LENGTHS[share].max())
        with keyed(QueryDraws(11, epoch, QUERIES[share], LENGTHS[share])):
            out[share, :n] = model(x[share, :n], mask[share, :n])
    return out


@pytest.mark.parametrize("make", [
    lambda: MLPScorer(4, hidden=(8, 6), dropout=0.3, input_noise=0.5),
    lambda: ContextAwareScorer(4, width=8, heads=2, layers=2, dropout=0.3, input_noise=0.2),
], ids=["mlp", "attention"])
def test_a_batch_split_into_padded_shares_scores_as_the_whole_batch(make):
    torch.manual_seed(0)
    model = make().train()
    x, mask = padded(LENGTHS, 4)
    whole = scores_by_shares(model, x, mask, [torch.arange(5)])
    split = scores_by_shares(model, x, mask, [torch.tensor([0, 1]), torch.tensor([2, 3, 4])])
    torch.testing.assert_close(split[mask], whole[mask], atol=1e-6, rtol=0)
    # the draws matter: another epoch gives other noise and other dropout masks
    other = scores_by_shares(model, x, mask, [torch.arange(5)], epoch=4)
    assert (other[mask] - whole[mask]).abs().max() > 1e-3
    # and without the keyed context the model draws from torch's generator, as any torch module
    with torch.no_grad():
        assert (model(x, mask)[mask] - whole[mask]).abs().max() > 1e-3


def test_noise_of_a_query_does_not_depend_on_its_batch_or_padding():
    a = QueryDraws(0, 1, torch.tensor([5, 8]), torch.tensor([4, 2])).normal((2, 4, 3))
    b = QueryDraws(0, 1, torch.tensor([8]), torch.tensor([2])).normal((1, 9, 3))
    assert torch.equal(a[1, :2], b[0, :2])
    assert float(a[1, 2:].abs().sum()) == 0.0 and float(b[0, 2:].abs().sum()) == 0.0  # nothing on padding
    # a standard normal: 10^4 draws of one long query have mean ~0 and variance ~1
    z = QueryDraws(3, 0, torch.tensor([0]), torch.tensor([10_000])).normal((1, 10_000, 1)).flatten()
    assert abs(float(z.mean())) < 0.05 and abs(float(z.var()) - 1.0) < 0.05


def test_sites_of_one_pass_and_seeds_draw_independent_values():
    draws = QueryDraws(0, 1, torch.tensor([5]), torch.tensor([500]))
    first, second = draws.normal((1, 500, 2)), draws.normal((1, 500, 2))  # input noise, then a dropout site
    assert abs(float(np.corrcoef(first.flatten(), second.flatten())[0, 1])) < 0.15
    assert not torch.equal(first, QueryDraws(1, 1, torch.tensor([5]), torch.tensor([500])).normal((1, 500, 2)))
    assert len({splitmix64(s, e, q, k) for s in range(3) for e in range(3) for q in range(20) for k in range(3)}) == 540


def test_keyed_dropout_keeps_the_expected_share_and_scale():
    drop = KeyedDropout(0.25).train()
    x = torch.ones(2, 400, 50)
    with keyed(QueryDraws(0, 0, torch.tensor([1, 2]), torch.tensor([400, 100]))):
        y = drop(x)
    kept = y[0] != 0
    assert abs(float(kept.float().mean()) - 0.75) < 0.01
    assert torch.allclose(y[0][kept], torch.full_like(y[0][kept], 1 / 0.75))
    assert bool((y[1, 100:] == 1 / 0.75).all())  # padding is never dropped (and never used)
    assert torch.equal(drop.eval()(x), x)


def test_flat_rows_and_eval_mode_draw_nothing_keyed():
    rows = torch.zeros(6, 3)
    with keyed(QueryDraws(0, 0, torch.tensor([1, 2]), torch.tensor([3, 3]))):
        torch.manual_seed(4)
        noise = normal_like(rows)  # a block of rows [N, F] is not a padded batch: torch's generator
    torch.manual_seed(4)
    assert torch.equal(noise, torch.randn_like(rows))


def test_each_query_gets_a_fresh_draw_of_its_keyed_generator():
    """The documented key: query q's rows hold what torch.randn / torch.rand of shape [L_q, ...] gives from a
    generator seeded with splitmix64(seed, epoch, q, site) (so a change of how the rows are filled cannot
    silently change every trained model)."""
    draws = QueryDraws(7, 2, torch.tensor([40, 2]), torch.tensor([3, 5]))
    noise, uniform = draws.normal((2, 6, 4)), draws.uniform((2, 6, 4))
    for b, (q, n) in enumerate([(40, 3), (2, 5)]):
        g = torch.Generator().manual_seed(splitmix64(7, 2, q, 0))
        assert torch.equal(noise[b, :n], torch.randn((n, 4), generator=g))
        g = torch.Generator().manual_seed(splitmix64(7, 2, q, 1))
        assert torch.equal(uniform[b, :n], torch.rand((n, 4), generator=g))
        assert bool((uniform[b, n:] == 1.0).all()) and float(noise[b, n:].abs().sum()) == 0.0
