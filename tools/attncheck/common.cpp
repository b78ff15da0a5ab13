#include "common.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "decimal.hpp"
#include "format.hpp"

namespace attn::cli {

void add_problem_options(CLI::App& command, ProblemOptions& options) {
  command.add_option("--problem,-p", options.problem, "ai006 | ai031 | general")
      ->required()
      ->check(CLI::IsMember({"ai006", "ai031", "general"}));
  auto* limits = "Limits (defaults: the problem statement's)";
  command.add_option("--max-n", options.max_n, "most queries n (ai006 80, ai031 40, general 256)")->group(limits);
  command.add_option("--max-m", options.max_m, "most keys m (general 256)")->group(limits);
  command.add_option("--max-d", options.max_d, "most columns d, d_k, d_v (16; general 64)")->group(limits);
  command.add_option("--max-heads", options.max_heads, "most heads h (ai031 16, general 64)")->group(limits);
  command.add_option("--max-batch", options.max_batch, "most batch items B (general 16)")->group(limits);
  command.add_option("--max-decimals", options.max_decimals, "most output decimals (general 12, at most 30)")
      ->group(limits);
  command.add_option("--max-abs", options.max_abs, "bound on every |Q|, |K|, |V| (sets both below)")->group(limits);
  command.add_option("--max-abs-qk", options.max_abs_qk, "bound on |Q|, |K| (ai006 1000, ai031 8)")->group(limits);
  command.add_option("--max-abs-v", options.max_abs_v, "bound on |V| (1000)")->group(limits);
  command
      .add_option("--max-fraction-digits", options.max_fraction_digits,
                  "strict inputs: most digits after a real's point (10; general: max-decimals + 2, at least 10)")
      ->group(limits);
}

namespace {

// Any size limit above this is refused: the reader saturates integers at 2^30, and n·m·h stays
// far from overflowing a size_t.
constexpr std::size_t kMaxSizeLimit = 1u << 20;

std::optional<Error> set_size(const std::optional<std::size_t>& flag, const char* name, std::size_t& limit) {
  if (!flag) return std::nullopt;
  if (*flag < 1 || *flag > kMaxSizeLimit) {
    return Error{"--" + std::string(name) + " must be between 1 and " + std::to_string(kMaxSizeLimit)};
  }
  limit = *flag;
  return std::nullopt;
}

// Values are bounded by 1e100 so that d products of two values and their sums stay finite
// (1e200 · 2^20 is far below DBL_MAX ≈ 1.8e308): "finite input never yields Inf".
std::optional<Error> set_bound(const std::optional<std::string>& flag, const char* name, std::string& bound) {
  if (!flag) return std::nullopt;
  const Decimal value = parse_decimal(*flag);
  if (value.status != DecimalStatus::ok || value.negative ||
      compare_magnitude(value.canonical, "1" + std::string(100, '0')) > 0) {
    return Error{"--" + std::string(name) + " must be a decimal in [0, 1e100], got '" + *flag + "'"};
  }
  bound = value.canonical;
  return std::nullopt;
}

std::string reason() { return std::strerror(errno); }

}  // namespace

Result<ProblemSetup, Error> resolve_problem(const ProblemOptions& options) {
  const auto problem = problem_from_name(options.problem);
  if (!problem) return Error{"unknown problem '" + options.problem + "' (ai006 | ai031 | general)"};
  Limits limits = default_limits(*problem);
  for (const auto& error :
       {set_size(options.max_n, "max-n", limits.max_n), set_size(options.max_m, "max-m", limits.max_m),
        set_size(options.max_d, "max-d", limits.max_d), set_size(options.max_heads, "max-heads", limits.max_heads),
        set_size(options.max_batch, "max-batch", limits.max_batch),
        set_bound(options.max_abs, "max-abs", limits.max_abs_qk),
        set_bound(options.max_abs, "max-abs", limits.max_abs_v),
        set_bound(options.max_abs_qk, "max-abs-qk", limits.max_abs_qk),
        set_bound(options.max_abs_v, "max-abs-v", limits.max_abs_v)}) {
    if (error) return *error;
  }
  if (*problem != Problem::general) limits.max_m = limits.max_n;  // square problems: m = n
  if (options.max_decimals) {
    if (*options.max_decimals < 0 || *options.max_decimals > kMaxDecimals) {
      return Error{"--max-decimals must be between 0 and " + std::to_string(kMaxDecimals)};
    }
    limits.max_decimals = *options.max_decimals;
    if (*problem == Problem::general)
      limits.max_fraction_digits = std::max<std::size_t>(10, static_cast<std::size_t>(limits.max_decimals) + 2);
  }
  if (options.max_fraction_digits) {
    if (*options.max_fraction_digits < 1 || *options.max_fraction_digits > 400) {
      return Error{"--max-fraction-digits must be between 1 and 400"};
    }
    limits.max_fraction_digits = *options.max_fraction_digits;
  }
  return ProblemSetup{*problem, limits};
}

Result<std::string, Error> read_input(const std::string& path) {
  FILE* file = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Error{"cannot open '" + path + "': " + reason()};
  std::string data;
  char buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) data.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  const std::string why = failed ? reason() : "";
  if (file != stdin) std::fclose(file);
  if (failed) return Error{"cannot read '" + path + "': " + why};
  return data;
}

Result<Ok, Error> write_stdout(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return Error{"cannot write the output: " + reason()};
  }
  return Ok{};
}

Result<Ok, Error> write_file(const std::string& path, std::string_view text) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Error{"cannot write '" + path + "': " + reason()};
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size() && std::fflush(file) == 0;
  const std::string why = written ? "" : reason();
  // fclose reports a delayed write error (NFS, a full disk) that fwrite and fflush may not.
  if (std::fclose(file) != 0 && written) return Error{"cannot write '" + path + "': " + reason()};
  if (!written) return Error{"cannot write '" + path + "': " + why};
  return Ok{};
}

Result<Ok, Error> make_directories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) return Error{"cannot create '" + path + "': " + error.message()};
  return Ok{};
}

int fail(const Error& error, int status) {
  std::fprintf(stderr, "attncheck: %s\n", error.message.c_str());
  return status;
}

}  // namespace attn::cli
