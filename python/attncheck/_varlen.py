"""FlashAttention's layouts: packed variable-length batches (flash_attn_varlen_func) and KV caches,
paged by a block table or not (flash_attn_with_kvcache).

Both reduce exactly to one check_attention call: the sequences padded into a batch [N, H, L_max, E],
each right-aligned (its queries in the last L_b rows, its keys in the last S_b columns), with a
boolean mask that keeps the keys its rules admit (causal and the window aligned bottom-right on that
sequence's own L_b and S_b, as FlashAttention aligns them). Right alignment keeps every distance
i + S_b - L_b - j of a sequence equal to the padded batch's i' + S - L - j', so the bottom-right
rules and ALiBi's biases carry over unchanged. Padded query rows have no key and hold exact zeros. The report is the
padded batch's, with every index mapped back into the caller's own tensor and the padded rows taken
out of the row counts.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._inputs import as_exact_array, check_int, device_note


def _typed(values: np.ndarray, dtype: str):
    """float64 values (exact in `dtype`) as an array of that dtype: numpy, or a torch tensor for bfloat16."""
    if dtype == "bfloat16":
        import torch

        return torch.from_numpy(values.astype(np.float32)).bfloat16()
    return values.astype(dtype)


def _lengths(cu, name: str, total: int, total_name: str) -> np.ndarray:
    """Sequence lengths from cumulative offsets cu (N + 1 ints from 0, nondecreasing, ending at total)."""
    if hasattr(cu, "detach"):
        cu = cu.detach().cpu().numpy()
    cu = np.asarray(cu)
    if cu.ndim != 1 or cu.size < 2 or not np.issubdtype(cu.dtype, np.integer):
        raise TypeError(f"{name}: expected a 1-d sequence of at least two ints (N + 1 offsets), got "
                        f"{cu.dtype.name}{list(cu.shape)}")
    if cu[0] != 0:
        raise ValueError(f"{name}: must start at 0, got {int(cu[0])}")
    steps = np.diff(cu)
    if (steps < 0).any():
        b = int(np.argmax(steps < 0))
        raise ValueError(f"{name}: must not decrease, but entry {b + 1} ({int(cu[b + 1])}) is below entry {b} "
                         f"({int(cu[b])})")
    if cu[-1] != total:
        raise ValueError(f"{name}: its last entry {int(cu[-1])} must equal {total_name} ({total})")
    return steps.astype(np.int64)


def _keep(L: int, S: int, lengths_q, lengths_k, causal: bool, window) -> np.ndarray:
    """[N, 1, L, S] booleans for right-aligned sequences: padded query i (sequence b's query
    i - (L - L_b)) sees padded key j (its key j - (S - S_b)) when both exist and its causal rule and
    window, aligned bottom-right on L_b and S_b, admit them. The distance i + S - L - j is the
    sequence's own."""
    left, right = window
    i = np.arange(L)[None, :, None]
    j = np.arange(S)[None, None, :]
    Lb = np.asarray(lengths_q)[:, None, None]
    Sb = np.asarray(lengths_k)[:, None, None]
    centre = i + S - L
    keep = (i >= L - Lb) & (j >= S - Sb)
    if causal:
        keep &= j <= centre
    if left >= 0:
        keep &= j >= centre - left
    if right >= 0:
        keep &= j <= centre + right
    return keep[:, None, :, :]


def _remapped(report, index_of, elements_total: int, padded_rows: int, note: str):
    """The padded batch's report with its indices in the caller's tensor and the padding taken out."""
    failures = [f._replace(index=index_of(f.index)) for f in report.failures]
    return dataclasses.replace(report, failures=failures, elements_total=elements_total,
                               rows_total=report.rows_total - padded_rows,
                               rows_checked=report.rows_checked - padded_rows, notes=list(report.notes) + [note])


def _window(window_size):
    from . import _window as checked

    return checked(window_size)


def _refuse_sdpa_keywords(kwargs, function):
    hints = {"lse": "certify the LSE with check_attention on the padded batch",
             "is_causal": "use causal= (FlashAttention's, bottom-right aligned per sequence)",
             "attn_mask": "masks are not part of FlashAttention's varlen and kvcache calls"}
    if any(name in kwargs for name in hints):
        name = next(n for n in hints if n in kwargs)
        hint = hints[name]
        raise TypeError(f"{function}: {name} is not taken here ({hint})")


def _check_bool(x, name):
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(x).__name__}")
    return bool(x)


def check_attention_varlen(out, query, key, value, *, cu_seqlens_q, cu_seqlens_k, causal=False,
                           window_size=(-1, -1), scale=None, rows=None, **kwargs):
    """Certifies ``out`` of a packed variable-length batch (FlashAttention's flash_attn_varlen_func).

    query [total_q, Hq, E], key [total_k, Hkv, E], value [total_k, Hkv, Ev], out [total_q, Hq, Ev]
    (Hq a multiple of Hkv: GQA as FlashAttention does it); sequence b's queries are rows
    [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and its keys [cu_seqlens_k[b], cu_seqlens_k[b + 1]). No key
    of one sequence takes part in another's queries. causal (FlashAttention's, bottom-right aligned)
    and window_size (left, right) are aligned per sequence: query i of sequence b sees key j iff
    j <= i + S_b - L_b (causal) and i + S_b - L_b - left <= j <= i + S_b - L_b + right. A sequence
    with no keys has zero rows. scale: the multiplier of Q·Kᵀ (FlashAttention's softmax_scale;
    default 1/√E). alibi_slopes ([Hq] or [N, Hq]) add -slope·|i + S_b - L_b - j| per sequence;
    softcap and sinks are check_attention's. rows: certify a seeded sample of that many query rows
    (default all). Other keywords (precision, tier, alpha, seed, exp_ulps, key_tile, ...) are
    check_attention's. Failure indices are (token, head, column) in out.
    """
    from . import check_attention

    _refuse_sdpa_keywords(kwargs, "check_attention_varlen")
    q, q_dtype = as_exact_array(query, "query")
    k, k_dtype = as_exact_array(key, "key")
    v, v_dtype = as_exact_array(value, "value")
    o, o_dtype = as_exact_array(out, "out")
    for name, x in (("query", q), ("key", k), ("value", v), ("out", o)):
        if x.ndim != 3:
            raise ValueError(f"{name}: expected a packed [total, heads, dim] tensor, got shape {tuple(x.shape)}")
    if k.shape[:2] != v.shape[:2]:
        raise ValueError(f"value: expected key's [total_k, Hkv] = {tuple(k.shape[:2])}, got {tuple(v.shape[:2])}")
    if o.shape != (q.shape[0], q.shape[1], v.shape[2]):
        raise ValueError(f"out: expected [total_q, Hq, Ev] = {(q.shape[0], q.shape[1], v.shape[2])}, got "
                         f"{tuple(o.shape)}")
    if k.shape[2] != q.shape[2]:
        raise ValueError(f"key: its head dim {k.shape[2]} differs from the query's {q.shape[2]}")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(f"key: its {k.shape[1]} heads do not divide the query's {q.shape[1]}")
    lengths_q = _lengths(cu_seqlens_q, "cu_seqlens_q", q.shape[0], "total_q, query's first dimension")
    lengths_k = _lengths(cu_seqlens_k, "cu_seqlens_k", k.shape[0], "total_k, key's first dimension")
    if lengths_q.size != lengths_k.size:
        raise ValueError(f"cu_seqlens_k: {lengths_k.size} sequences, but cu_seqlens_q has {lengths_q.size}")
    causal = _check_bool(causal, "causal")
    window = _window(window_size)
    rows = check_int(rows, "rows", minimum=1, allow_none=True)
    N, Hq, Hkv = lengths_q.size, q.shape[1], k.shape[1]
    L, S = max(int(lengths_q.max()), 1), max(int(lengths_k.max()), 1)
    starts_q, starts_k = np.concatenate([[0], np.cumsum(lengths_q)]), np.concatenate([[0], np.cumsum(lengths_k)])

    def padded(x, starts, lengths, rows_to):  # [total, H, D] -> [N, H, rows_to, D], right-aligned
        result = np.zeros((N, x.shape[1], rows_to, x.shape[2]))
        for b in range(N):
            result[b, :, rows_to - lengths[b]:] = np.swapaxes(x[starts[b]:starts[b] + lengths[b]], 0, 1)
        return result

    keep = _keep(L, S, lengths_q, lengths_k, causal, window)
    padded_rows = (N * L - int(lengths_q.sum())) * Hq
    report = check_attention(
        _typed(padded(o, starts_q, lengths_q, L), o_dtype), _typed(padded(q, starts_q, lengths_q, L), q_dtype),
        _typed(padded(k, starts_k, lengths_k, S), k_dtype), _typed(padded(v, starts_k, lengths_k, S), v_dtype),
        attn_mask=keep, enable_gqa=Hq != Hkv, scale=scale, rows=None if rows is None else rows + padded_rows,
        **kwargs)
    report.notes += device_note(out=out, query=query, key=key, value=value)

    def index_of(index):
        b, h, i, c = index
        return (int(starts_q[b]) + i - (L - int(lengths_q[b])), h, c)

    return _remapped(report, index_of, int(o.size), padded_rows,
                     f"varlen: {N} sequences, certified as a batch padded to L = {L}, S = {S} (each right-aligned) "
                     f"with a per-sequence boolean mask (causal, window and ALiBi aligned on each sequence's own "
                     f"lengths)")


def check_attention_kvcache(out, query, k_cache, v_cache, *, cache_seqlens, block_table=None, causal=False,
                            window_size=(-1, -1), scale=None, rows=None, **kwargs):
    """Certifies ``out`` of attention over a KV cache (FlashAttention's flash_attn_with_kvcache).

    query and out [B, L, Hq, E|Ev] (decode: L = 1; chunked prefill: L > 1). Without block_table the
    caches are [B, S_max, Hkv, E|Ev] and key t of sequence b is k_cache[b, t]; with block_table
    [B, max_blocks] (ints) they are paged, [num_blocks, block_size, Hkv, E|Ev], and key t of sequence
    b is k_cache[block_table[b, t // block_size], t % block_size]. Keys t < cache_seqlens[b] take part
    (a block table too short for cache_seqlens[b], or an entry outside [0, num_blocks), is refused by
    name). causal and window_size are aligned bottom-right on L and cache_seqlens[b], as
    FlashAttention aligns them: query i sees key t iff t <= i + cache_seqlens[b] - L (causal) and the
    window's i + cache_seqlens[b] - L - left <= t <= ... + right; alibi_slopes ([Hq] or [B, Hq]) add
    -slope·|i + cache_seqlens[b] - L - t|. Other keywords as check_attention_varlen's. Failure indices are (b, i, head, column) in out.
    """
    from . import check_attention

    _refuse_sdpa_keywords(kwargs, "check_attention_kvcache")
    q, q_dtype = as_exact_array(query, "query")
    kc, k_dtype = as_exact_array(k_cache, "k_cache")
    vc, v_dtype = as_exact_array(v_cache, "v_cache")
    o, o_dtype = as_exact_array(out, "out")
    for name, x in (("query", q), ("k_cache", kc), ("v_cache", vc), ("out", o)):
        if x.ndim != 4:
            raise ValueError(f"{name}: expected a rank-4 tensor, got shape {tuple(x.shape)}")
    B, Lq, Hq, E = q.shape
    if kc.shape[:3] != vc.shape[:3]:
        raise ValueError(f"v_cache: expected k_cache's first three dimensions {tuple(kc.shape[:3])}, got "
                         f"{tuple(vc.shape[:3])}")
    if kc.shape[3] != E:
        raise ValueError(f"k_cache: its head dim {kc.shape[3]} differs from the query's {E}")
    Hkv = kc.shape[2]
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"k_cache: its {Hkv} heads do not divide the query's {Hq}")
    if o.shape != (B, Lq, Hq, vc.shape[3]):
        raise ValueError(f"out: expected [B, L, Hq, Ev] = {(B, Lq, Hq, vc.shape[3])}, got {tuple(o.shape)}")
    seqlens = cache_seqlens.detach().cpu().numpy() if hasattr(cache_seqlens, "detach") else np.asarray(cache_seqlens)
    if seqlens.shape != (B,) or not np.issubdtype(seqlens.dtype, np.integer):
        raise TypeError(f"cache_seqlens: expected {B} ints (one per batch item), got "
                        f"{seqlens.dtype.name}{list(seqlens.shape)}")
    if (seqlens < 0).any():
        raise ValueError(f"cache_seqlens: entry {int(np.argmax(seqlens < 0))} is negative")
    if block_table is None:
        if kc.shape[0] != B:
            raise ValueError(f"k_cache: without block_table it is [B, S_max, Hkv, E] with the query's B = {B}, got "
                             f"{kc.shape[0]}")
        if (seqlens > kc.shape[1]).any():
            b = int(np.argmax(seqlens > kc.shape[1]))
            raise ValueError(f"cache_seqlens: entry {b} is {int(seqlens[b])}, more than the cache's S_max = "
                             f"{kc.shape[1]}")

        def key_rows(cache, b):
            return cache[b, :seqlens[b]]
    else:
        table = block_table.detach().cpu().numpy() if hasattr(block_table, "detach") else np.asarray(block_table)
        if table.ndim != 2 or table.shape[0] != B or not np.issubdtype(table.dtype, np.integer):
            raise TypeError(f"block_table: expected [B = {B}, max_blocks] ints, got {table.dtype.name}"
                            f"{list(table.shape)}")
        size = kc.shape[1]
        for b in range(B):
            needed = -(-int(seqlens[b]) // size)
            if needed > table.shape[1]:
                raise ValueError(f"cache_seqlens: entry {b} is {int(seqlens[b])}, which needs {needed} blocks of "
                                 f"{size}, but block_table has {table.shape[1]} per sequence")
            used = table[b, :needed]
            if ((used < 0) | (used >= kc.shape[0])).any():
                n = int(np.argmax((used < 0) | (used >= kc.shape[0])))
                raise ValueError(f"block_table: entry [{b}, {n}] is {int(used[n])}, outside the cache's "
                                 f"{kc.shape[0]} blocks")

        def key_rows(cache, b):
            t = np.arange(seqlens[b])
            return cache[table[b, t // size], t % size]
    S = max(int(seqlens.max()) if B else 0, 1)

    def gathered(cache):  # [B, Hkv, S, D], each sequence's keys right-aligned
        result = np.zeros((B, cache.shape[2], S, cache.shape[3]))
        for b in range(B):
            result[b, :, S - seqlens[b]:] = np.swapaxes(key_rows(cache, b), 0, 1)
        return result

    causal = _check_bool(causal, "causal")
    window = _window(window_size)
    rows = check_int(rows, "rows", minimum=1, allow_none=True)
    keep = _keep(Lq, S, np.full(B, Lq), seqlens, causal, window)
    report = check_attention(_typed(np.swapaxes(o, 1, 2), o_dtype), _typed(np.swapaxes(q, 1, 2), q_dtype),
                             _typed(gathered(kc), k_dtype), _typed(gathered(vc), v_dtype), attn_mask=keep,
                             enable_gqa=Hq != Hkv, scale=scale, rows=rows, **kwargs)
    report.notes += device_note(out=out, query=query, k_cache=k_cache, v_cache=v_cache)

    def index_of(index):
        b, h, i, c = index
        return (b, i, h, c)

    return _remapped(report, index_of, int(o.size), 0,
                     f"kvcache: {B} sequences of up to {S} cached keys"
                     + (f" in blocks of {kc.shape[1]}" if block_table is not None else "")
                     + ", certified as a batch (keys right-aligned) with a per-sequence boolean mask (causal, "
                       "window and ALiBi aligned on L and each sequence's cache_seqlens)")
