#include "campaign/generators.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "decimal.hpp"
#include "instance_io.hpp"
#include "result.hpp"

namespace attn::verify {
namespace {

// The random choices behind an instance. One drawing routine serves two sources: RapidCheck's,
// recorded so that a failing property shrinks (the property suites), and a plain seeded generator
// for stress and gen, where nothing shrinks and generation must cost little next to the oracle.
class Choices {
 public:
  virtual ~Choices() = default;
  /// Uniform in [lo, hi) (lo < hi). Under RapidCheck it shrinks towards lo.
  virtual std::int64_t in_range(std::int64_t lo, std::int64_t hi) = 0;
  /// An index i with probability weights[i] / Σ weights (shrinking towards 0).
  std::size_t weighted(std::initializer_list<int> weights) {
    std::int64_t total = 0;
    for (int w : weights) total += w;
    std::int64_t pick = in_range(0, total);
    std::size_t index = 0;
    for (int w : weights) {
      if (pick < w) break;
      pick -= w;
      ++index;
    }
    return index;
  }

  std::size_t size_in(std::size_t lo, std::size_t hi) {
    return static_cast<std::size_t>(in_range(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
  }
  int int_in(int lo, int hi) { return static_cast<int>(in_range(lo, hi)); }
  bool flag() { return in_range(0, 2) == 1; }
  /// One of `items`, uniformly (shrinking towards the first).
  template <class T> T element(std::initializer_list<T> items) {
    return items.begin()[in_range(0, static_cast<std::int64_t>(items.size()))];
  }
};

class RapidCheckChoices final : public Choices {
 public:
  std::int64_t in_range(std::int64_t lo, std::int64_t hi) override { return *rc::gen::inRange(lo, hi); }
};

// splitmix64 (Steele, Lea, Flood 2014) and Lemire's unbiased bounded integers: the same choices
// from the same seed on every platform and standard library (std::uniform_int_distribution is
// not specified bit for bit).
class SeededChoices final : public Choices {
 public:
  explicit SeededChoices(std::uint64_t seed) : state_(seed) {}
  std::int64_t in_range(std::int64_t lo, std::int64_t hi) override {
    const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    return lo + static_cast<std::int64_t>(below(span));
  }

 private:
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, span), span >= 1.
  std::uint64_t below(std::uint64_t span) {
    unsigned __int128 product = static_cast<unsigned __int128>(next()) * span;
    if (static_cast<std::uint64_t>(product) < span) {
      const std::uint64_t threshold = -span % span;
      while (static_cast<std::uint64_t>(product) < threshold) product = static_cast<unsigned __int128>(next()) * span;
    }
    return static_cast<std::uint64_t>(product >> 64);
  }
  std::uint64_t state_;
};

// How the values of one instance are drawn.
enum class Structure {
  plain,             // independent values across the whole range
  identical_keys,    // every key row equal: uniform weights, output = mean of visible V
  identical_scores,  // Q = 0: every score 0, same as identical keys through the other side
  huge_scores,       // |q|, |k| at the limit: scores near ±limit²·d/scale with small gaps
  score_gaps,        // keys far apart: gaps of thousands, weights underflow to exactly 0
  boundary_values,   // V on rounding boundaries (x.xx5): exact ties when weights are rational
  tiny_negatives,    // V near zero and negative: outputs that must not print "-0.00"
};

// Draws a size: 1 and the limit are edges, otherwise a small value.
std::size_t draw_size(Choices& draw, Profile profile, std::size_t typical, std::size_t limit) {
  if (profile == Profile::max) return limit;
  if (profile == Profile::random) return draw.size_in(1, limit + 1);
  const std::size_t small = std::min(typical, limit);
  switch (draw.weighted({7, 2, 1})) {
    case 0:
      return draw.size_in(1, small + 1);
    case 1:
      return 1;
    default:
      return limit;
  }
}

// The text of mantissa · 10^-fraction, e.g. (-1234, 2) -> "-12.34".
std::string decimal_text(std::int64_t mantissa, int fraction) {
  std::string digits = std::to_string(mantissa < 0 ? -mantissa : mantissa);
  if (fraction > 0) {
    if (digits.size() <= static_cast<std::size_t>(fraction)) {
      digits.insert(0, static_cast<std::size_t>(fraction) + 1 - digits.size(), '0');
    }
    digits.insert(digits.size() - static_cast<std::size_t>(fraction), ".");
  }
  return (mantissa < 0 ? "-" : "") + digits;
}

// The largest mantissa m with m · 10^-fraction <= bound (bound canonical, generation capped at 1e6).
std::int64_t mantissa_bound(const std::string& bound, int fraction) {
  const double value = std::min(std::stod(bound), 1e6);
  auto m = static_cast<std::int64_t>(std::floor(value * std::pow(10.0, fraction)));
  while (m > 0 && compare_magnitude(decimal_text(m, fraction), bound) > 0) --m;
  return m;
}

// Mantissa bounds of one matrix, computed once (not per value).
struct ValueRange {
  int fraction = 0;
  std::int64_t top = 0;       // |mantissa| bound at `fraction` digits
  std::int64_t tie_top = 0;   // at decimals + 1 digits (boundary values)
  std::int64_t tiny_top = 0;  // at decimals + 2 digits (tiny negatives)
  int decimals = 0;
};

ValueRange value_range(const std::string& bound, int fraction, int decimals) {
  return {fraction, mantissa_bound(bound, fraction), mantissa_bound(bound, decimals + 1),
          std::min<std::int64_t>(150, mantissa_bound(bound, decimals + 2)), decimals};
}

// One value within the range. One category draw and one value draw: generation runs once per
// number of every generated instance, so it stays cheap.
std::string draw_value(Choices& draw, const ValueRange& r, Structure structure) {
  switch (structure) {
    case Structure::huge_scores: {
      const int kind = draw.int_in(0, 7);  // 4/7 at the limit, 2/7 just below, 1/7 zero
      const std::int64_t edge = kind < 4   ? r.top
                                : kind < 6 ? std::max<std::int64_t>(r.top - draw.in_range(1, 4), 0)
                                           : 0;
      return decimal_text(draw.flag() ? -edge : edge, r.fraction);
    }
    case Structure::boundary_values: {
      // decimals + 1 fraction digits ending in 5: halfway between two outputs.
      std::int64_t m = draw.in_range(-r.tie_top / 10, r.tie_top / 10 + 1) * 10 + 5;
      if (m > r.tie_top) m -= 10;
      return decimal_text(m, r.decimals + 1);
    }
    case Structure::tiny_negatives:
      return decimal_text(-draw.in_range(0, r.tiny_top + 1), r.decimals + 2);
    default:
      break;
  }
  const int kind = draw.int_in(0, 10);  // 5/10 anywhere, 3/10 small integers, 1/10 zeros, 1/10 extremes
  if (kind < 5) return decimal_text(draw.in_range(-r.top, r.top + 1), r.fraction);
  if (kind < 8) return std::to_string(draw.in_range(-3, 4));
  if (kind < 9) return draw.flag() ? "-0" : "0";
  return decimal_text(draw.flag() ? -r.top : r.top, r.fraction);
}

void append_rows(std::string& out, const std::vector<std::string>& values, std::size_t cols) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += values[i];
    out += (i + 1) % cols == 0 ? '\n' : ' ';
  }
}

std::vector<std::string> draw_matrix(Choices& draw, std::size_t rows, std::size_t cols, const std::string& bound,
                                     int fraction, Structure structure, int decimals) {
  std::vector<std::string> values(rows * cols);
  const ValueRange range = value_range(bound, fraction, decimals);
  for (auto& v : values) v = draw_value(draw, range, structure);
  return values;
}

// An n x m 0/1 mask whose rows are random, all zero, or a single visible key.
std::string draw_mask(Choices& draw, Profile profile, std::size_t n, std::size_t m) {
  const int density = draw.element({0, 30, 70, 100});
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t mode = profile == Profile::edge ? draw.weighted({6, 1, 2}) : 0;
    const std::size_t single = mode == 2 ? draw.size_in(0, m) : m;
    for (std::size_t j = 0; j < m; ++j) {
      bool visible = mode == 0 ? draw.int_in(0, 100) < density : (mode == 2 && j == single);
      out += visible ? '1' : '0';
      out += j + 1 == m ? '\n' : ' ';
    }
  }
  return out;
}

std::vector<std::size_t> divisors(std::size_t d, std::size_t at_most) {
  std::vector<std::size_t> out;
  for (std::size_t h = 1; h <= std::min(d, at_most); ++h) {
    if (d % h == 0) out.push_back(h);
  }
  return out;
}

std::string draw_text(Choices& draw, const GenOptions& options) {
  const Limits& L = options.limits;
  const Profile profile = options.profile;
  const Problem problem = options.problem;
  std::size_t batch = 1, n = 0, m = 0, d_k = 0, d_v = 0, heads = 1;
  int decimals = problem == Problem::ai006 ? 4 : 2;
  std::string mask_kind = problem == Problem::ai031 ? "explicit" : "causal", scale = "sqrt";
  bool self_form = false;
  n = draw_size(draw, profile, options.typical_n, L.max_n);
  d_k = draw_size(draw, profile, options.typical_d, L.max_d);
  m = n;
  d_v = d_k;
  if (problem != Problem::ai006) {
    const std::vector<std::size_t> choices = divisors(d_k, L.max_heads);
    heads = choices[draw.size_in(0, choices.size())];
  }
  if (problem == Problem::general) {
    batch = profile == Profile::max      ? L.max_batch
            : draw.weighted({4, 1}) == 0 ? 1
                                         : draw.size_in(1, std::min<std::size_t>(L.max_batch, 3) + 1);
    self_form = draw.weighted({5, 1}) == 1;
    if (!self_form) {
      m = draw_size(draw, profile, options.typical_n, L.max_m);
      d_v = heads * draw_size(draw, profile, std::max<std::size_t>(1, options.typical_d / heads), L.max_d / heads);
    }
    decimals = std::min(draw.element({0, 1, 2, 3, 4, 6}), L.max_decimals);
    mask_kind = draw.element<std::string>({"none", "causal", "explicit"});
    scale = draw.element<std::string>({"sqrt", "none", "0.5", "2", "1.5", "0.125"});
    if (scale != "sqrt" && scale != "none" && compare_magnitude(scale, L.max_abs_qk) > 0) scale = "none";
  }
  const Structure structure =
      profile == Profile::edge
          ? draw.element({Structure::plain, Structure::plain, Structure::identical_keys, Structure::identical_scores,
                          Structure::huge_scores, Structure::score_gaps, Structure::boundary_values,
                          Structure::tiny_negatives})
          : Structure::plain;
  const int fraction = draw.int_in(0, 4);
  const MaskKind mask = mask_kind == "none"     ? MaskKind::none
                        : mask_kind == "causal" ? MaskKind::causal
                                                : MaskKind::explicit_mask;
  std::string text = write_header({problem, batch, n, m, d_k, d_v, heads, decimals, mask, scale, self_form});
  // Scores of thousands make the softmax one-hot; smaller |q|, |k| bounds give weights with every
  // digit in play (where double rounding and near-ties live).
  const std::size_t bound_choice = draw.weighted({2, 1, 1});
  std::string bound_qk = bound_choice == 0 ? L.max_abs_qk : bound_choice == 1 ? "10" : "1";
  if (compare_magnitude(bound_qk, L.max_abs_qk) > 0) bound_qk = L.max_abs_qk;
  const std::string& bound_v = L.max_abs_v;
  const std::string& bound_x = compare_magnitude(bound_qk, bound_v) <= 0 ? bound_qk : bound_v;
  for (std::size_t b = 0; b < batch; ++b) {
    const Structure qk_structure = structure == Structure::boundary_values || structure == Structure::tiny_negatives
                                       ? Structure::plain
                                       : structure;
    if (self_form) {
      append_rows(text, draw_matrix(draw, n, d_k, bound_x, fraction, qk_structure, decimals), d_k);
    } else {
      auto Q = draw_matrix(draw, n, d_k, bound_qk, fraction, qk_structure, decimals);
      auto K = draw_matrix(draw, m, d_k, bound_qk, fraction, qk_structure, decimals);
      if (structure == Structure::identical_keys) {
        for (std::size_t j = 1; j < m; ++j)
          std::copy_n(K.begin(), d_k, K.begin() + static_cast<std::ptrdiff_t>(j * d_k));
      }
      if (structure == Structure::identical_scores) std::fill(Q.begin(), Q.end(), "0");
      if (structure == Structure::score_gaps) {
        // Keys alternate between -limit and +limit in every column: dot products differ by
        // 2·limit·Σ|q|, gaps of thousands of units of scaled score at the AI006 limits.
        const std::int64_t top = mantissa_bound(bound_qk, 0);
        for (std::size_t j = 0; j < m; ++j) {
          for (std::size_t c = 0; c < d_k; ++c) K[j * d_k + c] = decimal_text(j % 2 ? top : -top, 0);
        }
      }
      append_rows(text, Q, d_k);
      append_rows(text, K, d_k);
      append_rows(text,
                  draw_matrix(draw, m, d_v, bound_v, fraction,
                              structure == Structure::huge_scores ? Structure::plain : structure, decimals),
                  d_v);
    }
    if (mask_kind == "explicit") text += draw_mask(draw, profile, n, m);
  }
  return text;
}

}  // namespace

std::string_view profile_name(Profile profile) {
  switch (profile) {
    case Profile::random:
      return "random";
    case Profile::edge:
      return "edge";
    case Profile::max:
      return "max";
  }
  return "?";
}

std::optional<Profile> profile_from_name(std::string_view name) {
  if (name == "random") return Profile::random;
  if (name == "edge") return Profile::edge;
  if (name == "max") return Profile::max;
  return std::nullopt;
}

Limits judge_sized_limits(std::size_t max_length) {
  Limits limits = default_limits(Problem::general);
  limits.max_n = limits.max_m = max_length;
  // The AI006 and AI031 statements: 1 <= d <= 16. h divides d, so h <= 16 too.
  limits.max_d = 16;
  limits.max_heads = 16;
  // A second batch item catches a kernel that mixes items up (offsets, state carried over); each
  // further item only adds oracle time. A judgement call, not a bound.
  limits.max_batch = 2;
  // The generators draw at most 6 decimals (AI006 prints 4); more would only lengthen the oracle's
  // precision loop.
  limits.max_decimals = 6;
  return limits;
}

GenOptions gen_options(Problem problem, Profile profile) {
  GenOptions options;
  options.problem = problem;
  options.limits = default_limits(problem);
  options.profile = profile;
  return options;
}

Instance instance_from_text(const std::string& text, Problem problem, const Limits& limits) {
  // Lenient, so that "-0" inputs survive as -0.0; write_instance gives the strict-valid text.
  auto result = read_instance(text, problem, limits);
  if (!result) throw ContractError("generated an invalid instance: " + result.error().to_string() + "\n" + text);
  return std::move(result).value();
}

rc::Gen<Instance> gen_instance(const GenOptions& options) {
  return rc::gen::exec([options] {
    RapidCheckChoices draw;
    return instance_from_text(draw_text(draw, options), options.problem, options.limits);
  });
}

Instance sample_instance(const GenOptions& options, std::uint64_t seed) {
  SeededChoices draw(seed);
  return instance_from_text(draw_text(draw, options), options.problem, options.limits);
}

}  // namespace attn::verify

namespace attn {
void showValue(const Instance& instance, std::ostream& os) {
  os << "problem " << problem_name(instance.problem) << ":\n" << write_instance(instance);
}
}  // namespace attn
