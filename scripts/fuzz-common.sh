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

# libfuzzer_args TARGET: the flags every run of TARGET shares: each `key = value` of the [libfuzzer]
# section of its .options file as -key=value (max_len, dict, entropic, ...), as ClusterFuzz passes
# them, then this machine's limits.
libfuzzer_args() {
  local key value
  while IFS='=' read -r key value; do
    key=${key// /}
    value=${value# }
    [[ $key == dict ]] && value=$bin/$value
    printf '%s\n' "-$key=$value"
  done < <(sed -n '/^\[libfuzzer\]/,/^\[/{/^[a-z_]* *=/p}' "$bin/$1.options")
  printf '%s\n' -timeout=10 -rss_limit_mb=2048
}
