"""The paged-KV example runs end to end (CPU with numpy; GPU with torch when available)."""

import subprocess
import sys

import pytest

import splitzip
from conftest import REPO, ml_dtypes

EXAMPLE = REPO / "examples" / "paged_kv.py"


def run_example(*args):
    res = subprocess.run([sys.executable, str(EXAMPLE), "--num-blocks", "40", "--request-blocks", "12", *args],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all blocks bit-identical: OK" in res.stdout
    return res.stdout


@pytest.mark.skipif(ml_dtypes is None, reason="the CPU example uses ml_dtypes for bf16")
def test_example_cpu():
    out = run_example()
    assert "byte copy" in out


def test_example_cuda():
    torch = pytest.importorskip("torch")
    if not (torch.cuda.is_available() and splitzip.cuda_available()):
        pytest.skip("needs a CUDA GPU and a CUDA build of splitzip")
    run_example("--device", "cuda")
