"""check_attention and assert_attention_close: verdicts, dtypes, argument errors, the report."""

import json
import math

import numpy as np
import pytest
import torch

import attncheck
from sdpa_reference import sdpa
from tiled_reference import tiled_sdpa


def random_problem(dtype=np.float32, shape=(2, 3, 5, 8), S=7, Ev=4, seed=0):
    rng = np.random.default_rng(seed)
    B, H, L, E = shape
    q = rng.standard_normal((B, H, L, E)).astype(dtype)
    k = rng.standard_normal((B, H, S, E)).astype(dtype)
    v = rng.standard_normal((B, H, S, Ev)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype,precision", [(np.float64, "fp64"), (np.float32, "fp32"), (np.float16, "fp16")])
def test_correct_kernel_passes_in_each_numpy_dtype(dtype, precision):
    q, k, v = random_problem(dtype)
    report = attncheck.check_attention(sdpa(q, k, v), q, k, v)
    assert report.passed and bool(report)
    assert report.precision == precision
    assert report.failures == [] and report.failure_count == 0
    assert 0 <= report.max_band_usage <= 1
    assert report.rows_checked == report.rows_total == 2 * 3 * 5


def test_one_element_off_by_1e_3_relative_fails_naming_it():
    q, k, v = random_problem(np.float32)
    out = sdpa(q, k, v)
    out[1, 2, 3, 1] *= np.float32(1 + 1e-3)
    report = attncheck.check_attention(out, q, k, v)
    assert not report.passed
    assert report.failure_count == 1
    worst = report.worst
    assert worst.index == (1, 2, 3, 1) and worst.reason == "outside band"
    assert worst.got == float(out[1, 2, 3, 1])
    assert abs(worst.exact - worst.got) > worst.band > 0
    assert report.max_band_usage > 1
    with pytest.raises(AssertionError, match=r"index \(1, 2, 3, 1\): outside band, got .* exact .* band .* ulps"):
        attncheck.assert_attention_close(out, q, k, v)


def test_torch_tensors_including_bfloat16_and_autograd():
    q, k, v = (torch.from_numpy(x) for x in random_problem(np.float32))
    q.requires_grad_(True)
    out = torch.from_numpy(sdpa(q.detach().numpy(), k.numpy(), v.numpy()))
    assert attncheck.check_attention(out, q, k, v).precision == "fp32"
    qb, kb, vb = q.detach().bfloat16(), k.bfloat16(), v.bfloat16()
    # The exact result for the bf16 inputs, computed in fp64 and rounded once to bf16: passes bf16.
    exact = sdpa(qb.double().numpy(), kb.double().numpy(), vb.double().numpy())
    report = attncheck.check_attention(torch.from_numpy(exact).bfloat16(), qb, kb, vb)
    assert report.passed and report.precision == "bf16"
    wrong = torch.from_numpy(exact).bfloat16()
    wrong[0, 0, 0, 0] += 0.25
    assert attncheck.check_attention(wrong, qb, kb, vb).worst.index == (0, 0, 0, 0)


def test_rank_3_and_rank_2_inputs_report_indices_in_the_callers_rank():
    q, k, v = random_problem(np.float64, shape=(2, 1, 5, 8))
    q3, k3, v3 = q[:, 0], k[:, 0], v[:, 0]
    out = sdpa(q3, k3, v3)
    out[1, 4, 2] += 1e-6
    assert attncheck.check_attention(out, q3, k3, v3).worst.index == (1, 4, 2)
    out2 = sdpa(q3[0], k3[0], v3[0])
    out2[3, 0] = np.nan
    report = attncheck.check_attention(out2, q3[0], k3[0], v3[0])
    assert report.worst.index == (3, 0) and report.worst.reason == "NaN"


def test_masks_causal_gqa_and_key_lengths():
    rng = np.random.default_rng(1)
    q, k, v = random_problem(np.float32, shape=(2, 4, 6, 8), S=9)
    k, v = k[:, :2], v[:, :2]
    mask = rng.random((6, 9)) < 0.7
    mask[:, 0] = True
    out = sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
    assert attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True).passed
    additive = np.where(mask, rng.standard_normal((6, 9)), -np.inf).astype(np.float32)
    out = sdpa(q, k, v, attn_mask=additive, enable_gqa=True)
    assert attncheck.check_attention(out, q, k, v, attn_mask=additive, enable_gqa=True).passed
    for alignment in ("top-left", "bottom-right"):
        out = sdpa(q, k, v, is_causal=True, causal_alignment=alignment, enable_gqa=True)
        assert attncheck.check_attention(out, q, k, v, is_causal=True, causal_alignment=alignment,
                                         enable_gqa=True).passed
    # Bottom-right output judged as top-left: the rows differ, attncheck says so.
    out = sdpa(q, k, v, is_causal=True, causal_alignment="bottom-right", enable_gqa=True)
    assert not attncheck.check_attention(out, q, k, v, is_causal=True, enable_gqa=True).passed
    padding = np.zeros((2, 1, 1, 9), dtype=bool)
    padding[0, ..., :4] = padding[1, ..., :9] = True
    out = sdpa(q, k, v, attn_mask=padding, enable_gqa=True)
    assert attncheck.check_attention(out, q, k, v, key_lengths=[4, 9], enable_gqa=True).passed


def test_fully_masked_row_must_be_zero_and_nan_there_is_reported():
    q, k, v = random_problem(np.float32, shape=(1, 2, 4, 8), S=5)
    mask = np.ones((4, 5), dtype=bool)
    mask[2] = False
    out = sdpa(q, k, v, attn_mask=mask)
    assert np.all(out[:, :, 2] == 0)
    assert attncheck.check_attention(out, q, k, v, attn_mask=mask).passed
    out[0, 1, 2, :] = np.nan
    report = attncheck.check_attention(out, q, k, v, attn_mask=mask)
    assert report.failure_count == 4
    assert {f.index for f in report.failures} == {(0, 1, 2, c) for c in range(4)}
    assert {f.reason for f in report.failures} == {"NaN in a fully masked row"}


def test_scale_is_a_multiplier():
    q, k, v = random_problem(np.float64)
    out = sdpa(q, k, v, scale=0.3)
    assert attncheck.check_attention(out, q, k, v, scale=0.3).passed
    assert not attncheck.check_attention(out, q, k, v).passed


def test_rows_samples_and_seed_replays():
    q, k, v = random_problem(np.float32, shape=(2, 4, 32, 8), S=16)
    out = sdpa(q, k, v)
    report = attncheck.check_attention(out, q, k, v, rows=10, seed=5)
    assert report.passed and report.rows_checked == 10 and report.rows_total == 256
    assert report.elements_total == out.size


def test_precision_refinements():
    q, k, v = random_problem(np.float16)
    out = sdpa(q, k, v)
    assert attncheck.check_attention(out, q, k, v, precision="fp16", exp_ulps=4, weights_in_storage=False).passed
    # An fp32 output for fp16 inputs: an fp16 kernel (compute fp32) whose output was not rounded.
    out32 = sdpa(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))
    widened = attncheck.check_attention(out32, q, k, v)
    assert widened.passed and widened.precision == "fp16"
    assert "finer than the inputs' float16" in widened.notes[0] and "note: out is float32" in str(widened)
    # Without the output's rounding the band is narrower than the fp16 profile's.
    rounded = attncheck.check_attention(out32, q, k, v, precision="fp16")
    assert rounded.notes == [] and widened.max_band_usage > rounded.max_band_usage


def test_an_fp32_kernel_whose_output_was_saved_as_float64_is_certified_as_fp32():
    q, k, v = random_problem(np.float32, S=64)
    out = sdpa(q, k, v).astype(np.float64)
    report = attncheck.check_attention(out, q, k, v)
    assert report.passed and report.precision == "fp32" and "widened" in report.notes[0]
    # An output coarser than the inputs is judged at the inputs' precision, its rounding an error.
    coarse = attncheck.check_attention(sdpa(q, k, v).astype(np.float16), q, k, v)
    assert coarse.precision == "fp32" and "coarser than the inputs' float32" in coarse.notes[0]


def test_report_str_and_json_round_trip():
    q, k, v = random_problem(np.float32)
    out = sdpa(q, k, v)
    out[0, 0, 0, 0] = np.inf
    out[0, 1, 0, 0] = np.nan
    out[1, 0, 0, 3] += 0.01
    report = attncheck.check_attention(out, q, k, v)
    text = str(report)
    assert text.startswith("attncheck: FAILED (fp32): 3 of 120 elements") and "rows certified" in text
    data = json.loads(report.to_json())  # strict JSON: no NaN or Infinity tokens
    assert data["passed"] is False and len(data["failures"]) == 3
    assert {f["reason"] for f in data["failures"]} == {"NaN", "Inf", "outside band"}
    again = attncheck.Report.from_json(report.to_json())
    assert again.to_json() == report.to_json()
    assert [f.index for f in again.failures] == [f.index for f in report.failures]
    assert math.isnan(next(f.got for f in again.failures if f.reason == "NaN"))
    passed = attncheck.check_attention(sdpa(q, k, v), q, k, v)
    assert attncheck.Report.from_json(passed.to_json()) == passed


ARGUMENT_ERRORS = [
    # (keyword changes, positional changes, error type, the argument the message must name)
    ({}, {"query": [[1.0]]}, TypeError, "query"),
    ({}, {"key": np.zeros((2, 3, 7, 8), dtype=np.int32)}, TypeError, "key"),
    ({}, {"value": np.zeros((2, 3, 7, 4), dtype=np.float64)}, TypeError, "value"),
    ({}, {"key": np.zeros((2, 3, 7, 6), dtype=np.float32)}, ValueError, "key"),
    ({}, {"value": np.zeros((2, 3, 6, 4), dtype=np.float32)}, ValueError, "value"),
    ({}, {"out": np.zeros((2, 3, 5, 5), dtype=np.float32)}, ValueError, "out"),
    ({}, {"query": np.zeros((1, 2, 3, 5, 8), dtype=np.float32)}, ValueError, "query: rank must be 2, 3 or 4"),
    ({}, {"query": np.zeros((8,), dtype=np.float32)}, ValueError, "query: rank must be 2, 3 or 4"),
    ({}, {"key": np.zeros((2, 1, 7, 8), dtype=np.float32), "value": np.zeros((2, 1, 7, 4), dtype=np.float32)},
     ValueError, "enable_gqa"),
    ({"enable_gqa": True}, {"key": np.zeros((2, 2, 7, 8), dtype=np.float32),
                            "value": np.zeros((2, 2, 7, 4), dtype=np.float32)}, ValueError, "key"),
    ({"attn_mask": np.ones((5, 6), dtype=bool)}, {}, ValueError, "attn_mask"),
    ({"attn_mask": np.ones((5, 7), dtype=np.int64)}, {}, TypeError, "attn_mask"),
    ({"attn_mask": np.full((5, 7), 0.1, dtype=np.float64)}, {}, ValueError, "attn_mask"),
    ({"attn_mask": np.full((5, 7), np.nan, dtype=np.float32)}, {}, ValueError, "attn_mask"),
    ({"is_causal": 1}, {}, TypeError, "is_causal"),
    ({"is_causal": True, "causal_alignment": "lower-right"}, {}, ValueError, "causal_alignment"),
    ({"scale": "0.5"}, {}, TypeError, "scale"),
    ({"scale": float("inf")}, {}, ValueError, "scale"),
    ({"key_lengths": [3]}, {}, ValueError, "key_lengths"),
    ({"key_lengths": [3, 8]}, {}, ValueError, "key_lengths"),
    ({"key_lengths": [3, -1]}, {}, ValueError, "key_lengths"),
    ({"key_lengths": 3}, {}, TypeError, "key_lengths"),
    ({"precision": "fp8"}, {}, ValueError, "precision"),
    ({"precision": "fp16"}, {}, ValueError, "query"),
    ({"exp_ulps": -1.0}, {}, ValueError, "exp_ulps"),
    ({"weights_in_storage": "yes"}, {}, TypeError, "weights_in_storage"),
    ({"query_in_storage": 1}, {}, TypeError, "query_in_storage"),
    ({}, {"value": np.zeros((2, 3, 7, 4), dtype=np.float16)}, TypeError, "value: dtype float16 differs from the key's"),
    ({"rows": 0}, {}, ValueError, "rows"),
    ({"rows": 2.5}, {}, TypeError, "rows"),
    ({"seed": -1}, {}, ValueError, "seed"),
]


@pytest.mark.parametrize("keywords,positional,error,argument", ARGUMENT_ERRORS)
def test_wrong_arguments_raise_naming_the_argument(keywords, positional, error, argument):
    q, k, v = random_problem(np.float32)
    args = {"out": sdpa(q, k, v), "query": q, "key": k, "value": v, **positional}
    with pytest.raises(error, match=argument):
        attncheck.check_attention(args["out"], args["query"], args["key"], args["value"], **keywords)


def test_keywords_after_the_tensors_only():
    q, k, v = random_problem(np.float32)
    with pytest.raises(TypeError):
        attncheck.check_attention(sdpa(q, k, v), q, k, v, None)


def test_two_tiers_are_reported_and_tier_picks_the_deciding_one():
    # Output rounded to bf16 by an fp32 kernel at 1024 keys: inside the certified fp32 band (a bf16
    # rounding is not a proof of a bug there), outside the statistical one.
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 8, 64)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 1024, 64)).astype(np.float32) for _ in range(2))
    out = torch.from_numpy(sdpa(q, k, v)).bfloat16().float().numpy()
    report = attncheck.check_attention(out, q, k, v)
    assert report.tier == "certified" and report.passed
    assert report.certified.passed and not report.statistical.passed
    assert report.statistical.failure_count > 0 and report.statistical.max_band_usage > 1
    assert report.alpha == 1e-9 and report.statistical_lambda > 6
    assert "statistical (alpha 1e-09) FAILED" in str(report)
    strict = attncheck.check_attention(out, q, k, v, tier="statistical")
    assert not strict.passed and strict.failure_count == report.statistical.failure_count
    worst = strict.worst
    assert worst.band == worst.statistical_band < worst.certified_band
    again = attncheck.Report.from_json(strict.to_json())
    assert again.statistical == strict.statistical and again.certified == strict.certified
    assert again.failures[0].statistical_band == worst.statistical_band
    # The correct kernel passes both tiers, and a looser alpha means a smaller lambda.
    good = attncheck.check_attention(sdpa(q, k, v), q, k, v, tier="statistical", alpha=1e-3)
    assert good.passed and good.certified.passed
    assert good.statistical_lambda < report.statistical_lambda


def test_declared_structure_narrows_the_band_and_a_tiled_kernel_passes_it():
    from tiled_reference import tiled_sdpa
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 2, 4, 32)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 300, 32)).astype(np.float32) for _ in range(2))
    out = tiled_sdpa(q, k, v, tile=16)
    plain = attncheck.check_attention(out, q, k, v)
    declared = attncheck.check_attention(out, q, k, v, key_tile=16, sum_chunk=16, splits=1)
    assert plain.passed and declared.passed and declared.statistical.passed
    assert declared.certified.max_band_usage > 5 * plain.certified.max_band_usage
    assert declared.structure == {"key_tile": 16, "sum_chunk": 16, "splits": 1}
    assert "kernel structure key_tile=16, sum_chunk=16, splits=1" in str(declared)


@pytest.mark.parametrize("keywords,error,match", [
    ({"tier": "strict"}, ValueError, "tier"),
    ({"alpha": 0}, ValueError, "alpha"),
    ({"alpha": 1.5}, ValueError, "alpha"),
    ({"key_tile": 0}, ValueError, "key_tile"),
    ({"key_tile": 1.5}, TypeError, "key_tile"),
    ({"sum_chunk": 4}, ValueError, "sum_chunk: needs key_tile"),
    ({"key_tile": 8, "sum_chunk": 16}, ValueError, "sum_chunk: must not exceed"),
    ({"key_tile": 8, "single_pass": True}, ValueError, "key_tile"),
    ({"ordered": True}, ValueError, "ordered: needs splits = 1"),
    ({"single_pass": "yes"}, TypeError, "single_pass"),
])
def test_wrong_tier_and_structure_arguments_name_the_argument(keywords, error, match):
    q, k, v = random_problem(np.float32)
    with pytest.raises(error, match=match):
        attncheck.check_attention(sdpa(q, k, v), q, k, v, **keywords)


def test_an_fp16_accumulator_is_declared_with_accumulator():
    # ggml's decode path: P·V accumulated in fp16, the sum in fp32, fp32 inputs and output.
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 1, 4, 64)).astype(np.float32)
    k, v = (rng.standard_normal((1, 1, 512, 64)).astype(np.float32) for _ in range(2))
    s = (q @ np.swapaxes(k, -1, -2)) * np.float32(1 / 8)
    p = np.exp(s - s.max(-1, keepdims=True))
    acc = np.zeros((1, 1, 4, 64), dtype=np.float16)
    for j in range(512):
        acc = (acc.astype(np.float32) + p[..., j:j + 1] * v[:, :, j, :][:, :, None, :]).astype(np.float16)
    out = (acc.astype(np.float32) / p.sum(-1, keepdims=True)).astype(np.float32)
    assert not attncheck.check_attention(out, q, k, v).passed
    declared = attncheck.check_attention(out, q, k, v, accumulator="fp16", single_pass=True, splits=1)
    assert declared.passed and declared.statistical.passed
    with pytest.raises(ValueError, match="accumulator"):
        attncheck.check_attention(out, q, k, v, accumulator="fp8")
    # Over enough keys an fp16 accumulator has no finite worst case: said, not passed silently.
    assert declared.unbounded_elements == 0
    undeclared = attncheck.check_attention(out, q, k, v, accumulator="fp16")  # any tiling: 3k roundings
    assert undeclared.unbounded_elements == 4 * 64 and "no finite band" in str(undeclared)


def test_an_fp32_query_reads_an_fp16_cache_as_ggml_does():
    # llama.cpp's KV cache: fp32 query, fp16 key and value; ggml converts the query to fp16 for the
    # dot products and keeps the output in fp32. Certified with each tensor in its own format.
    rng = np.random.default_rng(6)
    q = rng.standard_normal((1, 2, 4, 64)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 256, 64)).astype(np.float16) for _ in range(2))
    exact_inputs = sdpa(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    report = attncheck.check_attention(exact_inputs.astype(np.float32), q, k, v)
    assert report.passed and report.precision == "fp32"
    assert "key and value are float16, the query float32" in report.notes[0]
    ggml = sdpa(q.astype(np.float16).astype(np.float32), k.astype(np.float32), v.astype(np.float32))
    assert not attncheck.check_attention(ggml, q, k, v, tier="statistical").passed  # the conversion is an error
    declared = attncheck.check_attention(ggml, q, k, v, query_in_storage=True, tier="statistical")
    assert declared.passed and declared.certified.passed


# The log-sum-exp beside the output (check_attention's lse=).

def lse_problem(seed=3):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 4, 9, 16)).astype(np.float32)  # GQA: 4 query heads over 2 kv heads
    k = rng.standard_normal((2, 2, 40, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, 40, 8)).astype(np.float32)
    mask = rng.random((9, 40)) < 0.8
    return q, k, v, mask


def test_lse_of_a_tiled_kernel_passes_with_masks_causal_and_gqa():
    q, k, v, mask = lse_problem()
    out, lse = tiled_sdpa(q[..., :3, :], k[..., :2, :], v[..., :2, :], is_causal=True, causal_alignment="bottom-right",
                          enable_gqa=True, return_lse=True)  # L = 3 > S = 2: query 0 sees no key
    report = attncheck.check_attention(out, q[..., :3, :], k[..., :2, :], v[..., :2, :], is_causal=True,
                                       causal_alignment="bottom-right", enable_gqa=True, lse=lse)
    assert report.passed and report.lse.passed, str(report)
    assert np.isneginf(lse[:, :, 0]).all()
    out, lse = tiled_sdpa(q, k, v, attn_mask=mask, enable_gqa=True, return_lse=True)
    report = attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=lse, key_tile=16,
                                       sum_chunk=16, splits=1)
    assert report.passed, str(report)
    assert report.lse.rows_checked == report.lse.rows_total == 2 * 4 * 9
    assert 0 < report.lse.max_band_usage < 1
    assert "lse: passed" in str(report)
    assert attncheck.Report.from_json(report.to_json()) == report


def test_lse_bugs_fail_naming_the_row():
    q, k, v, mask = lse_problem()
    out, lse = tiled_sdpa(q, k, v, attn_mask=mask, enable_gqa=True, return_lse=True)
    # log2 units returned as natural (PyTorch #181645): caught; declared with lse_base=2 it passes.
    log2 = (lse / np.float32(np.log(2))).astype(np.float32)
    assert not attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=log2).passed
    assert attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=log2, lse_base=2).passed
    # The running sum not rescaled: the output and the LSE both fail.
    _, bad_lse = tiled_sdpa(q, k, v, attn_mask=mask, enable_gqa=True, rescale_sum=False, return_lse=True)
    assert not attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=bad_lse).lse.passed
    # One row's LSE off by 1e-4: named in lse's own rank, out untouched.
    moved = lse.copy()
    moved[1, 3, 5] += 1e-4
    report = attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=moved)
    assert not report.passed and report.failure_count == 0
    assert report.lse.failure_count == 1 and report.lse.worst.index == (1, 3, 5)
    assert report.lse.worst.reason == "outside band"
    assert "out passed, the LSE failed" in str(report) and "lse: FAILED: 1 of 72 rows" in str(report)
    with pytest.raises(AssertionError, match=r"(?s)LSE is not within its certified band.*index \(1, 3, 5\)"):
        attncheck.assert_attention_close(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=moved)


def test_rows_without_keys_hold_the_declared_infinity():
    q, k, v, _ = lse_problem()
    mask = np.ones((9, 40), dtype=bool)
    mask[4] = False  # query 4 sees no key
    out, lse = tiled_sdpa(q, k, v, attn_mask=mask, enable_gqa=True, return_lse=True)
    assert np.isneginf(lse[..., 4]).all()
    assert attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=lse).passed
    flash = np.where(np.isneginf(lse), np.inf, lse).astype(np.float32)  # FlashAttention 2 writes +inf
    assert attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=flash,
                                     masked_lse="+inf").passed
    report = attncheck.check_attention(out, q, k, v, attn_mask=mask, enable_gqa=True, lse=flash)
    assert report.lse.failure_count == 2 * 4 and report.lse.worst.reason == "masked row LSE not -inf"


def test_torch_logsumexp_is_a_certified_client():
    q, k, v, mask = (torch.from_numpy(x) for x in lse_problem())
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(16)
    out = torch.softmax(scores, dim=-1) @ v
    report = attncheck.check_attention(out, q, k, v, lse=torch.logsumexp(scores, dim=-1))
    assert report.passed, str(report)
    assert report.lse.precision == "fp32"


def test_lse_argument_errors_name_the_argument():
    q, k, v, _ = lse_problem()
    out, lse = tiled_sdpa(q, k, v, enable_gqa=True, return_lse=True)
    with pytest.raises(ValueError, match=r"lse: expected shape \(2, 4, 9\)"):
        attncheck.check_attention(out, q, k, v, enable_gqa=True, lse=lse[..., :4])
    with pytest.raises(ValueError, match="lse_base"):
        attncheck.check_attention(out, q, k, v, enable_gqa=True, lse=lse, lse_base=10)
    with pytest.raises(ValueError, match="masked_lse"):
        attncheck.check_attention(out, q, k, v, enable_gqa=True, lse=lse, masked_lse="nan")


def test_a_failure_where_the_exact_value_is_zero_reports_no_ulps():
    # V's column 0 is zero: the exact output there is 0, and ulps of 0 mean nothing.
    q, k, v = random_problem(np.float32)
    v[..., 0] = 0
    out = sdpa(q, k, v)
    out[0, 0, 0, 0] = np.float32(1e-3)
    report = attncheck.check_attention(out, q, k, v)
    assert not report.passed
    text = report.worst.describe()
    assert "exact 0, |error| 0.001" in text and "ulps" not in text, text


class _DeviceTensor:
    """A stand-in for a torch tensor on a GPU (this machine has none): the note needs only .device."""

    __module__ = "torch.cuda"

    class device:  # noqa: N801 - torch.device's face: .type and str()
        type = "cuda"

        def __str__(self):
            return "cuda:0"

    def __init__(self, array):
        self.device, self.dtype, self.array = _DeviceTensor.device(), array.dtype, array

    def detach(self):
        return self


def test_tensors_off_the_cpu_are_named_in_the_notes():
    from attncheck._inputs import device_note

    q, _, _ = random_problem(np.float32)
    assert device_note(query=q, key=torch.from_numpy(q)) == []
    note = device_note(query=_DeviceTensor(q), out=q)
    assert len(note) == 1 and note[0].startswith("query (cuda:0) copied to the host: certified there")
