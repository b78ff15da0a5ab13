#!/usr/bin/env python3
"""The oracle against an independent evaluation: mpmath at 80 significant digits.

For random AI006 and AI031 instances (fixed seeds, some built to produce exact ties), runs
`attncheck oracle` and `attncheck oracle --digits 30` and checks, string for string:
  * every canonical value equals the mpmath value rounded half-even to the problem's decimals
    (a tie is a value within 1e-60 of a boundary, far below the 1e-78 error of the evaluation);
  * every --digits 30 value equals the mpmath value to 30 significant digits;
  * the cells the oracle reports as "exact tie" are exactly the ties mpmath finds, and each of them
    is listed on stderr with its exact value to 25 digits.
Usage: oracle_mpmath.py ATTNCHECK [ROUNDS]. Exit 0 when everything agrees.
"""
import random
import re
import subprocess
import sys
from decimal import ROUND_HALF_EVEN, Decimal, getcontext

import mpmath

mpmath.mp.dps = 80
getcontext().prec = 120
TIE_DISTANCE = mpmath.mpf(10) ** -60


def decimal_text(rng, bound, decimals):
    scale = 10 ** decimals
    value = rng.randint(-bound * scale, bound * scale)
    if value == 0:
        return "0"
    digits = str(abs(value)).rjust(decimals + 1, "0")
    text = digits[:-decimals] + "." + digits[-decimals:] if decimals else digits
    return ("-" if value < 0 else "") + text


def random_instance(rng, problem, tie_prone):
    ai031 = problem == "ai031"
    n = rng.randint(1, 6 if ai031 else 8)
    d = rng.randint(1, 6)
    h = rng.choice([x for x in range(1, d + 1) if d % x == 0]) if ai031 else 1
    decimals = 4 if problem == "ai006" else 2
    rows = []
    for matrix in range(3):
        block = []
        for _ in range(n):
            if tie_prone and matrix < 2:
                row = [str(rng.randint(0, 1)) for _ in range(d)]  # many equal scores
            elif tie_prone:
                # V on a grid of half the output's last unit: means of equal-score groups hit boundaries.
                row = [decimal_text(rng, 2, decimals + 1) for _ in range(d)]
                row = [x if rng.random() < 0.5 else str(Decimal(x).quantize(Decimal(1).scaleb(-decimals)) +
                                                        Decimal(5).scaleb(-decimals - 1)) for x in row]
            else:
                bound = 8 if ai031 and matrix < 2 else rng.choice([1, 10, 1000])
                row = [decimal_text(rng, bound, rng.randint(0, 3)) for _ in range(d)]
            block.append(row)
        rows.append(block)
    mask = [[1 if rng.random() < 0.7 else 0 for _ in range(n)] for _ in range(n)] if ai031 else None
    header = f"{n} {d} {h}" if ai031 else f"{n} {d}"
    text = header + "\n" + "".join(" ".join(r) + "\n" for block in rows for r in block)
    if mask:
        text += "".join(" ".join(map(str, r)) + "\n" for r in mask)
    return text, n, d, h, rows, mask, decimals


def exact_values(n, d, h, rows, mask):
    """Every output value at 80 digits, straight from the textbook formula."""
    Q, K, V = ([[mpmath.mpf(x) for x in r] for r in block] for block in rows)
    hd = d // h
    sigma = mpmath.sqrt(hd)
    out = [[mpmath.mpf(0)] * d for _ in range(n)]
    for i in range(n):
        visible = [j for j in range(n) if (mask[i][j] if mask else j <= i)]
        if not visible:
            continue
        for g in range(h):
            cols = range(g * hd, (g + 1) * hd)
            scores = [mpmath.fsum(Q[i][c] * K[j][c] for c in cols) / sigma for j in visible]
            top = max(scores)
            weights = [mpmath.exp(s - top) for s in scores]
            total = mpmath.fsum(weights)
            for c in cols:
                out[i][c] = mpmath.fsum(w * V[j][c] for w, j in zip(weights, visible)) / total
    return out


def rounded(x, decimals):
    """(text, tie): x rounded half-even to `decimals` places, never "-0"."""
    scaled = x * 10 ** decimals
    low = int(mpmath.floor(scaled))
    fraction = scaled - low
    tie = abs(fraction - mpmath.mpf("0.5")) < TIE_DISTANCE
    if tie:
        m = low if low % 2 == 0 else low + 1
    else:
        m = low + 1 if fraction > 0.5 else low
    digits = str(abs(m)).rjust(decimals + 1, "0")
    text = digits[:-decimals] + "." + digits[-decimals:] if decimals else digits
    return ("-" if m < 0 else "") + text, tie


def significant(x, count):
    """x to `count` significant digits, half-even, positional; zero is "0"."""
    if x == 0:
        return "0"
    value = Decimal(mpmath.nstr(x, 78, strip_zeros=False))
    for _ in range(2):  # a carry (9.99 -> 10.0) moves the leading digit once
        quantum = Decimal(1).scaleb(value.adjusted() - count + 1)
        result = value.quantize(quantum, rounding=ROUND_HALF_EVEN)
        if result.adjusted() == value.adjusted():
            break
        value = result
    return format(result, "f")


AMBIGUOUS = re.compile(r"^ambiguous: row (\d+), column (\d+): exact (\S+), band \S+( \(exact tie\))?")


def run(binary, args, text):
    return subprocess.run([binary] + args, input=text.encode(), capture_output=True, check=False)


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    failures = 0
    ties_seen = 0
    for seed in range(rounds):
        rng = random.Random(seed)
        problem = "ai006" if seed % 2 == 0 else "ai031"
        text, n, d, h, rows, mask, decimals = random_instance(rng, problem, tie_prone=seed % 3 == 0)
        exact = exact_values(n, d, h, rows, mask)
        expected = [[rounded(x, decimals) for x in row] for row in exact]
        oracle = run(binary, ["oracle", "--problem", problem], text)
        digits = run(binary, ["oracle", "--problem", problem, "--digits", "30"], text)
        where = f"seed {seed} ({problem})"
        if oracle.returncode != 0 or digits.returncode != 0:
            print(f"{where}: oracle failed: {oracle.stderr.decode()}{digits.stderr.decode()}\n{text}")
            failures += 1
            continue
        want = "".join(" ".join(t for t, _ in row) + "\n" for row in expected)
        if oracle.stdout.decode() != want:
            print(f"{where}: canonical answer differs\n{text}--- oracle\n{oracle.stdout.decode()}--- mpmath\n{want}")
            failures += 1
        want_digits = "".join(" ".join(significant(x, 30) for x in row) + "\n" for row in exact)
        if digits.stdout.decode() != want_digits:
            print(f"{where}: --digits 30 differs\n{text}--- oracle\n{digits.stdout.decode()}--- mpmath\n{want_digits}")
            failures += 1
        reported_ties, listed = set(), {}
        for line in oracle.stderr.decode().splitlines():
            match = AMBIGUOUS.match(line)
            if not match:
                print(f"{where}: unexpected stderr line: {line}")
                failures += 1
                continue
            cell = (int(match.group(1)) - 1, int(match.group(2)) - 1)
            listed[cell] = match.group(3)
            if match.group(4):
                reported_ties.add(cell)
        true_ties = {(i, c) for i in range(n) for c in range(d) if expected[i][c][1]}
        ties_seen += len(true_ties)
        if reported_ties != true_ties:
            print(f"{where}: ties differ: oracle {sorted(reported_ties)}, mpmath {sorted(true_ties)}\n{text}")
            failures += 1
        for (i, c), value in listed.items():
            if value != significant(exact[i][c], 25):
                print(f"{where}: row {i + 1} column {c + 1}: exact {value}, mpmath {significant(exact[i][c], 25)}")
                failures += 1
    print(f"{rounds} instances, {ties_seen} exact ties, {failures} failures")
    if ties_seen == 0:
        print("the tie-prone instances produced no tie: the generator is broken")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
