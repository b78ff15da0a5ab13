# Shared by scripts/fuzz and scripts/fuzz-smoke (sourced, not run): where the libFuzzer build
# lives, how it is built, and how a target's settings are read.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# ATTNCHECK_FUZZ_BIN: another libFuzzer build's target directory (a campaign on a second build tree).
bin=${ATTNCHECK_FUZZ_BIN:-$root/build/fuzz/fuzz}

# Builds the `fuzz` preset (clang-14, libFuzzer, ASan+UBSan) into build/fuzz.
build_fuzzers() {
  (cd "$root" && cmake --preset fuzz >/dev/null && cmake --build --preset fuzz)
}

# Every target: one <name>.options per attncheck_add_fuzzer() (fuzz/CMakeLists.txt).
all_targets() {
  local options
  for options in "$bin"/*.options; do basename "$options" .options; done
}

# option NAME TARGET: a value from the target's .options file (ClusterFuzz format).
option() { sed -n "s/^$1 *= *//p" "$bin/$2.options"; }

# libfuzzer_args TARGET: the flags every run of TARGET shares (max_len, dictionary, limits).
libfuzzer_args() {
  local dict
  printf '%s\n' -max_len="$(option max_len "$1")" -timeout=10 -rss_limit_mb=2048
  dict=$(option dict "$1")
  [[ -z $dict ]] || printf '%s\n' -dict="$bin/$dict"
}
