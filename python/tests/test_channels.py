"""Channel books from Python (docs/FORMAT.md §4.9, §5.2): calibration on real KV, version 2 frames both ways, the
container of a KV cache (byte-identical to the CLI's, read back by the CLI), and the errors a caller can hit."""

import subprocess

import numpy as np
import pytest

import splitzip
from conftest import SLICE, find_cli, kv_like_bits, needs_ml_dtypes

CLI = find_cli()
needs_cli = pytest.mark.skipif(CLI is None, reason="splitzip CLI not built (set SPLITZIP_CLI or build into build*/)")

# data/kv_code_bf16_slice.bin: [8 layers, 2, 224 tokens, 4 kv_heads, 64 head_dim] BF16 of trained-d512.
L, T, H, D = 8, 224, 4, 64


@pytest.fixture(scope="module")
def kv():
    if not SLICE.exists():
        pytest.skip("data/kv_code_bf16_slice.bin is absent")
    import ml_dtypes
    return np.fromfile(SLICE, dtype=ml_dtypes.bfloat16).reshape(L, 2, T, H, D)


@needs_ml_dtypes
def test_calibrated_on_other_tokens_beats_the_global_codebook(kv):
    book = splitzip.calibrate_channels([kv[:, :, :64], kv[:, :, 64:112]])  # samples of different lengths
    assert (book.dtype, book.tensors, book.period) == ("bf16", 2 * L, H * D)
    assert 1 <= book.code_bits <= 4 and book.bases.shape == (2 * L, H * D) and not book.bases.flags.writeable
    held = np.ascontiguousarray(kv[:, :, 112:])
    box = splitzip.compress_kv(held, book)
    global_frame = splitzip.compress(held)
    assert box.nbytes < global_frame.nbytes, (box.nbytes, global_frame.nbytes)
    c = splitzip.Container(box)
    assert c.names[0] == "channel_book" and c.names[1:3] == ["layer0.k", "layer0.v"] and len(c) == 1 + 2 * L
    assert c.item("channel_book").kind == "book" and c.books == [book]
    assert c.original() == held.tobytes()
    np.testing.assert_array_equal(c["layer5.v"].view(np.uint16), held[5, 1].view(np.uint16))
    assert splitzip.decompress_bytes(box.tobytes()) == held.tobytes()
    info = splitzip.info(box)
    assert info["items"][0]["book"] == book and info["items"][1]["frame"]["book_id"] == book.id


@needs_ml_dtypes
def test_one_tensor_frames_both_encoders_and_the_book_file(kv, tmp_path):
    book = splitzip.calibrate_channels(kv, code_bits=2)
    assert book.code_bits == 2
    x = np.ascontiguousarray(kv[3, 1])
    frame = splitzip.compress(x, book, book_tensor=7, chunk=1024, threads=2)
    ref = splitzip._channels.compress_channels(x, book, 7, chunk=1024, reference=True)
    assert frame.tobytes() == ref.tobytes()
    info = splitzip.info(frame)
    assert info["version"] == 2 and info["codebook"] is None and info["code_bits"] == 2
    assert (info["book_id"], info["book_tensor"], info["period"]) == (book.id, 7, H * D)
    np.testing.assert_array_equal(splitzip.decompress(frame, book=book).view(np.uint16), x.reshape(-1).view(np.uint16))
    path = tmp_path / "kv.book"
    book.save(path)
    again = splitzip.ChannelBook.load(path)
    assert again == book and again.id == book.id and hash(again) == hash(book)
    np.testing.assert_array_equal(splitzip.decompress(frame, book=str(path)).view(np.uint16),
                                  x.reshape(-1).view(np.uint16))


def test_channel_values_of_every_dtype_round_trip():
    for name, period in (("bf16", 48), ("fp16", 64), ("fp32", 32), ("fp8_e4m3", 96), ("fp8_e5m2", 128)):
        bits = kv_like_bits(name, 2 * 3 * 40 * period, seed=5)  # [3 layers][2][40 tokens][period]
        book = splitzip.calibrate_channels(bits, kv_shape=(3, 1, period), dtype=name)
        box = splitzip.compress_kv(bits, book, kv_shape=(3, 1, period), dtype=name)
        assert splitzip.Container(box).original() == bits.tobytes(), name


def test_errors():
    bits = kv_like_bits("bf16", 2 * 2 * 16 * 64, seed=1)
    book = splitzip.calibrate_channels(bits, kv_shape=(2, 2, 32), dtype="bf16")
    frame = splitzip.compress(bits[: 16 * 64], book, book_tensor=0, dtype="bf16")
    with pytest.raises(splitzip.BookMismatchError):
        splitzip.decompress(frame)
    other = splitzip.calibrate_channels(bits, kv_shape=(2, 2, 32), dtype="bf16", code_bits=1)
    with pytest.raises(splitzip.BookMismatchError):
        splitzip.decompress(frame, book=other)
    with pytest.raises(ValueError, match="book_tensor"):
        splitzip.compress(bits, book, dtype="bf16")
    with pytest.raises(ValueError, match="book_tensor"):
        splitzip.compress(bits, book_tensor=1, dtype="bf16")
    with pytest.raises(ValueError):
        splitzip.compress(bits, book, book_tensor=4, dtype="bf16")  # the book has 4 tensors: 0..3
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.compress(bits, book, book_tensor=0, dtype="fp16")
    with pytest.raises(ValueError, match="whole tokens"):
        splitzip.calibrate_channels(bits[:100], kv_shape=(2, 2, 32), dtype="bf16")
    with pytest.raises(ValueError, match="channels"):
        splitzip.compress_kv(bits, book, kv_shape=(1, 4, 32), dtype="bf16")
    with pytest.raises(ValueError, match="kv_shape"):
        splitzip.calibrate_channels(bits, dtype="bf16")  # 1-D samples need kv_shape
    with pytest.raises(ValueError, match="K and V"):
        splitzip.calibrate_channels(bits, kv_shape=(2, 3, 16, 2, 32), dtype="bf16")
    with pytest.raises(TypeError):
        splitzip.decompress(frame, book=42)
    data = bytearray(book.to_bytes())
    data[-1] ^= 1
    with pytest.raises(splitzip.ChecksumError):
        splitzip.ChannelBook.from_bytes(bytes(data))
    with pytest.raises(splitzip.Error):
        splitzip.ChannelBook.from_bytes(book.to_bytes() + b"x")
    with pytest.raises(ValueError):
        splitzip.ChannelBook("bf16", 3, np.zeros(5, dtype=np.uint8))  # bases must be (tensors, period)
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.ChannelBook("fp8_e4m3", 3, np.full((2, 4), 200, dtype=np.uint8))  # bases >= 2^E


@needs_cli
@needs_ml_dtypes
def test_the_cli_and_the_module_write_the_same_container(kv, tmp_path):
    samples = tmp_path / "calib.bin"
    samples.write_bytes(np.ascontiguousarray(kv[:, :, :112]).tobytes())
    held = np.ascontiguousarray(kv[:, :, 112:])
    (tmp_path / "held.bin").write_bytes(held.tobytes())
    subprocess.run([CLI, "calibrate", "-q", "--dtype", "bf16", "--kv-shape", f"{L},2,*,{H},{D}", str(samples),
                    "-o", str(tmp_path / "cli.book")], check=True)
    book = splitzip.calibrate_channels(kv[:, :, :112])
    assert (tmp_path / "cli.book").read_bytes() == book.to_bytes()
    subprocess.run([CLI, "compress", "-q", "--dtype", "bf16", "--kv-shape", f"{L},2,112,{H},{D}", "--codebook",
                    str(tmp_path / "cli.book"), str(tmp_path / "held.bin")], check=True)
    assert (tmp_path / "held.bin.spz").read_bytes() == splitzip.compress_kv(held, book).tobytes()
    (tmp_path / "py.spz").write_bytes(splitzip.compress_kv(held, book).tobytes())
    subprocess.run([CLI, "decompress", "-q", str(tmp_path / "py.spz"), "-o", str(tmp_path / "back.bin")], check=True)
    assert (tmp_path / "back.bin").read_bytes() == held.tobytes()
