"""attncheck: certify an attention kernel's output against an exact oracle.

    report = attncheck.check_attention(out, query, key, value, attn_mask=None, is_causal=False, ...)
    attncheck.assert_attention_close(out, query, key, value, ...)   # in a pytest test

Semantics are PyTorch's ``scaled_dot_product_attention``: query [B, Hq, L, E] (or [B, L, E], or
[L, E]), key [B, Hkv, S, E], value [B, Hkv, S, Ev]; a boolean ``attn_mask`` is True where a key
takes part, a float one is added to the scaled scores (-inf allowed); ``scale`` multiplies Q·Kᵀ and
defaults to the exact 1/√E. The output must lie within a rigorous band δ of the exact result for
any correct kernel in ``precision`` (README, "Certifying a tensor kernel").

Backward: ``check_attention_backward(dq, dk, dv, query, key, value, dout, ...)`` certifies gradients,
``check_attention_autograd(fn, query, key, value, ...)`` runs fn forward and backward with PyTorch's
autograd and certifies out, dq, dk, dv; ``assert_attention_grads_close``; ``exact_gradients``.

Also: ``attncheck.strategies`` (Hypothesis strategies), ``attncheck.conformance(fn)`` (named case
families for any function with the SDPA signature), ``python3 -m attncheck check`` (.npy files).
"""

from __future__ import annotations

import importlib
import math
import numbers

import numpy as np

from . import _attncheck
from ._inputs import ALIGNMENTS, PRECISION_OF_DTYPE, PRECISIONS, as_exact_array, as_native_array, check_int, check_shapes
from ._inputs import device_note, finite_check_values, mask_to_rank4, require_finite, to_rank4
from ._report import Failure, Heatmap, Report, Verdict
from ._backward import BackwardReport, assert_attention_grads_close, check_attention_autograd
from ._backward import check_attention_backward
from ._varlen import check_attention_kvcache, check_attention_varlen

__all__ = ["check_attention", "check_attention_varlen", "check_attention_kvcache", "assert_attention_close", "exact_gradients", "check_attention_backward",
           "check_attention_autograd", "assert_attention_grads_close", "BackwardReport", "Report", "Failure", "Heatmap", "Verdict",
           "conformance", "strategies"]


def check_attention(out, query, key, value, *, attn_mask=None, is_causal=False, causal_alignment="top-left",
                    window_size=(-1, -1), alibi_slopes=None, softcap=0.0, sinks=None, scale=None, enable_gqa=False, key_lengths=None, precision=None, exp_ulps=None,
                    weights_in_storage=None, rows=None, seed=0, tier="certified", alpha=1e-9, key_tile=None,
                    sum_chunk=None, single_pass=False, splits=None, ordered=False, accumulator=None,
                    query_in_storage=None, lse=None, lse_base=None, masked_lse="-inf", tanh_ulps=None) -> Report:
    """Certifies ``out`` = SDPA(query, key, value, ...) and returns a Report (never raises on a wrong output).

    out, query, key, value: numpy arrays or torch tensors (float64, float32, float16; bfloat16
    tensors). key and value share one dtype, which may differ from the query's (llama.cpp's fp16 KV
    cache read by an fp32 query): each tensor is exact in its own format. attn_mask: None, boolean (True = takes part) or float (added to the scaled scores),
    broadcastable to [B, Hq, L, S]. is_causal: key j takes part in query i iff j <= i
    (``causal_alignment="top-left"``, PyTorch) or j <= i + S - L (``"bottom-right"``, FlashAttention
    >= 2.1). window_size: (left, right), FlashAttention's sliding window (bottom-right aligned):
    query i sees keys i + S - L - left <= j <= i + S - L + right, -1 an unbounded side; (S - 1, 0)
    is exactly bottom-right causal; it combines with is_causal and the mask (every rule must admit
    a key). alibi_slopes: FlashAttention's ALiBi, [Hq] or [B, Hq] float32 slopes: the bias
    -slope·|i + S - L - j| joins the scaled score, formed by the kernel in its compute precision (the
    band holds that rounding); not with a float attn_mask. softcap: FlashAttention's logit
    softcapping, c·tanh(s/c) of the scaled score s before the bias is added (0 off; the kernel's
    tanh within ``tanh_ulps`` (default 4) ulps plus (exp_ulps + 1.5) u absolute: a GPU kernel on
    tanh.approx.f32, FlashAttention 2 and 3's fast_tanh (about 2^-11 relative), needs 8192;
    check_attention_backward certifies the cap's derivative too). sinks:
    [Hq] float32 logits (gpt-oss, FlashAttention 4) that join each row's softmax denominator,
    Σ_j e^{s_j} + e^{z_h}, and carry no value; forward and LSE (log(Σ_j e^{s_j} + e^{z_h}); z_h in a
    row without keys), with no declared kernel structure; check_attention_backward certifies their
    gradient (dsinks). scale: the multiplier of Q·Kᵀ (default 1/√E). enable_gqa: Hq = G·Hkv, query head h reads
    kv head h // G. key_lengths: per batch item, keys j >= length are masked. precision: "fp64",
    "fp32", "fp16", "bf16", "fp16-math" or "bf16-math" (PyTorch's math path: the scaled Q, the
    scores and P rounded to the dtype too) (default: the inputs' dtype; an out of another dtype is noted in
    ``report.notes``); exp_ulps, weights_in_storage (P rounded to the value's dtype before P·V) and
    query_in_storage (the query, scaled or not, rounded to the key's dtype before Q·Kᵀ: ggml converts
    an fp32 query to its fp16 cache's format) refine it.
    accumulator: the format P·V is accumulated in when coarser than the compute format ("fp16":
    ggml's decode path; the sum of the exps stays in compute). rows: certify a seeded sample of
    this many rows (default all); every element is still checked
    finite and fully masked rows zero.

    NaN and ±inf in query, key and value follow IEEE semantics (README, "NaN and infinity in the
    inputs"): where one reaches an element (a NaN key: its rows; a NaN value: its column) that
    element must be NaN (or the infinity), a NaN from a key that takes no part is a failure, and a
    -inf score drops its key. B = 0 or L = 0 is an empty output; S = 0 makes every row zero.

    lse: the kernel's log-sum-exp beside out, out's shape without its last axis ([B, Hq, L]; fp32
    in FlashAttention whatever the inputs), certified against the exact log Σ_j e^{s_j} of each row
    (s_j the scaled scores with the mask's bias) within its own band, in the same arithmetic and
    declared structure; ``report.lse`` is its Report and ``report.passed`` needs both. lse_base:
    None (natural log) or 2 (kernels that keep log2 units). masked_lse: what a row without keys
    holds, "-inf" (the exact value) or "+inf" (FlashAttention 2's convention).

    Two tiers judge every certified element: the certified band (holds for every correct kernel in
    the arithmetic: a failure proves a bug) and the statistical band (holds under Model S, the
    standard probabilistic model of rounding, except with probability ``alpha`` for the whole
    report: a failure is evidence at that level). ``tier`` picks the one that decides ``passed``;
    the report shows both. The kernel's structure, when declared, narrows both: ``key_tile`` (an
    online softmax over tiles of that many consecutive keys from key 0), ``sum_chunk`` (terms summed
    apart in chunks of that many keys before joining the running sums: 1 each term straight in,
    ``key_tile`` FlashAttention's tile sums, 16 an MMA's k), ``single_pass`` (no rescale) and
    ``splits`` (key partitions merged by their log-sum-exp; None any number, 1 none) and ``ordered``
    (terms added one at a time in key order, as CPU loops and BLAS microkernels do; needs
    ``splits=1``; narrows the statistical tier). Undeclared, the
    bands hold for every tiling, summation order and split. Raises TypeError/ValueError naming the
    argument at fault.
    """
    out_values, out_dtype = as_native_array(out, "out")  # read in place by the C++ side, as are q, k, v
    softcap = _softcap(softcap)
    call = _sdpa_call(out_values, "out", query, key, value, attn_mask, is_causal, causal_alignment, scale,
                      enable_gqa, key_lengths, window_size, alibi_slopes, ieee=True, native=True)
    q, k, v, q_dtype, k_dtype, rank = call.q, call.k, call.v, call.q_dtype, call.k_dtype, call.q.ndim
    mask, mask_kind, lengths = call.mask, call.mask_kind, call.lengths
    explicit_precision = precision is not None
    notes = (_dtype_notes(out_dtype, q_dtype, precision) + _kv_notes(q_dtype, k_dtype) +
             device_note(out=out, query=query, key=key, value=value, attn_mask=attn_mask, lse=lse))
    if precision is None:  # the inputs' format: the kernel's arithmetic, whatever it stored its output in
        precision = PRECISION_OF_DTYPE[q_dtype]
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    if tanh_ulps is not None and (isinstance(tanh_ulps, bool) or not isinstance(tanh_ulps, numbers.Real)):
        raise TypeError(f"tanh_ulps: expected a float or None, got {type(tanh_ulps).__name__}")
    if exp_ulps is not None and (isinstance(exp_ulps, bool) or not isinstance(exp_ulps, numbers.Real)):
        raise TypeError(f"exp_ulps: expected a float or None, got {type(exp_ulps).__name__}")
    for name, flag in (("weights_in_storage", weights_in_storage), ("query_in_storage", query_in_storage)):
        if flag is not None and not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name}: expected a bool or None, got {type(flag).__name__}")
    rows = check_int(rows, "rows", minimum=1, allow_none=True)
    seed = check_int(seed, "seed")
    if tier not in ("certified", "statistical"):
        raise ValueError(f"tier: expected 'certified' or 'statistical', got {tier!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a probability in (0, 1), got {alpha!r}")
    key_tile = check_int(key_tile, "key_tile", minimum=1, allow_none=True)
    sum_chunk = check_int(sum_chunk, "sum_chunk", minimum=1, allow_none=True)
    splits = check_int(splits, "splits", minimum=1, allow_none=True)
    if accumulator is not None and accumulator not in ("fp64", "fp32", "fp16", "bf16"):
        raise ValueError(f"accumulator: expected 'fp64', 'fp32', 'fp16', 'bf16' or None, got {accumulator!r}")
    for name, flag in (("single_pass", single_pass), ("ordered", ordered)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name}: expected a bool, got {type(flag).__name__}")
    lse_values, lse_precision = _lse_arguments(lse, out_values.shape, "out", lse_base, masked_lse)
    sink_logits = _sinks(sinks, q.shape)
    if sink_logits and any(x is not None and x is not False for x in (key_tile, splits, single_pass or None,
                                                                       ordered or None)) or (sink_logits and sum_chunk):
        raise ValueError("sinks: declare no kernel structure (where a kernel adds the sink in its tiling is not "
                         "modelled)")
    structure = {name: value for name, value in (("key_tile", key_tile), ("sum_chunk", sum_chunk),
                                                  ("single_pass", bool(single_pass) or None), ("splits", splits),
                                                  ("ordered", bool(ordered) or None))
                 if value is not None}
    native = _attncheck.certify(
        out_values.reshape(to_rank4(out_values.shape, "out")), q.reshape(to_rank4(q.shape, "query")),
        k.reshape(to_rank4(k.shape, "key")), v.reshape(to_rank4(v.shape, "value")), mask=mask, mask_kind=mask_kind,
        causal=call.causal, window=call.window, alibi_slopes=call.alibi, softcap=softcap, sinks=sink_logits,
        scale=call.scale, key_lengths=lengths, precision=precision, exp_ulps=None if exp_ulps is None else float(exp_ulps),
        weights_in_storage=None if weights_in_storage is None else bool(weights_in_storage),
        query_in_storage=None if query_in_storage is None else bool(query_in_storage),
        kv_precision=None if k_dtype == q_dtype else PRECISION_OF_DTYPE[k_dtype], rows=rows, seed=seed, tier=tier, alpha=float(alpha),
        key_tile=key_tile, sum_chunk=sum_chunk, single_pass=bool(single_pass), splits=splits,
        ordered=bool(ordered), output_rounded=not _widened(out_dtype, q_dtype, explicit_precision),
        accumulator=accumulator, lse=None if lse_values is None else lse_values.reshape(-1),
        lse_precision=lse_precision, lse_base2=lse_base == 2, lse_masked_plus_inf=masked_lse == "+inf",
        tanh_ulps=None if tanh_ulps is None else float(tanh_ulps))

    def index_of(index4):  # the element's index in out's own rank
        b, h, i, c = index4
        return (b, h, i, c) if rank == 4 else (b, i, c) if rank == 3 else (i, c)

    def lse_index_of(index4):  # the row's index in lse's own rank
        b, h, i, _ = index4
        return (b, h, i) if rank == 4 else (b, i) if rank == 3 else (i,)

    report = Report._from_native(native, index_of, int(out_values.size), precision, seed, tier=tier,
                                 alpha=float(alpha), structure=structure, notes=notes)
    if lse_values is not None:
        lse_notes = [f"log-sum-exp in base {'2' if lse_base == 2 else 'e'}, stored as {lse_precision}; rows without "
                     f"keys must hold {masked_lse if not sink_logits else 'their sink z (log e^z)'}; one band decides both tiers"]
        report.lse = Report._from_native(native["lse"], lse_index_of, int(lse_values.size), precision, seed,
                                         tier=tier, alpha=float(alpha), structure=structure, notes=lse_notes)
        report.passed = report.passed and report.lse.passed
    return report


def _lse_arguments(lse, out_shape, out_name, lse_base, masked_lse):
    """(values, precision) of an LSE shaped as `out_name` without its last axis, or (None, None);
    lse_base and masked_lse checked. ValueError/TypeError naming the argument at fault."""
    if lse_base not in (None, 2):
        raise ValueError(f"lse_base: expected None (natural log) or 2, got {lse_base!r}")
    if masked_lse not in ("-inf", "+inf"):
        raise ValueError(f"masked_lse: expected '-inf' or '+inf', got {masked_lse!r}")
    if lse is None:
        return None, None
    values, dtype = as_exact_array(lse, "lse")
    if values.shape != tuple(out_shape[:-1]):
        raise ValueError(f"lse: expected shape {tuple(out_shape[:-1])} ({out_name}'s without its last axis), "
                         f"got {tuple(values.shape)}")
    return values, PRECISION_OF_DTYPE[dtype]


class _SdpaCall:
    """The checked inputs of one SDPA call, as float64 arrays exact in their dtypes (native: in their
    own dtypes, as_native_array's)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def _sdpa_call(out_values, out_name, query, key, value, attn_mask, is_causal, causal_alignment, scale, enable_gqa,
               key_lengths, window_size=(-1, -1), alibi_slopes=None, ieee=False, native=False) -> _SdpaCall:
    """query, key, value and the SDPA keywords checked (TypeError/ValueError naming the argument at
    fault), with the output-shaped array ``out_values`` (out or dout) for the shapes. ieee: NaN and
    ±inf in query, key and value, and empty batch and sequence axes, are admitted (the forward).
    native: the arrays are kept in their own dtype (read in place by the C++ side)."""
    as_array = as_native_array if native else as_exact_array
    q, q_dtype = as_array(query, "query")
    k, k_dtype = as_array(key, "key")
    v, v_dtype = as_array(value, "value")
    if v_dtype != k_dtype:
        raise TypeError(f"value: dtype {v_dtype} differs from the key's {k_dtype} (key and value share one storage "
                        f"format; the query's may differ)")
    for values, name, dtype in ((q, "query", q_dtype), (k, "key", k_dtype), (v, "value", v_dtype)):
        if not ieee:
            require_finite(finite_check_values(values, dtype), name)
    if not isinstance(enable_gqa, (bool, np.bool_)):
        raise TypeError(f"enable_gqa: expected a bool, got {type(enable_gqa).__name__}")
    to_rank4(q.shape, "query")  # a query of rank 2, 3 or 4, named as such before the others
    check_shapes(out_values, q, k, v, bool(enable_gqa), out_name, allow_empty=ieee)
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"is_causal: expected a bool, got {type(is_causal).__name__}")
    if causal_alignment not in ALIGNMENTS:
        raise ValueError(f"causal_alignment: expected 'top-left' or 'bottom-right', got {causal_alignment!r}")
    mask, mask_kind = None, "none"
    if attn_mask is not None:
        mask, mask_dtype = as_exact_array(attn_mask, "attn_mask", allow_bool=True)
        mask_kind = "boolean" if mask_dtype == "bool" else "additive"
        require_finite(mask, "attn_mask", allow_minus_inf=True)
        mask = mask.reshape(mask_to_rank4(mask.shape, q.ndim))
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        raise TypeError(f"scale: expected a float or None, got {type(scale).__name__}")
    return _SdpaCall(q=q, k=k, v=v, q_dtype=q_dtype, k_dtype=k_dtype, mask=mask, mask_kind=mask_kind,
                     causal=causal_alignment if is_causal else "none", window=_window(window_size),
                     alibi=_alibi(alibi_slopes, q.shape, mask_kind),
                     scale=None if scale is None else float(scale), lengths=_key_lengths(key_lengths))


def _sinks(sinks, query_shape):
    """Attention sinks: [Hq] float32 logits (a list of floats), [] for None."""
    if sinks is None:
        return []
    values, _ = as_exact_array(sinks, "sinks")
    Hq = to_rank4(query_shape, "query")[1]
    if values.shape != (Hq,):
        raise ValueError(f"sinks: expected shape ({Hq},) (one logit per query head), got {tuple(values.shape)}")
    if not np.isfinite(values).all() or (values.astype(np.float32).astype(np.float64) != values).any():
        raise ValueError("sinks: expected finite float32 values")
    return [float(x) for x in values]


def _softcap(softcap):
    """FlashAttention's softcap: 0 (off) or a positive finite float32 value."""
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real):
        raise TypeError(f"softcap: expected a float, got {type(softcap).__name__}")
    c = float(softcap)
    if not (math.isfinite(c) and c >= 0) or float(np.float32(c)) != c:
        raise ValueError(f"softcap: expected 0 (off) or a positive finite float32 value, got {softcap!r}")
    return c


def _alibi(alibi_slopes, query_shape, mask_kind):
    """FlashAttention's alibi_slopes ([Hq] or [B, Hq], float32 values) as a flat list; [] for None."""
    if alibi_slopes is None:
        return []
    values, dtype = as_exact_array(alibi_slopes, "alibi_slopes")
    B, Hq = to_rank4(query_shape, "query")[:2]
    if values.shape not in ((Hq,), (B, Hq)):
        raise ValueError(f"alibi_slopes: expected shape ({Hq},) or ({B}, {Hq}) ([Hq] or [B, Hq]), got "
                         f"{tuple(values.shape)}")
    if not np.isfinite(values).all() or (values.astype(np.float32).astype(np.float64) != values).any():
        raise ValueError("alibi_slopes: expected finite float32 values (FlashAttention's dtype)")
    if mask_kind == "additive":
        raise ValueError("alibi_slopes: not together with a float attn_mask (fold the ALiBi bias into the mask, "
                         "or use a boolean mask)")
    return [float(x) for x in values.reshape(-1)]


def _window(window_size):
    """FlashAttention's window_size (left, right) checked: two ints, each -1 (unbounded) or >= 0."""
    if isinstance(window_size, (str, bytes)) or not hasattr(window_size, "__len__") or len(window_size) != 2:
        raise TypeError(f"window_size: expected a pair (left, right), got {window_size!r}")
    left, right = (check_int(side, f"window_size[{k}]", minimum=-1) for k, side in enumerate(window_size))
    return (left, right)


def exact_gradients(dout, query, key, value, *, attn_mask=None, is_causal=False, causal_alignment="top-left",
                    window_size=(-1, -1), alibi_slopes=None, softcap=0.0, sinks=None, scale=None, enable_gqa=False,
                    key_lengths=None, bits=128):
    """The exact gradients (dq, dk, dv) of Σ dout ∘ SDPA(query, key, value, ...) for the exact inputs,
    as float64 arrays in the inputs' shapes: each the midpoint of an MPFI enclosure at ``bits`` bits,
    so within about 2^-53 relative of the exact value (rounded to float64). Semantics and arguments as
    check_attention's; dout has out's shape. Under GQA dk and dv sum over each kv head's group; a row
    without keys contributes nothing and its dq is zero (the limit PyTorch's math path turns into NaN).
    Under softcap the scores' gradient carries the cap's slope 1 - tanh²(s/c). With sinks the result is
    (dq, dk, dv, dsinks), dsinks [Hq] the gradient of each head's sink logit, -Σ_{b,i} P_iz D_i.
    A reference, not a verdict: check_attention_backward judges a backward's gradients.
    """
    dout_values, _ = as_exact_array(dout, "dout")
    call = _sdpa_call(dout_values, "dout", query, key, value, attn_mask, is_causal, causal_alignment, scale,
                      enable_gqa, key_lengths, window_size, alibi_slopes)
    bits = check_int(bits, "bits", minimum=64)
    if bits > 4096:
        raise ValueError(f"bits: expected at most 4096, got {bits}")
    softcap = _softcap(softcap)
    sink_logits = _sinks(sinks, call.q.shape)
    grads = _attncheck.gradients(
        dout_values.reshape(to_rank4(dout_values.shape, "dout")), call.q.reshape(to_rank4(call.q.shape, "query")),
        call.k.reshape(to_rank4(call.k.shape, "key")), call.v.reshape(to_rank4(call.v.shape, "value")),
        mask=call.mask, mask_kind=call.mask_kind, causal=call.causal, window=call.window, alibi_slopes=call.alibi,
        softcap=softcap, sinks=sink_logits, scale=call.scale, key_lengths=call.lengths,
        precision=PRECISION_OF_DTYPE[call.q_dtype],
        kv_precision=None if call.k_dtype == call.q_dtype else PRECISION_OF_DTYPE[call.k_dtype], bits=bits)
    shaped = (grads[0].reshape(call.q.shape), grads[1].reshape(call.k.shape), grads[2].reshape(call.v.shape))
    return shaped + tuple(grads[3:])


def assert_attention_close(out, query, key, value, **kwargs) -> None:
    """check_attention, raising AssertionError (torch.testing.assert_close style) when it fails.

    The message names the worst element: index, got, exact, band, ulps, reason.
    """
    report = check_attention(out, query, key, value, **kwargs)
    if report.passed:
        return
    if report.failure_count == 0 and report.lse is not None:  # out passed: the LSE failed
        lse = report.lse
        raise AssertionError(
            f"Attention LSE is not within its {lse.tier} band ({lse.precision})!\n\n"
            f"Mismatched rows: {lse.failure_count} / {lse.elements_total}\n"
            f"Worst row at {lse.worst.describe()}\n"
            f"Greatest band usage: {lse.max_band_usage:.9g} (at most 1 allowed)")
    worst = report.worst
    share = 100.0 * report.failure_count / max(report.elements_total, 1)
    raise AssertionError(
        f"Attention output is not within the {report.tier} band ({report.precision})!\n\n"
        f"Mismatched elements: {report.failure_count} / {report.elements_total} ({share:.1f}%)\n"
        f"Worst element at {worst.describe()}\n"
        f"Greatest band usage: {report.max_band_usage:.9g} (at most 1 allowed)\n"
        f"Rows certified: {report.rows_checked} of {report.rows_total} (seed {report.seed})")


_FINENESS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def _finer(dtype, than):
    """Does ``dtype`` hold more significand bits than ``than``?"""
    return _FINENESS[dtype] > _FINENESS[than]


def _widened(out_dtype, input_dtype, explicit_precision):
    """An inferred precision with an output finer than the inputs: the output was not rounded to them."""
    return not explicit_precision and _finer(out_dtype, input_dtype)


def _dtype_notes(out_dtype, input_dtype, precision):
    """What the report says about an output stored in another format than the inputs'."""
    if precision is not None or out_dtype == input_dtype:
        return []
    name = PRECISION_OF_DTYPE[input_dtype]
    if _finer(out_dtype, input_dtype):
        return [f"out is {out_dtype}, finer than the inputs' {input_dtype}: taken as a {name} kernel whose output "
                f"was widened, certified as {name} without the rounding of the output to {input_dtype}"]
    return [f"out is {out_dtype}, coarser than the inputs' {input_dtype}: certified as {name}, so the rounding "
            f"to {out_dtype} counts against the band (pass precision= to judge it otherwise)"]


def _kv_notes(query_dtype, key_dtype):
    """What the report says about key and value stored in another format than the query."""
    if key_dtype == query_dtype:
        return []
    note = (f"key and value are {key_dtype}, the query {query_dtype}: each is certified exact in its own format "
            f"(P rounded to {key_dtype} when weights_in_storage, the query to {key_dtype} when query_in_storage)")
    if _finer(key_dtype, query_dtype):
        note += "; key and value finer than the query is unusual (a cache is kept coarser, not finer)"
    return [note]


def _key_lengths(key_lengths):
    if key_lengths is None:
        return []
    if hasattr(key_lengths, "tolist"):  # numpy array or torch tensor
        key_lengths = key_lengths.tolist()
    if not isinstance(key_lengths, (list, tuple)):
        raise TypeError(f"key_lengths: expected a sequence of ints, got {type(key_lengths).__name__}")
    return [check_int(n, "key_lengths") for n in key_lengths]


def __getattr__(name):
    # Both need Hypothesis: imported on first use, so that `import attncheck` does not.
    if name == "strategies":
        return importlib.import_module(".strategies", __name__)
    if name == "conformance":
        function = importlib.import_module("._conformance", __name__).conformance
        globals()["conformance"] = function
        return function
    raise AttributeError(f"module 'attncheck' has no attribute {name!r}")
