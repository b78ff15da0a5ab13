"""attncheck.exact_gradients: the exact dq, dk, dv of Σ dout ∘ SDPA against PyTorch 1.13's float64
autograd (math path and the matmul-softmax-matmul composition), masks, causal, GQA; what PyTorch
does with a row without keys; argument errors."""

import math

import numpy as np
import pytest
import torch

import attncheck


def problem(seed=0, B=2, Hq=4, Hkv=2, L=6, S=9, E=8, Ev=5):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, L, E, generator=generator, dtype=torch.float64)
    k = torch.randn(B, Hkv, S, E, generator=generator, dtype=torch.float64)
    v = torch.randn(B, Hkv, S, Ev, generator=generator, dtype=torch.float64)
    dout = torch.randn(B, Hq, L, Ev, generator=generator, dtype=torch.float64)
    return q, k, v, dout


def torch_gradients(q, k, v, dout, mask=None, causal=False, scale=None):
    """Autograd of the composition, K and V repeated over each group (GQA), in float64."""
    q, k, v = (x.clone().requires_grad_(True) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ kr.transpose(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        scores = scores.masked_fill(~torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(), -math.inf)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    (torch.softmax(scores, dim=-1) @ vr).backward(dout)
    return q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


def test_matches_pytorch_float64_autograd_with_gqa_mask_and_causal():
    q, k, v, dout = problem()
    mask = torch.rand(6, 9, generator=torch.Generator().manual_seed(1)) < 0.7
    mask[:, 0] = True
    for kwargs, torch_kwargs in (({}, {}), ({"attn_mask": mask.numpy()}, {"mask": mask}),
                                 ({"is_causal": True}, {"causal": True})):
        exact = attncheck.exact_gradients(dout.numpy(), q.numpy(), k.numpy(), v.numpy(), enable_gqa=True, **kwargs)
        for name, got, want in zip(("dq", "dk", "dv"), torch_gradients(q, k, v, dout, **torch_kwargs), exact):
            assert got.shape == want.shape, name
            assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (name, kwargs, np.abs(got - want).max())


def test_pytorch_sdpa_math_path_float64_gradients():
    q, k, v, dout = problem(seed=2, Hq=2, Hkv=2)
    qg, kg, vg = (x.clone().requires_grad_(True) for x in (q, k, v))
    out, _ = torch.nn.functional._scaled_dot_product_attention(qg, kg, vg, None, 0.0, False, True)  # (mask, dropout, need_weights, causal)
    out.backward(dout)
    exact = attncheck.exact_gradients(dout.numpy(), q.numpy(), k.numpy(), v.numpy(), is_causal=True)
    for got, want in zip((qg.grad, kg.grad, vg.grad), exact):
        assert np.allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_a_row_without_keys_has_zero_gradient_where_pytorch_gives_nan():
    q, k, v, dout = problem(seed=3, Hq=2, Hkv=2)
    mask = torch.ones(6, 9, dtype=torch.bool)
    mask[2] = False  # query 2 sees no key
    dq, dk, dv = attncheck.exact_gradients(dout.numpy(), q.numpy(), k.numpy(), v.numpy(), attn_mask=mask.numpy())
    assert (dq[:, :, 2] == 0).all()
    assert np.isfinite(dk).all() and np.isfinite(dv).all()
    # PyTorch 1.13, the composition: the softmax of a row of -inf is NaN, so P^T dO makes all of dV NaN
    # (masked_fill stops it reaching dq and dk).
    got_dq, got_dk, got_dv = torch_gradients(q, k, v, dout, mask=mask)
    assert (got_dq[:, :, 2] == 0).all() and np.isfinite(got_dk).all() and np.isnan(got_dv).all()
    # Its math-path SDPA: NaN in that dq row and in every element of dK and dV.
    qg, kg, vg = (x.clone().requires_grad_(True) for x in (q, k, v))
    out, _ = torch.nn.functional._scaled_dot_product_attention(qg, kg, vg, mask, 0.0, False, False)
    out.backward(dout)
    assert torch.isnan(qg.grad[:, :, 2]).all() and torch.isfinite(qg.grad[:, :, :2]).all()
    assert torch.isnan(kg.grad).all() and torch.isnan(vg.grad).all()


def test_float32_inputs_are_exact_and_rank_3_shapes_are_kept():
    q, k, v, dout = (x[0].float().numpy() for x in problem(seed=4, Hq=2, Hkv=2))  # [H, L, E] read as [B, L, E]
    dq, dk, dv = attncheck.exact_gradients(dout, q, k, v, scale=0.3)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape and dq.dtype == np.float64
    want = torch_gradients(*(torch.from_numpy(x.astype(np.float64))[:, None] for x in (q, k, v, dout)), scale=0.3)
    for got, exact in zip(want, (dq, dk, dv)):
        assert np.allclose(got[:, 0], exact, rtol=1e-12, atol=1e-12)


def test_argument_errors_name_the_argument():
    q, k, v, dout = (x.numpy() for x in problem())
    with pytest.raises(ValueError, match=r"dout: shape \[2, 4, 6, 4\] should be"):
        attncheck.exact_gradients(dout[..., :4], q, k, v, enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa"):
        attncheck.exact_gradients(dout, q, k, v)
    with pytest.raises(ValueError, match="bits"):
        attncheck.exact_gradients(dout, q, k, v, enable_gqa=True, bits=10)
    bad = dout.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="dout"):
        attncheck.exact_gradients(bad, q, k, v, enable_gqa=True)
