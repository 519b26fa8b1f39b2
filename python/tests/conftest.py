"""Shared helpers of the splitzip Python tests."""

import os
import pathlib
import shutil

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SLICE = REPO / "data" / "kv_code_bf16_slice.bin"
SHARED_KV = REPO.parent / "shared" / "data" / "kv"

try:
    import ml_dtypes
except ImportError:  # tests that need numpy bf16/fp8 dtypes skip
    ml_dtypes = None

needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed (numpy bf16/fp8 dtypes)")


def numpy_dtype(name):
    """numpy dtype for a splitzip dtype name (ml_dtypes for bf16/fp8)."""
    if name == "fp16":
        return np.dtype(np.float16)
    if name == "fp32":
        return np.dtype(np.float32)
    if ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed")
    return np.dtype({"bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
                     "fp8_e5m2": ml_dtypes.float8_e5m2}[name])


UINT_OF = {"bf16": np.uint16, "fp16": np.uint16, "fp32": np.uint32, "fp8_e4m3": np.uint8, "fp8_e5m2": np.uint8}
ALL_DTYPES = ["bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2"]


def kv_like_bits(name, n, seed=0):
    """n values of dtype `name` as unsigned bit patterns, distributed like KV activations (normal, scale ~1)
    with a sprinkle of arbitrary bit patterns (NaN payloads, infinities, subnormals) to exercise escapes."""
    rng = np.random.default_rng(seed)
    vals = rng.standard_normal(n).astype(np.float32) * 0.7
    if name == "fp32":
        bits = vals.view(np.uint32).copy()
    elif name == "fp16":
        bits = vals.astype(np.float16).view(np.uint16).copy()
    elif name == "bf16":
        bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    else:
        dt = numpy_dtype(name)
        bits = vals.astype(dt).view(np.uint8).copy()
    u = UINT_OF[name]
    wild = rng.integers(0, n, size=max(1, n // 50)) if n else np.zeros(0, dtype=np.int64)
    bits[wild] = rng.integers(0, np.iinfo(u).max, size=wild.size, dtype=np.uint64, endpoint=True).astype(u)
    return bits


@pytest.fixture(scope="session")
def kv_slice():
    """The real BF16 KV slice shipped in the repo, as uint16 bit patterns, shape [8, 2, 224, 4, 64]."""
    raw = np.fromfile(SLICE, dtype="<u2")
    assert raw.size == 917504
    return raw.reshape(8, 2, 224, 4, 64)


def find_cli():
    """The splitzip CLI binary: $SPLITZIP_CLI, else one built in a build*/ folder of the repo, else on PATH."""
    env = os.environ.get("SPLITZIP_CLI")
    if env:
        return env if os.access(env, os.X_OK) else None
    candidates = sorted(REPO.glob("build*/cli/splitzip")) + sorted(REPO.glob("build*/splitzip"))
    candidates += sorted(REPO.glob("build*/*/cli/splitzip"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("splitzip")


# Optional tiers that test the engine adapters against the engines' own packages (vLLM, SGLang, LMCache). They are
# skipped unless selected by name (`pytest -m vllm`), so a plain run never depends on an engine being installed.
ENGINE_TIERS = ("vllm", "sglang", "lmcache")


def pytest_configure(config):
    for tier in ENGINE_TIERS:
        config.addinivalue_line("markers", f"{tier}: optional tier against the real {tier} package "
                                           f"(`pytest -m {tier}` in a virtual environment that has it)")


def pytest_collection_modifyitems(config, items):
    expr = config.getoption("markexpr") or ""
    for item in items:
        for tier in ENGINE_TIERS:
            if item.get_closest_marker(tier) is not None and tier not in expr:
                item.add_marker(pytest.mark.skip(reason=f"optional {tier} tier: run `pytest -m {tier}` where "
                                                        f"{tier} is installed"))
