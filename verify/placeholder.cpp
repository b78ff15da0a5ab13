namespace attn::verify {}
