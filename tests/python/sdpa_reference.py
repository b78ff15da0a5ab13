"""A straightforward numpy SDPA (PyTorch 2.x semantics) in a chosen precision: the "user kernel" of the tests."""

import numpy as np


def sdpa(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
         causal_alignment="top-left", compute=None, window_size=(-1, -1), alibi_slopes=None, softcap=0.0,
         sinks=None):
    """softmax(Q·Kᵀ·scale + mask)·V with the max shift, computed in `compute` (default: the inputs' dtype).

    A row with no key taking part is zero (PyTorch >= 2.5's convention). window_size: FlashAttention's
    (query i sees keys i + S - L - left .. i + S - L + right; -1 an unbounded side). softcap:
    c·tanh(s/c) before the mask; alibi_slopes ([Hq]): -slope·|i + S - L - j| added after it; sinks
    ([Hq]): logits in every row's denominator.
    """
    dtype = query.dtype
    compute = np.dtype(compute or (np.float32 if dtype == np.float16 else dtype))
    q, k, v = (np.asarray(x, dtype=compute) for x in (query, key, value))
    if enable_gqa and q.ndim == 4 and k.shape[1] != q.shape[1]:
        group = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    factor = compute.type(1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    scores = (q @ np.swapaxes(k, -1, -2)) * factor
    L, S = scores.shape[-2], scores.shape[-1]
    if softcap:
        c = compute.type(softcap)
        scores = c * np.tanh(scores / c)
    if alibi_slopes is not None:
        distance = np.abs(np.arange(L)[:, None] + S - L - np.arange(S)[None, :]).astype(compute)
        scores = scores - np.asarray(alibi_slopes, dtype=compute).reshape(-1, 1, 1) * distance
    keep = np.ones((L, S), dtype=bool)
    if is_causal:
        offset = 0 if causal_alignment == "top-left" else S - L
        keep = np.tril(keep, k=offset)
    left, right = window_size
    if left >= 0:
        keep &= np.triu(np.ones((L, S), dtype=bool), k=S - L - left)
    if right >= 0:
        keep &= np.tril(np.ones((L, S), dtype=bool), k=S - L + right)
    scores = np.where(keep, scores, -np.inf)
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask.astype(compute)
    top = scores.max(axis=-1, keepdims=True)
    z = None if sinks is None else np.asarray(sinks, dtype=compute).reshape(-1, 1, 1)
    if z is not None:
        top = np.maximum(top, z)
    top = np.where(np.isfinite(top), top, compute.type(0))
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    if z is not None:
        total = total + np.exp(z - top)
    weights = np.where(total > 0, weights / np.where(total > 0, total, compute.type(1)), compute.type(0))
    return (weights @ v).astype(dtype)
