"""Certification of a backward pass: check_attention_backward, check_attention_autograd,
assert_attention_grads_close and their BackwardReport."""

from __future__ import annotations

import dataclasses
import json

from . import _attncheck
from ._inputs import PRECISION_OF_DTYPE, PRECISIONS, as_exact_array, check_int, device_note, to_rank4
from ._report import Report, _encode

_GRADIENTS = ("dq", "dk", "dv")
_OPTIONAL = ("dmask", "dsinks", "out", "lse")


def _listed(names) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@dataclasses.dataclass
class BackwardReport:
    """What check_attention_backward found: a Report per gradient (dq indexed as the query, dk and dv
    as the key and value: their rows are key rows), the forward's out and LSE when given (or
    computed, check_attention_autograd), and ``passed`` (all of them). ``bool(report)`` is passed."""

    passed: bool
    dq: Report
    dk: Report
    dv: Report
    dmask: Report = None  #: the float attn_mask's gradient, certified when given (indexed as attn_mask)
    dsinks: Report = None  #: the sinks' gradient ([Hq], indexed (head,)), certified when given
    out: Report = None  #: the forward's output, certified when given
    lse: Report = None  #: the forward's LSE, certified when given
    precision: str = ""
    notes: list = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def reports(self) -> dict:
        """name -> Report for every tensor judged (dq, dk, dv, then dmask, dsinks, out and lse when present)."""
        names = _GRADIENTS + tuple(name for name in _OPTIONAL if getattr(self, name) is not None)
        return {name: getattr(self, name) for name in names}

    def __str__(self) -> str:
        head = f"attncheck backward: {'passed' if self.passed else 'FAILED'} ({self.precision})"
        lines = [head]
        for name, report in self.reports.items():
            if report.passed:
                state = "passed"
            elif report.failure_count:
                state = (f"FAILED: {report.failure_count} of {report.elements_total} elements; worst at "
                         f"{report.worst.describe()}")
            else:
                state = "FAILED (its LSE)"
            lines.append(f"{name}: {state}; band usage max {report.max_band_usage:.9g}, "
                         f"{report.rows_checked} of {report.rows_total} rows certified")
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)

    def to_json(self, **dumps_options) -> str:
        """The report as strict JSON (each tensor's Report as Report.to_json writes it)."""
        data = {"passed": self.passed, "precision": self.precision, "notes": list(self.notes)}
        for name in _GRADIENTS + _OPTIONAL:
            report = getattr(self, name)
            data[name] = None if report is None else report._to_dict()
        return json.dumps(_encode(data), allow_nan=False, **dumps_options)


def check_attention_backward(dq, dk, dv, query, key, value, dout, *, out=None, lse=None, lse_base=None,
                             masked_lse="-inf", attn_mask=None, is_causal=False, causal_alignment="top-left",
                             window_size=(-1, -1), alibi_slopes=None, softcap=0.0, sinks=None, scale=None,
                             enable_gqa=False, key_lengths=None, precision=None, exp_ulps=None,
                             weights_in_storage=None, query_in_storage=None, rows=None, seed=0, tier="certified",
                             alpha=1e-9, algorithm=None, dmask=None, dsinks=None) -> BackwardReport:
    """Certifies a backward pass: dq, dk, dv (shaped as query, key, value) against the exact gradients
    of Σ dout ∘ SDPA(query, key, value, ...) for the exact inputs, each element within the gradient
    band of ``precision`` (README, "Certifying a backward pass"). Never raises on wrong gradients.

    The band holds for FlashAttention-2's backward (P recomputed from the stored LSE, D_i = dO_i · O_i
    from the stored output, any tiling and order, dQ by atomics) and for the autograd of the math
    path (the saved softmax); ``algorithm="flash"`` or ``"math"`` declares which, and narrows the band
    to it (8-35x on long rows for flash). Pass the kernel's forward ``out`` and ``lse`` when it has
    them: their measured errors enter the band (both are certified too: ``report.out``,
    ``report.lse``); without them the band takes the forward's worst case. dout is read in the
    output's format (float32 for an fp32 kernel). A kernel that pre-scales K or Q in fp16/bf16 (the
    Triton tutorial's backward) needs ``query_in_storage=True``. dmask: the gradient of a float
    ``attn_mask`` (its shape), certified as ``report.dmask``: dS summed over the positions each mask
    element broadcasts to, exactly zero where no key takes part (a -inf element); with ``rows``,
    mask rows are sampled so that about ``rows`` query rows feed them. Semantics and the other keywords as
    check_attention's (lse_base, masked_lse for the LSE; precision "bf16-math"/"fp16-math" for
    PyTorch's math path in half precision). Under GQA dk and dv sum over each kv head's group; a
    row without keys contributes nothing and its dq must be exactly zero, as must the dk and dv of a
    key no query sees. rows: certify that many query rows (dq) and key rows (dk, dv), seeded; a key
    row needs every query row of its head group, so sampling cuts less than in the forward. Both
    tiers: ``tier="statistical"`` judges with the statistical band (the sums' roundings under Model S;
    with ``algorithm="flash"`` the terms' own roundings too: about 10x narrower at 4096 keys), never
    wider than the certified one. softcap: the forward's c·tanh(s/c); dS then carries the cap's
    slope 1 - tanh²(s/c) into dq and dk (a kernel that forgets it fails). sinks: [Hq] float32 logits
    as check_attention's; dsinks, the kernel's gradient of them ([Hq], read as float32), is certified
    as ``report.dsinks``: dz_h = -Σ_{b,i} P_iz D_i over head h's rows (P_iz the sink's weight, D_i =
    dO_i · O_i); with ``rows``, about rows / (B·L) heads are certified. Raises TypeError/ValueError
    naming the argument at fault.
    """
    import numpy as np

    from . import _dtype_notes, _lse_arguments, _sdpa_call, _sinks, _softcap  # the forward's argument checks

    dout_values, dout_dtype = as_exact_array(dout, "dout")
    call = _sdpa_call(dout_values, "dout", query, key, value, attn_mask, is_causal, causal_alignment, scale,
                      enable_gqa, key_lengths, window_size, alibi_slopes)
    grads = {}
    notes = device_note(dq=dq, dk=dk, dv=dv, query=query, key=key, value=value, dout=dout, out=out, lse=lse,
                        attn_mask=attn_mask, dmask=dmask)
    for name, grad, like, like_name in (("dq", dq, call.q, "query"), ("dk", dk, call.k, "key"),
                                        ("dv", dv, call.v, "value")):
        values, dtype = as_exact_array(grad, name)
        if values.shape != like.shape:
            raise ValueError(f"{name}: expected {like_name}'s shape {tuple(like.shape)}, got {tuple(values.shape)}")
        grads[name] = values
        notes += [note.replace("out is", f"{name} is", 1) for note in _dtype_notes(dtype, call.q_dtype, precision)]
    if precision is None:
        precision = PRECISION_OF_DTYPE[call.q_dtype]
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    rows = check_int(rows, "rows", minimum=1, allow_none=True)
    seed = check_int(seed, "seed")
    if tier not in ("certified", "statistical"):
        raise ValueError(f"tier: expected 'certified' or 'statistical', got {tier!r}")
    out_values = None
    if out is not None:
        out_values, _ = as_exact_array(out, "out")
        if out_values.shape != dout_values.shape:
            raise ValueError(f"out: expected dout's shape {tuple(dout_values.shape)}, got {tuple(out_values.shape)}")
    lse_values, lse_precision = _lse_arguments(lse, dout_values.shape, "dout", lse_base, masked_lse)
    for name, flag in (("weights_in_storage", weights_in_storage), ("query_in_storage", query_in_storage)):
        if flag is not None and not isinstance(flag, bool):
            raise TypeError(f"{name}: expected a bool or None, got {type(flag).__name__}")
    if algorithm not in (None, "flash", "math"):
        raise ValueError(f"algorithm: expected None (either), 'flash' or 'math', got {algorithm!r}")
    dmask_values = None
    if dmask is not None:
        if call.mask_kind != "additive":
            raise ValueError("dmask: given but attn_mask is not a float (additive) mask"
                             if call.mask_kind == "boolean" else "dmask: given without an attn_mask")
        dmask_values, dmask_dtype = as_exact_array(dmask, "dmask")
        mask_shape = tuple(np.shape(attn_mask))
        if dmask_values.shape != mask_shape:
            raise ValueError(f"dmask: expected attn_mask's shape {mask_shape}, got {tuple(dmask_values.shape)}")
        notes += [note.replace("out is", "dmask is", 1) for note in _dtype_notes(dmask_dtype, call.q_dtype, precision)]
    softcap = _softcap(softcap)
    sink_logits = _sinks(sinks, call.q.shape)
    dsinks_values = None
    if dsinks is not None:
        if not sink_logits:
            raise ValueError("dsinks: given without sinks")
        dsinks_values, _ = as_exact_array(dsinks, "dsinks")
        if dsinks_values.shape != (len(sink_logits),):
            raise ValueError(f"dsinks: expected sinks' shape ({len(sink_logits)},), got {tuple(dsinks_values.shape)}")
    elif sink_logits:
        notes.append("sinks: no dsinks given, so the sinks' gradient is not certified")

    def shaped(x, name):
        return x.reshape(to_rank4(x.shape, name))

    native = _attncheck.certify_backward(
        shaped(grads["dq"], "dq"), shaped(grads["dk"], "dk"), shaped(grads["dv"], "dv"), shaped(dout_values, "dout"),
        shaped(call.q, "query"), shaped(call.k, "key"), shaped(call.v, "value"), mask=call.mask,
        mask_kind=call.mask_kind, causal=call.causal, window=call.window, alibi_slopes=call.alibi, softcap=softcap,
        sinks=sink_logits, scale=call.scale, key_lengths=call.lengths, precision=precision, exp_ulps=None if exp_ulps is None else float(exp_ulps),
        weights_in_storage=weights_in_storage, query_in_storage=query_in_storage,
        kv_precision=None if call.k_dtype == call.q_dtype else PRECISION_OF_DTYPE[call.k_dtype], rows=rows,
        seed=seed, tier=tier, alpha=float(alpha),
        out=None if out_values is None else shaped(out_values, "out"),
        lse=None if lse_values is None else lse_values.reshape(-1), lse_precision=lse_precision,
        lse_base2=lse_base == 2, lse_masked_plus_inf=masked_lse == "+inf", algorithm=algorithm or "either",
        dmask=None if dmask_values is None else dmask_values.reshape(call.mask.shape), dsinks=dsinks_values)
    rank = call.q.ndim

    def index_of(index4):  # an element's index in its tensor's own rank
        b, h, i, c = index4
        return (b, h, i, c) if rank == 4 else (b, i, c) if rank == 3 else (i, c)

    def row_index_of(index4):
        b, h, i, _ = index4
        return (b, h, i) if rank == 4 else (b, i) if rank == 3 else (i,)

    key_note = "rows are key rows (batch, kv head, key); a key no query sees must have a zero gradient"
    reports = {}
    for name, size, extra in (("dq", grads["dq"].size, []), ("dk", grads["dk"].size, [key_note]),
                              ("dv", grads["dv"].size, [key_note])):
        reports[name] = Report._from_native(native[name], index_of, int(size), precision, seed, tier=tier,
                                            alpha=float(alpha), notes=extra)
    if "dmask" in native:
        rank4_shape, own_shape = call.mask.shape, dmask_values.shape

        def mask_index_of(index4):  # the padded [mB, mH, mL, mS] index in attn_mask's own shape
            flat = np.ravel_multi_index(tuple(int(x) for x in index4), rank4_shape)
            return tuple(int(x) for x in np.unravel_index(flat, own_shape))

        reports["dmask"] = Report._from_native(
            native["dmask"], mask_index_of, int(dmask_values.size), precision, seed, tier=tier, alpha=float(alpha),
            notes=["rows are attn_mask's rows (all but its last axis); an element no key takes part in (-inf, "
                   "causal, key lengths) must have a zero gradient"])
    if "dsinks" in native:
        reports["dsinks"] = Report._from_native(
            native["dsinks"], lambda index4: (int(index4[1]),), len(sink_logits), precision, seed, tier=tier,
            alpha=float(alpha), notes=["rows are query heads: dsinks[h] sums over every row of head h"])
    if "out" in native:
        reports["out"] = Report._from_native(native["out"], index_of, int(out_values.size), precision, seed,
                                             tier=tier, alpha=float(alpha))
    if "lse" in native:
        reports["lse"] = Report._from_native(native["lse"], row_index_of, int(lse_values.size), precision, seed,
                                             tier=tier, alpha=float(alpha))
    masked_nan = [name for name in ("out", "dq", "dmask") if name in reports and
                  any(f.reason in ("NaN in a fully masked row", "NaN where no key takes part")
                      for f in reports[name].failures)]
    if masked_nan:
        spread = [name for name in ("dk", "dv") if any(f.reason == "NaN" for f in reports[name].failures)]
        notes.append(f"rows without keys give NaN in {_listed(masked_nan)} where the exact values are 0 (such "
                     f"a row contributes nothing to the gradients): a softmax over all -inf is 0/0, as in PyTorch "
                     f"1.13's math path" + (f"; the NaN reaches {_listed(spread)} through those rows" if spread
                                            else ""))
    return BackwardReport(passed=bool(native["passed"]), precision=precision, notes=notes, **reports)


def check_attention_autograd(fn, query, key, value, *, dout=None, seed=0, attn_mask=None, is_causal=False,
                             window_size=(-1, -1), alibi_slopes=None, softcap=0.0, sinks=None, scale=None,
                             enable_gqa=False, precision=None, **kwargs) -> BackwardReport:
    """Runs ``fn(q, k, v, **sdpa keywords)`` forward and backward with PyTorch's autograd and certifies
    its output and its gradients in one BackwardReport (out, dq, dk, dv).

    query, key, value: CPU torch tensors (or numpy arrays), copied into leaves that require grad.
    fn gets attn_mask, is_causal=True, window_size, alibi_slopes, softcap, sinks and scale only when given
    (sinks as a float32 leaf that requires grad: its gradient is certified as report.dsinks; PyTorch 1.13's
    ``_scaled_dot_product_attention`` has no scale; its (out, weights) result is taken as out).
    dout: the upstream gradient (out's shape), default a standard normal draw seeded by ``seed``,
    rounded to out's dtype. A float attn_mask is copied into a leaf that requires grad too, and its
    gradient certified (report.dmask) when fn's graph reaches it (report.notes say when it does not).
    fn's causal masking is PyTorch's (top-left). precision: default the
    inputs' dtype; PyTorch's math path in bf16/fp16 is "bf16-math"/"fp16-math". Other keywords
    (rows, tier, key_lengths, exp_ulps, ...) go to check_attention_backward.
    """
    import numpy as np
    import torch

    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")

    def leaf(x, name):
        tensor = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
        if tensor.device.type != "cpu":
            raise ValueError(f"{name}: expected a CPU tensor, got one on {tensor.device}")
        return tensor.detach().clone().requires_grad_(True)

    q, k, v = leaf(query, "query"), leaf(key, "key"), leaf(value, "value")
    call = {}
    mask_leaf = None
    if attn_mask is not None:
        mask = attn_mask if isinstance(attn_mask, torch.Tensor) else torch.from_numpy(np.asarray(attn_mask))
        if mask.is_floating_point():
            mask = mask_leaf = leaf(mask, "attn_mask")
        call["attn_mask"] = mask
    if is_causal:
        call["is_causal"] = True
    if tuple(window_size) != (-1, -1):
        call["window_size"] = tuple(window_size)
    if alibi_slopes is not None:
        call["alibi_slopes"] = alibi_slopes
    if softcap:
        call["softcap"] = softcap
    sinks_leaf = None
    if sinks is not None:
        call["sinks"] = sinks_leaf = leaf(sinks, "sinks")
    if scale is not None:
        call["scale"] = scale
    if enable_gqa:
        call["enable_gqa"] = True
    out = fn(q, k, v, **call)
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor) or out.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"fn: expected a tensor shaped as the query but its last axis, got "
                         f"{getattr(out, 'shape', type(out).__name__)}")
    if dout is None:
        generator = torch.Generator().manual_seed(check_int(seed, "seed"))
        dout = torch.randn(tuple(out.shape), generator=generator, dtype=torch.float64).to(out.dtype)
    elif not isinstance(dout, torch.Tensor):
        dout = torch.from_numpy(np.asarray(dout))
    out.backward(dout)
    missing = [name for name, x in (("query", q), ("key", k), ("value", v)) if x.grad is None]
    if missing:
        raise ValueError(f"fn: its output does not depend on {', '.join(missing)} (no gradient reached it)")
    dmask = None if mask_leaf is None else mask_leaf.grad
    dsinks = None if sinks_leaf is None else sinks_leaf.grad
    report = check_attention_backward(q.grad, k.grad, v.grad, q.detach(), k.detach(), v.detach(), dout,
                                      out=out.detach(), attn_mask=attn_mask if mask_leaf is None else mask_leaf.detach(),
                                      is_causal=is_causal, window_size=window_size, alibi_slopes=alibi_slopes,
                                      softcap=softcap, sinks=None if sinks_leaf is None else sinks_leaf.detach(),
                                      scale=scale, enable_gqa=enable_gqa, precision=precision, seed=seed, dmask=dmask,
                                      dsinks=dsinks, **kwargs)
    if mask_leaf is not None and dmask is None:
        report.notes.append("attn_mask: fn's graph does not reach the float mask (no gradient): not certified")
    if sinks_leaf is not None and dsinks is None:
        report.notes.append("sinks: fn's graph does not reach the sinks (no gradient): not certified")
    return report


def assert_attention_grads_close(dq, dk, dv, query, key, value, dout, **kwargs) -> None:
    """check_attention_backward, raising AssertionError naming the first tensor that fails and its worst
    element (index, got, exact, band, ulps, reason)."""
    report = check_attention_backward(dq, dk, dv, query, key, value, dout, **kwargs)
    if report.passed:
        return
    name, failed = next((name, r) for name, r in report.reports.items() if not r.passed)
    worst = failed.worst
    where = f"Worst element at {worst.describe()}" if worst is not None else "its LSE failed"
    raise AssertionError(
        f"Attention gradient {name} is not within the {failed.tier} band ({report.precision})!\n\n"
        f"Mismatched elements: {failed.failure_count} / {failed.elements_total}\n{where}\n"
        f"Greatest band usage: {failed.max_band_usage:.9g} (at most 1 allowed)\n"
        f"Rows certified: {failed.rows_checked} of {failed.rows_total} (seed {failed.seed})\n\n{report}")
