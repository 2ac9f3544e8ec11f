"""Swap deltas (metrics.swap): the bridge between evaluation and training.

The key test of the project: every entry of the swap matrices equals
|metric(list) - metric(list with the two items swapped)|, where both values come from the
evaluation functions of metrics.ranking with the same conventions.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

import metrics
from metrics.swap import (
    ap_swap_deltas,
    ap_swap_deltas_torch,
    mrr_swap_deltas,
    mrr_swap_deltas_torch,
    ndcg_swap_deltas,
    ndcg_swap_deltas_torch,
    prepare_swap_deltas,
    ranking_order,
)

TOL = 1e-6


def _random_batch(rng, n_lists=12, max_len=9):
    """Padded lists with many score ties (scores from 4 values), graded labels 0..3, padding."""
    scores = rng.integers(0, 4, (n_lists, max_len)).astype(np.float64)
    labels = rng.integers(0, 4, (n_lists, max_len)).astype(np.float64)
    lengths = rng.integers(1, max_len + 1, n_lists)
    lengths[0] = max_len  # one full row
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    # Interleave the padding (not only at the end) to check that the mask, not the layout, decides.
    perm = rng.permutation(max_len)
    scores, labels, mask = scores[:, perm], labels[:, perm], mask[:, perm]
    price = rng.gamma(2.0, 5.0, (n_lists, max_len))
    return scores, labels, mask, price


def _oracle(kind, scores, labels, k, item_gain=None, **conv):
    """[L, L] |metric(list) - metric(list with items i, j swapped)| by metrics.ranking, one list.

    Swapping the labels (and item gains) of i and j while keeping the scores swaps the two items'
    places in the ranking, ties included; all L*L variants are evaluated in one call.
    """
    n = len(scores)
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    ii, jj = ii.ravel(), jj.ravel()
    swapped = np.tile(labels, (n * n, 1))
    swapped[np.arange(n * n), ii], swapped[np.arange(n * n), jj] = labels[jj], labels[ii]
    variants_gain = None
    if item_gain is not None:
        variants_gain = np.tile(item_gain, (n * n, 1))
        variants_gain[np.arange(n * n), ii], variants_gain[np.arange(n * n), jj] = item_gain[jj], item_gain[ii]
        variants_gain = np.concatenate([item_gain, variants_gain.ravel()])
    all_scores = np.tile(scores, n * n + 1)
    all_labels = np.concatenate([labels, swapped.ravel()])
    offsets = np.arange(n * n + 2) * n
    fn = {"ndcg": metrics.ndcg, "rr": metrics.reciprocal_rank, "ap": metrics.average_precision}[kind]
    kw = {} if item_gain is None else {"item_gain": variants_gain}
    values = fn(all_scores, all_labels, offsets, k, empty="zero", **kw, **conv)
    return np.abs(values[1:] - values[0]).reshape(n, n)


CASES = [
    # (kind, swap-function options, evaluation conventions)
    ("ndcg", {}, {}),
    ("ndcg", {"k": 3}, {}),
    ("ndcg", {"k": 1, "gain": "linear"}, {"gain": "linear"}),
    ("ndcg", {"k": 20}, {}),
    ("ndcg", {"k": 4, "discount": [1.0, 0.7, 0.5, 0.2, 0.1]}, {"discount": [1.0, 0.7, 0.5, 0.2, 0.1]}),
    ("ndcg", {"k": 5, "item_gain": "price"}, {}),
    ("rr", {}, {}),
    ("rr", {"k": 3}, {}),
    ("rr", {"k": 2, "threshold": 2.0}, {"threshold": 2.0}),
    ("ap", {}, {}),
    ("ap", {"k": 4}, {}),
    ("ap", {"k": 3, "map_norm": "min(R,K)"}, {"map_norm": "min(R,K)"}),
    ("ap", {"k": 5, "threshold": 2.0}, {"threshold": 2.0}),
]
NUMPY_FN = {"ndcg": ndcg_swap_deltas, "rr": mrr_swap_deltas, "ap": ap_swap_deltas}
TORCH_FN = {"ndcg": ndcg_swap_deltas_torch, "rr": mrr_swap_deltas_torch, "ap": ap_swap_deltas_torch}


@pytest.mark.parametrize("kind,opts,conv", CASES)
def test_every_swap_delta_equals_two_evaluations(kind, opts, conv):
    rng = np.random.default_rng(zlib.crc32(f"{kind}{opts}".encode()))
    scores, labels, mask, price = _random_batch(rng)
    opts = dict(opts)
    use_price = opts.pop("item_gain", None) == "price"
    worst = 0.0
    deltas_t, order_t = TORCH_FN[kind](
        torch.tensor(scores), torch.tensor(labels), torch.tensor(mask),
        **opts, **({"item_gain": torch.tensor(price)} if use_price else {}))
    assert deltas_t.shape == (scores.shape[0], scores.shape[1], scores.shape[1])
    for b in range(scores.shape[0]):
        idx = np.flatnonzero(mask[b])
        s, y = scores[b, idx], labels[b, idx]
        ig = price[b, idx] if use_price else None
        expected = _oracle(kind, s, y, opts.get("k"), item_gain=ig, **conv)
        got = NUMPY_FN[kind](s, y, **opts, **({"item_gain": ig} if use_price else {}))
        np.testing.assert_allclose(got, expected, atol=TOL, rtol=0)
        # torch: rank coordinates; order[b, p] is the item at rank p (real items first).
        n = idx.size
        items = order_t[b, :n].numpy()
        assert sorted(items.tolist()) == idx.tolist()
        pos_in_valid = {item: t for t, item in enumerate(idx)}
        local = np.array([pos_in_valid[i] for i in items])
        np.testing.assert_allclose(deltas_t[b, :n, :n].numpy(), expected[np.ix_(local, local)], atol=TOL, rtol=0)
        # padding rows and columns are exactly zero, and so is the diagonal
        assert float(deltas_t[b, n:, :].abs().sum()) == 0.0
        assert float(deltas_t[b, :, n:].abs().sum()) == 0.0
        worst = max(worst, float(np.abs(got - expected).max()))
    assert np.all(np.diagonal(deltas_t.numpy(), axis1=1, axis2=2) == 0.0)
    assert worst < TOL


def test_seed_numbers_one_relevant_item_moved_down_one_place():
    # seed_examples.json, "The number ranking losses grow out of": slate of 10, one relevant item
    expected = {(1, 2): 0.3691, (2, 3): 0.1309, (3, 4): 0.0693, (9, 10): 0.0120}
    before_after = {(1, 2): (1.0, 0.6309), (2, 3): (0.6309, 0.5), (3, 4): (0.5, 0.4307), (9, 10): (0.301, 0.2891)}
    scores = np.arange(10.0)[::-1].copy()  # item i at rank i + 1
    got = {}
    for (r1, r2), delta in expected.items():
        labels = np.zeros(10)
        labels[r1 - 1] = 1
        d_np = ndcg_swap_deltas(scores, labels)[r1 - 1, r2 - 1]
        d_t, order = ndcg_swap_deltas_torch(torch.tensor(scores[None]), torch.tensor(labels[None]))
        assert order[0].tolist() == list(range(10))
        assert round(float(d_np), 4) == delta
        assert round(float(d_t[0, r1 - 1, r2 - 1]), 4) == delta
        moved = labels.copy()
        moved[[r1 - 1, r2 - 1]] = moved[[r2 - 1, r1 - 1]]
        b, a = metrics.ndcg(scores, labels)[0], metrics.ndcg(scores, moved)[0]
        assert (round(b, 4), round(a, 4)) == before_after[(r1, r2)]
        got[(r1, r2)] = d_np
    ratio = got[(1, 2)] / got[(9, 10)]
    assert 30.0 < ratio < 32.0  # "about 31 times"


def test_top_rows_are_the_first_rows_of_the_full_matrix():
    rng = np.random.default_rng(3)
    scores, labels, mask, _ = _random_batch(rng, n_lists=5, max_len=12)
    s, y, m = torch.tensor(scores), torch.tensor(labels), torch.tensor(mask)
    for fn in TORCH_FN.values():
        full, order = fn(s, y, m, k=4)
        top, order_top = fn(s, y, m, k=4, top=4)
        assert top.shape == (5, 4, 12)
        assert torch.equal(order, order_top)
        assert torch.equal(top, full[:, :4])
        # with a cutoff K, a swap of two items both below K changes nothing
        assert float(full[:, 4:, 4:].abs().sum()) == 0.0


def test_blocks_tile_the_matrix():
    rng = np.random.default_rng(4)
    scores, labels, mask, _ = _random_batch(rng, n_lists=3, max_len=10)
    for metric in ("ndcg", "mrr", "ap"):
        prepared = prepare_swap_deltas(metric, torch.tensor(scores), torch.tensor(labels), torch.tensor(mask), k=6)
        full = prepared.block(0, 10, 0, 10)
        assert torch.equal(prepared.block(2, 5, 3, 9), full[:, 2:5, 3:9])


def test_ranking_is_stable_descending_with_padding_last():
    s = torch.tensor([[1.0, 3.0, 3.0, float("nan"), 2.0, 3.0]])
    m = torch.tensor([[True, True, True, False, True, True]])
    assert ranking_order(s, m).tolist() == [[1, 2, 5, 4, 0, 3]]
    assert ranking_order(s.numpy(), m.numpy()).tolist() == [[1, 2, 5, 4, 0, 3]]
    rng = np.random.default_rng(5)
    scores, _, mask, _ = _random_batch(rng, n_lists=20, max_len=30)
    np.testing.assert_array_equal(ranking_order(torch.tensor(scores), torch.tensor(mask)).numpy(),
                                  ranking_order(scores, mask))


def test_torch_deltas_are_detached_and_follow_the_score_dtype():
    s = torch.randn(2, 5, dtype=torch.float32, requires_grad=True)
    y = torch.tensor([[0, 1, 2, 0, 3], [1, 0, 0, 0, 0]])
    for fn in TORCH_FN.values():
        d, order = fn(s, y)
        assert not d.requires_grad and d.dtype == torch.float32 and order.dtype == torch.int64
        d64, _ = fn(s.double(), y)
        assert d64.dtype == torch.float64
        torch.testing.assert_close(d.double(), d64, atol=1e-6, rtol=0)


def test_empty_query_gives_zero_deltas():
    s = torch.randn(1, 6, dtype=torch.float64)
    y = torch.zeros(1, 6)
    for fn in TORCH_FN.values():
        d, _ = fn(s, y)
        assert float(d.abs().sum()) == 0.0
    assert float(np.abs(ndcg_swap_deltas(s[0].numpy(), y[0].numpy())).sum()) == 0.0


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="unknown swap metric"):
        prepare_swap_deltas("auc", np.zeros((1, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="same shape"):
        ndcg_swap_deltas_torch(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="map_norm"):
        ap_swap_deltas(np.zeros(3), np.zeros(3), map_norm="K")
    with pytest.raises(ValueError, match="1-D"):
        ndcg_swap_deltas(np.zeros((2, 3)), np.zeros((2, 3)))


def test_ndcg_swap_deltas_match_evaluation_with_negative_labels():
    # Negative gains: the ideal DCG of metrics.ndcg holds the positive gains only; the swap
    # deltas must use the same ideal, or the bridge breaks for such labels.
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(200):
        n = int(rng.integers(2, 8))
        scores = rng.permutation(n).astype(float)
        labels = rng.integers(-2, 3, n).astype(float)
        offsets = np.array([0, n])
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        # every swapped list as one query of a single metrics.ndcg call (the same evaluations, batched)
        swapped = np.tile(scores, (len(pairs), 1))
        for row, (i, j) in enumerate(pairs):
            swapped[row, [i, j]] = scores[[j, i]]
        many = np.arange(len(pairs) + 1) * n
        for k in (None, 3):
            deltas = metrics.ndcg_swap_deltas(scores, labels, k=k, gain="linear")
            base = metrics.ndcg(scores, labels, offsets, k=k, gain="linear", empty="zero")[0]
            after = metrics.ndcg(swapped.ravel(), np.tile(labels, len(pairs)), many, k=k, gain="linear", empty="zero")
            for row, (i, j) in enumerate(pairs):
                assert deltas[i, j] == pytest.approx(abs(after[row] - base), abs=1e-9)
                checked += 1
    assert checked > 1000
