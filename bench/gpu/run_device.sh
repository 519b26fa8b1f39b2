#!/bin/bash
# run_device.sh — one call on the GPU machine: runs the CUDA test suite, the sanitizers and the benchmark from
# binaries built on the development machine and carried along (building the CUDA codec takes minutes of a lease).
#
# Before the call, on the development machine (nvcc 13, CMake, ninja):
#   cmake -S bench/gpu -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
#         -DBUILD_SHARED_LIBS=ON -DSPLITZIP_GPU_WITH_TESTS=ON && ninja -C build-dev splitzip_cuda_tests splitzip_gpu_bench
#   bash bench/gpu/run_device.sh --stage     # copies the binaries and sliced real KV into .devcarry/
# then on the device (carry: .devcarry):
#   bash bench/gpu/run_device.sh tests sanitize bench
# Steps, in the order given:
#   tests      the CUDA gtest suite (every CPU <-> GPU byte-equality, corrupt-frame, paged, graph, small-message test)
#   sanitize   compute-sanitizer memcheck (corrupt frames, escape lists, real KV, unaligned, oversize, pages) and
#              racecheck (real KV, pages, graph)
#   bench      splitzip_gpu_bench over .devcarry/data at SIZES MiB per call (default 1,4,16,64,256,1024), REPS
#              batches, ONLY datasets (default all); CSV in $OUT/gpu_bench.csv
#   profile    Nsight Compute (stalls, occupancy, memory) of one encode and one decode kernel on BF16 at 64 MiB
set -u
if [ "${1:-}" = "--stage" ]; then
  set -e
  mkdir -p .devcarry/bin .devcarry/data
  cp build-dev/splitzip/tests/cuda/splitzip_cuda_tests build-dev/splitzip_gpu_bench .devcarry/bin/
  cp -L build-dev/splitzip/src/libsplitzip.so.1 .devcarry/bin/
  strip .devcarry/bin/* || true
  S=../shared/data/kv/trained-d512
  for f in kv_code_bf16 kv_prose_bf16 kv_code_e4m3 kv_prose_e4m3 kv_code_e5m2 kv_prose_e5m2; do
    [ -f $S/$f.bin ] && python3 bench/gpu/slice_kv.py --layers 8 --kv-heads 4 --head-dim 64 --tokens 384 \
      $S/$f.bin .devcarry/data/$f.bin
  done
  M=.devdata/smollm2
  if [ -d $M ]; then
    mkdir -p .devcarry/data/smollm2
    for f in $M/*_bf16.bin $M/*_fp16.bin $M/*_e4m3.bin $M/*_e5m2.bin; do
      [ -f "$f" ] && python3 bench/gpu/slice_kv.py --layers 30 --kv-heads 3 --head-dim 64 --tokens 256 \
        "$f" .devcarry/data/smollm2/$(basename "$f")
    done
  fi
  du -sh .devcarry/*
  exit 0
fi
OUT=${OUT:-/tmp/sz_out}
mkdir -p "$OUT"
B=.devcarry/bin
export LD_LIBRARY_PATH=$PWD/$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SPLITZIP_TEST_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for step in "$@"; do
  case $step in
    tests)
      timeout ${TESTS_TIMEOUT:-300} $B/splitzip_cuda_tests --gtest_brief=1 2>&1 | tee "$OUT/tests.log" | tail -30 ;;
    sanitize)
      F='CudaCodec.CorruptFramesRejectedLikeReference:CudaCodec.EscapeListChecksLikeReference:CudaCodec.RealKvSliceEqualsReference:CudaCodec.UnalignedBuffers:CudaCodec.OversizeCodedRecordDecodesLikeReference:CudaCodec.PagesEqualSingleFrame'
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/splitzip_cuda_tests --gtest_brief=1 \
        --gtest_filter="${SAN_FILTER:-$F}" > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -4 "$OUT/memcheck.log"
      timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/splitzip_cuda_tests --gtest_brief=1 \
        --gtest_filter='CudaCodec.RealKvSliceEqualsReference:CudaCodec.GraphCaptureAndReplay' \
        > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -4 "$OUT/racecheck.log" ;;
    bench)
      timeout ${BENCH_TIMEOUT:-500} $B/splitzip_gpu_bench --data .devcarry/data --sizes "${SIZES:-1,4,16,64,256,1024}" \
        --reps "${REPS:-7}" ${ONLY:+--only $ONLY} --csv "$OUT/gpu_bench.csv" > "$OUT/bench.log" 2>&1
      echo "bench rc=$?"; grep -v "^|" "$OUT/bench.log" | tail -30 ;;
    profile)
      timeout 200 ncu --clock-control none --launch-skip 20 --launch-count 2 \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
        --section LaunchStats $B/splitzip_gpu_bench --data .devcarry/data --only d512_bf16 --sizes 64 --reps 1 \
        --no-paged > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
      grep -E "encode_kernel|decode_kernel|Stall|Warp Cycles Per|Issued Warp|Achieved Occupancy|Theoretical Occ|Memory Throughput|No Eligible|Registers Per|Block Limit" \
        "$OUT/ncu.log" | cut -c1-140 | head -40 ;;
  esac
done
