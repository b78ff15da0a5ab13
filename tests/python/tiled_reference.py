"""A FlashAttention-style numpy kernel: keys in tiles of `tile`, an online softmax across them
(running maximum m, rescale factor α = exp(m_old - m_new) applied to the running sum and to the
accumulator), in float32 (float64 for float64 inputs). With rescale_sum=False it forgets to rescale
the running sum, a bug that shows only once a later tile raises a row's maximum: never below
`tile` keys. With return_lse=True it also returns each row's log-sum-exp as FlashAttention forms it
(the running maximum plus the log of the running sum, in the compute dtype; -inf without keys)."""

import numpy as np


def tiled_sdpa(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
               causal_alignment="top-left", tile=16, rescale_sum=True, return_lse=False):
    dtype = query.dtype
    compute = np.dtype(np.float64 if dtype == np.float64 else np.float32)
    q, k, v = (np.asarray(x, dtype=compute) for x in (query, key, value))
    if enable_gqa and k.shape[1] != q.shape[1]:
        group = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    L, S = q.shape[-2], k.shape[-2]
    factor = compute.type(1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    keep = np.ones((L, S), dtype=bool)
    if is_causal:
        keep = np.tril(keep, k=0 if causal_alignment == "top-left" else S - L)
    bias = np.where(keep, compute.type(0), compute.type(-np.inf))
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        bias = np.where(mask, bias, -np.inf) if mask.dtype == bool else bias + mask.astype(compute)
    bias = np.broadcast_to(bias, q.shape[:-2] + (L, S))
    m = np.full(q.shape[:-1] + (1,), -np.inf, compute)
    total = np.zeros(q.shape[:-1] + (1,), compute)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), compute)
    with np.errstate(invalid="ignore"):
        for j0 in range(0, S, tile):
            scores = (q @ np.swapaxes(k[..., j0:j0 + tile, :], -1, -2)) * factor + bias[..., j0:j0 + tile]
            m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))
            shift = np.where(np.isfinite(m_new), m_new, compute.type(0))  # a row with no key yet
            alpha = np.where(np.isneginf(m), compute.type(0), np.exp(m - shift))
            p = np.exp(scores - shift)
            total = (total * alpha if rescale_sum else total) + p.sum(axis=-1, keepdims=True)
            acc = acc * alpha + p @ v[..., j0:j0 + tile, :]
            m = m_new
    out = np.where(total > 0, acc / np.where(total > 0, total, compute.type(1)), compute.type(0))
    if not return_lse:
        return out.astype(dtype)
    with np.errstate(divide="ignore"):  # a row without keys: -inf + log 0 = -inf
        lse = m[..., 0] + np.log(total[..., 0])  # FlashAttention's softmax_lse: max + log(sum), in compute
    return out.astype(dtype), lse


def forgets_to_rescale_the_sum(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                               causal_alignment="top-left"):
    return tiled_sdpa(query, key, value, attn_mask, is_causal, scale, enable_gqa, causal_alignment,
                      rescale_sum=False)


def rescales_correctly(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                       causal_alignment="top-left"):
    return tiled_sdpa(query, key, value, attn_mask, is_causal, scale, enable_gqa, causal_alignment)
