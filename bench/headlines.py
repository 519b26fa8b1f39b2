#!/usr/bin/env python3
"""The "Headlines of the other results" section of docs/BENCHMARKS.md: under a link to each results page of
bench/results/, the block between that page's `<!-- headline -->` and `<!-- /headline -->` markers.

bench/eval.py writes this section with the rest of the page after a full run. The section depends on the results
pages only, not on that run's measurements, so this script re-renders it alone, in place, without measuring:

    python3 bench/headlines.py            # rewrite the section of docs/BENCHMARKS.md from the current pages
    python3 bench/headlines.py --check    # exit 1 with a diff when the page's section differs from the pages

Standard library only (the docs test runs it with --check: tests/lint).
"""
import argparse
import difflib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"

# The results pages whose headlines docs/BENCHMARKS.md shows, in its order (file in bench/results/, title).
RESULT_PAGES = (("gpu.md", "GPU codec (fast mode)"),
                ("cpu.md", "CPU codec on an idle machine"),
                ("cpu_context.md", "CPU codec contexts against one-shot calls"),
                ("stream.md", "The CLI on a 2 GB file, file to file, next to zstd -1"),
                ("transfer.md", "Transfer: raw vs compressed KV over UCX"),
                ("disagg_cpu.md", "Prefill → decode with a real model, CPU"),
                ("disagg_gpu.md", "Prefill → decode on one H200"),
                ("ratio_max.md", "Max mode (entropy-coded frames): ratio"),
                ("entropy_gpu.md", "Max mode on the GPU: decode and encode"),
                ("mode_choice.md", "Fast mode or max mode, by link rate"),
                ("integrations_h200.md", "Engine adapters on the H200"),
                ("p2p_loopback_h200.md", "GPU to GPU, layer by layer (`splitzip.p2p`)"))

SECTION = "## Headlines of the other results"
NEXT_SECTION = "## Details of this run"


def headline_of(path: Path) -> str:
    """The block between a results page's `<!-- headline -->` and `<!-- /headline -->` markers, its links made
    relative to docs/ (the pages are in bench/results/)."""
    text = path.read_text()
    a, b = text.find("<!-- headline -->"), text.find("<!-- /headline -->")
    if a < 0 or b < a:
        return f"(no headline marked in `bench/results/{path.name}`)"
    block = text[a + len("<!-- headline -->"):b].strip()
    return block.replace("](../../docs/", "](").replace("](../", "](../bench/").replace("](./", "](../bench/results/")


def section_lines(results: Path = RESULTS) -> list:
    """The section's lines, from its heading to the blank line before the next section."""
    L = [SECTION, "",
         "Each block is the headline of a results page (between its `<!-- headline -->` markers), which has the "
         "method, the command, every table and what the numbers say.", ""]
    for name, title in RESULT_PAGES:
        f = results / name
        L.append(f"### {title} ([bench/results/{name}](../bench/results/{name}))")
        L.append("")
        L.append(headline_of(f) if f.exists() else f"`bench/results/{name}` is not there yet.")
        L.append("")
    return L


def splice(page: str, results: Path = RESULTS) -> str:
    """The page with its headline section replaced by one rendered from the current results pages."""
    a = page.find("\n" + SECTION + "\n")
    b = page.find("\n" + NEXT_SECTION + "\n")
    if a < 0 or b < a:
        raise ValueError(f"the page has no '{SECTION}' section followed by '{NEXT_SECTION}'")
    return page[:a + 1] + "\n".join(section_lines(results)) + "\n" + page[b + 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page", default=str(REPO / "docs" / "BENCHMARKS.md"))
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when the section is stale")
    args = ap.parse_args()
    page_path = Path(args.page)
    page = page_path.read_text()
    want = splice(page)
    if want == page:
        print(f"{page_path.name}: the headline section matches bench/results/")
        return 0
    if args.check:
        print(f"{page_path.name}: the headline section differs from bench/results/ "
              "(run python3 bench/headlines.py to re-render it):")
        sys.stdout.writelines(difflib.unified_diff(page.splitlines(True), want.splitlines(True),
                                                   str(page_path), "rendered from bench/results/"))
        return 1
    page_path.write_text(want)
    print(f"rewrote the headline section of {page_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
