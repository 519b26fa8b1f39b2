"""splitzip.p2p: a request's layers from a sender to a receiver over a link, compressed on the way. Over the in-process
loopback link (host tensors, and CUDA tensors on a GPU), between two processes over torch.distributed (gloo on the
host; NCCL when two GPUs are visible), bit-exact, raw and compressed, and bad frames refused. Skipped without torch."""

import os
import socket
import threading

import numpy as np
import pytest

import splitzip

torch = pytest.importorskip("torch")
from splitzip import p2p  # noqa: E402  (needs torch)

from conftest import kv_like_bits  # noqa: E402

GPU = torch.cuda.is_available() and splitzip.cuda_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not GPU, reason="needs a CUDA GPU and an extension built with SPLITZIP_ENABLE_CUDA=ON"))]
TORCH_OF = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
            "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
INT_OF = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def layers_of(kv_slice, name, device, count=8):
    """count layers: the real BF16 KV slice (its K and V of one layer in one tensor) for bf16, KV-like values of
    the same shape for the other dtypes."""
    out = []
    for layer in range(count):
        if name == "bf16":
            bits = kv_slice[layer % kv_slice.shape[0]].reshape(-1).astype(np.uint16)
        else:
            bits = kv_like_bits(name, kv_slice[0].size, seed=layer)
        t = torch.from_numpy(bits.view({1: np.int8, 2: np.int16, 4: np.int32}[bits.itemsize]).copy())
        out.append(t.view(TORCH_OF[name]).reshape(2, -1).to(device))
    return out


def same_bits(a, b):
    w = INT_OF[a.element_size()]
    return torch.equal(a.view(w).cpu(), b.view(w).cpu())


def run_loopback(layers, compress, **kw):
    a, b = p2p.LoopbackLink.pair()
    outs = [torch.zeros_like(t.view(torch.uint8)).view(t.dtype) for t in layers]
    tx = p2p.Sender(a, compress=compress, **kw)
    rx = p2p.Receiver(b, compress=compress)
    err = []

    def receive():
        try:
            for o in outs:
                rx.recv(o)
            rx.finish()
        except Exception as e:  # reported by the main thread
            err.append(e)

    th = threading.Thread(target=receive)
    th.start()
    for t in layers:
        tx.send(t)
    tx.finish()
    th.join(60)
    assert not th.is_alive(), "the receiver did not finish"
    if err:
        raise err[0]
    return tx, rx, outs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32", "fp8_e4m3"])
@pytest.mark.parametrize("compress", [True, False])
def test_loopback_bit_exact(kv_slice, device, name, compress):
    layers = layers_of(kv_slice, name, device)
    tx, rx, outs = run_loopback(layers, compress, depth=2)
    for t, o in zip(layers, outs):
        assert same_bits(t, o)
    raw = sum(t.numel() * t.element_size() for t in layers)
    assert tx.raw_bytes == rx.raw_bytes == raw
    assert tx.sent_bytes == rx.sent_bytes
    if compress and name == "bf16":
        assert raw / tx.sent_bytes > 1.25  # the real KV compresses
    if not compress:
        assert tx.sent_bytes == raw


@pytest.mark.parametrize("device", DEVICES)
def test_every_depth_and_checksum_kind(kv_slice, device):
    layers = layers_of(kv_slice, "bf16", device, count=5)
    for depth in (1, 3, 8):
        for checksum in (True, "h32", False):
            _, _, outs = run_loopback(layers, True, depth=depth, checksum=checksum, chunk=1024)
            assert all(same_bits(t, o) for t, o in zip(layers, outs))


@pytest.mark.parametrize("device", DEVICES)
def test_damaged_frame_raises_and_bad_sizes_are_refused(kv_slice, device):
    t = layers_of(kv_slice, "bf16", device, count=1)[0]
    frame = splitzip.compress(t.cpu())
    damaged = torch.from_numpy(np.array(frame, copy=True))
    damaged[len(damaged) // 2] ^= 0x10
    a, b = p2p.LoopbackLink.pair()
    a.send(torch.tensor([damaged.numel()], dtype=torch.int64, device=device))
    a.send(damaged.to(device))
    rx = p2p.Receiver(b)
    rx.recv(torch.empty_like(t))
    with pytest.raises((splitzip.ChecksumError, splitzip.CorruptError)):
        rx.finish()
    for announced in (10, splitzip.compress_bound(t.numel(), "bf16") + 1):  # below a header, above the bound
        a, b = p2p.LoopbackLink.pair()
        a.send(torch.tensor([announced], dtype=torch.int64, device=device))
        with pytest.raises(splitzip.CorruptError, match="announced a frame"):
            p2p.Receiver(b).recv(torch.empty_like(t))


def test_wrong_dtype_and_device_mix_refused(kv_slice):
    a, _ = p2p.LoopbackLink.pair()
    with pytest.raises(ValueError, match="not a SplitZip dtype"):
        p2p.Sender(a).send(torch.zeros(8, dtype=torch.int32))
    with pytest.raises(ValueError, match="depth"):
        p2p.Sender(a, depth=0)
    tx = p2p.Sender(a, compress=False)
    tx.send(torch.zeros(8, dtype=torch.bfloat16))
    if GPU:
        with pytest.raises(ValueError, match="live on"):
            tx.send(torch.zeros(8, dtype=torch.bfloat16, device="cuda"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_ranks(rank, port, backend, device_of, path, results):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=2)
    try:
        device = device_of(rank)
        if device.startswith("cuda"):
            torch.cuda.set_device(device)
        bits = np.fromfile(path, dtype="<i2").reshape(8, -1)
        layers = [torch.from_numpy(bits[i].copy()).view(torch.bfloat16).to(device) for i in range(8)]
        for compress in (True, False):
            link = p2p.TorchLink(peer=1 - rank)
            if rank == 0:
                tx = p2p.Sender(link, compress=compress)
                for t in layers:
                    tx.send(t)
                tx.finish()
            else:
                rx = p2p.Receiver(link, compress=compress)
                outs = [torch.empty_like(t) for t in layers]
                for o in outs:
                    rx.recv(o)
                rx.finish()
                ok = all(torch.equal(t.view(torch.int16).cpu(), o.view(torch.int16).cpu()) for t, o in zip(layers, outs))
                results.put((compress, ok, rx.raw_bytes / rx.sent_bytes))
    finally:
        dist.destroy_process_group()


def _cpu(rank):
    return "cpu"


def _gpu(rank):
    return f"cuda:{rank}"


@pytest.mark.parametrize("backend", ["gloo", pytest.param("nccl", marks=pytest.mark.skipif(
    not (GPU and torch.cuda.device_count() >= 2), reason="NCCL between two processes needs two GPUs"))])
def test_two_processes(kv_slice, tmp_path, backend):
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or (backend == "gloo" and not dist.is_gloo_available()):
        pytest.skip(f"torch.distributed with {backend} is not available")
    path = tmp_path / "kv.bin"
    kv_slice.reshape(8, -1).astype("<u2").tofile(path)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    mp.start_processes(_two_ranks, args=(_free_port(), backend, _cpu if backend == "gloo" else _gpu, str(path),
                                         results), nprocs=2, join=True, start_method="spawn")
    got = sorted(results.get(timeout=10) for _ in range(2))
    assert [g[:2] for g in got] == [(False, True), (True, True)]
    assert got[1][2] > 1.25 and got[0][2] == 1.0


# ---- IpcRing / IpcSender / IpcReceiver: the ring in the receiver's GPU memory, sizes never on the host --------------

NEEDS_GPU = pytest.mark.skipif(not GPU, reason="the IPC path needs a CUDA GPU and an extension built with "
                                                "SPLITZIP_ENABLE_CUDA=ON")


def test_ipc_argument_errors_without_a_gpu():
    with pytest.raises(ValueError, match="depth"):
        p2p.IpcRing(1 << 20, depth=0)
    with pytest.raises(ValueError, match="at least 64"):
        p2p.IpcRing(10)
    with pytest.raises(TypeError, match="IpcRing"):
        p2p.IpcSender(p2p.LoopbackLink.pair()[0])
    with pytest.raises(TypeError, match="IpcRing"):
        p2p.IpcReceiver(object())
    from splitzip._torch_ops import signal_op, wait_op
    host = torch.zeros(2, dtype=torch.int64)
    for op in (signal_op, wait_op):  # flags must be device memory, whatever the build
        with pytest.raises(ValueError):
            op(host, 0, 1)


@NEEDS_GPU
def test_ipc_argument_errors(kv_slice):
    from splitzip._torch_ops import signal_op, wait_op
    t = layers_of(kv_slice, "bf16", "cuda", count=1)[0]
    with pytest.raises(ValueError, match="GPU memory"):
        p2p.IpcRing(1 << 20, device="cpu")
    ring = p2p.IpcRing.for_tensor(t, depth=2)
    assert ring.slot_bytes == splitzip.compress_bound(t.numel(), "bf16")
    tx = p2p.IpcSender(ring)
    with pytest.raises(ValueError, match="CUDA tensor"):
        tx.send(t.cpu())
    big = torch.cat([t.reshape(-1), t.reshape(-1)])
    with pytest.raises(ValueError, match="need a slot"):
        tx.send(big)
    with pytest.raises(ValueError, match="not a SplitZip dtype"):
        tx.send(torch.zeros(8, dtype=torch.int32, device="cuda"))
    rx = p2p.IpcReceiver(ring)
    with pytest.raises(ValueError, match="ring's device"):
        rx.recv(torch.empty_like(t).cpu())
    assert ring.sent == ring.received == 0  # nothing refused was counted
    flags = torch.zeros(4, dtype=torch.int64, device="cuda")
    with pytest.raises(IndexError):
        signal_op(flags, 4, 1)
    with pytest.raises(IndexError):
        wait_op(flags, 4, 1)
    with pytest.raises(ValueError, match="uint64"):
        signal_op(flags, 0, -1)
    with pytest.raises(ValueError, match="aligned"):
        signal_op(flags.view(torch.uint8)[4:12], 0, 1)
    signal_op(flags, 1, 5)
    wait_op(flags, 1, 5)  # already there: passes at once
    wait_op(flags, 1, 2)  # an older value too
    torch.cuda.synchronize()
    assert flags.tolist() == [0, 5, 0, 0]


def _ipc_in_process(layers, depth, compress, outs=None, sender_device=None):
    ring = p2p.IpcRing.for_tensor(layers[0], depth=depth, device=(outs[0].device if outs else layers[0].device))
    outs = outs or [torch.zeros_like(t.view(torch.uint8)).view(t.dtype) for t in layers]
    tx, rx = p2p.IpcSender(ring, compress=compress), p2p.IpcReceiver(ring, compress=compress)
    # One process: every send is enqueued before the receive that waits for it, in slot-sized batches.
    for i in range(0, len(layers), depth):
        for t in layers[i:i + depth]:
            tx.send(t)
        for o in outs[i:i + depth]:
            rx.recv(o)
    tx.finish(timeout=60)
    rx.finish(timeout=60)
    return tx, rx, outs


@NEEDS_GPU
@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32", "fp8_e4m3"])
@pytest.mark.parametrize("compress", [True, False])
def test_ipc_ring_in_one_process_bit_exact(kv_slice, name, compress):
    layers = layers_of(kv_slice, name, "cuda")
    for depth in (1, 2, 3):
        tx, rx, outs = _ipc_in_process(layers, depth, compress)
        assert all(same_bits(t, o) for t, o in zip(layers, outs))
        raw = sum(t.numel() * t.element_size() for t in layers)
        assert tx.raw_bytes == rx.raw_bytes == raw
        if compress and name == "bf16":
            assert raw / tx.sent_bytes > 1.25
        if not compress:
            assert tx.sent_bytes == raw


@NEEDS_GPU
def test_ipc_receiver_refuses_damaged_and_wrong_size_frames(kv_slice):
    from splitzip._torch_ops import signal_op
    t = layers_of(kv_slice, "bf16", "cuda", count=1)[0]
    frame = torch.from_numpy(np.array(splitzip.compress(t.cpu()), copy=True))
    damaged = frame.clone()
    damaged[len(damaged) // 2] ^= 0x10
    half = torch.from_numpy(np.array(splitzip.compress(t.reshape(-1)[: t.numel() // 2].cpu()), copy=True))
    for bad, error in ((damaged, (splitzip.ChecksumError, splitzip.CorruptError)), (half, splitzip.CorruptError)):
        ring = p2p.IpcRing.for_tensor(t, depth=1)
        ring.slots[0, :bad.numel()].copy_(bad)
        signal_op(ring.flags[0], 0, 1)  # what a sender does once the frame is in the slot
        rx = p2p.IpcReceiver(ring)
        rx.recv(torch.empty_like(t))
        with pytest.raises(error):
            rx.finish(timeout=60)
    ring = p2p.IpcRing.for_tensor(t, depth=1)  # nobody sends: finish times out rather than hang
    ring.slots.zero_()
    rx = p2p.IpcReceiver(ring)
    rx.recv(torch.empty_like(t))
    with pytest.raises(TimeoutError):
        rx.finish(timeout=0.5)
    # Release the waiting stream from another stream (the current one now waits for the decode); the slot holds
    # zeros, no frame: a refused decode.
    with torch.cuda.stream(torch.cuda.Stream()):
        signal_op(ring.flags[0], 0, 1)
    with pytest.raises(splitzip.BadMagicError):
        rx.finish(timeout=60)


@NEEDS_GPU
@pytest.mark.skipif(GPU and torch.cuda.device_count() < 2, reason="one CUDA device visible: needs two")
def test_ipc_ring_across_two_gpus_in_one_process(kv_slice):
    layers = layers_of(kv_slice, "bf16", "cuda:0")
    outs = [torch.zeros_like(t, device="cuda:1") for t in layers]
    for compress in (True, False):
        _, _, got = _ipc_in_process(layers, 2, compress, outs=outs)
        assert all(same_bits(t, o) for t, o in zip(layers, got))


def _ipc_rank(rank, device, path, depth, rings, done, results):
    """rank 1 receives (it makes the ring and hands it over by CUDA IPC), rank 0 sends; three requests through one
    ring (compressed, raw, compressed), each checked bit for bit by the receiver."""
    torch.cuda.set_device(device)
    bits = np.fromfile(path, dtype="<i2").reshape(8, -1)
    layers = [torch.from_numpy(bits[i].copy()).view(torch.bfloat16).to(device) for i in range(8)]
    requests = (True, False, True)
    if rank == 1:
        ring = p2p.IpcRing.for_tensor(layers[0], depth=depth)
        rings.put(ring)
        for compress in requests:
            rx = p2p.IpcReceiver(ring, compress=compress)
            outs = [torch.zeros_like(t) for t in layers]
            for o in outs:
                rx.recv(o)
            rx.finish(timeout=120)
            ok = all(torch.equal(t.view(torch.int16), o.view(torch.int16)) for t, o in zip(layers, outs))
            results.put(("rx", compress, ok, rx.raw_bytes))
        done.get(timeout=120)  # the sender has let go of the ring
    else:
        ring = rings.get(timeout=120)
        for compress in requests:
            tx = p2p.IpcSender(ring, compress=compress)
            for t in layers:
                tx.send(t)
            tx.finish(timeout=120)
            results.put(("tx", compress, tx.raw_bytes, tx.sent_bytes))
        del ring, tx
        torch.cuda.synchronize()
        done.put(True)


def _run_ipc_ranks(kv_slice, tmp_path, devices, depth):
    import torch.multiprocessing as mp
    path = tmp_path / "kv.bin"
    kv_slice.reshape(8, -1).astype("<u2").tofile(path)
    ctx = mp.get_context("spawn")
    rings, done, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_ipc_rank, args=(r, devices[r], str(path), depth, rings, done, results))
             for r in range(2)]
    for pr in procs:
        pr.start()
    got = [results.get(timeout=300) for _ in range(6)]
    for pr in procs:
        pr.join(120)
    assert all(pr.exitcode == 0 for pr in procs), [pr.exitcode for pr in procs]
    raw = kv_slice.size * 2
    rx = [g for g in got if g[0] == "rx"]
    tx = [g for g in got if g[0] == "tx"]
    assert [g[1:] for g in rx] == [(True, True, raw), (False, True, raw), (True, True, raw)]
    assert [(g[1], g[2]) for g in tx] == [(True, raw), (False, raw), (True, raw)]
    assert raw / tx[0][3] > 1.25 and tx[1][3] == raw and tx[2][3] == tx[0][3]


@NEEDS_GPU
@pytest.mark.parametrize("depth", [1, 3])
def test_ipc_two_processes_one_gpu(kv_slice, tmp_path, depth):
    _run_ipc_ranks(kv_slice, tmp_path, ["cuda:0", "cuda:0"], depth)


@NEEDS_GPU
@pytest.mark.skipif(GPU and torch.cuda.device_count() < 2, reason="one CUDA device visible: needs two")
def test_ipc_two_processes_two_gpus(kv_slice, tmp_path):
    _run_ipc_ranks(kv_slice, tmp_path, ["cuda:0", "cuda:1"], 2)
