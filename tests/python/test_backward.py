"""check_attention_backward, check_attention_autograd and assert_attention_grads_close: PyTorch 1.13's
autograd (the private SDPA and the matmul-softmax-matmul composition) passes in float64, float32 and
bfloat16 with the matching profile, with masks and causal; its NaN for a row without keys is reported
as such; backward bugs written in numpy are caught, with indices in each tensor's own shape; a float
mask's gradient is certified for every broadcast shape."""

import math

import numpy as np
import pytest
import torch

import attncheck

SDPA = torch.nn.functional._scaled_dot_product_attention


def composition(q, k, v, attn_mask=None, is_causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        scores = scores.masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), -math.inf)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, dim=-1) @ v


def private_sdpa(q, k, v, **kw):
    return SDPA(q, k, v, **kw)


def inputs(dtype, seed=0, B=2, H=3, L=13, S=17, E=8, Ev=8):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)
                 for shape in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev)))


def masks(dtype, seed=1, B=2, H=3, L=13, S=17):
    generator = torch.Generator().manual_seed(seed)
    keep = torch.rand(B, H, L, S, generator=generator) < 0.7
    keep[..., 0] = True  # every row keeps a key
    bias = torch.where(keep, torch.randn(B, H, L, S, generator=generator, dtype=torch.float64),
                       torch.tensor(-math.inf, dtype=torch.float64)).to(dtype)
    return {"none": {}, "causal": {"is_causal": True}, "bool": {"attn_mask": keep}, "float": {"attn_mask": bias}}


PROFILES = [(torch.float64, None), (torch.float32, None), (torch.bfloat16, "bf16-math")]


@pytest.mark.parametrize("fn", [private_sdpa, composition], ids=["sdpa", "composition"])
@pytest.mark.parametrize("dtype,precision", PROFILES, ids=["fp64", "fp32", "bf16"])
@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
def test_pytorch_autograd_passes(fn, dtype, precision, mask):
    q, k, v = inputs(dtype)
    report = attncheck.check_attention_autograd(fn, q, k, v, precision=precision, seed=3, **masks(dtype)[mask])
    assert report.passed, str(report)
    # A float mask becomes a leaf too: its gradient is certified beside the others.
    assert set(report.reports) == {"dq", "dk", "dv", "out"} | ({"dmask"} if mask == "float" else set())
    assert report.dk.rows_total == 2 * 3 * 17 and report.dq.rows_total == 2 * 3 * 13
    assert 0 < max(r.max_band_usage for r in report.reports.values()) < 1


def test_a_row_without_keys_gives_nan_in_pytorch_and_the_report_says_so():
    q, k, v = inputs(torch.float32)
    keep = torch.ones(2, 3, 13, 17, dtype=torch.bool)
    keep[0, 1, 4] = False
    report = attncheck.check_attention_autograd(private_sdpa, q, k, v, attn_mask=keep)
    assert not report.passed
    assert report.dq.worst.reason == "NaN in a fully masked row" and report.dq.worst.index[:3] == (0, 1, 4)
    assert any("rows without keys give NaN" in note for note in report.notes), report.notes
    # The keys of head (0, 1) get NaN through that row; the other heads' are certified and pass.
    assert {f.index[:2] for f in report.dk.failures} == {(0, 1)}


@pytest.mark.parametrize("dtype,precision", PROFILES, ids=["fp64", "fp32", "bf16"])
@pytest.mark.parametrize("shape", [(2, 3, 13, 17), (13, 17), (2, 1, 13, 17), (3, 1, 17), (13, 1)],
                         ids=["full", "LS", "B1LS", "H1S", "L1"])
def test_pytorch_autograd_certifies_the_float_masks_gradient(dtype, precision, shape):
    q, k, v = inputs(dtype)
    generator = torch.Generator().manual_seed(5)
    bias = torch.randn(*shape, generator=generator, dtype=torch.float64)
    if shape[-1] > 1:
        bias[..., 3] = -math.inf  # a key no row sees: its gradient must be exactly zero
    report = attncheck.check_attention_autograd(private_sdpa, q, k, v, attn_mask=bias.to(dtype), precision=precision,
                                                seed=2)
    assert report.passed, str(report)
    assert report.dmask.elements_total == bias.numel() and report.dmask.rows_checked == report.dmask.rows_total
    assert 0 < report.dmask.max_band_usage < 1


def test_a_wrong_mask_gradient_is_caught_and_named_in_the_masks_shape():
    q, k, v = inputs(torch.float64)
    bias = torch.randn(13, 17, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    bias[2, 5] = -math.inf
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    mask = bias.clone().requires_grad_(True)
    out = SDPA(*leaves, attn_mask=mask)[0]
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    out.backward(dout)
    grads = [x.grad for x in leaves]
    good = attncheck.check_attention_backward(*grads, q, k, v, dout, attn_mask=bias, dmask=mask.grad)
    assert good.passed and good.dmask.passed, str(good)
    scaled = mask.grad / math.sqrt(8)  # the mask treated as added before the scale
    report = attncheck.check_attention_backward(*grads, q, k, v, dout, attn_mask=bias, dmask=scaled)
    assert not report.passed and not report.dmask.passed and report.dq.passed
    assert len(report.dmask.worst.index) == 2 and report.dmask.worst.reason == "outside band"
    moved = mask.grad.clone()
    moved[2, 5] = 1e-300  # where the mask is -inf
    report = attncheck.check_attention_backward(*grads, q, k, v, dout, attn_mask=bias, dmask=moved, rows=4)
    assert [f.index for f in report.dmask.failures] == [(2, 5)]
    assert report.dmask.failures[0].reason == "masked element's gradient not zero"
    with pytest.raises(ValueError, match="dmask: expected attn_mask's shape"):
        attncheck.check_attention_backward(*grads, q, k, v, dout, attn_mask=bias, dmask=mask.grad[:5])
    with pytest.raises(ValueError, match="dmask: given but attn_mask is not a float"):
        attncheck.check_attention_backward(*grads, q, k, v, dout, attn_mask=bias > 0, dmask=mask.grad)
    with pytest.raises(ValueError, match="dmask: given without an attn_mask"):
        attncheck.check_attention_backward(*grads, q, k, v, dout, dmask=mask.grad)


def flash_backward(q, k, v, dout, scale_dq=True, causal=False, dtype=np.float32):
    """FlashAttention-2's backward in numpy (P from the LSE, D from the output), in `dtype`."""
    q, k, v, dout = (np.asarray(x, dtype=dtype) for x in (q, k, v, dout))
    scale = dtype(1 / math.sqrt(q.shape[-1]))
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    p = np.exp(s - lse)
    out = p @ v
    d = (dout * out).sum(-1, keepdims=True)
    ds = p * (dout @ np.swapaxes(v, -1, -2) - d)
    dq = (ds @ k) * (scale if scale_dq else dtype(1))
    dk = (np.swapaxes(ds, -1, -2) @ q) * scale
    dv = np.swapaxes(p, -1, -2) @ dout
    return dq, dk, dv, out, lse[..., 0]


def test_a_numpy_flash_backward_passes_and_one_without_the_scale_in_dq_fails():
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32)
                     for shape in ((1, 2, 9, 8), (1, 2, 11, 8), (1, 2, 11, 4), (1, 2, 9, 4)))
    dq, dk, dv, out, lse = flash_backward(q, k, v, dout)
    report = attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout, out=out, lse=lse)
    assert report.passed, str(report)
    assert set(report.reports) == {"dq", "dk", "dv", "out", "lse"}
    bad = flash_backward(q, k, v, dout, scale_dq=False)
    report = attncheck.check_attention_backward(*bad[:3], q, k, v, dout, out=bad[3], lse=bad[4])
    assert not report.passed and not report.dq.passed and report.dk.passed and report.dv.passed
    assert report.dq.worst.reason == "outside band" and len(report.dq.worst.index) == 4
    with pytest.raises(AssertionError, match=r"gradient dq is not within the certified band"):
        attncheck.assert_attention_grads_close(*bad[:3], q, k, v, dout)


def test_the_statistical_tier_is_narrower_and_a_numpy_flash_backward_passes_it():
    rng = np.random.default_rng(4)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32)
                     for shape in ((1, 2, 8, 64), (1, 2, 1024, 64), (1, 2, 1024, 64), (1, 2, 8, 64)))
    dq, dk, dv, out, lse = flash_backward(q, k, v, dout)
    kw = dict(out=out, lse=lse, algorithm="flash")
    certified = attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout, **kw)
    statistical = attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout, tier="statistical", **kw)
    assert certified.passed and statistical.passed, str(statistical)
    assert statistical.dq.tier == "statistical" and statistical.dq.statistical_lambda > 0
    # The same elements, a narrower band: a larger usage (the sums over 1024 keys add in quadrature).
    assert statistical.dq.max_band_usage > 3 * certified.dq.max_band_usage
    assert all(statistical.reports[name].max_band_usage >= certified.reports[name].max_band_usage
               for name in ("dq", "dk", "dv"))


def test_indices_follow_each_tensors_rank_and_dk_rows_are_key_rows():
    rng = np.random.default_rng(1)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for shape in ((7, 8), (5, 8), (5, 3), (7, 3)))
    dq, dk, dv, out, lse = flash_backward(q, k, v, dout)
    dk = dk.copy()
    dk[3, 2] += 0.01
    report = attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout)
    assert not report.passed and report.dq.passed and report.dv.passed
    assert report.dk.worst.index == (3, 2)
    assert report.dk.rows_total == 5 and report.dk.failure_count == 1
    assert "key rows" in report.dk.notes[0]


def test_causal_mask_missing_in_the_backward_is_caught():
    rng = np.random.default_rng(2)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for shape in ((1, 1, 8, 8),) * 4)
    good = flash_backward(q, k, v, dout, causal=True)
    assert attncheck.check_attention_backward(*good[:3], q, k, v, dout, is_causal=True).passed
    bad = flash_backward(q, k, v, dout, causal=False)  # the forward's output kept, the backward unmasked
    report = attncheck.check_attention_backward(*bad[:3], q, k, v, dout, is_causal=True)
    assert not report.passed


def test_sampled_certification_is_seeded():
    q, k, v = inputs(torch.float32, B=1, H=2, L=40, S=40)
    first = attncheck.check_attention_autograd(private_sdpa, q, k, v, rows=8, seed=5)
    again = attncheck.check_attention_autograd(private_sdpa, q, k, v, rows=8, seed=5)
    assert first.passed and first.dq.rows_checked == 8 and first.dk.rows_checked == 8
    assert first.to_json() == again.to_json()


def test_bad_arguments_name_the_argument():
    q, k, v = inputs(torch.float32)
    dout = torch.zeros(2, 3, 13, 8)
    with pytest.raises(ValueError, match="dk: expected key's shape"):
        attncheck.check_attention_backward(q, v[..., :4], v, q, k, v, dout)
    with pytest.raises(ValueError, match="lse: expected shape"):
        attncheck.check_attention_backward(q, k, v, q, k, v, dout, lse=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="fn: its output does not depend on key"):
        attncheck.check_attention_autograd(lambda q, k, v, **kw: q * 1 + v.sum() * 0, q, k, v[..., :13, :])
    with pytest.raises(TypeError, match="fn: expected a callable"):
        attncheck.check_attention_autograd(None, q, k, v)


def test_declaring_flash_narrows_the_band_and_dout_is_read_in_the_outputs_format():
    rng = np.random.default_rng(3)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32)
                     for shape in ((1, 1, 6, 8), (1, 1, 300, 8), (1, 1, 300, 8), (1, 1, 6, 8)))
    dq, dk, dv, out, lse = flash_backward(q, k, v, dout)
    either = attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout, out=out, lse=lse)
    flash = attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout, out=out, lse=lse, algorithm="flash")
    assert either.passed and flash.passed
    assert flash.dk.max_band_usage > 1.5 * either.dk.max_band_usage
    with pytest.raises(ValueError, match="algorithm: expected"):
        attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout, algorithm="fa2")
    with pytest.raises(ValueError, match=r"dout: element \(0, 0, 0, 0\) of .* is not representable in fp32"):
        attncheck.check_attention_backward(dq, dk, dv, q, k, v, dout.astype(np.float64) + 1e-12)


class _NoScaleInDq(torch.autograd.Function):
    """The math path with a hand-written backward that forgets the scale in dQ."""

    @staticmethod
    def forward(ctx, q, k, v):
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        ctx.save_for_backward(q, k, v, p)
        return p @ v

    @staticmethod
    def backward(ctx, dout):
        q, k, v, p = ctx.saved_tensors
        dp = dout @ v.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        return ds @ k, ds.transpose(-2, -1) @ q / math.sqrt(q.shape[-1]), p.transpose(-2, -1) @ dout


def test_conformance_with_grads_adds_backward_families():
    families = ["causal_top_left", "tile_boundaries"]
    table = attncheck.conformance(lambda q, k, v, **kw: SDPA(q, k, v, **kw)[0], cases=15, array_type="torch",
                                  grads=True, families=families)
    assert list(table) == families + [f"{name}_backward" for name in families]
    assert table.passed == list(table), str(table)
    table = attncheck.conformance(lambda q, k, v: _NoScaleInDq.apply(q, k, v), cases=30, array_type="torch",
                                  grads=True, families=["tile_boundaries"])
    assert table["tile_boundaries"].status == "passed"  # the forward is right
    assert table["tile_boundaries_backward"].status == "failed", str(table)
    assert table["tile_boundaries_backward"].reason.startswith("dq: ")
    with pytest.raises(ValueError, match="grads: the backward families need array_type='torch'"):
        attncheck.conformance(private_sdpa, grads=True)


def test_strategies_draw_dout_with_grads():
    from hypothesis import given, settings

    from attncheck.strategies import attention_inputs

    @settings(max_examples=20, deadline=None)
    @given(attention_inputs(grads=True, max_len=9))
    def check(inputs):
        B, Hq, L, _ = inputs.query.shape
        assert inputs.dout.shape == (B, Hq, L, inputs.value.shape[-1])
        assert inputs.dout.dtype == inputs.query.dtype

    check()

    @settings(max_examples=5, deadline=None)
    @given(attention_inputs(max_len=4))
    def without(inputs):
        assert inputs.dout is None

    without()
