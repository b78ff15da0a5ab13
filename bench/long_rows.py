#!/usr/bin/env python3
"""Long-row power table: fp32 attention kernels, correct and subtly wrong, at S = 1024, 4096, 16384.

For each kernel and key length it prints the worst band usage (max |out - exact| / δ) of both tiers,
certified and statistical, first with the kernel structure undeclared and then declared as the kernel
really is (single pass with sums in key order for the three-step kernels, key_tile 128 with tile sums for the
tiled ones).
A usage above 1 is a failure. Data: one query block of 8 rows x 2 heads, E = Ev = 64, N(0,1) values
from a fixed seed; exp_ulps = 3 (numpy's exp). Not a test: a measurement (README, "The two tiers").

    PYTHONPATH=build/release/python python3 bench/long_rows.py [--lengths 1024,4096,16384] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import attncheck

F16, F32 = np.float16, np.float32
TILE = 128


def to_bf16(x):
    """x rounded to bfloat16 (nearest, ties to even), returned as float32."""
    bits = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(F32)


def cubic_exp(x):
    """exp by 2^n · p(f), p a least-squares cubic for 2^f on [0, 1): relative error ~2e-4."""
    x = np.asarray(x, dtype=np.float64)
    t = x / np.log(2)
    n = np.floor(t)
    grid = np.linspace(0, 1, 200)
    p = np.polyfit(grid, 2 ** grid, 3)
    return np.ldexp(np.polyval(p, t - n), n.astype(np.int64)).astype(F32)


def scores(q, k):
    return (q @ np.swapaxes(k, -1, -2)) * F32(1 / np.sqrt(q.shape[-1]))


def three_step(q, k, v, *, exp=np.exp, round_pv=False, sum_fp16=False, round_out=None, pre=None):
    """Scores, max, exp, then the sum and P·V added one key at a time in key order (a CPU loop:
    the structure single_pass, ordered declares), divide; fp32 unless a bug says otherwise."""
    if pre is not None:
        q, k, v = pre(q, k, v)
    s = scores(q, k)
    p = exp(s - s.max(-1, keepdims=True)).astype(F32)
    total = np.zeros(p.shape[:-1] + (1,), dtype=F16 if sum_fp16 else F32)
    acc = np.zeros(p.shape[:-1] + (v.shape[-1],), dtype=F32)
    p16, v16 = p.astype(F16), v.astype(F16)
    for j in range(p.shape[-1]):
        total = total + (p16 if sum_fp16 else p)[..., j:j + 1]
        if round_pv:  # P, V and the product rounded to fp16, the sum in fp32
            acc = acc + (p16[..., j:j + 1] * v16[..., j, :][..., None, :]).astype(F32)
        else:
            acc = acc + p[..., j:j + 1] * v[..., j, :][..., None, :]
    out = (acc / total.astype(F32)).astype(F32)
    return round_out(out) if round_out else out


def tiled(q, k, v, *, round_alpha=None, acc_fp16=False):
    """FlashAttention-style online softmax over key tiles of 128: tile sums joined into the running
    sum and accumulator after the rescale (the structure key_tile=128, sum_chunk=128 declares)."""
    shape = q.shape[:-1]
    m = np.full(shape + (1,), -np.inf, dtype=F32)
    total = np.zeros(shape + (1,), dtype=F32)
    acc = np.zeros(shape + (v.shape[-1],), dtype=F32)
    s_all = scores(q, k)
    for start in range(0, k.shape[-2], TILE):
        s = s_all[..., start:start + TILE]
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        alpha = np.exp(m - m_new).astype(F32)
        if round_alpha:
            alpha = round_alpha(alpha)
        p = np.exp(s - m_new).astype(F32)
        total = alpha * total + p.sum(-1, keepdims=True, dtype=F32)
        acc = alpha * acc + p @ v[..., start:start + TILE, :]
        if acc_fp16:
            acc = acc.astype(F16).astype(F32)
        m = m_new
    return (acc / total).astype(F32)


def rounded_fp64(q, k, v):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    return ((w @ v) / w.sum(-1, keepdims=True)).astype(F32)


def bf16_inputs(which):
    def pre(q, k, v):
        return (to_bf16(q) if "q" in which else q, to_bf16(k) if "k" in which else k, to_bf16(v) if "v" in which else v)
    return pre


SINGLE = {"single_pass": True, "splits": 1, "ordered": True}
TILES = {"key_tile": TILE, "sum_chunk": TILE, "splits": 1}
KERNELS = [  # name, function, correct?, declared structure
    ("correct three-step", lambda q, k, v: three_step(q, k, v), True, SINGLE),
    ("correct tiled (key tile 128)", lambda q, k, v: tiled(q, k, v), True, TILES),
    ("correct fp64, rounded", rounded_fp64, True, SINGLE),
    ("P·V in fp16", lambda q, k, v: three_step(q, k, v, round_pv=True), False, SINGLE),
    ("output rounded to fp16", lambda q, k, v: three_step(q, k, v, round_out=lambda x: x.astype(F16).astype(F32)),
     False, SINGLE),
    ("denominator summed in fp16", lambda q, k, v: three_step(q, k, v, sum_fp16=True), False, SINGLE),
    ("exp by a cubic (~2e-4)", lambda q, k, v: three_step(q, k, v, exp=cubic_exp), False, SINGLE),
    ("Q and K rounded to bf16", lambda q, k, v: three_step(q, k, v, pre=bf16_inputs("qk")), False, SINGLE),
    ("V rounded to bf16", lambda q, k, v: three_step(q, k, v, pre=bf16_inputs("v")), False, SINGLE),
    ("output rounded to bf16", lambda q, k, v: three_step(q, k, v, round_out=to_bf16), False, SINGLE),
    ("tiled: rescale factor in bf16", lambda q, k, v: tiled(q, k, v, round_alpha=to_bf16), False, TILES),
    ("tiled: accumulator in fp16", lambda q, k, v: tiled(q, k, v, acc_fp16=True), False, TILES),
]


def cell(report) -> str:
    def one(v):
        return f"{v.max_band_usage:.3g}" + ("!" if not v.passed else "")
    return f"{one(report.certified)} / {one(report.statistical)}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="1024,4096,16384", help="key lengths S, comma separated")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",")]
    rng = np.random.default_rng(args.seed)
    data = {}
    for S in lengths:
        data[S] = tuple(rng.standard_normal(shape).astype(F32) for shape in ((1, 2, 8, 64), (1, 2, S, 64), (1, 2, S, 64)))
    print("band usage, certified / statistical (! = fails); undeclared, then declared structure")
    print("| fp32 kernel | declared | " + " | ".join(f"S = {S} undeclared | S = {S} declared" for S in lengths) + " |")
    print("|---|---|" + "---|---|" * len(lengths))
    wrong = 0
    started = time.time()
    for name, kernel, correct, structure in KERNELS:
        cells = []
        for S in lengths:
            q, k, v = data[S]
            out = kernel(q, k, v)
            plain = attncheck.check_attention(out, q, k, v, exp_ulps=3)
            declared = attncheck.check_attention(out, q, k, v, exp_ulps=3, **structure)
            cells += [cell(plain), cell(declared)]
            if correct and not (plain.certified.passed and plain.statistical.passed and declared.certified.passed
                                and declared.statistical.passed):
                wrong += 1
                print(f"FALSE ALARM: {name} at S = {S}", file=sys.stderr)
        label = ", ".join(f"{k}={v}" for k, v in structure.items())
        print(f"| {name} | {label} | " + " | ".join(cells) + " |", flush=True)
    print(f"({time.time() - started:.0f} s; {'no false alarm' if not wrong else f'{wrong} FALSE ALARMS'})")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
