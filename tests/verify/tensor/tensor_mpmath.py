#!/usr/bin/env python3
"""The tensor oracle (enclose_row) against an independent evaluation: mpmath at 60 digits.

Random small TensorProblems (fixed seed) with exactly representable inputs in fp64, fp32, fp16 and
bf16 (random integers times powers of two, within each format's precision and range), boolean and
additive masks (-inf included) broadcast from rank 2..4, top-left and bottom-right causal masking
with L != S, key lengths, GQA, both memory layouts, the default scale 1/sqrt(E) and explicit ones.
Each is written in tensor_dump's input format (hexadecimal floats: exact) and tensor_dump prints
the oracle's midpoint and radius of every output. The script recomputes every output from the
exact rational inputs with PyTorch's scaled_dot_product_attention rules, written here on their own:
  * a boolean mask's true means the key takes part; an additive mask is added to the scaled scores
    (-inf excludes the key); masks broadcast right-aligned to [B, Hq, L, S];
  * causal top-left keeps key j for query i iff j <= i, bottom-right iff j <= i + S - L;
  * key_lengths[b] excludes keys j >= key_lengths[b];
  * query head h reads key/value head h // (Hq / Hkv);
  * a row where no key takes part is all zeros.
Checks |mid - exact| <= radius + 1e-20 * max(1, |exact|) for every element, and that the oracle's
row numbering, emptiness and key counts agree.
Usage: tensor_mpmath.py TENSOR_DUMP. Exit 0 when everything agrees.
"""
import itertools
import random
import struct
import subprocess
import sys
from fractions import Fraction

import mpmath

mpmath.mp.dps = 60
SLACK = mpmath.mpf(10) ** -20
PROBLEMS = 30
SEED = 20240611

# precision (significand bits, implicit one included), emin, emax
FORMATS = {"fp64": (53, -1022, 1023), "fp32": (24, -126, 127), "fp16": (11, -14, 15), "bf16": (8, -126, 127)}
DTYPES = ["fp64", "fp32", "fp16", "bf16"]
MASKS = ["none", "boolean", "additive"]
CAUSALS = ["none", "top_left", "bottom_right"]


def representable(x, dtype):
    """Is the double x a value of dtype? (checked with the platform's own conversions)"""
    try:
        if dtype == "fp64":
            return True
        if dtype == "fp16":
            return struct.unpack("<e", struct.pack("<e", x))[0] == x
        as32 = struct.unpack("<f", struct.pack("<f", x))[0]
        if as32 != x:
            return False
        return dtype == "fp32" or struct.unpack("<I", struct.pack("<f", x))[0] & 0xFFFF == 0
    except OverflowError:
        return False


def random_value(rng, dtype, low, high):
    """m * 2^k with |m| < 2^bits, bits <= the format's precision, top bit's exponent in [low, high]."""
    precision, emin, emax = FORMATS[dtype]
    bits = rng.randint(1, precision)
    m = rng.randint(-(2 ** bits - 1), 2 ** bits - 1)
    top = rng.randint(max(low, emin - precision + bits), min(high, emax))
    x = float(Fraction(m) * Fraction(2) ** (top - bits + 1))
    assert representable(x, dtype), (x, dtype)
    return x


def hexf(x):
    return "-inf" if x == float("-inf") else x.hex()


def random_problem(rng, k):
    dtype = DTYPES[k % 4]
    mask_kind = MASKS[k % 3]
    causal = CAUSALS[(k // 3) % 3]
    wide = k % 7 == 6  # values across much of the format's range
    low, high = (-24, 15) if wide else (-4, 3)
    batch = rng.randint(1, 2)
    kv_heads = rng.randint(1, 2)
    group = rng.randint(1, 3)
    q_heads = kv_heads * group
    L = rng.randint(1, 6)
    S = rng.randint(2, 6)
    if causal != "none" and L == S and rng.random() < 0.7:
        S = S % 6 + 1 if rng.random() < 0.5 else max(1, S - 2)
    E = rng.randint(1, 6)
    Ev = rng.randint(1, 4)
    layout = rng.choice(["bhse", "bshe"])
    scale = None if rng.random() < 0.5 else rng.choice([0.125, 0.3, 1.75, -0.5, rng.uniform(0.05, 2.0)])

    def tensor(heads, rows, width):
        return [[[[random_value(rng, dtype, low, high) for _ in range(width)] for _ in range(rows)]
                 for _ in range(heads)] for _ in range(batch)]

    Q = tensor(q_heads, L, E)
    K = tensor(kv_heads, S, E)
    V = tensor(kv_heads, S, Ev)
    mask_shape, mask = None, None
    if mask_kind != "none":
        rank = rng.randint(2, 4)
        full = [batch, q_heads, L, S][4 - rank:]
        mask_shape = [d if rng.random() < 0.7 else 1 for d in full]
        mask = {}
        for index in itertools.product(*(range(d) for d in mask_shape)):
            if mask_kind == "boolean":
                mask[index] = 1 if rng.random() < 0.8 else 0
            else:
                mask[index] = float("-inf") if rng.random() < 0.15 else random_value(rng, dtype, -3, 4)
    key_lengths = None
    if rng.random() < 0.3:
        key_lengths = [0 if rng.random() < 0.15 else rng.randint(1, S) for _ in range(batch)]
    rows = None
    if k % 5 == 4:
        count = batch * q_heads * L
        rows = sorted(rng.sample(range(count), max(1, count // 2)))
    return dict(dtype=dtype, layout=layout, causal=causal, scale=scale, mask_kind=mask_kind, batch=batch,
                q_heads=q_heads, kv_heads=kv_heads, L=L, S=S, E=E, Ev=Ev, Q=Q, K=K, V=V, mask_shape=mask_shape,
                mask=mask, key_lengths=key_lengths, rows=rows)


def serialize(p):
    def flat(T, heads, rows, width):
        out = []
        for b in range(p["batch"]):
            if p["layout"] == "bhse":
                order = ((h, r) for h in range(heads) for r in range(rows))
            else:
                order = ((h, r) for r in range(rows) for h in range(heads))
            for h, r in order:
                out.extend(hexf(T[b][h][r][c]) for c in range(width))
        return " ".join(out)

    scale = "default" if p["scale"] is None else hexf(p["scale"])
    lines = [" ".join(map(str, [p["batch"], p["q_heads"], p["kv_heads"], p["L"], p["S"], p["E"], p["Ev"],
                                p["dtype"], p["layout"], p["causal"], scale, p["mask_kind"]])),
             "query " + flat(p["Q"], p["q_heads"], p["L"], p["E"]),
             "key " + flat(p["K"], p["kv_heads"], p["S"], p["E"]),
             "value " + flat(p["V"], p["kv_heads"], p["S"], p["Ev"])]
    if p["mask"] is not None:
        values = [p["mask"][index] for index in itertools.product(*(range(d) for d in p["mask_shape"]))]
        text = [str(x) for x in values] if p["mask_kind"] == "boolean" else [hexf(x) for x in values]
        lines.append(f"mask {len(p['mask_shape'])} " + " ".join(map(str, p["mask_shape"])) + " " + " ".join(text))
    if p["key_lengths"] is not None:
        lines.append("key_lengths " + " ".join(map(str, p["key_lengths"])))
    if p["rows"] is not None:
        lines.append("rows " + " ".join(map(str, p["rows"])) + " ;")
    return "\n".join(lines) + "\n"


def mask_entry(p, b, h, i, j):
    shape = p["mask_shape"]
    full = (b, h, i, j)[4 - len(shape):]
    return p["mask"][tuple(0 if d == 1 else x for d, x in zip(shape, full))]


def reference_row(p, b, h, i):
    """(keys, outputs) of row (b, h, i) at 60 digits from the exact inputs."""
    kvh = h // (p["q_heads"] // p["kv_heads"])
    L, S = p["L"], p["S"]
    keys, biases = [], []
    for j in range(S):
        if p["key_lengths"] is not None and j >= p["key_lengths"][b]:
            continue
        if p["causal"] == "top_left" and not j <= i:
            continue
        if p["causal"] == "bottom_right" and not j <= i + S - L:
            continue
        bias = mpmath.mpf(0)
        if p["mask_kind"] == "boolean" and mask_entry(p, b, h, i, j) != 1:
            continue
        if p["mask_kind"] == "additive":
            m = mask_entry(p, b, h, i, j)
            if m == float("-inf"):
                continue
            bias = mpmath.mpf(m)  # exact
        keys.append(j)
        biases.append(bias)
    if not keys:
        return keys, [mpmath.mpf(0)] * p["Ev"]
    scale = 1 / mpmath.sqrt(p["E"]) if p["scale"] is None else mpmath.mpf(p["scale"])
    q = [Fraction(x) for x in p["Q"][b][h][i]]
    scores = []
    for j, bias in zip(keys, biases):
        dot = sum((qc * Fraction(kc) for qc, kc in zip(q, p["K"][b][kvh][j])), Fraction(0))  # exact
        scores.append(mpmath.mpf(dot.numerator) / dot.denominator * scale + bias)
    top = max(scores)
    weights = [mpmath.exp(s - top) for s in scores]
    total = mpmath.fsum(weights)
    outputs = [mpmath.fsum(w * mpmath.mpf(p["V"][b][kvh][j][c]) for w, j in zip(weights, keys)) / total
               for c in range(p["Ev"])]
    return keys, outputs


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tensor_mpmath.py TENSOR_DUMP")
    dump = sys.argv[1]
    rng = random.Random(SEED)
    failures, elements, empty_rows, capped_rows = [], 0, 0, 0
    worst, worst_where, widest = mpmath.mpf(0), "", mpmath.mpf(0)
    for k in range(PROBLEMS):
        p = random_problem(rng, k)
        text = serialize(p)
        run = subprocess.run([dump], input=text, capture_output=True, text=True)
        tag = (f"problem {k} ({p['dtype']} {p['layout']} causal={p['causal']} mask={p['mask_kind']} "
               f"B={p['batch']} Hq={p['q_heads']} Hkv={p['kv_heads']} L={p['L']} S={p['S']} E={p['E']} Ev={p['Ev']} "
               f"scale={'default' if p['scale'] is None else p['scale']})")
        if run.returncode != 0:
            failures.append(f"{tag}: tensor_dump exited {run.returncode}: {run.stderr.strip()}")
            continue
        expected_rows = p["rows"] if p["rows"] is not None else list(range(p["batch"] * p["q_heads"] * p["L"]))
        seen_rows, outputs, current = [], {}, None
        for line in run.stdout.splitlines():
            fields = line.split()
            if fields[0] == "row":
                r, b, h, i = map(int, fields[1:5])
                seen_rows.append(r)
                # Row r is (b, h, i) with r = (b*Hq + h)*L + i.
                want = (r // (p["L"] * p["q_heads"]), (r // p["L"]) % p["q_heads"], r % p["L"])
                if (b, h, i) != want:
                    failures.append(f"{tag} row {r}: oracle says (b, h, i) = {(b, h, i)}, expected {want}")
                keys, ref = reference_row(p, *want)
                empty = fields[5] == "empty"
                count = 0 if empty else int(fields[5].split("=")[1])
                if empty != (not keys) or count != len(keys):
                    failures.append(f"{tag} row {r} (b={want[0]} h={want[1]} i={want[2]}): oracle has "
                                    f"{fields[5]}, expected {len(keys)} keys {keys}")
                empty_rows += empty
                capped_rows += fields[7] == "capped=1"
                current = (r, want, ref)
            elif fields[0] == "out":
                r, c = int(fields[1]), int(fields[2])
                mid, radius = mpmath.mpf(fields[3]), mpmath.mpf(fields[4])
                assert current is not None and current[0] == r
                exact = current[2][c]
                gap = abs(mid - exact)
                allowed = radius + SLACK * max(1, abs(exact))
                elements += 1
                relative = gap / max(1, abs(exact))
                if relative > worst:
                    worst, worst_where = relative, f"{tag} row {r} col {c}"
                widest = max(widest, radius)
                if gap > allowed:
                    b, h, i = current[1]
                    failures.append(f"{tag} row {r} (b={b} h={h} i={i}) col {c}: oracle "
                                    f"{fields[3]} +- {fields[4]}, mpmath {mpmath.nstr(exact, 25)}, "
                                    f"|difference| {mpmath.nstr(gap, 5)} > allowed {mpmath.nstr(allowed, 5)}")
        if seen_rows != expected_rows:
            failures.append(f"{tag}: oracle printed rows {seen_rows}, expected {expected_rows}")
    print(f"{PROBLEMS} problems, {elements} elements, max discrepancy {mpmath.nstr(worst, 3)} "
          f"(relative to max(1, |value|); largest radius {mpmath.nstr(widest, 3)}; {empty_rows} fully masked rows; "
          f"{capped_rows} capped rows)")
    if worst_where:
        print(f"largest discrepancy at {worst_where}")
    for failure in failures:
        print("MISMATCH " + failure, file=sys.stderr)
    if failures:
        print(f"{len(failures)} mismatches", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
