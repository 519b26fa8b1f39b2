#!/usr/bin/env bash
# The Python module on a GPU machine: `pip install .` with CUDA into that machine's python3 (torch, nanobind,
# scikit-build-core already there, no network: no build isolation), then the whole pytest suite (GPU tests
# included), the paged-KV example on the GPU and a short timing of the Python API against a device copy.
# Usage (from the repo root): bash python/tools/device_check.sh
# Carried along when present (the device machine has no network): build-py/whl/*.whl (nanobind and
# scikit-build-core of the versions used here) and build-py/devdeps/xxhash.h (Debian's libxxhash-dev header).
set -uo pipefail
export PYTHONUNBUFFERED=1
repo=$(pwd)
args=(-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90-real -Cbuild-dir=/tmp/splitzip-wheel-build)
if compgen -G "build-py/whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site build-py/whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# extra pip arguments, e.g. SPLITZIP_PIP_ARGS=-Ccmake.define.SPLITZIP_ENABLE_CUDA=OFF for a dry run without a GPU
read -r -a extra <<< "${SPLITZIP_PIP_ARGS:-}"; args+=("${extra[@]}")
[ -f build-py/devdeps/xxhash.h ] && args+=("-Ccmake.define.SPLITZIP_XXHASH_INCLUDE_DIR=$repo/build-py/devdeps")
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q "${args[@]}" . || { echo "pip install failed"; exit 1; }
echo "== pip install . (CUDA, sm_90): $(( $(date +%s) - t0 )) s"
python3 -c "import splitzip, torch; print('splitzip', splitzip.__version__, 'cuda_available', splitzip.cuda_available(), 'torch', torch.__version__, 'custom ops', splitzip.register_torch_ops())"
cd /tmp || exit 1
rc=0
python3 -m pytest -q -rs -p no:cacheprovider "$repo/python/tests" > /tmp/splitzip-pytest.log 2>&1 || rc=1
tail -60 /tmp/splitzip-pytest.log
[ -n "${OUT:-}" ] && cp /tmp/splitzip-pytest.log "$OUT/pytest.log"
echo "== example on the GPU"
python3 "$repo/examples/paged_kv.py" --device cuda || rc=1
echo "== example on the CPU"
python3 "$repo/examples/paged_kv.py" --num-blocks 64 --request-blocks 16 || rc=1
echo "== timing"
python3 "$repo/python/tools/gpu_timing.py" || rc=1
exit $rc
