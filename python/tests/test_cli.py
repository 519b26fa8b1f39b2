"""Frames of the Python module are byte-identical to the CLI's for the same raw input and codebook, both ways.
The CLI is found through $SPLITZIP_CLI or a build*/ folder of the repo; these tests skip when it is absent."""

import subprocess

import numpy as np
import pytest

import splitzip
from conftest import ALL_DTYPES, SLICE, find_cli, kv_like_bits

CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="splitzip CLI not built (set SPLITZIP_CLI or build cli/ into build*/)")


def run(*args):
    res = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{CLI} {' '.join(map(str, args))} failed: {res.stderr}"
    return res


def test_real_slice_same_frame_as_cli(tmp_path):
    out = tmp_path / "slice.spz"
    run("compress", "-q", "-f", "--dtype", "bf16", "--format", "raw", SLICE, "-o", out)
    x = np.fromfile(SLICE, dtype="<u2")
    assert splitzip.compress(x, dtype="bf16").tobytes() == out.read_bytes()


@pytest.mark.parametrize("name", ALL_DTYPES)
@pytest.mark.parametrize("chunk_log2,checksum,kind", [(12, True, "generic"), (8, False, "k"), (16, True, "v")])
def test_same_frame_as_cli(tmp_path, name, chunk_log2, checksum, kind):
    bits = kv_like_bits(name, 12_345, seed=chunk_log2)
    raw = tmp_path / "in.bin"
    bits.tofile(raw)
    out = tmp_path / "out.spz"
    args = ["compress", "-q", "-f", "--dtype", name, "--format", "raw", "--chunk-log2", chunk_log2, "--kind", kind,
            raw, "-o", out]
    if not checksum:
        args.insert(1, "--no-checksum")
    run(*args)
    py_kind = {"generic": "generic", "k": "key", "v": "value"}[kind]
    frame = splitzip.compress(bits, dtype=name, chunk=1 << chunk_log2, checksum=checksum, codebook=py_kind)
    assert frame.tobytes() == out.read_bytes()
    # and the CLI decodes the module's frame to the original bytes
    spz = tmp_path / "py.spz"
    spz.write_bytes(frame.tobytes())
    back = tmp_path / "back.bin"
    run("decompress", "-q", "-f", spz, "-o", back)
    assert back.read_bytes() == raw.read_bytes()


def test_calibrated_codebook_same_as_cli(tmp_path, kv_slice):
    cb_file = tmp_path / "cli.spzb"
    run("calibrate", "-q", "-f", "--dtype", "bf16", "--format", "raw", SLICE, "-o", cb_file)
    cb = splitzip.calibrate(kv_slice, dtype="bf16")
    assert cb.to_bytes() == cb_file.read_bytes()
    out = tmp_path / "slice.spz"
    run("compress", "-q", "-f", "--dtype", "bf16", "--format", "raw", "--codebook", cb_file, SLICE, "-o", out)
    assert splitzip.compress(kv_slice, dtype="bf16", codebook=cb_file).tobytes() == out.read_bytes()
