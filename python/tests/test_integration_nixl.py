"""The NIXL store (splitzip.integrations.nixl) between two processes over NIXL's UCX backend: the project's real KV
(the shipped slice) compressed, put by one process and read by the other, bit-exact, bytes counted; the vLLM
connector over it; and the failures: a client that dies in the middle of a put (nothing visible), a holder that
goes (IoError at once), one that hangs (IoError after the timeout), sizes past either side's cap (refused before
anything is allocated), a full arena, a wrong token, messages that are not the store's.

Skipped, saying why, where no NIXL Python package can be imported (pip install nixl-cu13). The CUDA case needs a GPU,
torch with CUDA and a CUDA build of splitzip.
"""

import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import splitzip
from conftest import needs_ml_dtypes
from splitzip.integrations import nixl
from splitzip.integrations.nixl import NixlStore, get_tensor
from splitzip.integrations.transport import Transport

pytestmark = pytest.mark.skipif(not nixl.nixl_available(),
                                reason="no NIXL Python package can be imported here (pip install nixl-cu13, or "
                                       "nixl-cu12): the NIXL store needs one")

TESTS = str(pathlib.Path(__file__).resolve().parent)


def wait_until(cond, seconds=10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def run_child(script, timeout=120, **fmt):
    """Runs a Python child (the other process); returns its last stdout line as JSON."""
    r = subprocess.run([sys.executable, "-c", script.format(tests=TESTS, **fmt)], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, PYTHONPATH=TESTS))
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def layers(kv_slice):
    """The slice's 8 layers, each its K and V as one bf16 array [2, 224, 4, 64] (uint16 bit patterns viewed)."""
    import ml_dtypes
    return [np.ascontiguousarray(kv_slice[i]).view(ml_dtypes.bfloat16) for i in range(kv_slice.shape[0])]


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()


@pytest.fixture
def holder():
    stores = []

    def make(**kw):
        s = NixlStore(port=0, **{"capacity": 64 << 20, "timeout": 20, **kw})
        stores.append(s)
        return s

    yield make
    for s in stores:
        s.close()


_CLIENT = r"""
import hashlib, json, sys
sys.path.insert(0, {tests!r})
import numpy as np, ml_dtypes
from conftest import SLICE
from splitzip.integrations.nixl import NixlStore, get_tensor, send_tensors
kv = np.fromfile(SLICE, dtype="<u2").reshape(8, 2, 224, 4, 64)
layers = [np.ascontiguousarray(kv[i]).view(ml_dtypes.bfloat16) for i in range(8)]
store = NixlStore(address="127.0.0.1:{port}", chunk_bytes={chunk}, staging_bytes={staging}, timeout=20)
sent = send_tensors(store, [(f"kv/{{i}}", t) for i, t in enumerate(layers)])
raw = send_tensors(store, [("raw/all", kv.reshape(-1))], raw=True)
back = {{}}
for i in range(8):  # what the holder put itself: read back over NIXL (READ), decoded here
    t = get_tensor(store, f"from-holder/{{i}}")
    back[i] = hashlib.sha256(np.ascontiguousarray(t).view(np.uint8).tobytes()).hexdigest()
print(json.dumps(dict(sent=sent, raw=raw, back=back, stats=store.stats, missing=store.get("none") is None)))
store.close()
"""


@needs_ml_dtypes
@pytest.mark.parametrize("chunk", [8 << 20, 64 << 10])  # one transfer per object / many chunks through 4 slots
def test_real_kv_round_trips_bit_exact_between_two_processes(kv_slice, holder, chunk):
    h = holder()
    kv = layers(kv_slice)
    for i, t in enumerate(kv):  # the other direction: objects the holder put, read by the client
        h.put(f"from-holder/{i}", splitzip.compress(t, keep_shape=True))
    got = run_child(_CLIENT, port=h.port, chunk=chunk, staging=4 * chunk)
    assert got["missing"]
    for i, t in enumerate(kv):
        assert got["back"][str(i)] == sha(t)
        # what the client put, decoded here: bit-exact and in its shape
        back = get_tensor(h, f"kv/{i}")
        assert back.shape == t.shape and sha(back) == sha(t)
    assert h.get("raw/all").tobytes() == kv_slice.tobytes()
    # bytes counted on both sides: the compressed objects are what went over the wire
    sent, stats = got["sent"], h.stats
    assert sent["objects"] == 8 and sent["raw_bytes"] == kv_slice.nbytes
    frames = sum(h.get(f"kv/{i}").nbytes for i in range(8))
    assert sent["stored_bytes"] == frames
    assert got["stats"]["bytes_out"] == frames + kv_slice.nbytes == stats["bytes_in"] - sum(
        h.get(f"from-holder/{i}").nbytes for i in range(8))
    assert 1.3 < sent["ratio"] < 1.42, sent["ratio"]  # real BF16 KV, default codebook, containers' headers included
    assert stats["reservations"] == 0 and stats["pins"] == 0 and stats["dropped"] == 0
    assert wait_until(lambda: h.stats["peers"] == 0)  # the client closed: the holder forgot it


def test_both_sides_have_the_store_methods(holder):
    h = holder()
    with NixlStore(address=h.holder_address, timeout=10) as c:
        data = np.random.default_rng(1).integers(0, 256, 3 << 20, dtype=np.uint8)
        c.put("a", data)
        assert h.contains("a") and c.contains("a") and not c.contains("b")
        g = c.get("a")
        assert np.array_equal(g, data) and not g.flags.writeable
        c.put("a", [b"new ", memoryview(b"bytes"), np.frombuffer(b"!", np.uint8)])  # replaces, pieces joined
        assert h.get("a").tobytes() == b"new bytes!" == c.get("a").tobytes()
        c.put("empty", b"")
        assert c.get("empty").nbytes == 0 and c.contains("empty")
        h.put("local", b"held")
        assert c.get("local").tobytes() == b"held"
        c.delete("local")
        c.delete("never")
        assert not h.contains("local") and c.get("local") is None
        h.delete("a")
        assert not c.contains("a")
        with pytest.raises(TypeError):
            c.put("x", np.zeros(4, dtype=np.uint16))
        with pytest.raises(ValueError):
            c.get("")
        with pytest.raises(ValueError):
            c.put("k" * (nixl.MAX_KEY + 1), b"x")
        assert isinstance(c, Transport) and isinstance(h, Transport)
    assert h.stats["arena_used"] == 0  # "empty" takes no room; "a" and "local" were freed
    assert h.stats["objects"] == 1 and h.stats["pins"] == 0


_DIES_MID_PUT = r"""
import os, sys
import numpy as np
from splitzip.integrations import nixl
store = nixl.NixlStore(address="127.0.0.1:{port}", chunk_bytes=1 << 20, staging_bytes=4 << 20, timeout=20)
# the process dies after every chunk but the last was written into the holder's room
nixl._Client._write_last = lambda *a, **k: os._exit(0)
store.put("half", np.ones(5 << 20, dtype=np.uint8))
"""


def test_a_client_that_dies_mid_put_leaves_nothing(holder):
    h = holder()
    r = subprocess.run([sys.executable, "-c", _DIES_MID_PUT.format(port=h.port)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert wait_until(lambda: h.stats["peers"] == 0 and h.stats["reservations"] == 0)
    assert not h.contains("half") and h.get("half") is None
    st = h.stats
    assert st["dropped"] == 1 and st["arena_used"] == 0 and st["objects"] == 0
    with NixlStore(address=h.holder_address, timeout=10) as c:  # the holder still serves
        c.put("whole", b"x" * 100)
        assert h.get("whole").tobytes() == b"x" * 100


_HOLDER = r"""
import sys, time
from splitzip.integrations.nixl import NixlStore
store = NixlStore(port=0, capacity=32 << 20, timeout=20)
store.put("there", b"before")
print("PORT", store.port, flush=True)
sys.stdin.read()  # until the test closes it, kills or stops this process
"""


@pytest.fixture
def holder_process():
    procs = []

    def start():
        p = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        procs.append(p)
        for line in p.stdout:  # NIXL logs to stdout too
            if line.startswith("PORT "):
                return p, int(line.split()[1])
        raise AssertionError("the holder process did not start")

    yield start
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
        p.wait()


def test_a_holder_that_goes_fails_the_client_at_once(holder_process):
    p, port = holder_process()
    c = NixlStore(address=f"127.0.0.1:{port}", timeout=30)
    try:
        assert c.get("there").tobytes() == b"before"
        c.put("k", np.zeros(1 << 20, dtype=np.uint8))
        p.kill()
        p.wait()
        t0 = time.monotonic()
        with pytest.raises(splitzip.IoError, match="holder"):
            for _ in range(100):  # the next call at the latest sees the connection closed
                c.put("k2", np.zeros(1 << 20, dtype=np.uint8))
                time.sleep(0.05)
        assert time.monotonic() - t0 < 10  # long before the 30 s timeout
        with pytest.raises(splitzip.IoError, match="connection closed"):
            c.contains("k")
    finally:
        c.close()


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] in ("T", "t")


def test_a_holder_that_hangs_times_out(holder_process):
    p, port = holder_process()
    c = NixlStore(address=f"127.0.0.1:{port}", timeout=1.0)
    try:
        assert c.contains("there")
        os.kill(p.pid, signal.SIGSTOP)  # alive (its connection open) but answering nothing
        assert wait_until(lambda: stopped(p.pid))
        t0 = time.monotonic()
        with pytest.raises(splitzip.IoError, match="timeout"):
            c.contains("there")
        assert 0.9 < time.monotonic() - t0 < 5
        with pytest.raises(splitzip.IoError, match="timeout"):
            c.put("k", b"abc")
        os.kill(p.pid, signal.SIGCONT)
        assert c.contains("there")  # late replies of the requests given up are ignored
    finally:
        c.close()


def test_no_refusal_for_a_client_that_connects_to_nothing():
    with pytest.raises(splitzip.IoError, match="connecting"):
        NixlStore(address="127.0.0.1:1", timeout=2)


def test_sizes_past_the_caps_are_refused_before_allocating(holder):
    h = holder(capacity=8 << 20, max_object_bytes=2 << 20)
    with NixlStore(address=h.holder_address, timeout=10) as c:
        # a put larger than the cap the holder announced: refused by the client, nothing sent
        with pytest.raises(splitzip.InvalidArgumentError, match="holder's max_object_bytes"):
            c.put("big", np.zeros((2 << 20) + 1, dtype=np.uint8))
        assert h.stats["refused"] == 0
        # a client that announces more than the cap anyway (a forged request): the holder refuses it
        with pytest.raises(splitzip.IoError, match="larger than this store's max_object_bytes"):
            c._client._call({"op": "put", "key": "forged", "size": 1 << 40}, "forged put")
        assert h.stats["refused"] == 1 and h.stats["arena_used"] == 0 and h.stats["reservations"] == 0
        for bad in ({"op": "put", "key": "x", "size": -1}, {"op": "put", "key": "x", "size": "9"},
                    {"op": "put", "key": 5, "size": 1}, {"op": "nonsense", "key": "x"}):
            with pytest.raises(splitzip.IoError, match="refused"):
                c._client._call(bad, "a malformed request")
        assert h.stats["arena_used"] == 0
    # a holder that announces an object larger than the client's own cap: the client reads none of it
    h.put("two-mib", np.ones(2 << 20, dtype=np.uint8))
    with NixlStore(address=h.holder_address, timeout=10, max_object_bytes=1 << 20) as small:
        with pytest.raises(splitzip.IoError, match="more than this side's max_object_bytes"):
            small.get("two-mib")
        assert small.stats["bytes_in"] == 0 and small.stats["transfers"] == 0
        assert wait_until(lambda: h.stats["pins"] == 0)  # unpinned at once
        with pytest.raises(splitzip.InvalidArgumentError, match="this side's max_object_bytes"):
            small.put("x", np.ones((1 << 20) + 1, dtype=np.uint8))


def test_a_full_store_evicts_the_oldest_or_refuses(holder):
    h = holder(capacity=4 << 20)
    with NixlStore(address=h.holder_address, timeout=10) as c:
        for i in range(5):
            c.put(f"o{i}", np.full(1 << 20, i, dtype=np.uint8))
        assert h.stats["evicted"] >= 1 and not h.contains("o0") and c.get("o4")[0] == 4
    h2 = holder(capacity=4 << 20, evict=False)
    with NixlStore(address=h2.holder_address, timeout=10) as c:
        for i in range(3):
            c.put(f"o{i}", np.zeros(1 << 20, dtype=np.uint8))
        with pytest.raises(splitzip.IoError, match="full"):
            c.put("o3", np.zeros(2 << 20, dtype=np.uint8))
        assert h2.stats["refused"] == 1 and h2.contains("o0") and not h2.contains("o3")
        c.delete("o0")
        c.put("o3", np.zeros(1 << 20, dtype=np.uint8))  # room again


def test_a_put_that_outlives_its_lease_drops_its_client(holder):
    h = holder(timeout=1.0)
    c = NixlStore(address=h.holder_address, timeout=10)
    try:
        c._client._call({"op": "put", "key": "k", "size": 4096}, "a put whose bytes never come")
        assert h.stats["reservations"] == 1 and h.stats["arena_used"] == 4096
        # the holder gives the room back only once that client's agent is gone (a late WRITE cannot land in it)
        assert wait_until(lambda: h.stats["peers"] == 0, 5)
        st = h.stats
        assert st["dropped"] == 1 and st["reservations"] == 0 and st["arena_used"] == 0 and not h.contains("k")
        with pytest.raises(splitzip.IoError, match="connection closed"):
            assert wait_until(lambda: c.contains("k") and False, 5)
    finally:
        c.close()


def test_an_object_being_read_is_freed_after_its_reader(holder):
    h = holder()
    h.put("k", np.ones(8192, dtype=np.uint8))
    with NixlStore(address=h.holder_address, timeout=10) as c:
        pin = c._client._call({"op": "get", "key": "k"}, "a get whose READ has not finished")
        h.delete("k")
        assert not h.contains("k") and h.stats["arena_used"] == 8192  # still pinned: its room is not reused
        h.put("k", b"new")
        c._client._notify({"op": "unpin", "ref": pin["ref"]})
        assert wait_until(lambda: h.stats["pins"] == 0 and h.stats["arena_used"] == 512)
        assert c.get("k").tobytes() == b"new"


def test_a_wrong_token_is_refused(holder):
    h = holder(token="the right one")
    with pytest.raises(splitzip.IoError, match="token"):
        NixlStore(address=h.holder_address, token="another", timeout=5)
    with NixlStore(address=h.holder_address, token="the right one", timeout=5) as c:
        c.put("k", b"v")
    assert h.stats["clients"] == 1


def test_messages_that_are_not_the_stores_are_ignored(holder):
    h = holder()
    with NixlStore(address=h.holder_address, timeout=10) as c:
        agent, peer = c._client.agent, c._client.peer
        # the forged "done" carries an id that none of this client's own requests will (they count from 1), so
        # that the holder's refusal of it cannot arrive as the answer to the put below
        for junk in (b"junk", b"SZN1{not json", b"SZN1[1,2]", b"SZN1" + b"x" * 9000, b"SZN1{\"op\":\"put\"}",
                     b"SZN1{\"op\":\"done\",\"ref\":12345,\"id\":1099511627776}",
                     b"SZN1{\"op\":\"unpin\",\"ref\":1}"):
            agent.send_notif(peer, junk)
        assert wait_until(lambda: h.stats["bad_messages"] >= 4)
        c.put("k", b"still served")
        assert c.get("k").tobytes() == b"still served"
        assert h.stats["objects"] == 1 and h.stats["arena_used"] == 512


def test_put_async_pipelines_and_reports_errors(holder):
    h = holder(max_object_bytes=1 << 20)
    with NixlStore(address=h.holder_address, timeout=10, inflight=2) as c:
        futures = [c.put_async(f"p{i}", np.full(256 << 10, i, dtype=np.uint8)) for i in range(6)]
        for f in futures:
            f.result(timeout=30)
        assert all(h.get(f"p{i}")[0] == i for i in range(6))
        with pytest.raises(splitzip.InvalidArgumentError):
            c.put_async("big", np.zeros(2 << 20, dtype=np.uint8)).result(timeout=30)


def test_configuration():
    with pytest.raises(ValueError, match="not both"):
        NixlStore()
    with pytest.raises(ValueError, match="not both"):
        NixlStore(address="127.0.0.1:5", port=0)
    with pytest.raises(ValueError, match="host:port"):
        NixlStore(address="nohost")
    with pytest.raises(ValueError, match="timeout"):
        NixlStore(port=0, timeout=0)
    with pytest.raises(ValueError, match="unknown options"):
        NixlStore.from_config({"transport": "nixl", "port": 0, "colour": "red"})
    with pytest.raises(ValueError, match="device"):
        NixlStore(port=0, device="tpu")
    s = NixlStore.from_config({"transport": "nixl", "port": 0, "capacity": 1 << 20})
    assert s.is_holder and s.port > 0 and repr(s).startswith("NixlStore(port=")
    s.close()
    s.close()
    with pytest.raises(splitzip.IoError, match="closed"):
        s.put("k", b"v")
    assert nixl.nixl_version()


def test_the_connector_names_the_store_by_configuration():
    from splitzip.integrations.transport import make_transport
    from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector
    from test_integration_vllm import config
    s = make_transport({"transport": "nixl", "port": 0, "capacity": 1 << 20})
    assert isinstance(s, NixlStore) and s.is_holder
    s.close()
    with pytest.raises(ValueError, match="unknown options"):
        make_transport({"transport": "nixl", "port": 0, "colour": "red"})
    # vLLM's JSON configuration: the transport's name and the store's options in kv_connector_extra_config
    c = SplitZipConnector(config("kv_consumer", transport="nixl", port=0, capacity=1 << 20, timeout=5),
                          KVConnectorRole.SCHEDULER)
    assert isinstance(c.transport, NixlStore) and c.transport.is_holder
    c.transport.close()
    with pytest.raises(ValueError, match="do not apply"):
        SplitZipConnector(config("kv_consumer", transport="nixl", port=0, path="/tmp"), KVConnectorRole.SCHEDULER)
    with pytest.raises(ValueError, match="do not apply"):
        SplitZipConnector(config("kv_consumer", transport="file", path="/tmp", capacity=1), KVConnectorRole.SCHEDULER)


# ---- the vLLM connector over the NIXL store ----

_PRODUCER = r"""
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np
from conftest import SLICE
from test_integration_vllm import config, layer_caches, new_req, run_save, step
from splitzip.integrations.nixl import NixlStore
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector
kv = np.fromfile(SLICE, dtype="<u2").reshape(8, 2, 224, 4, 64)
store = NixlStore(address="127.0.0.1:{port}", timeout=20)
cfg = config("kv_producer", transport=store)
sched, work = SplitZipConnector(cfg, KVConnectorRole.SCHEDULER), SplitZipConnector(cfg, KVConnectorRole.WORKER)
src = layer_caches(kv)
work.register_kv_caches(src)
prompt = list(range(1000, 1070))
meta = sched.build_connector_meta(step([new_req("r1", prompt, (5, 9, 2, 7, 11))], scheduled={{"r1": 70}}))
run_save(work, meta, src)
again = sched.build_connector_meta(step([new_req("r2", prompt, (1, 2, 3, 4, 6))], scheduled={{"r2": 70}}))
print(json.dumps(dict(work.stats, saved_again=len(again.requests), store=store.stats)))
store.close()
"""


@needs_ml_dtypes
def test_vllm_connector_over_nixl_between_two_processes(kv_slice, holder):
    from types import SimpleNamespace as NS
    from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector
    from test_integration_vllm import config, layer_caches, new_req, run_load, same_blocks, step
    h = holder()
    cfg = config("kv_consumer", transport=h)  # the decode instance holds the objects; its loads are local
    sched, work = SplitZipConnector(cfg, KVConnectorRole.SCHEDULER), SplitZipConnector(cfg, KVConnectorRole.WORKER)
    assert sched.transport is h
    dst = layer_caches(kv_slice, fill=False)
    work.register_kv_caches(dst)
    sent = run_child(_PRODUCER, port=h.port)
    assert sent["requests_saved"] == 1 and sent["saved_again"] == 0  # the producer's scheduler asked the holder
    prompt = list(range(1000, 1070))
    req = NS(request_id="r1", prompt_token_ids=prompt)
    assert sched.get_num_new_matched_tokens(req, 0) == (64, False)
    sched.update_state_after_alloc(req, None, 64)
    run_load(work, sched.build_connector_meta(step([new_req("r1", prompt, (3, 1, 8, 0, 20))], scheduled={"r1": 6})))
    assert same_blocks(layer_caches(kv_slice), dst, (5, 9, 2, 7), (3, 1, 8, 0))
    assert work.stats["requests_loaded"] == 1
    assert work.stats["frame_bytes_loaded"] == sent["frame_bytes_saved"] == h.bytes_stored == sent["store"]["bytes_out"]
    assert 1.3 < sent["raw_bytes_saved"] / sent["frame_bytes_saved"] < 1.42


# ---- CUDA ----

def _cuda_reason():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device is visible (torch.cuda.is_available() is false)"
    if not splitzip.cuda_available():
        return "this splitzip was built without CUDA"
    return ""


_CUDA_CLIENT = r"""
import json, sys
import torch, splitzip
from splitzip.integrations.nixl import NixlStore
sys.path.insert(0, {tests!r})
import numpy as np
from conftest import SLICE
kv = torch.from_numpy(np.fromfile(SLICE, dtype="<u2").view(np.int16)).view(torch.bfloat16).cuda()
store = NixlStore(address="127.0.0.1:{port}", device="cuda:0", timeout=20)
frame = splitzip.compress(kv)
store.put("gpu-frame", frame)
back = store.get("gpu-frame")
print(json.dumps(dict(same=bool(torch.equal(back, frame)), is_cuda=back.is_cuda, frame=int(frame.numel()))))
store.close()
"""


@needs_ml_dtypes
def test_cuda_frames_between_device_memories(kv_slice, holder):
    why = _cuda_reason()
    if why:
        pytest.skip(f"the VRAM path needs a GPU: {why}")
    import torch
    h = holder(device="cuda:0")
    got = run_child(_CUDA_CLIENT, port=h.port)
    assert got["same"] and got["is_cuda"]
    frame = h.get("gpu-frame")
    assert frame.is_cuda and int(frame.numel()) == got["frame"]
    out = torch.empty(kv_slice.size, dtype=torch.bfloat16, device="cuda")
    splitzip.decompress(frame, out=out)
    assert np.array_equal(out.view(torch.int16).cpu().numpy().view(np.uint16), kv_slice.reshape(-1))
