#!/usr/bin/env python3
"""The max mode's ratio table on every real KV data set present, next to its peers on the same bytes.

For each data set and dtype it runs bench/ratio_max.cpp (target splitzip_ratio_max: max mode, fast mode with a
channel book, FP8 with paired rows, zstd -1 / -3 / -19, lz4, the channel-conditioned bound, the max mode's CPU speed; tables and books
calibrated on the code text, applied to the prose text), and adds ZipNN (PyPI `zipnn`, one thread, the dtype's
byte grouping) on the same bytes: the prose file's K tensors concatenated, its V tensors concatenated, K+V the sum
of the two sizes, as the tool does for zstd and lz4. Every ZipNN round trip is checked. Data sets that are absent
are skipped with a note; without `zipnn` installed the ZipNN column says so.

    python3 bench/ratio_max.py BUILD_DIR [--smollm2 DIR] [--shared DIR] [--markdown OUT.md]

Data: SmolLM2-135M (bench/models/smollm2_kv.py writes .devdata/smollm2/{code,prose}_<dtype>.bin, 2048 tokens by
default; the token count is read from the file size) and trained-d512 (../shared/data/kv/trained-d512). The raw
lines of the tool go to stdout as they come; --markdown writes the table (one row per data set, dtype and part).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"bf16": ("bf16", 2), "fp16": ("fp16", 2), "fp32": ("fp32", 4), "e4m3": ("fp8_e4m3", 1),
          "e5m2": ("fp8_e5m2", 1)}
ZIPNN_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8_e4m3": "float8_e4m3fn",
                "fp8_e5m2": "float8_e5m2"}
COLUMNS = ["max", "paired", "fast", "zstd-1", "zstd-3", "zstd-19", "lz4", "bound", "frac"]


def data_sets(smollm2: Path, shared: Path):
    """(label, file suffix, (L, H, D), calibration file, measured file) of every data set this script knows."""
    for suffix in ("bf16", "fp16", "fp32", "e4m3", "e5m2"):
        yield "SmolLM2-135M", suffix, (30, 3, 64), smollm2 / f"code_{suffix}.bin", smollm2 / f"prose_{suffix}.bin"
    d512 = shared / "kv" / "trained-d512"
    for suffix in ("bf16", "e4m3", "e5m2"):
        yield "trained-d512", suffix, (8, 4, 64), d512 / f"kv_code_{suffix}.bin", d512 / f"kv_prose_{suffix}.bin"


def zipnn_sizes(path: Path, dtype: str, layers: int):
    """ZipNN's compressed sizes of the file's K and V tensors (each concatenated), or a reason it did not run."""
    try:
        warnings.filterwarnings("ignore")
        import zipnn
    except ImportError:
        return "zipnn not installed (pip install zipnn)"
    raw = np.fromfile(path, dtype=np.uint8).reshape(layers, 2, -1)
    z = zipnn.ZipNN(input_format="byte", bytearray_dtype=ZIPNN_DTYPES[dtype], threads=1)
    sizes = []
    for kv in (0, 1):
        part = np.ascontiguousarray(raw[:, kv]).tobytes()
        # (zipnn rewrites the buffer it is given in place for some dtypes: it gets a copy, the check the original)
        comp = z.compress(bytes(bytearray(part)))
        if bytes(z.decompress(comp)) != part:
            raise SystemExit(f"ZipNN's round trip of {path} ({'KV'[kv]}) differs")
        sizes.append(len(comp))
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path, help="a build directory with bench/splitzip_ratio_max")
    ap.add_argument("--smollm2", type=Path, default=ROOT / ".devdata" / "smollm2")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--markdown", type=Path, help="write the table here")
    args = ap.parse_args()
    tool = args.build / "bench" / "splitzip_ratio_max"
    if not tool.exists():
        raise SystemExit(f"{tool} not found: build the target splitzip_ratio_max first")
    rows, notes = [], []
    for label, suffix, (L, H, D), calib, measure in data_sets(args.smollm2, args.shared):
        dtype, vb = DTYPES[suffix]
        if not calib.exists() or not measure.exists():
            notes.append(f"{label} {dtype}: skipped ({calib} or {measure} absent)")
            print(f"# {notes[-1]}", flush=True)
            continue
        tokens = measure.stat().st_size // (L * 2 * H * D * vb)
        out = subprocess.run([str(tool), "--label", label, "--dtype", dtype, "--kv-shape", f"{L},2,{tokens},{H},{D}",
                              "--calib", str(calib), "--measure", str(measure)], check=True, capture_output=True,
                             text=True).stdout
        print(out, end="", flush=True)
        z = zipnn_sizes(measure, dtype, L)
        if isinstance(z, str):
            notes.append(z)
        raw_part = measure.stat().st_size / 2
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 + len(COLUMNS) and f[2] in ("K", "V", "K+V") and f[0] != "data":
                vals = dict(zip(COLUMNS, map(float, f[3:])))
                part = f[2]
                if isinstance(z, list):
                    size = z[0] + z[1] if part == "K+V" else z["KV".index(part)]
                    vals["zipnn"] = (2 * raw_part if part == "K+V" else raw_part) / size
                rows.append((label, tokens, dtype, part, vals))
            elif "symbol table" in line:
                rows.append((label, tokens, dtype, "speed", line.split("): ", 1)[-1]))
    if args.markdown:
        md = ["| data | tokens | dtype | part | max mode | max, paired rows | fast mode | zstd -1 | zstd -3 | zstd -19 "
              "| lz4 | ZipNN | bound | max / bound | best max / best peer |",
              "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, tokens, dtype, part, v in rows:
            if part == "speed":
                continue
            peers = [v[k] for k in ("zstd-1", "zstd-3", "zstd-19", "lz4", "zipnn") if k in v]
            zn = f"{v['zipnn']:.3f}" if "zipnn" in v else "–"
            paired = v["paired"] == v["paired"]  # NaN: not an FP8 dtype
            pv = f"{v['paired']:.3f}" if paired else "–"
            best = max(v["max"], v["paired"]) if paired else v["max"]
            md.append(f"| {label} | {tokens} | {dtype} | {part} | {v['max']:.3f} | {pv} | {v['fast']:.3f} | "
                      f"{v['zstd-1']:.3f} | {v['zstd-3']:.3f} | {v['zstd-19']:.3f} | {v['lz4']:.3f} | {zn} | "
                      f"{v['bound']:.3f} | {v['frac']:.3f} | {best / max(peers):.3f} |")
        md += [""] + [f"- {n}" for n in dict.fromkeys(notes)]
        args.markdown.write_text("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
