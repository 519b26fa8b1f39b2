#!/usr/bin/env python3
"""Checks of the documentation and the comments against the tree (Python standard library only).

    check_docs.py --case links        # relative links and images of README.md and docs/*.md point at files
    check_docs.py --case api_names    # every sz_ name the docs and the public headers' comments mention exists
    check_docs.py --case comments     # product comments speak of the design, not of issues or kernel versions
    check_docs.py --case deps         # every package that scripts/deps.sh installs has a use in the tree
    check_docs.py --case headlines    # docs/BENCHMARKS.md's headline blocks are those of bench/results/*.md
    check_docs.py --case all

Exit codes: 0 pass, 1 fail (each finding printed as file:line: what).
"""
import argparse
import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def rel(p):
    return str(Path(p).relative_to(REPO))


def doc_pages():
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def markdown_prose(text):
    """Yields (line number, line) of a markdown page outside fenced code blocks, with inline code spans blanked
    (a link or a name inside backticks is an example, not a reference)."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*(```|~~~)", line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence:
            continue
        yield no, re.sub(r"`[^`]*`", lambda s: " " * len(s.group(0)), line)


# ---- links -------------------------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def case_links():
    """Inline links and images with a relative target ([text](path), ![alt](path), optional #anchor) must name a
    file or folder that exists, relative to the page. Absolute URLs and pure #anchors are not checked."""
    bad = []
    for page in doc_pages():
        for no, line in markdown_prose(page.read_text()):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                    continue
                path = target.split("#", 1)[0]
                if not (page.parent / path).exists():
                    bad.append("%s:%d: link to %s: no such file" % (rel(page), no, target))
    return bad


# ---- sz_ names -----------------------------------------------------------------------------------------------------

def c_code_and_comments(text):
    """Splits C/C++/CUDA source into (code, comments), each the same length as the text with the other part
    blanked (newlines kept, so offsets give line numbers). String and character literals count as code."""
    code, comments = list(text), list(text)
    i, n = 0, len(text)
    state = "code"
    while i < n:
        c = text[i]
        if state == "code":
            if text.startswith("//", i):
                state = "line"
            elif text.startswith("/*", i):
                state = "block"
            elif c in "\"'":
                quote = c
                j = i + 1
                while j < n and text[j] != quote and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                for k in range(i, min(j + 1, n)):
                    if comments[k] != "\n":
                        comments[k] = " "
                i = j + 1
                continue
            if state == "code":
                if c != "\n":
                    comments[i] = " "
                i += 1
                continue
        if state == "line":
            while i < n and text[i] != "\n":
                code[i] = " "
                i += 1
            state = "code"
            continue
        # block comment
        end = text.find("*/", i + 2)
        end = n if end < 0 else end + 2
        for k in range(i, end):
            if code[k] != "\n":
                code[k] = " "
        i = end
        state = "code"
    return "".join(code), "".join(comments)


def public_headers():
    return sorted((REPO / "include" / "splitzip").glob("*.h"))


def declared_names():
    """(functions, every identifier) declared in the code (not the comments) of include/splitzip/*.h."""
    functions, names = set(), set()
    for h in public_headers():
        code, _ = c_code_and_comments(h.read_text())
        functions |= set(re.findall(r"\b(sz_\w+)\s*\(", code))
        names |= set(re.findall(r"\b(sz_\w+)\b", code))
    return functions, names


# An sz_ name; "(" right after it makes it a call. A prefix with a wildcard ("sz_cuda_*") is a family, not a name.
SZ_NAME = re.compile(r"(?<![\w./-])(sz_[a-z0-9_]*[a-z0-9])(?![\w*])(\()?")


def case_api_names():
    """Every sz_ name in README.md, docs/*.md (code spans and blocks included: they are what users copy) and the
    comments of the public headers must be declared in include/splitzip/*.h; a name written as a call, name(...),
    must be a function there. Names that the docs reference on purpose without declaring them (none today) would go
    in ALLOWED with the reason."""
    ALLOWED = {}
    functions, names = declared_names()
    bad = []

    def check(where, no, text):
        for m in SZ_NAME.finditer(text):
            name, call = m.group(1), m.group(2)
            if name in ALLOWED:
                continue
            if call and name not in functions:
                bad.append("%s:%d: %s(...) is not a function of include/splitzip/*.h" % (where, no, name))
            elif name not in names:
                bad.append("%s:%d: %s is not declared in include/splitzip/*.h" % (where, no, name))

    for page in doc_pages():
        for no, line in enumerate(page.read_text().splitlines(), 1):
            check(rel(page), no, line)
    for h in public_headers():
        _, comments = c_code_and_comments(h.read_text())
        for no, line in enumerate(comments.splitlines(), 1):
            check(rel(h), no, line)
    return bad


# ---- comments of product code ------------------------------------------------------------------------------------

PRODUCT_DIRS = ("src", "include", "cli", "python/splitzip", "transfer")
C_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".inc"}
HASH_SUFFIXES = {".sh", ".cmake", ".in"}

# A ticket number: "issue 14", "issue #14", "issues 3 and 4". Code never needs it; the design is the reason.
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.I)
# A kernel's place in the history of its versions ("v6", "v8.7", "the v9 decoder"), which bench/NOTES.md keeps.
# Kept narrow on purpose: the format versions v1-v3 (docs/FORMAT.md) and other projects' API versions (vLLM's and
# LMCache's "v1", "splitzip-frame-v1") are real names, so a bare v1-v3 passes; v4 and above, or a dotted
# version, is flagged. Versions of other software in comments are written without the "v" ("UCX 1.13").
KERNEL_VERSION = re.compile(r"(?<![\w.-])v(?:[4-9]|[1-9]\d+|\d+\.\d+)(?![\w-])")


def product_files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *PRODUCT_DIRS],
                         cwd=REPO, capture_output=True, text=True)
    if out.returncode == 0:
        files = [REPO / f for f in out.stdout.splitlines()]
    else:  # not a git checkout (a source tarball): every file
        files = [p for d in PRODUCT_DIRS for p in (REPO / d).rglob("*") if p.is_file()]
    return sorted(f for f in files if f.is_file())


def python_comments(text):
    """(line, text) of every # comment and docstring of a Python file."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                for k, line in enumerate(first.value.value.splitlines()):
                    out.append((first.lineno + k, line))
    return out


def comments_of(path):
    """(line, comment text) of a product file; no comments for file kinds it does not know."""
    suffix = path.suffix
    name = path.name
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return []
    if suffix in C_SUFFIXES:
        _, comments = c_code_and_comments(text)
        return [(no, line) for no, line in enumerate(comments.splitlines(), 1) if line.strip()]
    if suffix in (".py", ".pyi"):
        return python_comments(text)
    if suffix in HASH_SUFFIXES or name == "CMakeLists.txt":
        out = []
        for no, line in enumerate(text.splitlines(), 1):
            m = re.search(r"(?:^|\s)(#.*)$", line)
            if m and not line.startswith("#!"):
                out.append((no, m.group(1)))
        return out
    return []


def case_comments():
    """No comment (or docstring) of src/, include/, cli/, python/splitzip/ or transfer/ cites an issue number or a
    kernel version (see ISSUE and KERNEL_VERSION for exactly what is matched)."""
    bad = []
    for f in product_files():
        for no, line in comments_of(f):
            for pattern, what in ((ISSUE, "an issue number"), (KERNEL_VERSION, "a version of the code's history")):
                m = pattern.search(line)
                if m:
                    bad.append("%s:%d: %s (%r) in a comment: say what the design does and why" %
                               (rel(f), no, what, m.group(0)))
    return bad


# ---- scripts/deps.sh ---------------------------------------------------------------------------------------------

# Each package scripts/deps.sh installs, and where the tree uses it: (file, text that must be in it). A package
# missing here fails the check: name its use, or drop it from deps.sh.
DEP_USES = {
    "build-essential": ("CMakeLists.txt", "LANGUAGES C CXX"),
    "cmake": ("scripts/test.sh", "cmake -S . -B build"),
    "ninja-build": ("scripts/test.sh", "-G Ninja"),
    "pkg-config": ("tests/install/run.sh", "pkg-config --variable=prefix splitzip"),
    "git": ("bench/eval.py", '["git", "rev-parse"'),
    "libxxhash-dev": ("CMakeLists.txt", "find_path(SPLITZIP_XXHASH_INCLUDE_DIR xxhash.h"),
    "libgtest-dev": ("tests/CMakeLists.txt", "find_package(GTest"),
    "googletest": ("tests/CMakeLists.txt", "/usr/src/googletest"),
    "libcli11-dev": ("cli/CMakeLists.txt", "find_package(CLI11"),
    "nlohmann-json3-dev": ("cli/CMakeLists.txt", "find_package(nlohmann_json"),
    "libzstd-dev": ("bench/CMakeLists.txt", "find_library(SPLITZIP_ZSTD_LIBRARY zstd"),
    "liblz4-dev": ("bench/CMakeLists.txt", "find_library(SPLITZIP_LZ4_LIBRARY lz4"),
    "libucx-dev": ("transfer/CMakeLists.txt", "pkg_check_modules(SPLITZIP_UCX"),
    "clang-14": ("fuzz/run.sh", "clang++-14"),
    "libclang-rt-14-dev": ("fuzz/CMakeLists.txt", "-fsanitize=fuzzer"),  # libFuzzer and the sanitizer runtimes
    "python3": ("scripts/test.sh", "python3 -m venv"),
    "python3-venv": ("scripts/test.sh", "python3 -m venv"),
    "python3-dev": ("python/CMakeLists.txt", "Development.Module"),  # the headers `pip install .` compiles with
}


def deps_packages():
    text = (REPO / "scripts" / "deps.sh").read_text()
    m = re.search(r"^pkgs=\((.*?)\)", text, re.S | re.M)
    if not m:
        return None
    return re.sub(r"#[^\n]*", "", m.group(1)).split()


def case_deps():
    """Every package of scripts/deps.sh has its use in DEP_USES, and that use is still in the named file."""
    pkgs = deps_packages()
    if pkgs is None:
        return ["scripts/deps.sh: no pkgs=(...) list found"]
    bad = []
    for p in pkgs:
        if p not in DEP_USES:
            bad.append("scripts/deps.sh: %s has no known use (name it in tests/lint/check_docs.py DEP_USES, or drop "
                       "it)" % p)
            continue
        path, text = DEP_USES[p]
        f = REPO / path
        if not f.exists() or text not in f.read_text():
            bad.append("scripts/deps.sh: %s: its use %r is no longer in %s" % (p, text, path))
    return bad


# ---- docs/BENCHMARKS.md --------------------------------------------------------------------------------------------

def case_headlines():
    """docs/BENCHMARKS.md's headline section equals what bench/headlines.py renders from bench/results/*.md (the
    section bench/eval.py writes), so a page listed nowhere or edited by hand shows up."""
    sys.path.insert(0, str(REPO / "bench"))
    import headlines
    page = (REPO / "docs" / "BENCHMARKS.md").read_text()
    try:
        want = headlines.splice(page)
    except ValueError as e:
        return ["docs/BENCHMARKS.md: %s" % e]
    if want == page:
        return []
    import difflib
    diff = "".join(difflib.unified_diff(page.splitlines(True), want.splitlines(True), "docs/BENCHMARKS.md",
                                        "rendered by bench/headlines.py", n=1))
    return ["docs/BENCHMARKS.md: the headline section differs from bench/results/ (python3 bench/headlines.py "
            "re-renders it):\n" + diff]


CASES = {
    "links": case_links,
    "api_names": case_api_names,
    "comments": case_comments,
    "deps": case_deps,
    "headlines": case_headlines,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="all", help="one of: all, " + ", ".join(CASES))
    args = ap.parse_args()
    names = list(CASES) if args.case == "all" else [args.case]
    failed = 0
    for name in names:
        if name not in CASES:
            ap.error("unknown case %s" % name)
        bad = CASES[name]()
        for b in bad:
            print(b)
        print("%s %s%s" % ("FAIL" if bad else "PASS", name, " (%d findings)" % len(bad) if bad else ""))
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
