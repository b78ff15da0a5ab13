"""python3 -m attncheck check: exit 0 pass, 1 fail (naming the element), 2 usage, 3 bad input."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "attncheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture()
def files(tmp_path):
    """q, k, v and PyTorch 1.13's fp32 output for them, written by numpy.save."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=generator) for _ in range(3))
    mask = torch.rand(6, 6, generator=generator) < 0.8
    mask[:, 0] = True
    out, _ = torch.nn.functional._scaled_dot_product_attention(q, k, v, mask, 0.0, False, False)
    for name, tensor in {"q": q, "k": k, "v": v, "o": out, "m": mask}.items():
        np.save(tmp_path / f"{name}.npy", tensor.numpy())
    return tmp_path


ARGS = ["check", "--query", "q.npy", "--key", "k.npy", "--value", "v.npy", "--out", "o.npy", "--attn-mask", "m.npy"]


def test_pytorch_fp32_output_passes_and_writes_json(files):
    result = run(*ARGS, "--json", "report.json", cwd=files)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("attncheck: passed (fp32)") and result.stderr == ""
    assert json.loads((files / "report.json").read_text())["passed"] is True


def test_one_element_changed_by_1e_3_relative_fails_naming_it(files):
    out = np.load(files / "o.npy")
    out[0, 1, 4, 5] *= np.float32(1 + 1e-3)
    np.save(files / "o.npy", out)
    result = run(*ARGS, cwd=files)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "worst at index (0, 1, 4, 5): outside band, got" in result.stderr


def test_the_lse_in_base_2_and_a_wrong_one(files):
    q, k = (torch.from_numpy(np.load(files / f"{name}.npy")) for name in ("q", "k"))
    mask = torch.from_numpy(np.load(files / "m.npy"))
    scores = (q @ k.transpose(-1, -2)) / 8 ** 0.5
    lse = torch.logsumexp(scores.masked_fill(~mask, -float("inf")), dim=-1)
    np.save(files / "lse2.npy", (lse / np.log(2)).numpy())
    result = run(*ARGS, "--lse", "lse2.npy", "--lse-base", "2", "--json", "r.json", cwd=files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lse: passed" in result.stdout
    assert json.loads((files / "r.json").read_text())["lse"]["passed"] is True
    result = run(*ARGS, "--lse", "lse2.npy", cwd=files)  # log2 values read as natural
    assert result.returncode == 1
    assert result.stderr.startswith("attncheck: LSE FAILED, 12 row(s); worst at index (0, ")
    assert result.stderr.count("\n") == 1


def test_html_shows_the_failing_element(files):
    out = np.load(files / "o.npy")
    out[0, 1, 4, 5] *= np.float32(1 + 1e-3)
    np.save(files / "o.npy", out)
    result = run(*ARGS, "--html", "report.html", cwd=files)
    assert result.returncode == 1
    page = (files / "report.html").read_text()
    assert page.count('<canvas class="heatmap"') == 2 and "(0, 1, 4, 5)" in page and "outside band" in page
    (files / "report.html").write_text("old")  # an existing file is replaced, as --json's
    assert run(*ARGS, "--html", "report.html", cwd=files).returncode == 1
    assert "<canvas" in (files / "report.html").read_text()


@pytest.mark.parametrize("args", [
    [],
    ["verify"],
    ["check", "--query", "q.npy"],
    ARGS + ["--precision", "fp8"],
    ARGS + ["--rows", "0"],
    ARGS + ["--causal-alignment", "middle"],
    ARGS + ["--key-lengths", "a,b"],
])
def test_usage_errors_exit_2_with_one_line(files, args):
    result = run(*args, cwd=files)
    assert result.returncode == 2
    assert result.stderr.startswith("attncheck: usage:") and result.stderr.count("\n") == 1


def test_bad_input_exits_3_with_one_line(files):
    (files / "broken.npy").write_bytes(b"not an npy file")
    np.save(files / "short.npy", np.zeros((1, 2, 6, 7), dtype=np.float32))
    for args, reason in [
        (["--query", "missing.npy"], "missing.npy"),
        (["--key", "broken.npy"], "broken.npy: not a .npy file"),
        (["--out", "short.npy"], "out: shape [1, 2, 6, 7] should be [1, 2, 6, 8]"),
        (["--key-lengths", "3,4"], "key_lengths"),
        (["--json", "no/such/dir/r.json"], "no/such/dir/r.json"),
        (["--html", "no/such/dir/r.html"], "no/such/dir/r.html"),
        (["--html", "."], ".: is a directory"),
    ]:
        result = run(*ARGS, *args, cwd=files)
        assert result.returncode == 3, (args, result.stderr)
        assert reason in result.stderr and result.stderr.count("\n") == 1, result.stderr
        assert result.stdout == "", (args, result.stdout)  # no verdict printed before the error


def test_an_integer_mask_gets_the_hint_to_use_bool(files):
    np.save(files / "int_mask.npy", np.load(files / "m.npy").astype(np.int64))
    result = run(*ARGS[:-1], "int_mask.npy", cwd=files)
    assert result.returncode == 3
    assert "attn_mask: dtype int64 is not supported" in result.stderr and "mask.astype(bool)" in result.stderr


def test_an_fp16_cache_with_the_ggml_declarations(tmp_path):
    # fp32 query, fp16 key and value, the query converted to fp16 and P·V accumulated in fp16.
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 1, 4, 64)).astype(np.float32)
    k, v = (rng.standard_normal((1, 1, 128, 64)).astype(np.float16) for _ in range(2))
    s = (q.astype(np.float16).astype(np.float32) @ k.astype(np.float32).swapaxes(-1, -2)) * np.float32(1 / 8)
    p = np.exp(s - s.max(-1, keepdims=True))
    acc = np.zeros((1, 1, 4, 64), dtype=np.float16)
    for j in range(128):
        acc = (acc.astype(np.float32) + p[..., j:j + 1] * v[:, :, j, :][:, :, None, :].astype(np.float32)).astype(
            np.float16)
    out = acc.astype(np.float32) / p.sum(-1, keepdims=True)
    for name, array in {"q": q, "k": k, "v": v, "o": out}.items():
        np.save(tmp_path / f"{name}.npy", array)
    files = ["check", "--query", "q.npy", "--key", "k.npy", "--value", "v.npy", "--out", "o.npy"]
    assert run(*files, cwd=tmp_path).returncode == 1
    declared = run(*files, "--accumulator", "fp16", "--query-in-storage", "--single-pass", "--splits", "1",
                   cwd=tmp_path)
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert "key and value are float16, the query float32" in declared.stdout
