"""python3 -m attncheck check --query q.npy --key k.npy --value v.npy --out o.npy [options]

Certifies an attention output saved with numpy.save. Exit status: 0 passed, 1 failed (the worst
element named on stderr), 2 usage error, 3 bad input (unreadable file, wrong shape or dtype); every
error is one line on stderr. The report's summary goes to stdout, its JSON to --json FILE, its picture
(Report.to_html: per head a heatmap of the band usage, the histogram, the failures) to --html FILE.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from . import check_attention
from ._inputs import ALIGNMENTS, PRECISIONS

PASSED, FAILED, USAGE, BAD_INPUT = 0, 1, 2, 3


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, not argparse's usage block
        raise _Usage(message)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python3 -m attncheck", description="Certify attention outputs against an exact oracle.")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    check = commands.add_parser("check", help="certify OUT = SDPA(QUERY, KEY, VALUE, ...) from .npy files")
    for name in ("query", "key", "value", "out"):
        check.add_argument(f"--{name}", required=True, metavar="FILE.npy")
    check.add_argument("--attn-mask", metavar="FILE.npy", help="boolean (True = takes part) or additive mask")
    check.add_argument("--is-causal", action="store_true")
    check.add_argument("--causal-alignment", choices=ALIGNMENTS, default="top-left")
    check.add_argument("--window-size", type=int, nargs=2, default=(-1, -1), metavar=("LEFT", "RIGHT"),
                       help="sliding window (FlashAttention's window_size, bottom-right aligned): query i sees keys "
                            "i+S-L-LEFT .. i+S-L+RIGHT; -1 an unbounded side (default -1 -1)")
    check.add_argument("--softcap", type=float, default=0.0,
                       help="FlashAttention's logit softcap c: scores become c·tanh(s/c) before the mask (default 0: off)")
    check.add_argument("--sinks", metavar="FILE.npy", help="attention sinks: [Hq] float32 logits in every denominator")
    check.add_argument("--scale", type=float, help="multiplier of Q·Kᵀ (default 1/√E)")
    check.add_argument("--enable-gqa", action="store_true")
    check.add_argument("--key-lengths", metavar="N,N,...", help="per batch item: keys j >= N are masked")
    check.add_argument("--precision", choices=PRECISIONS, help="default: from the output's dtype")
    check.add_argument("--rows", type=_positive, help="certify a seeded sample of this many rows (default all)")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--tier", choices=("certified", "statistical"), default="certified",
                       help="the tier that decides the verdict (both are reported; default certified)")
    check.add_argument("--alpha", type=float, default=1e-9,
                       help="the statistical tier's false-alarm probability for the whole report (default 1e-9)")
    check.add_argument("--key-tile", type=_positive, help="declared: online softmax over tiles of this many keys")
    check.add_argument("--sum-chunk", type=_positive,
                       help="declared: terms summed apart in chunks of this many keys (needs --key-tile or --single-pass)")
    check.add_argument("--single-pass", action="store_true", help="declared: no online rescale")
    check.add_argument("--splits", type=_positive, help="declared: at most this many LSE-merged key partitions")
    check.add_argument("--ordered", action="store_true",
                       help="declared: terms added one at a time in key order (needs --splits 1)")
    check.add_argument("--accumulator", choices=("fp64", "fp32", "fp16", "bf16"),
                       help="P·V accumulated in this format, coarser than compute (ggml's decode path: fp16)")
    check.add_argument("--query-in-storage", action="store_true",
                       help="the query rounded to the key's dtype before Q·Kᵀ (ggml with an fp16 KV cache)")
    check.add_argument("--lse", metavar="FILE.npy",
                       help="the kernel's log-sum-exp, out's shape without its last axis, certified too")
    check.add_argument("--lse-base", choices=("e", "2"), default="e", help="the LSE's log base (default e)")
    check.add_argument("--masked-lse", choices=("-inf", "+inf"), default="-inf",
                       help="what a row without keys holds in the LSE (+inf: FlashAttention 2)")
    check.add_argument("--json", metavar="FILE", help="write the report as JSON")
    check.add_argument("--html", metavar="FILE",
                       help="write the report as one self-contained HTML page: where the error sits, per head")
    return parser


def _load(path: str):
    try:
        with open(path, "rb") as file:
            magic = file.read(6)
    except OSError as error:
        raise ValueError(f"{path}: {error.strerror}") from None
    if magic != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file (expected the format numpy.save writes, which starts with "
                         f"\\x93NUMPY; save each array of an .npz archive on its own)")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{path}: {error}") from None


def _writable(path: str) -> None:
    """ValueError unless `path` can be written (checked before any verdict is printed)."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory")
    if not os.path.isdir(directory):
        raise ValueError(f"{path}: its directory {directory} does not exist")
    if not os.access(path if os.path.exists(path) else directory, os.W_OK):
        raise ValueError(f"{path}: not writable")


def _check(args) -> int:
    for path in (args.json, args.html):
        if path:
            _writable(path)
    arrays = {name: _load(getattr(args, name)) for name in ("query", "key", "value", "out")}
    mask = _load(args.attn_mask) if args.attn_mask else None
    lse = _load(args.lse) if args.lse else None
    sinks = _load(args.sinks) if args.sinks else None
    lengths = None
    if args.key_lengths:
        try:
            lengths = [int(n) for n in args.key_lengths.split(",")]
        except ValueError:
            raise _Usage(f"--key-lengths: expected integers separated by commas, got {args.key_lengths!r}") from None
    report = check_attention(arrays["out"], arrays["query"], arrays["key"], arrays["value"], attn_mask=mask,
                             is_causal=args.is_causal, causal_alignment=args.causal_alignment,
                             window_size=tuple(args.window_size), softcap=args.softcap, sinks=sinks, scale=args.scale,
                             enable_gqa=args.enable_gqa, key_lengths=lengths, precision=args.precision,
                             rows=args.rows, seed=args.seed, tier=args.tier, alpha=args.alpha,
                             key_tile=args.key_tile, sum_chunk=args.sum_chunk, single_pass=args.single_pass,
                             splits=args.splits, ordered=args.ordered, accumulator=args.accumulator,
                             query_in_storage=args.query_in_storage or None, lse=lse,
                             lse_base=2 if args.lse_base == "2" else None, masked_lse=args.masked_lse)
    if args.json:  # written (and --html) before the verdict is printed: a failed write prints no verdict
        try:
            with open(args.json, "w", encoding="utf-8") as file:
                file.write(report.to_json(indent=1) + "\n")
        except OSError as error:
            raise ValueError(f"{args.json}: {error.strerror}") from None
    if args.html:
        try:
            report.to_html(args.html)
        except OSError as error:
            raise ValueError(f"{args.html}: {error.strerror}") from None
    print(report)
    if not report.passed:
        if report.failure_count:
            print(f"attncheck: FAILED, {report.failure_count} element(s); worst at {report.worst.describe()}",
                  file=sys.stderr)
        if report.lse is not None and not report.lse.passed:
            print(f"attncheck: LSE FAILED, {report.lse.failure_count} row(s); worst at {report.lse.worst.describe()}",
                  file=sys.stderr)
        return FAILED
    return PASSED


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command != "check":
            raise _Usage("expected a command: check")
        return _check(args)
    except _Usage as error:
        print(f"attncheck: usage: {error}", file=sys.stderr)
        return USAGE
    except (ValueError, TypeError) as error:  # unreadable file, wrong shape, dtype or value
        print(f"attncheck: {error}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
