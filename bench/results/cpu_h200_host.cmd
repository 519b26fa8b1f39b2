# Run 2026-11-29 ~12:10 UTC on the H200 host (16 vCPU Intel Xeon, Sapphire/Emerald Rapids, KVM), lent as a second
# machine, library at commit 27a0c89 (src/); binary built here as a static executable (same sources, Release, the
# library's run-time AVX2 dispatch):
#   g++ -std=c++17 -O2 -static -Iinclude -Ibench bench/cpu_bench.cpp build-bench/src/libsplitzip.a -lzstd -llz4 -pthread -o .devdata/h200/splitzip_cpu_bench
# Input files: copies of ../shared/data/kv/trained-d512/kv_code_{bf16,e4m3,e5m2}.bin, kv_prose_bf16.bin and
# data/kv_code_bf16_slice.bin. An earlier run (~12:00 UTC, library at 8c8a2b9, threads 1,2,4,8, BF16 only) is in
# cpu_h200_host_run1.json: single-thread figures moved by up to 1.5-2x between the two runs (a VM's single core).
.devdata/h200/splitzip_cpu_bench .devdata/h200/kv_code_bf16.bin .devdata/h200/kv_prose_bf16.bin .devdata/h200/kv_code_e4m3.bin .devdata/h200/kv_code_e5m2.bin data/kv_code_bf16_slice.bin --threads 1,2,4,8,16 --zstd-levels 1,3 --repeats 7 --min-time 0.05 --json cpu_h200.json --csv cpu_h200.csv
