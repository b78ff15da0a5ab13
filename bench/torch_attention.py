#!/usr/bin/env python3
"""PyTorch's CPU attention beside attncheck's fast kernel, on bench_attention's shapes.

Times torch.nn.functional._scaled_dot_product_attention (PyTorch 1.13, Debian's python3-torch;
scaled_dot_product_attention on 2.x) on H = 8 heads, n = m, head_dim 64 and 128, causal and full,
fp32 and fp64, 1 and 2 threads, with the same useful-FLOP count as bench/bench_attention.cpp
(4·n·m·hd per head for full attention, 2·n·(n+1)·hd for causal). With --kernel it also runs that
bench_attention binary on the same configurations in the same session and prints both side by
side with their ratio, so the comparison holds on whatever machine runs it.

    /usr/bin/python3 bench/torch_attention.py --kernel build/bench/bench/bench_attention
    /usr/bin/python3 bench/torch_attention.py --sizes 512 2048 8192 --precisions fp32

Exit status: 0 after printing, 2 when PyTorch is not installed or an argument is wrong.
"""

import argparse
import json
import subprocess
import os
import sys
import tempfile
import time

HEADS = 8


def useful_flops(n, hd, causal):
    pairs = 0.5 * n * (n + 1) if causal else float(n) * n
    return 4.0 * pairs * hd * HEADS


def config_key(precision, causal, n, hd, threads):
    return f"{precision} {'causal' if causal else 'full  '} n={n} hd={hd} threads={threads}"


def torch_attention(torch):
    """The SDPA entry point this PyTorch has: (function, name)."""
    functional = torch.nn.functional
    if hasattr(functional, "scaled_dot_product_attention"):
        return (lambda q, k, v, causal: functional.scaled_dot_product_attention(q, k, v, is_causal=causal)), \
            "scaled_dot_product_attention"
    # 1.13: (query, key, value, attn_mask, dropout_p, need_attn_weights, is_causal) -> (out, weights)
    return (lambda q, k, v, causal: functional._scaled_dot_product_attention(q, k, v, None, 0.0, False, causal)[0]), \
        "_scaled_dot_product_attention"


def time_torch(torch, attention, precision, causal, n, hd, threads, min_seconds):
    torch.set_num_threads(threads)
    dtype = torch.float32 if precision == "fp32" else torch.float64
    generator = torch.Generator().manual_seed(20240601)
    q, k, v = (torch.randn(1, HEADS, n, hd, generator=generator, dtype=dtype) for _ in range(3))
    with torch.no_grad():
        attention(q, k, v, causal)  # warm-up: allocations, thread pool
        runs, start = 0, time.perf_counter()
        while True:
            attention(q, k, v, causal)
            runs += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds and runs >= 2:
                break
    return useful_flops(n, hd, causal) * runs / elapsed * 1e-9


def kernel_rates(binary, sizes, precisions):
    """Useful GFLOP/s of bench_attention's BM_Flash per configuration, from its JSON output."""
    templates = "|".join({"fp32": "float", "fp64": "double"}[p] for p in precisions)
    sizes_re = "|".join(str(n) for n in sizes)
    filter_re = f"BM_Flash<({templates})>/n:({sizes_re})/"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, f"--benchmark_filter={filter_re}", f"--benchmark_out={out.name}",
                        "--benchmark_out_format=json"], check=True, capture_output=True)
        report = json.load(out)
    rates = {}
    for entry in report["benchmarks"]:
        # name: BM_Flash<float>/n:2048/hd:64/causal:1/threads:2/real_time
        parts = dict(p.split(":") for p in entry["name"].split("/")[1:] if ":" in p)
        precision = "fp32" if "<float>" in entry["name"] else "fp64"
        key = config_key(precision, parts["causal"] == "1", int(parts["n"]), int(parts["hd"]), int(parts["threads"]))
        rates[key] = entry["GFLOP/s"]  # the counter is already in GFLOP/s
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 2048], help="n = m values (default 512 2048)")
    parser.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "fp64"], choices=["fp32", "fp64"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time per configuration (default 1)")
    parser.add_argument("--kernel", metavar="BENCH_ATTENTION", help="bench_attention binary to run beside PyTorch")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_attention.py: PyTorch is not installed (Debian: apt-get install python3-torch)", file=sys.stderr)
        return 2
    if args.kernel and not os.access(args.kernel, os.X_OK):
        print(f"torch_attention.py: --kernel {args.kernel}: not an executable (build it with "
              "cmake --preset bench && cmake --build --preset bench)", file=sys.stderr)
        return 2
    attention, name = torch_attention(torch)
    kernel = kernel_rates(args.kernel, args.sizes, args.precisions) if args.kernel else {}
    print(f"PyTorch {torch.__version__} {name}, H={HEADS}, useful GFLOP/s"
          + (" (kernel: bench_attention BM_Flash, same session)" if kernel else ""))
    header = f"  {'configuration':40} {'torch':>8}" + (f" {'kernel':>8} {'kernel/torch':>12}" if kernel else "")
    print(header)
    for precision in args.precisions:
        for n in args.sizes:
            for hd in args.head_dims:
                for causal in (True, False):
                    for threads in args.threads:
                        key = config_key(precision, causal, n, hd, threads)
                        rate = time_torch(torch, attention, precision, causal, n, hd, threads, args.min_seconds)
                        line = f"  {key:40} {rate:8.2f}"
                        if key in kernel:
                            line += f" {kernel[key]:8.2f} {kernel[key] / rate:11.1f}x"
                        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
