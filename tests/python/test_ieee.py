"""NaN and infinity in the inputs, and empty shapes (README, "NaN and infinity in the inputs"):
IEEE semantics element by element. PyTorch 1.13's composition passes where a NaN or an infinity
reaches an element (a NaN key: its whole row; a NaN or inf value: its column); a kernel that swallows
them fails, naming the input; a NaN past a sequence's length must not leak — PyTorch's math path
leaks it (0·NaN in P·V) and is caught, a kernel that skips those keys passes — while under a mask
the leak is allowed (FlashAttention's tile masking forms the same 0·NaN); a -inf score drops
its key (a row of them is zero); B = 0 and L = 0 are trivially certified, S = 0 gives rows of zeros;
the LSE and the backward refuse such inputs by name."""

import numpy as np
import pytest
import torch

import attncheck


def composed(q, k, v, keep=None):
    """PyTorch 1.13's math path by hand: softmax(q kᵀ / √E, masked with -inf) · v."""
    s = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / q.shape[-1] ** 0.5
    if keep is not None:
        s = s.masked_fill(~torch.from_numpy(keep), -float("inf"))
    return (torch.softmax(s, dim=-1) @ torch.from_numpy(v)).numpy()


def skipping(q, k, v, keep):
    """A kernel that gathers only the keys that take part (as FlashAttention's tiles skip them)."""
    out = np.zeros(q.shape[:-1] + (v.shape[-1],), q.dtype)
    for b, h, i in np.ndindex(*q.shape[:-1]):
        j = np.flatnonzero(keep[i])
        if j.size:
            s = k[b, h, j] @ q[b, h, i] / np.float32(q.shape[-1] ** 0.5)
            w = np.exp(s - s.max())
            out[b, h, i] = (w / w.sum()) @ v[b, h, j]
    return out


def draw(seed=0, L=6, S=9, E=8):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((2, 3, n, E)).astype(np.float32) for n in (L, S, S))


def test_a_nan_key_makes_its_rows_nan_and_swallowing_it_fails():
    q, k, v = draw()
    k[1, 2, 4, 3] = np.nan
    out = composed(q, k, v)
    assert np.isnan(out[1, 2]).all() and np.isfinite(out[0]).all()
    report = attncheck.check_attention(out, q, k, v)
    assert report.passed, str(report)
    assert report.ieee_elements == 6 * 8  # the six rows of head (1, 2)
    swallowed = np.nan_to_num(out)
    bad = attncheck.check_attention(swallowed, q, k, v)
    assert not bad.passed and bad.failure_count == 6 * 8
    assert bad.worst.reason == "not NaN where IEEE arithmetic gives it (key (1, 2, 4, 3) of [2, 3, 9, 8] is NaN)"


@pytest.mark.parametrize("bad,expected", [(np.nan, "NaN"), (np.inf, "+inf or NaN"), (-np.inf, "-inf or NaN")])
def test_a_nonfinite_value_reaches_only_its_column(bad, expected):
    q, k, v = draw(1)
    v[0, 1, 2, 5] = bad
    out = composed(q, k, v)
    report = attncheck.check_attention(out, q, k, v)
    assert report.passed, str(report)
    assert report.ieee_elements == 6 and report.elements_certified == 2 * 3 * 6 * 8 - 6
    clamped = out.copy()
    clamped[0, 1, :, 5] = 0.0
    failed = attncheck.check_attention(clamped, q, k, v)
    assert failed.failure_count == 6
    assert failed.worst.reason == f"not {expected} where IEEE arithmetic gives it (value (0, 1, 2, 5) of [2, 3, 9, 8] " \
                                  f"is {'NaN' if np.isnan(bad) else ('+inf' if bad > 0 else '-inf')})"


def test_infinities_of_both_signs_in_a_column_give_nan():
    q, k, v = draw(2)
    v[0, 0, 1, 2], v[0, 0, 7, 2] = np.inf, -np.inf
    out = composed(q, k, v)
    assert np.isnan(out[0, 0, :, 2]).all()
    assert attncheck.check_attention(out, q, k, v).passed
    out[0, 0, :, 2] = np.inf
    assert attncheck.check_attention(out, q, k, v).failure_count == 6


def test_a_nan_past_the_sequence_length_must_not_leak_and_one_under_a_mask_may():
    q, k, v = draw(3)
    keep = np.ones((6, 9), bool)
    keep[:, 7:] = False  # the last two keys take no part
    v[:, :, 8] = np.nan  # garbage there, as in a KV cache past its length
    good = skipping(q, k, v, keep)
    leaky = composed(q, k, v, keep)  # PyTorch's math path: the masked weight is 0, and 0·NaN is NaN
    assert np.isnan(leaky).all()
    # As padding (key_lengths: a KV cache's unused slots) nothing may leak.
    report = attncheck.check_attention(good, q, k, v, key_lengths=[7, 7])
    assert report.passed and report.ieee_elements == 0, str(report)
    caught = attncheck.check_attention(leaky, q, k, v, key_lengths=[7, 7])
    assert caught.failure_count == leaky.size
    assert caught.worst.reason == "NaN (value (0, 0, 8, 0) of [2, 3, 9, 8] is NaN past the sequence's length)"
    # Under a mask the same 0·NaN is what FlashAttention's tile masking does too: allowed, not required.
    for out in (good, leaky):
        assert attncheck.check_attention(out, q, k, v, attn_mask=keep).passed
    wrong = good.copy()
    wrong[0, 0, 0, 0] += 0.5
    assert attncheck.check_attention(wrong, q, k, v, attn_mask=keep).failure_count == 1


def test_an_infinite_key_drops_out_or_makes_its_rows_nan():
    q, k, v = draw(4)
    q = np.abs(q)  # every q_ic > 0, so the sign of an infinite key decides its score's
    k[0, 0, 3] = -np.inf  # a score of -inf in every row of head (0, 0): the key drops out
    k[1, 1, 5] = np.inf  # +inf: every row of head (1, 1) is NaN
    out = composed(q, k, v)
    assert np.isfinite(out[0, 0]).all() and np.isnan(out[1, 1]).all()
    report = attncheck.check_attention(out, q, k, v)
    assert report.passed, str(report)
    assert report.unmodelled_rows == 6 and report.ieee_elements == 6 * 8
    assert "6 row(s) checked finite only" in str(report)
    out[0, 1, 2, 0] += 0.5  # a row the infinities do not reach is still certified
    assert attncheck.check_attention(out, q, k, v).failure_count == 1


def test_a_row_whose_every_score_is_minus_inf_is_zero_or_nan():
    q, k, v = draw(5, S=1)
    q[0, 0, 2] = np.abs(q[0, 0, 2])
    k[0, 0, 0] = -np.inf
    out = composed(q, k, v)  # softmax over one -inf: NaN in PyTorch (allowed), 0 by the masked-row convention
    assert np.isnan(out[0, 0]).all()
    report = attncheck.check_attention(out, q, k, v)
    assert report.passed and report.ieee_elements == 5 * 8, str(report)  # the other rows mix signs: NaN
    out[0, 0, 2] = 0
    assert attncheck.check_attention(out, q, k, v).passed
    out[0, 0, 2, 3] = 0.25
    report = attncheck.check_attention(out, q, k, v)
    assert report.failure_count == 1
    assert report.worst.reason == "not zero in a row whose every score is -inf (key (0, 0, 0, 0) of [2, 3, 1, 8] is -inf)"


def test_empty_shapes():
    q, k, v = draw(6)
    for shape in ((0, 3, 6, 8), (2, 3, 0, 8)):
        report = attncheck.check_attention(np.zeros(shape, np.float32), q[:shape[0], :, :shape[2]], k[:shape[0]],
                                           v[:shape[0]])
        assert report.passed and report.rows_total == 0 and report.elements_total == 0
    no_keys = (k[:, :, :0], v[:, :, :0])
    assert attncheck.check_attention(np.zeros((2, 3, 6, 8), np.float32), q, *no_keys).passed
    nan = np.full((2, 3, 6, 8), np.nan, np.float32)
    report = attncheck.check_attention(nan, q, *no_keys)
    assert report.failure_count == nan.size and report.worst.reason == "NaN in a fully masked row"
    with pytest.raises(ValueError, match="query: its heads and last dimension must be positive"):
        attncheck.check_attention(np.zeros((2, 3, 6, 0), np.float32), q[..., :0], k[..., :0], v[..., :0])


def test_the_lse_and_the_backward_refuse_nonfinite_inputs_by_name():
    q, k, v = draw(7)
    k[0, 0, 0, 0] = np.nan
    out = composed(q, k, v)
    with pytest.raises(ValueError, match="lse: not certified for inputs with NaN or infinity"):
        attncheck.check_attention(out, q, k, v, lse=np.zeros((2, 3, 6), np.float32))
    with pytest.raises(ValueError, match=r"key: element \(0, 0, 0, 0\) of shape \[2, 3, 9, 8\] is NaN \(inputs must be "
                                         r"finite"):
        attncheck.check_attention_backward(q, k, v, q, k, v, out)
