"""Hypothesis strategies for attention inputs, edge-biased like the C++ generators.

    @given(attncheck.strategies.attention_inputs(dtype="float32"))
    def test_my_kernel(inputs):
        out = my_kernel(inputs.query, inputs.key, inputs.value, **inputs.sdpa_kwargs())
        attncheck.assert_attention_close(out, inputs.query, inputs.key, inputs.value, **inputs.kwargs())

Drawn edges: L = 1, S != L, fully masked rows, a single visible key, equal scores, huge score
gaps (every weight but one underflows), scores near the dtype's overflow, tiny (subnormal) values,
-0.0, GQA groups, both causal alignments, masks broadcast from [L, S], [B, 1, L, S], [1, Hq, L, S],
[B, 1, 1, S] (key padding), and lengths on both sides of the tile sizes kernels use
(TILE_BOUNDARIES: 15-17, 31-33, ..., up to max_len). Everything shrinks towards one batch item, one
head, short sequences, no mask, the "normal" value scenario and zeros, so a counterexample is small.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# Value scenarios, simplest first (Hypothesis shrinks sampled_from towards the first).
SCENARIOS = ("normal", "equal_scores", "huge_gap", "near_overflow", "tiny")
MASK_KINDS = ("none", "bool", "additive", "key_padding")
ALIGNMENTS = ("top-left", "bottom-right")
# Sequence lengths on both sides of the key and query tiles kernels use (16, 32, 64, 128, 256, and
# one past 1024): a kernel whose online softmax goes wrong only from its second tile on is wrong at
# one of these and right below all of them. Simplest first, so a length shrinks towards 1.
TILE_BOUNDARIES = (1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1025)
# masks= of attention_inputs -> the mask kinds drawn.
_MASKS = {False: ("none",), True: MASK_KINDS, "bool": ("none", "bool"), "additive": ("none", "additive"),
          "key_padding": ("none", "key_padding")}


@dataclasses.dataclass
class AttentionInputs:
    """One drawn SDPA call: numpy query [B, Hq, L, E], key [B, Hkv, S, E], value [B, Hkv, S, Ev]."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    attn_mask: np.ndarray | None = None
    is_causal: bool = False
    causal_alignment: str = "top-left"
    scale: float | None = None
    enable_gqa: bool = False
    key_lengths: list | None = None
    scenario: str = "normal"
    dout: np.ndarray | None = None  #: an upstream gradient [B, Hq, L, Ev] (drawn with grads=True)
    window_size: tuple = (-1, -1)  #: FlashAttention's sliding window (left, right); -1 unbounded
    alibi_slopes: np.ndarray | None = None  #: FlashAttention's ALiBi, [Hq] float32 slopes
    softcap: float = 0.0  #: FlashAttention's logit softcap c (0 off)
    sinks: np.ndarray | None = None  #: attention sinks, [Hq] float32 logits

    def kwargs(self) -> dict:
        """The keyword arguments of check_attention / assert_attention_close for this call."""
        return {"attn_mask": self.attn_mask, "is_causal": self.is_causal, "causal_alignment": self.causal_alignment,
                "scale": self.scale, "enable_gqa": self.enable_gqa, "key_lengths": self.key_lengths,
                "window_size": tuple(self.window_size), **self._feature_kwargs()}

    def _feature_kwargs(self) -> dict:
        """alibi_slopes, softcap and sinks, each only when drawn."""
        out = {}
        if self.alibi_slopes is not None:
            out["alibi_slopes"] = self.alibi_slopes
        if self.softcap:
            out["softcap"] = self.softcap
        if self.sinks is not None:
            out["sinks"] = self.sinks
        return out

    def sdpa_kwargs(self) -> dict:
        """The keyword arguments of the kernel under test: those of scaled_dot_product_attention
        that differ from their defaults (attn_mask, is_causal, scale, enable_gqa), and
        causal_alignment="bottom-right", window_size, alibi_slopes, softcap and sinks when drawn.
        key_lengths is never included."""
        out = {}
        if self.attn_mask is not None:
            out["attn_mask"] = self.attn_mask
        if self.is_causal:
            out["is_causal"] = True
            if self.causal_alignment != "top-left":
                out["causal_alignment"] = self.causal_alignment
        if self.scale is not None:
            out["scale"] = self.scale
        if self.enable_gqa:
            out["enable_gqa"] = True
        if tuple(self.window_size) != (-1, -1):
            out["window_size"] = tuple(self.window_size)
        out.update(self._feature_kwargs())
        return out

    def to_torch(self) -> "AttentionInputs":
        """The same call with CPU torch tensors (torch.from_numpy: the values are shared, not copied)."""
        import torch  # only here: the strategies need numpy alone

        def convert(x):
            return None if x is None else torch.from_numpy(np.ascontiguousarray(x))

        return dataclasses.replace(self, query=convert(self.query), key=convert(self.key), value=convert(self.value),
                                   attn_mask=convert(self.attn_mask), dout=convert(self.dout))

    def __repr__(self) -> str:
        mask = "None" if self.attn_mask is None else f"{self.attn_mask.dtype.name}{list(self.attn_mask.shape)}"
        return (f"AttentionInputs(query={self.query.dtype.name}{list(self.query.shape)}, key={list(self.key.shape)}, "
                f"value={list(self.value.shape)}, attn_mask={mask}, is_causal={self.is_causal}, "
                f"causal_alignment={self.causal_alignment!r}, scale={self.scale}, enable_gqa={self.enable_gqa}, "
                f"key_lengths={self.key_lengths}, scenario={self.scenario!r}, window_size={tuple(self.window_size)}, "
                f"alibi_slopes={None if self.alibi_slopes is None else self.alibi_slopes.tolist()}, "
                f"softcap={self.softcap}, sinks={None if self.sinks is None else self.sinks.tolist()})\n"
                f"  query={self.query.tolist()}\n  key={self.key.tolist()}\n  value={self.value.tolist()}\n"
                f"  attn_mask={None if self.attn_mask is None else self.attn_mask.tolist()}"
                + ("" if self.dout is None else f"\n  dout={np.asarray(self.dout).tolist()}"))


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What a draw may contain (attention_inputs' arguments; the conformance families narrow it)."""

    dtype: str = "float32"
    max_batch: int = 2
    max_heads: int = 4
    max_len: int = 16
    max_dim: int = 8
    mask_kinds: tuple = MASK_KINDS
    alignments: tuple = ALIGNMENTS  # () for no causal masking
    causal_only: bool = False  # every draw causal
    gqa: bool = True
    gqa_only: bool = False  # every draw has Hq = G·Hkv with G >= 2
    scenarios: tuple = SCENARIOS
    key_lengths: bool = False
    scales: bool = True
    masked_rows: str = "maybe"  # "maybe", "never" (every row keeps a key) or "always" (one row has none)
    single_key: bool = False  # S = 1
    cross: bool = False  # L != S and E != Ev
    single_visible_key: bool = False  # some row of the mask keeps exactly one key
    tile_lengths: bool = True  # L and S also drawn from TILE_BOUNDARIES (those <= max_len)
    dense_above: int | None = None  # arrays of more elements are filled densely from a drawn seed
    grads: bool = False  # also draw an upstream gradient dout
    windows: bool = False  # also draw a sliding window (FlashAttention's window_size)
    windows_only: bool = False  # every draw has a window with at least one side bounded
    alibi: bool = False  # every draw has ALiBi slopes ([Hq] float32)
    softcap: bool = False  # every draw has a softcap (1, 5 or 30)
    sinks: bool = False  # every draw has sinks ([Hq] float32 logits)


def _exponent_range(dtype: np.dtype) -> tuple:
    info = np.finfo(dtype)
    return int(info.minexp), int(info.maxexp) - 1  # emin, emax of the normal range


_PALETTE = (0.0, 1.0, -1.0, 0.5, -0.0, -2.0, 0.75)


def _values(draw, recipe, dtype, shape, stream):
    """Edge-biased values in [-2, 2]: -0.0, exact small values, subnormal-free floats of the dtype.
    Large arrays are dense: each element from the palette or uniform in [-2, 2], by a drawn seed
    (and `stream`, so that query, key and value differ when their seeds shrink to the same one)."""
    # Hypothesis fills a large array sparsely over one background value, and a multi-tile row of
    # one repeated key never moves the running maximum: large arrays are drawn densely instead.
    if recipe.dense_above is not None and math.prod(shape) > recipe.dense_above:
        rng = np.random.default_rng([draw(st.integers(0, 2**32 - 1)), stream])
        uniform = rng.uniform(-2, 2, size=shape)
        palette = rng.choice(np.array(_PALETTE), size=shape)
        return np.where(rng.random(size=shape) < 0.25, palette, uniform).astype(dtype)
    width = dtype.itemsize * 8
    elements = st.one_of(st.sampled_from(_PALETTE), st.floats(-2, 2, width=width, allow_subnormal=False))
    return draw(hnp.arrays(dtype, shape, elements=elements))


def _length(draw, recipe, first=1):
    """A sequence length in [1, max_len]: `first` (simplest), any, or a tile boundary (the last
    choice, so that a length shrinks by the first two as it did before tile boundaries were drawn)."""
    choices = [st.just(first), st.integers(1, recipe.max_len)]
    if recipe.tile_lengths:
        choices.append(st.sampled_from([n for n in TILE_BOUNDARIES if n <= recipe.max_len]))
    return draw(st.one_of(*choices))


def _apply_scenario(scenario, dtype, q, k, v, E):
    """Exact power-of-two rescalings (and key copies) that put the scores where the scenario says."""
    emin, emax = _exponent_range(dtype)
    with np.errstate(over="ignore", under="ignore"):
        if scenario == "equal_scores":  # every key equal to the first: each row's scores tie
            k[..., :, :] = k[..., :1, :]
        elif scenario == "huge_gap":  # score gaps of ~1e3+: every weight but the largest underflows
            factor = 2.0 ** (12 if dtype == np.float64 else 9)
            q = (q * factor).astype(dtype)
        elif scenario == "near_overflow":  # |q·k| up to 2^(emax-1): naive exp overflows, the sum must not
            exponent = (emax - 3 - math.ceil(math.log2(max(E, 1)))) // 2
            q = (q.astype(np.float64) * 2.0 ** exponent).astype(dtype)
            k = (k.astype(np.float64) * 2.0 ** exponent).astype(dtype)
        elif scenario == "tiny":  # subnormal values, scores ~0: uniform weights over tiny V
            v = (v.astype(np.float64) * 2.0 ** (emin - 2)).astype(dtype)
            q = (q.astype(np.float64) * 2.0 ** (emin // 2)).astype(dtype)
    return q, k, v


def _row_edits(draw, recipe, mask, L, S, masked_value, kept_value):
    """Fully masked rows and single-visible-key rows, written into the mask's [.., L, S] rows."""
    kinds = ["none", "single"] if recipe.masked_rows != "never" else ["single"]
    edits = draw(st.lists(st.tuples(st.integers(0, L - 1), st.sampled_from(kinds), st.integers(0, S - 1)),
                          max_size=3))
    if recipe.masked_rows == "always":
        edits.append((draw(st.integers(0, L - 1)), "none", 0))
    if recipe.single_visible_key:
        edits.append((draw(st.integers(0, L - 1)), "single", draw(st.integers(0, S - 1))))
    for i, kind, j in edits:
        mask[..., i, :] = masked_value
        if kind == "single":
            mask[..., i, j] = kept_value
    if recipe.masked_rows == "never":  # every row keeps at least key 0 (edits above keep one key)
        rows_empty = np.all(mask == masked_value, axis=-1)
        mask[..., 0][rows_empty] = kept_value


def _mask(draw, recipe, dtype, B, Hq, L, S):
    kind = draw(st.sampled_from(recipe.mask_kinds))
    if kind == "none":
        return None
    if kind == "key_padding":  # [B, 1, 1, S]: the keys past each item's length are masked
        lengths = draw(st.lists(st.integers(0 if recipe.masked_rows != "never" else 1, S), min_size=B, max_size=B))
        if recipe.masked_rows == "always":
            lengths[draw(st.integers(0, B - 1))] = 0
        return (np.arange(S)[None, :] < np.array(lengths)[:, None]).reshape(B, 1, 1, S)
    shape = draw(st.sampled_from([(L, S), (B, 1, L, S), (1, Hq, L, S), (B, Hq, L, S)]))
    if kind == "bool":
        mask = draw(hnp.arrays(np.bool_, shape, elements=st.booleans(), fill=st.just(True)))
        _row_edits(draw, recipe, mask, L, S, False, True)
        return mask
    elements = st.one_of(st.sampled_from([0.0, -np.inf, -1.0, 2.0, -0.0]),
                         st.floats(-4, 4, width=dtype.itemsize * 8, allow_subnormal=False))
    mask = draw(hnp.arrays(dtype, shape, elements=elements, fill=st.just(0.0)))
    _row_edits(draw, recipe, mask, L, S, -np.inf, 0.0)
    return mask


@st.composite
def from_recipe(draw, recipe: Recipe) -> AttentionInputs:
    """AttentionInputs drawn as `recipe` allows (attention_inputs and the conformance families)."""
    dtype = np.dtype(recipe.dtype)
    B = draw(st.integers(1, recipe.max_batch))
    kv_heads = draw(st.integers(1, recipe.max_heads))
    group = 1
    if recipe.gqa and recipe.max_heads // kv_heads >= (2 if recipe.gqa_only else 1):
        group = draw(st.integers(2 if recipe.gqa_only else 1, recipe.max_heads // kv_heads))
    Hq = kv_heads * group
    L = _length(draw, recipe)
    if recipe.single_key:
        S = 1
    elif recipe.cross:
        S = draw(st.integers(1, recipe.max_len).filter(lambda s: s != L))
    else:
        S = _length(draw, recipe, first=L)
    if (recipe.alignments == ("bottom-right",) or recipe.windows) and recipe.masked_rows == "never":
        S = max(S, L)  # bottom-right (causal or a window's right side) with L > S masks the first L - S rows
    E = draw(st.integers(1, recipe.max_dim))
    Ev = draw(st.integers(1, recipe.max_dim).filter(lambda e: e != E)) if recipe.cross else \
        draw(st.one_of(st.just(E), st.integers(1, recipe.max_dim)))
    scenario = draw(st.sampled_from(recipe.scenarios))
    q = _values(draw, recipe, dtype, (B, Hq, L, E), 0)
    k = _values(draw, recipe, dtype, (B, kv_heads, S, E), 1)
    v = _values(draw, recipe, dtype, (B, kv_heads, S, Ev), 2)
    q, k, v = _apply_scenario(scenario, dtype, q, k, v, E)
    mask = _mask(draw, recipe, dtype, B, Hq, L, S)
    is_causal, alignment = False, "top-left"
    if recipe.alignments:
        is_causal = True if recipe.causal_only else draw(st.booleans())
        alignment = draw(st.sampled_from(recipe.alignments)) if is_causal else "top-left"
    scale = None
    if recipe.scales and scenario != "near_overflow":
        scale = draw(st.sampled_from([None, 1.0, 0.5, 0.125]))  # exact in every dtype
    key_lengths = None
    if recipe.key_lengths and draw(st.booleans()):
        key_lengths = draw(st.lists(st.integers(1 if recipe.masked_rows == "never" else 0, S), min_size=B,
                                    max_size=B))
    enable_gqa = group > 1 or (recipe.gqa and draw(st.booleans()))
    dout = _values(draw, recipe, dtype, (B, Hq, L, Ev), 3) if recipe.grads else None
    window = (-1, -1)
    if recipe.windows and (recipe.windows_only or draw(st.booleans())):
        # Each side shrinks towards 0 (the diagonal key alone); -1 is an unbounded side.
        window = (draw(st.integers(-1, S)), draw(st.integers(-1 if not recipe.windows_only else 0, S)))
    slopes = cap = sinks = None
    if recipe.alibi:  # fp32 slopes, not all dyadic (0.7 needs every bit of a bias)
        slopes = np.array(draw(st.lists(st.sampled_from([1.0, 0.5, 0.7, 0.0625, 2.0]), min_size=Hq, max_size=Hq)),
                          dtype=np.float32)
    if recipe.softcap:
        cap = draw(st.sampled_from([1.0, 5.0, 30.0]))
    if recipe.sinks:
        sinks = np.array(draw(st.lists(st.sampled_from([0.0, 1.5, -2.0, 4.0]), min_size=Hq, max_size=Hq)),
                         dtype=np.float32)
    return AttentionInputs(q, k, v, mask, is_causal, alignment, scale, enable_gqa, key_lengths, scenario, dout,
                           window, slopes, cap or 0.0, sinks)


def _option(name, value, table):
    """table[value] for an argument that is True, False or one of the table's strings (1 is not True)."""
    for key, choice in table.items():
        if value is key or (isinstance(key, str) and value == key):
            return choice
    expected = ", ".join(repr(key) for key in table)
    raise ValueError(f"{name}: expected one of {expected}, got {value!r}")


def attention_inputs(dtype="float32", max_batch=2, max_heads=4, max_len=129, max_dim=8, masks=True, causal=True,
                     gqa=True, key_lengths=False, scales=True, grads=False, windows=False):
    """A strategy for AttentionInputs (numpy arrays of `dtype`: "float64", "float32" or "float16").

    max_len: the longest L and S; lengths are drawn at 1, at the TILE_BOUNDARIES up to max_len
    (the default reaches 8 tiles of 16 and crosses 32, 64 and 128) and anywhere in between, and
    shrink towards 1. masks: True draws boolean, additive (-inf included) and key-padding masks;
    "bool", "additive" or "key_padding" only that kind (or none); False none. causal: True (both
    alignments), "top-left", "bottom-right" or False. gqa: draw Hq = G·Hkv groups (enable_gqa).
    key_lengths: also draw per-item key lengths (check_attention's extension; not an SDPA argument).
    scales: also draw explicit scales (1, 1/2, 1/8; None, the default 1/√E, otherwise).
    grads: also draw ``inputs.dout``, an upstream gradient of the output's shape (edge-biased values
    of `dtype`), for check_attention_backward. windows: also draw FlashAttention's sliding window
    ``inputs.window_size`` (each side -1 or 0..S; passed to the kernel as ``window_size``).
    """
    if np.dtype(dtype).name not in ("float64", "float32", "float16"):
        raise ValueError(f"dtype: expected float64, float32 or float16, got {dtype!r}")
    mask_kinds = _option("masks", masks, _MASKS)
    alignments = _option("causal", causal, {True: ALIGNMENTS, False: (), "top-left": ("top-left",),
                                            "bottom-right": ("bottom-right",)})
    for name, value in (("max_batch", max_batch), ("max_heads", max_heads), ("max_len", max_len),
                        ("max_dim", max_dim)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    recipe = Recipe(dtype=np.dtype(dtype).name, max_batch=max_batch, max_heads=max_heads, max_len=max_len,
                    max_dim=max_dim, mask_kinds=mask_kinds, alignments=alignments,
                    gqa=gqa, key_lengths=key_lengths, scales=scales, grads=bool(grads), windows=bool(windows))
    return from_recipe(recipe)
