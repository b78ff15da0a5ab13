"""The backward under softcap and sinks, with PyTorch 1.13's autograd as the client: the math path
composed by hand (c·tanh(s/c) of the scaled score; the sink as one more softmax column, dropped before
P·V, as gpt-oss does) passes in fp64 and fp32 with dsinks certified; the trackers' backward bugs are
caught (softcap's slope 1 - tanh² forgotten, dsinks with the wrong sign, the sink's gradient not
weighted by D); exact_gradients agrees with float64 autograd; bad dsinks are refused by name."""

import numpy as np
import pytest
import torch

import attncheck


def composed(q, k, v, attn_mask=None, softcap=0.0, sinks=None, forget_slope=False, flip_dsinks=False,
             unweighted_dsinks=False):
    s = (q @ k.transpose(-1, -2)) * (1 / q.shape[-1] ** 0.5)
    if softcap:
        capped = softcap * torch.tanh(s / softcap)
        s = s + (capped - s).detach() if forget_slope else capped  # forget_slope: the value, gradient 1
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, -float("inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    if sinks is None:
        return torch.softmax(s, dim=-1) @ v
    z = sinks
    if flip_dsinks:
        z = sinks.detach() + (-sinks + sinks.detach())  # same value, gradient -1
    z = z.to(s.dtype)[None, :, None, None].expand(*s.shape[:-1], 1)
    w = torch.softmax(torch.cat([s, z], dim=-1), dim=-1)
    out = w[..., :-1] @ v
    if unweighted_dsinks:  # a hand-written dz = -Σ P_iz (D dropped): the output's value kept, its gradient wrong
        w_sink = w[..., -1]
        out = out + (w_sink - w_sink.detach())[..., None] * out.detach().sum(-1, keepdim=True)
    return out


def draw(seed, dtype, B=2, H=3, L=9, S=21, E=8, spread=3.0):
    gen = torch.Generator().manual_seed(seed)
    return tuple((spread if n == 0 else 1.0) * torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
                 for n, shape in enumerate(((B, H, L, E), (B, H, S, E), (B, H, S, E))))


SINKS = torch.tensor([1.5, -0.75, 3.0], dtype=torch.float32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("features", ["softcap", "sinks", "both"])
def test_composed_autograd_passes(dtype, features):
    q, k, v = draw(1, dtype)
    kwargs = {}
    if features in ("softcap", "both"):
        kwargs["softcap"] = 5.0
    if features in ("sinks", "both"):
        kwargs["sinks"] = SINKS
    report = attncheck.check_attention_autograd(lambda q, k, v, **kw: composed(q, k, v, **kw), q, k, v, seed=2,
                                                **kwargs)
    assert report.passed, str(report)
    assert (report.dsinks is not None) == ("sinks" in kwargs)
    if report.dsinks is not None:
        assert report.dsinks.elements_total == 3 and report.dsinks.rows_checked == 3


@pytest.mark.parametrize("bug,features,broken", [
    ("forget_slope", dict(softcap=2.0), ("dq", "dk")),
    ("flip_dsinks", dict(sinks=SINKS), ("dsinks",)),
    ("unweighted_dsinks", dict(sinks=SINKS), ("dsinks",)),
])
def test_backward_bugs_are_caught(bug, features, broken):
    q, k, v = draw(4, torch.float32)
    report = attncheck.check_attention_autograd(lambda q, k, v, **kw: composed(q, k, v, **kw, **{bug: True}),
                                                q, k, v, seed=2, **features)
    assert not report.passed
    for name in broken:
        assert not report.reports[name].passed, f"{name} should fail under {bug}:\n{report}"
    assert report.out.passed  # the forward value is unchanged by each bug


def test_exact_gradients_agree_with_float64_autograd():
    q, k, v = draw(7, torch.float64)
    sinks = SINKS.to(torch.float64).requires_grad_(True)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    dout = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    composed(*leaves, softcap=4.0, sinks=sinks).backward(dout)
    exact = attncheck.exact_gradients(dout.numpy(), q.numpy(), k.numpy(), v.numpy(), softcap=4.0, sinks=SINKS.numpy())
    assert len(exact) == 4
    for got, want in zip([x.grad for x in leaves] + [sinks.grad], exact):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_without_dsinks_a_note_says_they_are_not_certified():
    q, k, v = draw(1, torch.float32)
    dout = torch.ones(q.shape, dtype=torch.float32)
    dq, dk, dv = attncheck.exact_gradients(dout, q, k, v)
    report = attncheck.check_attention_backward(np.float32(dq), np.float32(dk), np.float32(dv), q, k, v, dout,
                                                sinks=SINKS, precision="fp32")
    assert report.dsinks is None
    assert any("dsinks given" in note for note in report.notes)


@pytest.mark.parametrize("kwargs,message", [
    (dict(dsinks=np.zeros(3, np.float32)), "dsinks: given without sinks"),
    (dict(sinks=SINKS, dsinks=np.zeros(2, np.float32)), r"dsinks: expected sinks' shape \(3,\)"),
])
def test_bad_dsinks_are_refused_by_name(kwargs, message):
    q, k, v = draw(1, torch.float32)
    dout = torch.ones(q.shape, dtype=torch.float32)
    with pytest.raises(ValueError, match=message):
        attncheck.check_attention_backward(q, k, v, q, k, v, dout, **kwargs)


def composed_sdpa(q, k, v, attn_mask=None, softcap=0.0, sinks=None, forget_slope=False, flip_dsinks=False):
    """composed() with the conformance keywords a softcap or sinks family passes (and nothing else)."""
    return composed(q, k, v, attn_mask=attn_mask, softcap=softcap, sinks=sinks, forget_slope=forget_slope,
                    flip_dsinks=flip_dsinks)


def test_conformance_runs_the_softcap_and_sinks_backward_families():
    families = ["softcap", "sinks"]
    table = attncheck.conformance(composed_sdpa, cases=10, array_type="torch", grads=True, families=families)
    assert list(table) == families + [f"{name}_backward" for name in families]
    assert table.passed == list(table), str(table)
    for bug, family, reason in (("forget_slope", "softcap", ("dq: ", "dk: ")), ("flip_dsinks", "sinks", ("dsinks: ",))):
        table = attncheck.conformance(lambda q, k, v, **kw: composed_sdpa(q, k, v, **kw, **{bug: True}), cases=20,
                                      array_type="torch", grads=True, families=[family])
        assert table[family].status == "passed"  # the forward is right
        assert table[f"{family}_backward"].status == "failed", str(table)
        assert table[f"{family}_backward"].reason.startswith(reason), str(table)
