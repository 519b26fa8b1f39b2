"""The three adapters on torch tensors: on the host, and on a CUDA GPU (where vLLM's and SGLang's KV lives) when one
is visible and the extension was built with CUDA. Bit-exact round trips through each engine-facing interface, the
compressed bytes counted, and the same frames as the host codec makes. Skipped without torch."""

from types import SimpleNamespace as NS

import numpy as np
import pytest

import splitzip
from splitzip.integrations import lmcache as szlm
from splitzip.integrations.sglang import SplitZipBackend
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not (torch.cuda.is_available() and splitzip.cuda_available()),
    reason="needs a CUDA GPU and an extension built with SPLITZIP_ENABLE_CUDA=ON"))]
BLOCK, L, H, D = 16, 8, 4, 64
_n = iter(range(1 << 30))


def bf16(a, device):
    """uint16 bit patterns (numpy) as a bf16 tensor on device."""
    return torch.from_numpy(np.ascontiguousarray(a).view("<i2").copy()).to(device).view(torch.bfloat16)


def bits(t):
    return t.view(torch.int16).cpu()


def _layer_caches(kv_slice, device, stride):
    """vLLM-shaped caches (2, 20 blocks, BLOCK, H, D) of real KV, block b of layer l holding slice block
    (stride * b + l) % 14, and zeroed caches of the same shape for the decode side."""
    src, dst = {}, {}
    for layer in range(L):
        c = np.empty((2, 20, BLOCK, H, D), dtype=np.uint16)
        blocks = kv_slice[layer].reshape(2, 14, BLOCK, H, D)
        for b in range(20):
            c[:, b] = blocks[:, (stride * b + layer) % 14]
        src[f"l{layer}"] = bf16(c, device)
        dst[f"l{layer}"] = torch.zeros_like(src[f"l{layer}"])
    return src, dst


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_connector(kv_slice, device):
    extra = {"transport": "inprocess", "name": f"torch-{device}-{next(_n)}"}
    cfg = lambda role: NS(kv_transfer_config=NS(kv_role=role, kv_connector_extra_config=extra),  # noqa: E731
                          cache_config=NS(block_size=BLOCK), model_config=NS(model="m"))
    src, dst = _layer_caches(kv_slice, device, 3)
    ps, pw = (SplitZipConnector(cfg("kv_producer"), r) for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
    cs, cw = (SplitZipConnector(cfg("kv_consumer"), r) for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
    pw.register_kv_caches(src)
    cw.register_kv_caches(dst)
    prompt = list(range(50))  # 49 transferable tokens -> 3 blocks
    new = lambda blocks: NS(req_id="r", prompt_token_ids=prompt, block_ids=(blocks,), num_computed_tokens=0)  # noqa
    step = lambda reqs, n: NS(scheduled_new_reqs=reqs, scheduled_cached_reqs=None, num_scheduled_tokens={"r": n})  # noqa
    pw.bind_connector_metadata(ps.build_connector_meta(step([new([11, 2, 17, 5])], 50)))
    for name, cache in src.items():
        pw.save_kv_layer(name, cache, None)
    pw.wait_for_save()
    req = NS(request_id="r", prompt_token_ids=prompt)
    assert cs.get_num_new_matched_tokens(req, 0) == (48, False)
    cs.update_state_after_alloc(req, None, 48)
    cw.bind_connector_metadata(cs.build_connector_meta(step([new([0, 19, 8, 3])], 2)))
    cw.start_load_kv(None)
    for name in dst:
        cw.wait_for_layer_load(name)
    for name in src:
        for s, d in zip([11, 2, 17], [0, 19, 8]):
            assert torch.equal(bits(src[name][:, s]), bits(dst[name][:, d]))
        assert not bits(dst[name][:, 3]).any()
        host_pages = [src[name][kv, b].cpu() for kv in range(2) for b in (11, 2, 17)]
        box = splitzip.Container(pw.transport.get(pw.object_key(pw.request_key(prompt, 48), 0)))
        assert box.data(name).tobytes() == splitzip.compress_pages(host_pages).tobytes()  # the host codec's frame
    raw = pw.stats["raw_bytes_saved"]
    assert raw == L * 2 * 3 * BLOCK * H * D * 2 and 1.3 < raw / pw.stats["frame_bytes_saved"] < 1.42


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_connector_over_ucx(kv_slice, device):
    """torch CPU caches streamed over UCX, bit-exact; CUDA caches refused by that transport (host staging only)."""
    from splitzip import transfer
    if not transfer.available():
        pytest.skip("this splitzip was built without the transfer library (no UCX)")
    src, dst = _layer_caches(kv_slice, device, 5)
    cfg = lambda role, **extra: NS(  # noqa: E731
        kv_transfer_config=NS(kv_role=role, kv_connector_extra_config={"transport": "ucx", **extra}),
        cache_config=NS(block_size=BLOCK), model_config=NS(model="m"))
    cw = SplitZipConnector(cfg("kv_consumer", port=0), KVConnectorRole.WORKER)
    try:
        port = cw.transport.port
        if device == "cuda":
            with pytest.raises(ValueError, match="not in host memory"):
                cw.register_kv_caches(dst)
            return
        cs = SplitZipConnector(cfg("kv_consumer", port=port), KVConnectorRole.SCHEDULER)
        ps, pw = (SplitZipConnector(cfg("kv_producer", address=f"127.0.0.1:{port}"), r)
                  for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
        pw.register_kv_caches(src)
        cw.register_kv_caches(dst)
        prompt = list(range(50))  # 49 transferable tokens -> 3 blocks
        new = lambda blocks: NS(req_id="r", prompt_token_ids=prompt, block_ids=(blocks,), num_computed_tokens=0)  # noqa
        step = lambda reqs, n: NS(scheduled_new_reqs=reqs, scheduled_cached_reqs=None,  # noqa: E731
                                  num_scheduled_tokens={"r": n})
        pw.bind_connector_metadata(ps.build_connector_meta(step([new([11, 2, 17, 5])], 50)))
        for name, cache in src.items():
            pw.save_kv_layer(name, cache, None)
        pw.wait_for_save()
        assert pw.send_errors == []
        req = NS(request_id="r", prompt_token_ids=prompt)
        assert cs.get_num_new_matched_tokens(req, 0) == (48, False)
        cs.update_state_after_alloc(req, None, 48)
        cw.bind_connector_metadata(cs.build_connector_meta(step([new([0, 19, 8, 3])], 2)))
        cw.start_load_kv(None)
        for name in src:
            for s, d in zip([11, 2, 17], [0, 19, 8]):
                assert torch.equal(bits(src[name][:, s]), bits(dst[name][:, d]))
            assert not bits(dst[name][:, 3]).any()
        raw = pw.stats["raw_bytes_saved"]
        assert raw == L * 2 * 3 * BLOCK * H * D * 2 and 1.3 < raw / pw.stats["frame_bytes_saved"] < 1.42
    finally:
        cw.shutdown()


@pytest.mark.parametrize("device", DEVICES)
def test_sglang_backend(kv_slice, device):
    slots = 448
    ks = [bf16(np.concatenate([kv_slice[layer, 0]] * 2), device) for layer in range(L)]
    vs = [bf16(np.concatenate([kv_slice[layer, 1]] * 2), device) for layer in range(L)]
    pages, dst_pages = [3, 0, 17, 9], [1, 20, 5, 11]
    rows = (torch.tensor(pages)[:, None] * BLOCK + torch.arange(BLOCK)).reshape(-1).to(device)
    staging = torch.cat([p[rows].reshape(-1).view(torch.uint8) for p in ks + vs])
    b = SplitZipBackend(L, H, D, "bf16", page_size=BLOCK)
    tokens = len(pages) * BLOCK
    out1 = torch.empty(b.max_output_bytes(tokens), dtype=torch.uint8, device=device)
    out2 = torch.empty_like(out1)
    n1 = b.compress_into(staging, out1)
    n2 = b.gather_compress_into(ks, vs, torch.tensor(pages, device=device), out2)
    assert n1 == n2 and torch.equal(out1[:n1].cpu(), out2[:n2].cpu())
    assert out1[:n1].cpu().numpy().tobytes() == splitzip.compress(staging.cpu(), dtype="bf16").tobytes()
    back = torch.zeros_like(staging)
    assert b.decompress_into(out1[:n1], back) == staging.numel()
    dk = [torch.zeros((slots, H, D), dtype=torch.bfloat16, device=device) for _ in range(L)]
    dv = [torch.zeros_like(p) for p in dk]
    b.scatter_decompress(out2[:n2], dk, dv, dst_pages)
    b.drain()
    assert torch.equal(back.cpu(), staging.cpu())
    for sp_, dp in zip(pages, dst_pages):
        for a, c in zip(ks + vs, dk + dv):
            assert torch.equal(bits(a[sp_ * BLOCK:(sp_ + 1) * BLOCK]), bits(c[dp * BLOCK:(dp + 1) * BLOCK]))
    assert 1.3 < staging.numel() / n1 < 1.42


@pytest.mark.parametrize("device", DEVICES)
def test_lmcache_serde(kv_slice, device):
    chunk = bf16(kv_slice.transpose(1, 0, 2, 3, 4).reshape(2, L, 224, H * D), device)
    ser, de = szlm.SplitZipSerializer(), szlm.SplitZipDeserializer()
    size = ser.estimate_serialized_size(NS(shapes=[chunk.shape], dtypes=[chunk.dtype]))
    tmp = szlm.BufferObj(torch.empty(size, dtype=torch.uint8, device=device))
    n = ser.serialize(szlm.BufferObj(chunk), tmp, None)
    assert tmp.used == n and 1.3 < chunk.numel() * 2 / n < 1.42
    assert tmp.tensor.cpu().numpy().tobytes() == splitzip.compress(chunk.cpu()).tobytes()
    back = torch.zeros_like(chunk)
    de.deserialize(tmp, szlm.BufferObj(back), None)
    assert torch.equal(bits(back), bits(chunk))
