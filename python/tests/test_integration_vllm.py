"""The vLLM connector through its engine-facing interface (KVConnectorBase_V1), on the host with the project's real KV.

vLLM is not needed: the scheduler-side inputs are plain objects carrying exactly the attributes the connector reads
from vLLM's Request / SchedulerOutput (request_id, prompt_token_ids; scheduled_new_reqs[].req_id / prompt_token_ids /
block_ids / num_computed_tokens, scheduled_cached_reqs, num_scheduled_tokens). test_engine_vllm.py runs the same
hand-over against vLLM's own classes (`pytest -m vllm`, in a venv with vLLM).
"""

import itertools
from types import SimpleNamespace as NS

import numpy as np
import pytest

import splitzip
from conftest import needs_ml_dtypes, numpy_dtype
from splitzip.integrations.transport import FileTransport, InProcessTransport
from splitzip.integrations.vllm import (KVConnectorRole, SplitZipConnector, SplitZipConnectorMetadata,
                                       SplitZipRequestMeta)

BLOCK = 16
LAYERS = [f"model.layers.{i}.self_attn.attn" for i in range(8)]
_names = itertools.count()


def layer_caches(kv_slice, num_blocks=32, fill=True):
    """Per layer a vLLM-layout cache (2, num_blocks, 16, 4, 64) of bf16: the slice's 14 blocks of real KV, tiled."""
    bf16 = numpy_dtype("bf16")
    out = {}
    for layer, name in enumerate(LAYERS):
        cache = np.zeros((2, num_blocks, BLOCK, 4, 64), dtype=np.uint16)
        if fill:
            blocks = kv_slice[layer].reshape(2, 224 // BLOCK, BLOCK, 4, 64)
            for b in range(num_blocks):
                cache[:, b] = blocks[:, (7 * b + layer) % blocks.shape[1]]
        out[name] = cache.view(bf16)
    return out


def config(role, tp=1, rank=0, **extra):
    extra.setdefault("transport", "inprocess")
    if extra["transport"] == "inprocess":
        extra.setdefault("name", f"test-vllm-{next(_names)}")
    return NS(kv_transfer_config=NS(kv_role=role, kv_connector_extra_config=extra),
              cache_config=NS(block_size=BLOCK), model_config=NS(model="test-model"),
              parallel_config=NS(tensor_parallel_size=tp, pipeline_parallel_size=1, rank=rank))


def pair(role, **extra):
    cfg = config(role, **extra)
    return (SplitZipConnector(cfg, KVConnectorRole.SCHEDULER), SplitZipConnector(cfg, KVConnectorRole.WORKER), cfg)


def new_req(req_id, prompt, blocks, computed=0):
    return NS(req_id=req_id, prompt_token_ids=prompt, block_ids=(list(blocks),), num_computed_tokens=computed)


def step(scheduled_new=(), cached=None, scheduled=None):
    return NS(scheduled_new_reqs=list(scheduled_new), scheduled_cached_reqs=cached, num_scheduled_tokens=scheduled or {})


def run_save(worker, meta, caches):
    worker.bind_connector_metadata(meta)
    for name, cache in caches.items():
        worker.save_kv_layer(name, cache, None)
    worker.wait_for_save()
    worker.clear_connector_metadata()


def run_load(worker, meta):
    worker.bind_connector_metadata(meta)
    worker.start_load_kv(None)
    for name in LAYERS:
        worker.wait_for_layer_load(name)
    worker.clear_connector_metadata()


def same_blocks(src, dst, src_blocks, dst_blocks):
    return all(np.array_equal(src[n][:, s].view(np.uint16), dst[n][:, d].view(np.uint16))
               for n in src for s, d in zip(src_blocks, dst_blocks))


def hand_over(kv_slice, prompt_len=70, src_blocks=(5, 9, 2, 7, 11), dst_blocks=(3, 1, 8, 0, 20), computed=0,
              **extra):
    """Producer saves a request, consumer loads it; returns (src caches, dst caches, producer, consumer)."""
    s_sched, s_work, cfg = pair("kv_producer", **extra)
    c_extra = dict(cfg.kv_transfer_config.kv_connector_extra_config)
    c_sched, c_work, _ = pair("kv_consumer", **c_extra)
    src, dst = layer_caches(kv_slice), layer_caches(kv_slice, fill=False)
    s_work.register_kv_caches(src)
    c_work.register_kv_caches(dst)
    prompt = list(range(1000, 1000 + prompt_len))
    req = NS(request_id="r1", prompt_token_ids=prompt)
    assert s_sched.get_num_new_matched_tokens(req, 0) == (0, False)  # a producer loads nothing
    meta = s_sched.build_connector_meta(step([new_req("r1", prompt, src_blocks)], scheduled={"r1": prompt_len}))
    run_save(s_work, meta, src)
    n = s_sched.transfer_tokens(prompt_len)
    assert c_sched.get_num_new_matched_tokens(req, computed) == (n - computed, False)
    c_sched.update_state_after_alloc(req, None, n - computed)
    meta = c_sched.build_connector_meta(step([new_req("r1", prompt, dst_blocks, computed)],
                                             scheduled={"r1": prompt_len - n}))
    run_load(c_work, meta)
    return src, dst, s_work, c_work


@needs_ml_dtypes
def test_hand_over_is_bit_exact_and_counted(kv_slice):
    src, dst, producer, consumer = hand_over(kv_slice)
    # 70 prompt tokens: 69 transferable -> 4 whole blocks of 16; the fifth block stays the consumer's to compute
    assert same_blocks(src, dst, [5, 9, 2, 7], [3, 1, 8, 0])
    untouched = sorted(set(range(32)) - {3, 1, 8, 0})
    assert all(not dst[n][:, untouched].view(np.uint16).any() for n in dst)
    raw = 8 * 2 * 4 * BLOCK * 4 * 64 * 2
    assert producer.stats["raw_bytes_saved"] == raw == consumer.stats["raw_bytes_loaded"]
    assert producer.stats["frame_bytes_saved"] == consumer.stats["frame_bytes_loaded"]
    assert producer.transport.bytes_stored == producer.stats["frame_bytes_saved"]
    ratio = raw / producer.stats["frame_bytes_saved"]
    assert 1.3 < ratio < 1.42, ratio  # real BF16 KV with the default codebook (whole container, headers included)


@needs_ml_dtypes
def test_stored_object_is_a_container_of_page_api_frames(kv_slice):
    src, _, producer, _ = hand_over(kv_slice)
    key = producer.object_key(producer.request_key(list(range(1000, 1070)), 64), 0)
    box = splitzip.Container(producer.transport.get(key))
    assert box.names == LAYERS
    for name in LAYERS:
        pages = [src[name][kv, b] for kv in range(2) for b in (5, 9, 2, 7)]
        assert box.data(name).tobytes() == splitzip.compress_pages(pages).tobytes()
        assert box.item(name).shape == (8, BLOCK, 4, 64)


@needs_ml_dtypes
def test_file_transport(kv_slice, tmp_path):
    src, dst, producer, _ = hand_over(kv_slice, transport="file", path=str(tmp_path / "kv"))
    assert same_blocks(src, dst, [5, 9, 2, 7], [3, 1, 8, 0])
    files = list((tmp_path / "kv").iterdir())
    assert len(files) == 1 and files[0].suffix == FileTransport.SUFFIX
    assert files[0].stat().st_size == producer.stats["frame_bytes_saved"]


@needs_ml_dtypes
def test_locally_computed_prefix_is_not_overwritten(kv_slice):
    # the consumer had the first block (16 tokens) in its prefix cache: the load writes blocks 2..4 only
    src, dst, _, _ = hand_over(kv_slice, computed=16)
    assert same_blocks(src, dst, [9, 2, 7], [1, 8, 0])
    assert all(not dst[n][:, 3].view(np.uint16).any() for n in dst)


@needs_ml_dtypes
def test_chunked_prefill_is_saved_when_complete(kv_slice):
    sched, work, cfg = pair("kv_both")
    src = layer_caches(kv_slice)
    work.register_kv_caches(src)
    prompt = list(range(500, 600))  # 99 transferable tokens -> 6 blocks
    meta = sched.build_connector_meta(step([new_req("a", prompt, [1, 2, 3])], scheduled={"a": 48}))
    assert meta.requests == []  # only 48 of 96 tokens computed: nothing saved yet
    cached = NS(req_ids=["a"], new_block_ids=[([4, 5, 6, 7],)], num_computed_tokens=[48], resumed_req_ids=set())
    meta = sched.build_connector_meta(step(cached=cached, scheduled={"a": 52}))
    assert [(r.req_id, r.block_ids, r.is_store) for r in meta.requests] == [("a", [1, 2, 3, 4, 5, 6], True)]
    run_save(work, meta, src)
    assert work.transport.contains(sched.object_key(sched.request_key(prompt, 96), 0))


@needs_ml_dtypes
def test_no_match_and_lost_objects(kv_slice):
    sched, work, _ = pair("kv_both")
    req = NS(request_id="x", prompt_token_ids=list(range(40)))
    assert sched.get_num_new_matched_tokens(req, 0) == (0, False)
    assert sched.get_num_new_matched_tokens(NS(request_id="y", prompt_token_ids=[1] * 16), 0) == (0, False)
    # an object that vanished between match and load: its blocks are reported, nothing is written
    dst = layer_caches(kv_slice, fill=False)
    work.register_kv_caches(dst)
    sched.update_state_after_alloc(req, None, 32)
    meta = sched.build_connector_meta(step([new_req("x", req.prompt_token_ids, [4, 6, 9])]))
    run_load(work, meta)
    assert work.get_block_ids_with_load_errors() == {4, 6}
    assert work.get_finished({"x"}) == (None, None)
    assert all(not c.view(np.uint16).any() for c in dst.values())


@needs_ml_dtypes
def test_corrupt_object_raises(kv_slice):
    src, dst, producer, _ = hand_over(kv_slice)
    key = producer.object_key(producer.request_key(list(range(1000, 1070)), 64), 0)
    blob = producer.transport.get(key).copy()
    box = splitzip.Container(blob)
    item = box.item(LAYERS[3])
    blob[item.data_offset + item.data_size // 2] ^= 0x40
    producer.transport.put(key, blob)
    c_sched, c_work, _ = pair("kv_consumer", transport="inprocess", name=producer.transport.name)
    c_work.register_kv_caches(layer_caches(kv_slice, fill=False))
    req = NS(request_id="r1", prompt_token_ids=list(range(1000, 1070)))
    c_sched.update_state_after_alloc(req, None, 64)
    meta = c_sched.build_connector_meta(step([new_req("r1", req.prompt_token_ids, [0, 1, 2, 3])]))
    c_work.bind_connector_metadata(meta)
    with pytest.raises(splitzip.Error):
        c_work.start_load_kv(None)


def test_configuration_errors(kv_slice):
    with pytest.raises(ValueError, match="unknown kv_connector_extra_config"):
        pair("kv_both", compression="lz4")
    with pytest.raises(ValueError, match="transport must be"):
        pair("kv_both", transport="tcp")
    with pytest.raises(ValueError, match="needs 'path'"):
        pair("kv_both", transport="file")
    with pytest.raises(ValueError, match="kv_role"):
        SplitZipConnector(NS(kv_transfer_config=NS(kv_role="both", kv_connector_extra_config={}),
                             cache_config=NS(block_size=16)), KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match="kv_transfer_config"):
        SplitZipConnector(NS(kv_transfer_config=None, cache_config=NS(block_size=16)), KVConnectorRole.WORKER)
    _, work, _ = pair("kv_both")
    with pytest.raises(ValueError, match="expected"):
        work.register_kv_caches({"l0": np.zeros(64, dtype=np.float16)})
    with pytest.raises(TypeError, match="int32"):
        work.register_kv_caches({"l0": np.zeros((2, 4, 16, 4, 64), dtype=np.int32)})


def test_transports_store_complete_objects(tmp_path):
    for t in (InProcessTransport(f"t-{next(_names)}"), FileTransport(tmp_path)):
        assert not t.contains("k") and t.get("k") is None
        t.put("k", np.arange(10, dtype=np.uint8))
        t.put("k2", b"abc")
        t.put("k3", [b"ab", np.arange(3, dtype=np.uint8), memoryview(b"z")])  # pieces, back to back
        assert t.get("k3").tobytes() == b"ab\x00\x01\x02z"
        assert t.contains("k") and t.get("k").tobytes() == bytes(range(10)) and t.get("k2").tobytes() == b"abc"
        with pytest.raises(ValueError):
            t.get("k")[0] = 1  # read-only
        t.delete("k")
        t.delete("k")
        assert not t.contains("k")
        with pytest.raises(TypeError):
            t.put("k", np.zeros(3, dtype=np.uint16))
        with pytest.raises(TypeError):
            t.put(3, b"x")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]


def blocks_first_caches(kv_slice, num_blocks=24, permuted=False, fill=True):
    """Per layer a blocks-first cache: vLLM's standardized per-layer view [num_blocks, kv_heads, block_size,
    2 * head_size] (K and V side by side in the last axis); with ``permuted`` that view is over memory laid out
    [num_blocks, block_size, kv_heads, 2 * head_size] (a dense block in another physical order)."""
    bf16 = numpy_dtype("bf16")
    out = {}
    for layer, name in enumerate(LAYERS):
        phys = np.zeros((num_blocks, BLOCK, 4, 128), dtype=np.uint16)
        if fill:
            kv = kv_slice[layer].reshape(2, 14, BLOCK, 4, 64)
            for b in range(num_blocks):
                phys[b] = np.concatenate([kv[0, b % 14], kv[1, b % 14]], axis=-1)
        view = phys.transpose(0, 2, 1, 3) if permuted else np.ascontiguousarray(phys.transpose(0, 2, 1, 3))
        out[name] = view.view(bf16)
    return out


@needs_ml_dtypes
@pytest.mark.parametrize("permuted", [False, True])
def test_blocks_first_layouts(kv_slice, permuted):
    s_sched, s_work, cfg = pair("kv_both")
    c_sched, c_work, _ = pair("kv_both", **cfg.kv_transfer_config.kv_connector_extra_config)
    src = blocks_first_caches(kv_slice, permuted=permuted)
    dst = blocks_first_caches(kv_slice, permuted=permuted, fill=False)
    s_work.register_kv_caches(src)
    c_work.register_kv_caches(dst)
    prompt = list(range(33))  # 32 transferable tokens: 2 blocks
    run_save(s_work, s_sched.build_connector_meta(step([new_req("q", prompt, [7, 2, 5])], scheduled={"q": 33})), src)
    req = NS(request_id="q", prompt_token_ids=prompt)
    assert c_sched.get_num_new_matched_tokens(req, 0) == (32, False)
    c_sched.update_state_after_alloc(req, None, 32)
    run_load(c_work, c_sched.build_connector_meta(step([new_req("q", prompt, [0, 11, 4])], scheduled={"q": 1})))
    for name in LAYERS:
        for s, d in ((7, 0), (2, 11)):
            assert np.array_equal(src[name][s].view(np.uint16), dst[name][d].view(np.uint16))
        assert not dst[name][4].view(np.uint16).any()
    assert s_work.stats["raw_bytes_saved"] == 8 * 2 * BLOCK * 4 * 128 * 2


def test_blocks_that_are_not_one_run_of_memory(kv_slice):
    _, work, _ = pair("kv_both")
    cache = np.zeros((4, 16, 4, 256), dtype=np.float16)[..., ::2]  # every other value: not dense
    work.register_kv_caches({"l0": cache})
    work.bind_connector_metadata(SplitZipConnectorMetadata([SplitZipRequestMeta("r", "k", [1], True)]))
    with pytest.raises(ValueError, match="dense run"):
        work.save_kv_layer("l0", cache, None)


def test_import_splitzip_loads_no_adapter_and_no_engine():
    import subprocess
    import sys
    code = ("import sys, splitzip; bad = [m for m in sys.modules if m.split('.')[0] in ('vllm', 'sglang', 'lmcache') "
            "or m.startswith('splitzip.integrations')]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_ml_dtypes
def test_tensor_parallel_workers_store_and_load_their_own_parts(kv_slice):
    """Two tensor-parallel ranks hold different heads of every layer: each stores its own object, the consumer
    matches only once both are stored, and each consumer rank loads its own part."""
    name = f"test-vllm-tp-{next(_names)}"
    prompt = list(range(3000, 3050))  # 49 transferable tokens -> 3 blocks
    req = NS(request_id="t", prompt_token_ids=prompt)
    full = layer_caches(kv_slice)
    parts = [{n: np.ascontiguousarray(c[..., 2 * r:2 * r + 2, :]) for n, c in full.items()} for r in range(2)]
    p_sched = SplitZipConnector(config("kv_producer", tp=2, name=name), KVConnectorRole.SCHEDULER)
    c_sched = SplitZipConnector(config("kv_consumer", tp=2, name=name), KVConnectorRole.SCHEDULER)
    meta = p_sched.build_connector_meta(step([new_req("t", prompt, [6, 1, 12, 3])], scheduled={"t": 50}))
    dsts = []
    for r in range(2):
        w = SplitZipConnector(config("kv_producer", tp=2, rank=r, name=name), KVConnectorRole.WORKER)
        w.register_kv_caches(parts[r])
        run_save(w, meta, parts[r])
        assert c_sched.get_num_new_matched_tokens(req, 0) == ((48, False) if r == 1 else (0, False))
    c_sched.update_state_after_alloc(req, None, 48)
    meta = c_sched.build_connector_meta(step([new_req("t", prompt, [9, 0, 4, 2])], scheduled={"t": 2}))
    for r in range(2):
        dst = layer_caches(kv_slice, fill=False)
        dst = {n: np.ascontiguousarray(c[..., 2 * r:2 * r + 2, :]) for n, c in dst.items()}
        w = SplitZipConnector(config("kv_consumer", tp=2, rank=r, name=name), KVConnectorRole.WORKER)
        w.register_kv_caches(dst)
        run_load(w, meta)
        assert same_blocks(parts[r], dst, [6, 1, 12], [9, 0, 4])
        dsts.append(dst)
    assert not same_blocks(dsts[0], dsts[1], [9], [9])  # the ranks got different heads
