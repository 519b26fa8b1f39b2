#!/bin/bash
# device_check.sh — one call on the GPU machine for the transfer library's GPU path: builds the library,
# its tests and bench/transfer from this checkout against the UCX of PyPI's libucx-cu13 wheel (UCX built with CUDA),
# then runs the GPU transfer tests and the --gpu benchmark, writing logs to $OUT.
#
#   bash transfer/tools/device_check.sh            # on the GPU machine, with .xfer carried
#   bash transfer/tools/device_check.sh --no-gpu   # build and the CPU/UCX checks only (for a machine without a GPU)
#
# Needs, in $XFER_DEPS (default .xfer, an ignored folder carried along; about 45 MB):
#   libucx_cu13-*.whl                      pip download --no-deps --only-binary=:all: ... libucx-cu13 (headers included)
#   libxxhash-dev, googletest, libgtest-dev, libcli11-dev, nlohmann-json3-dev, libzstd-dev, liblz4-dev .debs
#                                          (apt-get download ...; unpacked with dpkg -x into a private prefix)
# No internet, no apt, no pip install, no pkg-config needed. Every step prints a line "== [t s] step" and its
# outcome; the full logs are in $OUT (7 files: build.log (ucx_info, configure, build), tests_gpu.log, tests_cpu.log,
# bench_gpu.log, bench_gpu.json, bench_staged.log, ttft_gpu.md; tee stdout to an 8th, summary.log).
set -u
NO_GPU=0
[ "${1:-}" = "--no-gpu" ] && NO_GPU=1
OUT=${OUT:-/tmp/xfer_out}
DEPS=${XFER_DEPS:-.xfer}
P=${XFER_PREFIX:-/tmp/xfer-prefix}
B=${XFER_BUILD:-build-xfer-dev}
JOBS=${XFER_JOBS:-$(nproc 2>/dev/null || echo 4)}
mkdir -p "$OUT" "$P"
step() { echo "== [${SECONDS}s] $*"; }
die() { echo "FAILED: $*"; exit 1; }

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
nvcc --version 2>&1 | tail -1; cmake --version | head -1; python3 --version; echo "cpus: $JOBS"
echo "git: $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-100)"
ls -la "$DEPS" 2>&1 | tail -n +2

step "unpack .debs and the libucx-cu13 wheel into $P"
ls "$DEPS"/*.deb >/dev/null 2>&1 || die "no .deb files in $DEPS"
for f in "$DEPS"/*.deb; do dpkg -x "$f" "$P" || die "dpkg -x $f"; done
WHL=$(ls "$DEPS"/libucx_cu13-*.whl 2>/dev/null | head -1)
[ -n "$WHL" ] || die "no libucx_cu13 wheel in $DEPS"
python3 -m zipfile -e "$WHL" "$P/whl" || die "cannot unpack $WHL"
UCX=$P/whl/libucx
chmod +x "$UCX"/bin/* 2>/dev/null
[ -f "$UCX/include/ucp/api/ucp.h" ] || die "the wheel has no UCX headers"
export LD_LIBRARY_PATH=$UCX/lib:$UCX/lib/ucx:$P/whl/libucx_cu13.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_MODULE_DIR=$UCX/lib/ucx
echo "UCX $(cat "$UCX/UCX_WHEEL_VERSION.txt" 2>/dev/null) from $WHL"

step "UCX: version and CUDA transports (ucx_info, at the top of build.log)"
{
  "$UCX/bin/ucx_info" -v
  UCX_TLS=tcp,cuda_copy "$UCX/bin/ucx_info" -d
} > "$OUT/build.log" 2>&1
head -2 "$OUT/build.log"
grep -iE "memory domain|memory types|transport|warn|error|fail" "$OUT/build.log" | grep -iE "cuda|warn|error|fail" \
  | grep -v "error handling" | sort -u | head -12
grep -qi "memory types:.*cuda" "$OUT/build.log" && echo "UCX lists CUDA memory: the direct path should be taken" \
  || echo "UCX lists no CUDA memory type: only the staged path will run"

step "configure and build (build.log)"
L=$P/usr/lib/x86_64-linux-gnu
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSPLITZIP_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSPLITZIP_ENABLE_TRANSFER=ON \
  -DSPLITZIP_BUILD_CLI=OFF -DSPLITZIP_BUILD_TESTS=ON -DSPLITZIP_BUILD_BENCH=ON -DSPLITZIP_BUILD_PYTHON=OFF \
  -DSPLITZIP_UCX_ROOT="$UCX" -DCMAKE_PREFIX_PATH="$P/usr" \
  -DSPLITZIP_XXHASH_INCLUDE_DIR="$P/usr/include" -DSPLITZIP_GTEST_SOURCE_DIR="$P/usr/src/googletest" \
  -DSPLITZIP_ZSTD_INCLUDE_DIR="$P/usr/include" -DSPLITZIP_ZSTD_LIBRARY="$L/libzstd.a" \
  -DSPLITZIP_LZ4_INCLUDE_DIR="$P/usr/include" -DSPLITZIP_LZ4_LIBRARY="$L/liblz4.a" >> "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; die "configure"; }
grep -E "splitzip: (transfer|UCX)" "$OUT/build.log"
echo "configure: ${SECONDS}s"
timeout ${XFER_BUILD_TIMEOUT:-420} ninja -C "$B" -j "$JOBS" splitzip_transfer_tests splitzip_transfer_peer splitzip_bench_transfer \
  >> "$OUT/build.log" 2>&1 || { grep -E "error|Error|FAILED" -A4 "$OUT/build.log" | head -60; die "build"; }
T=$B/tests/transfer/splitzip_transfer_tests
BENCH=$B/bench/transfer/splitzip_bench_transfer
[ -x "$T" ] || T=$(find "$B" -name splitzip_transfer_tests -type f | head -1)
[ -x "$BENCH" ] || BENCH=$(find "$B" -name splitzip_bench_transfer -type f | head -1)
echo "built: $T $BENCH"
ldd "$T" | grep -E "ucp|ucs|cudart" | sed 's/^/  /'

step "GPU transfer tests (tests_gpu.log): UCX_TLS=tcp,cuda_copy, then shm,self,tcp,cuda_copy,cuda_ipc"
: > "$OUT/tests_gpu.log"
for tls in tcp,cuda_copy shm,self,tcp,cuda_copy,cuda_ipc; do
  echo "---- UCX_TLS=$tls" >> "$OUT/tests_gpu.log"
  UCX_TLS=$tls timeout 150 "$T" --gtest_filter='TransferGpu.*' --gtest_brief=0 >> "$OUT/tests_gpu.log" 2>&1
  rc=$?
  echo "UCX_TLS=$tls: rc=$rc"
  sed -n '/^---- UCX_TLS='"$tls"'$/,$p' "$OUT/tests_gpu.log" \
    | grep -E "^\[ +(OK|SKIPPED|FAILED) +\] TransferGpu|info|no GPU|Failure|error|Expected|Which is|Value of|trace" | head -40
done

step "CPU transfer tests against the wheel's UCX (tests_cpu.log): UCX_TLS=tcp"
UCX_TLS=tcp timeout 150 "$T" --gtest_filter='-TransferGpu.*' --gtest_brief=1 > "$OUT/tests_cpu.log" 2>&1
echo "rc=$?"; tail -4 "$OUT/tests_cpu.log"

if [ "$NO_GPU" = 1 ]; then
  step "--no-gpu: the benchmark's --gpu refusal"
  "$BENCH" --gpu --rates 1 --threads 1 2>&1 | tail -2
  step "done (no GPU steps)"
  exit 0
fi

step "benchmark --gpu, auto path (direct when UCX takes CUDA memory), UCX_TLS=tcp,cuda_copy (bench_gpu.log/json)"
UCX_TLS=tcp,cuda_copy timeout 150 "$BENCH" --gpu --gpu-path auto --rates 1 2 5 10 20 0 --threads 1 2 \
  --seconds 0.5 --buffer-mib 1024 --json "$OUT/bench_gpu.json" > "$OUT/bench_gpu.log" 2>&1
echo "rc=$?"; cat "$OUT/bench_gpu.log"

step "benchmark --gpu, staged path (bench_staged.log)"
UCX_TLS=tcp,cuda_copy timeout 60 "$BENCH" --gpu --gpu-path staged --rates 5 0 --threads 2 --seconds 0.5 \
  --buffer-mib 1024 > "$OUT/bench_staged.log" 2>&1
echo "rc=$?"; grep -A12 "Transfer through" "$OUT/bench_staged.log"; grep -E "^- |bench_transfer:" "$OUT/bench_staged.log"

step "TTFT model with the GPU series (ttft_gpu.md)"
if [ -s "$OUT/bench_gpu.json" ]; then
  python3 bench/transfer/ttft_model.py bench/transfer/results_idle.json --gpu-results "$OUT/bench_gpu.json" \
    > "$OUT/ttft_gpu.md" 2>&1
  echo "rc=$?"; grep -E "^- " "$OUT/ttft_gpu.md"
fi
step "done"
