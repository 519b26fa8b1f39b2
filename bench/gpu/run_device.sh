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
#   duration   Nsight Compute: the GPU time of single encode / decode kernels on BF16 at 1 MiB (no launch overhead)
#   profile    Nsight Compute (stalls, occupancy, memory) of one encode and one decode kernel on BF16 at 64 MiB
#   sass       Nsight Compute per-instruction counts and stall samples (SourceCounters, SASS) of one encode and one
#              decode kernel (SASS_KERNELS) on BF16 at SASS_MIB (default 64) MiB with checksums SASS_CKS (a --checksums
#              value of the bench, default on), SASS_INTERVAL the sampling interval (2^(5+i) cycles);
#              $OUT/sass_*_MIB_CKS.csv.gz (bench/gpu/sass_hot.py reads them)
#   disasm     the library's machine code with its line table (nvdisasm; build with CMAKE_CUDA_FLAGS=-lineinfo):
#              $OUT/disasm.txt.gz, which bench/gpu/sass_lines.py uses to sum a sass profile per source line
#   ab         the bench for BIN (A) and BIN_B (B) alternately, AB_RUNS times each (default 2), contiguous only;
#              the comparison table $OUT/ab.md (bench/gpu/ab_table.py) and the runs' CSVs in $OUT/ab_csv.tgz (the
#              logs stay in /tmp/sz_ab: a call returns few files)
# BIN: the binaries' folder (default .devcarry/bin), e.g. a second build staged for an A/B run in the same call.
# BIN_B may hold only its libsplitzip.so.1.xz (12 MB): the benches and tests link the library dynamically through
# the C API, so BIN's binaries run either build (more builds fit one carry).
set -u
if [ "${1:-}" = "--stage" ]; then
  set -e
  mkdir -p .devcarry/bin .devcarry/data
  cp build-dev/splitzip/tests/cuda/splitzip_cuda_tests build-dev/splitzip_gpu_bench .devcarry/bin/
  strip .devcarry/bin/* || true
  # The library (24-32 MB) travels xz-compressed (about 12 MB): one build and all the data (35 MB) fit a carry of
  # 64 MiB with the working tree, and so do two builds with the data of a few datasets for an A/B run.
  strip -o .devcarry/bin/libsplitzip.so.1 build-dev/splitzip/src/libsplitzip.so.1
  xz -9e -T2 -f .devcarry/bin/libsplitzip.so.1
  S=../shared/data/kv/trained-d512
  for f in kv_code_bf16 kv_code_e4m3 kv_code_e5m2; do
    [ -f $S/$f.bin ] && python3 bench/gpu/slice_kv.py --layers 8 --kv-heads 4 --head-dim 64 --tokens 384 \
      $S/$f.bin .devcarry/data/$f.bin
  done
  M=.devdata/smollm2
  if [ -d $M ]; then
    mkdir -p .devcarry/data/smollm2
    for f in $M/prose_*.bin $M/code_*.bin; do  # measured on prose (256 tokens), calibrated on code (128)
      T=256; case $f in *code_*) T=128 ;; esac
      [ -f "$f" ] && python3 bench/gpu/slice_kv.py --layers 30 --kv-heads 3 --head-dim 64 --tokens $T \
        "$f" .devcarry/data/smollm2/$(basename "$f")
    done
  fi
  du -sh .devcarry/*
  exit 0
fi
OUT=${OUT:-/tmp/sz_out}
mkdir -p "$OUT"
B=${BIN:-.devcarry/bin}
for d in "$B" ${BIN_B:-}; do  # the staged libraries, unpacked once
  [ -f "$d/libsplitzip.so.1.xz" ] && [ ! -f "$d/libsplitzip.so.1" ] && xz -d -k "$d/libsplitzip.so.1.xz"
done
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
    duration)  # the GPU time of single kernels at 1 MiB (launch overhead excluded)
      timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
        --launch-skip 10 --launch-count 6 $B/splitzip_gpu_bench --data .devcarry/data --only d512_bf16 --sizes 1 \
        --reps 1 --no-paged > "$OUT/ncu_small.log" 2>&1; echo "ncu rc=$?"
      grep -E "encode_kernel|decode_kernel|gpu__time_duration|warps_active" "$OUT/ncu_small.log" | cut -c1-120 | head -24 ;;
    sass)  # per-instruction profile of one encode and one decode kernel (SASS_MIB per call, default 64)
      M=${SASS_MIB:-64}; SI=${SASS_INTERVAL:+--warp-sampling-interval $SASS_INTERVAL}; CK=${SASS_CKS:-on}
      for k in ${SASS_KERNELS:-encode_kernel decode_kernel}; do
        f="$OUT/sass_${k}_${M}_${CK}.csv"
        timeout 240 ncu --clock-control none --kernel-name regex:$k --launch-skip 5 --launch-count 1 $SI \
          --section SourceCounters --page source --print-source sass --csv $B/splitzip_gpu_bench \
          --data .devcarry/data --only d512_bf16 --sizes $M --reps 2 --no-paged --checksums $CK \
          > "$f" 2> "${f%.csv}.err"
        echo "ncu sass $k $M MiB rc=$?"; gzip -f "$f"
      done ;;
    ab)  # same-call comparison of two builds
      AF=(); BF=(); T=/tmp/sz_ab; mkdir -p $T
      for i in $(seq 1 ${AB_RUNS:-2}); do
        for v in A B; do
          d=$B; [ $v = B ] && d=$BIN_B
          exe=$d/splitzip_gpu_bench; [ -x "$exe" ] || exe=$B/splitzip_gpu_bench  # B may carry its library only
          LD_LIBRARY_PATH=$PWD/$d timeout ${BENCH_TIMEOUT:-300} $exe --data .devcarry/data \
            --sizes "${SIZES:-1,16,1024}" --reps "${REPS:-5}" ${ONLY:+--only $ONLY} --no-paged ${BENCH_ARGS:-} \
            --csv "$T/ab_${v}_$i.csv" > "$T/ab_${v}_$i.log" 2>&1 || echo "ab $v $i rc=$?"
          if [ $v = A ]; then AF+=("$T/ab_A_$i.csv"); else BF+=("$T/ab_B_$i.csv"); fi
        done
      done
      tar czf "$OUT/ab_csv.tgz" -C $T $(cd $T && ls ab_*.csv)
      python3 bench/gpu/ab_table.py "${AF[@]}" -- "${BF[@]}" | tee "$OUT/ab.md" ;;
    disasm)  # machine code + line table of the library, for sass_lines.py
      D=$(mktemp -d) && (cd "$D" && cuobjdump -xelf all "$OLDPWD/$B/libsplitzip.so.1" > /dev/null)
      for f in "$D"/*.cubin; do nvdisasm -g -gi -c "$f"; done 2> "$OUT/disasm.err" | gzip > "$OUT/disasm.txt.gz"
      echo "disasm: $(ls "$D" | wc -l) cubins, $(stat -c %s "$OUT/disasm.txt.gz") bytes"; rm -rf "$D" ;;
    profile)  # one encode and one decode kernel: stall reasons, occupancy, memory
      for k in encode_kernel decode_kernel; do
        timeout 150 ncu --clock-control none --kernel-name regex:$k --launch-skip 20 --launch-count 1 \
          --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
          --section LaunchStats --print-details all $B/splitzip_gpu_bench --data .devcarry/data --only d512_bf16 \
          --sizes 64 --reps 3 --no-paged > "$OUT/ncu_$k.log" 2>&1; echo "ncu $k rc=$?"
        grep -E "Stall|Warp Cycles Per Issued|Issued Warp|Achieved Occupancy|Theoretical Occ|Memory Throughput|No Eligible|Registers Per|Block Limit (Reg|Shared)" \
          "$OUT/ncu_$k.log" | cut -c1-110 | head -30
      done ;;
  esac
done
