// RapidCheck generators of valid instances, biased to the edges where attention goes wrong.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

#include "problem.hpp"

namespace attn::verify {

/// random: sizes and values spread over the limits; edge: mostly small sizes with the
/// structures below; max: every size at its limit.
enum class Profile { random, edge, max };

/// "random" | "edge" | "max".
[[nodiscard]] std::string_view profile_name(Profile profile);

/// The profile called `name`, or nothing when no profile has that name.
[[nodiscard]] std::optional<Profile> profile_from_name(std::string_view name);

/// The `general` problem's limits cut to judge size: d and h at most 16 (the AI006 and AI031
/// statements), at most 2 batch items and 6 decimals, and n and m at most `max_length`, which each
/// caller sets for its budget (the oracle's work per case grows with n·m).
[[nodiscard]] Limits judge_sized_limits(std::size_t max_length);

/// What to generate. Sizes are drawn up to the limits; `typical_*` keep most cases small so the
/// oracle stays fast, while 1 and the limit itself are drawn as edges.
struct GenOptions {
  Problem problem = Problem::general;                ///< the problem whose instances to generate
  Limits limits = default_limits(Problem::general);  ///< every instance is valid under them
  Profile profile = Profile::edge;                   ///< how sizes and values are drawn
  std::size_t typical_n = 6;                         ///< most n and m at most this (edge profile)
  std::size_t typical_d = 6;                         ///< most d at most this (edge profile)
};

/// Options for a problem with its default limits.
[[nodiscard]] GenOptions gen_options(Problem problem, Profile profile = Profile::edge);

/// Valid instances (lenient- and strict-valid under options.limits). The edge profile mixes:
/// n = 1 and n at the limit, d = 1, non-square d, every divisor h of d (so hd = 1 and h = d),
/// all-masked rows, single visible keys, identical keys, identical scores, huge scores (|q|,|k| at
/// the limit: AI006 scaled scores near ±4e6) with small gaps, score gaps of thousands, values on
/// rounding boundaries, tiny negative outputs, "-0" inputs. Shrinks to smaller valid instances.
[[nodiscard]] rc::Gen<Instance> gen_instance(const GenOptions& options);

/// The instance `seed` gives: same options and seed, same instance, on any machine and standard
/// library. Drawn like gen_instance but from a plain seeded generator (splitmix64) instead of
/// RapidCheck: nothing to shrink, a fraction of the cost, and safe to call from several threads.
[[nodiscard]] Instance sample_instance(const GenOptions& options, std::uint64_t seed);

/// Builds an instance from its text, which must be valid under limits (a generator's contract);
/// throws attn::ContractError when it is not.
[[nodiscard]] Instance instance_from_text(const std::string& text, Problem problem, const Limits& limits);

}  // namespace attn::verify

namespace attn {
/// How RapidCheck prints an instance in a counterexample: its problem and its canonical text.
void showValue(const Instance& instance, std::ostream& os);
}  // namespace attn
