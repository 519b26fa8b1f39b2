"""The CUDA paths with torch (and cupy when installed): same frames as the CPU codec, round trips, out=, pages,
errors, custom ops. Skipped without torch, without a GPU, or with a CPU-only build of the extension."""

import numpy as np
import pytest

import splitzip
from conftest import ALL_DTYPES, kv_like_bits

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and splitzip.cuda_available()),
    reason="needs a CUDA GPU and an extension built with SPLITZIP_ENABLE_CUDA=ON")

TORCH_DT = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8_e4m3": "float8_e4m3fn",
            "fp8_e5m2": "float8_e5m2"}
TORCH_UINT = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def to_cuda(bits, name):
    """uint bit patterns (numpy) -> a CUDA tensor of the torch float dtype with exactly those bits."""
    signed = bits.view({1: np.uint8, 2: np.int16, 4: np.int32}[bits.itemsize])
    return torch.from_numpy(signed.copy()).cuda().view(getattr(torch, TORCH_DT[name]))


UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def bits_of(t):
    """The bit patterns of a CUDA tensor as unsigned numpy integers."""
    return t.view(TORCH_UINT[t.element_size()]).cpu().numpy().view(UINT_OF_SIZE[t.element_size()])


def test_custom_ops_registered():
    assert splitzip.register_torch_ops()
    assert hasattr(torch.ops.splitzip, "compress") and hasattr(torch.ops.splitzip, "decompress")


def test_custom_ops_pass_opcheck():
    x = to_cuda(kv_like_bits("bf16", 5000), "bf16").view(torch.uint8)
    checks = ("test_schema", "test_faketensor")
    torch.library.opcheck(torch.ops.splitzip.compress, (x, 1, [], 12, 1), test_utils=checks)
    frame, size = torch.ops.splitzip.compress(x, 1, [], 12, 1)
    f = frame[: int(size.item())].clone()
    out = torch.empty(10_000, dtype=torch.uint8, device="cuda")
    torch.library.opcheck(torch.ops.splitzip.decompress, (f, out), test_utils=checks)
    status = torch.ops.splitzip.decompress(f, out)
    assert int(status.item()) == 0 and torch.equal(out, x)


@pytest.mark.parametrize("name", ALL_DTYPES)
@pytest.mark.parametrize("n", [0, 1, 255, 4096, 4097, 1_000_003])
def test_gpu_frame_equals_cpu_frame_and_round_trips(name, n):
    bits = kv_like_bits(name, n, seed=n % 97)
    x = to_cuda(bits, name)
    frame = splitzip.compress(x)
    assert frame.is_cuda and frame.dtype == torch.uint8
    assert frame.cpu().numpy().tobytes() == splitzip.compress(bits, dtype=name).tobytes()
    y = splitzip.decompress(frame)
    assert y.is_cuda and y.dtype == x.dtype and y.shape == (n,)
    np.testing.assert_array_equal(bits_of(y), bits)


def test_cpu_frame_decodes_on_gpu_and_back(kv_slice):
    frame_cpu = splitzip.compress(kv_slice, dtype="bf16", chunk=1024)
    out = torch.empty(kv_slice.shape, dtype=torch.bfloat16, device="cuda")
    res = splitzip.decompress(torch.from_numpy(frame_cpu).cuda(), out=out)
    assert res is out
    np.testing.assert_array_equal(bits_of(out), kv_slice)
    assert splitzip.compress(out, chunk=1024).cpu().numpy().tobytes() == frame_cpu.tobytes()


def test_status_tensor_path_does_not_raise_and_reports(kv_slice):
    frame = splitzip.compress(to_cuda(kv_slice.reshape(-1), "bf16"))
    bad = frame.clone()
    bad[64 + 12 * 224 + 3] ^= 1  # rest section: chunk checksum mismatch
    out = torch.empty(kv_slice.size, dtype=torch.bfloat16, device="cuda")
    status = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    splitzip.decompress(bad, out=out, status=status)
    with pytest.raises(splitzip.ChecksumError):
        splitzip.check_status(status)
    with pytest.raises(splitzip.ChecksumError):
        splitzip.decompress(bad, out=out)
    splitzip.decompress(frame, out=out, status=status)
    splitzip.check_status(status)


@pytest.mark.parametrize("offset,err", [(0, splitzip.BadMagicError), (20, splitzip.ChecksumError)])
def test_gpu_corrupt_frames_raise(offset, err):
    frame = splitzip.compress(to_cuda(kv_like_bits("fp16", 9000), "fp16"))
    bad = frame.clone()
    bad[offset] ^= 0x40
    with pytest.raises(err):
        splitzip.decompress(bad, out=torch.empty(9000, dtype=torch.float16, device="cuda"))


def test_gpu_out_too_small():
    frame = splitzip.compress(to_cuda(kv_like_bits("bf16", 5000), "bf16"))
    with pytest.raises(splitzip.DstTooSmallError):
        splitzip.decompress(frame, out=torch.empty(4999, dtype=torch.bfloat16, device="cuda"))


def test_gpu_pages_round_trip(kv_slice):
    layer = torch.from_numpy(kv_slice[0].astype(np.int16)).cuda().view(torch.bfloat16)  # (2, 224, 4, 64)
    cache = layer.reshape(2, 14, 16, 4, 64).contiguous()
    other = torch.zeros_like(cache)
    src_blocks, dst_blocks = [2, 5, 11], [9, 0, 4]
    pages = [cache[kv, b] for kv in range(2) for b in src_blocks]
    frame = splitzip.compress_pages(pages)
    concat = torch.cat([p.reshape(-1) for p in pages])
    assert frame.cpu().numpy().tobytes() == splitzip.compress(concat).cpu().numpy().tobytes()
    splitzip.decompress_pages(frame, [other[kv, b] for kv in range(2) for b in dst_blocks])
    for s, d in zip(src_blocks, dst_blocks):
        assert torch.equal(other[:, d].view(torch.int16), cache[:, s].view(torch.int16))


def test_gpu_calibrate_and_codebook(kv_slice):
    x = to_cuda(kv_slice.reshape(-1), "bf16")
    cb = splitzip.calibrate(x)
    assert cb == splitzip.calibrate(kv_slice, dtype="bf16")
    frame = splitzip.compress(x, codebook=cb)
    assert splitzip.info(frame)["codebook"] == cb
    np.testing.assert_array_equal(bits_of(splitzip.decompress(frame)), kv_slice.reshape(-1))


def test_cupy_round_trip_when_installed():
    cupy = pytest.importorskip("cupy")
    bits = kv_like_bits("fp16", 10_000, seed=8)
    x = cupy.asarray(bits.view(np.float16))
    frame = splitzip.compress(x)
    assert isinstance(frame, cupy.ndarray)
    assert frame.get().tobytes() == splitzip.compress(bits, dtype="fp16").tobytes()
    np.testing.assert_array_equal(splitzip.decompress(frame).get().view(np.uint16), bits)
