"""Gains, discounts and DCG: seed numbers, numpy/torch agreement, masks and cutoffs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.dcg import dcg_in_rank_order, ideal_dcg
from metrics.discounts import discount_values, rank_positions
from metrics.gains import gain_values

torch = pytest.importorskip("torch")


def test_seed_ndcg3_example_numbers():
    # seed 001: grades [3, 0, 2], gain 2^rel - 1, log2 discount, cutoff 3.
    g = gain_values(np.array([3, 0, 2]))
    assert g.tolist() == [7.0, 0.0, 3.0]
    dcg = dcg_in_rank_order(g, k=3)
    idcg = ideal_dcg(g, k=3)
    assert dcg == pytest.approx(8.5, abs=1e-12)
    assert idcg == pytest.approx(7 + 3 / math.log2(3), abs=1e-12)
    assert round(float(idcg), 4) == 8.8928
    assert round(float(dcg / idcg), 4) == 0.9558


def test_seed_discount_table():
    d = discount_values(np.array([1, 2, 3, 5, 10]))
    assert np.round(d, 2).tolist() == [1.0, 0.63, 0.5, 0.39, 0.29]


def test_seed_gain_table_linear_vs_exp():
    # seed 000 'Gain' table: labels in ranked order, NDCG over the whole list.
    for labels, lin, exp in (([3, 0, 0, 1, 1], 0.9241, 0.9615), ([1, 1, 0, 0, 3], 0.6758, 0.5336)):
        labels = np.array(labels, dtype=float)
        for gain, want in (("linear", lin), ("exp2", exp)):
            g = gain_values(labels, gain)
            assert round(float(dcg_in_rank_order(g, k=5) / ideal_dcg(g, k=5)), 4) == want


def test_cutoff_beyond_length_and_zero_cutoff():
    g = np.array([1.0, 2.0, 3.0])
    assert dcg_in_rank_order(g, k=100) == pytest.approx(dcg_in_rank_order(g))
    assert dcg_in_rank_order(g, k=0) == 0.0


def test_ideal_uses_top_min_R_K_of_valid_items_only():
    gains = np.array([[0.0, 5.0, 1.0, 9.0], [4.0, 0.0, 8.0, 0.0]])
    mask = np.array([[True, True, True, False], [True, True, True, True]])
    got = ideal_dcg(gains, k=2, mask=mask)
    # row 0: 9.0 is padding -> [5, 1]; row 1: [8, 4]
    assert got[0] == pytest.approx(5 + 1 / math.log2(3))
    assert got[1] == pytest.approx(8 + 4 / math.log2(3))
    # masked positions in rank order contribute nothing
    assert dcg_in_rank_order(gains, mask=mask)[0] == pytest.approx(5 / math.log2(3) + 1 / 2)
    # a fully masked row is 0, not NaN
    assert ideal_dcg(gains, mask=np.zeros_like(mask))[0] == 0.0


def test_custom_discount_table_and_callable_gain_and_item_gain():
    g = gain_values(np.array([2, 1, 0]), lambda r: 10 * r)
    assert g.tolist() == [20.0, 10.0, 0.0]
    assert dcg_in_rank_order(g, discount=[1.0, 0.25]) == pytest.approx(22.5)
    assert dcg_in_rank_order(g, discount=lambda r: 1.0 / r) == pytest.approx(25.0)
    price = gain_values(np.array([1, 0]), item_gain=[3.5, 2.0])
    assert price.tolist() == [3.5, 2.0]
    with pytest.raises(ValueError):
        gain_values(np.array([1, 0]), item_gain=[1.0])
    with pytest.raises(ValueError):
        gain_values(np.array([1, 0]), "cubic")
    with pytest.raises(ValueError):
        discount_values(np.array([1]), "ln")


@pytest.mark.parametrize("discount", ["log2", [1.0, 0.7, 0.2], "callable"])
def test_torch_matches_numpy_batched(discount):
    rng = np.random.default_rng(0)
    if discount == "callable":
        discount = lambda r: 1.0 / (r ** 0.5)  # noqa: E731
    labels = rng.integers(-1, 4, size=(6, 7)).astype(float)
    mask = rng.random((6, 7)) < 0.8
    mask[0] = False
    for k in (None, 1, 3, 10):
        for gain in ("exp2", "linear"):
            g_np = gain_values(labels, gain)
            g_t = gain_values(torch.tensor(labels, dtype=torch.float64), gain)
            assert isinstance(g_t, torch.Tensor) and g_t.dtype == torch.float64
            np.testing.assert_allclose(g_t.numpy(), g_np, atol=1e-12)
            for fn in (dcg_in_rank_order, ideal_dcg):
                want = fn(g_np, k=k, discount=discount, mask=mask)
                got = fn(g_t, k=k, discount=discount, mask=torch.tensor(mask))
                assert isinstance(got, torch.Tensor) and tuple(got.shape) == (6,)
                np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
                # a per-row loop gives the same result as the batched call
                for row in range(6):
                    v = g_np[row][mask[row]] if fn is ideal_dcg else np.where(mask[row], g_np[row], 0.0)
                    assert fn(v, k=k, discount=discount) == pytest.approx(want[row], abs=1e-12)


def test_torch_float32_and_integer_inputs_keep_torch_kind():
    t = torch.tensor([3, 0, 2])
    g = gain_values(t)
    assert g.dtype == torch.float32
    assert float(dcg_in_rank_order(g, k=3)) == pytest.approx(8.5)
    assert rank_positions(3, g).dtype == torch.float32
    d = discount_values(torch.tensor([1, 2, 3]), k=2)
    assert d.tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.0])


def test_ideal_dcg_is_an_upper_bound_and_sort_invariant():
    rng = np.random.default_rng(1)
    g = rng.exponential(size=(50, 9))
    perm = rng.permutation(9)
    for k in (1, 4, None):
        assert np.all(ideal_dcg(g, k=k) >= dcg_in_rank_order(g, k=k) - 1e-12)
        np.testing.assert_allclose(ideal_dcg(g[:, perm], k=k), ideal_dcg(g, k=k), atol=1e-12)


def test_importing_metrics_does_not_import_torch_ltr_or_losses():
    import subprocess
    import sys

    code = "import sys, metrics; print(sorted(m for m in ('torch', 'ltr', 'losses') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
