#!/usr/bin/env python3
"""Expected-output tests of the splitzip command-line tool (Python standard library only).

Each case runs the tool on small inputs that this script generates deterministically (raw tensors of every dtype,
.npy files, .safetensors files), checks round trips byte for byte, checks that failures leave no output file behind,
and compares a transcript of the commands it ran (stdout, stderr, exit codes) with tests/cli/expected/<case>.txt.

    cli_tests.py --splitzip build/cli/splitzip --work /tmp/w --case npy            # one case
    cli_tests.py --splitzip build/cli/splitzip --work /tmp/w --case all            # every case
    cli_tests.py ... --update                                                     # rewrite expected/*.txt

Exit codes: 0 pass, 1 fail, 77 skipped (ctest SKIP_RETURN_CODE), e.g. when ../shared/data is absent.
"""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXPECTED_DIR = os.path.join(HERE, "expected")

SKIP = 77


class Failure(Exception):
    pass


class Skip(Exception):
    pass


# ---- deterministic data ------------------------------------------------------------------------------------------

class Lcg:
    """64-bit LCG (Knuth's MMIX constants); the high 32 bits of each step are the output."""

    def __init__(self, seed):
        self.state = (seed * 0x9E3779B97F4A7C15 + 1) & 0xFFFFFFFFFFFFFFFF

    def next32(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return self.state >> 32


# (width bits, exponent bits, mantissa bits, centre exponent) per dtype
DTYPES = {
    "bf16": (16, 8, 7, 126),
    "fp16": (16, 5, 10, 14),
    "fp32": (32, 8, 23, 126),
    "fp8_e4m3": (8, 4, 3, 7),
    "fp8_e5m2": (8, 5, 2, 15),
}


def gen_values(dtype, n, seed):
    """KV-like values: exponents fall off geometrically below a centre exponent, 1 in 64 is a random exponent
    (an outlier that will mostly be an escape), sign and mantissa are random. Integer arithmetic only, so the bytes
    are the same on every machine."""
    width, ebits, mbits, centre = DTYPES[dtype]
    rng = Lcg(seed)
    out = bytearray()
    emax = (1 << ebits) - 1
    for _ in range(n):
        r = rng.next32()
        s = rng.next32()
        if (r & 63) == 0:
            e = s % (emax + 1)
        else:
            bits = (r >> 6) | (1 << 20)
            tz = (bits & -bits).bit_length() - 1
            e = max(0, centre + 1 - min(tz, centre))
        mant = s & ((1 << mbits) - 1)
        sign = (s >> 31) & 1
        v = (sign << (width - 1)) | (e << mbits) | mant
        out += v.to_bytes(width // 8, "little")
    return bytes(out)


def npy_bytes(descr, shape, data, version=1, fortran=False):
    if len(shape) == 1:
        shape_txt = "(%d,)" % shape[0]
    else:
        shape_txt = "(" + ", ".join(str(d) for d in shape) + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_txt)
    prefix = 10 if version == 1 else 12
    total = prefix + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    if version == 1:
        head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
    else:
        head = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(header))
    return head + header.encode("latin-1") + data


def safetensors_bytes(tensors, metadata=None, gap_after=None):
    """tensors: list of (name, dtype, shape, data). gap_after: name of a tensor followed by 8 unreferenced bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    body = bytearray()
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(body), len(body) + len(data)]}
        body += data
        if name == gap_after:
            body += b"\xEE" * 8
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(body)


# ---- running the tool ------------------------------------------------------------------------------------------

class Runner:
    def __init__(self, exe, work):
        self.exe = exe
        self.work = work
        self.transcript = []

    def norm(self, text):
        return text.replace(self.work + "/", "").replace(self.work, ".")

    def run(self, args, stdin=None, binary_stdout=False, record=True, env=None):
        proc = subprocess.run([self.exe] + args, cwd=self.work, input=stdin, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, timeout=600)
        out = proc.stdout
        err = proc.stderr.decode("utf-8", "replace")
        if record:
            self.transcript.append("$ splitzip " + " ".join(self.norm(a) for a in args) +
                                   (" < (%d bytes)" % len(stdin) if stdin is not None else ""))
            if binary_stdout:
                if out:
                    self.transcript.append("(%d bytes on stdout)" % len(out))
            else:
                self.transcript.extend(self.norm(out.decode("utf-8", "replace")).splitlines())
            self.transcript.extend("stderr: " + l for l in self.norm(err).splitlines())
            self.transcript.append("exit %d" % proc.returncode)
        return proc.returncode, (out if binary_stdout else out.decode("utf-8", "replace")), err

    def ok(self, args, **kw):
        rc, out, err = self.run(args, **kw)
        if rc != 0:
            raise Failure("splitzip %s: exit %d\n%s" % (" ".join(args), rc, err))
        return out

    def fails(self, args, expect_rc=1, **kw):
        rc, out, err = self.run(args, **kw)
        if rc != expect_rc:
            raise Failure("splitzip %s: expected exit %d, got %d\n%s" % (" ".join(args), expect_rc, rc, err))
        if "splitzip: error: " not in err:
            raise Failure("splitzip %s: no 'splitzip: error:' line on stderr: %r" % (" ".join(args), err))
        return err

    def note(self, line):
        self.transcript.append("# " + line)

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()


def check(cond, message):
    if not cond:
        raise Failure(message)


def same_bytes(r, a, b):
    check(r.read(a) == r.read(b), "%s and %s differ" % (a, b))


def no_leftovers(r, allowed):
    """The work dir holds exactly `allowed` (no temporary files, no partial outputs)."""
    names = sorted(os.listdir(r.work))
    check(names == sorted(allowed), "unexpected files in the work dir: %s (expected %s)" % (names, sorted(allowed)))


# ---- an independent model of frame sizes (docs/FORMAT.md §4) ----------------------------------------------------

def model_frame(data, dtype, codebook, chunk_log2=12, checksums=True):
    """Predicts (frame size, escapes, coded chunks, raw chunks) from the spec alone, for cross-checking `info`."""
    width, ebits, mbits, _ = DTYPES[dtype]
    k = codebook["code_bits"]
    book = set(codebook["values"])
    wb = width // 8
    n = len(data) // wb
    S = 1 << chunk_log2
    C = (n + S - 1) // S
    rest = width - ebits
    size = 64 + 8 * C + (4 * C if checksums else 0) + (n + 7) // 8 * rest
    escapes = coded = raw = 0
    for c in range(C):
        lo, hi = c * S, min(n, (c + 1) * S)
        x = 0
        for i in range(lo, hi):
            v = int.from_bytes(data[i * wb:(i + 1) * wb], "little")
            if ((v >> mbits) & ((1 << ebits) - 1)) not in book:
                x += 1
        L = hi - lo
        coded_size = (L + 7) // 8 * k + 3 * x
        raw_size = (L + 7) // 8 * ebits
        if coded_size <= raw_size:
            size += coded_size
            escapes += x
            coded += 1
        else:
            size += raw_size
            raw += 1
    return size, escapes, coded, raw


# ---- cases -----------------------------------------------------------------------------------------------------

def case_help(r, ctx):
    """Top-level and per-command help: documents the keep-by-default choice and every option."""
    # Help layout differs between CLI11 versions, so check content, not bytes.
    top = r.ok(["--help"], record=False)
    for word in ("compress", "decompress", "info", "calibrate", "bench", "kept unless --rm"):
        check(word in top, "--help mentions %r" % word)
    options = {
        "compress": ("--output", "--stdout", "--force", "--keep", "--rm", "--threads", "--chunk-log2", "--no-checksum",
                     "--codebook", "--dtype", "--kind", "--format", "the default, as in zstd", "--quiet", "--verbose"),
        "decompress": ("--output", "--stdout", "--force", "--keep", "--rm", "--threads", "--test", "--quiet",
                       "--verbose"),
        "info": ("--json",),
        "calibrate": ("--output", "--dtype", "--force"),
        "bench": ("--dtype", "--threads", "--iters", "--gpu", "--cpu", "--codebook", "--chunk-log2"),
    }
    for cmd, opts in options.items():
        text = r.ok([cmd, "--help"], record=False)
        for opt in opts:
            check(opt in text, "%s --help mentions %r" % (cmd, opt))
    out = r.ok(["--version"])
    check(out.startswith("splitzip "), "--version prints the version")


def case_raw_roundtrip(r, ctx):
    """Raw files of every dtype and awkward sizes round-trip byte for byte, through files and through pipes."""
    for dtype, (width, _, _, _) in DTYPES.items():
        for n in (0, 1, 7, 8, 9, 4095, 4096, 4097, 20000):
            name = "%s_%d.bin" % (dtype, n)
            r.write(name, gen_values(dtype, n, seed=n * 7 + width))
            r.ok(["compress", "-q", "--dtype", dtype, name], record=False)
            os.rename(r.path(name), r.path(name + ".orig"))
            r.ok(["decompress", "-q", name + ".spz"], record=False)
            same_bytes(r, name, name + ".orig")
            for f in (name, name + ".orig", name + ".spz"):
                os.remove(r.path(f))
    # Every 16-bit pattern (NaN payloads, +-0, subnormals, infinities) survives, with any chunk size.
    allbits = b"".join(v.to_bytes(2, "little") for v in range(65536))
    r.write("all16.bin", allbits)
    for dtype in ("bf16", "fp16"):
        for chunk in ("8", "12", "16"):
            r.ok(["compress", "-q", "-f", "--dtype", dtype, "--chunk-log2", chunk, "all16.bin"], record=False)
            data = r.ok(["decompress", "-c", "all16.bin.spz"], binary_stdout=True, record=False)
            check(data == allbits, "all 65536 %s patterns round-trip (chunk_log2 %s)" % (dtype, chunk))
    # The transcript: one compress with its summary line, then decompress.
    r.write("v.bin", gen_values("bf16", 10000, seed=5))
    r.ok(["compress", "--dtype", "bf16", "--no-checksum", "v.bin", "-o", "v.spz"])
    r.ok(["decompress", "v.spz", "-o", "v.out"])
    same_bytes(r, "v.bin", "v.out")


def case_stdio(r, ctx):
    """'-' reads stdin, -c writes stdout; the bytes equal those of file-to-file compression."""
    data = gen_values("fp16", 30000, seed=11)
    r.write("h.bin", data)
    r.ok(["compress", "-q", "--dtype", "fp16", "h.bin"])
    frame = r.ok(["compress", "--dtype", "fp16", "-"], stdin=data, binary_stdout=True)
    check(frame == r.read("h.bin.spz"), "stdin -> stdout gives the same frame as file -> file")
    frame2 = r.ok(["compress", "--dtype", "fp16", "-c", "h.bin"], binary_stdout=True)
    check(frame2 == frame, "-c gives the same frame")
    plain = r.ok(["decompress", "-"], stdin=frame, binary_stdout=True)
    check(plain == data, "stdin decompress restores the data")
    plain = r.ok(["decompress", "-c", "h.bin.spz"], binary_stdout=True)
    check(plain == data, "decompress -c restores the data")
    r.ok(["compress", "--dtype", "fp16", "-", "-o", "piped.spz"], stdin=data)
    same_bytes(r, "piped.spz", "h.bin.spz")
    # Several inputs: each gets its own output; -c would concatenate frames and is refused.
    r.write("h2.bin", data[:1000])
    r.ok(["compress", "--dtype", "fp16", "-f", "h.bin", "h2.bin"])
    r.fails(["compress", "--dtype", "fp16", "-c", "h.bin", "h2.bin"])
    os.rename(r.path("h2.bin"), r.path("h2.orig"))
    r.ok(["decompress", "-q", "h2.bin.spz"])
    same_bytes(r, "h2.bin", "h2.orig")
    # Thread counts never change the bytes.
    for t in ("2", "0"):
        r.ok(["compress", "-q", "-f", "--threads", t, "--dtype", "fp16", "h.bin", "-o", "t%s.spz" % t], record=False)
        same_bytes(r, "t%s.spz" % t, "h.bin.spz")


def case_info(r, ctx):
    """info / info --json agree with a model of the format computed here from docs/FORMAT.md alone."""
    data = gen_values("bf16", 50000, seed=3)
    r.write("sample.bin", gen_values("bf16", 50000, seed=4))
    r.write("x.bin", data)
    r.ok(["calibrate", "--dtype", "bf16", "sample.bin", "-o", "bf16.spzb"])
    r.ok(["info", "bf16.spzb"])
    r.ok(["compress", "-q", "--dtype", "bf16", "--codebook", "bf16.spzb", "--chunk-log2", "10", "x.bin"])
    r.ok(["info", "x.bin.spz"])
    info = json.loads(r.ok(["info", "--json", "x.bin.spz"], record=False))
    size, escapes, coded, raw = model_frame(data, "bf16", info["codebook"], chunk_log2=10)
    check(info["compressed_size"] == size == os.path.getsize(r.path("x.bin.spz")),
          "frame size %d, model %d" % (info["compressed_size"], size))
    check(info["escapes"] == escapes, "escapes %d, model %d" % (info["escapes"], escapes))
    check((info["coded_chunks"], info["raw_chunks"]) == (coded, raw), "chunk modes differ from the model")
    check(info["values"] == 50000 and info["dtype"] == "bf16", "values/dtype")
    # All-escape data: every chunk falls back to raw exponents and the frame stays within the bound.
    r.write("esc.bin", b"".join(((e << 7) | (e & 0x7F)).to_bytes(2, "little") for e in range(256)) * 40)
    r.ok(["compress", "-q", "--dtype", "bf16", "--codebook", "bf16.spzb", "esc.bin"])
    info = json.loads(r.ok(["info", "--json", "esc.bin.spz"]))
    n = 256 * 40
    bound = 64 + 12 * ((n + 255) // 256) + (n + 7) // 8 * 16
    check(info["compressed_size"] <= bound, "all-escape frame %d > bound %d" % (info["compressed_size"], bound))


def case_npy(r, ctx):
    """.npy files (v1, v2, C and Fortran order, every supported descr) become containers and come back identical."""
    files = [
        ("f16.npy", npy_bytes("<f2", (4, 8, 16), gen_values("fp16", 512, 1)), []),
        ("f32.npy", npy_bytes("<f4", (1000,), gen_values("fp32", 1000, 2)), []),
        ("bf16.npy", npy_bytes("<V2", (3, 5, 64), gen_values("bf16", 960, 3)), []),
        ("bf16v2.npy", npy_bytes("<u2", (2, 4096), gen_values("bf16", 8192, 4), version=2), ["--dtype", "bf16"]),
        ("e4m3.npy", npy_bytes("|u1", (64, 33), gen_values("fp8_e4m3", 64 * 33, 5)), ["--dtype", "fp8_e4m3"]),
        ("e5m2.npy", npy_bytes("|V1", (100,), gen_values("fp8_e5m2", 100, 6)), ["--dtype", "fp8_e5m2"]),
        ("fortran.npy", npy_bytes("<f2", (7, 9), gen_values("fp16", 63, 7), fortran=True), []),
        ("scalar.npy", npy_bytes("<f4", (), gen_values("fp32", 1, 8)), []),
        ("empty.npy", npy_bytes("<f2", (0, 5), b""), []),
    ]
    for name, data, extra in files:
        r.write(name, data)
        r.ok(["compress"] + extra + [name])
        os.rename(r.path(name), r.path(name + ".orig"))
        r.ok(["decompress", "-q", name + ".spz"], record=False)
        same_bytes(r, name, name + ".orig")
    r.ok(["info", "f16.npy.spz", "bf16v2.npy.spz"])
    # Detection by magic: an .npy file without the extension is still an .npy file.
    r.write("noext", r.read("f32.npy"))
    r.ok(["compress", "-q", "noext"])
    check(r.read("noext.spz") == r.read("f32.npy.spz"), "magic detection gives the same container")


def case_npy_errors(r, ctx):
    """Malformed or unsupported .npy files give precise errors and no output file."""
    base = sorted(os.listdir(r.work))
    cases = [
        ("be.npy", npy_bytes(">f2", (4,), b"\0" * 8), []),
        ("f64.npy", npy_bytes("<f8", (4,), b"\0" * 32), []),
        ("u2.npy", npy_bytes("<u2", (4,), b"\0" * 8), []),
        ("mismatch.npy", npy_bytes("<f2", (4,), b"\0" * 8), ["--dtype", "bf16"]),
        ("short.npy", npy_bytes("<f4", (100,), b"\0" * 396), []),
        ("badhdr.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': <f2'}\n", []),
        ("trunc.npy", b"\x93NUMPY\x01\x00\xff\x00{'descr'", []),
        ("v9.npy", b"\x93NUMPY\x09\x00" + b"\0" * 20, []),
        # 2^62 values of 4 bytes: the byte size wraps to 0 in 64 bits, which once passed as "no data needed"
        ("wrap.npy", npy_bytes("<f4", (1 << 62,), b""), []),
        ("wrap2.npy", npy_bytes("<f2", (1 << 31, 1 << 31, 4), b""), []),
    ]
    for name, data, extra in cases:
        r.write(name, data)
        r.fails(["compress"] + extra + [name])
    no_leftovers(r, base + [c[0] for c in cases])


def case_safetensors(r, ctx):
    """.safetensors: every float tensor becomes a frame named by the tensor, others are stored; identical restore."""
    tensors = [
        ("model.layers.0.k", "BF16", (2, 4, 64), gen_values("bf16", 512, 21)),
        ("model.layers.0.v", "BF16", (2, 4, 64), gen_values("bf16", 512, 22)),
        ("half", "F16", (300,), gen_values("fp16", 300, 23)),
        ("single", "F32", (10, 10), gen_values("fp32", 100, 24)),
        ("e4m3", "F8_E4M3", (5000,), gen_values("fp8_e4m3", 5000, 25)),
        ("e5m2", "F8_E5M2", (17,), gen_values("fp8_e5m2", 17, 26)),
        ("ids", "I64", (3,), struct.pack("<3q", 1, -2, 3)),
        ("mask", "BOOL", (4,), b"\x01\x00\x01\x01"),
        ("empty", "BF16", (0, 64), b""),
        ("deep", "F16", (1, 1, 1, 1, 1, 1, 1, 1, 2), gen_values("fp16", 2, 27)),
    ]
    r.write("m.safetensors", safetensors_bytes(tensors, metadata={"format": "pt"}, gap_after="half"))
    r.ok(["compress", "m.safetensors"])
    r.ok(["info", "m.safetensors.spz"])
    info = json.loads(r.ok(["info", "--json", "m.safetensors.spz"], record=False))
    names = [it["name"] for it in info["item_list"]]
    check("model.layers.0.k" in names and "__header__" in names, "tensor names are item names")
    kinds = {it["name"]: it["kind"] for it in info["item_list"]}
    check(kinds["ids"] == "stored" and kinds["single"] == "frame" and kinds["e5m2"] == "frame", "item kinds")
    os.rename(r.path("m.safetensors"), r.path("orig.safetensors"))
    r.ok(["decompress", "m.safetensors.spz"])
    same_bytes(r, "m.safetensors", "orig.safetensors")
    # Detection without the extension (header sniffing) gives the same container.
    r.write("model.bin", r.read("orig.safetensors"))
    r.ok(["compress", "-q", "model.bin"], record=False)
    check(r.read("model.bin.spz") == r.read("m.safetensors.spz"), "sniffed safetensors gives the same container")


def case_info_names(r, ctx):
    """Item names are data: info prints control characters (C0, C1, DEL) and backslashes in them as \\xNN escapes,
    so a name cannot drive the terminal; --json keeps the names exactly."""
    names = ["plain", "esc\x1b]0;title\x07", "csi\x1b[31mred", "c1\u009b31m", "del\x7f", "back\\slash",
             "caf\u00e9 \u4e2d", "nl\nline"]
    tensors = [(n, "F16", (2,), gen_values("fp16", 2, i)) for i, n in enumerate(names)]
    r.write("names.safetensors", safetensors_bytes(tensors))
    r.ok(["compress", "-q", "names.safetensors"])
    text = r.ok(["info", "names.safetensors.spz"])
    check("\x1b" not in text and "\x07" not in text and "\x7f" not in text and "\u009b" not in text,
          "a control character reached the output")
    check("caf\u00e9 \u4e2d" in text, "valid UTF-8 names print as they are")
    info = json.loads(r.ok(["info", "--json", "names.safetensors.spz"], record=False))
    check(sorted(it["name"] for it in info["item_list"]) == sorted(names + ["__header__"]), "json names exact")


FRAME_VALUES = 1 << 22  # kStreamFrameValues of cli/codec.h: raw inputs are cut into frames of this many values


def run_measured(exe, args, cwd, stdin_path, stdout_path=None):
    """Runs the tool; returns (exit code, stderr text, its peak RSS in MB). The peak is the high-water mark VmHWM of
    the tool's own address space, read from /proc while it runs (ru_maxrss would include this script's RSS, which a
    child inherits as its starting mark across fork and exec). stdout goes to stdout_path, else nowhere."""
    err_path = os.path.join(cwd, ".stderr")
    peak_kb = 0
    with open(stdin_path or os.devnull, "rb") as fin, open(err_path, "wb") as ferr, \
            open(stdout_path or os.devnull, "wb") as fout:
        proc = subprocess.Popen([exe] + args, cwd=cwd, stdin=fin, stdout=fout, stderr=ferr)
        status_path = "/proc/%d/status" % proc.pid
        while proc.poll() is None:
            try:
                with open(status_path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak_kb = max(peak_kb, int(line.split()[1]))
            except (OSError, ValueError):
                pass
            time.sleep(0.005)
    with open(err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    os.unlink(err_path)
    return proc.returncode, err, peak_kb / 1024.0


def case_stream(r, ctx):
    """Raw inputs stream as frames of 4 Mi values back to back; files of concatenated frames decompress to the
    concatenation (zstd semantics) and info lists them; trailing garbage and truncation are errors; a bad file in a
    list is reported and the others still done; the input's times are kept; memory stays bounded."""
    # 2.5 frames of fp8 plus a few values: three frames.
    n = 2 * FRAME_VALUES + FRAME_VALUES // 2 + 3
    chunk = gen_values("fp8_e4m3", 4096, 31)
    data = (chunk * (n // 4096 + 1))[:n]
    r.write("big.bin", data)
    os.utime(r.path("big.bin"), (1000000000, 1000000000))
    r.ok(["compress", "-q", "--dtype", "fp8_e4m3", "big.bin"])
    check(os.stat(r.path("big.bin.spz")).st_mtime == 1000000000, "compress keeps the input's mtime")
    r.ok(["info", "big.bin.spz"])
    info = json.loads(r.ok(["info", "--json", "big.bin.spz"], record=False))
    check(info["type"] == "frames" and info["frames"] == 3 and info["values"] == n, "info counts the frames")
    check([f["values"] for f in info["frame_list"]] == [FRAME_VALUES, FRAME_VALUES, n - 2 * FRAME_VALUES],
          "frames of 4 Mi values")
    check(info["compressed_size"] == os.path.getsize(r.path("big.bin.spz")), "info's total is the file size")
    os.rename(r.path("big.bin"), r.path("orig.bin"))
    r.ok(["decompress", "-q", "big.bin.spz"])
    same_bytes(r, "big.bin", "orig.bin")
    check(os.stat(r.path("big.bin")).st_mtime == 1000000000, "decompress keeps the input's mtime")
    r.ok(["decompress", "-t", "big.bin.spz"])
    # stdin to stdout: the same bytes as file to file
    out = r.ok(["compress", "--dtype", "fp8_e4m3", "-c", "-"], stdin=data, binary_stdout=True)
    check(out == r.read("big.bin.spz"), "streamed stdin gives the file's frames")
    back = r.ok(["decompress", "-c", "-"], stdin=out, binary_stdout=True)
    check(back == data, "stdin decompresses")
    # concatenated files: frames of two dtypes back to back decompress to the concatenation
    r.write("a.bin", gen_values("bf16", 1000, 32))
    r.write("b.bin", gen_values("fp16", 777, 33))
    r.ok(["compress", "-q", "--dtype", "bf16", "a.bin"])
    r.ok(["compress", "-q", "--dtype", "fp16", "b.bin"])
    r.write("ab.spz", r.read("a.bin.spz") + r.read("b.bin.spz"))
    r.ok(["decompress", "-q", "ab.spz"])
    check(r.read("ab") == r.read("a.bin") + r.read("b.bin"), "concatenated frames decompress to the concatenation")
    r.ok(["info", "ab.spz"])
    # errors: garbage after a frame, a truncated frame; no output left behind
    r.write("junk.spz", r.read("a.bin.spz") + b"junk")
    r.fails(["decompress", "junk.spz"])
    r.fails(["info", "junk.spz"])
    r.write("cut.spz", r.read("ab.spz")[:-1])
    r.fails(["decompress", "cut.spz"])
    check(not os.path.exists(r.path("junk")) and not os.path.exists(r.path("cut")), "no partial output")
    # a list with a bad file in the middle: reported, the others done, exit 1
    r.write("odd.bin", b"\x01\x02\x03")
    for f in ("a.bin.spz", "b.bin.spz"):
        os.unlink(r.path(f))
    r.fails(["compress", "--dtype", "bf16", "-q", "a.bin", "odd.bin", "b.bin"])
    check(os.path.exists(r.path("a.bin.spz")) and os.path.exists(r.path("b.bin.spz")), "the good files are done")
    check(not os.path.exists(r.path("odd.bin.spz")), "the bad one leaves nothing")


def case_stream_memory(r, ctx):
    """Compressing and decompressing a 256 MiB raw file, from a file and through pipes, stays under 64 MB of RSS."""
    size = 256 << 20
    block = gen_values("bf16", 1 << 15, 41)
    with open(r.path("big.bin"), "wb") as f:
        for _ in range(size // len(block)):
            f.write(block)
    limit = 64.0
    steps = [
        (["compress", "-q", "--dtype", "bf16", "big.bin"], None),
        (["decompress", "-q", "-f", "big.bin.spz", "-o", "back.bin"], None),
        (["decompress", "-t", "-q", "big.bin.spz"], None),
        (["info", "big.bin.spz"], None),
        (["compress", "-q", "--dtype", "bf16", "-c", "-"], "big.bin"),
        (["decompress", "-q", "-c", "-"], "big.bin.spz"),
    ]
    for args, stdin_file in steps:
        rc, err, rss = run_measured(r.exe, args, r.work, r.path(stdin_file) if stdin_file else None)
        check(rc == 0, "splitzip %s failed: %s" % (" ".join(args), err))
        check(rss <= limit, "splitzip %s: max RSS %.1f MB > %.0f MB" % (" ".join(args), rss, limit))
    same_bytes(r, "big.bin", "back.bin")
    r.note("max RSS of every step under %.0f MB" % limit)



def case_container_memory(r, ctx):
    """A 256 MiB .npy and a 256 MiB .safetensors file compress (to a file and to stdout), decompress, test and show
    their info in under 64 MB of RSS: the containers are written and read item by item, tensors above 8 MiB in
    pieces of 8 MiB. The frames so assembled are the ones one encoder call gives (stdin is read whole and
    coded so), and the files come back byte for byte."""
    limit = 64.0
    bf16 = gen_values("bf16", 1 << 15, 51)
    fp32 = gen_values("fp32", 1 << 14, 52)
    e4m3 = gen_values("fp8_e4m3", 1 << 16, 53)

    def repeat(block, size):
        return (block * (size // len(block) + 1))[:size]

    # .npy: 128 Mi BF16 values (32 pieces) and a trailer
    n = 1 << 27
    npy = npy_bytes("<V2", (1 << 12, 1 << 15), b"")
    with open(r.path("big.npy"), "wb") as f:
        f.write(npy)
        for _ in range(2 * n // len(bf16)):
            f.write(bf16)
        f.write(b"trailer")
    # .safetensors: BF16, FP32 and FP8 tensors of partial last pieces, and a stored one between them
    tensors = [
        ("k", "BF16", (3, 22369621), repeat(bf16, 2 * 3 * 22369621)),
        ("ids", "I64", (3,), struct.pack("<3q", 1, -2, 3)),
        ("v", "F32", (5, 3355443), repeat(fp32, 4 * 5 * 3355443)),
        ("q", "F8_E4M3", (9 * FRAME_VALUES + 7,), repeat(e4m3, 9 * FRAME_VALUES + 7)),
    ]
    r.write("big.safetensors", safetensors_bytes(tensors))
    del tensors
    for name in ("big.npy", "big.safetensors"):
        kind = name.split(".")[1]
        steps = [
            (["compress", "-q", name], None, None),
            (["compress", "-q", "-c", name], None, "stdout.spz"),
            (["decompress", "-q", "-f", name + ".spz", "-o", "back"], None, None),
            (["decompress", "-t", "-q", name + ".spz"], None, None),
            (["info", name + ".spz"], None, None),
            (["info", "--json", name + ".spz"], None, None),
        ]
        for args, stdin_file, stdout_file in steps:
            rc, err, rss = run_measured(r.exe, args, r.work, r.path(stdin_file) if stdin_file else None,
                                        r.path(stdout_file) if stdout_file else None)
            check(rc == 0, "splitzip %s failed: %s" % (" ".join(args), err))
            check(rss <= limit, "splitzip %s: max RSS %.1f MB > %.0f MB" % (" ".join(args), rss, limit))
            print("  %-52s max RSS %s" % ("splitzip " + " ".join(args),
                                             "%5.1f MB" % rss if rss >= 1 else "- (ended before a sample)"))
        same_bytes(r, name, "back")
        same_bytes(r, name + ".spz", "stdout.spz")
        # stdin is read whole and every frame coded by one call: the same container
        rc, err, _ = run_measured(r.exe, ["compress", "-q", "-o", "whole.spz", "-"], r.work, r.path(name))
        check(rc == 0, "compress from stdin failed: %s" % err)
        same_bytes(r, name + ".spz", "whole.spz")
        info = json.loads(r.ok(["info", "--json", name + ".spz"], record=False))
        check(info["decompressed_size"] == os.path.getsize(r.path(name)), "info's original size")
        for f in (name, name + ".spz", "back", "stdout.spz", "whole.spz"):
            os.unlink(r.path(f))
        r.note("%s: compress (to a file and to stdout), decompress, -t and info under %.0f MB; the frames of one "
               "encoder call" % (kind, limit))


class OnTerminal:
    """Runs the tool with stdout and stderr on a pseudo-terminal (so it draws progress as on a user's terminal) and
    stdin on a pipe fed with `data` in `pieces` pieces over `seconds` seconds, which keeps the tool busy for that
    long whatever the machine's speed. wait() returns (exit code, everything the terminal received)."""

    def __init__(self, r, args, data, pieces=1, seconds=0.0):
        import pty  # POSIX only, like the rest of these tests
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([r.exe] + args, cwd=r.work, stdin=subprocess.PIPE, stdout=slave, stderr=slave)
        os.close(slave)
        self.master = master
        self.received = bytearray()
        self.reader = threading.Thread(target=self._read)
        self.reader.start()
        self.feeder = threading.Thread(target=self._feed, args=(data, pieces, seconds))
        self.feeder.start()

    def _read(self):
        while True:
            try:
                got = os.read(self.master, 65536)
            except OSError:  # EIO: every writer of the terminal has exited
                break
            if not got:
                break
            self.received += got

    def _feed(self, data, pieces, seconds):
        step = (len(data) + pieces - 1) // pieces
        try:
            for i in range(0, len(data), step):
                self.proc.stdin.write(data[i:i + step])
                self.proc.stdin.flush()
                time.sleep(seconds / pieces)
        except BrokenPipeError:
            pass
        finally:
            self.proc.stdin.close()

    def wait(self):
        self.feeder.join()
        rc = self.proc.wait(timeout=120)
        self.reader.join()
        os.close(self.master)
        return rc, self.received.decode("utf-8", "replace")


PROGRESS_LINE = re.compile(r"splitzip: (\w+) stdin  ([0-9.]+ [kMGTP]?B)  ([0-9.]+) s$")


def progress_states(text, verb):
    """The progress lines a terminal was sent: each drawing is "\\r\\033[K" + the line; returns the (bytes done,
    seconds) of each, and whether the last drawing was erased before anything else was printed."""
    states = []
    for piece in text.replace("\r\n", "\n").split("\r"):
        line = piece.replace("\033[K", "", 1).split("\n")[0] if piece.startswith("\033[K") else None
        m = PROGRESS_LINE.match(line) if line else None
        if m:
            check(m.group(1) == verb, "progress says %r, not %r: %r" % (m.group(1), verb, line))
            states.append((m.group(2), m.group(3)))
    last = text.rfind("splitzip: %s stdin" % verb)
    erased = last >= 0 and text.find("\r\033[K", last) >= 0 and "\n" not in text[last:text.find("\r\033[K", last)]
    return states, erased


def case_progress(r, ctx):
    """On a terminal, compress and decompress draw a progress line that advances while they work and is erased
    at the end; -q prints nothing at all; -v adds frames, time and speed to the summary line, as --help says."""
    for cmd in ("compress", "decompress"):
        text = r.ok([cmd, "--help"], record=False)
        check("Print no summary line and no progress" in text, "%s --help: what -q does" % cmd)
        check("Also print frames, time and speed of each file" in text, "%s --help: what -v does" % cmd)
    # 64 MiB of KV-like BF16: 8 frames, each one advance of the progress line.
    block = gen_values("bf16", 1 << 15, 43)
    data = block * ((64 << 20) // len(block))
    frames = len(data) // (2 * FRAME_VALUES)
    # The line is drawn every 250 ms once a second has passed: feeding the input over 1.8 s gives 3 drawings or
    # more, a frame or more apart. The plain and the -q run of each command run side by side.
    slow = dict(pieces=36, seconds=1.8)
    plain = OnTerminal(r, ["compress", "--dtype", "bf16", "-", "-o", "kv.spz"], data, **slow)
    quiet = OnTerminal(r, ["compress", "-q", "--dtype", "bf16", "-", "-o", "kv_q.spz"], data, **slow)
    (rc, text), (rc_q, text_q) = plain.wait(), quiet.wait()
    check(rc == 0 and rc_q == 0, "compress on a terminal: exit %d / %d: %r %r" % (rc, rc_q, text, text_q))
    check(r.read("kv.spz") == r.read("kv_q.spz"), "-q writes the same frames")
    states, erased = progress_states(text, "compressing")
    check(len(set(b for b, _ in states)) >= 2, "compress: the progress line advances: %r" % text)
    check(erased, "compress: the progress line is erased at the end: %r" % text)
    check(text_q == "", "compress -q prints nothing: %r" % text_q)
    summary = re.compile(r"stdin: %d -> %d bytes \(ratio [0-9.]+\) -> kv\.spz\r?\n$" % (len(data),
                                                                                   len(r.read("kv.spz"))))
    check(summary.search(text), "compress: the summary line ends the output: %r" % text)
    frame_bytes = r.read("kv.spz")
    plain = OnTerminal(r, ["decompress", "-", "-o", "back.bin"], frame_bytes, **slow)
    quiet = OnTerminal(r, ["decompress", "-q", "-", "-o", "back_q.bin"], frame_bytes, **slow)
    (rc, text), (rc_q, text_q) = plain.wait(), quiet.wait()
    check(rc == 0 and rc_q == 0, "decompress on a terminal: exit %d / %d: %r %r" % (rc, rc_q, text, text_q))
    check(r.read("back.bin") == data and r.read("back_q.bin") == data, "decompress on a terminal: same bytes")
    states, erased = progress_states(text, "decompressing")
    check(len(set(b for b, _ in states)) >= 2, "decompress: the progress line advances: %r" % text)
    check(erased, "decompress: the progress line is erased at the end: %r" % text)
    check(text_q == "", "decompress -q prints nothing: %r" % text_q)
    # -v: the summary line with the frames, the time and the speed (fed at once: no progress is drawn)
    verbose = r"stdin: %d -> %d bytes \(ratio [0-9.]+, %d frames, [0-9.]+ s, [0-9.]+ MB/s\) -> %s\r?\n$"
    rc, text = OnTerminal(r, ["compress", "-v", "-f", "--dtype", "bf16", "-", "-o", "kv.spz"], data).wait()
    check(rc == 0 and re.match(verbose % (len(data), len(frame_bytes), frames, r"kv\.spz"), text),
          "compress -v: %r" % text)
    rc, text = OnTerminal(r, ["decompress", "-v", "-f", "-", "-o", "back.bin"], frame_bytes).wait()
    check(rc == 0 and re.match(verbose % (len(frame_bytes), len(data), frames, r"back\.bin"), text),
          "decompress -v: %r" % text)
    r.note("compress and decompress of %d frames on a terminal: progress advances and is erased; -q prints "
           "nothing; -v prints frames, time and speed" % frames)


def case_many_items(r, ctx):
    """A .safetensors file of 30,000 tensors (names not in index order): compress, info and decompress each take
    time about linear in the number of items (a pairwise index check took tens of seconds per command)."""
    n = 30000
    tensors = [("t%05d" % ((i * 7919) % n), "BF16", (1,), gen_values("bf16", 1, 0)) for i in range(n)]
    r.write("many.safetensors", safetensors_bytes(tensors))
    limit = 20.0
    for args in (["compress", "-q", "many.safetensors"], ["info", "--json", "many.safetensors.spz"],
                 ["decompress", "-q", "-f", "many.safetensors.spz", "-o", "back.safetensors"]):
        t0 = time.monotonic()
        out = r.ok(args, record=False)
        seconds = time.monotonic() - t0
        check(seconds < limit, "splitzip %s took %.1f s for %d items (limit %.0f s)" % (" ".join(args), seconds, n,
                                                                                      limit))
        if args[0] == "info":
            check(json.loads(out)["items"] == n + 1, "info counts every tensor and the header")
    same_bytes(r, "many.safetensors", "back.safetensors")


def case_safetensors_errors(r, ctx):
    base = sorted(os.listdir(r.work))
    good = gen_values("bf16", 8, 1)

    def raw_st(header, body):
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + body

    cases = [
        ("overlap.safetensors", raw_st({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
                                        "b": {"dtype": "BF16", "shape": [4], "data_offsets": [8, 16]}}, good)),
        ("beyond.safetensors", raw_st({"a": {"dtype": "BF16", "shape": [16], "data_offsets": [0, 32]}}, good)),
        ("shape.safetensors", raw_st({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 16]}}, good)),
        ("json.safetensors", struct.pack("<Q", 5) + b"{'a':" + good),
        ("hlen.safetensors", struct.pack("<Q", 1000) + b"{}"),
        ("tiny.safetensors", b"\x01\x02"),
        # shapes whose byte size wraps to 0 in 64 bits: a stored tensor once kept the bogus shape
        ("wrap.safetensors", raw_st({"a": {"dtype": "I32", "shape": [1 << 62], "data_offsets": [0, 0]}}, good)),
        ("wrapf.safetensors", raw_st({"a": {"dtype": "F32", "shape": [1 << 31, 1 << 31], "data_offsets": [0, 0]}},
                                     good)),
    ]
    for name, data in cases:
        r.write(name, data)
        r.fails(["compress", name])
    no_leftovers(r, base + [c[0] for c in cases])


def case_errors(r, ctx):
    """Bad arguments and bad files: 'splitzip: error: ...', a non-zero exit code, nothing written."""
    r.write("a.bin", gen_values("bf16", 100, 1))
    r.write("odd.bin", b"\x01\x02\x03")
    r.fails(["compress", "a.bin"])                                  # raw needs --dtype
    r.fails(["compress", "--dtype", "bf17", "a.bin"])               # unknown dtype
    r.fails(["compress", "--dtype", "bf16", "odd.bin"])             # not a whole number of values
    r.fails(["compress", "--dtype", "bf16", "missing.bin"])         # no such file
    r.fails(["compress", "--dtype", "bf16", "--chunk-log2", "7", "a.bin"])   # out of range
    r.fails(["compress", "--dtype", "bf16", "--chunk-log2", "x", "a.bin"], expect_rc=2, record=False)  # CLI11 text
    r.fails(["frobnicate"], expect_rc=2)                            # unknown command
    r.fails(["compress", "--dtype", "bf16", "--kind", "q", "a.bin"])
    r.fails(["compress", "--dtype", "bf16", "--codebook", "a.bin", "a.bin"])  # not a codebook
    r.fails(["compress", "--dtype", "bf16", "-o", "x.spz", "a.bin", "odd.bin"])  # -o with two inputs
    no_leftovers(r, ["a.bin", "odd.bin"])
    # Existing output: refused without -f (and left untouched), replaced with -f.
    r.write("a.bin.spz", b"keep me")
    r.fails(["compress", "--dtype", "bf16", "a.bin"])
    check(r.read("a.bin.spz") == b"keep me", "an existing output is not touched without -f")
    r.ok(["compress", "-f", "--dtype", "bf16", "a.bin"])
    check(r.read("a.bin.spz") != b"keep me", "-f overwrites")
    # Decompress: unknown suffix, not SplitZip, already SplitZip input to compress.
    r.fails(["decompress", "a.bin"])
    r.fails(["decompress", "a.bin", "-o", "a.out"])
    r.fails(["compress", "--dtype", "bf16", "a.bin.spz"])
    r.fails(["compress", "--dtype", "bf16", "a.bin", "-o", "a.bin"])
    r.fails(["info", "a.bin"])
    r.fails(["info", "odd.bin"])
    no_leftovers(r, ["a.bin", "odd.bin", "a.bin.spz"])
    # --rm removes the input after success only.
    r.write("gone.bin", gen_values("fp32", 10, 2))
    r.ok(["compress", "-q", "--rm", "--dtype", "fp32", "gone.bin"])
    check(not os.path.exists(r.path("gone.bin")), "--rm removed the input")
    r.write("stay.bin", gen_values("fp32", 10, 3))
    r.ok(["compress", "--rm", "-c", "--dtype", "fp32", "stay.bin"], binary_stdout=True)
    check(os.path.exists(r.path("stay.bin")), "--rm keeps the input when the output went to stdout")
    r.fails(["compress", "--rm", "--dtype", "fp32", "odd.bin"])
    check(os.path.exists(r.path("odd.bin")), "a failed --rm run keeps its input")


def case_corrupt(r, ctx):
    """Corrupt and truncated frames/containers are rejected with their status name, and leave no output file; an
    existing file is not replaced by a failed decompress -f."""
    data = gen_values("bf16", 9000, 9)
    r.write("c.bin", data)
    r.ok(["compress", "-q", "--dtype", "bf16", "c.bin"], record=False)
    frame = r.read("c.bin.spz")
    os.remove(r.path("c.bin"))
    flips = {
        "magic.spz": 0,            # magic
        "version.spz": 4,          # version
        "header.spz": 20,          # header checksum catches it
        "rest.spz": len(frame) - 2000,  # inside the rest/exponent data: a chunk checksum catches it
    }
    for name, pos in flips.items():
        b = bytearray(frame)
        b[pos] ^= 0x10
        r.write(name, bytes(b))
        r.fails(["decompress", name])
    r.write("trunc.spz", frame[:-1])
    r.fails(["decompress", "trunc.spz"])
    r.write("tiny.spz", frame[:2])
    r.fails(["decompress", "tiny.spz"])
    r.write("empty.spz", b"")
    r.fails(["decompress", "empty.spz"])
    r.write("extra.spz", frame + b"\0")
    r.fails(["decompress", "extra.spz"])
    allowed = ["c.bin.spz"] + list(flips) + ["trunc.spz", "tiny.spz", "empty.spz", "extra.spz"]
    no_leftovers(r, allowed)
    r.write("rest", b"precious")
    r.fails(["decompress", "-f", "rest.spz"])
    check(r.read("rest") == b"precious", "a failed decompress -f leaves the existing file alone")
    r.fails(["decompress", "-t", "rest.spz"])
    r.ok(["decompress", "-t", "c.bin.spz"])
    # A container with a corrupted item and one with a broken index.
    r.write("t.safetensors", safetensors_bytes([("k", "BF16", (4096,), gen_values("bf16", 4096, 1))]))
    r.ok(["compress", "-q", "t.safetensors"], record=False)
    cont = bytearray(r.read("t.safetensors.spz"))
    cont[len(cont) - 8000] ^= 1
    r.write("item.spz", bytes(cont))
    r.fails(["decompress", "item.spz", "-o", "item.out"])
    cont = bytearray(r.read("t.safetensors.spz"))
    cont[-40] ^= 1
    r.write("index.spz", bytes(cont))
    r.fails(["decompress", "index.spz", "-o", "index.out"])
    r.fails(["info", "index.spz"])
    check(not os.path.exists(r.path("item.out")) and not os.path.exists(r.path("index.out")), "no partial outputs")


def case_interrupt(r, ctx):
    """SIGINT while the tool waits on stdin removes its temporary output file."""
    proc = subprocess.Popen([r.exe, "compress", "--dtype", "bf16", "-", "-o", "int.spz"], cwd=r.work,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"\0" * 4096)
    proc.stdin.flush()
    deadline = time.time() + 20
    while time.time() < deadline and not any(n.startswith(".int.spz.tmp") for n in os.listdir(r.work)):
        time.sleep(0.05)
    check(any(n.startswith(".int.spz.tmp") for n in os.listdir(r.work)), "the temporary output file appears")
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    check(proc.returncode != 0, "interrupted run fails")
    no_leftovers(r, [])


def case_calibrate(r, ctx):
    """calibrate over raw, .npy and .safetensors samples; the codebook is used by compress; dtype mismatches fail."""
    r.write("s1.bin", gen_values("fp8_e4m3", 20000, 31))
    r.write("s2.npy", npy_bytes("|u1", (10000,), gen_values("fp8_e4m3", 10000, 32)))
    r.write("s3.safetensors", safetensors_bytes([("x", "F8_E4M3", (5000,), gen_values("fp8_e4m3", 5000, 33)),
                                                 ("y", "BF16", (100,), gen_values("bf16", 100, 34))]))
    r.ok(["calibrate", "--dtype", "fp8_e4m3", "s1.bin", "s2.npy", "s3.safetensors", "-o", "e4m3.spzb"])
    r.ok(["info", "e4m3.spzb"])
    r.fails(["calibrate", "--dtype", "fp8_e4m3", "s1.bin", "-o", "e4m3.spzb"])  # exists
    r.fails(["calibrate", "s3.safetensors", "-o", "mixed.spzb"])                 # two dtypes, no --dtype
    r.fails(["calibrate", "--dtype", "bf16", "s2.npy", "-o", "bf.spzb"])         # |u1 is not 2 bytes
    r.write("d.bin", gen_values("fp8_e4m3", 8000, 35))
    r.ok(["compress", "--dtype", "fp8_e4m3", "--codebook", "e4m3.spzb", "d.bin"])
    r.fails(["compress", "--dtype", "bf16", "--codebook", "e4m3.spzb", "s1.bin", "-o", "wrong.spz"])
    no_leftovers(r, ["s1.bin", "s2.npy", "s3.safetensors", "e4m3.spzb", "d.bin", "d.bin.spz"])


def kv_tokens(data, layers, tokens, period, first, count, wb=2):
    """Tokens [first, first + count) of every (layer, K/V) tensor of a raw KV file [layers][2][tokens][period]."""
    row = period * wb
    out = bytearray()
    for t in range(2 * layers):
        base = (t * tokens + first) * row
        out += data[base:base + count * row]
    return bytes(out)


def case_channel_book(r, ctx):
    """Channel books on real KV (data/kv_code_bf16_slice.bin, [8][2][224][4][64]): calibrate on two files of
    different lengths (T = *), compress held-out tokens into a container of the book and one frame per tensor,
    which restores the file and codes smaller than the global codebook; shape, dtype and book mismatches fail."""
    path = os.path.join(REPO, "data", "kv_code_bf16_slice.bin")
    if not os.path.exists(path):
        raise Skip("data/kv_code_bf16_slice.bin is absent")
    with open(path, "rb") as f:
        kv = f.read()
    r.write("calib_a.bin", kv_tokens(kv, 8, 224, 256, 0, 64))
    r.write("calib_b.bin", kv_tokens(kv, 8, 224, 256, 64, 48))
    r.write("held.bin", kv_tokens(kv, 8, 224, 256, 112, 112))
    shape = "8,2,*,4,64"
    r.ok(["calibrate", "--dtype", "bf16", "--kv-shape", shape, "calib_a.bin", "calib_b.bin", "-o", "kv.book"])
    r.ok(["info", "kv.book"])
    r.ok(["compress", "--dtype", "bf16", "--kv-shape", "8,2,112,4,64", "--codebook", "kv.book", "held.bin"])
    r.ok(["info", "held.bin.spz"])
    info = json.loads(r.ok(["info", "--json", "held.bin.spz"], record=False))
    kinds = [it["kind"] for it in info["item_list"]]
    check(kinds == ["book"] + ["frame"] * 16, "a book, then one frame per tensor: %s" % kinds)
    check([it["name"] for it in info["item_list"][1:3]] == ["layer0.k", "layer0.v"], "tensor names")
    os.rename(r.path("held.bin"), r.path("held.orig"))
    r.ok(["decompress", "held.bin.spz"])
    same_bytes(r, "held.bin", "held.orig")
    r.ok(["decompress", "-t", "held.bin.spz"])
    r.ok(["compress", "--dtype", "bf16", "held.bin", "-o", "global.spz"])
    channel_size, global_size = os.path.getsize(r.path("held.bin.spz")), os.path.getsize(r.path("global.spz"))
    r.note("channel book %d bytes, global codebook %d bytes" % (channel_size, global_size))
    check(channel_size < global_size, "the channel book codes smaller than the global codebook")
    r.fails(["compress", "--dtype", "bf16", "--kv-shape", "8,2,100,4,64", "--codebook", "kv.book", "held.bin",
             "-o", "x.spz"])                                                           # not 100 tokens
    r.fails(["compress", "--dtype", "bf16", "--kv-shape", "4,2,*,8,64", "--codebook", "kv.book", "held.bin",
             "-o", "x.spz"])                                                           # other period
    r.fails(["compress", "--dtype", "fp16", "--kv-shape", shape, "--codebook", "kv.book", "held.bin", "-o", "x.spz"])
    r.fails(["compress", "--dtype", "bf16", "--codebook", "kv.book", "held.bin", "-o", "x.spz"])   # no --kv-shape
    r.fails(["compress", "--dtype", "bf16", "--kv-shape", shape, "held.bin", "-o", "x.spz"])        # no book
    r.fails(["compress", "--dtype", "bf16", "--kv-shape", "8,3,*,4,64", "--codebook", "kv.book", "held.bin",
             "-o", "x.spz"])
    r.fails(["calibrate", "--dtype", "bf16", "--kv-shape", "8,2,*,4,64", "held.bin", "calib_odd.bin", "-o", "y.book"])
    r.write("calib_odd.bin", kv[:1000])
    r.fails(["calibrate", "--dtype", "bf16", "--kv-shape", shape, "calib_odd.bin", "-o", "y.book"])  # no whole tokens
    # A frame whose book is not in the container: drop the book item's bytes' magic -> the container is rejected.
    data = bytearray(r.read("held.bin.spz"))
    data[64] ^= 0xFF
    r.write("bad.spz", bytes(data))
    r.fails(["decompress", "bad.spz", "-o", "bad.out"])
    no_leftovers(r, ["calib_a.bin", "calib_b.bin", "calib_odd.bin", "held.orig", "held.bin", "held.bin.spz",
                     "global.spz", "kv.book", "bad.spz"])


def case_max_mode(r, ctx):
    """Max mode on real KV (data/kv_code_bf16_slice.bin): calibrate a symbol table on some tokens, compress held-out
    tokens into a container of the table and one entropy-coded frame per tensor, which restores the file and codes
    smaller than the channel book; wrong tables, shapes and modes fail with a message, and a damaged frame is
    rejected without output."""
    path = os.path.join(REPO, "data", "kv_code_bf16_slice.bin")
    if not os.path.exists(path):
        raise Skip("data/kv_code_bf16_slice.bin is absent")
    with open(path, "rb") as f:
        kv = f.read()
    r.write("calib.bin", kv_tokens(kv, 8, 224, 256, 0, 112))
    r.write("held.bin", kv_tokens(kv, 8, 224, 256, 112, 112))
    shape = "8,2,*,4,64"
    r.ok(["calibrate", "--mode", "max", "--groups", "16", "--dtype", "bf16", "--kv-shape", shape, "calib.bin",
          "-o", "kv.spzt"])
    r.ok(["info", "kv.spzt"])
    r.ok(["calibrate", "--dtype", "bf16", "--kv-shape", shape, "calib.bin", "-o", "kv.book"])
    r.ok(["compress", "--mode", "max", "--dtype", "bf16", "--kv-shape", shape, "--codebook", "kv.spzt", "held.bin"])
    r.ok(["info", "held.bin.spz"])
    info = json.loads(r.ok(["info", "--json", "held.bin.spz"], record=False))
    kinds = [it["kind"] for it in info["item_list"]]
    check(kinds == ["table"] + ["frame"] * 16, "a table, then one frame per tensor: %s" % kinds)
    check(all(it.get("entropy_coded") for it in info["item_list"][1:]), "every frame is entropy-coded")
    os.rename(r.path("held.bin"), r.path("held.orig"))
    r.ok(["decompress", "held.bin.spz"])
    same_bytes(r, "held.bin", "held.orig")
    r.ok(["compress", "--dtype", "bf16", "--kv-shape", shape, "--codebook", "kv.book", "held.bin", "-o", "fast.spz"])
    max_size, fast_size = os.path.getsize(r.path("held.bin.spz")), os.path.getsize(r.path("fast.spz"))
    r.note("max mode %d bytes, channel book %d bytes" % (max_size, fast_size))
    check(max_size < fast_size, "max mode codes smaller than the channel book")
    r.fails(["compress", "--mode", "max", "--dtype", "bf16", "--kv-shape", shape, "--codebook", "kv.book", "held.bin",
             "-o", "x.spz"])                                                # a channel book is not a symbol table
    r.fails(["compress", "--dtype", "bf16", "--kv-shape", shape, "--codebook", "kv.spzt", "held.bin", "-o", "x.spz"])
    r.fails(["compress", "--mode", "max", "--dtype", "bf16", "--kv-shape", shape, "held.bin", "-o", "x.spz"])
    r.fails(["compress", "--mode", "max", "--dtype", "bf16", "--codebook", "kv.spzt", "held.bin", "-o", "x.spz"])
    r.fails(["compress", "--mode", "max", "--dtype", "bf16", "--kv-shape", "4,2,*,8,64", "--codebook", "kv.spzt",
             "held.bin", "-o", "x.spz"])                                    # other shape
    r.fails(["compress", "--mode", "best", "--dtype", "bf16", "held.bin", "-o", "x.spz"])
    r.fails(["calibrate", "--mode", "max", "--dtype", "bf16", "calib.bin", "-o", "y.spzt"])      # no --kv-shape
    r.fails(["calibrate", "--mode", "max", "--groups", "0", "--dtype", "bf16", "--kv-shape", shape, "calib.bin",
             "-o", "y.spzt"])
    # A table with a damaged byte is refused, and so is a container whose frame is damaged.
    table = bytearray(r.read("kv.spzt"))
    table[30] ^= 0x01
    r.write("bad.spzt", bytes(table))
    r.fails(["info", "bad.spzt"])
    data = bytearray(r.read("held.bin.spz"))
    frame = info["item_list"][5]
    data[frame["data_offset"] + frame["data_size"] - 3] ^= 0x20
    r.write("bad.spz", bytes(data))
    r.fails(["decompress", "bad.spz", "-o", "bad.out"])
    no_leftovers(r, ["calib.bin", "held.orig", "held.bin", "held.bin.spz", "fast.spz", "kv.spzt", "kv.book",
                     "bad.spzt", "bad.spz"])


def paired_kv(tokens, layers, period, seed):
    """A raw FP8 KV cache [layers][2][tokens][period] of a token sequence: layer 0's V row is a function of the token
    (as in a real model), every other row repeats each byte of its token's previous row with probability 5/8 and is
    KV-like otherwise (gen_values). No byte is 0x7F (the pair symbol) unless a repeat copies one."""
    rng = Lcg(seed)
    fresh = bytearray(gen_values("fp8_e5m2", 2 * layers * len(tokens) * period, seed))
    fresh = bytearray(b if b != 0x7F else 0x7E for b in fresh)
    out = bytearray()
    for t in range(2 * layers):
        rows, last = [], {}
        for i, tok in enumerate(tokens):
            base = (t * len(tokens) + i) * period
            row = bytearray(fresh[base:base + period])
            if t == 1:
                row = bytearray(((tok * 37 + c * 11) % 126) + 1 for c in range(period))
            elif tok in last:
                prev = rows[last[tok]]
                for c in range(period):
                    if rng.next32() % 8 < 5:
                        row[c] = prev[c]
            last[tok] = i
            rows.append(row)
        for row in rows:
            out += row
    return bytes(out)


def case_paired_rows(r, ctx):
    """Max mode with paired rows (FP8, docs/FORMAT.md §4.10.6): a table calibrated with --pair-rows, KV compressed
    with --pair-rows (the row map from the input's layer-0 V rows, stored in the container) and with --row-map FILE
    (the same map as a file: the same container), restored byte for byte and smaller than without pairs; the
    options' misuse fails with a message, and so does a container whose row map is damaged."""
    rng = Lcg(5)
    tokens = [rng.next32() % 23 for _ in range(300)]
    shape = "2,2,*,2,16"
    r.write("calib.bin", paired_kv(tokens[:150], 2, 32, 1))
    r.write("held.bin", paired_kv(tokens[150:], 2, 32, 2))
    r.ok(["calibrate", "--mode", "max", "--pair-rows", "--groups", "4", "--dtype", "fp8_e5m2", "--kv-shape", shape,
          "calib.bin", "-o", "paired.spzt"])
    r.ok(["calibrate", "--mode", "max", "--groups", "4", "--dtype", "fp8_e5m2", "--kv-shape", shape, "calib.bin",
          "-o", "plain.spzt"])
    r.ok(["compress", "--mode", "max", "--pair-rows", "--dtype", "fp8_e5m2", "--kv-shape", shape, "--codebook",
          "paired.spzt", "held.bin"])
    r.ok(["info", "held.bin.spz"])
    info = json.loads(r.ok(["info", "--json", "held.bin.spz"], record=False))
    kinds = [it["kind"] for it in info["item_list"]]
    check(kinds == ["table", "rowmap"] + ["frame"] * 4, "a table, the row map, then the frames: %s" % kinds)
    r.ok(["compress", "--mode", "max", "--dtype", "fp8_e5m2", "--kv-shape", shape, "--codebook", "plain.spzt",
          "held.bin", "-o", "plain.spz"])
    paired_size, plain_size = os.path.getsize(r.path("held.bin.spz")), os.path.getsize(r.path("plain.spz"))
    r.note("paired rows %d bytes, without %d bytes" % (paired_size, plain_size))
    check(paired_size * 1.2 < plain_size, "paired rows code smaller")
    os.rename(r.path("held.bin"), r.path("held.orig"))
    r.ok(["decompress", "held.bin.spz"])
    same_bytes(r, "held.bin", "held.orig")
    # The row map item as a file, given with --row-map: the same container.
    data = r.read("held.bin.spz")
    rm = info["item_list"][1]
    r.write("rows.spzr", data[rm["data_offset"]:rm["data_offset"] + rm["data_size"]])
    r.ok(["info", "rows.spzr"])
    r.ok(["compress", "--mode", "max", "--row-map", "rows.spzr", "--dtype", "fp8_e5m2", "--kv-shape", shape,
          "--codebook", "paired.spzt", "held.bin", "-o", "again.spz"])
    same_bytes(r, "again.spz", "held.bin.spz")
    r.fails(["compress", "--pair-rows", "--dtype", "fp8_e5m2", "held.bin", "-o", "x.spz"])        # not --mode max
    r.fails(["compress", "--mode", "max", "--pair-rows", "--row-map", "rows.spzr", "--dtype", "fp8_e5m2",
             "--kv-shape", shape, "--codebook", "paired.spzt", "held.bin", "-o", "x.spz"])      # both
    r.fails(["compress", "--mode", "max", "--row-map", "paired.spzt", "--dtype", "fp8_e5m2", "--kv-shape", shape,
             "--codebook", "paired.spzt", "held.bin", "-o", "x.spz"])                           # not a row map
    r.fails(["calibrate", "--pair-rows", "--dtype", "fp8_e5m2", "--kv-shape", shape, "calib.bin", "-o", "y.book"])
    bad = bytearray(data)
    bad[rm["data_offset"] + 20] ^= 0x01
    r.write("bad.spz", bytes(bad))
    r.fails(["decompress", "bad.spz", "-o", "bad.out"])
    no_leftovers(r, ["calib.bin", "held.orig", "held.bin", "held.bin.spz", "plain.spz", "paired.spzt", "plain.spzt",
                     "rows.spzr", "again.spz", "bad.spz"])


def bench_rows(out):
    rows = [l for l in out.splitlines() if " cpu x" in l or " gpu" in l]
    check(rows, "bench printed rows:\n" + out)
    for l in rows:
        check(l.rstrip().endswith("yes"), "bench row is bit-exact: " + l)
    return rows


def case_bench_repo_data(r, ctx):
    """The README's main job on the KV slice shipped in data/: bit-exact, and a real compression ratio."""
    path = os.path.join(REPO, "data", "kv_code_bf16_slice.bin")
    if not os.path.exists(path):
        raise Skip("data/kv_code_bf16_slice.bin is absent")
    out = r.ok(["bench", "--iters", "1", "--threads", "1,2", "--dtype", "bf16", path], record=False)
    rows = bench_rows(out)
    ratio, ideal = float(rows[0].split()[3]), float(rows[0].split()[4])
    check(ratio > 1.2, "real BF16 KV compresses (ratio %.4f)" % ratio)
    # Frame overhead (header, index, checksums, padding) is small: within 1% of the ideal for the same codebook.
    check(ideal * 0.99 <= ratio <= ideal, "ratio %.4f vs ideal %.4f" % (ratio, ideal))
    shutil.copy(path, r.path("kv.bin"))
    r.ok(["compress", "-q", "--dtype", "bf16", "kv.bin"], record=False)
    os.rename(r.path("kv.bin"), r.path("kv.orig"))
    r.ok(["decompress", "-q", "kv.bin.spz"], record=False)
    same_bytes(r, "kv.bin", "kv.orig")


def case_bench_formats(r, ctx):
    """bench on .npy and mixed-dtype .safetensors inputs (every dtype, empty and tiny tensors, awkward sizes): every
    row (CPU, and GPU when this build has CUDA and a device) is bit-exact."""
    tensors = [("t%d" % i, st, (n,), gen_values(dt, n, 40 + i))
               for i, (st, dt, n) in enumerate([("BF16", "bf16", 70001), ("F16", "fp16", 4097), ("F32", "fp32", 9),
                                                ("F8_E4M3", "fp8_e4m3", 12345), ("F8_E5M2", "fp8_e5m2", 1),
                                                ("BF16", "bf16", 0), ("I32", None, 3)])
               if dt is not None] + [("ids", "I32", (3,), b"\0" * 12)]
    r.write("mix.safetensors", safetensors_bytes(tensors))
    r.write("a.npy", npy_bytes("<f4", (3, 333), gen_values("fp32", 999, 50)))
    out = r.ok(["bench", "--iters", "2", "--threads", "1,2", "mix.safetensors", "a.npy"], record=False)
    rows = bench_rows(out)
    check(any(" mixed " in l for l in rows), "a mixed-dtype file is labelled mixed")
    r.write("r.bin", gen_values("fp8_e5m2", 5000, 51))
    rows = bench_rows(r.ok(["bench", "--iters", "1", "r.bin:fp8_e5m2", "--no-checksum", "--chunk-log2", "8"],
                           record=False))
    check(all(" fp8_e5m2 " in l for l in rows), "FILE:DTYPE sets the dtype")
    r.fails(["bench", "r.bin"])


def case_bench_shared_data(r, ctx):
    """bench and round trips on every real KV file in ../shared/data/kv (skipped when absent)."""
    base = ctx.shared or os.path.join(os.path.dirname(REPO), "shared", "data")
    kv = os.path.join(base, "kv", "trained-d512")
    if not os.path.isdir(kv):
        raise Skip("%s is absent: no shared KV data on this machine" % kv)
    args = []
    for name, dtype in (("kv_code_bf16.bin", "bf16"), ("kv_prose_bf16.bin", "bf16"),
                        ("kv_code_e4m3.bin", "fp8_e4m3"), ("kv_code_e5m2.bin", "fp8_e5m2")):
        p = os.path.join(kv, name)
        if os.path.exists(p):
            args.append(p + ":" + dtype)
    if not args:
        raise Skip("no KV files in %s" % kv)
    out = r.ok(["bench", "--iters", "1", "--cpu"] + args, record=False)
    bench_rows(out)
    sys.stdout.write(out)


CASES = {
    "help": case_help,
    "raw_roundtrip": case_raw_roundtrip,
    "stdio": case_stdio,
    "info": case_info,
    "npy": case_npy,
    "npy_errors": case_npy_errors,
    "safetensors": case_safetensors,
    "safetensors_errors": case_safetensors_errors,
    "many_items": case_many_items,
    "stream": case_stream,
    "stream_memory": case_stream_memory,
    "container_memory": case_container_memory,
    "progress": case_progress,
    "info_names": case_info_names,
    "errors": case_errors,
    "corrupt": case_corrupt,
    "interrupt": case_interrupt,
    "calibrate": case_calibrate,
    "channel_book": case_channel_book,
    "max_mode": case_max_mode,
    "paired_rows": case_paired_rows,
    "bench_repo_data": case_bench_repo_data,
    "bench_formats": case_bench_formats,
    "bench_shared_data": case_bench_shared_data,
}


def run_case(name, args):
    work = os.path.join(os.path.abspath(args.work), name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    r = Runner(os.path.abspath(args.splitzip), work)
    try:
        CASES[name](r, args)
    except Skip as e:
        print("SKIP %s: %s" % (name, e))
        return SKIP
    except (Failure, subprocess.TimeoutExpired) as e:
        print("FAIL %s: %s" % (name, e))
        return 1
    expected_path = os.path.join(EXPECTED_DIR, name + ".txt")
    got = "\n".join(r.transcript) + "\n" if r.transcript else ""
    if args.update:
        if got:
            with open(expected_path, "w") as f:
                f.write(got)
        print("UPDATED %s" % name)
        return 0
    if got:
        if not os.path.exists(expected_path):
            print("FAIL %s: no expected output %s (run with --update)" % (name, expected_path))
            sys.stdout.write(got)
            return 1
        with open(expected_path) as f:
            want = f.read()
        if want != got:
            import difflib
            print("FAIL %s: output differs from %s" % (name, expected_path))
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "expected", "got"))
            return 1
    shutil.rmtree(work, ignore_errors=True)
    print("PASS %s" % name)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splitzip", required=True, help="the splitzip executable")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--case", default="all", help="one of: all, " + ", ".join(CASES))
    ap.add_argument("--shared", default=None, help="the shared data folder (default: ../shared/data of the repo)")
    ap.add_argument("--update", action="store_true", help="rewrite the expected outputs")
    args = ap.parse_args()
    names = list(CASES) if args.case == "all" else [args.case]
    for n in names:
        if n not in CASES:
            ap.error("unknown case %s" % n)
    results = [run_case(n, args) for n in names]
    if any(x == 1 for x in results):
        return 1
    if len(names) == 1 and results[0] == SKIP:
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
