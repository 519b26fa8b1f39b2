"""splitzip.transfer: tensors between a Sender and a Server over real UCX on loopback, raw and compressed, gated
sends, destinations, the emulated link rate and the errors."""

import gc
import threading
import time
import weakref

import numpy as np
import pytest

import splitzip
from splitzip import transfer

pytestmark = pytest.mark.skipif(not transfer.available(),
                                reason="this splitzip was built without the transfer library (no UCX)")


@pytest.fixture
def kv_bits(kv_slice):
    return kv_slice.reshape(-1)


class Serving:
    """A Server with destinations from a dict, serving one session on a thread."""

    def __init__(self, **options):
        self.mem = {}
        self.refuse = set()
        if not ({"out_dir", "discard", "destination"} & options.keys()):
            options["destination"] = self.destination
        self.server = transfer.Server(timeout=10, **options)
        self.result = self.error = None
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def destination(self, name, dtype, nbytes):
        if name in self.refuse:
            return None
        self.mem[name] = np.full(nbytes, 0xEE, dtype=np.uint8)
        return self.mem[name]

    def run(self):
        try:
            self.result = self.server.serve_one()
        except splitzip.Error as e:
            self.error = e

    @property
    def address(self):
        return f"127.0.0.1:{self.server.port}"

    def join(self):
        self.thread.join()
        self.server.close()
        return self


@pytest.mark.parametrize("raw", [False, True])
def test_tensors_arrive_bit_exact_in_the_destinations(kv_bits, raw):
    srv = Serving()
    fp32 = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    stats = transfer.send(srv.address, [("kv", kv_bits, "bf16"), ("x", fp32)], raw=raw, chunk_values=50000)
    srv.join()
    assert srv.error is None
    assert srv.mem["kv"].tobytes() == kv_bits.tobytes()
    assert srv.mem["x"].tobytes() == fp32.tobytes()
    assert stats.raw_bytes == kv_bits.nbytes + fp32.nbytes
    if raw:
        assert stats.payload_bytes == stats.raw_bytes
    else:
        assert stats.ratio > 1.2  # real KV compresses
    assert srv.result.raw == raw
    assert sorted((t.name, t.dtype, t.nbytes) for t in srv.result.tensors) == [("kv", "bf16", kv_bits.nbytes),
                                                                                ("x", "fp32", fp32.nbytes)]
    assert all(t.path == "" for t in srv.result.tensors)


def test_gated_send_reads_each_tensor_only_once_ready(kv_bits):
    srv = Serving()
    bufs = [np.zeros_like(kv_bits), np.zeros_like(kv_bits[:777])]
    with transfer.Sender(srv.address, [("a", bufs[0], "bf16"), ("b", bufs[1], "bf16")], gated=True,
                         timeout=1) as s:
        time.sleep(1.5)  # longer than the timeout: waiting for the producer is not a stall
        bufs[0][:] = kv_bits
        s.ready("a")
        time.sleep(0.2)
        assert not s.done()
        bufs[1][:] = kv_bits[:777]
        s.ready(1)
    srv.join()
    assert srv.error is None
    assert srv.mem["a"].tobytes() == kv_bits.tobytes()
    assert srv.mem["b"].tobytes() == kv_bits[:777].tobytes()
    with pytest.raises(KeyError):
        s.ready("nope")
    with pytest.raises(ValueError):
        s.ready(2)


def test_a_producer_failure_ends_the_send_with_its_reason(kv_bits):
    srv = Serving()
    s = transfer.Sender(srv.address, [("a", kv_bits, "bf16")], gated=True)
    s.fail("out of memory in layer 7")
    with pytest.raises(splitzip.IoError, match="the producer failed: out of memory in layer 7"):
        s.wait()
    srv.join()
    assert isinstance(srv.error, splitzip.IoError)


def test_an_exception_in_the_block_fails_the_send_and_propagates(kv_bits):
    srv = Serving()
    with pytest.raises(ZeroDivisionError):
        with transfer.Sender(srv.address, [("a", kv_bits, "bf16")], gated=True):
            1 / 0
    srv.join()
    assert isinstance(srv.error, splitzip.IoError)


def test_a_refused_destination_fails_both_sides(kv_bits):
    srv = Serving()
    srv.refuse.add("a")
    with pytest.raises(splitzip.IoError, match="no destination for a"):
        transfer.send(srv.address, [("a", kv_bits, "bf16")])
    srv.join()
    assert isinstance(srv.error, splitzip.IoError)


def test_a_destination_too_small_is_refused(kv_bits, monkeypatch):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: seen.append(u.exc_value))
    srv = Serving(destination=lambda name, dtype, nbytes: np.zeros(nbytes - 2, np.uint8))
    with pytest.raises(splitzip.IoError, match="no destination for a"):
        transfer.send(srv.address, [("a", kv_bits, "bf16")])
    srv.join()
    assert isinstance(srv.error, splitzip.IoError)
    assert len(seen) == 1 and "bytes for a tensor of" in str(seen[0])


def test_release_hands_back_each_destination_with_whether_it_verified(kv_bits):
    released = []
    lock = threading.Lock()

    def release(name, tensor, complete):
        with lock:
            released.append((name, tensor, complete))

    srv = Serving(release=release)
    transfer.send(srv.address, [("a", kv_bits, "bf16"), ("b", kv_bits[:999], "bf16")])
    srv.join()
    assert srv.error is None
    assert sorted((n, c) for n, _, c in released) == [("a", True), ("b", True)]
    assert all(t is srv.mem[n] for n, t, _ in released)  # the destination's own tensors come back
    # a session that fails after its first tensor: that one is released complete, the second one not
    released.clear()
    srv = Serving(release=release)
    with pytest.raises(RuntimeError, match="gives up"):
        with transfer.Sender(srv.address, [("a", kv_bits, "bf16"), ("b", kv_bits, "bf16")], gated=True) as s:
            s.ready(0)  # b is never ready: its destination is never asked for
            deadline = time.monotonic() + 10
            while not (srv.mem.get("a") is not None and srv.mem["a"].tobytes() == kv_bits.tobytes()):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(0.5)  # a's bytes are in: let the session count its last chunk (microseconds later)
            raise RuntimeError("the producer gives up")
    srv.join()
    assert isinstance(srv.error, splitzip.IoError)
    assert [(n, c) for n, _, c in released] == [("a", True)]
    with pytest.raises(TypeError, match="release"):
        transfer.Server(discard=True, release=release)


def test_out_dir_and_discard(tmp_path, kv_bits):
    srv = Serving(out_dir=tmp_path)
    transfer.send(srv.address, [("kv.bin", kv_bits, "bf16")], threads=2, chunk_values=1 << 16)
    srv.join()
    assert (tmp_path / "kv.bin").read_bytes() == kv_bits.tobytes()
    assert srv.result.tensors[0].path.endswith("kv.bin")
    srv = Serving(discard=True)
    transfer.send(srv.address, [("kv", kv_bits, "bf16")])
    srv.join()
    assert srv.error is None and srv.result.raw_bytes == kv_bits.nbytes
    with pytest.raises(ValueError, match="exactly one of"):
        transfer.Server(discard=True, out_dir=tmp_path)
    with pytest.raises(ValueError, match="exactly one of"):
        transfer.Server()


def test_the_emulated_link_paces_a_burst(kv_bits):
    srv = Serving()
    rate = 20e6
    t0 = time.monotonic()
    transfer.send(srv.address, [("a", kv_bits, "bf16")], raw=True, rate=rate)
    took = time.monotonic() - t0
    srv.join()
    assert took >= 0.95 * kv_bits.nbytes / rate


def test_arguments_are_checked(kv_bits):
    with pytest.raises(ValueError):
        transfer.send("localhost", [("a", kv_bits, "bf16")])
    with pytest.raises(ValueError):
        transfer.send("127.0.0.1:0", [("a", kv_bits, "bf16")])
    with pytest.raises(TypeError):
        transfer.send("127.0.0.1:9", [("a", kv_bits)])  # uint16 needs dtype=
    with pytest.raises(TypeError, match="gated"):
        transfer.send("127.0.0.1:9", [("a", kv_bits, "bf16")], gated=True)
    with pytest.raises(ValueError, match="gated"):
        transfer.Sender("127.0.0.1:9", [("a", kv_bits, "bf16")]).ready(0)
    with pytest.raises(splitzip.IoError):
        transfer.send("127.0.0.1:9", [("a", kv_bits, "bf16")], timeout=2)  # nobody listens


def test_a_server_whose_destination_refers_to_it_is_collected():
    class Owner:  # owner -> server -> its destination (a bound method) -> owner
        def __init__(self):
            self.server = transfer.Server(destination=self.destination)

        def destination(self, name, dtype, nbytes):
            return None

    owner = Owner()
    ref = weakref.ref(owner.server)
    del owner
    gc.collect()
    assert ref() is None
