#!/usr/bin/env python3
"""Whole-process time of `attncheck oracle` on a max AI006 case against an mpmath evaluation.

The mpmath side is the cross-check's textbook formula at 80 significant digits
(tests/verify/judge/oracle_mpmath.py: exact_values, then rounding half-even to 4 decimals), on the same
input; the attncheck side is the process from exec to exit (loading, reading, certifying,
printing). Two figures for it: the CPU time the kernel accounts to the process (user + system,
from wait4 on a child started with posix_spawn, so no copy of this Python process is charged to
it: what `perf stat` calls task-clock), and the wall time around subprocess.run, which adds
Python's fork, exec and pipe handling (a few ms once mpmath has grown the interpreter). Both sides run in this
session, alternately, and the ratios of the medians are printed, so the figures hold on whatever
machine runs them. The script also checks that both give the same answer.

    /usr/bin/python3 bench/oracle_vs_mpmath.py build/release/attncheck [--input FILE] [--runs N]

Without --input it asks the binary for `gen -p ai006 --profile max --seed 7` (n = 80, d = 16).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "verify"))
import oracle_mpmath  # noqa: E402  (the cross-check's evaluation: one formula, two uses)


def parse_ai006(text):
    lines = text.split("\n")
    n, d = map(int, lines[0].split())
    numbers = [line.split() for line in lines[1:1 + 3 * n]]
    return n, d, [numbers[0:n], numbers[n:2 * n], numbers[2 * n:3 * n]]


def mpmath_answer(text):
    n, d, rows = parse_ai006(text)
    values = oracle_mpmath.exact_values(n, d, 1, rows, None)
    return "".join(" ".join(oracle_mpmath.rounded(x, 4)[0] for x in row) + "\n" for row in values)


def spawned_cpu_time(argv, text):
    """Runs argv with text on stdin; returns (user + system seconds of that process, its stdout)."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, stdin_read, 0), (os.POSIX_SPAWN_DUP2, stdout_write, 1),
               (os.POSIX_SPAWN_CLOSE, stdin_write), (os.POSIX_SPAWN_CLOSE, stdout_read)]
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    os.close(stdin_read)
    os.close(stdout_write)
    with os.fdopen(stdin_write, "w", encoding="ascii") as child_in:
        child_in.write(text)  # a max AI006 input fits the pipe; the oracle reads it all first
    with os.fdopen(stdout_read, encoding="ascii") as child_out:
        output = child_out.read()
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} exited with status {status}")
    return usage.ru_utime + usage.ru_stime, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attncheck", help="the attncheck binary")
    parser.add_argument("--input", help="an AI006 input file (default: gen's max profile, seed 7)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each side (default 5)")
    args = parser.parse_args()
    if args.input:
        with open(args.input, encoding="ascii") as f:
            text = f.read()
    else:
        text = subprocess.run([args.attncheck, "gen", "-p", "ai006", "--profile", "max", "--seed", "7"],
                              check=True, capture_output=True, text=True).stdout
    oracle_times, oracle_cpu, mpmath_times = [], [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        oracle = subprocess.run([args.attncheck, "oracle", "-p", "ai006"], input=text, check=True,
                                capture_output=True, text=True).stdout
        oracle_times.append(time.perf_counter() - start)
        cpu, spawned = spawned_cpu_time([args.attncheck, "oracle", "-p", "ai006"], text)
        if spawned != oracle:
            print("oracle_vs_mpmath.py: two runs of the oracle differ", file=sys.stderr)
            return 1
        oracle_cpu.append(cpu)
        start = time.perf_counter()
        reference = mpmath_answer(text)
        mpmath_times.append(time.perf_counter() - start)
    if oracle != reference:
        print("oracle_vs_mpmath.py: the answers differ", file=sys.stderr)
        return 1
    oracle_median, mpmath_median = statistics.median(oracle_times), statistics.median(mpmath_times)
    cpu_median = statistics.median(oracle_cpu)
    print(f"max AI006 (n=80, d=16), median of {args.runs}: mpmath 80 digits {mpmath_median * 1e3:.1f} ms; "
          f"attncheck oracle, whole process: CPU {cpu_median * 1e3:.2f} ms (ratio {mpmath_median / cpu_median:.1f}x), "
          f"wall through subprocess.run {oracle_median * 1e3:.2f} ms (ratio {mpmath_median / oracle_median:.1f}x); "
          f"answers identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
