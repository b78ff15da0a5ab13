// What a kernel call says about its arguments: every kernel returns one of these, never silently
// does nothing (README, "Error policy").
#pragma once

namespace attn {

/// Why a kernel call was refused; nothing is written unless the status is `ok`.
enum class KernelStatus {
  ok,
  size_mismatch,       ///< a Q/K/V/out/weights span does not hold what the shape says
  mask_size_mismatch,  ///< a mask is neither n·m nor (batched kernels) B·n·m or B·H·n·m values
  bad_key_lengths,     ///< key_lengths is neither empty nor B entries each <= m
  bad_window,          ///< a sliding window side below -1
  bad_alibi,           ///< ALiBi slopes neither empty nor Hq or B·Hq finite values
  bad_softcap,         ///< a softcap that is negative or not finite
  bad_sinks,           ///< sinks neither empty nor Hq finite values
  bad_varlen,          ///< cu_seqlens not B + 1 offsets from 0, non-decreasing, each sequence within n (m),
                       ///< only one of them given, or given with a mask, key_lengths or the [B, H, n, d] layout
  bad_scale_divisor,   ///< not finite and positive
  bad_scale,           ///< a scale multiplier that is not finite
  bad_additive_mask,   ///< an additive mask value is NaN or +inf
  bad_heads,           ///< no heads, h does not divide d_k and d_v, or (GQA) kv heads do not divide q heads
  bad_tile,            ///< a tile size of zero
  simd_unsupported,    ///< the requested SimdLevel is not available on this CPU
};

}  // namespace attn
