"""Shared checks of the loss tests: random padded batches, and the padding- and shift-invariance properties."""

from __future__ import annotations

import torch


def random_batch(seed, n_lists=4, max_len=8, levels=4, *, scale=1.0, dtype=torch.float64):
    """``scores, labels, mask, weights`` [n_lists, max_len]; row 0 fully real, others ~25% padding."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_lists, max_len, generator=g, dtype=dtype) * scale
    labels = torch.randint(0, levels, (n_lists, max_len), generator=g).to(dtype)
    mask = torch.rand(n_lists, max_len, generator=g) > 0.25
    mask[0] = True
    weights = torch.rand(n_lists, max_len, generator=g, dtype=dtype) + 0.5
    return scores, labels, mask, weights


def check_padding_changes_nothing(loss, batch, *, n_pad: int, label_fill: float) -> None:
    """Extra padded columns on both sides, filled with hostile values (NaN / inf scores, NaN and large
    labels and weights), change neither the loss nor the real items' gradients, and padding gets none."""
    scores, labels, mask, weights = batch
    s1 = scores.clone().requires_grad_(True)
    v1 = loss(s1, labels, mask, weights)
    (g1,) = torch.autograd.grad(v1, s1)
    n = scores.shape[0]

    def pad(fill):
        return torch.full((n, n_pad), fill, dtype=scores.dtype)

    no = torch.zeros(n, n_pad, dtype=torch.bool)
    s2 = torch.cat([pad(float("nan")), scores, pad(float("inf"))], 1).requires_grad_(True)
    v2 = loss(s2, torch.cat([pad(label_fill), labels, pad(float("nan"))], 1), torch.cat([no, mask, no], 1),
              torch.cat([pad(float("nan")), weights, pad(1e9)], 1))
    (g2,) = torch.autograd.grad(v2, s2)
    torch.testing.assert_close(v2, v1, atol=1e-12, rtol=0)
    torch.testing.assert_close(g2[:, n_pad:-n_pad], g1, atol=1e-12, rtol=0)
    assert float(g2[:, :n_pad].abs().sum() + g2[:, -n_pad:].abs().sum()) == 0.0
    assert float(g1[~mask].abs().sum()) == 0.0 and float(g1.abs().sum()) > 0


def check_shift_changes_nothing(loss, batch, shifts, *, atol: float = 1e-9) -> None:
    """Adding a constant to every score of a list (``shifts[i]`` to list i) leaves the loss unchanged."""
    scores, labels, mask, weights = batch
    shift = torch.tensor(shifts, dtype=scores.dtype).reshape(-1, 1)
    torch.testing.assert_close(loss(scores + shift, labels, mask, weights), loss(scores, labels, mask, weights),
                               atol=atol, rtol=0)
