"""ALiBi (FlashAttention's alibi_slopes: the bias -slope·|i + S - L - j| on the scaled score): a numpy
reference forming the bias in its own precision passes, with [Hq] and [B, Hq] slopes, causal and
L != S; PyTorch 1.13 passes through the equivalent float mask, forward and backward; the trackers'
bugs are caught (the slope's sign, the heads' order, the distance aligned top-left); bad slopes are
refused by name."""

import math

import numpy as np
import pytest
import torch

import attncheck
from sdpa_reference import sdpa


def slopes_for(B, Hq, per_batch):
    """Non-dyadic fp32 slopes 0.7^(h+1+b), so that every bias needs its bits."""
    shape = (B, Hq) if per_batch else (Hq,)
    b = np.arange(B)[:, None] if per_batch else 0
    return (0.7 ** (np.arange(Hq)[None, :] + 1 + b)).reshape(shape).astype(np.float32)


def alibi_bias(slopes, B, Hq, L, S, sign=-1.0, reverse_heads=False, top_left=False, dtype=np.float32):
    """[B, Hq, L, S]: sign·slope·|i + S - L - j| formed in `dtype` (|d| converted, one product)."""
    s = np.broadcast_to(slopes.reshape((1, Hq) if slopes.ndim == 1 else (B, Hq)), (B, Hq)).astype(dtype)
    if reverse_heads:
        s = s[:, ::-1]
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    d = np.abs(i + (0 if top_left else S - L) - j).astype(dtype)
    return (dtype(sign) * s[:, :, None, None] * d[None, None]).astype(dtype)


def draw(seed, B=2, Hq=4, Hkv=2, L=9, S=23, E=8, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for shape in ((B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, E)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("per_batch", [False, True])
@pytest.mark.parametrize("L,S,causal", [(9, 23, False), (23, 9, True), (16, 16, True)])
def test_a_reference_forming_the_bias_passes(dtype, per_batch, L, S, causal):
    q, k, v = draw(L + S, L=L, S=S, dtype=dtype)
    slopes = slopes_for(2, 4, per_batch)
    compute = np.float32 if dtype == np.float16 else dtype
    bias = alibi_bias(slopes, 2, 4, L, S, dtype=compute)
    keep = np.tril(np.ones((L, S), dtype=bool), k=S - L) if causal else np.ones((L, S), dtype=bool)
    out = sdpa(q, k, v, attn_mask=np.where(keep, bias, -np.inf).astype(compute), enable_gqa=True)
    report = attncheck.check_attention(out, q, k, v, alibi_slopes=slopes, is_causal=causal,
                                       causal_alignment="bottom-right", enable_gqa=True)
    assert report.passed, str(report)


@pytest.mark.parametrize("bug", [dict(sign=1.0), dict(reverse_heads=True), dict(top_left=True)],
                         ids=["sign", "head order", "top-left distance"])
def test_alibi_bugs_are_caught(bug):
    q, k, v = draw(5)
    slopes = slopes_for(2, 4, False)
    wrong = sdpa(q, k, v, attn_mask=alibi_bias(slopes, 2, 4, 9, 23, **bug), enable_gqa=True)
    report = attncheck.check_attention(wrong, q, k, v, alibi_slopes=slopes, enable_gqa=True)
    assert not report.passed and report.worst.reason == "outside band"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pytorch_through_the_equivalent_float_mask_passes_forward_and_backward(dtype):
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)
               for shape in ((2, 4, 10, 8), (2, 4, 19, 8), (2, 4, 19, 8)))
    slopes = slopes_for(2, 4, True)
    np_dtype = np.float64 if dtype == torch.float64 else np.float32

    def with_alibi(q, k, v, alibi_slopes):
        mask = torch.from_numpy(alibi_bias(np.asarray(alibi_slopes), 2, 4, q.shape[-2], k.shape[-2], dtype=np_dtype))
        return torch.nn.functional._scaled_dot_product_attention(q, k, v, attn_mask=mask)

    out = with_alibi(q, k, v, slopes)[0]
    assert attncheck.check_attention(out, q, k, v, alibi_slopes=slopes).passed
    report = attncheck.check_attention_autograd(with_alibi, q, k, v, alibi_slopes=slopes)
    assert report.passed, report.describe()


@pytest.mark.parametrize("slopes,mask,message", [
    (np.ones(3, np.float32), None, r"alibi_slopes: expected shape \(4,\) or \(2, 4\)"),
    (np.array([0.1, 0.2, 0.3, 0.4]), None, "alibi_slopes: expected finite float32 values"),
    (np.array([1, 2, 3, np.inf], np.float32), None, "alibi_slopes: expected finite float32 values"),
    (np.ones(4, np.float32), np.zeros((9, 23), np.float32), "alibi_slopes: not together with a float attn_mask"),
])
def test_bad_slopes_are_refused_by_name(slopes, mask, message):
    q, k, v = draw(1, Hkv=4)
    with pytest.raises(ValueError, match=message):
        attncheck.check_attention(np.zeros((2, 4, 9, 8), np.float32), q, k, v, alibi_slopes=slopes, attn_mask=mask)
