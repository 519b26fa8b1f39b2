#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) in build-fuzz and runs each for SECONDS/2.
# Usage: fuzz/run.sh [SECONDS]   (default 60 in total). Fails on any crash, leak, timeout or sanitizer report;
# the input that failed is left in build-fuzz/fuzz/crash-<target>-*.
#
# Seeds: fuzz/seeds/<target>/ (committed) and, for fuzz_decode, the golden files of tests/golden. New corpus
# entries go to fuzz/corpus-<target>/ (ignored by git).
set -euo pipefail

total=${1:-60}
per=$(( total / 2 ))
(( per >= 1 )) || per=1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SPLITZIP_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-2}

CC=${CC_FUZZ:-clang-14} CXX=${CXX_FUZZ:-clang++-14} cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="${CC_FUZZ:-clang-14}" -DCMAKE_CXX_COMPILER="${CXX_FUZZ:-clang++-14}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPLITZIP_BUILD_FUZZ=ON -DSPLITZIP_SANITIZE=ON -DSPLITZIP_ENABLE_CUDA=OFF \
  -DSPLITZIP_BUILD_TESTS=OFF -DSPLITZIP_BUILD_BENCH=OFF -DSPLITZIP_BUILD_CLI=OFF -DSPLITZIP_ENABLE_TRANSFER=OFF \
  -DSPLITZIP_BUILD_PYTHON=OFF >/dev/null
nice -n 10 ninja -C "$build" -j"$jobs" fuzz_decode fuzz_roundtrip

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
for target in decode roundtrip; do
  corpus="$root/fuzz/corpus-$target"
  mkdir -p "$corpus"
  seeds=("$root/fuzz/seeds/$target")
  if [[ $target == decode ]]; then
    seeds+=("$root/tests/golden/valid" "$root/tests/golden/invalid")
  fi
  echo "== fuzz_$target for ${per}s"
  "$build/fuzz/fuzz_$target" -max_total_time="$per" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz/crash-$target-" "$corpus" "${seeds[@]}"
done
echo "fuzz: no crash in ${total}s"
