#!/usr/bin/env python3
"""ttft_model.py — how much of prefill->decode time-to-first-token the KV transfer takes, raw vs SplitZip.

In disaggregated serving, TTFT = prefill + KV transfer + first decode step. Compression changes only the transfer,
so this model computes that term (prefill and decode are the same with and without compression and are left out):

    raw:         T = B / L
    compressed:  T = max(B / E, B / (r * L), B / D) + c / E + c / D

B = KV bytes of the request (bytes per token x tokens), L = link rate, r = compression ratio, E / D = codec encode /
decode rates (bytes of uncompressed KV per second), c = bytes of one pipelined message (the pipeline's fill and
drain: the first message must be encoded before anything is sent, the last decoded after it arrived). The max() is
the pipeline of bench/transfer: encode of message i+1, sending of message i and decode of message i-1 overlap.

E, D and r come from the JSON that `splitzip_bench_transfer --json` writes (the codec measured alone on real KV, at
each thread count). --gpu-results FILE adds the GPU series from `splitzip_bench_transfer --gpu --json FILE` (run on
the H200 by transfer/tools/device_check.sh): the GPU codec per message as the pipeline runs it (synced per message,
the most streams measured) and its ratio. --gpu-encode/--gpu-decode add a codec whose rates were measured elsewhere
(say, by bench/gpu); the figure names where every rate came from. The "ideal codec" line (E = D = infinity) is the bound that
the ratio alone allows.

KV bytes per token in BF16 (../shared/NOTES.md §5): Llama-3-8B 131,072; Llama-3-70B 327,680; Qwen3-32B 262,144.

Usage: python3 bench/transfer/ttft_model.py RESULTS.json [--png docs/img/ttft.png] [--gpu-results GPU.json]
       [--gpu-encode GBS --gpu-decode GBS --gpu-label TEXT]
Prints a Markdown table; writes the plot when matplotlib is importable.
"""
import argparse
import json
import sys

MODELS = [("Llama-3-8B", 131072), ("Llama-3-70B", 327680), ("Qwen3-32B", 262144)]
TOKENS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
LINKS_GBIT = [25, 50, 100, 200, 400]


def t_raw(b, link):
    return b / link


def t_comp(b, link, ratio, enc, dec, chunk):
    return max(b / enc, b / (ratio * link), b / dec) + chunk / enc + chunk / dec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--png")
    ap.add_argument("--gpu-encode", type=float, help="GB/s")
    ap.add_argument("--gpu-decode", type=float, help="GB/s")
    ap.add_argument("--gpu-label", default="GPU codec")
    ap.add_argument("--gpu-results", help="JSON of splitzip_bench_transfer --gpu (GPU codec measured per message)")
    args = ap.parse_args()

    res = json.load(open(args.results))
    chunk = res["chunk_values"] * 2
    codecs = []
    for c in res["codec"]:
        codecs.append((f"CPU codec, {c['threads']} thread(s) (measured here)", c["encode_gbs"] * 1e9,
                       c["decode_gbs"] * 1e9, c["ratio"]))
    ratio = res["codec"][0]["ratio"]
    if args.gpu_results:
        g = json.load(open(args.gpu_results))
        synced = [c for c in g.get("gpu_codec", []) if not c.get("batched")]
        if not synced:
            print(f"{args.gpu_results}: no per-message GPU codec rates", file=sys.stderr)
            return 1
        best = max(synced, key=lambda c: c["streams"])
        path = "direct" if g.get("gpu_direct") else "staged"
        codecs.append((f"GPU codec, {best['streams']} stream(s), measured on the GPU machine ({path} UCX path)",
                       best["encode_gbs"] * 1e9, best["decode_gbs"] * 1e9, best["ratio"]))
    if args.gpu_encode and args.gpu_decode:
        codecs.append((args.gpu_label, args.gpu_encode * 1e9, args.gpu_decode * 1e9, ratio))
    codecs.append(("ideal codec (ratio only)", float("inf"), float("inf"), ratio))

    # ---- table: KV transfer time in ms ----
    print(f"KV transfer term of TTFT in ms (ratio {ratio:.4f} on the benchmark's real KV; message {chunk} bytes)\n")
    head = "| model | tokens | link Gb/s | raw ms | " + " | ".join(c[0] + " ms" for c in codecs) + " |"
    print(head)
    print("|" + "---|" * (4 + len(codecs)))
    for name, bpt in MODELS:
        for tokens in (1024, 8192, 32768, 131072):
            b = bpt * tokens
            for g in (25, 100, 400):
                link = g * 1e9 / 8
                row = [name, str(tokens), str(g), f"{1e3 * t_raw(b, link):.2f}"]
                for _, e, d, r in codecs:
                    row.append(f"{1e3 * t_comp(b, link, r, e, d, chunk):.2f}")
                print("| " + " | ".join(row) + " |")
    print()
    # Where each codec stops paying: compressed faster than raw while B/L > max(B/E, B/D, B/(rL)), i.e.
    # L < min(E, D) (and the ratio term never loses).
    for label, e, d, r in codecs:
        lim = min(e, d)
        if lim == float("inf"):
            print(f"- {label}: compression pays at every link rate (speedup -> {r:.3f}x)")
        else:
            print(f"- {label}: faster than raw on links below {8 * lim / 1e9:.1f} Gb/s ({lim / 1e9:.3f} GB/s); "
                  f"full {r:.3f}x only below {8 * lim / r / 1e9:.1f} Gb/s")

    if not args.png:
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, 4, figsize=(22, 5.2))
    colors = {25: "tab:red", 100: "tab:blue", 400: "tab:green"}
    styles = ["--", "-.", ":", (0, (1, 1)), (0, (5, 1, 1, 1)), (0, (3, 3))]
    for ax, (name, bpt) in zip(axes[:3], MODELS):
        for g, col in colors.items():
            link = g * 1e9 / 8
            ax.plot(TOKENS, [1e3 * t_raw(bpt * t, link) for t in TOKENS], color=col, lw=2, label=f"raw {g} Gb/s")
            for (label, e, d, r), ls in zip(codecs, styles):
                ax.plot(TOKENS, [1e3 * t_comp(bpt * t, link, r, e, d, chunk) for t in TOKENS], color=col, ls=ls,
                        label=f"{label}, {g} Gb/s")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel("KV transfer time (ms)")
        ax.set_title(f"{name} ({bpt:,} B/token BF16)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=6.5, loc="upper left")
    ax = axes[3]
    links = [0.5 * 1.1 ** i for i in range(0, 70) if 0.5 * 1.1 ** i <= 400]
    b = 131072 * 32768
    for (label, e, d, r), ls in zip(codecs, styles):
        ax.plot(links, [t_raw(b, g * 1e9 / 8) / t_comp(b, g * 1e9 / 8, r, e, d, chunk) for g in links], ls=ls,
                label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("link (Gb/s)")
    ax.set_ylabel("transfer speedup over raw")
    ax.set_title("speedup vs link (Llama-3-8B, 32k tokens)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle("Prefill->decode KV transfer term of TTFT: raw vs SplitZip (model of bench/transfer/ttft_model.py, "
                 "codec rates from " + args.results.split("/")[-1] + ")", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"\nwrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
