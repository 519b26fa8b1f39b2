"""The max mode from Python (docs/FORMAT.md §4.10, §5.3): symbol tables calibrated on real KV, entropy-coded
version 3 frames of every dtype (bit-exact, byte-identical to the library's reference coder and to the CLI, both
ways), symbol table files shared with the CLI both ways, and the errors a caller can hit (damaged frames and tables,
another table, wrong shapes and dtypes)."""

import pickle
import struct
import subprocess

import numpy as np
import pytest

import splitzip
from conftest import ALL_DTYPES, SHARED_KV, SLICE, find_cli, kv_like_bits, ml_dtypes, needs_ml_dtypes, numpy_dtype
from format_oracle import xxhash

CLI = find_cli()
needs_cli = pytest.mark.skipif(CLI is None, reason="splitzip CLI not built (set SPLITZIP_CLI or build into build*/)")
needs_xxhash = pytest.mark.skipif(xxhash is None, reason="xxhash is not installed (pip install xxhash)")

# data/kv_code_bf16_slice.bin: [8 layers, 2, 224 tokens, 4 kv_heads, 64 head_dim] BF16 of trained-d512.
L, T, H, D = 8, 224, 4, 64
SHAPE = f"{L},2,*,{H},{D}"
FP8_FILES = {"fp8_e4m3": "kv_code_e4m3.bin", "fp8_e5m2": "kv_code_e5m2.bin"}


@pytest.fixture(scope="module")
def real_kv():
    """Real KV of trained-d512 in every dtype the max mode codes, [L, 2, T, H, D] arrays: BF16 from the shipped
    slice, FP32 its exact widening, FP16 its rounding; FP8 the shared data's own FP8 files (their first T tokens),
    else the BF16 slice rounded to FP8."""
    if ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed (numpy bf16/fp8 dtypes)")
    if not SLICE.exists():
        pytest.skip("data/kv_code_bf16_slice.bin is absent")
    bf16 = np.fromfile(SLICE, dtype=ml_dtypes.bfloat16).reshape(L, 2, T, H, D)
    out = {"bf16": bf16, "fp32": bf16.astype(np.float32), "fp16": bf16.astype(np.float32).astype(np.float16)}
    for name, file in FP8_FILES.items():
        path = SHARED_KV / "trained-d512" / file
        if path.exists():
            full = np.fromfile(path, dtype=numpy_dtype(name)).reshape(L, 2, 1536, H, D)
            out[name] = np.ascontiguousarray(full[:, :, :T])
        else:
            out[name] = bf16.astype(np.float32).astype(numpy_dtype(name))
    return out


def split_tokens(kv):
    """Calibration samples (the first 112 tokens, as two samples of different lengths) and held-out KV."""
    return [kv[:, :, :64], kv[:, :, 64:112]], np.ascontiguousarray(kv[:, :, 112:])


def bits_of(x):
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


# ---- round trips and the reference coder ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_DTYPES)
def test_real_kv_round_trips_bit_exact_in_every_dtype(real_kv, name):
    kv = real_kv[name]
    samples, held = split_tokens(kv)
    table = splitzip.calibrate_max(samples, groups=16)
    assert (table.dtype, table.tensors, table.period, table.groups) == (name, 2 * L, H * D, 16)
    assert table.symbol_bits == (5 if name == "fp16" else 8)
    assert table.group_of.shape == (2 * L, H * D) and int(table.group_of.max()) < table.groups
    assert table.freq.shape == (16, (1 << table.symbol_bits) + 1)
    assert (table.freq.sum(axis=1) == 4096).all() and (table.freq[:, -1] >= 1).all()
    assert table.expected_bits_per_value is not None and 0 < table.expected_bits_per_value < table.symbol_bits
    box = splitzip.compress_kv_max(held, table)
    c = splitzip.Container(box)
    assert c.names == ["symbol_table"] + [f"layer{i // 2}.{'kv'[i % 2]}" for i in range(2 * L)]
    assert c.item("symbol_table").kind == "table" and c.tables == [table] and c.books == []
    assert c.original() == held.tobytes()
    assert splitzip.decompress_bytes(box.tobytes()) == held.tobytes()
    np.testing.assert_array_equal(bits_of(c["layer5.v"]), bits_of(held[5, 1]))
    assert c["layer5.v"].shape == (T - 112, H, D)
    # Entropy coding of real KV beats the raw size in every dtype (the FP8 files are the least compressible).
    assert box.nbytes < held.nbytes, (name, box.nbytes, held.nbytes)
    for item in c.info()["items"][1:]:
        frame = item["frame"]
        assert frame["version"] == 3 and frame["entropy_coded"] and frame["table_id"] == table.id


@pytest.mark.parametrize("name", ALL_DTYPES)
@pytest.mark.parametrize("chunk,checksum", [(None, True), (256, False), (4096, True)])
def test_frames_are_those_of_the_reference_coder(real_kv, name, chunk, checksum):
    kv = real_kv[name]
    samples, held = split_tokens(kv)
    table = splitzip.calibrate_max(samples, groups=8)
    for tz in (0, 2 * L - 1, 7):
        x = np.ascontiguousarray(held[tz // 2, tz % 2])
        frame = splitzip.compress(x, table, book_tensor=tz, chunk=chunk, checksum=checksum)
        ref = splitzip._max.compress_entropy(x, table, tz, chunk=chunk, checksum=checksum, reference=True)
        assert frame.tobytes() == ref.tobytes(), (name, tz)
        info = splitzip.info(frame)
        assert info["version"] == 3 and info["codebook"] is None and info["checksums"] == checksum
        assert (info["table_id"], info["table_tensor"], info["period"]) == (table.id, tz, H * D)
        want = chunk or 1 << splitzip._max._ext.entropy_chunk_log2(x.size)  # (the default: 2^12 for these small tensors)
        assert info["chunk"] == want and info["coded_chunks"] + info["raw_chunks"] == info["n_chunks"]
        back = splitzip.decompress(frame, table=table)
        assert back.dtype == x.dtype and back.tobytes() == x.tobytes()
        out = np.zeros(x.size, dtype=np.uint8 if x.itemsize == 1 else f"<u{x.itemsize}")
        splitzip._max.decompress_entropy_into(frame, table, out.view(np.uint8), 1, "test", reference=True)
        assert out.tobytes() == x.tobytes()


def test_one_tensor_with_the_cli_default_chunk_a_table_file_and_out(real_kv, tmp_path):
    kv = real_kv["bf16"]
    samples, held = split_tokens(kv)
    table = splitzip.calibrate_max(samples)
    assert table.groups == 64  # the CLI's default
    x = np.ascontiguousarray(held[3, 1])
    frame = splitzip.compress(x, table, book_tensor=7, threads=2)
    # the default chunk depends on the call's size (sz_entropy_chunk_log2): 2^12 below 2^25 values, 2^16 from 2^29 on
    assert splitzip.info(frame)["chunk"] == 4096 and x.size < 1 << 25
    assert [splitzip._max._ext.entropy_chunk_log2(n) for n in (0, 1 << 25, 1 << 27, (1 << 29) - 1, 1 << 29, 1 << 40)] == [
        12, 12, 14, 15, 16, 16]
    assert splitzip.compress(x, table, book_tensor=7, chunk=4096).tobytes() == frame.tobytes()
    out = np.empty_like(x)
    assert splitzip.decompress(frame, out=out, table=table) is out and out.tobytes() == x.tobytes()
    path = tmp_path / "kv.spzt"
    table.save(path)
    again = splitzip.SymbolTable.load(path)
    assert again == table and hash(again) == hash(table) and again.id == table.id
    assert again.to_bytes() == path.read_bytes() and again.nbytes == path.stat().st_size
    assert splitzip.decompress(frame, table=str(path)).tobytes() == x.tobytes()
    assert splitzip.decompress(splitzip.compress(x, again, book_tensor=7), table=path).tobytes() == x.tobytes()
    assert pickle.loads(pickle.dumps(table)) == table
    # a version 1 frame decodes with a table given (the table is for the frames that need one)
    assert splitzip.decompress(splitzip.compress(x), table=table).tobytes() == x.tobytes()
    # compress_kv takes a table as the CLI's --codebook does; threads never change the bytes
    box = splitzip.compress_kv_max(held, table)
    assert splitzip.compress_kv(held, table).tobytes() == box.tobytes()
    assert splitzip.compress_kv_max(held, table, threads=3).tobytes() == box.tobytes()
    assert splitzip.compress_kv_max(held, table, threads=0).tobytes() == box.tobytes()


def test_the_max_mode_beats_the_channel_book_on_held_out_real_kv(real_kv):
    samples, held = split_tokens(real_kv["bf16"])
    book_box = splitzip.compress_kv(held, splitzip.calibrate_channels(samples))
    # Frames of one chunk each: the coders compared, not the 132 bytes of coder state a chunk that the default chunk
    # of such small tensors (2^12 values: about 1.6% of BF16) adds.
    max_box = splitzip.compress_kv_max(held, splitzip.calibrate_max(samples), chunk=1 << 16)
    assert max_box.nbytes < book_box.nbytes, (max_box.nbytes, book_box.nbytes)


@pytest.mark.parametrize("name,period", [("bf16", 48), ("fp16", 64), ("fp32", 32), ("fp8_e4m3", 96),
                                         ("fp8_e5m2", 128)])
def test_bit_patterns_with_escapes_round_trip(name, period):
    # Arbitrary bit patterns (NaN payloads, infinities, subnormals): symbols the samples never saw are escaped.
    bits = kv_like_bits(name, 2 * 3 * 40 * period, seed=7)  # [3 layers][2][40 tokens][period]
    table = splitzip.calibrate_max(bits[: bits.size // 2], kv_shape=(3, 1, period), dtype=name, groups=4)
    other = kv_like_bits(name, bits.size, seed=8)
    box = splitzip.compress_kv_max(other, table, kv_shape=(3, 1, period), dtype=name, chunk=256)
    assert splitzip.Container(box).original() == other.tobytes(), name
    frame = splitzip.compress(other[: 40 * period], table, book_tensor=0, dtype=name, chunk=512)
    assert splitzip.decompress(frame, table=table).view(other.dtype).tobytes() == other[: 40 * period].tobytes()


def test_empty_and_tiny_tensors():
    bits = kv_like_bits("bf16", 2 * 2 * 16 * 32, seed=3)
    table = splitzip.calibrate_max(bits, kv_shape=(2, 1, 32), dtype="bf16", groups=2)
    for n in (0, 1, 31, 33):
        frame = splitzip.compress(bits[:n], table, book_tensor=1, dtype="bf16")
        assert splitzip.decompress(frame, table=table).view(np.uint16).tobytes() == bits[:n].tobytes(), n


def test_the_library_encoder_writes_the_raw_padding_itself():
    bits = kv_like_bits("bf16", 2 * 2 * 16 * 32, seed=3)
    table = splitzip.calibrate_max(bits, kv_shape=(2, 1, 32), dtype="bf16", groups=2)
    for n in (1, 9, 100, 2047):
        ref = splitzip._max.compress_entropy(bits[:n], table, 1, chunk=1 << 16, dtype="bf16", reference=True)
        dst = np.full(splitzip.compress_bound(n, "bf16"), 0xFF, dtype=np.uint8)  # a reused, dirty buffer
        flags = splitzip._splitzip.FLAG_CHECKSUMS | splitzip._splitzip.FLAG_LANE_HASH  # the default, as ref's
        st, size = splitzip._splitzip.compress_entropy(bits[:n].view(np.uint8), n, 1, table._t, 1, 16, flags, dst)
        assert st == 0 and dst[:size].tobytes() == ref.tobytes(), n


# ---- the CLI -----------------------------------------------------------------------------------------------------

def cli(*args):
    res = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{CLI} {' '.join(map(str, args))} failed: {res.stderr}"
    return res


@needs_cli
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_the_cli_and_the_module_write_the_same_table_and_container(real_kv, tmp_path, name):
    kv = real_kv[name]
    calib, held = np.ascontiguousarray(kv[:, :, :112]), np.ascontiguousarray(kv[:, :, 112:])
    (tmp_path / "calib.bin").write_bytes(calib.tobytes())
    (tmp_path / "held.bin").write_bytes(held.tobytes())
    cli("calibrate", "-q", "--mode", "max", "--dtype", name, "--kv-shape", SHAPE, "--groups", 24,
        tmp_path / "calib.bin", "-o", tmp_path / "cli.spzt")
    table = splitzip.calibrate_max(calib, groups=24)
    assert (tmp_path / "cli.spzt").read_bytes() == table.to_bytes()
    assert splitzip.SymbolTable.load(tmp_path / "cli.spzt") == table  # the CLI's table loads in Python
    cli("compress", "-q", "--mode", "max", "--dtype", name, "--kv-shape", SHAPE, "--codebook", tmp_path / "cli.spzt",
        tmp_path / "held.bin")
    box = splitzip.compress_kv_max(held, table)
    assert (tmp_path / "held.bin.spz").read_bytes() == box.tobytes()
    splitzip.decompress_file(tmp_path / "held.bin.spz", tmp_path / "py_back.bin")  # the module reads the CLI's
    assert (tmp_path / "py_back.bin").read_bytes() == held.tobytes()
    # a table saved by Python is used by the CLI, and the CLI decodes the module's container
    table.save(tmp_path / "py.spzt")
    cli("compress", "-q", "-f", "--mode", "max", "--dtype", name, "--kv-shape", f"{L},2,{T - 112},{H},{D}",
        "--codebook", tmp_path / "py.spzt", "--chunk-log2", 10, "--no-checksum", tmp_path / "held.bin",
        "-o", tmp_path / "cli2.spz")
    assert (tmp_path / "cli2.spz").read_bytes() == \
        splitzip.compress_kv_max(held, tmp_path / "py.spzt", chunk=1024, checksum=False).tobytes()
    (tmp_path / "py.spz").write_bytes(box.tobytes())
    cli("decompress", "-q", tmp_path / "py.spz", "-o", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == held.tobytes()


# ---- damaged frames and tables -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    """A small table and a version 3 frame of several chunks (chunks of 256 values, checksums on)."""
    bits = kv_like_bits("bf16", 2 * 2 * 64 * 32, seed=11)  # [2 layers][2][64 tokens][32 channels]
    table = splitzip.calibrate_max(bits, kv_shape=(2, 1, 32), dtype="bf16", groups=4)
    x = bits[: 64 * 32]
    frame = splitzip.compress(x, table, book_tensor=0, dtype="bf16", chunk=256)
    return table, x, frame


def test_every_damaged_byte_of_a_frame_is_rejected(small):
    table, x, frame = small
    info = splitzip.info(frame)
    assert info["coded_chunks"] >= 4, info  # the damage hits coded chunks, not only raw ones
    for pos in range(frame.nbytes):
        bad = frame.copy()
        bad[pos] ^= 0x5A
        for reference in (False, True):
            with pytest.raises(splitzip.Error):
                out = np.empty(x.nbytes, dtype=np.uint8)
                splitzip._max.decompress_entropy_into(bad, table, out, 1, "test", reference=reference)
        with pytest.raises(splitzip.Error):
            splitzip.decompress(bad, table=table)


def test_damage_without_checksums_never_crashes(small):
    table, x, _ = small
    frame = splitzip.compress(x, table, book_tensor=0, dtype="bf16", chunk=256, checksum=False)
    rng = np.random.default_rng(1)
    rejected = 0
    for pos in rng.choice(np.arange(64, frame.nbytes), size=300, replace=False):
        bad = frame.copy()
        bad[pos] ^= 1 << int(rng.integers(8))
        try:
            splitzip.decompress(bad, table=table)
        except splitzip.Error:
            rejected += 1
    assert rejected > 0


def test_truncated_frames_are_rejected(small):
    table, _, frame = small
    for size in list(range(0, 80)) + list(range(80, frame.nbytes, 97)) + [frame.nbytes - 1]:
        with pytest.raises(splitzip.Error) as e:
            splitzip.decompress(frame[:size], table=table)
        if size >= 64:
            assert isinstance(e.value, splitzip.SrcTruncatedError), size


def test_damaged_table_files_are_rejected(small, tmp_path):
    table, _, _ = small
    data = table.to_bytes()
    with pytest.raises(splitzip.ChecksumError):
        splitzip.SymbolTable(data[:-1] + bytes([data[-1] ^ 1]))
    for pos in (5, 8, 30, len(data) // 2, len(data) - 10):
        bad = bytearray(data)
        bad[pos] ^= 0x10
        with pytest.raises(splitzip.Error):
            splitzip.SymbolTable(bytes(bad))
    for size in (0, 10, 27, 28, 100, len(data) - 1):
        with pytest.raises(splitzip.SrcTruncatedError):
            splitzip.SymbolTable(data[:size])
    with pytest.raises(splitzip.CorruptError, match="bytes"):
        splitzip.SymbolTable(data + b"\0")
    with pytest.raises(splitzip.Error, match="this is a channel book file"):
        splitzip.SymbolTable(splitzip.calibrate_channels(np.zeros((1, 2, 4, 1, 8), np.float16)).to_bytes())
    with pytest.raises(splitzip.UnsupportedVersionError):
        splitzip.SymbolTable(data[:4] + b"\x02" + data[5:])
    path = tmp_path / "bad.spzt"
    path.write_bytes(data[:-3])
    with pytest.raises(splitzip.SrcTruncatedError, match="bad.spzt"):
        splitzip.SymbolTable.load(path)
    with pytest.raises(FileNotFoundError):
        splitzip.SymbolTable.load(tmp_path / "missing.spzt")
    with pytest.raises(TypeError):
        splitzip.SymbolTable("kv.spzt")  # a path goes to SymbolTable.load


@needs_xxhash
def test_a_table_with_a_valid_checksum_but_bad_contents_is_rejected(small):
    table, _, _ = small
    data = bytearray(table.to_bytes())
    body = bytes(data[:-4])
    assert table.id == xxhash.xxh3_64_intdigest(body)  # the id of docs/FORMAT.md §5.3
    assert struct.unpack_from("<I", data, len(data) - 4)[0] == table.id & 0xFFFFFFFF

    def resealed(edit):
        d = bytearray(data)
        edit(d)
        d[-4:] = struct.pack("<I", xxhash.xxh3_64_intdigest(bytes(d[:-4])) & 0xFFFFFFFF)
        return bytes(d)

    freq0 = 24 + 2 * table.tensors * table.period  # F_0[0]
    def off_sum(d): struct.pack_into("<H", d, freq0, struct.unpack_from("<H", d, freq0)[0] + 1)
    def bad_group(d): struct.pack_into("<H", d, 24, table.groups)
    def reserved(d): d[20] = 1
    def prob_bits(d): d[7] = 11
    for edit in (off_sum, bad_group, reserved, prob_bits):
        with pytest.raises(splitzip.CorruptError):
            splitzip.SymbolTable(resealed(edit))
    with pytest.raises(splitzip.UnsupportedDtypeError):
        splitzip.SymbolTable(resealed(lambda d: d.__setitem__(5, 9)))


def test_another_table_or_none_is_refused(small):
    table, x, frame = small
    bits = kv_like_bits("bf16", 2 * 2 * 64 * 32, seed=12)
    other = splitzip.calibrate_max(bits, kv_shape=(2, 1, 32), dtype="bf16", groups=4)
    assert other.id != table.id
    with pytest.raises(splitzip.BookMismatchError, match=f"{table.id:016x}.*{other.id:016x}"):
        splitzip.decompress(frame, table=other)
    with pytest.raises(splitzip.BookMismatchError, match="symbol table"):
        splitzip.decompress(frame)
    with pytest.raises(splitzip.BookMismatchError):
        splitzip.decompress_bytes(frame.tobytes())
    ref = np.empty(x.nbytes, dtype=np.uint8)
    st, _ = splitzip._splitzip.decompress_entropy(frame, other._t, ref, 1, True)  # the oracle agrees
    assert st == splitzip.BookMismatchError.status
    # a container whose frames lack their table
    good = splitzip.Container(splitzip.compress_kv_max(bits, table, kv_shape=(2, 1, 32), dtype="bf16"))
    from splitzip._container import _assemble
    parts = [((1, 1, it.shape, it.name.encode(), it.original_offset, it.original_size), good.data(it.name))
             for it in good.items if it.kind == "frame"]
    orphan = splitzip.Container(_assemble(parts))
    with pytest.raises(splitzip.BookMismatchError, match="not in the container"):
        orphan.original()
    with pytest.raises(splitzip.BookMismatchError):
        orphan["layer0.k"]
    # a table for another dtype or shape
    with pytest.raises(splitzip.BadCodebookError, match="bf16"):
        splitzip.compress(x.view(np.float16), table, book_tensor=0)
    fp16 = splitzip.calibrate_max(bits.view(np.float16), kv_shape=(2, 1, 32), groups=2)
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.compress_kv_max(bits, fp16, kv_shape=(2, 1, 32), dtype="bf16")
    with pytest.raises(ValueError, match="channels"):
        splitzip.compress_kv_max(bits, table, kv_shape=(1, 2, 32), dtype="bf16")


# ---- bad arguments -----------------------------------------------------------------------------------------------

def test_bad_arguments_raise_clear_errors(small):
    table, x, frame = small
    bits = kv_like_bits("bf16", 2 * 2 * 16 * 64, seed=1)
    cases = [
        (ValueError, "kv_shape", lambda: splitzip.calibrate_max(bits, dtype="bf16")),  # 1-D samples need kv_shape
        (ValueError, "K and V", lambda: splitzip.calibrate_max(bits, kv_shape=(2, 3, 16, 2, 32), dtype="bf16")),
        (ValueError, "whole tokens", lambda: splitzip.calibrate_max(bits[:100], kv_shape=(2, 2, 32), dtype="bf16")),
        (ValueError, "groups", lambda: splitzip.calibrate_max(bits, kv_shape=(2, 2, 32), dtype="bf16", groups=0)),
        (ValueError, "groups", lambda: splitzip.calibrate_max(bits, kv_shape=(2, 2, 32), dtype="bf16",
                                                              groups=5000)),
        (TypeError, "groups", lambda: splitzip.calibrate_max(bits, kv_shape=(2, 2, 32), dtype="bf16", groups=2.5)),
        (ValueError, "no samples", lambda: splitzip.calibrate_max([])),
        (TypeError, "element type", lambda: splitzip.calibrate_max(bits.astype(np.int32).reshape(2, 2, 16, 2, 32))),
        (ValueError, "at most", lambda: splitzip.calibrate_max(np.zeros(2 * 40000 * 2, np.uint8),
                                                               kv_shape=(40000, 1, 2), dtype="fp8_e4m3")),
        (ValueError, "kv\\[1\\]", lambda: splitzip.calibrate_max([bits.view(np.float16), bits.view(np.float32)],
                                                                 kv_shape=(2, 2, 32))),
        (ValueError, "book_tensor", lambda: splitzip.compress(x, table, dtype="bf16")),
        (ValueError, "book_tensor", lambda: splitzip.compress(x, table, book_tensor=4, dtype="bf16")),
        (TypeError, "book_tensor", lambda: splitzip.compress(x, table, book_tensor="1", dtype="bf16")),
        (ValueError, "keep_shape", lambda: splitzip.compress(x, table, book_tensor=0, dtype="bf16",
                                                             keep_shape=True)),
        (ValueError, "chunk", lambda: splitzip.compress(x, table, book_tensor=0, dtype="bf16", chunk=1000)),
        (splitzip.InvalidArgumentError, "INVALID_ARGUMENT",
         lambda: splitzip.compress(x, table, book_tensor=0, dtype="bf16", chunk=1 << 17)),
        (ValueError, "checksum", lambda: splitzip.compress(x, table, book_tensor=0, dtype="bf16", checksum="no")),
        (TypeError, "SymbolTable", lambda: splitzip.decompress(frame, table=42)),
        (TypeError, "table=", lambda: splitzip.decompress(frame, book=table, table=table)),
        (TypeError, "SymbolTable", lambda: splitzip.compress_kv_max(bits, object(), kv_shape=(2, 2, 32))),
        (ValueError, "shape", lambda: splitzip.compress_kv_max(bits.view(ml_dtypes.bfloat16).reshape(2, 2, 16, 64)
                                                               if ml_dtypes else bits.reshape(2, 2, 16, 64), table)),
        (TypeError, "bytes", lambda: splitzip.SymbolTable(42)),
        (FileNotFoundError, "kv.spzt", lambda: splitzip.decompress(frame, table="/nonexistent/kv.spzt")),
    ]
    for exc, match, call in cases:
        with pytest.raises(exc, match=match) as e:
            call()
        assert "incompatible function arguments" not in str(e.value), str(e.value)


def cuda_torch():
    """torch with a CUDA device and a CUDA build of the extension, else the test is skipped."""
    torch = pytest.importorskip("torch")
    if not (torch.cuda.is_available() and splitzip.cuda_available()):
        pytest.skip("needs a CUDA GPU and an extension built with SPLITZIP_ENABLE_CUDA=ON")
    return torch


def on_gpu(torch, x):
    """The bytes of host array x as a CUDA uint8 tensor (pass dtype= with it)."""
    return torch.from_numpy(bits_of(x).copy()).cuda()


def test_device_tensors_encode_and_decode_on_the_gpu(small):
    torch = cuda_torch()
    table, x, frame = small
    gframe = splitzip.compress(torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16), table, book_tensor=0,
                               chunk=256)
    assert gframe.is_cuda and gframe.dtype == torch.uint8
    assert np.array_equal(gframe.cpu().numpy(), frame)  # the GPU encoder writes the CPU coder's bytes
    want = splitzip.decompress(frame, table=table)
    got = splitzip.decompress(gframe, table=table)  # the GPU decoder
    assert got.is_cuda and np.array_equal(got.cpu().view(torch.int16).numpy(), np.asarray(want).view(np.int16))
    out = torch.empty(x.size, dtype=torch.bfloat16, device="cuda")
    st = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    splitzip.decompress(gframe, out=out, status=st, table=table)  # enqueued, no wait
    splitzip.check_status(st)
    assert torch.equal(out.view(torch.int16), got.view(torch.int16))
    bad = frame.copy()
    bad[bad.nbytes // 2] ^= 0x5A  # every damaged byte is rejected (test_every_damaged_byte_of_a_frame_is_rejected)
    with pytest.raises(splitzip.Error):
        splitzip.decompress(bad, table=table)
    with pytest.raises(splitzip.Error):
        splitzip.decompress(torch.from_numpy(bad).cuda(), table=table)
    with pytest.raises(ValueError, match="reference"):
        splitzip._max.compress_entropy(on_gpu(torch, x), table, 0, dtype="bf16", reference=True)
    with pytest.raises(splitzip.Error, match="symbol table is for bf16"):
        splitzip.compress(torch.zeros(64, dtype=torch.float16, device="cuda"), table, book_tensor=0)


@needs_ml_dtypes
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_gpu_frames_are_those_of_the_cpu_coder_in_every_dtype(real_kv, name):
    torch = cuda_torch()
    samples, held = split_tokens(real_kv[name])
    table = splitzip.calibrate_max(samples, groups=16)
    g = on_gpu(torch, held)
    # A whole KV cache: its frames coded on the GPU, the container on the host, byte for byte the CPU's.
    box = splitzip.compress_kv_max(g, table, kv_shape=(L, H, D), dtype=name)
    assert isinstance(box, np.ndarray) and np.array_equal(box, splitzip.compress_kv_max(held, table))
    n = (T - 112) * H * D
    size = np.dtype(numpy_dtype(name)).itemsize
    for chunk, checksum in [(None, True), (256, False), (4096, "h32"), (1 << 12, "lh32")]:
        for tz in (0, 2 * L - 1):
            part = g[tz * n * size:(tz + 1) * n * size]
            gframe = splitzip.compress(part, table, book_tensor=tz, dtype=name, chunk=chunk, checksum=checksum)
            want = splitzip.compress(np.ascontiguousarray(held[tz // 2, tz % 2]), table, book_tensor=tz, chunk=chunk,
                                     checksum=checksum)
            assert np.array_equal(gframe.cpu().numpy(), want), (name, chunk, checksum, tz)
            back = splitzip.decompress(gframe, table=table)
            assert back.is_cuda and torch.equal(back.view(torch.uint8).reshape(-1), part), (name, chunk, tz)


@pytest.mark.parametrize("name,period", [("bf16", 48), ("fp16", 64), ("fp32", 32), ("fp8_e4m3", 96),
                                         ("fp8_e5m2", 128)])
def test_gpu_encoder_escapes_odd_sizes_and_empty_frames(name, period):
    torch = cuda_torch()
    bits = kv_like_bits(name, 2 * 3 * 40 * period, seed=7)  # arbitrary bit patterns: escapes of every kind
    table = splitzip.calibrate_max(bits[: bits.size // 2], kv_shape=(3, 1, period), dtype=name, groups=4)
    other = kv_like_bits(name, bits.size, seed=8)
    g = on_gpu(torch, other)
    size = other.itemsize
    for n in (0, 1, 31, 33, 40 * period - 1, 40 * period):
        for chunk in (256, 512):
            want = splitzip.compress(other[:n], table, book_tensor=1, dtype=name, chunk=chunk)
            gframe = splitzip.compress(g[:n * size], table, book_tensor=1, dtype=name, chunk=chunk)
            assert gframe.is_cuda and np.array_equal(gframe.cpu().numpy(), want), (name, n, chunk)
    box = splitzip.compress_kv_max(g, table, kv_shape=(3, 1, period), dtype=name, chunk=256)
    assert np.array_equal(box, splitzip.compress_kv_max(other, table, kv_shape=(3, 1, period), dtype=name, chunk=256))


def test_gpu_encoder_with_cupy(small):
    cuda_torch()
    cupy = pytest.importorskip("cupy")
    table, x, frame = small
    gframe = splitzip.compress(cupy.asarray(x.view(np.uint8)), table, book_tensor=0, dtype="bf16", chunk=256)
    assert isinstance(gframe, cupy.ndarray) and np.array_equal(cupy.asnumpy(gframe), frame)
    back = splitzip.decompress(gframe, table=table)
    assert np.array_equal(cupy.asnumpy(back).view(np.uint16), x)


@needs_ml_dtypes
def test_calibration_copies_strided_samples_and_accepts_kv_shape(real_kv):
    kv = real_kv["bf16"]
    strided = kv[:, :, ::2]  # a view of every second token
    a = splitzip.calibrate_max(strided, groups=8)
    b = splitzip.calibrate_max(np.ascontiguousarray(strided).reshape(-1).view(np.uint16), kv_shape=(L, H, D),
                               dtype="bf16", groups=8)
    c = splitzip.calibrate_max(np.ascontiguousarray(strided).tobytes(), kv_shape=(L, 2, 112, H, D), dtype="bf16",
                               groups=8)
    assert a == b == c


# ---- paired rows (docs/FORMAT.md §4.10.6, §5.4) --------------------------------------------------------------------

def _paired_fp8(dtype_name, tokens, period=32, same=0.7, seed=0):
    """FP8 rows of `tokens` (one row per token) that repeat each value of their token's previous row with
    probability `same`; no byte 0x7F (the pair symbol) but what a repeat copies."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0x30, 0x60, size=(len(tokens), period)).astype(np.uint8)
    last = {}
    for r, tk in enumerate(tokens):
        if tk in last:
            m = rng.random(period) < same
            v[r, m] = v[last[tk], m]
        last[tk] = r
    return v.view(numpy_dtype(dtype_name))


@needs_ml_dtypes
@pytest.mark.parametrize("dt", ["fp8_e4m3", "fp8_e5m2"])
def test_paired_rows_round_trip_smaller_and_match_the_reference(dt):
    tokens = np.random.default_rng(1).integers(0, 40, size=800)
    rows = splitzip.RowMap.from_tokens(tokens)
    assert rows.rows == 800
    want = np.full(800, -1)
    seen = {}
    for r, tk in enumerate(tokens.tolist()):
        want[r] = seen.get(tk, -1)
        seen[tk] = r
    assert np.array_equal(rows.pairs, want)
    v = _paired_fp8(dt, tokens.tolist())
    kv = np.stack([v, v]).reshape(1, 2, 800, 1, 32)
    paired = splitzip.calibrate_max(kv, row_maps=rows, groups=4)
    plain = splitzip.calibrate_max(kv, groups=4)
    f = splitzip.compress(v, paired, book_tensor=0, row_map=rows)
    assert bytes(f) == bytes(splitzip._max.compress_entropy(v, paired, 0, reference=True, row_map=rows))
    assert splitzip.info(f)["flags"] & 16  # SZ_FLAG_PAIRED
    assert splitzip.info(f)["row_map_id"] == rows.id
    assert splitzip.info(splitzip.compress(v, plain, book_tensor=0))["row_map_id"] is None
    assert len(f) * 1.3 < len(splitzip.compress(v, plain, book_tensor=0))
    back = splitzip.decompress(f, table=paired, row_map=rows)
    assert bytes(back.view(np.uint8)) == bytes(v.view(np.uint8))
    # The map's file round-trips; a map built from the rows that identify the tokens is the same map.
    assert splitzip.RowMap(rows.to_bytes()) == rows
    assert pickle.loads(pickle.dumps(rows)) == rows
    ident = np.repeat(tokens.astype(np.uint8)[:, None], 16, axis=1)  # rows that are a function of the token
    assert splitzip.RowMap.from_rows(ident) == rows


@needs_ml_dtypes
def test_paired_rows_errors():
    tokens = [1, 2, 1, 1, 2] * 40
    rows = splitzip.RowMap.from_tokens(tokens)
    v = _paired_fp8("fp8_e5m2", tokens)
    table = splitzip.calibrate_max(np.stack([v, v]).reshape(1, 2, 200, 1, 32), row_maps=rows, groups=2)
    f = splitzip.compress(v, table, book_tensor=0, row_map=rows)
    with pytest.raises(splitzip.BookMismatchError, match="none was given"):
        splitzip.decompress(f, table=table)
    other = splitzip.RowMap.from_tokens([1, 2, 1, 2, 2] * 40)
    with pytest.raises(splitzip.BookMismatchError, match="the map given is"):
        splitzip.decompress(f, table=table, row_map=other)
    with pytest.raises(ValueError, match="199 rows"):
        splitzip.compress(v, table, book_tensor=0, row_map=splitzip.RowMap.from_tokens(tokens[:-1]))
    with pytest.raises(ValueError, match="needs a SymbolTable"):
        splitzip.compress(v, None, row_map=rows)
    with pytest.raises(TypeError, match="RowMap"):
        splitzip.compress(v, table, book_tensor=0, row_map=b"x")
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
        splitzip.RowMap.from_tokens([-1, 2])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        splitzip.RowMap.from_tokens([])
    damaged = bytearray(rows.to_bytes())
    damaged[20] ^= 1
    with pytest.raises(splitzip.ChecksumError):
        splitzip.RowMap(bytes(damaged))
    with pytest.raises(splitzip.BadMagicError, match="symbol table"):
        splitzip.RowMap(table.to_bytes())
    bf = np.zeros((200, 32), dtype=np.float16)
    t16 = splitzip.calibrate_max(np.stack([bf, bf]).reshape(1, 2, 200, 1, 32), groups=1)
    with pytest.raises(ValueError, match="FP8"):
        splitzip.compress(bf, t16, book_tensor=0, row_map=rows)


@needs_ml_dtypes
def test_paired_kv_container_is_the_clis_and_restores_the_file(tmp_path):
    """compress_kv_max with a row map writes the table, the map (kind 5) and paired frames; Container decodes them
    with the map it holds; the CLI (when built) writes the same bytes with --row-map and restores them."""
    tokens = np.random.default_rng(4).integers(0, 17, size=160)
    rows = splitzip.RowMap.from_tokens(tokens)
    v = np.stack([_paired_fp8("fp8_e4m3", tokens.tolist(), seed=s) for s in range(4)])  # 4 tensors: L = 2
    kv = np.ascontiguousarray(v.reshape(2, 2, 160, 2, 16))
    table = splitzip.calibrate_max(kv, row_maps=rows, groups=4)
    box = splitzip.compress_kv_max(kv, table, row_map=rows)
    c = splitzip.Container(box)
    assert [it.kind for it in c.items] == ["table", "rowmap"] + ["frame"] * 4
    assert c.read("row_map") == rows
    assert c.original() == kv.tobytes()
    assert bytes(c.read("layer1.k").reshape(-1).view(np.uint8)) == bytes(kv[1, 0].reshape(-1).view(np.uint8))
    with pytest.raises(ValueError, match="159 tokens|rows"):
        splitzip.compress_kv_max(kv, table, row_map=splitzip.RowMap.from_tokens(tokens[:-1]))
    if CLI is None:
        return
    (tmp_path / "kv.bin").write_bytes(kv.tobytes())
    table.save(tmp_path / "t.spzt")
    rows.save(tmp_path / "rows.spzr")
    subprocess.run([CLI, "compress", "-q", "--mode", "max", "--dtype", "fp8_e4m3", "--kv-shape", "2,2,*,2,16",
                    "--codebook", str(tmp_path / "t.spzt"), "--row-map", str(tmp_path / "rows.spzr"),
                    str(tmp_path / "kv.bin"), "-o", str(tmp_path / "kv.spz")], check=True)
    assert (tmp_path / "kv.spz").read_bytes() == bytes(box)
