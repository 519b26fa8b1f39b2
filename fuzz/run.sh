#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) in build-fuzz and runs them for SECONDS in total:
#   fuzz_decode, fuzz_roundtrip and fuzz_entropy (symbol tables and entropy-coded frames) once for each CPU kernel
#   set (SPLITZIP_FUZZ_ISA=portable, avx2, and the best this CPU has; a set the CPU lacks falls back to the next one
#   below; fuzz/fuzz_isa.h), fuzz_inputs (the CLI's .npy / .safetensors parsers and the container writer) and
#   fuzz_transfer (the transfer protocol's control stream, handshake, admission and the receiver's chunk checks)
#   once each.
# Usage: fuzz/run.sh [SECONDS]   (default 60 in total, shared equally by the runs, which go through JOBS (default 2)
# parallel lanes). Fails on any crash, leak, timeout or sanitizer report; the input that failed is left in
# build-fuzz/fuzz/crash-<target>-*.
#
# Seeds: fuzz/seeds/<target>/ (committed) and, for fuzz_decode, the golden files of tests/golden. New corpus
# entries go to fuzz/corpus-<target>/ (ignored by git).
set -euo pipefail

total=${1:-60}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SPLITZIP_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-2}

CC=${CC_FUZZ:-clang-14} CXX=${CXX_FUZZ:-clang++-14} cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="${CC_FUZZ:-clang-14}" -DCMAKE_CXX_COMPILER="${CXX_FUZZ:-clang++-14}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPLITZIP_BUILD_FUZZ=ON -DSPLITZIP_SANITIZE=ON -DSPLITZIP_ENABLE_CUDA=OFF \
  -DSPLITZIP_BUILD_TESTS=OFF -DSPLITZIP_BUILD_BENCH=OFF -DSPLITZIP_BUILD_CLI=OFF -DSPLITZIP_ENABLE_TRANSFER=OFF \
  -DSPLITZIP_BUILD_PYTHON=OFF >/dev/null
nice -n 10 ninja -C "$build" -j"$jobs" fuzz_decode fuzz_roundtrip fuzz_entropy fuzz_inputs fuzz_transfer

# (target, kernel set) runs; "" is the library's own choice, the best set of this CPU.
runs=("decode portable" "decode avx2" "decode " "roundtrip portable" "roundtrip avx2" "roundtrip " "entropy portable"
      "entropy avx2" "entropy " "inputs " "transfer ")
# Each run is one process on one core; JOBS lanes take the runs in turn, so the wall time is about SECONDS / JOBS.
per=$(( total / ${#runs[@]} ))
(( per >= 1 )) || per=1

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
one_run() {  # one_run "TARGET ISA": its output goes to build-fuzz/fuzz/log-TARGET-ISA.txt
  local target=${1%% *} isa=${1#* }
  local corpus="$root/fuzz/corpus-$target" seeds=("$root/fuzz/seeds/$target")
  mkdir -p "$corpus"
  if [[ $target == decode ]]; then
    seeds+=("$root/tests/golden/valid" "$root/tests/golden/invalid")
  fi
  echo "== fuzz_$target for ${per}s (kernels: ${isa:-best of this CPU})"
  if [[ -n $isa ]]; then export SPLITZIP_FUZZ_ISA=$isa; else unset SPLITZIP_FUZZ_ISA; fi
  "$build/fuzz/fuzz_$target" -max_total_time="$per" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz/crash-$target-${isa:-best}-" "$corpus" "${seeds[@]}"
}
lane() {  # runs lane, lane + jobs, ... in turn; stops at the first failure
  local i
  for (( i = $1; i < ${#runs[@]}; i += jobs )); do
    local r=${runs[i]}
    one_run "$r" > "$build/fuzz/log-${r// /-}.txt" 2>&1 || { echo "fuzz: ${r% } failed"; return 1; }
  done
}
pids=()
for (( l = 0; l < jobs && l < ${#runs[@]}; ++l )); do
  lane "$l" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
for r in "${runs[@]}"; do
  log="$build/fuzz/log-${r// /-}.txt"
  [[ -f $log ]] || continue
  if (( failed )); then cat "$log"; else head -1 "$log"; grep -E '^(Done|stat::number_of_executed_units)' "$log" || true; fi
done
(( failed == 0 )) || { echo "fuzz: a target failed (its input: $build/fuzz/crash-*)"; exit 1; }
echo "fuzz: no crash in ${total}s of fuzzing ($jobs lanes)"
