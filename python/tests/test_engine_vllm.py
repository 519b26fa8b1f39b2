"""Optional tier: the vLLM connector built by vLLM's own connector factory from a real VllmConfig, driven with
vLLM's Request, NewRequestData, CachedRequestData and SchedulerOutput, on CPU torch tensors of real KV.

    pip install vllm pytest && pip install --no-deps <splitzip wheel>
    pytest -m vllm python/tests/test_engine_vllm.py
"""

import pytest

pytestmark = pytest.mark.vllm

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, VllmConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorRole  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

import splitzip.integrations.vllm as szv  # noqa: E402

BLOCK = 16
LAYERS = [f"model.layers.{i}.self_attn.attn" for i in range(8)]


def vllm_config(role, name):
    ktc = KVTransferConfig(kv_connector="SplitZipConnector", kv_connector_module_path="splitzip.integrations.vllm",
                           kv_role=role, kv_connector_extra_config={"transport": "inprocess", "name": name})
    # this vLLM wheel is built for CUDA and finds no GPU here: the device is named (the connector does not use it)
    return VllmConfig(kv_transfer_config=ktc, cache_config=CacheConfig(block_size=BLOCK),
                      device_config=DeviceConfig(device="cpu"))


def caches(kv_slice, fill=True, num_blocks=32):
    out = {}
    for layer, name in enumerate(LAYERS):
        c = torch.zeros((2, num_blocks, BLOCK, 4, 64), dtype=torch.int16)
        if fill:
            blocks = torch.from_numpy(kv_slice[layer].reshape(2, 14, BLOCK, 4, 64).view("<i2").copy())
            for b in range(num_blocks):
                c[:, b] = blocks[:, (5 * b + layer) % 14]
        out[name] = c.view(torch.bfloat16)
    return out


def new_request_data(req, blocks):
    return NewRequestData(req_id=req.request_id, prompt_token_ids=req.prompt_token_ids, mm_features=[],
                          sampling_params=req.sampling_params, pooling_params=None, block_ids=(list(blocks),),
                          num_computed_tokens=0, lora_request=None)


def scheduler_output(new, scheduled):
    return SchedulerOutput(scheduled_new_reqs=new, scheduled_cached_reqs=CachedRequestData.make_empty(),
                           num_scheduled_tokens=scheduled, total_num_scheduled_tokens=sum(scheduled.values()),
                           scheduled_spec_decode_tokens={}, scheduled_encoder_inputs={},
                           num_common_prefix_blocks=[0], finished_req_ids=set(), free_encoder_mm_hashes=[])


def test_factory_builds_the_connector_on_vllms_base():
    cfg = vllm_config("kv_both", "engine-factory")
    conn = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, None)
    assert isinstance(conn, szv.SplitZipConnector) and isinstance(conn, KVConnectorBase_V1)
    assert szv.HAVE_VLLM and szv.KVConnectorRole is KVConnectorRole


def test_prefill_to_decode_bit_exact(kv_slice):
    p_cfg, d_cfg = vllm_config("kv_producer", "engine-pd"), vllm_config("kv_consumer", "engine-pd")
    p_sched = KVConnectorFactory.create_connector(p_cfg, KVConnectorRole.SCHEDULER, None)
    p_work = KVConnectorFactory.create_connector(p_cfg, KVConnectorRole.WORKER, None)
    d_sched = KVConnectorFactory.create_connector(d_cfg, KVConnectorRole.SCHEDULER, None)
    d_work = KVConnectorFactory.create_connector(d_cfg, KVConnectorRole.WORKER, None)
    src, dst = caches(kv_slice), caches(kv_slice, fill=False)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    req = Request("req-0", list(range(7, 7 + 90)), SamplingParams(max_tokens=4), None)
    # prefill: 90 prompt tokens, 89 transferable -> 5 whole blocks
    meta = p_sched.build_connector_meta(scheduler_output([new_request_data(req, [4, 9, 1, 30, 12, 6])],
                                                         {req.request_id: 90}))
    p_work.bind_connector_metadata(meta)
    for name, cache in src.items():
        p_work.save_kv_layer(name, cache, None)
    p_work.wait_for_save()
    p_work.clear_connector_metadata()
    assert p_sched.request_finished(req, [4, 9, 1, 30, 12, 6]) == (False, None)
    # decode
    n, is_async = d_sched.get_num_new_matched_tokens(req, 0)
    assert (n, is_async) == (80, False)
    d_sched.update_state_after_alloc(req, None, n)
    meta = d_sched.build_connector_meta(scheduler_output([new_request_data(req, [0, 2, 3, 5, 7, 8])],
                                                         {req.request_id: 10}))
    d_work.bind_connector_metadata(meta)
    d_work.start_load_kv(None)
    for name in LAYERS:
        d_work.wait_for_layer_load(name)
    assert d_work.get_finished({req.request_id}) == (None, None)
    for name in LAYERS:
        for s, d in zip([4, 9, 1, 30, 12], [0, 2, 3, 5, 7]):
            assert torch.equal(src[name][:, s].view(torch.int16), dst[name][:, d].view(torch.int16))
        assert not dst[name][:, 8].view(torch.int16).any()
    raw = p_work.stats["raw_bytes_saved"]
    assert raw == 8 * 2 * 5 * BLOCK * 4 * 64 * 2 == d_work.stats["raw_bytes_loaded"]
    assert 1.3 < raw / p_work.stats["frame_bytes_saved"] < 1.42
