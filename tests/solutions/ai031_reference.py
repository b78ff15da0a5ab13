# AI031 reference solution (the lesson's algorithm): masked multi-head attention, 2 decimals.
import math
import sys


def main():
    tokens = sys.stdin.read().split()
    n, d, h = int(tokens[0]), int(tokens[1]), int(tokens[2])
    values = [float(x) for x in tokens[3:3 + 3 * n * d]]
    Q = [values[i * d:(i + 1) * d] for i in range(n)]
    K = [values[(n + i) * d:(n + i + 1) * d] for i in range(n)]
    V = [values[(2 * n + i) * d:(2 * n + i + 1) * d] for i in range(n)]
    mask = [int(x) for x in tokens[3 + 3 * n * d:]]
    hd = d // h
    scale = math.sqrt(HEAD_SCALE(d, hd))
    out = [[0.0] * d for _ in range(n)]
    for i in range(n):
        visible = [j for j in range(n) if mask[i * n + j] == 1]
        if not visible:
            visible = ALL_MASKED(n)
            if not visible:
                continue
        for g in range(h):
            cols = HEAD_COLUMNS(g, h, hd)
            scores = [sum(Q[i][c] * K[j][c] for c in cols) / scale for j in visible]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            total = sum(exps)
            for e, j in zip(exps, visible):
                for c, c_out in zip(cols, OUTPUT_COLUMNS(g, h, hd)):
                    out[i][c_out] += e / total * V[j][c]
    for row in out:
        print(" ".join(FORMAT(x) for x in row))


def HEAD_SCALE(d, hd):
    return hd


def ALL_MASKED(n):
    return []


def HEAD_COLUMNS(g, h, hd):
    return range(g * hd, (g + 1) * hd)


def OUTPUT_COLUMNS(g, h, hd):
    return range(g * hd, (g + 1) * hd)


def FORMAT(x):
    s = f"{x:.2f}"
    return "0.00" if s == "-0.00" else s


if __name__ == "__main__":
    main()
