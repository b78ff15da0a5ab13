#!/usr/bin/env python3
"""Peak memory and time of a sampled check_attention on large inputs.

For each case (shape [B, H, L, E] fp32, `rows` sampled rows) it builds query, key, value and out in
the process, resets the peak RSS (/proc/self/clear_refs), certifies, and prints the call's time, the
time per certified row, the peak RSS (VmHWM) and its ratio to the four arrays' own bytes. The key is
one random vector per head repeated over S, so every row's softmax is uniform and the exact output is
each head's mean value row (out is that mean rounded to fp32): the certification does the work of
any other data (every dot product and value of the row), and out is known without an attention pass.
Each case runs in a fresh process, one at a time (a [8, 16, 8192, 128] case holds 2 GiB of inputs).
Not a test: a measurement.

    PYTHONPATH=build/release/python python3 bench/big_inputs.py [--case 8,16,8192,128:64 ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

DEFAULT_CASES = ("8,16,8192,128:64", "1,16,8192,128:1", "1,1,8192,128:1")


def vm_hwm_bytes() -> int:
    """The process's peak resident set (VmHWM) in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    """Resets VmHWM to the current RSS (Linux: 5 into /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def run_case(shape, rows, seed) -> dict:
    import attncheck

    B, H, L, E = shape
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((B, H, L, E), dtype=np.float32)
    key = np.empty((B, H, L, E), dtype=np.float32)
    key[...] = rng.standard_normal((B, H, 1, E), dtype=np.float32)  # one key per head: uniform softmax
    value = rng.standard_normal((B, H, L, E), dtype=np.float32)
    out = np.empty((B, H, L, E), dtype=np.float32)
    out[...] = value.mean(axis=2, keepdims=True, dtype=np.float64).astype(np.float32)
    inputs = query.nbytes + key.nbytes + value.nbytes + out.nbytes
    reset_peak()
    start = vm_hwm_bytes()
    t0 = time.perf_counter()
    report = attncheck.check_attention(out, query, key, value, rows=rows, seed=seed)
    seconds = time.perf_counter() - t0
    peak = vm_hwm_bytes()
    return {"shape": list(shape), "rows": rows, "passed": bool(report.passed), "rows_checked": report.rows_checked,
            "seconds": seconds, "seconds_per_row": seconds / max(report.rows_checked, 1), "input_bytes": inputs,
            "rss_before_call": start, "peak_rss": peak, "peak_over_inputs": peak / inputs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="B,H,L,E:rows (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a single case, in this process
    args = parser.parse_args()
    if args.one:
        dims, rows = args.one.split(":")
        print(json.dumps(run_case(tuple(int(d) for d in dims.split(",")), int(rows), args.seed)))
        return 0
    print(f"{'shape':>20} {'rows':>5} {'checked':>7} {'passed':>6} {'time s':>8} {'s/row':>8} {'inputs GiB':>10} "
          f"{'peak GiB':>9} {'peak/in':>7}")
    for case in args.case or DEFAULT_CASES:
        result = subprocess.run([sys.executable, __file__, "--one", case, "--seed", str(args.seed)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{case}: failed\n{result.stderr}", file=sys.stderr)
            return 1
        r = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"{str(r['shape']):>20} {r['rows']:>5} {r['rows_checked']:>7} {str(r['passed']):>6} "
              f"{r['seconds']:>8.2f} {r['seconds_per_row']:>8.3f} {r['input_bytes'] / 2**30:>10.2f} "
              f"{r['peak_rss'] / 2**30:>9.2f} {r['peak_over_inputs']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
