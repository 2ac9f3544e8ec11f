"""The losses, the swap deltas and the trainer on a CUDA device give what they give on the CPU.

These checks need a GPU: they run where ``torch.cuda.is_available()`` (a lent accelerator) and are
skipped on CPU-only machines such as CI, where the CPU path is tested by the other files.
"""

from __future__ import annotations

import pytest
import torch

import losses
import metrics

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _batch(seed=0, b=6, n=40, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, n, generator=g, dtype=dtype)
    scores[:, ::7] = scores[:, 1:2]  # ties
    labels = torch.randint(0, 5, (b, n), generator=g).to(dtype)
    mask = torch.rand(b, n, generator=g) > 0.2
    mask[:, 0] = True
    return scores, labels, mask


@pytest.mark.parametrize("name,kwargs", [
    ("ranknet", {}), ("lambdarank", {}), ("lambdarank", {"k": 5}), ("lambdarank", {"metric": "ap"}),
    ("ndcg_loss2pp", {}), ("listnet", {}), ("mse", {}),
    ("ndcg_loss1", {}), ("arp_loss1", {}), ("arp_loss2", {}), ("hinge", {}),
    ("ndcg_loss2pp", {"k": 5, "k_method": "jagerman"}), ("ranknet", {"pair_weight": "label_diff"}),
    ("softmax", {}), ("listmle", {}), ("approx_ndcg", {}), ("neural_ndcg", {"k": 10}),
])
def test_loss_value_and_gradient_match_cpu(name, kwargs):
    scores, labels, mask = _batch()
    results = []
    for device in ("cpu", "cuda"):
        s = scores.clone().to(device).requires_grad_(True)
        value = losses.get_loss(name, **kwargs)(s, labels.to(device), mask.to(device))
        value.backward()
        results.append((value.item(), s.grad.cpu()))
    (v_cpu, g_cpu), (v_gpu, g_gpu) = results
    assert v_gpu == pytest.approx(v_cpu, rel=1e-9, abs=1e-12)
    assert torch.allclose(g_gpu, g_cpu, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fn", ["ndcg_swap_deltas_torch", "mrr_swap_deltas_torch", "ap_swap_deltas_torch"])
def test_swap_deltas_match_cpu(fn):
    scores, labels, mask = _batch(seed=1)
    f = getattr(metrics, fn)
    d_cpu, o_cpu = f(scores, labels, mask)
    d_gpu, o_gpu = f(scores.cuda(), labels.cuda(), mask.cuda())
    assert torch.equal(o_gpu.cpu(), o_cpu)
    assert torch.allclose(d_gpu.cpu(), d_cpu, rtol=1e-12, atol=1e-14)


def test_lambdarank_long_list_on_gpu():
    # One list of 10,000 items (the benchmark's largest case) must run on the device.
    scores, labels, mask = _batch(seed=2, b=1, n=10_000, dtype=torch.float32)
    s = scores.cuda().requires_grad_(True)
    value = losses.LambdaRank(k=10)(s, labels.cuda(), mask.cuda())
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(s.grad).all()
    s_cpu = scores.clone().requires_grad_(True)
    losses.LambdaRank(k=10)(s_cpu, labels, mask).backward()
    assert torch.allclose(s.grad.cpu(), s_cpu.grad, rtol=1e-4, atol=1e-6)
