"""Sliding windows (FlashAttention's window_size, bottom-right aligned): a numpy reference that
writes the rule from FlashAttention's docstring passes; PyTorch 1.13 passes through the equivalent
boolean mask, forward and backward; window_size=(S - 1, 0) is bottom-right causal; the trackers'
window bugs (an end off by one, the window centred top-left, the window missing in the backward)
are caught; bad window_size arguments are refused by name."""

import math

import numpy as np
import pytest
import torch

import attncheck

SDPA = torch.nn.functional._scaled_dot_product_attention


def window_keep(L, S, left, right, shift=0, left_extra=0, right_extra=0):
    """keep[i, j]: flash_attn_func's rule, query i sees keys [i + S - L - left, i + S - L + right]
    (-1 an unbounded side); `shift`, `left_extra` and `right_extra` write the bugs."""
    i = np.arange(L)[:, None] + S - L + shift
    j = np.arange(S)[None, :]
    keep = np.ones((L, S), dtype=bool)
    if left >= 0:
        keep &= j >= i - left - left_extra
    if right >= 0:
        keep &= j <= i + right + right_extra
    return keep


def reference(q, k, v, keep):
    """float64 three-step attention with keep[..., i, j]; a row without keys is 0."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(keep, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.where(keep, np.exp(scores - np.where(np.isfinite(top), top, 0)), 0)
    total = weights.sum(axis=-1, keepdims=True)
    return np.where(total > 0, (weights / np.where(total > 0, total, 1)) @ v, 0)


def draw(seed, B=2, H=2, L=11, S=19, E=8, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for shape in ((B, H, L, E), (B, H, S, E), (B, H, S, E)))


WINDOWS = [(3, 0), (2, 4), (-1, 1), (5, -1), (0, 0)]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("L,S", [(11, 19), (19, 11), (13, 13)])
def test_a_reference_with_the_window_passes_and_one_key_more_at_either_end_fails(window, L, S):
    q, k, v = draw(sum(window) + L, L=L, S=S)
    left, right = window
    keep = window_keep(L, S, left, right)
    good = reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), keep).astype(np.float32)
    report = attncheck.check_attention(good, q, k, v, window_size=window)
    assert report.passed, report.describe()
    assert report.max_band_usage < 0.5
    for bug in (dict(left_extra=1), dict(right_extra=1)):
        if window[0 if "left_extra" in bug else 1] < 0:
            continue  # that side is unbounded: no end to move
        wrong_keep = window_keep(L, S, left, right, **bug)
        if (wrong_keep == keep).all():
            continue  # the extra key lies outside [0, S)
        wrong = reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), wrong_keep)
        bad = attncheck.check_attention(wrong.astype(np.float32), q, k, v, window_size=window)
        assert not bad.passed, f"{bug} not caught for window {window}, L={L}, S={S}"


def test_a_window_centred_top_left_is_caught_where_l_differs_from_s():
    q, k, v = draw(3, L=7, S=20)
    wrong = reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                      window_keep(7, 20, 2, 0, shift=-(20 - 7)))
    report = attncheck.check_attention(wrong.astype(np.float32), q, k, v, window_size=(2, 0))
    assert not report.passed
    assert report.failures[0].reason == "outside band"


def test_window_s_minus_one_zero_is_exactly_bottom_right_causal():
    # FlashAttention #1133: window_size = (S - 1, 0) must match causal=True.
    for L, S in ((6, 9), (9, 6), (8, 8)):
        q, k, v = draw(L * S, L=L, S=S)
        out = reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                        window_keep(L, S, S - 1, 0)).astype(np.float32)
        by_window = attncheck.check_attention(out, q, k, v, window_size=(S - 1, 0))
        by_causal = attncheck.check_attention(out, q, k, v, is_causal=True, causal_alignment="bottom-right")
        assert by_window.passed and by_causal.passed
        assert by_window.max_band_usage == by_causal.max_band_usage
        # The top-left causal output differs wherever L != S and fails under the window.
        if L != S:
            top_left = reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                 np.tril(np.ones((L, S), dtype=bool))).astype(np.float32)
            assert not attncheck.check_attention(top_left, q, k, v, window_size=(S - 1, 0)).passed


@pytest.mark.parametrize("dtype,precision", [(torch.float64, None), (torch.float32, None),
                                             (torch.bfloat16, "bf16-math")])
def test_pytorch_through_the_equivalent_boolean_mask_passes_forward_and_backward(dtype, precision):
    generator = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)
               for shape in ((2, 3, 10, 8), (2, 3, 16, 8), (2, 3, 16, 8)))
    mask = torch.from_numpy(window_keep(10, 16, 4, 1))
    out = SDPA(q, k, v, attn_mask=mask)[0]
    report = attncheck.check_attention(out, q, k, v, window_size=(4, 1), precision=precision)
    assert report.passed, report.describe()

    def windowed(q, k, v, window_size):  # fn receives window_size and applies it as PyTorch can
        keep = torch.from_numpy(window_keep(q.shape[-2], k.shape[-2], *window_size))
        return SDPA(q, k, v, attn_mask=keep)

    grads = attncheck.check_attention_autograd(windowed, q, k, v, window_size=(4, 1), precision=precision)
    assert grads.passed, grads.describe()

    def ignores_window_in_backward(q, k, v, window_size):  # forward windowed, gradients of full attention
        keep = torch.from_numpy(window_keep(q.shape[-2], k.shape[-2], *window_size))
        with torch.no_grad():
            windowed_out = SDPA(q, k, v, attn_mask=keep)[0]
        full = SDPA(q, k, v)[0]
        return full + (windowed_out - full).detach()

    wrong = attncheck.check_attention_autograd(ignores_window_in_backward, q, k, v, window_size=(4, 1),
                                               precision=precision)
    assert wrong.out.passed and not wrong.passed
    assert not (wrong.dq.passed and wrong.dk.passed and wrong.dv.passed)


def test_the_exact_gradients_see_the_window():
    q, k, v = draw(11, B=1, H=1, L=5, S=8, dtype=np.float64)
    dout = np.random.default_rng(12).standard_normal((1, 1, 5, 8))
    with_window = attncheck.exact_gradients(dout, q, k, v, window_size=(1, 0))
    by_mask = attncheck.exact_gradients(dout, q, k, v, attn_mask=window_keep(5, 8, 1, 0))
    for a, b in zip(with_window, by_mask):
        np.testing.assert_array_equal(a, b)
    # Keys 0 and 1 are seen by no query (query 0 sees keys 2 and 3): their gradients are exactly zero.
    assert not with_window[1][0, 0, :2].any() and not with_window[2][0, 0, :2].any()


@pytest.mark.parametrize("window,error,message", [
    ((-2, 0), ValueError, r"window_size\[0\]: must be at least -1, got -2"),
    ((3, 1.5), TypeError, r"window_size\[1\]: expected an int, got float"),
    ((3,), TypeError, r"window_size: expected a pair \(left, right\), got \(3,\)"),
    ("3,1", TypeError, r"window_size: expected a pair"),
])
def test_bad_window_sizes_are_refused_by_name(window, error, message):
    q, k, v = draw(1)
    out = np.zeros((2, 2, 11, 8), dtype=np.float32)
    with pytest.raises(error, match=message):
        attncheck.check_attention(out, q, k, v, window_size=window)


def test_the_cli_takes_window_size(tmp_path):
    import subprocess
    import sys

    q, k, v = draw(5, L=6, S=9)
    out = reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                    window_keep(6, 9, 2, 0)).astype(np.float32)
    for name, array in (("q", q), ("k", k), ("v", v), ("o", out)):
        np.save(tmp_path / f"{name}.npy", array)
    base = [sys.executable, "-m", "attncheck", "check", "--query", str(tmp_path / "q.npy"), "--key",
            str(tmp_path / "k.npy"), "--value", str(tmp_path / "v.npy"), "--out", str(tmp_path / "o.npy")]
    good = subprocess.run(base + ["--window-size", "2", "0"], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    wrong = subprocess.run(base + ["--window-size", "3", "0"], capture_output=True, text=True)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
