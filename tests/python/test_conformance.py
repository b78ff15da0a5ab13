"""attncheck.conformance: a correct kernel passes every family; each family catches its bug; kwargs a
function lacks make a family skipped, never passed."""

import numpy as np
import pytest
import torch

import attncheck
FAMILIES = attncheck.conformance.families
from sdpa_reference import sdpa
from tiled_reference import forgets_to_rescale_the_sum, rescales_correctly

CASES = 15  # per family: enough for each bug below, small enough for the 2-minute python budget


@pytest.mark.parametrize("precision", ["fp64", "fp32", "fp16"])
def test_a_correct_kernel_passes_every_family(precision):
    table = attncheck.conformance(sdpa, precision=precision, cases=CASES)
    assert list(table) == list(FAMILIES)
    assert table.passed == list(FAMILIES) and bool(table), str(table)


def test_bfloat16_tensors():
    def torch_kernel(query, key, value, **kwargs):
        numpy_kwargs = {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        out = sdpa(query.double().numpy(), key.double().numpy(), value.double().numpy(), **numpy_kwargs)
        return torch.from_numpy(out).bfloat16()

    table = attncheck.conformance(torch_kernel, precision="bf16", cases=5, array_type="torch",
                                  families=["bool_mask", "gqa_mapping"])
    assert table.passed == ["bool_mask", "gqa_mapping"], str(table)


def gqa_interleaved(query, key, value, enable_gqa=False, **kwargs):
    """Query head h reads kv head h % Hkv instead of h // G."""
    if enable_gqa and key.shape[1] != query.shape[1]:
        group = query.shape[1] // key.shape[1]
        key, value = np.tile(key, (1, group, 1, 1)), np.tile(value, (1, group, 1, 1))
    return sdpa(query, key, value, **kwargs)


def bottom_right_as_top_left(query, key, value, causal_alignment="top-left", **kwargs):
    return sdpa(query, key, value, **kwargs)


def no_max_shift(query, key, value, **kwargs):
    with np.errstate(all="ignore"):
        scores = (query @ np.swapaxes(key, -1, -2)) * query.dtype.type(1 / np.sqrt(query.shape[-1]))
        weights = np.exp(scores)
        return ((weights / weights.sum(-1, keepdims=True)) @ value).astype(query.dtype)


def additive_mask_ignored(query, key, value, attn_mask=None, **kwargs):
    return sdpa(query, key, value, attn_mask=attn_mask if attn_mask is None or attn_mask.dtype == bool else None,
                **kwargs)


def window_left_end_wide(query, key, value, window_size=(-1, -1), **kwargs):
    """The window's left end one key too far (j >= i + S - L - left - 1)."""
    left, right = window_size
    return sdpa(query, key, value, window_size=(left + 1 if left >= 0 else left, right), **kwargs)


def window_centred_top_left(query, key, value, window_size=(-1, -1), **kwargs):
    """The window centred on query i, not on i + S - L (window_size=(S - 1, 0) then differs from
    bottom-right causal: FlashAttention #1133's kind)."""
    L, S = query.shape[-2], key.shape[-2]
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    left, right = window_size
    keep = ((j >= i - left) | (left < 0)) & ((j <= i + right) | (right < 0))
    return sdpa(query, key, value, attn_mask=keep, **kwargs)


def window_ignored(query, key, value, window_size=(-1, -1), **kwargs):
    return sdpa(query, key, value, **kwargs)


def alibi_sign_lost(query, key, value, alibi_slopes=None, **kwargs):
    return sdpa(query, key, value, alibi_slopes=None if alibi_slopes is None else -alibi_slopes, **kwargs)


def softcap_as_s_tanh_s(query, key, value, softcap=0.0, **kwargs):
    """FlashAttention #2396: s·tanh(s) for c·tanh(s/c) (a mask is added after, as the cap's is)."""
    mask = kwargs.pop("attn_mask", None)
    s = (query @ np.swapaxes(key, -1, -2)) * query.dtype.type(1 / np.sqrt(query.shape[-1]))
    s = s * np.tanh(s)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((w / w.sum(axis=-1, keepdims=True)) @ value).astype(query.dtype)


def sink_left_out(query, key, value, sinks=None, **kwargs):
    return sdpa(query, key, value, **kwargs)


@pytest.mark.parametrize("kernel,family,reason", [
    (alibi_sign_lost, "alibi", "outside band"),
    (softcap_as_s_tanh_s, "softcap", "outside band"),
    (sink_left_out, "sinks", ""),
    (window_left_end_wide, "sliding_window", "outside band"),
    (window_centred_top_left, "sliding_window", ""),
    (window_ignored, "sliding_window", ""),
    (gqa_interleaved, "gqa_mapping", "outside band"),
    (bottom_right_as_top_left, "causal_bottom_right", "outside band"),
    (no_max_shift, "huge_scores", "NaN"),
    (additive_mask_ignored, "additive_neg_inf_mask", "outside band"),
])
def test_each_family_catches_its_bug_with_a_small_counterexample(kernel, family, reason):
    table = attncheck.conformance(kernel, precision="fp32", cases=CASES, families=[family])
    result = table[family]
    assert result.status == "failed" and not table
    assert reason in result.reason and result.report is not None and not result.report.passed
    assert result.counterexample.query.shape[0] == 1  # shrunk: one batch item
    assert result.counterexample.query.shape[2] <= 2 and result.counterexample.key.shape[2] <= 2
    assert family in str(table) and "counterexample: AttentionInputs(" in str(table)


def test_keywords_a_function_lacks_are_skipped_not_passed():
    def plain(query, key, value, attn_mask=None):
        return sdpa(query, key, value, attn_mask=attn_mask)

    table = attncheck.conformance(plain, cases=5)
    assert table.skipped == ["causal_top_left", "causal_bottom_right", "gqa_mapping", "tile_boundaries_causal",
                             "sliding_window", "alibi", "softcap", "sinks"]
    assert str(table[("gqa_mapping")]) == "skipped (fn lacks enable_gqa)"
    assert not set(table.skipped) & set(table.passed)
    assert bool(table) and table.failed == []


def test_a_function_that_raises_fails_with_the_exception():
    def broken(query, key, value, **kwargs):
        raise RuntimeError("kernel exploded")

    table = attncheck.conformance(broken, cases=5, families=["single_key"])
    assert table["single_key"].status == "failed"
    assert table["single_key"].reason == "fn raised RuntimeError: kernel exploded"


@pytest.mark.parametrize("arguments,error,name", [
    ({"precision": "fp8"}, ValueError, "precision"), ({"precision": "bf16"}, ValueError, "precision"),
    ({"array_type": "jax"}, ValueError, "array_type"), ({"families": ["nope"]}, ValueError, "families"),
    ({"max_len": 0}, ValueError, "max_len"), ({"max_len": 8.5}, ValueError, "max_len"),
])
def test_wrong_arguments(arguments, error, name):
    with pytest.raises(error, match=name):
        attncheck.conformance(sdpa, **arguments)


TILE_FAMILIES = ["tile_boundaries", "tile_boundaries_causal"]


def test_a_tile_16_kernel_that_forgets_to_rescale_the_sum_fails_at_the_defaults():
    """The bug needs a second tile whose keys raise a row's maximum: more than 16 keys, which only the
    tile families draw; every other family passes it."""
    table = attncheck.conformance(forgets_to_rescale_the_sum)
    assert table.failed == TILE_FAMILIES and not table, str(table)
    for family in TILE_FAMILIES:
        result = table[family]
        assert "outside band" in result.reason and not result.report.passed
        assert result.counterexample.key.shape[2] > 16  # it cannot show within one tile
        assert result.counterexample.query.shape[:2] == (1, 1)


def test_the_same_kernel_rescaling_correctly_passes_the_tile_families():
    table = attncheck.conformance(rescales_correctly, families=TILE_FAMILIES)
    assert table.passed == TILE_FAMILIES, str(table)


def test_max_len_bounds_the_tile_families():
    """Up to 16 keys the forgotten rescale never shows: max_len=16 keeps every case within one tile."""
    table = attncheck.conformance(forgets_to_rescale_the_sum, families=TILE_FAMILIES, cases=60, max_len=16)
    assert table.passed == TILE_FAMILIES, str(table)
    assert not attncheck.conformance(forgets_to_rescale_the_sum, families=["tile_boundaries"], cases=60,
                                     max_len=65)
