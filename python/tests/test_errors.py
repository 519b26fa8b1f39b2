"""Bad buffers and bad arguments raise the splitzip.Error subclass named after the library's status."""

import numpy as np
import pytest

import splitzip
from conftest import kv_like_bits


@pytest.fixture(scope="module")
def frame():
    return splitzip.compress(kv_like_bits("bf16", 10_000, seed=5), dtype="bf16")


def flipped(frame, offset, mask=0x01):
    b = frame.copy()
    b[offset] ^= mask
    return b


def test_error_hierarchy_and_names():
    assert issubclass(splitzip.CorruptError, splitzip.Error)
    e = splitzip.ChecksumError()
    assert e.status == 8 and e.status_name == "SZ_ERROR_CHECKSUM"
    assert "SZ_ERROR_CHECKSUM" in str(e)
    assert issubclass(splitzip.DstTooSmallError, ValueError)


@pytest.mark.parametrize("cut", [0, 10, 63])
def test_short_header_is_truncated(frame, cut):
    with pytest.raises(splitzip.SrcTruncatedError) as ei:
        splitzip.decompress(frame[:cut])
    assert ei.value.status_name == "SZ_ERROR_SRC_TRUNCATED"


def test_truncated_body(frame):
    with pytest.raises(splitzip.SrcTruncatedError):
        splitzip.decompress(frame[:-1])
    # info() of a header alone works (the header says everything but the statistics)
    head = splitzip.info(frame[:64])
    assert head["n_values"] == 10_000 and not head["stats_valid"]


def test_bad_magic(frame):
    with pytest.raises(splitzip.BadMagicError):
        splitzip.decompress(flipped(frame, 0))
    with pytest.raises(splitzip.BadMagicError):
        splitzip.info(np.zeros(200, np.uint8))


def test_unknown_version(frame):
    with pytest.raises(splitzip.UnsupportedVersionError):
        splitzip.decompress(flipped(frame, 4, 0x40))  # version 65: no such version


@pytest.mark.parametrize("offset", [5, 7, 16, 33, 50])
def test_header_bit_flip_fails_header_checksum(frame, offset):
    with pytest.raises(splitzip.ChecksumError):
        splitzip.decompress(flipped(frame, offset))


def test_rest_section_bit_flip_fails_chunk_checksum(frame):
    meta = splitzip.info(frame)
    rest_offset = 64 + 12 * meta["n_chunks"]
    with pytest.raises(splitzip.ChecksumError):
        splitzip.decompress(flipped(frame, rest_offset + 5))


def test_chunk_index_damage_is_corrupt(frame):
    # end offset of chunk 0 pushed past its record: sizes no longer fit the mode (§4.3/§4.5)
    with pytest.raises(splitzip.CorruptError):
        splitzip.decompress(flipped(frame, 64 + 0, 0x01))


def test_out_too_small(frame):
    with pytest.raises(splitzip.DstTooSmallError):
        splitzip.decompress(frame, out=np.empty(9_999, np.uint16))


def test_every_single_byte_flip_is_detected_or_harmless():
    """With checksums on, no single bit flip anywhere in a frame decodes to wrong values silently."""
    bits = kv_like_bits("bf16", 600, seed=9)
    frame = splitzip.compress(bits, dtype="bf16", chunk=256)
    for off in range(frame.size):
        bad = flipped(frame, off, 0x10)
        try:
            y = splitzip.decompress(bad, out=np.empty_like(bits))
        except splitzip.Error:
            continue
        np.testing.assert_array_equal(y, bits, err_msg=f"flip at {off} decoded silently to other values")


def test_bad_codebooks():
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.Codebook("bf16", 2, [1, 2, 3, 4, 5])  # 5 entries need 3 bits
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.Codebook("bf16", 2, [7, 7])  # duplicate
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.Codebook("fp8_e4m3", 2, [16])  # >= 2^E
    fp16 = splitzip.Codebook.default("fp16")
    with pytest.raises(splitzip.BadCodebookError):
        splitzip.compress(np.ones(8, np.float32), codebook=fp16)


def test_unknown_dtype_name():
    with pytest.raises(splitzip.UnsupportedDtypeError):
        splitzip.compress(np.zeros(8, np.uint16), dtype="int16")
    with pytest.raises(splitzip.UnsupportedDtypeError):
        splitzip.compress(np.zeros(8, np.uint16), dtype=9)


def test_codebook_file_errors(tmp_path):
    with pytest.raises(splitzip.IoError):
        splitzip.Codebook.load(tmp_path / "missing.spzb")
    p = tmp_path / "bad.spzb"
    p.write_bytes(b"\0" * 32)
    with pytest.raises(splitzip.BadMagicError):
        splitzip.Codebook.load(p)
    good = splitzip.Codebook.default("bf16").to_bytes()
    with pytest.raises(splitzip.ChecksumError):
        splitzip.Codebook.from_bytes(good[:10] + bytes([good[10] ^ 1]) + good[11:])
    with pytest.raises(splitzip.SrcTruncatedError):
        splitzip.Codebook.from_bytes(good[:31])


def test_gpu_only_arguments_on_host(frame):
    with pytest.raises(ValueError, match="CUDA"):
        splitzip.decompress(frame, status=np.zeros(1, np.int32))


def test_wrong_input_types():
    with pytest.raises(TypeError):
        splitzip.compress(object())
