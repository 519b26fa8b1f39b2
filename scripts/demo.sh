#!/usr/bin/env bash
# The main job: build splitzip, then compress and decompress real KV caches (on the GPU when there is one,
# else on the CPU) and print ratio, throughput and a bit-exactness check.
#   bash scripts/demo.sh              # shipped slice + ../shared/data/kv when present
#   bash scripts/demo.sh FILE...      # your own raw BF16 files
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
bash scripts/deps.sh
BUILD=${SPLITZIP_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITZIP_BUILD_TESTS=OFF -DSPLITZIP_BUILD_BENCH=OFF \
      -DSPLITZIP_ENABLE_TRANSFER=OFF >/dev/null
cmake --build "$BUILD" --target splitzip_cli -- -j"$(nproc)" >/dev/null
SZ="$BUILD/cli/splitzip"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(data/kv_code_bf16_slice.bin)
  shared=../shared/data/kv/trained-d512
  if [ -d "$shared" ]; then
    files+=("$shared/kv_code_bf16.bin" "$shared/kv_prose_bf16.bin")
  else
    echo "note: ../shared/data/kv absent; running on the shipped slice only"
  fi
fi
"$SZ" bench --dtype bf16 "${files[@]}"
