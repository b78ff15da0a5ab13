"""check_attention_varlen and check_attention_kvcache (FlashAttention's varlen and KV-cache layouts):
a per-sequence reference passes in fp64, fp32 and fp16 with GQA, causal, windows, empty sequences,
decode and chunked prefill, paged and unpaged caches; PyTorch 1.13 passes through padding and a mask;
the trackers' bugs are caught with their index in the caller's tensor (keys leaking across a
sequence boundary, causal aligned top-left, a block table read one block off, a row without keys not
zero under GQA + causal); bad offsets and block tables are refused by name."""

import numpy as np
import pytest
import torch

import attncheck
from sdpa_reference import sdpa


def keep_of(L, S, causal, window):
    """FlashAttention's rule for one sequence of L queries and S keys (bottom-right aligned)."""
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    centre = i + S - L
    keep = np.ones((L, S), dtype=bool)
    if causal:
        keep &= j <= centre
    left, right = window
    if left >= 0:
        keep &= j >= centre - left
    if right >= 0:
        keep &= j <= centre + right
    return keep


def slopes_of(alibi, b):
    """Sequence b's ALiBi slopes from [Hq] or [N, Hq] (None: no ALiBi)."""
    return None if alibi is None else (alibi if alibi.ndim == 1 else alibi[b])


def varlen_reference(q, k, v, cu_q, cu_k, causal=False, window=(-1, -1), leak=False, top_left=False, alibi=None,
                     alibi_from_query_0=False):
    """Per sequence, sdpa_reference in the inputs' dtype; `leak` also lets sequence b see the last key
    of sequence b - 1; `top_left` aligns causal on query 0 instead of the last key; `alibi` [Hq] or
    [N, Hq] slopes; `alibi_from_query_0` measures ALiBi's distance |i - j| (as a left-padded batch
    would) instead of FlashAttention's |i + S_b - L_b - j|."""
    out = np.zeros((q.shape[0], q.shape[1], v.shape[2]), dtype=q.dtype)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if leak and k0 > 0:
            k0 -= 1
        L, S = q1 - q0, k1 - k0
        if L == 0:
            continue
        keep = keep_of(L, S, causal and not top_left, window)
        if causal and top_left:
            keep &= np.tril(np.ones((L, S), dtype=bool))
        if leak and k0 < cu_k[b]:
            keep[:, 1:] = keep_of(L, S - 1, causal, window)
            keep[:, 0] = True
        if S == 0:
            continue
        qb, kb, vb = (np.swapaxes(x, 0, 1)[None] for x in (q[q0:q1], k[k0:k1], v[k0:k1]))
        slopes = slopes_of(alibi, b)
        if alibi_from_query_0:
            # |i - j| = |i + S' - L' - j| for a square S' = L': pad the keys' distances by hand.
            bias = -np.asarray(slopes, np.float64)[:, None, None] * np.abs(np.arange(L)[:, None] - np.arange(S)[None])
            mask = np.where(keep[None], bias, -np.inf)[None]
            ob = sdpa(qb, kb, vb, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])
        else:
            ob = sdpa(qb, kb, vb, attn_mask=keep, enable_gqa=q.shape[1] != k.shape[1], alibi_slopes=slopes)
        out[q0:q1] = np.swapaxes(ob[0], 0, 1)
    return out


def packed(seed, lengths_q, lengths_k, Hq=4, Hkv=2, E=8, Ev=6, dtype=np.float32):
    rng = np.random.default_rng(seed)
    cu_q, cu_k = np.concatenate([[0], np.cumsum(lengths_q)]), np.concatenate([[0], np.cumsum(lengths_k)])
    q = rng.standard_normal((cu_q[-1], Hq, E)).astype(dtype)
    k = rng.standard_normal((cu_k[-1], Hkv, E)).astype(dtype)
    v = rng.standard_normal((cu_k[-1], Hkv, Ev)).astype(dtype)
    return q, k, v, cu_q, cu_k


CASES = [
    dict(lengths_q=[5, 9, 1, 7], lengths_k=[5, 9, 1, 7]),                  # self-attention, one L = 1
    dict(lengths_q=[3, 8, 2], lengths_k=[11, 8, 6], causal=True),           # L < S: bottom-right per sequence
    dict(lengths_q=[9, 4], lengths_k=[4, 10], causal=True),                 # L > S: rows without keys
    dict(lengths_q=[6, 0, 5], lengths_k=[12, 3, 0], window=(3, 1)),         # empty sequences, a window
    dict(lengths_q=[7, 7], lengths_k=[13, 7], causal=True, window=(4, 0)),  # window with causal
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c))
def test_a_per_sequence_reference_passes(case, dtype):
    q, k, v, cu_q, cu_k = packed(7, case["lengths_q"], case["lengths_k"], dtype=dtype)
    causal, window = case.get("causal", False), case.get("window", (-1, -1))
    out = varlen_reference(q, k, v, cu_q, cu_k, causal, window)
    report = attncheck.check_attention_varlen(out, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal,
                                              window_size=window)
    assert report.passed, str(report)
    assert report.rows_total == q.shape[0] * q.shape[1] and report.rows_checked == report.rows_total
    assert report.elements_total == out.size and "varlen: " in report.notes[-1]
    sampled = attncheck.check_attention_varlen(out, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal,
                                               window_size=window, rows=5)
    assert sampled.passed and 5 <= sampled.rows_checked < sampled.rows_total


@pytest.mark.parametrize("per_sequence", [False, True], ids=["[Hq]", "[N, Hq]"])
def test_alibi_per_sequence_passes_and_distances_from_query_0_are_caught(per_sequence):
    # Each sequence's distance is i + S_b - L_b - j: the padded batch right-aligns every sequence so
    # the distances carry over. A kernel measuring |i - j| (left-aligned padding) is caught on the
    # sequences with L_b != S_b and only there.
    lengths_q, lengths_k = [3, 6, 4], [9, 6, 7]
    q, k, v, cu_q, cu_k = packed(11, lengths_q, lengths_k)
    rng = np.random.default_rng(11)
    alibi = rng.uniform(0.05, 0.5, size=(3, 4) if per_sequence else (4,)).astype(np.float32)
    for causal, window in ((False, (-1, -1)), (True, (4, 0))):
        out = varlen_reference(q, k, v, cu_q, cu_k, causal, window, alibi=alibi)
        report = attncheck.check_attention_varlen(out, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal,
                                                  window_size=window, alibi_slopes=alibi)
        assert report.passed, str(report)
        wrong = varlen_reference(q, k, v, cu_q, cu_k, causal, window, alibi=alibi, alibi_from_query_0=True)
        bad = attncheck.check_attention_varlen(wrong, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal,
                                               window_size=window, alibi_slopes=alibi)
        assert not bad.passed
        tokens = {f.index[0] for f in bad.failures}
        assert tokens and tokens <= set(range(0, 3)) | set(range(9, 13))  # sequences 0 and 2 (L_b != S_b)
    # Without the slopes the ALiBi output fails: the keyword is used, not ignored.
    assert not attncheck.check_attention_varlen(out, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True,
                                                window_size=(4, 0)).passed


def test_keys_leaking_across_a_sequence_boundary_are_caught_in_the_next_sequence():
    q, k, v, cu_q, cu_k = packed(8, [6, 6, 6], [6, 6, 6])
    wrong = varlen_reference(q, k, v, cu_q, cu_k, leak=True)
    report = attncheck.check_attention_varlen(wrong, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert not report.passed
    tokens = {f.index[0] for f in report.failures}
    assert tokens and min(tokens) >= cu_q[1]  # the first sequence is right; the others are not
    assert all(len(f.index) == 3 for f in report.failures)


def test_causal_aligned_top_left_per_sequence_is_caught_where_l_differs_from_s():
    q, k, v, cu_q, cu_k = packed(9, [3, 5], [8, 5])
    wrong = varlen_reference(q, k, v, cu_q, cu_k, causal=True, top_left=True)
    report = attncheck.check_attention_varlen(wrong, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    assert not report.passed
    assert {f.index[0] for f in report.failures} <= set(range(0, 3))  # only the L < S sequence differs


def test_a_row_without_keys_must_be_zero_under_gqa_and_causal():
    # FlashAttention #2082: an all-masked row's max reset to 0. Here the kernel writes the mean of
    # the values into the rows causal leaves without keys (L > S).
    q, k, v, cu_q, cu_k = packed(10, [6], [2], Hq=4, Hkv=1)
    out = varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert attncheck.check_attention_varlen(out, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True).passed
    wrong = out.copy()
    wrong[:4] = v.mean(axis=0)[None]  # tokens 0-3 see no key (j <= i - 4)
    report = attncheck.check_attention_varlen(wrong, q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    assert not report.passed
    assert {f.index[0] for f in report.failures} == {0, 1, 2, 3}
    assert {f.reason for f in report.failures} == {"masked row not zero"}


def pytorch_varlen(q, k, v, cu_q, cu_k, causal):
    """PyTorch 1.13's SDPA on the sequences padded into a batch, with the per-sequence mask; the
    padded rows are dropped from its output."""
    N = len(cu_q) - 1
    lengths_q, lengths_k = np.diff(cu_q), np.diff(cu_k)
    L, S = int(lengths_q.max()), int(lengths_k.max())
    Q, K, V = (torch.zeros(N, x.shape[1], n, x.shape[2]) for x, n in ((q, L), (k, S), (v, S)))
    mask = torch.zeros(N, 1, L, S, dtype=torch.bool)
    for b in range(N):
        Lb, Sb = lengths_q[b], lengths_k[b]
        Q[b, :, :Lb] = torch.from_numpy(q[cu_q[b]:cu_q[b + 1]]).transpose(0, 1)
        K[b, :, :Sb] = torch.from_numpy(k[cu_k[b]:cu_k[b + 1]]).transpose(0, 1)
        V[b, :, :Sb] = torch.from_numpy(v[cu_k[b]:cu_k[b + 1]]).transpose(0, 1)
        mask[b, 0, :Lb, :Sb] = torch.from_numpy(keep_of(Lb, Sb, causal, (-1, -1)))
        mask[b, 0, Lb:, 0] = True  # padded query rows: any key (dropped below)
    padded_out = torch.nn.functional._scaled_dot_product_attention(Q, K, V, attn_mask=mask)[0]
    return np.concatenate([padded_out[b, :, :lengths_q[b]].transpose(0, 1).numpy() for b in range(N)])


def test_pytorch_through_padding_and_a_mask_passes_and_its_nan_rows_are_named():
    q, k, v, cu_q, cu_k = packed(11, [4, 9, 3], [10, 9, 3], Hq=2, Hkv=2)
    report = attncheck.check_attention_varlen(pytorch_varlen(q, k, v, cu_q, cu_k, True), q, k, v, cu_seqlens_q=cu_q,
                                              cu_seqlens_k=cu_k, causal=True)
    assert report.passed, str(report)
    # A sequence of 6 queries over 3 keys: bottom-right causal leaves its first 3 rows without keys,
    # where PyTorch 1.13 gives NaN (tokens 13-15, every head and column).
    q, k, v, cu_q, cu_k = packed(11, [4, 9, 6], [10, 9, 3], Hq=2, Hkv=2)
    report = attncheck.check_attention_varlen(pytorch_varlen(q, k, v, cu_q, cu_k, True), q, k, v, cu_seqlens_q=cu_q,
                                              cu_seqlens_k=cu_k, causal=True)
    assert not report.passed and report.failure_count == 3 * 2 * 6
    assert {f.index[0] for f in report.failures} == {13, 14, 15}
    assert {f.reason for f in report.failures} == {"NaN in a fully masked row"}


@pytest.mark.parametrize("cu_q,error,message", [
    ([1, 4, 9], ValueError, "cu_seqlens_q: must start at 0, got 1"),
    ([0, 5, 4, 9], ValueError, r"cu_seqlens_q: must not decrease, but entry 2 \(4\) is below entry 1 \(5\)"),
    ([0, 4, 8], ValueError, r"cu_seqlens_q: its last entry 8 must equal total_q"),
    ([0.0, 9.0], TypeError, "cu_seqlens_q: expected a 1-d sequence of at least two ints"),
])
def test_bad_offsets_are_refused_by_name(cu_q, error, message):
    q, k, v, _, cu_k = packed(1, [4, 5], [4, 5])
    with pytest.raises(error, match=message):
        attncheck.check_attention_varlen(np.zeros((9, 4, 6), np.float32), q, k, v, cu_seqlens_q=cu_q,
                                         cu_seqlens_k=cu_k if len(cu_q) == 3 else [0, 3, 6, 9])


def kvcache_case(seed, B=3, L=1, Hq=4, Hkv=2, E=8, Ev=8, block=4, blocks=12, dtype=np.float32):
    rng = np.random.default_rng(seed)
    seqlens = rng.integers(L, blocks * block // B, size=B)
    table = rng.permutation(blocks)[:B * (blocks // B)].reshape(B, blocks // B)
    k_cache = rng.standard_normal((blocks, block, Hkv, E)).astype(dtype)
    v_cache = rng.standard_normal((blocks, block, Hkv, Ev)).astype(dtype)
    q = rng.standard_normal((B, L, Hq, E)).astype(dtype)
    return q, k_cache, v_cache, seqlens, table


def kvcache_reference(q, k_cache, v_cache, seqlens, table, causal=False, window=(-1, -1), block_shift=0, alibi=None):
    B, L = q.shape[:2]
    block = k_cache.shape[1]
    out = np.zeros(q.shape[:3] + (v_cache.shape[3],), dtype=q.dtype)
    for b in range(B):
        t = np.arange(seqlens[b])
        blocks = table[b, np.minimum(t // block + block_shift, table.shape[1] - 1)]
        kb, vb = k_cache[blocks, t % block], v_cache[blocks, t % block]
        keep = keep_of(L, seqlens[b], causal, window)
        ob = sdpa(np.swapaxes(q[b], 0, 1)[None], np.swapaxes(kb, 0, 1)[None], np.swapaxes(vb, 0, 1)[None],
                  attn_mask=keep, enable_gqa=q.shape[2] != k_cache.shape[2], alibi_slopes=slopes_of(alibi, b))
        out[b] = np.swapaxes(ob[0], 0, 1)
    return out


@pytest.mark.parametrize("L,causal,window", [(1, False, (-1, -1)), (1, True, (5, 0)), (3, True, (-1, -1)),
                                             (4, False, (2, 1))])
def test_a_paged_cache_reference_passes_and_a_block_off_by_one_fails(L, causal, window):
    q, k_cache, v_cache, seqlens, table = kvcache_case(12 + L, L=L)
    out = kvcache_reference(q, k_cache, v_cache, seqlens, table, causal, window)
    report = attncheck.check_attention_kvcache(out, q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table,
                                               causal=causal, window_size=window)
    assert report.passed, str(report)
    assert report.rows_total == q.shape[0] * q.shape[1] * q.shape[2] and "blocks of 4" in report.notes[-1]
    wrong = kvcache_reference(q, k_cache, v_cache, seqlens, table, causal, window, block_shift=1)
    bad = attncheck.check_attention_kvcache(wrong, q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table,
                                            causal=causal, window_size=window)
    assert not bad.passed
    assert all(len(f.index) == 4 and f.index[1] < L for f in bad.failures)  # (b, i, head, column)


def test_alibi_over_a_paged_cache_passes_in_decode_and_chunked_prefill():
    # Key t of sequence b is at distance i + cache_seqlens[b] - L - t from query i: the keys are
    # right-aligned in the gathered batch, so every sequence keeps its own distances.
    for L in (1, 3):
        q, k_cache, v_cache, seqlens, table = kvcache_case(30 + L, L=L)
        alibi = np.random.default_rng(L).uniform(0.05, 0.5, size=(3, 4)).astype(np.float32)
        out = kvcache_reference(q, k_cache, v_cache, seqlens, table, causal=True, alibi=alibi)
        report = attncheck.check_attention_kvcache(out, q, k_cache, v_cache, cache_seqlens=seqlens,
                                                   block_table=table, causal=True, alibi_slopes=alibi)
        assert report.passed, str(report)
        swapped = kvcache_reference(q, k_cache, v_cache, seqlens, table, causal=True, alibi=alibi[:, ::-1])
        bad = attncheck.check_attention_kvcache(swapped, q, k_cache, v_cache, cache_seqlens=seqlens,
                                                block_table=table, causal=True, alibi_slopes=alibi)
        assert not bad.passed  # ALiBi's heads in reverse order


def test_an_unpaged_cache_passes_in_fp16_and_bf16():
    q, k_cache, v_cache, seqlens, table = kvcache_case(20, L=2)
    dense_k = np.zeros((3, 16, 2, 8), np.float32)
    dense_v = np.zeros((3, 16, 2, 8), np.float32)
    for b in range(3):
        t = np.arange(seqlens[b])
        dense_k[b, :seqlens[b]] = k_cache[table[b, t // 4], t % 4]
        dense_v[b, :seqlens[b]] = v_cache[table[b, t // 4], t % 4]
    for convert, precision in ((lambda x: x.astype(np.float16), None),
                               (lambda x: torch.from_numpy(x).bfloat16(), "bf16")):
        qh, kh, vh = convert(q), convert(dense_k), convert(dense_v)
        as64 = [np.asarray(x.float() if isinstance(x, torch.Tensor) else x, np.float64) for x in (qh, kh, vh)]
        exact = kvcache_reference(as64[0], as64[1].reshape(3 * 16, 1, 2, 8), as64[2].reshape(3 * 16, 1, 2, 8),
                                  seqlens, np.arange(48).reshape(3, 16), causal=True)
        out = convert(exact.astype(np.float32))
        report = attncheck.check_attention_kvcache(out, qh, kh, vh, cache_seqlens=seqlens, causal=True,
                                                   precision=precision)
        assert report.passed, str(report)


@pytest.mark.parametrize("change,error,message", [
    (dict(seqlens=[30, 2, 3]), ValueError, r"cache_seqlens: entry 0 is 30, which needs 8 blocks of 4, but "
                                            r"block_table has 4 per sequence"),
    (dict(table_entry=99), ValueError, r"block_table: entry \[1, 0\] is 99, outside the cache's 12 blocks"),
    (dict(seqlens=[1.5, 2, 3]), TypeError, "cache_seqlens: expected 3 ints"),
    (dict(extra=dict(is_causal=True)), TypeError, "check_attention_kvcache: is_causal is not taken here"),
])
def test_bad_caches_are_refused_by_name(change, error, message):
    q, k_cache, v_cache, seqlens, table = kvcache_case(30)
    if "seqlens" in change:
        seqlens = np.asarray(change["seqlens"])
    if "table_entry" in change:
        table = table.copy()
        table[1, 0] = change["table_entry"]
    out = np.zeros((3, 1, 4, 8), np.float32)
    with pytest.raises(error, match=message):
        attncheck.check_attention_kvcache(out, q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table,
                                          **change.get("extra", {}))
