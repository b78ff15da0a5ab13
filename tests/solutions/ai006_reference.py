# AI006 reference solution (the lesson's algorithm): causal single-head attention, 4 decimals.
import math
import sys


def main():
    tokens = sys.stdin.read().split()
    n, d = int(tokens[0]), int(tokens[1])
    values = [float(x) for x in tokens[2:]]
    Q = [values[i * d:(i + 1) * d] for i in range(n)]
    K = [values[(n + i) * d:(n + i + 1) * d] for i in range(n)]
    V = [values[(2 * n + i) * d:(2 * n + i + 1) * d] for i in range(n)]
    scale = math.sqrt(d)
    for i in range(n):
        seen = range(VISIBLE_END(i, n))
        scores = [sum(a * b for a, b in zip(Q[i], K[j])) / scale for j in seen]
        top = SHIFT(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        row = [sum(exps[k] / total * V[j][c] for k, j in enumerate(seen)) for c in range(d)]
        print(" ".join(FORMAT(x) for x in row))


def VISIBLE_END(i, n):
    return i + 1


def SHIFT(scores):
    return max(scores)


def FORMAT(x):
    s = f"{x:.4f}"
    return "0.0000" if s == "-0.0000" else s


if __name__ == "__main__":
    main()
