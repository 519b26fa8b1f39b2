#!/usr/bin/env bash
# The max mode's ratio table (bench/ratio_max.cpp) on every real KV data set present: SmolLM2-135M (calibrated on
# code, measured on prose; the .devdata of bench/models/smollm2_kv.py) and trained-d512 (../shared/data; calibrated
# on code, measured on prose). Data sets that are absent are skipped with a note.
# Usage: bench/ratio_max.sh BUILD_DIR [SMOLLM2_DIR] [SHARED_DATA_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:?usage: bench/ratio_max.sh BUILD_DIR [SMOLLM2_DIR] [SHARED_DATA_DIR]}
smol=${2:-$root/.devdata/smollm2}
shared=${3:-$root/../shared/data}
tool="$build/bench/splitzip_ratio_max"
header=1
run() {  # label dtype shape calib measure
  if [[ ! -f $4 || ! -f $5 ]]; then echo "# $1 $2: skipped ($4 or $5 absent)"; return; fi
  if (( header )); then "$tool" --label "$1" --dtype "$2" --kv-shape "$3" --calib "$4" --measure "$5"; header=0
  else "$tool" --label "$1" --dtype "$2" --kv-shape "$3" --calib "$4" --measure "$5" | tail -n +2; fi
}
for d in bf16 fp16 fp32 e4m3 e5m2; do
  dt=$d; [[ $d == e4m3 ]] && dt=fp8_e4m3; [[ $d == e5m2 ]] && dt=fp8_e5m2
  run "SmolLM2-135M" "$dt" 30,2,2048,3,64 "$smol/code_$d.bin" "$smol/prose_$d.bin"
done
for d in bf16 e4m3 e5m2; do
  dt=$d; [[ $d == e4m3 ]] && dt=fp8_e4m3; [[ $d == e5m2 ]] && dt=fp8_e5m2
  run "trained-d512" "$dt" 8,2,1536,4,64 "$shared/kv/trained-d512/kv_code_$d.bin" "$shared/kv/trained-d512/kv_prose_$d.bin"
done
