"""`attncheck tensor check` (the C++ CLI) against `python3 -m attncheck check`: on the same .npy files
the two print the same report, write the same JSON and exit with the same status (0 passed, 1
failed, 2 usage, 3 bad input). The C++ binary comes from ATTNCHECK_BINARY (ctest sets it)."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from sdpa_reference import sdpa

BINARY = pathlib.Path(os.environ.get("ATTNCHECK_BINARY",
                                     pathlib.Path(__file__).resolve().parents[2] / "build" / "release" / "attncheck"))


def run_both(args, cwd):
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is not built")
    cpp = subprocess.run([str(BINARY), "tensor", "check", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    python = subprocess.run([sys.executable, "-m", "attncheck", "check", *args], cwd=cwd, capture_output=True,
                            text=True, timeout=300)
    return cpp, python


def save(directory, **arrays):
    for name, array in arrays.items():
        np.save(directory / f"{name}.npy", array)


def make(directory, shape_q=(2, 4, 8, 16), shape_k=(2, 2, 10, 16), ev=8, dtype=np.float32, out_dtype=None, seed=1,
         **reference):
    """q, k, v of `dtype` and a float64 reference output stored as out_dtype; the files' names."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(shape_q).astype(dtype)
    k = rng.standard_normal(shape_k).astype(dtype)
    v = rng.standard_normal(shape_k[:-1] + (ev,)).astype(dtype)
    out = sdpa(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), **reference)
    save(directory, q=q, k=k, v=v, o=out.astype(out_dtype or dtype))
    return q, k, v, out


FILES = ["--query", "q.npy", "--key", "k.npy", "--value", "v.npy", "--out", "o.npy"]


def same(cpp, python, directory=None):
    assert cpp.returncode == python.returncode, (cpp.stderr, python.stderr)
    assert cpp.stdout == python.stdout
    assert cpp.stderr == python.stderr
    if directory is not None:
        assert json.loads((directory / "c.json").read_text()) == json.loads((directory / "p.json").read_text())


def run_and_compare(directory, *args):
    cpp, python = run_both([*FILES, *args, "--json", "c.json"], directory)
    python2 = subprocess.run([sys.executable, "-m", "attncheck", "check", *FILES, *args, "--json", "p.json"],
                             cwd=directory, capture_output=True, text=True, timeout=300)
    assert python2.returncode == python.returncode
    same(cpp, python, directory)
    return cpp


def test_gqa_causal_passes_and_a_changed_element_fails_in_both(tmp_path):
    _, _, _, out = make(tmp_path, is_causal=True, enable_gqa=True)
    assert run_and_compare(tmp_path, "--is-causal", "--enable-gqa").returncode == 0
    bad = out.astype(np.float32)
    bad[1, 2, 5, 3] += 1e-3
    save(tmp_path, o=bad)
    result = run_and_compare(tmp_path, "--is-causal", "--enable-gqa")
    assert result.returncode == 1 and "index (1, 2, 5, 3)" in result.stderr
    # The C++ JSON carries the heatmap: Python draws its page (the C++ command has no --html).
    import attncheck

    report = attncheck.Report.from_json((tmp_path / "c.json").read_text())
    assert report.heatmap.array()[2].max() > 1
    report.to_html(tmp_path / "c.html")
    assert "(1, 2, 5, 3)" in (tmp_path / "c.html").read_text()


@pytest.mark.parametrize("rank", [2, 3])
def test_lower_ranks_name_elements_in_their_own_shape(tmp_path, rank):
    shape_q, shape_k = ((6, 8), (7, 8)) if rank == 2 else ((2, 6, 8), (2, 7, 8))
    _, _, _, out = make(tmp_path, shape_q=shape_q, shape_k=shape_k, ev=5)
    assert run_and_compare(tmp_path).returncode == 0
    bad = out.astype(np.float32)
    bad[(0,) * (rank - 1) + (4,)] = 3.0
    save(tmp_path, o=bad)
    assert run_and_compare(tmp_path).returncode == 1


def test_masks_lengths_window_softcap_sinks_and_lse(tmp_path):
    rng = np.random.default_rng(5)
    q, k, v, _ = make(tmp_path, shape_q=(2, 2, 6, 8), shape_k=(2, 2, 9, 8), ev=4)
    keep = rng.random((6, 9)) < 0.7
    keep[:, 0] = True
    save(tmp_path, m=keep, a=np.where(keep, rng.standard_normal((6, 9)), -np.inf).astype(np.float32))
    for mask in ("m.npy", "a.npy"):
        wide = np.load(tmp_path / mask)
        out = sdpa(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), attn_mask=wide)
        save(tmp_path, o=out.astype(np.float32))
        assert run_and_compare(tmp_path, "--attn-mask", mask, "--rows", "7", "--seed", "3").returncode == 0
    sinks = np.array([0.5, -1.0], dtype=np.float32)
    save(tmp_path, s=sinks)
    out = sdpa(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), window_size=(3, 1), softcap=2.0,
               sinks=sinks.astype(np.float64))
    save(tmp_path, o=out.astype(np.float32))
    assert run_and_compare(tmp_path, "--window-size", "3", "1", "--softcap", "2", "--sinks", "s.npy").returncode == 0
    # key lengths with the LSE (natural log), once right and once one row off
    out = sdpa(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), attn_mask=np.arange(9) < np.array([5, 9])[:, None, None, None])
    scores = (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)) / np.sqrt(8)
    scores = np.where(np.arange(9) < np.array([5, 9])[:, None, None, None], scores, -np.inf)
    lse = np.log(np.exp(scores).sum(-1)).astype(np.float32)
    save(tmp_path, o=out.astype(np.float32), l=lse)
    assert run_and_compare(tmp_path, "--key-lengths", "5,9", "--lse", "l.npy", "--tier", "statistical").returncode == 0
    lse[1, 0, 2] += 1e-3
    save(tmp_path, l=lse)
    assert run_and_compare(tmp_path, "--key-lengths", "5,9", "--lse", "l.npy").returncode == 1


def test_dtypes_layouts_structure_and_ieee_inputs(tmp_path):
    # fp16 inputs, an fp32 output (the widened note), a declared tiling
    make(tmp_path, dtype=np.float16, out_dtype=np.float32, shape_q=(1, 2, 5, 8), shape_k=(1, 2, 40, 8))
    assert run_and_compare(tmp_path, "--key-tile", "16", "--sum-chunk", "16").returncode == 0
    # a Fortran-ordered and a big-endian float64 output read as numpy reads them
    _, _, _, out = make(tmp_path, dtype=np.float64, shape_q=(1, 1, 5, 8), shape_k=(1, 1, 6, 8))
    for stored in (np.asfortranarray(out), out.astype(">f8")):
        save(tmp_path, o=stored)
        assert run_and_compare(tmp_path, "--precision", "fp64").returncode == 0
    # NaN in a key that takes part: its rows must be NaN
    q, k, v, out = make(tmp_path, shape_q=(1, 1, 4, 8), shape_k=(1, 1, 6, 8))
    k[0, 0, 2, 1] = np.nan
    save(tmp_path, k=k, o=np.full(out.shape, np.nan, dtype=np.float32))
    assert run_and_compare(tmp_path).returncode == 0
    save(tmp_path, o=out.astype(np.float32))
    assert run_and_compare(tmp_path).returncode == 1
    # an empty query: an empty output, trivially certified
    make(tmp_path, shape_q=(1, 2, 0, 8), shape_k=(1, 2, 3, 8))
    assert run_and_compare(tmp_path).returncode == 0


@pytest.mark.parametrize("args, status", [
    (["--attn-mask", "int.npy"], 3),          # an integer mask: the hint to use bool
    (["--attn-mask", "text.npy"], 3),         # not a .npy file
    (["--attn-mask", "missing.npy"], 3),      # no such file
    (["--key-lengths", "5,x"], 2),            # malformed list: usage
    (["--rows", "0"], 2),                      # not positive: usage
    (["--tier", "best"], 2),                   # not a choice: usage
    (["--alpha", "2"], 3),                     # not a probability
    (["--softcap", "0.1"], 3),                 # not a float32 value
    (["--json", "nowhere/r.json"], 3),         # unwritable report: nothing printed
])
def test_errors_exit_alike(tmp_path, args, status):
    make(tmp_path, shape_q=(1, 1, 4, 8), shape_k=(1, 1, 6, 8))
    np.save(tmp_path / "int.npy", np.ones((4, 6), dtype=np.int64))
    (tmp_path / "text.npy").write_text("0 1 2\n")
    cpp, python = run_both([*FILES, *args], tmp_path)
    assert cpp.returncode == python.returncode == status, (cpp.stderr, python.stderr)
    assert cpp.stdout == "" and python.stdout == ""
    assert cpp.stderr.startswith("attncheck: ") and python.stderr.startswith("attncheck: ")
    if status == 3:  # one line naming what is wrong, the same words in both
        assert cpp.stderr.count("\n") == 1
        assert cpp.stderr == python.stderr or args[0] in ("--attn-mask",) and args[1] != "text.npy"
    if args[1] == "int.npy":
        assert "astype(bool)" in cpp.stderr and "astype(bool)" in python.stderr


def test_a_shape_mismatch_and_a_truncated_file_are_bad_input(tmp_path):
    make(tmp_path, shape_q=(1, 1, 4, 8), shape_k=(1, 1, 6, 8))
    np.save(tmp_path / "o.npy", np.zeros((1, 1, 4, 7), dtype=np.float32))
    cpp, python = run_both(FILES, tmp_path)
    assert cpp.returncode == python.returncode == 3 and cpp.stderr == python.stderr
    data = (tmp_path / "q.npy").read_bytes()
    (tmp_path / "q.npy").write_bytes(data[:-4])
    cpp, python = run_both(FILES, tmp_path)
    assert cpp.returncode == python.returncode == 3
    assert "cut short" in cpp.stderr and "q.npy" in cpp.stderr
