"""attncheck.conformance(fn): named case families for any function with the SDPA signature.

fn(query, key, value, **kwargs) is called with only the keyword arguments a case needs (attn_mask,
is_causal, causal_alignment="bottom-right", enable_gqa; FlashAttention's window_size, alibi_slopes,
softcap; sinks), so a function without, say, enable_gqa
still runs every other family; a family whose keyword fn does not accept is reported
"skipped (fn lacks enable_gqa)", never passed. Each family draws its cases from the strategies of
attncheck.strategies and certifies fn's output with check_attention; Hypothesis shrinks the first
failing case to a small counterexample. With grads=True each family also runs as "<family>_backward":
fn is called on CPU tensors that require grad, a drawn dout is backpropagated through PyTorch's
autograd, and out, dq, dk and dv (and dsinks: sinks are then a float32 leaf that requires grad) are
certified with check_attention_backward.
"""

from __future__ import annotations

import dataclasses
import inspect
import random

import numpy as np
from hypothesis import HealthCheck, errors, find, settings

from . import check_attention, check_attention_backward
from ._report import Report
from .strategies import AttentionInputs, Recipe, from_recipe

_DTYPE_OF_PRECISION = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "float32"}

# Family -> (what its cases contain, the keywords fn must accept). Values are "normal" (edge-biased
# small numbers) unless the family is about values; no family but gqa_mapping uses GQA, and only
# fully_masked_row (and causal_bottom_right through L > S, never: S >= L there) has rows without keys.
# Sequences are at most 8 long (or max_len, when shorter) but in the tile families, which draw L and
# S (independently, so L != S too) from strategies.TILE_BOUNDARIES up to conformance's max_len.
_ISOLATED = dict(mask_kinds=("none",), alignments=(), gqa=False, scenarios=("normal",), scales=False,
                 masked_rows="never", max_heads=2, max_len=8, max_dim=8, tile_lengths=False, dense_above=None)
_TILED = dict(tile_lengths=True, dense_above=64, long=True, max_heads=1)
FAMILIES = {
    "fully_masked_row": (dict(mask_kinds=("bool",), masked_rows="always"), ("attn_mask",)),
    "causal_top_left": (dict(alignments=("top-left",), causal_only=True), ("is_causal",)),
    "causal_bottom_right": (dict(alignments=("bottom-right",), causal_only=True), ("is_causal", "causal_alignment")),
    "gqa_mapping": (dict(gqa=True, gqa_only=True, max_heads=4), ("enable_gqa",)),
    "additive_neg_inf_mask": (dict(mask_kinds=("additive",)), ("attn_mask",)),
    "bool_mask": (dict(mask_kinds=("bool",)), ("attn_mask",)),
    "key_padding": (dict(mask_kinds=("key_padding",)), ("attn_mask",)),
    "huge_scores": (dict(scenarios=("near_overflow",)), ()),
    "underflowing_weights": (dict(scenarios=("huge_gap",)), ()),
    "single_key": (dict(single_key=True), ()),
    "equal_scores": (dict(scenarios=("equal_scores",)), ()),
    "cross_attention": (dict(cross=True), ()),
    "tile_boundaries": (_TILED, ()),
    "tile_boundaries_causal": (dict(_TILED, alignments=("top-left",), causal_only=True), ("is_causal",)),
    "sliding_window": (dict(windows=True, windows_only=True, max_len=12), ("window_size",)),
    "alibi": (dict(alibi=True, max_len=12), ("alibi_slopes",)),
    "softcap": (dict(softcap=True), ("softcap",)),
    "sinks": (dict(sinks=True, masked_rows="maybe", mask_kinds=("none", "bool")), ("sinks",)),
}


@dataclasses.dataclass
class FamilyResult:
    """One family's outcome: "passed", "failed" (with the shrunk counterexample) or "skipped"."""

    family: str
    status: str
    cases: int  #: calls of fn, shrinking included
    reason: str = ""  #: why it failed (the worst element, or fn's exception) or was skipped
    counterexample: AttentionInputs | None = None
    report: Report | None = None

    def __str__(self) -> str:
        if self.status == "passed":
            return f"passed ({self.cases} cases)"
        if self.status == "skipped":
            return f"skipped ({self.reason})"
        example = repr(self.counterexample).replace("\n", "\n    ")
        return f"FAILED: {self.reason}\n    counterexample: {example}"


class ConformanceTable(dict):
    """family -> FamilyResult. bool(table) is True when no family failed (skipped ones are listed apart)."""

    @property
    def failed(self) -> list:
        return [name for name, result in self.items() if result.status == "failed"]

    @property
    def skipped(self) -> list:
        return [name for name, result in self.items() if result.status == "skipped"]

    @property
    def passed(self) -> list:
        return [name for name, result in self.items() if result.status == "passed"]

    def __bool__(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        width = max(map(len, self), default=0)
        return "\n".join(f"{name:<{width}}  {result}" for name, result in self.items())


class _Skip(Exception):
    pass


def _accepts(fn, keyword):
    """True/False when fn's signature says, None when it has none (builtins): tried at the call."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return any(p.kind == p.VAR_KEYWORD or (p.name == keyword and p.kind != p.POSITIONAL_ONLY) for p in parameters)


def _to_arrays(inputs: AttentionInputs, precision: str, array_type: str) -> AttentionInputs:
    if array_type == "numpy":
        return inputs
    import torch  # only for array_type="torch"

    def convert(x):
        if x is None or x.dtype == np.bool_:
            return None if x is None else torch.from_numpy(x)
        tensor = torch.from_numpy(np.ascontiguousarray(x))
        return tensor.bfloat16() if precision == "bf16" else tensor

    return dataclasses.replace(inputs, query=convert(inputs.query), key=convert(inputs.key),
                               value=convert(inputs.value), attn_mask=convert(inputs.attn_mask),
                               dout=convert(inputs.dout),
                               sinks=None if inputs.sinks is None else torch.tensor(inputs.sinks, dtype=torch.float32))


def _call(fn, case, arguments):
    """fn(*arguments, **case.sdpa_kwargs()) and its out; (None, reason) when fn raised; _Skip when fn
    refuses a keyword it was given."""
    kwargs = case.sdpa_kwargs()
    try:
        out = fn(*arguments, **kwargs)
    except TypeError as error:
        missing = [k for k in kwargs if f"'{k}'" in str(error) or f" {k}" in str(error)]
        if missing and "keyword" in str(error):
            raise _Skip(f"fn lacks {missing[0]}") from None
        return None, f"fn raised TypeError: {error}"
    except Exception as error:  # noqa: BLE001 - any exception of fn is a failure of the case
        return None, f"fn raised {type(error).__name__}: {error}"
    if isinstance(out, (tuple, list)):  # (out, weights), as PyTorch 1.13's private function returns
        out = out[0]
    return out, ""


def _run_backward_case(fn, inputs, precision):
    """(failed, reason, report) for one case of a _backward family: fn forward and backward by autograd."""
    import torch

    case = _to_arrays(inputs, precision, "torch")
    leaves = [x.detach().clone().requires_grad_(True) for x in (case.query, case.key, case.value)]
    sinks = None
    if case.sinks is not None:  # a float32 leaf too: its gradient is certified as dsinks
        sinks = torch.tensor(np.asarray(case.sinks, dtype=np.float32), requires_grad=True)
        case = dataclasses.replace(case, sinks=sinks)
    out, reason = _call(fn, case, leaves)
    if out is None:
        return True, reason, None
    try:
        out.backward(case.dout)
    except Exception as error:  # noqa: BLE001 - fn's backward raising fails the case
        return True, f"backward raised {type(error).__name__}: {error}", None
    named = list(zip(("query", "key", "value"), leaves)) + ([("sinks", sinks)] if sinks is not None else [])
    missing = [name for name, x in named if x.grad is None]
    if missing:
        return True, f"no gradient reached {', '.join(missing)}", None
    kwargs = case.kwargs()
    if sinks is not None:
        kwargs.update(sinks=sinks.detach(), dsinks=sinks.grad)
    try:
        report = check_attention_backward(*(x.grad for x in leaves), *(x.detach() for x in leaves), case.dout,
                                          out=out.detach(), **kwargs, precision=precision)
    except (TypeError, ValueError) as error:
        return True, f"gradients refused: {error}", None
    if report.passed:
        return False, "", report
    name, failed = next((name, r) for name, r in report.reports.items() if not r.passed)
    worst = failed.worst.describe() if failed.worst is not None else "its LSE"
    return True, f"{name}: {worst}", report


def _run_case(fn, inputs, precision, array_type):
    """(failed, reason, report) for one case; raises _Skip when fn refuses a keyword it was given."""
    case = _to_arrays(inputs, precision, array_type)
    out, reason = _call(fn, case, (case.query, case.key, case.value))
    if out is None:
        return True, reason, None
    try:
        report = check_attention(out, case.query, case.key, case.value, **case.kwargs(), precision=precision)
    except (TypeError, ValueError) as error:
        return True, f"output refused: {error}", None
    return (not report.passed), ("" if report.passed else report.worst.describe()), report


def conformance(fn, precision="fp32", cases=200, seed=0, *, families=None, array_type="numpy",
                max_len=1025, grads=False) -> ConformanceTable:
    """Runs each family (up to `cases` cases each, seeded) against fn and returns the table.

    precision: "fp64", "fp32", "fp16" or "bf16" (the inputs' dtype and the band's arithmetic; bf16
    needs array_type="torch"). array_type: "numpy" arrays or "torch" CPU tensors for fn.
    families: a subset of FAMILIES' names (default all, in order). max_len: the longest query and
    key sequence of any case; the tile families draw their lengths at the tile boundaries up to it
    (1, 2, 15-17, 31-33, 63-65, 127-129, 255-257, 1025), the others stay at 8 or below.
    grads: also run each family as "<family>_backward", certifying fn's autograd gradients of a
    drawn dout (needs array_type="torch").
    """
    if precision not in _DTYPE_OF_PRECISION:
        raise ValueError(f"precision: expected fp64, fp32, fp16 or bf16, got {precision!r}")
    if array_type not in ("numpy", "torch"):
        raise ValueError(f"array_type: expected 'numpy' or 'torch', got {array_type!r}")
    if precision == "bf16" and array_type != "torch":
        raise ValueError("precision: bf16 inputs need array_type='torch' (numpy has no bfloat16)")
    if grads and array_type != "torch":
        raise ValueError("grads: the backward families need array_type='torch' (PyTorch's autograd)")
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len: expected a positive int, got {max_len!r}")
    names = list(FAMILIES) if families is None else list(families)
    for name in names:
        if name not in FAMILIES:
            raise ValueError(f"families: unknown family {name!r} (known: {', '.join(FAMILIES)})")
    table = ConformanceTable()
    for number, name in enumerate(names):
        table[name] = _run_family(fn, name, precision, cases, seed + number, array_type, max_len)
    if grads:
        for number, name in enumerate(names):
            table[f"{name}_backward"] = _run_family(fn, name, precision, cases, seed + len(names) + number,
                                                    array_type, max_len, backward=True)
    return table


def _run_family(fn, name, precision, cases, seed, array_type, max_len, backward=False) -> FamilyResult:
    overrides, keywords = FAMILIES[name]
    label = f"{name}_backward" if backward else name
    for keyword in keywords:
        if _accepts(fn, keyword) is False:
            return FamilyResult(label, "skipped", 0, f"fn lacks {keyword}")
    fields = {**_ISOLATED, **overrides, "dtype": _DTYPE_OF_PRECISION[precision], "grads": backward}
    fields["max_len"] = max_len if fields.pop("long", False) else min(fields["max_len"], max_len)
    recipe = Recipe(**fields)
    calls = 0

    def run(inputs):
        return _run_backward_case(fn, inputs, precision) if backward else _run_case(fn, inputs, precision,
                                                                                     array_type)

    def fails(inputs):
        nonlocal calls
        calls += 1
        return run(inputs)[0]

    options = settings(max_examples=cases, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    try:
        counterexample = find(from_recipe(recipe), fails, settings=options, random=random.Random(seed))
    except errors.NoSuchExample:
        return FamilyResult(label, "passed", calls)
    except _Skip as skip:
        return FamilyResult(label, "skipped", calls, str(skip))
    _, reason, report = run(counterexample)
    return FamilyResult(label, "failed", calls, reason, counterexample, report)


conformance.families = tuple(FAMILIES)  #: the family names, in the order conformance runs them
