"""torch.nn.MultiheadAttention (PyTorch 1.13) certified through attncheck.

MultiheadAttention's own conventions, which the tests translate to SDPA's:
- inputs are tokens [B, L, embed_dim] (batch_first=True); head h is columns [h·hd, (h+1)·hd) of
  the projected query, key and value, hd = embed_dim / num_heads, and the scale is 1/√hd;
- a boolean attn_mask is True where attention is NOT allowed (the opposite of SDPA's), shaped
  [L, S] or [B·num_heads, L, S] (index b·num_heads + h); a float attn_mask is added to the scores;
- key_padding_mask [B, S] is True for padding keys (attncheck: key_lengths, or a mask of ~it).
To see the attention itself, the projections are identities (in_proj_weight = [I; I; I],
out_proj.weight = I, biases 0): x·1 + 0 is exact, so the module's output is its attention output.
A row in which no key takes part yields NaN in 1.13, as in _scaled_dot_product_attention.
"""

import pytest
import torch

import attncheck


def identity_mha(embed_dim, num_heads, dtype):
    mha = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, dtype=dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(embed_dim, dtype=dtype).repeat(3, 1))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(embed_dim, dtype=dtype))
        mha.out_proj.bias.zero_()
    return mha.eval()


def heads(tokens, num_heads):
    """[B, L, H·hd] tokens -> [B, H, L, hd] (SDPA's layout)."""
    B, L, D = tokens.shape
    return tokens.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def tokens(x):
    """[B, H, L, hd] -> [B, L, H·hd]."""
    B, H, L, hd = x.shape
    return x.transpose(1, 2).reshape(B, L, H * hd)


def mha_as_sdpa(query, key, value, attn_mask=None, is_causal=False):
    """MultiheadAttention behind SDPA's signature (for conformance): masks translated to its convention."""
    B, H, L, hd = query.shape
    S = key.shape[2]
    if value.shape[-1] != hd:
        raise NotImplementedError("MultiheadAttention's value heads are as wide as its query heads")
    mask = None
    if attn_mask is not None:
        full = attn_mask.broadcast_to(B, H, L, S).reshape(B * H, L, S)
        mask = ~full if full.dtype == torch.bool else full
    if is_causal:  # top-left, as a boolean mask in MultiheadAttention's convention
        hidden = torch.ones(L, S, dtype=torch.bool).triu(1)
        mask = hidden if mask is None else mask | hidden if mask.dtype == torch.bool else \
            mask.masked_fill(hidden, float("-inf"))
    with torch.no_grad():
        out, _ = identity_mha(H * hd, H, query.dtype)(tokens(query), tokens(key), tokens(value), attn_mask=mask,
                                                     need_weights=False)
    return heads(out, H)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_self_and_cross_attention_with_masks_pass(dtype):
    generator = torch.Generator().manual_seed(0)
    B, L, S, D, H = 2, 5, 7, 12, 3
    x = torch.randn(B, L, D, generator=generator, dtype=dtype)
    memory = torch.randn(B, S, D, generator=generator, dtype=dtype)
    mha = identity_mha(D, H, dtype)
    with torch.no_grad():
        out, _ = mha(x, x, x, need_weights=False)
        attncheck.assert_attention_close(heads(out, H), heads(x, H), heads(x, H), heads(x, H))
        hidden = torch.ones(L, L, dtype=torch.bool).triu(1)  # MHA: True = not allowed
        out, _ = mha(x, x, x, attn_mask=hidden, need_weights=False)
        attncheck.assert_attention_close(heads(out, H), heads(x, H), heads(x, H), heads(x, H), is_causal=True)
        padding = torch.arange(S).unsqueeze(0) >= torch.tensor([[3], [7]])  # MHA: True = padding
        out, _ = mha(x, memory, memory, key_padding_mask=padding, need_weights=False)
        attncheck.assert_attention_close(heads(out, H), heads(x, H), heads(memory, H), heads(memory, H),
                                         key_lengths=[3, 7])
        bias = torch.randn(L, S, generator=generator, dtype=dtype)
        out, _ = mha(x, memory, memory, attn_mask=bias, need_weights=False)
        attncheck.assert_attention_close(heads(out, H), heads(x, H), heads(memory, H), heads(memory, H),
                                         attn_mask=bias)


def test_fully_masked_row_is_nan_in_1_13_and_attncheck_reports_that_row():
    x = torch.randn(1, 4, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    hidden = torch.zeros(4, 4, dtype=torch.bool)
    hidden[1] = True  # query 1 may attend to nothing
    with torch.no_grad():
        out, _ = identity_mha(6, 2, torch.float64)(x, x, x, attn_mask=hidden, need_weights=False)
    report = attncheck.check_attention(heads(out, 2), heads(x, 2), heads(x, 2), heads(x, 2), attn_mask=~hidden)
    assert {f.index for f in report.failures} == {(0, h, 1, c) for h in range(2) for c in range(3)}
    assert {f.reason for f in report.failures} == {"NaN in a fully masked row"}


def test_conformance_families():
    # MHA's value heads are as wide as its query heads: leave out the families that draw Ev != E.
    families = [name for name in attncheck.conformance.families
                if name not in ("cross_attention", "tile_boundaries", "tile_boundaries_causal")]
    table = attncheck.conformance(mha_as_sdpa, precision="fp32", cases=10, array_type="torch", families=families)
    print(table)
    assert table.failed == ["fully_masked_row"] and "NaN in a fully masked row" in table["fully_masked_row"].reason
    assert table.skipped == ["causal_bottom_right", "gqa_mapping", "sliding_window", "alibi", "softcap", "sinks"]
    assert len(table.passed) == len(families) - 7  # one failed, six skipped
