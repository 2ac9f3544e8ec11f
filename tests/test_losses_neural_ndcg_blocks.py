"""NeuralNDCG computed on Sinkhorn factors in blocks equals the direct matrix form (issue 24, part 7).

The direct form is ``sinkhorn(neural_sort(...))`` with autograd through every round (what NeuralNDCG
computed before, O(T B L^2) memory); the loss now keeps P (and P^T) only. Values and gradients must
agree on small inputs, whatever the block size.
"""

from __future__ import annotations

import pytest
import torch

from losses import NeuralNDCG
from losses.neural_ndcg import neural_sort, sinkhorn, spread
from metrics.dcg import normalised_gains
from metrics.discounts import discount_values, rank_positions


def _batch(seed, b=4, n=9, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(b, n, generator=gen, dtype=dtype)
    y = torch.randint(0, 4, (b, n), generator=gen).to(dtype)
    mask = torch.rand(b, n, generator=gen) < 0.75
    mask[:, 0] = True
    mask[-1] = False  # a row of padding only
    mask[-1, 0] = True  # ... holding one item
    w = torch.rand(b, n, generator=gen, dtype=dtype) + 0.5
    return s, y, mask, w


def _matrix_form(s, y, mask, w, temperature, k, iterations, tol):
    g = normalised_gains(y, k, mask=mask) * w
    p = sinkhorn(neural_sort(s, mask, temperature), mask, iterations, tol)
    d = discount_values(rank_positions(s.shape[1], s), "log2", k)
    return -(torch.bmm(p, g[:, :, None]).squeeze(2) * d).sum(dim=1)


@pytest.mark.parametrize("temperature, k, iterations, tol", [
    (1.0, None, 50, 1e-6), (0.3, 3, 20, 0.0), (2.0, 2, 5, 1e-6), (1.0, None, 0, 0.0), (0.5, 4, 1, 0.0),
])
@pytest.mark.parametrize("block_elements", [1, 1 << 22])
def test_values_and_gradients_equal_the_matrix_form(temperature, k, iterations, tol, block_elements):
    s, y, mask, w = _batch(7)
    s = s.masked_fill(~mask, float("nan"))  # padding may hold anything
    a = s.clone().requires_grad_(True)
    b = s.masked_fill(~mask, 0.0).requires_grad_(True)
    loss = NeuralNDCG(temperature=temperature, k=k, reduction="none", sinkhorn_iters=iterations, tol=tol,
                      block_elements=block_elements)
    new = loss(a, y, mask, w)
    old = _matrix_form(b, y, mask, w, temperature, k, iterations, tol)
    torch.testing.assert_close(new, old, rtol=1e-12, atol=1e-14)
    coef = torch.arange(1.0, s.shape[0] + 1.0, dtype=s.dtype)  # a different weight per query
    (new * coef).sum().backward()
    (old * coef).sum().backward()
    assert bool(torch.isfinite(a.grad).all()) and float(a.grad[~mask].abs().max()) == 0.0
    torch.testing.assert_close(a.grad, b.grad.masked_fill(~mask, 0.0), rtol=1e-10, atol=1e-12)


def test_float32_long_lists_equal_the_matrix_form():
    s, y, mask, w = _batch(3, b=2, n=300, dtype=torch.float32)
    a, b = s.clone().requires_grad_(True), s.clone().requires_grad_(True)
    new = NeuralNDCG(reduction="none", block_elements=5000)(a, y, mask)
    old = _matrix_form(b.masked_fill(~mask, 0.0), y, mask, torch.ones_like(w), 1.0, None, 50, 1e-6)
    torch.testing.assert_close(new, old, rtol=2e-5, atol=1e-6)
    new.sum().backward()
    old.sum().backward()
    scale = float(b.grad.abs().max())
    torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-3 * scale)


def test_spread_is_the_sum_of_absolute_differences():
    s, _, mask, _ = _batch(11, b=3, n=12)
    s[0, 2] = s[0, 5]  # a tie
    direct = ((s[:, :, None] - s[:, None, :]).abs() * (mask[:, :, None] & mask[:, None, :])).sum(dim=2)
    torch.testing.assert_close(spread(s, mask), direct.masked_fill(~mask, 0.0), rtol=1e-13, atol=1e-13)
    a = s.clone().requires_grad_(True)
    b = s.clone().requires_grad_(True)
    spread(a, mask).pow(2).sum().backward()
    (((b[:, :, None] - b[:, None, :]).abs() * (mask[:, :, None] & mask[:, None, :])).sum(dim=2)
     .masked_fill(~mask, 0.0).pow(2).sum().backward())
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-12)
