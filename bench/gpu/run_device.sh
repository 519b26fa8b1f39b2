#!/bin/bash
# run_device.sh — one call on the GPU machine: build the library, its CUDA tests and the GPU bench from this
# checkout (bench/gpu standalone), then run the steps named as arguments, in order:
#   tests      the CUDA gtest suite and the host XXH3 test
#   sanitize   compute-sanitizer memcheck (corrupt frames, warp-decoder escape checks, real KV, unaligned, oversize;
#              SAN_FILTER overrides) and racecheck (real KV, oversize)
#   bench      bench_gpu on .devdata tiled to 1 GiB (table on stdout, CSV in $OUT/gpu_bench.csv)
#   variants   bench of BF16 with SPLITZIP_CUDA_KERNEL=tile and =general (the v6 and general kernels, for comparison)
#   profile    Nsight Compute sections (stalls, occupancy, memory) of the BF16 fast kernels
#   sass       counts of local-memory (spill) instructions in the fast kernels' machine code
#   peers      nvCOMP peers (bench/gpu/peers.py) from the carried .whl/pk/nvcomp.tar.xz
#   dfloat11   DFloat11 0.5.0 decoder (bench/gpu/dfloat11_peer.py) on the BF16 KV tiled to DFL_MIB (256) MiB,
#              from the carried .whl/dfl wheels (dfloat11, dahuffman); CSV in $OUT/dfloat11.csv
# Needs .debs/ (libxxhash-dev, googletest, libgtest-dev .deb files) and .devdata/ (real KV files) carried along.
# The library is built only when tests, sanitize or bench is among the steps.
set -u
OUT=${OUT:-/tmp/sz_out}
mkdir -p "$OUT"
P=/tmp/prefix
mkdir -p $P
for f in .debs/*.deb; do dpkg -x "$f" $P; done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
case " $* " in *" tests "*|*" sanitize "*|*" bench "*) ;; *) SKIP_BUILD=1 ;; esac  # Python-only steps: no build
t0=$(date +%s)
[ -n "${SKIP_BUILD:-}" ] || {
cmake -S bench/gpu -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DSPLITZIP_GPU_WITH_TESTS=ON -DSPLITZIP_XXHASH_INCLUDE_DIR=$P/usr/include \
  -DSPLITZIP_GTEST_SOURCE_DIR=$P/usr/src/googletest > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C build-dev splitzip_cuda_tests splitzip_cuda_xxh3_tests splitzip_cuda_xxh3_cta_tests splitzip_gpu_bench > "$OUT/build.log" 2>&1 \
  || { grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
}
T=build-dev/splitzip/tests/cuda
for step in "$@"; do
  case $step in
    tests)
      $T/splitzip_cuda_xxh3_tests --gtest_brief=1 2>&1 | tail -3
      timeout 120 $T/splitzip_cuda_xxh3_cta_tests --gtest_brief=1 2>&1 | tee "$OUT/xxh3_cta.log" | tail -12
      timeout 300 $T/splitzip_cuda_tests --gtest_brief=1 2>&1 | tee "$OUT/tests.log" | tail -40 ;;
    sanitize)
      F=${SAN_FILTER:-'CudaCodec.CorruptFramesRejectedLikeReference:CudaCodec.WarpDecoderEscapeChecksLikeReference:CudaCodec.RealKvSliceEqualsReference:CudaCodec.UnalignedBuffers:CudaCodec.OversizeCodedRecordDecodesLikeReference'}
      timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $T/splitzip_cuda_tests --gtest_brief=1 \
        --gtest_filter="$F" > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -6 "$OUT/memcheck.log"
      timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T/splitzip_cuda_tests --gtest_brief=1 \
        --gtest_filter='CudaCodec.RealKvSliceEqualsReference:CudaCodec.OversizeCodedRecordDecodesLikeReference' \
        > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -6 "$OUT/racecheck.log" ;;
    bench)
      timeout 300 build-dev/splitzip_gpu_bench --data .devdata --gib 1 --reps ${REPS:-15} --csv "$OUT/gpu_bench.csv" \
        2>&1 | tee "$OUT/bench.log" ;;
    variants)  # BF16 only: the general kernels, for bench/NOTES.md
      for v in ${VARIANTS:-SPLITZIP_CUDA_KERNEL=tile SPLITZIP_CUDA_KERNEL=general}; do
        echo "== $v"
        env $v timeout 120 build-dev/splitzip_gpu_bench --data .devdata --gib 1 --reps ${REPS:-15} --only bf16 2>&1 \
          | tee -a "$OUT/variants.log" | tail -3
      done ;;
    profile)  # Nsight Compute: warp stall reasons, occupancy, memory throughput of the BF16 fast kernels
      timeout 240 ncu --clock-control none --kernel-name regex:'encode_warp|decode_warp' --launch-count 4 \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
        --section LaunchStats build-dev/splitzip_gpu_bench --data .devdata --gib 0.25 --reps 1 --warmup 0 --only bf16 \
        > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
      grep -E "^  [a-z_]+.*(encode_warp|decode_warp)|Stall|Warp Cycles Per|Issued Warp|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|No Eligible|Registers Per|Block Limit|Dynamic Shared" "$OUT/ncu.log" | cut -c1-150 | head -80 ;;
    sass)  # spill traffic (local loads / stores) per fast-path function, read off the machine code
      for o in $(find build-dev -name 'decode.cu.o' -o -name 'encode.cu.o' | grep -v tests); do
        cuobjdump -sass "$o" 2>/dev/null | awk '/Function :/ {f=$3} /LDL|STL/ {n[f]++} END {for (k in n) print n[k], k}' \
          | grep -E "fast|warp" | sort -rn | head -12
      done ;;
    peers)
      mkdir -p /tmp/site && tar xJf .whl/pk/nvcomp.tar.xz -C /tmp/site
      PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site timeout 300 python3 bench/gpu/peers.py --data .devdata --gib 1 \
        --csv "$OUT/peers.csv" 2>&1 | tee "$OUT/peers.log" ;;
    dfloat11)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/dfl/*.whl || { echo "dfloat11: wheel install failed"; continue; }
      PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site timeout 150 python3 bench/gpu/dfloat11_peer.py --data .devdata \
        --mib ${DFL_MIB:-256} --csv "$OUT/dfloat11.csv" 2>&1 | tee "$OUT/dfloat11.log" ;;
  esac
done
