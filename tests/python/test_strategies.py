"""attncheck.strategies: a correct kernel passes every draw, the edges are drawn, failures shrink small."""

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings

import attncheck
from attncheck import strategies
from sdpa_reference import sdpa
from tiled_reference import forgets_to_rescale_the_sum


def run_reference(inputs, **overrides):
    """The numpy reference kernel on a draw (key_lengths folded into a boolean mask)."""
    kwargs = {**inputs.sdpa_kwargs(), **overrides}
    if inputs.key_lengths is not None:
        S = inputs.key.shape[2]
        pad = (np.arange(S)[None, :] < np.array(inputs.key_lengths)[:, None]).reshape(-1, 1, 1, S)
        mask = kwargs.get("attn_mask")
        kwargs["attn_mask"] = pad if mask is None else mask & pad if mask.dtype == bool else np.where(pad, mask, -np.inf)
    return sdpa(inputs.query, inputs.key, inputs.value, **kwargs)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_a_correct_kernel_passes_every_draw(dtype):
    @given(strategies.attention_inputs(dtype=dtype, key_lengths=True))
    def check(inputs):
        attncheck.assert_attention_close(run_reference(inputs), inputs.query, inputs.key, inputs.value,
                                         **inputs.kwargs())
    check()


def fully_masked(inputs):
    mask = inputs.attn_mask
    if mask is None:
        return False
    hidden = ~mask if mask.dtype == bool else np.isneginf(mask)
    return bool(np.all(hidden, axis=-1).any())


EDGES = {
    "L = 1": lambda i: i.query.shape[2] == 1,
    "S != L": lambda i: i.key.shape[2] != i.query.shape[2],
    "GQA group": lambda i: i.enable_gqa and i.query.shape[1] > i.key.shape[1],
    "bottom-right causal": lambda i: i.is_causal and i.causal_alignment == "bottom-right",
    "-inf in an additive mask": lambda i: i.attn_mask is not None and np.isneginf(i.attn_mask).any(),
    "single visible key": lambda i: i.attn_mask is not None and i.attn_mask.dtype == bool
                                    and i.key.shape[2] > 1 and (i.attn_mask.sum(axis=-1) == 1).any(),
    "fully masked row": fully_masked,
    "-0.0": lambda i: bool(np.any((i.query == 0) & np.signbit(i.query))),
    "equal scores": lambda i: i.scenario == "equal_scores" and i.key.shape[2] > 1,
    "huge score gaps": lambda i: i.scenario == "huge_gap",
    "scores near overflow": lambda i: i.scenario == "near_overflow"
                                      and np.abs(i.query.astype(np.float64)).max() > 2.0 ** 50,
    "subnormal values": lambda i: i.scenario == "tiny" and np.any((i.value != 0) & (np.abs(i.value) < np.finfo(np.float32).tiny)),
}


def test_every_edge_is_drawn():
    seen = set()

    @settings(max_examples=400, phases=[Phase.generate])  # no shrinking: only which edges appear
    @given(strategies.attention_inputs(dtype="float32"))
    def collect(inputs):
        seen.update(name for name, edge in EDGES.items() if edge(inputs))

    collect()
    assert seen == set(EDGES)


def wrong_scale_kernel(query, key, value, **kwargs):
    """Scales by 1/√Ev instead of 1/√E: a one-line bug."""
    kwargs.setdefault("scale", 1 / np.sqrt(value.shape[-1]))
    return sdpa(query, key, value, **kwargs)


def nan_in_masked_rows_kernel(query, key, value, attn_mask=None, **kwargs):
    """Softmax over a row of -inf gives NaN (PyTorch before 2.5)."""
    out = sdpa(query, key, value, attn_mask=attn_mask, **kwargs)
    scores_visible = np.ones(out.shape[:-1] + (key.shape[-2],), dtype=bool)
    if attn_mask is not None:
        scores_visible &= attn_mask if attn_mask.dtype == bool else ~np.isneginf(attn_mask)
    out[~scores_visible.any(axis=-1)] = np.nan
    return out


def fails(kernel):
    def condition(inputs):
        out = kernel(inputs.query, inputs.key, inputs.value, **inputs.sdpa_kwargs())
        return not attncheck.check_attention(out, inputs.query, inputs.key, inputs.value, **inputs.kwargs()).passed
    return condition


def test_a_wrong_scale_shrinks_to_one_row_of_two_keys():
    found = find(strategies.attention_inputs(dtype="float32", causal=False, gqa=False),
                 fails(wrong_scale_kernel), settings=settings(database=None, derandomize=True, max_examples=500))
    B, H, L, E = found.query.shape
    assert (B, H, L) == (1, 1, 1) and found.key.shape[2] == 2 and found.value.shape[-1] != E
    assert found.attn_mask is None and found.scale is None


def test_nan_in_a_masked_row_shrinks_to_one_query_and_one_key():
    found = find(strategies.attention_inputs(dtype="float32", causal=False, gqa=False),
                 fails(nan_in_masked_rows_kernel), settings=settings(database=None, derandomize=True,
                                                                     max_examples=500))
    assert found.query.shape[:3] == (1, 1, 1) and found.key.shape[2] == 1
    assert found.attn_mask.size == 1 and found.attn_mask.dtype == bool and not found.attn_mask.any()


def test_kwargs_and_sdpa_kwargs():
    inputs = strategies.AttentionInputs(np.zeros((1, 2, 3, 4)), np.zeros((1, 1, 5, 4)), np.zeros((1, 1, 5, 4)),
                                        is_causal=True, causal_alignment="bottom-right", enable_gqa=True,
                                        key_lengths=[2])
    assert inputs.sdpa_kwargs() == {"is_causal": True, "causal_alignment": "bottom-right", "enable_gqa": True}
    assert inputs.kwargs()["key_lengths"] == [2] and inputs.kwargs()["attn_mask"] is None
    assert strategies.AttentionInputs(*inputs.__dict__.values()).sdpa_kwargs() == inputs.sdpa_kwargs()
    assert "query=float64[1, 2, 3, 4]" in repr(inputs)
    assert inputs.to_torch().query.shape == (1, 2, 3, 4) and inputs.to_torch().attn_mask is None


def test_default_lengths_cross_tiles_often_and_shrink_to_just_past_one():
    """Kernels tile keys by 16 to 128: the default draws lengths on both sides of those tiles in a
    good share of cases, and a failure that needs more than 16 keys shrinks to 17 of them."""
    lengths = []

    @settings(max_examples=300, phases=[Phase.generate], derandomize=True, database=None)
    @given(strategies.attention_inputs(dtype="float32"))
    def collect(inputs):
        lengths.append(inputs.key.shape[2])

    collect()
    assert sum(S > 16 for S in lengths) >= 0.3 * len(lengths), lengths
    assert {17, 33, 65, 129} <= set(lengths) and max(lengths) <= 129
    found = find(strategies.attention_inputs(dtype="float32"), lambda i: i.key.shape[2] > 16,
                 settings=settings(database=None, derandomize=True, max_examples=500))
    assert found.key.shape[2] == 17 and found.query.shape[0] == 1


def test_a_tile_16_kernel_that_forgets_to_rescale_the_sum_is_caught_at_the_defaults():
    found = find(strategies.attention_inputs(dtype="float32"), fails(forgets_to_rescale_the_sum),
                 settings=settings(database=None, derandomize=True, max_examples=100))
    assert 16 < found.key.shape[2] <= 65 and found.query.shape[0] == 1  # a few tiles, one batch item


def test_dense_recipes_fill_large_arrays_and_query_key_value_differ():
    recipe = strategies.Recipe(dense_above=64, max_len=129, mask_kinds=("none",), scenarios=("normal",),
                               gqa=False)
    found = find(strategies.from_recipe(recipe), lambda i: i.key.shape[2] >= 65 and i.key.shape[-1] >= 2,
                 settings=settings(database=None, derandomize=True, max_examples=500))
    key = found.key[0, 0]
    assert len(np.unique(key)) > key.size // 2  # not one background value with a few others
    assert not np.array_equal(found.key[0, 0], found.value[0, 0, :, :key.shape[1]])


@pytest.mark.parametrize("masks,kinds", [(False, set()), ("bool", {"bool"}), ("additive", {"float32"}),
                                         ("key_padding", {"bool"}), (True, {"bool", "float32"})])
def test_masks_draws_the_kinds_it_names(masks, kinds):
    seen = set()

    @settings(max_examples=150, phases=[Phase.generate], derandomize=True, database=None)
    @given(strategies.attention_inputs(dtype="float32", masks=masks, max_len=8))
    def collect(inputs):
        if inputs.attn_mask is not None:
            seen.add(inputs.attn_mask.dtype.name)
            if masks == "key_padding":
                assert inputs.attn_mask.shape[1:3] == (1, 1)

    collect()
    assert seen == kinds


@pytest.mark.parametrize("arguments,name", [({"dtype": "int8"}, "dtype"), ({"causal": "left"}, "causal"),
                                            ({"max_len": 0}, "max_len"), ({"masks": "boolean"}, "masks"),
                                            ({"masks": 1}, "masks"), ({"masks": None}, "masks"),
                                            ({"causal": 1}, "causal")])
def test_wrong_strategy_arguments(arguments, name):
    with pytest.raises(ValueError, match=name):
        strategies.attention_inputs(**arguments)


def test_windows_are_drawn_and_a_kernel_without_them_shrinks_to_three_positions():
    seen = set()

    @settings(database=None, derandomize=True, max_examples=300)
    @given(strategies.attention_inputs(dtype="float32", windows=True, key_lengths=True))
    def check(inputs):
        left, right = inputs.window_size
        seen.add(("left bounded" if left >= 0 else "left open", "right bounded" if right >= 0 else "right open"))
        assert ("window_size" in inputs.sdpa_kwargs()) == ((left, right) != (-1, -1))
        attncheck.assert_attention_close(run_reference(inputs), inputs.query, inputs.key, inputs.value,
                                         **inputs.kwargs())

    check()
    assert len(seen) == 4, seen

    def without_window(inputs):
        out = run_reference(inputs, window_size=(-1, -1))
        return not attncheck.check_attention(out, inputs.query, inputs.key, inputs.value, **inputs.kwargs()).passed

    found = find(strategies.attention_inputs(dtype="float32", windows=True, causal=False, gqa=False, masks=False),
                 without_window, settings=settings(database=None, derandomize=True, max_examples=500))
    # Two keys and one query (a key outside the band), or one key and two queries (a row above it).
    assert found.query.shape[:2] == (1, 1) and found.query.shape[2] + found.key.shape[2] == 3, found
