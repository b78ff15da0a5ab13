#!/bin/bash -eu
# Builds attncheck's libFuzzer targets (every fuzz/*.cpp but the replay driver) the way OSS-Fuzz and ClusterFuzzLite do: compiler and
# flags from $CC $CXX $CFLAGS $CXXFLAGS, engine from $LIB_FUZZING_ENGINE, sources under $SRC,
# scratch in $WORK, and into $OUT for each target: the binary, <target>.options (max_len, dict),
# <target>.dict and <target>_seed_corpus.zip (corpus/<target>/).
# scripts/cflite-check runs this script on a Debian host with the variables OSS-Fuzz sets.
project=$SRC/attncheck
# Every fuzz/<target>.cpp but the replay driver is a target (fuzz/CMakeLists.txt adds each).
targets=()
for source in "$project"/fuzz/*.cpp; do
  target=$(basename "$source" .cpp)
  [ "$target" = replay_main ] || targets+=("$target")
done

# RapidCheck (the property library attn_campaign links): built here with the same compiler and flags
# when its sources are in $SRC/rapidcheck (the OSS-Fuzz image, where C++ uses libc++); otherwise
# the installed package is used (Debian's librapidcheck-dev, libstdc++ builds).
cmake_prefix=()
if [ -d "$SRC/rapidcheck" ]; then
  cmake -S "$SRC/rapidcheck" -B "$WORK/rapidcheck-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" -DCMAKE_INSTALL_PREFIX="$WORK/deps" \
    -DRC_ENABLE_TESTS=OFF -DRC_ENABLE_EXAMPLES=OFF
  cmake --build "$WORK/rapidcheck-build" --target install
  cmake_prefix=(-DCMAKE_PREFIX_PATH="$WORK/deps")
fi

# ATTNCHECK_FUZZ_FLAGS / ATTNCHECK_FUZZ_ENGINE replace the fuzz preset's own instrumentation and
# engine flags (fuzz/CMakeLists.txt), so the platform picks the sanitizer and the engine.
cmake -S "$project" -B "$WORK/attncheck-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$CXX" -DATTNCHECK_FUZZ=ON -DATTNCHECK_TESTS=OFF \
  -DATTNCHECK_FUZZ_FLAGS="$CXXFLAGS" -DATTNCHECK_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" "${cmake_prefix[@]}"
cmake --build "$WORK/attncheck-build" --target "${targets[@]}"

for target in "${targets[@]}"; do
  cp "$WORK/attncheck-build/fuzz/$target" "$WORK/attncheck-build/fuzz/$target.options" "$OUT/"
  if [ -f "$project/fuzz/$target.dict" ]; then cp "$project/fuzz/$target.dict" "$OUT/"; fi
  rm -f "$OUT/${target}_seed_corpus.zip"
  (cd "$project/corpus/$target" && python3 -m zipfile -c "$OUT/${target}_seed_corpus.zip" .)
done
