"""Softcap (FlashAttention's softcap, Gemma 2's logit capping: c·tanh(s/c) of the scaled score, before
the mask is added): a numpy reference passes in fp64, fp32 and fp16 at caps that bite; PyTorch 1.13
composed by hand passes; the trackers' bugs are caught (s·tanh(s) of FlashAttention #2396, the cap
over the mask too, the cap left out); bad caps are refused by name (the backward's
softcap: test_backward_features.py)."""

import numpy as np
import pytest
import torch

import attncheck


def softcapped(q, k, v, cap, mask=None, s_tanh_s=False, cap_mask=False, compute=None):
    compute = np.dtype(compute or (np.float32 if q.dtype == np.float16 else q.dtype))
    qc, kc, vc = (x.astype(compute) for x in (q, k, v))
    s = (qc @ np.swapaxes(kc, -1, -2)) * compute.type(1 / np.sqrt(q.shape[-1]))
    bias = np.zeros_like(s) if mask is None else mask.astype(compute)
    c = compute.type(cap)
    if cap_mask:
        s = c * np.tanh((s + bias) / c)
    else:
        s = (s * np.tanh(s) if s_tanh_s else c * np.tanh(s / c)) + bias
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    return ((w / w.sum(axis=-1, keepdims=True)) @ vc).astype(q.dtype)


def draw(seed, spread=4.0, dtype=np.float32, L=10, S=27, E=16):
    rng = np.random.default_rng(seed)
    return ((spread * rng.standard_normal((2, 3, L, E))).astype(dtype), rng.standard_normal((2, 3, S, E)).astype(dtype),
            rng.standard_normal((2, 3, S, E)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("cap", [1.0, 5.0, 30.0, 50.0])
def test_a_softcapped_reference_passes(dtype, cap):
    q, k, v = draw(int(cap), dtype=dtype)
    mask = np.random.default_rng(9).choice([0.0, -1.0, 0.5], size=(10, 27)).astype(dtype)
    report = attncheck.check_attention(softcapped(q, k, v, cap, mask), q, k, v, softcap=cap, attn_mask=mask)
    assert report.passed, str(report)


@pytest.mark.parametrize("bug", [dict(s_tanh_s=True), dict(cap_mask=True), "ignored"],
                         ids=["s tanh s", "cap over the mask", "ignored"])
def test_softcap_bugs_are_caught(bug):
    q, k, v = draw(2)
    mask = np.random.default_rng(9).choice([0.0, -3.0, 2.0], size=(10, 27)).astype(np.float32)
    wrong = softcapped(q, k, v, 1e30, mask) if bug == "ignored" else softcapped(q, k, v, 5.0, mask, **bug)
    report = attncheck.check_attention(wrong, q, k, v, softcap=5.0, attn_mask=mask)
    assert not report.passed and report.worst.reason == "outside band"


def test_pytorch_composed_by_hand_passes():
    generator = torch.Generator().manual_seed(4)
    q = 4 * torch.randn(2, 3, 9, 16, generator=generator)
    k, v = torch.randn(2, 3, 21, 16, generator=generator), torch.randn(2, 3, 21, 16, generator=generator)
    scores = 20.0 * torch.tanh((q @ k.transpose(-2, -1) / 4.0) / 20.0)
    out = torch.softmax(scores, dim=-1) @ v
    report = attncheck.check_attention(out, q, k, v, softcap=20.0)
    assert report.passed, str(report)


@pytest.mark.parametrize("cap,error,message", [
    (-1.0, ValueError, "softcap: expected 0 \\(off\\) or a positive finite float32 value, got -1.0"),
    (0.1, ValueError, "softcap: expected 0 \\(off\\) or a positive finite float32 value, got 0.1"),
    (float("inf"), ValueError, "softcap: expected 0"),
    ("5", TypeError, "softcap: expected a float, got str"),
])
def test_bad_caps_are_refused_by_name(cap, error, message):
    q, k, v = draw(1)
    with pytest.raises(error, match=message):
        attncheck.check_attention(np.zeros((2, 3, 10, 16), np.float32), q, k, v, softcap=cap)


def test_a_fast_approximate_tanh_needs_its_accuracy_declared():
    # FlashAttention 2 and 3 cap with tanh.approx.f32 (about 2^-11 relative). An fp32 kernel whose tanh
    # errs by 2^-11 relative fails at the default tanh_ulps = 4 and passes with tanh_ulps = 8192 (2^-11).
    q, k, v = draw(8, spread=6.0)
    qc, kc, vc = (x.astype(np.float32) for x in (q, k, v))
    s = (qc @ np.swapaxes(kc, -1, -2)) * np.float32(0.25)
    t = np.tanh(s / np.float32(30.0)) * np.float32(1 + 2.0 ** -11)  # a tanh 2^-11 high
    s = np.float32(30.0) * t
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    out = ((w / w.sum(axis=-1, keepdims=True)) @ vc).astype(np.float32)
    assert not attncheck.check_attention(out, q, k, v, softcap=30.0).passed
    assert attncheck.check_attention(out, q, k, v, softcap=30.0, tanh_ulps=8192).passed
    with pytest.raises(TypeError, match="tanh_ulps: expected a float or None, got str"):
        attncheck.check_attention(out, q, k, v, softcap=30.0, tanh_ulps="4")
