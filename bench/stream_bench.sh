#!/usr/bin/env bash
# File-to-file compress and decompress with the splitzip CLI next to zstd -1 on the same bytes in the same run:
# wall time, throughput of uncompressed bytes and peak RSS of each command, best of REPEATS runs.
#
# Usage: bench/stream_bench.sh [SIZE_MB] [REPEATS]   (default 2048 MB, 3 repeats)
#   SPLITZIP=build/cli/splitzip  WORK=build-stream-bench  THREADS=1
# The input is data/kv_code_bf16_slice.bin (real BF16 KV) tiled to SIZE_MB. The files stay in the page cache, so
# this measures the tools, not the disk (the point: both stream; neither holds the file in memory).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
size_mb=${1:-2048}
repeats=${2:-3}
sz=${SPLITZIP:-$root/build/cli/splitzip}
work=${WORK:-$root/build-stream-bench}
threads=${THREADS:-1}
command -v zstd >/dev/null || { echo "stream_bench: zstd not found"; exit 1; }
[[ -x $sz ]] || { echo "stream_bench: $sz not built"; exit 1; }
mkdir -p "$work"
in=$work/kv_${size_mb}mb.bin
if [[ ! -f $in || $(stat -c %s "$in") -ne $(( size_mb << 20 )) ]]; then
  python3 - "$root/data/kv_code_bf16_slice.bin" "$in" "$size_mb" <<'EOF'
import sys
src, dst, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
block = open(src, "rb").read()
want = mb << 20
with open(dst, "wb") as f:
    left = want
    while left:
        piece = block[:left]
        f.write(piece)
        left -= len(piece)
EOF
fi

# best wall seconds and the peak RSS (MB) of a command, over $repeats runs
measure() {
  local best="" rss=0 t0 t1 s peak
  for _ in $(seq "$repeats"); do
    t0=$(date +%s.%N)
    "$@" &
    local pid=$! hwm=0
    while kill -0 "$pid" 2>/dev/null; do
      peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
      [[ -n $peak && $peak -gt $hwm ]] && hwm=$peak
      sleep 0.01
    done
    wait "$pid"
    t1=$(date +%s.%N)
    s=$(echo "$t1 - $t0" | bc -l)
    if [[ -z $best ]] || (( $(echo "$s < $best" | bc -l) )); then best=$s; fi
    (( hwm > rss )) && rss=$hwm
  done
  echo "$best $(( rss / 1024 ))"
}

bytes=$(( size_mb << 20 ))
row() {  # label, best seconds, rss MB
  printf "%-34s %8.3f s %8.2f GB/s %7s MB\n" "$1" "$2" "$(echo "$bytes / $2 / 1000000000" | bc -l)" "$3"
}
echo "stream_bench: $size_mb MB of real BF16 KV ($in), best of $repeats, threads $threads; $(nproc) CPUs"
read -r s r < <(measure "$sz" compress -q -f -T "$threads" --dtype bf16 "$in" -o "$work/x.spz")
row "splitzip compress (file to file)" "$s" "$r"
read -r s r < <(measure zstd -q -f -1 -T"$threads" "$in" -o "$work/x.zst")
row "zstd -1 compress (file to file)" "$s" "$r"
read -r s r < <(measure "$sz" decompress -q -f -T "$threads" "$work/x.spz" -o "$work/x.out")
row "splitzip decompress (file to file)" "$s" "$r"
cmp "$in" "$work/x.out"
read -r s r < <(measure zstd -q -f -d "$work/x.zst" -o "$work/x.out")
row "zstd -1 decompress (file to file)" "$s" "$r"
cmp "$in" "$work/x.out"
printf "sizes: splitzip %s bytes (ratio %.4f), zstd -1 %s bytes (ratio %.4f)\n" \
  "$(stat -c %s "$work/x.spz")" "$(echo "$bytes / $(stat -c %s "$work/x.spz")" | bc -l)" \
  "$(stat -c %s "$work/x.zst")" "$(echo "$bytes / $(stat -c %s "$work/x.zst")" | bc -l)"
rm -f "$work/x.out"
