#!/usr/bin/env python3
"""Attributes an Nsight Compute SourceCounters profile (run_device.sh step `sass`) to source lines: the kernel's
executed warp instructions and stall samples summed per line of the CUDA sources, from the line table of the same
binary (run_device.sh step `disasm`: nvdisasm with line and inline information of a build with -lineinfo).

    python3 bench/gpu/sass_lines.py sass_decode_kernel.csv.gz disasm.txt.gz --per 32768 --top 40 \
        [--frame agent/decode.cuh]

Each function of the disassembly is found in the profile by its first instructions' text (branch targets and
addresses masked) and then paired with it instruction by instruction. --frame F: attribute inlined code to the innermost call site in a file whose path ends in F
(e.g. the decoder's round loop), else to the innermost line.
"""
import argparse
import collections
import gzip
import re

from sass_hot import num, rows

LINE = re.compile(r'//## File "([^"]+)", line (\d+)(.*)')
INLINED = re.compile(r'inlined at "([^"]+)", line (\d+)')
INSN = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')
ADDR = re.compile(r'0x[0-9a-f]{8,}|`\([^)]*\)')


def norm(text):
    return " ".join(ADDR.sub("T", text.replace(";", " ")).split())


def read_disasm(path):
    """[(function, [(normalized text, [(file, line), ... innermost first]), ...]), ...]"""
    opener = gzip.open if path.endswith(".gz") else open
    funcs, cur, where = [], None, []
    with opener(path, "rt") as f:
        for raw in f:
            s = raw.strip()
            if s.startswith(".text.") and s.endswith(":"):
                cur = (s[6:-1], [])
                funcs.append(cur)
                where = []
                continue
            m = LINE.search(s)
            if m:
                where = [(m.group(1), int(m.group(2)))] + [(a, int(b)) for a, b in INLINED.findall(m.group(3))]
                continue
            m = INSN.search(s)
            if m and cur is not None:
                cur[1].append((norm(m.group(2)), where))
    return funcs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("disasm")
    ap.add_argument("--per", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--frame", default=None, help="attribute to the innermost call site in a file ending in this")
    ap.add_argument("--window", type=int, default=24)
    a = ap.parse_args()
    rs = rows(a.csv)
    prof = [norm(r["Source"]) for r in rs]
    W = a.window
    starts = {}
    for i in range(len(prof) - W + 1):
        starts.setdefault(tuple(prof[i:i + W]), i)
    ex = collections.Counter()
    smp = collections.Counter()
    matched = 0
    differ = 0
    tot_ex = sum(num(r["Instructions Executed"]) for r in rs)
    for name, insns in read_disasm(a.disasm):
        if len(insns) < W:
            continue
        i0 = starts.get(tuple(t for t, _ in insns[:W]))
        if i0 is None:
            continue
        for k, (text, where) in enumerate(insns):
            i = i0 + k
            if i >= len(prof):
                break
            if prof[i] != text:  # the same binary: only operand spellings may differ
                differ += 1
            key = "?"
            if where:
                pick = where[0]
                if a.frame:
                    pick = next((w for w in where if w[0].endswith(a.frame)), where[0])
                key = f"{pick[0].split('/src/')[-1]}:{pick[1]}"
            e = num(rs[i]["Instructions Executed"])
            ex[key] += e
            smp[key] += num(rs[i]["Warp Stall Sampling (All Samples)"])
            matched += e
    tot_s = sum(smp.values()) or 1.0
    print(f"matched {matched / max(tot_ex, 1):.1%} of executed instructions ({tot_ex / a.per:.1f} per unit); "
          f"{differ} instruction texts differ")
    print(f"{'per unit':>9} {'samples':>8}  line")
    for key, e in ex.most_common(a.top):
        print(f"{e / a.per:9.1f} {100 * smp[key] / tot_s:7.1f}%  {key}")


if __name__ == "__main__":
    main()
