"""PyTorch 1.13's scaled dot-product attention, certified as a real client.

PyTorch 1.13 has only the private torch.nn.functional._scaled_dot_product_attention(query, key,
value, attn_mask, dropout_p, need_attn_weights, is_causal) -> (out, weights): positional
arguments, no scale (always 1/√E), no GQA, no bottom-right alignment, and it refuses an attn_mask
together with is_causal=True. Its boolean mask means True = takes part, like 2.x and attncheck:
found by experiment on this machine and pinned by test_boolean_mask_convention below. Its one
known wrong answer: a row in which no key takes part yields NaN (PyTorch returns zeros there only
from 2.5); attncheck must report exactly those rows, with reason "NaN in a fully masked row".
Everything else must pass.
"""

import numpy as np
import pytest
import torch
from hypothesis import assume, given

import attncheck
from attncheck import strategies

sdpa_113 = torch.nn.functional._scaled_dot_product_attention


def torch_sdpa(query, key, value, attn_mask=None, is_causal=False):
    """SDPA's keyword signature over 1.13's positional one (for conformance)."""
    out, _ = sdpa_113(query, key, value, attn_mask, 0.0, False, is_causal)
    return out


def random_tensors(dtype, B=2, H=3, L=6, S=9, E=8, Ev=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=generator, dtype=dtype)
                 for shape in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_no_mask_causal_and_masks_pass(dtype):
    q, k, v = random_tensors(dtype)
    attncheck.assert_attention_close(torch_sdpa(q, k, v), q, k, v)
    attncheck.assert_attention_close(torch_sdpa(q, k, v, is_causal=True), q, k, v, is_causal=True)  # L != S: top-left
    keep = torch.rand(2, 1, 6, 9, generator=torch.Generator().manual_seed(1)) < 0.6
    keep[..., 0] = True
    attncheck.assert_attention_close(torch_sdpa(q, k, v, attn_mask=keep), q, k, v, attn_mask=keep)
    additive = torch.where(keep, torch.randn(keep.shape, dtype=dtype), torch.tensor(float("-inf"), dtype=dtype))
    attncheck.assert_attention_close(torch_sdpa(q, k, v, attn_mask=additive), q, k, v, attn_mask=additive)
    padding = torch.arange(9).reshape(1, 1, 1, 9) < torch.tensor([4, 9]).reshape(2, 1, 1, 1)
    attncheck.assert_attention_close(torch_sdpa(q, k, v, attn_mask=padding), q, k, v, key_lengths=[4, 9])


def test_boolean_mask_convention():
    """1.13's boolean mask is True = takes part: its output passes as such and fails inverted."""
    q, k, v = random_tensors(torch.float64, L=4, S=4)
    keep = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1]], dtype=torch.bool)
    out = torch_sdpa(q, k, v, attn_mask=keep)
    assert attncheck.check_attention(out, q, k, v, attn_mask=keep).passed
    assert not attncheck.check_attention(out, q, k, v, attn_mask=~keep).passed


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fully_masked_row_is_nan_in_1_13_and_attncheck_reports_that_row(dtype):
    q, k, v = random_tensors(dtype, B=1, H=2, L=5, S=4, Ev=3)
    keep = torch.ones(5, 4, dtype=torch.bool)
    keep[3] = False  # query 3 sees no key
    out = torch_sdpa(q, k, v, attn_mask=keep)
    report = attncheck.check_attention(out, q, k, v, attn_mask=keep)
    assert not report.passed
    assert {f.index for f in report.failures} == {(0, h, 3, c) for h in range(2) for c in range(3)}
    assert {f.reason for f in report.failures} == {"NaN in a fully masked row"}
    with pytest.raises(AssertionError, match=r"index \(0, [01], 3, [0-2]\): NaN in a fully masked row, got nan"):
        attncheck.assert_attention_close(out, q, k, v, attn_mask=keep)


def masked_rows(inputs):
    """(b, h, i) of every row in which no key takes part, from the drawn mask alone."""
    B, H, L, _ = inputs.query.shape
    S = inputs.key.shape[2]
    keep = np.ones((B, H, L, S), dtype=bool)
    if inputs.is_causal:
        keep &= np.tril(np.ones((L, S), dtype=bool))
    if inputs.attn_mask is not None:
        m = inputs.attn_mask
        keep &= np.broadcast_to(m if m.dtype == bool else ~np.isneginf(m), keep.shape)
    return {tuple(index) for index in np.argwhere(~keep.any(axis=-1))}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_drawn_inputs_pass_except_nan_in_fully_masked_rows(dtype):
    @given(strategies.attention_inputs(dtype=dtype, causal="top-left", gqa=False, scales=False))
    def check(inputs):
        assume(not (inputs.is_causal and inputs.attn_mask is not None))  # 1.13 refuses both
        q, k, v = (torch.from_numpy(x) for x in (inputs.query, inputs.key, inputs.value))
        mask = None if inputs.attn_mask is None else torch.from_numpy(inputs.attn_mask)
        out = torch_sdpa(q, k, v, attn_mask=mask, is_causal=inputs.is_causal)
        report = attncheck.check_attention(out, q, k, v, **inputs.kwargs())
        assert {f.reason for f in report.failures} <= {"NaN in a fully masked row"}, str(report)
        rows = masked_rows(inputs)  # every element of exactly these rows is NaN (at most 100 failures are kept)
        assert {f.index[:3] for f in report.failures} <= rows, str(report)
        assert report.failure_count == len(rows) * inputs.value.shape[-1], str(report)

    check()


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_conformance_families(precision):
    table = attncheck.conformance(torch_sdpa, precision=precision, cases=15, array_type="torch")
    print(table)
    assert table.failed == ["fully_masked_row"]  # 1.13's NaN; see the module's docstring
    assert "NaN in a fully masked row, got nan" in table["fully_masked_row"].reason
    assert table.skipped == ["causal_bottom_right", "gqa_mapping", "sliding_window", "alibi", "softcap", "sinks"]  # no such arguments in 1.13
    assert table["gqa_mapping"].reason == "fn lacks enable_gqa"
    assert len(table.passed) == len(table) - 7  # one failed, six skipped


@pytest.mark.parametrize("shape,S", [((1, 2, 64, 64), 256), ((1, 2, 128, 64), 256), ((2, 3, 9, 16), 33)])
def test_bf16_math_path_passes_bf16_math_and_a_bf16_failure_names_it(shape, S):
    # PyTorch 1.13's bf16 SDPA is its math path: the scaled Q, the scores and P in bf16.
    B, H, L, E = shape
    q, k, v = (x.bfloat16() for x in random_tensors(torch.float32, B, H, L, S, E, E, seed=L + S))
    mask = torch.rand(B, H, L, S, generator=torch.Generator().manual_seed(3)) > 0.2
    mask[..., 0] = True  # no fully masked row (1.13 gives NaN there)
    for call, kwargs in ((dict(is_causal=True), dict(is_causal=True)), (dict(attn_mask=mask), dict(attn_mask=mask)),
                         (dict(), dict())):
        out = torch_sdpa(q, k, v, **call)
        math = attncheck.check_attention(out, q, k, v, precision="bf16-math", **kwargs)
        assert math.passed and math.statistical.passed, str(math)
        plain = attncheck.check_attention(out, q, k, v, **kwargs)
        if not plain.passed:  # outside bf16 (scores kept in fp32): the report says where it is inside
            assert plain.consistent_with == ["bf16-math"]
            assert "outside bf16" in plain.diagnosis() and "inside bf16-math" in plain.diagnosis()


def test_bf16_causal_sdpa_fails_bf16_and_is_diagnosed_bf16_math():
    # The case measured when the profile was missing: causal [1, 2, 64, 64] x S = 256 used 1.1 of bf16.
    q, k, v = (x.bfloat16() for x in random_tensors(torch.float32, 1, 2, 64, 256, 64, 64, seed=1))
    out = torch_sdpa(q, k, v, is_causal=True)
    plain = attncheck.check_attention(out, q, k, v, is_causal=True)
    math = attncheck.check_attention(out, q, k, v, is_causal=True, precision="bf16-math")
    assert math.passed and not plain.passed  # usage 0.35 and 1.10, measured
    assert plain.consistent_with == ["bf16-math"] and "diagnosis: outside bf16" in str(plain)
    assert math.consistent_with is None  # no diagnosis of a pass
