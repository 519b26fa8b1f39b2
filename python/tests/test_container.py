"""Containers from Python: items by name with their shapes, and the CLI's .npy.spz / .safetensors.spz files both
ways (the module reads what the CLI writes, writes the same bytes for the same file, and the CLI restores what the
module wrote). The CLI tests skip when the tool is not built (set SPLITZIP_CLI or build cli/ into build*/)."""

import io
import json
import struct
import subprocess

import numpy as np
import pytest

import splitzip
from conftest import SLICE, find_cli, kv_like_bits, needs_ml_dtypes, numpy_dtype

CLI = find_cli()
needs_cli = pytest.mark.skipif(CLI is None, reason="splitzip CLI not built (set SPLITZIP_CLI or build into build*/)")


def run(*args):
    res = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{CLI} {' '.join(map(str, args))} failed: {res.stderr}"
    return res.stdout


def safetensors_bytes(tensors, metadata=None, gap_after=None):
    """tensors: (name, safetensors dtype, shape, raw bytes); gap_after: a tensor followed by 8 unreferenced bytes."""
    header = {} if metadata is None else {"__metadata__": metadata}
    body = bytearray()
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(body), len(body) + len(data)]}
        body += data
        if name == gap_after:
            body += b"\xEE" * 8
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(body)


def st_tensors():
    return [
        ("model.layers.0.k", "BF16", (2, 4, 64), kv_like_bits("bf16", 512, seed=21).tobytes()),
        ("model.layers.0.v", "BF16", (2, 4, 64), kv_like_bits("bf16", 512, seed=22).tobytes()),
        ("half", "F16", (300,), kv_like_bits("fp16", 300, seed=23).tobytes()),
        ("single", "F32", (10, 10), kv_like_bits("fp32", 100, seed=24).tobytes()),
        ("e4m3", "F8_E4M3", (50, 100), kv_like_bits("fp8_e4m3", 5000, seed=25).tobytes()),
        ("e5m2", "F8_E5M2", (17,), kv_like_bits("fp8_e5m2", 17, seed=26).tobytes()),
        ("ids", "I64", (3,), struct.pack("<3q", 1, -2, 3)),
        ("empty", "BF16", (0, 64), b""),
        ("deep", "F16", (1,) * 8 + (2,), kv_like_bits("fp16", 2, seed=27).tobytes()),
        ("naïve ünïcode", "F16", (4,), kv_like_bits("fp16", 4, seed=28).tobytes()),
    ]


# ---- the Python API on its own ------------------------------------------------------------------------------------

@needs_ml_dtypes
def test_items_by_name_with_their_shapes_and_dtypes():
    k = kv_like_bits("bf16", 2 * 3 * 100, seed=1).view(numpy_dtype("bf16")).reshape(2, 3, 100)
    v = kv_like_bits("fp8_e4m3", 333, seed=2).view(numpy_dtype("fp8_e4m3"))
    bits = kv_like_bits("fp16", 40, seed=3).reshape(5, 8)
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    box = splitzip.compress_container({"meta": b"hello", "k": k, "v": v, "bits": (bits, "fp16"), "ids": ids})
    c = splitzip.Container(box)
    assert c.names == ["meta", "k", "v", "bits", "ids"] and len(c) == 5 and "k" in c and "x" not in c
    assert c["k"].shape == (2, 3, 100) and c["k"].dtype == k.dtype and c["k"].tobytes() == k.tobytes()
    assert c["v"].shape == (333,) and c["v"].tobytes() == v.tobytes()
    assert c["bits"].dtype == np.float16 and (c["bits"].view(np.uint16) == bits).all()
    assert c["meta"].tobytes() == b"hello" and c["ids"].tobytes() == ids.tobytes()
    it = c.item("k")
    assert (it.kind, it.dtype, it.shape) == ("frame", "bf16", (2, 3, 100))
    assert c.item("ids").kind == "stored" and c.item("ids").shape == (2, 3)
    assert c.original() == b"hello" + k.tobytes() + v.tobytes() + bits.tobytes() + ids.tobytes()
    with pytest.raises(splitzip.NotFoundError):
        c["nope"]
    with pytest.raises(KeyError):
        c.item("nope")
    out = np.empty((3, 2, 100), k.dtype)
    assert c.read("k", out=out) is out and out.tobytes() == k.tobytes()


def test_container_from_a_path_and_pairs(tmp_path):
    x = np.linspace(-1, 1, 1000, dtype=np.float32).reshape(10, 100)
    box = splitzip.compress_container([("b", x), ("a", b"tail")], chunk=256, checksum=False)
    p = tmp_path / "x.spz"
    p.write_bytes(box.tobytes())
    c = splitzip.Container(p)
    assert c.names == ["b", "a"] and (c["b"] == x).all()
    frame = splitzip.info(c.data("b"))
    assert frame["chunk"] == 256 and not frame["checksums"]


def test_writer_refuses_what_a_reader_would():
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="used twice"):
        splitzip.compress_container([("a", x), ("a", x)])
    with pytest.raises(ValueError, match="NUL"):
        splitzip.compress_container({"a\0b": x})
    with pytest.raises(ValueError, match="4096"):
        splitzip.compress_container({"n" * 4097: x})
    with pytest.raises(TypeError):
        splitzip.compress_container({1: x})
    with pytest.raises(TypeError):
        splitzip.compress_container(x)
    with pytest.raises(splitzip.BadCodebookError, match="no item holds"):
        splitzip.compress_container({"a": x}, codebook=splitzip.Codebook.default("bf16"))


def test_corrupt_containers_raise_the_library_error():
    box = splitzip.compress_container({"a": np.ones(100, np.float16), "b": b"xyz"})
    bad = box.copy()
    bad[-40] ^= 1  # inside the index: its checksum no longer matches
    with pytest.raises(splitzip.ChecksumError):
        splitzip.Container(bad)
    with pytest.raises(splitzip.Error):
        splitzip.Container(box[:-1])
    with pytest.raises(ValueError, match="2 items"):
        splitzip.decompress(box)


def test_thirty_thousand_items_read_by_name_quickly():
    import time
    items = {f"t{(i * 7919) % 30000:05d}": np.full(1, i, np.float16) for i in range(30000)}
    box = splitzip.compress_container(items)
    t0 = time.monotonic()
    c = splitzip.Container(box)
    assert c["t07919"][0] == 1 and len(c) == 30000
    assert time.monotonic() - t0 < 5.0


# ---- .npy and .safetensors files, with and without the CLI ----------------------------------------------------------

def npy_file(path, arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


@needs_ml_dtypes
def test_compress_file_of_npy_restores_it_and_names_the_array(tmp_path):
    arr = kv_like_bits("bf16", 2 * 4 * 64, seed=5).view(numpy_dtype("bf16")).reshape(2, 4, 64)
    raw = npy_file(tmp_path / "kv.npy", arr)
    out = splitzip.compress_file(tmp_path / "kv.npy")
    assert out.endswith("kv.npy.spz")
    c = splitzip.Container(out)
    assert c.names == ["npy_header", "array"] and c["array"].shape == (2, 4, 64)
    assert c["array"].tobytes() == arr.tobytes()
    (tmp_path / "kv.npy").rename(tmp_path / "orig.npy")
    assert splitzip.decompress_file(out) == str(tmp_path / "kv.npy")
    assert (tmp_path / "kv.npy").read_bytes() == raw
    with pytest.raises(FileExistsError):
        splitzip.decompress_file(out)


def test_file_errors_are_messages(tmp_path):
    (tmp_path / "big.npy").write_bytes(npy_file(tmp_path / "big.npy", np.zeros(3, ">f4")))
    with pytest.raises(ValueError, match="big-endian"):
        splitzip.compress_file(tmp_path / "big.npy")
    (tmp_path / "x.bin").write_bytes(b"\0" * 6)
    with pytest.raises(ValueError, match="needs dtype"):
        splitzip.compress_file(tmp_path / "x.bin")
    with pytest.raises(ValueError, match="shape needs 9007199254740992 bytes"):
        splitzip.compress_bytes(safetensors_bytes([("a", "F32", (1 << 51,), b"")]), "a.safetensors")
    with pytest.raises(ValueError, match="unknown suffix"):
        splitzip.decompress_file(tmp_path / "x.bin")


@needs_cli
@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
@pytest.mark.parametrize("shape", [(1000,), (4, 5, 6), (), (0, 3)])
def test_npy_files_both_ways_with_the_cli(tmp_path, dtype, shape):
    n = int(np.prod(shape, dtype=np.int64))
    arr = kv_like_bits(dtype, n, seed=n).view(numpy_dtype(dtype)).reshape(shape)
    src = tmp_path / "a.npy"
    raw = npy_file(src, arr)
    run("compress", "-q", src, "-o", tmp_path / "cli.spz")
    cli = (tmp_path / "cli.spz").read_bytes()
    # Python writes the CLI's bytes and reads the CLI's container by name
    assert splitzip.compress_file(src, tmp_path / "py.spz") == str(tmp_path / "py.spz")
    assert (tmp_path / "py.spz").read_bytes() == cli
    c = splitzip.Container(tmp_path / "cli.spz")
    assert c["array"].shape == arr.shape and c["array"].tobytes() == arr.tobytes()
    assert splitzip.decompress_bytes(cli) == raw
    # the CLI restores what Python wrote
    run("decompress", "-q", tmp_path / "py.spz", "-o", tmp_path / "back.npy")
    assert (tmp_path / "back.npy").read_bytes() == raw


@needs_cli
def test_safetensors_both_ways_with_the_cli(tmp_path):
    tensors = st_tensors()
    src = tmp_path / "m.safetensors"
    raw = safetensors_bytes(tensors, metadata={"format": "pt"}, gap_after="half")
    src.write_bytes(raw)
    run("compress", "-q", src, "-o", tmp_path / "cli.spz")
    cli = (tmp_path / "cli.spz").read_bytes()
    splitzip.compress_file(src, tmp_path / "py.spz")
    assert (tmp_path / "py.spz").read_bytes() == cli
    c = splitzip.Container(cli)
    want_dtypes = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F8_E4M3": "fp8_e4m3", "F8_E5M2": "fp8_e5m2"}
    for name, dtype, shape, data in tensors:
        it = c.item(name)
        assert it.dtype == want_dtypes.get(dtype), name
        assert it.shape == (shape if len(shape) <= 8 else ()), name
        assert c[name].tobytes() == data, name
        if it.kind == "frame" and len(shape) <= 8:
            assert c[name].shape == shape, name
    assert c.original() == raw
    run("decompress", "-q", tmp_path / "py.spz", "-o", tmp_path / "back.safetensors")
    assert (tmp_path / "back.safetensors").read_bytes() == raw
    # a calibrated codebook from the CLI is used the same way by both
    run("calibrate", "-q", "--dtype", "bf16", src, "-o", tmp_path / "book.spzb")
    run("compress", "-q", "--codebook", tmp_path / "book.spzb", src, "-o", tmp_path / "cb_cli.spz")
    py = splitzip.compress_bytes(raw, "m.safetensors", codebook=tmp_path / "book.spzb")
    assert py.tobytes() == (tmp_path / "cb_cli.spz").read_bytes()


@needs_cli
def test_raw_files_give_the_cli_frame(tmp_path):
    run("compress", "-q", "--dtype", "bf16", SLICE, "-o", tmp_path / "cli.spz")
    splitzip.compress_file(SLICE, tmp_path / "py.spz", dtype="bf16")
    assert (tmp_path / "py.spz").read_bytes() == (tmp_path / "cli.spz").read_bytes()
    assert splitzip.decompress_bytes((tmp_path / "cli.spz").read_bytes()) == SLICE.read_bytes()


@needs_cli
def test_cli_lists_and_restores_containers_written_from_python(tmp_path):
    k = kv_like_bits("fp16", 600, seed=9).view(np.float16).reshape(2, 3, 100)
    box = splitzip.compress_container({"head": b"\x01\x02\x03", "k": k, "é": np.ones(5, np.float32)})
    (tmp_path / "x.spz").write_bytes(box.tobytes())
    info = json.loads(run("info", "--json", tmp_path / "x.spz"))
    assert [(i["name"], i["kind"], i["shape"]) for i in info["item_list"]] == [
        ("head", "stored", []), ("k", "frame", [2, 3, 100]), ("é", "frame", [5])]
    run("decompress", "-q", tmp_path / "x.spz", "-o", tmp_path / "x.bin")
    assert (tmp_path / "x.bin").read_bytes() == b"\x01\x02\x03" + k.tobytes() + np.ones(5, np.float32).tobytes()
    # and compress(keep_shape=True) is such a container
    (tmp_path / "s.spz").write_bytes(splitzip.compress(k, keep_shape=True).tobytes())
    info = json.loads(run("info", "--json", tmp_path / "s.spz"))
    assert info["item_list"][0]["name"] == "tensor" and info["item_list"][0]["shape"] == [2, 3, 100]


# ---- raw files longer than one frame: frames back to back ------------------------------------------------------------

def test_raw_files_longer_than_a_frame_are_frames_back_to_back(tmp_path):
    n = 2 * splitzip._files.STREAM_FRAME_VALUES + 5
    raw = np.resize(kv_like_bits("fp8_e4m3", 4096, seed=12), n).tobytes()
    packed = splitzip.compress_bytes(raw, "x.bin", dtype="fp8_e4m3")
    first = splitzip.info(packed)
    assert first["n_values"] == splitzip._files.STREAM_FRAME_VALUES  # info() reads the first frame
    assert splitzip.decompress_bytes(packed) == raw
    a = splitzip.compress(np.arange(10, dtype=np.float16))
    b = splitzip.compress(np.arange(3, dtype=np.float32))
    assert splitzip.decompress_bytes(np.concatenate([a, b])) == (np.arange(10, dtype=np.float16).tobytes()
                                                                 + np.arange(3, dtype=np.float32).tobytes())
    with pytest.raises(splitzip.BadMagicError, match="after frame 1"):
        splitzip.decompress_bytes(a.tobytes() + b"junk")
    with pytest.raises(splitzip.SrcTruncatedError):
        splitzip.decompress_bytes(np.concatenate([a, b])[:-1])
    if CLI is not None:
        (tmp_path / "x.bin").write_bytes(raw)
        run("compress", "-q", "--dtype", "fp8_e4m3", tmp_path / "x.bin", "-o", tmp_path / "cli.spz")
        assert (tmp_path / "cli.spz").read_bytes() == packed.tobytes()
        (tmp_path / "ab.spz").write_bytes(np.concatenate([a, b]).tobytes())
        run("decompress", "-q", tmp_path / "ab.spz", "-o", tmp_path / "ab.bin")
        assert (tmp_path / "ab.bin").read_bytes() == splitzip.decompress_bytes(np.concatenate([a, b]))
