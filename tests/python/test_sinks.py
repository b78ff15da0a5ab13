"""Attention sinks (gpt-oss, llama.cpp, FlashAttention 4: a per-head logit z_h in every row's softmax
denominator, Σ_j e^{s_j} + e^{z_h}, carrying no value): the gpt-oss reference (the sink as a softmax
column, then dropped) and a FlashAttention-4-style one (added to the sum at the end, with the keys'
maximum) pass in fp64, fp32 and fp16, and PyTorch 1.13 composed as gpt-oss does passes; the sink left
out of the denominator, given a value, or in the wrong head order is caught; a row without keys is 0;
the LSE log(Σ e^s + e^z) passes in both styles (z in a row without keys) and one without the sink is
caught; bad sinks are refused by name."""

import numpy as np
import pytest
import torch

import attncheck


def with_sinks(q, k, v, sinks, keep=None, style="gpt-oss", value_for_sink=False, compute=None):
    compute = np.dtype(compute or (np.float32 if q.dtype == np.float16 else q.dtype))
    qc, kc, vc = (x.astype(compute) for x in (q, k, v))
    s = (qc @ np.swapaxes(kc, -1, -2)) * compute.type(1 / np.sqrt(q.shape[-1]))
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    z = np.broadcast_to(np.asarray(sinks, dtype=compute)[None, :, None, None], s.shape[:-1] + (1,))
    if style == "gpt-oss":  # the sink as one more column of the softmax, dropped before P·V
        full = np.concatenate([s, z], axis=-1)
        full = full - full.max(axis=-1, keepdims=True)
        w = np.exp(full)
        w = w / w.sum(axis=-1, keepdims=True)
        out = w[..., :-1] @ vc
        if value_for_sink:
            out = out + w[..., -1:] * vc.mean(axis=-2, keepdims=True)
        return out.astype(q.dtype)
    with np.errstate(invalid="ignore"):  # FlashAttention 4: the keys' maximum, the sink added at the end
        top = s.max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0)
        w = np.exp(s - top)
        total = w.sum(axis=-1, keepdims=True) + np.exp(z - top)
        return ((w @ vc) / total).astype(q.dtype)


def draw(seed, dtype=np.float32, L=9, S=21):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for shape in ((2, 3, L, 8), (2, 3, S, 8), (2, 3, S, 8)))


SINKS = np.array([1.5, -0.75, 3.0], np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("style", ["gpt-oss", "flash4"])
def test_both_sink_styles_pass(dtype, style):
    q, k, v = draw(3, dtype)
    keep = np.random.default_rng(4).random((9, 21)) < 0.7
    keep[2] = False  # a row without keys: exactly 0 (0 / e^z)
    out = with_sinks(q, k, v, SINKS, keep, style)
    assert not out[:, :, 2].any()
    report = attncheck.check_attention(out, q, k, v, sinks=SINKS, attn_mask=keep)
    assert report.passed, str(report)


@pytest.mark.parametrize("bug", ["left out", "value", "heads reversed"])
def test_sink_bugs_are_caught(bug):
    q, k, v = draw(5)
    if bug == "left out":
        wrong = with_sinks(q, k, v, np.full(3, -1e30, np.float32))
    elif bug == "value":
        wrong = with_sinks(q, k, v, SINKS, value_for_sink=True)
    else:
        wrong = with_sinks(q, k, v, SINKS[::-1])
    report = attncheck.check_attention(wrong, q, k, v, sinks=SINKS)
    assert not report.passed and report.worst.reason == "outside band"


def test_pytorch_composed_as_gpt_oss_passes():
    generator = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(*shape, generator=generator) for shape in ((1, 3, 7, 16), (1, 3, 12, 16), (1, 3, 12, 16)))
    sinks = torch.tensor([0.5, 2.0, -1.0])
    scores = q @ k.transpose(-2, -1) / 4.0
    full = torch.cat([scores, sinks.view(1, 3, 1, 1).expand(1, 3, 7, 1)], dim=-1)
    out = torch.softmax(full, dim=-1)[..., :-1] @ v
    report = attncheck.check_attention(out, q, k, v, sinks=sinks)
    assert report.passed, str(report)


def lse_with_sinks(q, k, sinks, keep, style, with_sink=True):
    """log(Σ_j e^{s_j} + e^{z}) computed in the inputs' dtype as each style computes it (a row without
    keys: z), stored in fp32 (FlashAttention's softmax_lse)."""
    t = q.dtype.type
    s = (q @ np.swapaxes(k, -1, -2)) * t(1 / np.sqrt(q.shape[-1]))
    s = np.where(keep, s, -np.inf)
    z = np.broadcast_to(np.asarray(sinks, q.dtype)[None, :, None, None], s.shape[:-1] + (1,))
    with np.errstate(invalid="ignore", divide="ignore"):
        if style == "gpt-oss":
            top = np.maximum(s.max(axis=-1, keepdims=True), z)
        else:  # the keys' maximum, reset to 0 in a row without keys
            top = s.max(axis=-1, keepdims=True)
            top = np.where(np.isfinite(top), top, t(0))
        total = np.exp(s - top).sum(axis=-1, keepdims=True) + (np.exp(z - top) if with_sink else 0)
        return (top + np.log(total))[..., 0].astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("style", ["gpt-oss", "flash4"])
def test_the_lse_with_sinks_passes_and_without_the_sink_is_caught(dtype, style):
    q, k, v = draw(7, dtype)
    keep = np.random.default_rng(8).random((9, 21)) < 0.7
    keep[4] = False  # a row without keys: its LSE is the sink's z
    out = with_sinks(q, k, v, SINKS, keep, style)
    lse = lse_with_sinks(q, k, SINKS, keep, style)
    assert np.allclose(lse[:, :, 4], SINKS[None, :])
    report = attncheck.check_attention(out, q, k, v, sinks=SINKS, attn_mask=keep, lse=lse)
    assert report.passed, str(report)
    wrong = lse_with_sinks(q, k, SINKS, keep, style, with_sink=False)
    wrong[:, :, 4] = SINKS[None, :]
    bad = attncheck.check_attention(out, q, k, v, sinks=SINKS, attn_mask=keep, lse=wrong)
    assert not bad.passed


@pytest.mark.parametrize("kwargs,message", [
    (dict(sinks=np.zeros(2, np.float32)), r"sinks: expected shape \(3,\)"),
    (dict(sinks=np.array([0.1, 0.2, 0.3])), "sinks: expected finite float32 values"),
    (dict(sinks=SINKS, key_tile=16), "sinks: declare no kernel structure"),
])
def test_bad_sinks_are_refused_by_name(kwargs, message):
    q, k, v = draw(1)
    with pytest.raises(ValueError, match=message):
        attncheck.check_attention(np.zeros((2, 3, 9, 8), np.float32), q, k, v, **kwargs)
