"""The edges a new user meets first: byte order, bytes with a dtype, the default thread count, messages for bad
arguments, the shape of a tensor, headers that claim more than the buffer holds, type hints."""

import importlib.resources
import inspect

import numpy as np
import pytest

import splitzip
from conftest import kv_like_bits, needs_ml_dtypes, numpy_dtype


# ---- byte order ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("descr", [">f4", ">f2"])
def test_big_endian_input_round_trips_to_its_values(descr):
    x = np.array([1, 2, 3.5, -0.25, np.inf, -0.0], dtype=descr)
    y = splitzip.decompress(splitzip.compress(x))
    assert y.dtype == np.dtype(descr).newbyteorder("=")
    np.testing.assert_array_equal(y, x)
    assert np.signbit(y[-1])
    # the frame is the frame of the same values in little-endian order
    little = x.astype(np.dtype(descr).newbyteorder("<"))
    assert splitzip.compress(x).tobytes() == splitzip.compress(little).tobytes()
    assert splitzip.calibrate(x) == splitzip.calibrate(little)


def test_big_endian_integer_view_with_dtype_is_converted():
    bits = kv_like_bits("bf16", 1000, seed=1)
    frame = splitzip.compress(bits.astype(">u2"), dtype="bf16")
    assert frame.tobytes() == splitzip.compress(bits, dtype="bf16").tobytes()


def test_big_endian_out_is_refused_before_writing():
    frame = splitzip.compress(np.arange(10, dtype=np.float32))
    out = np.zeros(10, dtype=">f4")
    with pytest.raises(ValueError, match="big-endian"):
        splitzip.decompress(frame, out=out)
    assert (out == 0).all()
    pages = [np.zeros(5, dtype=">f4"), np.zeros(5, dtype=">f4")]
    with pytest.raises(ValueError, match="big-endian"):
        splitzip.decompress_pages(frame, pages)


# ---- bytes with a dtype -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, "uint8 array"])
def test_bytes_with_a_dtype_compress_as_those_values(kind):
    bits = kv_like_bits("bf16", 777, seed=2)
    raw = bits.tobytes()
    data = np.frombuffer(raw, np.uint8) if kind == "uint8 array" else kind(raw)
    frame = splitzip.compress(data, dtype="bf16")
    assert frame.tobytes() == splitzip.compress(bits, dtype="bf16").tobytes()
    assert splitzip.info(frame)["n_values"] == 777


def test_bytes_that_are_not_whole_values_are_refused():
    with pytest.raises(ValueError, match="not a whole number of fp32 values"):
        splitzip.compress(b"\x00" * 7, dtype="fp32")


def test_bytes_without_a_dtype_ask_for_one():
    with pytest.raises(TypeError, match="dtype="):
        splitzip.compress(b"\x00\x01")


# ---- threads ------------------------------------------------------------------------------------------------------

def test_threads_default_to_one_as_in_the_c_api_and_the_cli(monkeypatch):
    from splitzip import _core
    seen = []
    real_c, real_d = _core._ext.compress, _core._ext.decompress

    def spy_c(src, n, did, cb, log2, flags, threads, dst, *rest):
        seen.append(("compress", threads))
        return real_c(src, n, did, cb, log2, flags, threads, dst, *rest)

    def spy_d(src, dst, threads, *rest):
        seen.append(("decompress", threads))
        return real_d(src, dst, threads, *rest)

    monkeypatch.setattr(_core._ext, "compress", spy_c)
    monkeypatch.setattr(_core._ext, "decompress", spy_d)
    x = kv_like_bits("fp16", 100, seed=3)
    frame = splitzip.compress(x, dtype="fp16")
    splitzip.decompress(frame)
    splitzip.decompress_pages(frame, [np.empty(50, np.uint16), np.empty(50, np.uint16)])
    splitzip.compress_pages([x[:50], x[50:]], dtype="fp16")
    splitzip.compress(x, dtype="fp16", threads=0)
    assert seen == [("compress", 1), ("decompress", 1), ("decompress", 1), ("compress", 1), ("compress", 0)]


# ---- bad arguments: a message, never a binding's signature dump ---------------------------------------------------

_FRAME = splitzip.compress(np.arange(64, dtype=np.float16))
_BAD_CALLS = {
    "negative threads": lambda: splitzip.compress(np.ones(4, np.float32), threads=-1),
    "huge threads": lambda: splitzip.decompress(_FRAME, threads=1 << 40),
    "str threads": lambda: splitzip.decompress(_FRAME, threads="2"),
    "float threads": lambda: splitzip.compress(np.ones(4, np.float32), threads=1.5),
    "chunk not a power of two": lambda: splitzip.compress(np.ones(4, np.float32), chunk=1000),
    "chunk too large": lambda: splitzip.compress(np.ones(4, np.float32), chunk=1 << 20),
    "chunk float": lambda: splitzip.compress(np.ones(4, np.float32), chunk=4096.0),
    "checksum not a bool": lambda: splitzip.compress(np.ones(4, np.float32), checksum="no"),
    "keep_shape not a bool": lambda: splitzip.compress(np.ones(4, np.float32), keep_shape=1),
    "dtype object": lambda: splitzip.compress(np.ones(4, np.uint16), dtype=object()),
    "dtype float": lambda: splitzip.compress(np.ones(4, np.uint16), dtype=2.0),
    "dtype with NUL": lambda: splitzip.compress(np.ones(4, np.uint16), dtype="bf16\0"),
    "negative bound": lambda: splitzip.compress_bound(-1, "bf16"),
    "bound of a str": lambda: splitzip.compress_bound("10", "bf16"),
    "tensor of ints": lambda: splitzip.compress([1, 2, 3]),
    "object array": lambda: splitzip.compress(np.array([1, "a"], dtype=object), dtype="fp8_e4m3"),
    "not a tensor": lambda: splitzip.compress(object()),
    "info of a number": lambda: splitzip.info(5),
    "codebook int": lambda: splitzip.compress(np.ones(4, np.float32), codebook=3),
    "codebook k huge": lambda: splitzip.Codebook("bf16", 1 << 40, [1]),
    "codebook value huge": lambda: splitzip.Codebook("bf16", 3, [1 << 40]),
    "codebook values str": lambda: splitzip.Codebook("bf16", 3, "abc"),
    "codebook 17 values": lambda: splitzip.Codebook("bf16", 4, list(range(17))),
    "codebook kind": lambda: splitzip.Codebook.default("bf16", kind=1),
    "codebook from str": lambda: splitzip.Codebook.from_bytes("x" * 32),
    "pages not a list": lambda: splitzip.compress_pages(np.ones(4, np.float32)),
    "pages of str": lambda: splitzip.compress_pages(["ab"]),
    "out read-only": lambda: splitzip.decompress(_FRAME, out=np.frombuffer(bytes(128), np.uint8)),
    "status on the CPU": lambda: splitzip.decompress(_FRAME, status=np.zeros(1, np.int32)),
}


@pytest.mark.parametrize("what", list(_BAD_CALLS))
def test_bad_arguments_raise_a_message(what):
    with pytest.raises((TypeError, ValueError)) as ei:
        _BAD_CALLS[what]()
    text = str(ei.value)
    assert text and "incompatible function arguments" not in text and "Invoked with" not in text, text


# ---- the shape ----------------------------------------------------------------------------------------------------

@needs_ml_dtypes
def test_keep_shape_gives_the_tensor_back_in_its_shape(kv_slice):
    kv = kv_slice.view(numpy_dtype("bf16"))
    box = splitzip.compress(kv, keep_shape=True)
    back = splitzip.decompress(box)
    assert back.shape == kv.shape == (8, 2, 224, 4, 64) and back.dtype == kv.dtype
    assert back.tobytes() == kv.tobytes()
    meta = splitzip.info(box)
    assert meta["type"] == "container" and meta["items"][0]["shape"] == kv.shape
    assert meta["items"][0]["frame"]["ratio"] > 1.3
    # the frame inside is the plain frame of the same values
    assert splitzip.Container(box).data("tensor").tobytes() == splitzip.compress(kv).tobytes()
    out = np.empty_like(kv)
    assert splitzip.decompress(box, out=out) is out and out.tobytes() == kv.tobytes()


def test_keep_shape_of_scalars_empty_and_uint_views():
    s = splitzip.decompress(splitzip.compress(np.float32(2.5), keep_shape=True))
    assert s.shape == () and s == 2.5
    e = splitzip.decompress(splitzip.compress(np.zeros((3, 0, 2), np.float16), keep_shape=True))
    assert e.shape == (3, 0, 2)
    bits = kv_like_bits("fp16", 60, seed=4).reshape(3, 4, 5)
    v = splitzip.decompress(splitzip.compress(bits, dtype="fp16", keep_shape=True))
    assert v.shape == (3, 4, 5) and v.dtype == np.float16 and (v.view(np.uint16) == bits).all()


def test_keep_shape_refuses_more_dimensions_than_a_container_records():
    with pytest.raises(ValueError, match="at most 8"):
        splitzip.compress(np.zeros((1,) * 9, np.float32), keep_shape=True)


def test_a_plain_frame_still_comes_back_flat():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert splitzip.decompress(splitzip.compress(x)).shape == (12,)


# ---- headers that claim more than the buffer holds ----------------------------------------------------------------

def test_header_claiming_2_48_values_raises_the_library_error_before_allocating():
    xxhash = pytest.importorskip("xxhash")
    head = bytearray(splitzip.compress(np.zeros(8, np.float32), checksum=False)[:64].tobytes())
    head[16:24] = ((1 << 48) - 1).to_bytes(8, "little")
    head[60:64] = (xxhash.xxh3_64_intdigest(bytes(head[:60])) & 0xFFFFFFFF).to_bytes(4, "little")
    meta = splitzip.info(bytes(head))  # the header alone is valid
    assert meta["n_values"] == (1 << 48) - 1 and not meta["stats_valid"]
    for call in (splitzip.decompress, splitzip.decompress_reference):
        with pytest.raises(splitzip.SrcTruncatedError):
            call(bytes(head))


# ---- typing -------------------------------------------------------------------------------------------------------

def test_package_is_typed():
    assert (importlib.resources.files("splitzip") / "py.typed").is_file()


def _public_functions():
    for name in splitzip.__all__:
        obj = getattr(splitzip, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("splitzip") and not issubclass(obj, Exception):
            for attr, f in vars(obj).items():
                if isinstance(f, (classmethod, staticmethod)):
                    f = f.__func__
                if inspect.isfunction(f) and (not attr.startswith("_") or attr == "__init__"):
                    yield f"{name}.{attr}", f


def test_public_functions_have_precise_type_hints():
    missing = []
    for name, f in _public_functions():
        sig = inspect.signature(f)
        for p in sig.parameters.values():
            if p.name in ("self", "cls"):
                continue
            a = p.annotation
            if a is inspect.Parameter.empty or "Any" in str(a):
                missing.append(f"{name}({p.name}: {a})")
        if f.__name__ != "__init__" and (sig.return_annotation is inspect.Signature.empty
                                         or "Any" in str(sig.return_annotation)):
            missing.append(f"{name} -> {sig.return_annotation}")
    assert not missing, missing
