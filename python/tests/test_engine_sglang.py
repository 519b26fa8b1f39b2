"""Optional tier: the SGLang backend against SGLang's own staging code (sglang.srt.disaggregation.common.
staging_buffer): the staging buffer SGLang's per-layer gather builds is what the backend's fused
gather_compress_into compresses, and what SGLang's scatter writes from a decoded staging buffer is what the
backend's scatter_decompress writes. CPU torch tensors of real KV.

    pip install sglang pytest ml_dtypes && pip install --no-deps <splitzip wheel>
    pytest -m sglang python/tests/test_engine_sglang.py
"""

import pytest

pytestmark = pytest.mark.sglang

pytest.importorskip("sglang")
torch = pytest.importorskip("torch")
staging = pytest.importorskip("sglang.srt.disaggregation.common.staging_buffer")

from splitzip.integrations.sglang import SplitZipBackend  # noqa: E402

L, H, D, PAGE = 8, 4, 64, 16


def pools(kv_slice, slots=448, fill=True):
    ks, vs = [], []
    for layer in range(L):
        k = torch.zeros((slots, H, D), dtype=torch.int16)
        v = torch.zeros((slots, H, D), dtype=torch.int16)
        if fill:
            k[:] = torch.from_numpy(kv_slice[layer, 0].view("<i2").copy()).repeat(slots // 224, 1, 1)
            v[:] = torch.from_numpy(kv_slice[layer, 1].view("<i2").copy()).repeat(slots // 224, 1, 1)
        ks.append(k.view(torch.bfloat16))
        vs.append(v.view(torch.bfloat16))
    return ks, vs


def sglang_staging(ks, vs, pages):
    """The staging buffer as SGLang's gather_all_layers_to_staging fills it (its torch path, which needs a CUDA or
    XPU StagingBuffer, done here layer by layer with the same public gather_kv_head_slices): all K layers, then
    all V layers, each [tokens, heads, head_dim]."""
    tokens = len(pages) * PAGE
    token_idx = (torch.tensor(pages, dtype=torch.int64).unsqueeze(1) * PAGE + torch.arange(PAGE)).reshape(-1)
    gather_idx = token_idx.view(-1, 1, 1).expand(tokens, H, D)
    per_layer = tokens * H * D * 2
    buf = torch.empty(2 * L * per_layer, dtype=torch.uint8)
    for i, pool in enumerate(ks + vs):
        view = buf[i * per_layer:(i + 1) * per_layer].view(torch.bfloat16).reshape(tokens, H, D)
        staging.gather_kv_head_slices(pool, gather_idx, 0, H, view)
    return buf


def test_fused_gather_compresses_sglangs_staging_buffer(kv_slice):
    ks, vs = pools(kv_slice)
    pages = [3, 0, 17, 9, 26]
    backend = SplitZipBackend(L, H, D, "bf16", page_size=PAGE)
    buf = sglang_staging(ks, vs, pages)
    assert buf.numel() == len(pages) * PAGE * backend.token_bytes
    a = torch.empty(backend.max_output_bytes(len(pages) * PAGE), dtype=torch.uint8)
    b = torch.empty_like(a)
    na = backend.compress_into(buf, a)
    nb = backend.gather_compress_into(ks, vs, torch.tensor(pages, dtype=torch.int32), b)
    assert na == nb and torch.equal(a[:na], b[:nb])
    assert 1.3 < buf.numel() / na < 1.42


def test_scatter_matches_sglangs_scatter(kv_slice):
    ks, vs = pools(kv_slice)
    src_pages, dst_pages = [3, 0, 17, 9], [1, 20, 5, 11]
    backend = SplitZipBackend(L, H, D, "bf16", page_size=PAGE)
    frame = torch.empty(backend.max_output_bytes(4 * PAGE), dtype=torch.uint8)
    n = backend.gather_compress_into(ks, vs, src_pages, frame)
    # SGLang's decode side: decompress into a staging slot, then SGLang's scatter into the pools
    slot = torch.empty(4 * PAGE * backend.token_bytes, dtype=torch.uint8)
    backend.decompress_into(frame[:n], slot)
    ref_k, ref_v = pools(kv_slice, fill=False)
    per_layer = 4 * PAGE * H * D * 2
    idx = torch.tensor(dst_pages, dtype=torch.int64)
    for i, pool in enumerate(ref_k + ref_v):
        staging.scatter_kv_head_slices(slot[i * per_layer:(i + 1) * per_layer].view(torch.bfloat16), pool, idx, 0,
                                       H, PAGE)
    # the backend's fused scatter gives the same pools
    got_k, got_v = pools(kv_slice, fill=False)
    backend.scatter_decompress(frame[:n], got_k, got_v, dst_pages)
    backend.drain()
    for a, b in zip(ref_k + ref_v, got_k + got_v):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    assert any(p.view(torch.int16).any() for p in got_k)
