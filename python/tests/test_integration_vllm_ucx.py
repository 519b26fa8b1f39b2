"""The vLLM connector over the UCX transport (splitzip.transfer): a prefill-side connector streams each layer of a
request's KV, as save_kv_layer has it, to a decode-side connector over real UCX on loopback, which writes it into the
request's blocks. The project's real KV (the shipped slice), bit-exact blocks, bytes counted on both sides; the
errors: a consumer that is not there or goes away, a wrong token, KV of another shape, malformed and partial
sessions, the memory cap and objects that are never taken.

The scheduler- and worker-side inputs are the plain objects of test_integration_vllm.py (the attributes the
connector reads from vLLM's Request / SchedulerOutput).
"""

import json
import logging
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import splitzip
from conftest import needs_ml_dtypes
from splitzip import transfer
from splitzip.integrations.transport import UcxTransport, part_name
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector
from test_integration_vllm import BLOCK, LAYERS, config, layer_caches, new_req, run_load, run_save, same_blocks, step

pytestmark = pytest.mark.skipif(not transfer.available(),
                                reason="this splitzip was built without the transfer library (no UCX found when it "
                                       "was built): the UCX transport needs it")

PROMPT = list(range(1000, 1070))  # 69 transferable tokens -> 4 whole blocks of 16
SRC_BLOCKS, DST_BLOCKS = (5, 9, 2, 7, 11), (3, 1, 8, 0, 20)
LAYER_BYTES = 2 * 4 * BLOCK * 4 * 64 * 2  # K and V pages of 4 blocks of (16, 4, 64) bf16


@pytest.fixture
def made():
    """Connectors made by a test, shut down after it (their receivers closed)."""
    out = []
    yield out
    for c in out:
        c.shutdown()


def decode_side(made, **extra):
    """A consumer's worker (it listens, on a free port) and its scheduler, in this process."""
    extra = {"transport": "ucx", "port": 0, "timeout": 20, **extra}
    work = SplitZipConnector(config("kv_consumer", **extra), KVConnectorRole.WORKER)
    made.append(work)
    port = work.transport.port
    sched = SplitZipConnector(config("kv_consumer", **dict(extra, port=port)), KVConnectorRole.SCHEDULER)
    made.append(sched)
    return sched, work, port


def prefill_side(made, port, **extra):
    cfg = config("kv_producer", **{"transport": "ucx", "address": f"127.0.0.1:{port}", "timeout": 20, **extra})
    sched, work = SplitZipConnector(cfg, KVConnectorRole.SCHEDULER), SplitZipConnector(cfg, KVConnectorRole.WORKER)
    made.extend([sched, work])
    return sched, work


def save_meta(sched, prompt=PROMPT, blocks=SRC_BLOCKS, req_id="r1"):
    return sched.build_connector_meta(step([new_req(req_id, prompt, blocks)], scheduled={req_id: len(prompt)}))


def load(sched, work, prompt=PROMPT, blocks=DST_BLOCKS, req_id="r1", expect=64):
    """The consumer's match and load of a request; returns the match."""
    req = NS_req(req_id, prompt)
    got = sched.get_num_new_matched_tokens(req, 0)
    if got[0]:
        sched.update_state_after_alloc(req, None, got[0])
    meta = sched.build_connector_meta(step([new_req(req_id, prompt, blocks)], scheduled={req_id: len(prompt) - expect}))
    run_load(work, meta)
    return got


def NS_req(req_id, prompt):  # noqa: N802 - a vLLM Request's attributes
    from types import SimpleNamespace
    return SimpleNamespace(request_id=req_id, prompt_token_ids=prompt)


def pages_bytes(caches, name, blocks):
    """The bytes a layer's part carries: K pages of the blocks, then V pages."""
    return np.concatenate([caches[name][kv, b].view(np.uint8).reshape(-1) for kv in (0, 1) for b in blocks])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@needs_ml_dtypes
@pytest.mark.parametrize("raw", [False, True], ids=["compressed", "raw"])
def test_hand_over_is_bit_exact_and_counted(kv_slice, made, raw):
    d_sched, d_work, port = decode_side(made)
    p_sched, p_work = prefill_side(made, port, raw=raw)
    src, dst = layer_caches(kv_slice), layer_caches(kv_slice, fill=False)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    assert p_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)  # a producer loads nothing
    run_save(p_work, save_meta(p_sched), src)
    assert p_work.send_errors == [] and p_work.stats["send_errors"] == 0
    assert load(d_sched, d_work) == (64, False)
    assert same_blocks(src, dst, SRC_BLOCKS[:4], DST_BLOCKS[:4])
    untouched = sorted(set(range(32)) - set(DST_BLOCKS[:4]))
    assert all(not dst[n][:, untouched].view(np.uint16).any() for n in dst)
    raw_bytes = len(LAYERS) * LAYER_BYTES
    assert p_work.stats["requests_saved"] == 1 == d_work.stats["requests_loaded"]
    assert p_work.stats["raw_bytes_saved"] == raw_bytes == d_work.stats["raw_bytes_loaded"]
    assert wait_until(lambda: d_work.transport.receiver_stats["sessions"] == 1)  # counted as serve_one returns
    received = d_work.transport.receiver_stats
    assert received["raw_bytes"] == raw_bytes
    assert received["wire_bytes"] == p_work.stats["wire_bytes_saved"] > p_work.stats["frame_bytes_saved"]
    assert received["pending_bytes"] == 0  # taken by the load
    ratio = raw_bytes / p_work.stats["frame_bytes_saved"]
    if raw:
        assert ratio == 1.0
    else:
        assert 1.3 < ratio < 1.42, ratio  # real BF16 KV, the transfer's frames (default codebook)
    # taken: a second match finds nothing (the consumer's blocks hold the KV now)
    assert d_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)


@needs_ml_dtypes
def test_each_layer_leaves_as_soon_as_it_is_saved(kv_slice, made):
    d_sched, d_work, port = decode_side(made)
    p_sched, p_work = prefill_side(made, port)
    src, dst = layer_caches(kv_slice), layer_caches(kv_slice, fill=False)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    p_work.bind_connector_metadata(save_meta(p_sched))
    key = p_work.object_key(p_sched.request_key(PROMPT, 64), 0)
    for name in LAYERS[:-1]:
        p_work.save_kv_layer(name, src[name], None)
    want = {i: pages_bytes(src, name, SRC_BLOCKS[:4]) for i, name in enumerate(LAYERS[:-1])}

    def all_but_last_arrived():
        got = d_work.transport.incoming(key)
        return all(i in got and np.array_equal(got[i], w) for i, w in want.items())

    # every saved layer is in the consumer's memory while the last one has not been saved (nor sent) yet
    assert wait_until(all_but_last_arrived), sorted(d_work.transport.incoming(key))
    assert len(LAYERS) - 1 not in d_work.transport.incoming(key)
    assert not d_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0)[0]  # not whole yet: no match
    p_work.save_kv_layer(LAYERS[-1], src[LAYERS[-1]], None)
    p_work.wait_for_save()
    p_work.clear_connector_metadata()
    assert load(d_sched, d_work) == (64, False)
    assert same_blocks(src, dst, SRC_BLOCKS[:4], DST_BLOCKS[:4])


@needs_ml_dtypes
def test_a_loaded_requests_memory_takes_the_next_ones_layers(kv_slice, made):
    d_sched, d_work, port = decode_side(made, max_pending_bytes=10 * LAYER_BYTES)
    p_sched, p_work = prefill_side(made, port)
    src, dst = layer_caches(kv_slice), layer_caches(kv_slice, fill=False)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    for i in range(3):
        prompt = [7 * i + t for t in PROMPT]
        run_save(p_work, save_meta(p_sched, prompt=prompt, req_id=f"q{i}"), src)
        dst_blocks = DST_BLOCKS[i:] + DST_BLOCKS[:i]
        assert load(d_sched, d_work, prompt=prompt, blocks=dst_blocks, req_id=f"q{i}") == (64, False)
        assert same_blocks(src, dst, SRC_BLOCKS[:4], dst_blocks[:4])
        stats = d_work.transport.receiver_stats
        # the 8 layers' buffers are kept (the cap has room for 10), and the next request lands in them
        assert stats["pool_bytes"] == len(LAYERS) * LAYER_BYTES and stats["pending_bytes"] == 0
    assert p_work.stats["requests_saved"] == 3 == d_work.stats["requests_loaded"]


@needs_ml_dtypes
def test_two_requests_in_one_step_and_a_skipped_prefix(kv_slice, made):
    d_sched, d_work, port = decode_side(made)
    p_sched, p_work = prefill_side(made, port, threads=2)
    src, dst = layer_caches(kv_slice), layer_caches(kv_slice, fill=False)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    other = list(range(5000, 5040))  # 39 transferable tokens -> 2 blocks
    meta = p_sched.build_connector_meta(step([new_req("a", PROMPT, SRC_BLOCKS), new_req("b", other, (13, 4, 6))],
                                             scheduled={"a": 70, "b": 40}))
    run_save(p_work, meta, src)
    assert p_work.stats["requests_saved"] == 2 and p_work.stats["send_errors"] == 0
    assert wait_until(lambda: d_work.transport.receiver_stats["sessions"] == 1)
    time.sleep(0.1)
    assert d_work.transport.receiver_stats["sessions"] == 1  # one session per step
    # request b: the consumer computed its first block itself; the load writes the second one only
    req = NS_req("b", other)
    assert d_sched.get_num_new_matched_tokens(req, 16) == (16, False)
    d_sched.update_state_after_alloc(req, None, 16)
    run_load(d_work, d_sched.build_connector_meta(step([new_req("b", other, (30, 31, 29), 16)], scheduled={"b": 8})))
    assert same_blocks(src, dst, [4], [31]) and all(not dst[n][:, 30].view(np.uint16).any() for n in dst)
    assert load(d_sched, d_work, req_id="a") == (64, False)
    assert same_blocks(src, dst, SRC_BLOCKS[:4], DST_BLOCKS[:4])


@needs_ml_dtypes
def test_a_consumer_that_is_not_there(kv_slice, made, caplog):
    port = free_port()  # nobody listens
    p_sched, p_work = prefill_side(made, port, timeout=2)
    src = layer_caches(kv_slice)
    p_work.register_kv_caches(src)
    with caplog.at_level(logging.WARNING, logger="splitzip.integrations.vllm"):
        run_save(p_work, save_meta(p_sched), src)  # does not raise: the consumer recomputes
    assert p_work.stats["send_errors"] == 1 and p_work.stats["requests_saved"] == 0
    (ids, why), = p_work.send_errors
    assert ids == ["r1"] and "IO" in why and f"127.0.0.1:{port}" in caplog.text
    # the next step sends again, to a consumer that is there now
    d_sched, d_work, _ = decode_side(made, port=port)
    dst = layer_caches(kv_slice, fill=False)
    d_work.register_kv_caches(dst)
    run_save(p_work, save_meta(p_sched), src)
    assert p_work.stats["requests_saved"] == 1
    assert load(d_sched, d_work) == (64, False) and same_blocks(src, dst, SRC_BLOCKS[:4], DST_BLOCKS[:4])


@needs_ml_dtypes
def test_a_consumer_that_goes_away_mid_request(kv_slice, made):
    d_sched, d_work, port = decode_side(made)
    p_sched, p_work = prefill_side(made, port, timeout=5)
    src = layer_caches(kv_slice)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(layer_caches(kv_slice, fill=False))
    p_work.bind_connector_metadata(save_meta(p_sched))
    key = p_work.object_key(p_sched.request_key(PROMPT, 64), 0)
    for name in LAYERS[:3]:
        p_work.save_kv_layer(name, src[name], None)
    assert wait_until(lambda: 2 in d_work.transport.incoming(key))
    d_work.shutdown()  # the consumer's worker leaves: its receiver closes, the session ends
    for name in LAYERS[3:]:
        p_work.save_kv_layer(name, src[name], None)
    p_work.wait_for_save()
    assert p_work.stats["send_errors"] == 1 and p_work.stats["requests_saved"] == 0
    assert d_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)


@needs_ml_dtypes
def test_a_wrong_token_is_refused(kv_slice, made):
    d_sched, d_work, port = decode_side(made, token="the right one")
    p_sched, p_work = prefill_side(made, port, token="another one")
    src = layer_caches(kv_slice)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(layer_caches(kv_slice, fill=False))
    run_save(p_work, save_meta(p_sched), src)
    (_, why), = p_work.send_errors
    assert "refused" in why and "token" in why
    assert wait_until(lambda: d_work.transport.receiver_stats["sessions_failed"] == 1)
    assert d_work.transport.receiver_stats["pending_bytes"] == 0
    assert d_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)


@needs_ml_dtypes
@pytest.mark.parametrize("mismatch", ["heads", "layers"])
def test_kv_of_another_shape_is_written_nowhere(kv_slice, made, mismatch, caplog):
    d_sched, d_work, port = decode_side(made)
    p_sched, p_work = prefill_side(made, port)
    src = layer_caches(kv_slice)
    dst = layer_caches(kv_slice, fill=False)
    if mismatch == "heads":  # the consumer's cache has 2 KV heads, the producer's 4
        dst = {n: np.ascontiguousarray(c[..., :2, :]) for n, c in dst.items()}
    else:  # the consumer's model has half the layers
        dst = dict(list(dst.items())[:4])
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    run_save(p_work, save_meta(p_sched), src)
    with caplog.at_level(logging.WARNING, logger="splitzip.integrations.vllm"):
        assert load(d_sched, d_work) == (64, False)  # matched by its tokens ...
    assert d_work.get_block_ids_with_load_errors() == set(DST_BLOCKS[:4])  # ... but recomputed
    assert d_work.stats["load_errors"] == 1 and d_work.stats["requests_loaded"] == 0
    assert "does not fit" in caplog.text
    assert all(not c.view(np.uint16).any() for c in dst.values())
    assert d_work.transport.receiver_stats["pending_bytes"] == 0


@needs_ml_dtypes
def test_malformed_and_partial_sessions_leave_nothing(kv_slice, made):
    d_sched, d_work, port = decode_side(made)
    t = d_work.transport
    addr = f"127.0.0.1:{port}"
    kv = kv_slice.reshape(-1)[:5000]
    key = "splitzip-vllm/some-request/rank0of1"
    for name in ("junk", f"{'a' * 40}.5of2", f"{'a' * 40}.0of5000", part_name(key, 0, 1) + "x"):
        with pytest.raises(splitzip.IoError, match="no destination"):
            transfer.send(addr, [(name, kv, "bf16")])
    # one part of a two-part object, in a session that succeeds: the object is incomplete, so it is dropped
    transfer.send(addr, [(part_name(key, 0, 2), kv, "bf16")])
    assert wait_until(lambda: t.receiver_stats["objects_dropped"] == 1)
    # a session that fails after its first part arrived whole
    with pytest.raises(RuntimeError):
        with transfer.Sender(addr, [(part_name(key, i, 2), kv, "bf16") for i in range(2)], gated=True) as s:
            s.ready(0)
            assert wait_until(lambda: 0 in t.incoming(key))
            raise RuntimeError("the producer fails")
    assert wait_until(lambda: t.receiver_stats["objects_dropped"] == 2)
    assert not t.contains(key) and t.take(key) is None
    assert t.receiver_stats["pending_bytes"] == 0 and t.receiver_stats["objects"] == 0
    assert t.receiver_stats["parts_refused"] == 4
    # the receiver still serves: a whole object arrives and is taken
    transfer.send(addr, [(part_name(key, i, 2), kv[i:], "bf16") for i in range(2)])
    assert t.contains(key, wait=5)
    got = t.take(key)
    assert [p.tobytes() for p in got.parts] == [kv.tobytes(), kv[1:].tobytes()] and got.dtypes == ["bf16"] * 2


@needs_ml_dtypes
def test_the_consumer_holds_at_most_max_pending_bytes(kv_slice, made):
    d_sched, d_work, port = decode_side(made, max_pending_bytes=3 * LAYER_BYTES)
    p_sched, p_work = prefill_side(made, port)
    src = layer_caches(kv_slice)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(layer_caches(kv_slice, fill=False))
    run_save(p_work, save_meta(p_sched), src)  # 8 layers do not fit in 3 layers' room: refused at the fourth
    assert p_work.stats["send_errors"] == 1 and "no destination" in p_work.send_errors[0][1]
    assert wait_until(lambda: d_work.transport.receiver_stats["pending_bytes"] == 0)  # let go as the session ends
    stats = d_work.transport.receiver_stats
    assert stats["parts_refused"] == 1 and stats["pool_bytes"] == 3 * LAYER_BYTES  # kept for reuse, within the cap
    assert d_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)


@needs_ml_dtypes
def test_a_request_past_max_send_bytes_is_not_sent(kv_slice, made):
    d_sched, d_work, port = decode_side(made)
    p_sched, p_work = prefill_side(made, port, max_send_bytes=len(LAYERS) * LAYER_BYTES)  # room for one request
    src, dst = layer_caches(kv_slice), layer_caches(kv_slice, fill=False)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(dst)
    other = [t + 1 for t in PROMPT]
    meta = p_sched.build_connector_meta(step([new_req("a", PROMPT, SRC_BLOCKS), new_req("b", other, (13, 4, 6, 1))],
                                             scheduled={"a": 70, "b": 70}))
    run_save(p_work, meta, src)
    assert p_work.send_errors == [(["b"], p_work.send_errors[0][1])] and "max_send_bytes" in p_work.send_errors[0][1]
    assert p_work.stats["requests_saved"] == 1 and p_work.stats["send_errors"] == 1  # recorded once, not per layer
    assert load(d_sched, d_work, req_id="a") == (64, False)
    assert load(d_sched, d_work, prompt=other, req_id="b") == (0, False)


@needs_ml_dtypes
def test_kv_that_is_never_taken_is_dropped(kv_slice, made):
    d_sched, d_work, port = decode_side(made, pending_seconds=0.5)
    p_sched, p_work = prefill_side(made, port)
    src = layer_caches(kv_slice)
    p_work.register_kv_caches(src)
    d_work.register_kv_caches(layer_caches(kv_slice, fill=False))
    run_save(p_work, save_meta(p_sched), src)
    assert wait_until(lambda: d_work.transport.receiver_stats["objects"] == 1)
    time.sleep(0.6)
    assert d_sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)
    assert d_work.transport.receiver_stats["pending_bytes"] == 0


def test_a_scheduler_without_its_receiver_says_so_once(made, caplog):
    sched = SplitZipConnector(config("kv_consumer", transport="ucx", port=free_port()), KVConnectorRole.SCHEDULER)
    made.append(sched)
    with caplog.at_level(logging.WARNING, logger="splitzip.integrations.transport"):
        for _ in range(3):
            assert sched.get_num_new_matched_tokens(NS_req("r1", PROMPT), 0) == (0, False)
    assert caplog.text.count("no receiver listens") == 1


def test_ucx_configuration_errors(made):
    with pytest.raises(ValueError, match="needs 'address'"):
        SplitZipConnector(config("kv_producer", transport="ucx", port=0), KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match="needs 'port'"):
        SplitZipConnector(config("kv_consumer", transport="ucx", address="127.0.0.1:9"), KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match="port its worker listens on"):
        SplitZipConnector(config("kv_consumer", transport="ucx", port=0), KVConnectorRole.SCHEDULER)
    with pytest.raises(ValueError, match="do not apply"):
        SplitZipConnector(config("kv_consumer", transport="ucx", port=0, path="/tmp/x"), KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match="do not apply"):
        SplitZipConnector(config("kv_producer", transport="file", path="/tmp/x", address="h:1"),
                          KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match=r"\['codebook'\] do not apply"):
        SplitZipConnector(config("kv_producer", transport="ucx", address="h:1", codebook="key"),
                          KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match="host:port"):
        SplitZipConnector(config("kv_producer", transport="ucx", address="nohost"), KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match="rate"):
        UcxTransport(address="127.0.0.1:9", rate=-1)
    # two transports that name one address share its receiver, if they agree on its options
    a = UcxTransport(port=0)
    port = a.listen()
    b = UcxTransport(port=port)
    assert b.listen() == port
    with pytest.raises(ValueError, match="other options"):
        UcxTransport(port=port, token="x").listen()
    b.close()
    assert a.receiver_stats["sessions"] == 0  # still open for a
    a.close()
    assert UcxTransport(port=port).receiver_stats == {}  # closed: none in this process


_PRODUCER = r"""
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np
from conftest import SLICE
from test_integration_vllm import config, layer_caches, new_req, run_save, step
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector
kv = np.fromfile(SLICE, dtype="<u2").reshape(8, 2, 224, 4, 64)
cfg = config("kv_producer", transport="ucx", address="127.0.0.1:{port}", timeout=20)
sched, work = SplitZipConnector(cfg, KVConnectorRole.SCHEDULER), SplitZipConnector(cfg, KVConnectorRole.WORKER)
src = layer_caches(kv)
work.register_kv_caches(src)
prompt = list(range(1000, 1070))
run_save(work, sched.build_connector_meta(step([new_req("r1", prompt, (5, 9, 2, 7, 11))], scheduled={{"r1": 70}})), src)
print(json.dumps(dict(work.stats, errors=work.send_errors)))
"""


@needs_ml_dtypes
def test_prefill_and_decode_in_two_processes(kv_slice, made):
    d_sched, d_work, port = decode_side(made)
    dst = layer_caches(kv_slice, fill=False)
    d_work.register_kv_caches(dst)
    tests = str(pathlib.Path(__file__).resolve().parent)
    r = subprocess.run([sys.executable, "-c", _PRODUCER.format(tests=tests, port=port)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=tests))
    assert r.returncode == 0, r.stderr
    sent = json.loads(r.stdout.strip().splitlines()[-1])
    assert sent["errors"] == [] and sent["requests_saved"] == 1
    assert load(d_sched, d_work) == (64, False)
    assert same_blocks(layer_caches(kv_slice), dst, SRC_BLOCKS[:4], DST_BLOCKS[:4])
    assert wait_until(lambda: d_work.transport.receiver_stats["sessions"] == 1)
    assert d_work.transport.receiver_stats["wire_bytes"] == sent["wire_bytes_saved"]
