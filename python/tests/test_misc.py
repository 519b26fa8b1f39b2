"""Package surface: version, bounds, behaviour without ml_dtypes, concurrent calls."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import splitzip
from conftest import kv_like_bits


def test_version_and_flags():
    assert splitzip.__version__ == "1.0.0" and splitzip.FORMAT_VERSION == 1
    assert isinstance(splitzip.cuda_available(), bool)
    # §4.8: 64 + 12 * ceil(n / 256) + ceil(n / 8) * W / 8 ... in bytes: W bits per value
    assert splitzip.compress_bound(1000, "bf16") == 64 + 12 * 4 + 125 * 16
    assert splitzip.compress_bound(0, "fp8_e4m3") == 64


def test_without_ml_dtypes_bf16_comes_back_as_uint16():
    code = (
        "import sys; sys.modules['ml_dtypes'] = None\n"
        "import numpy as np, splitzip\n"
        "x = np.arange(1000, dtype=np.uint16)\n"
        "y = splitzip.decompress(splitzip.compress(x, dtype='bf16'))\n"
        "assert y.dtype == np.uint16 and (y == x).all()\n"
        "z = splitzip.decompress(splitzip.compress(np.arange(256, dtype=np.uint8), dtype='fp8_e5m2'))\n"
        "assert z.dtype == np.uint8 and (z == np.arange(256)).all()\n"
        "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_concurrent_calls_from_threads():
    inputs = [kv_like_bits("bf16", 50_000, seed=s) for s in range(8)]
    want = [splitzip.compress(x, dtype="bf16", threads=1).tobytes() for x in inputs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: splitzip.compress(x, dtype="bf16", threads=1).tobytes(), inputs))
        assert got == want
        backs = list(pool.map(lambda f: splitzip.decompress(f, out=np.empty(50_000, np.uint16), threads=1),
                              [np.frombuffer(w, np.uint8) for w in want]))
    for x, y in zip(inputs, backs):
        np.testing.assert_array_equal(x, y)


def test_installed_distribution_carries_readme_and_licence():
    from importlib import metadata
    meta = metadata.metadata("splitzip")
    assert meta["Description-Content-Type"] == "text/markdown"
    assert (meta.get_payload() or meta["Description"] or "").lstrip().startswith("# splitzip")
    licences = [f for f in metadata.files("splitzip") if f.name == "LICENSE"]
    assert licences, "no LICENSE in the installed distribution"
    assert "Apache License" in licences[0].read_text() and "Version 2.0" in licences[0].read_text()
