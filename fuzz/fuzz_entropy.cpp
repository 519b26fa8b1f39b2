// fuzz_entropy — entropy-coded frames (docs/FORMAT.md §4.10), symbol tables (§5.3), row maps (§5.4) and paired
// frames (§4.10.6). The input is
//   [u16 table size][table bytes][the rest]
// The table bytes go through sz_symbol_table_parse; a valid table is prepared and the rest is decoded with it by the
// fast and the reference decoder, which must accept the same frames and write the same bytes. Whatever the table
// parse gives, the rest is also decoded against a fixed calibrated table of the dtype its first byte picks (with a
// fixed row map: paired frames decode with it), parsed as a row map, and encoded as values with that table by both
// encoders (identical frames, within the bound; FP8 also paired with the fixed map) and decoded back (the input
// again). Nothing may crash or touch memory outside the buffers (ASan/UBSan). The fast coder runs with the kernel
// set SPLITZIP_FUZZ_ISA picks (fuzz_isa.h).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "splitzip/splitzip.h"
#include "fuzz_isa.h"

namespace {

constexpr uint64_t kMaxOutput = 16ull << 20;
constexpr uint32_t kTensors = 2, kPeriod = 8, kGroups = 3;

[[noreturn]] void fail(const char* what, sz_status a, sz_status b) {
  fprintf(stderr, "fuzz_entropy: %s (%s vs %s)\n", what, sz_status_name(a), sz_status_name(b));
  abort();
}

struct Fixed {
  std::vector<uint8_t> file, workspace;
  sz_symbol_table t;
};

// A table per dtype calibrated on deterministic KV-like counts: channel c of tensor t favours symbols near a
// centre of its own, so groups differ and escapes exist; FP8 tables also code the pair symbol.
const Fixed& fixed_table(sz_dtype dt) {
  static Fixed tables[6];
  static bool ready[6] = {};
  Fixed& f = tables[dt];
  if (ready[dt]) return f;
  const size_t A = sz_symbol_histogram_size(dt, kTensors, kPeriod) / 4 / (kTensors * kPeriod);
  std::vector<uint32_t> counts(A * kTensors * kPeriod, 0);
  for (uint32_t c = 0; c < kTensors * kPeriod; ++c) {
    const size_t centre = (A / 2 + 5 * c) % A;
    for (size_t d = 0; d < 6; ++d) counts[c * A + (centre + d) % A] = 1000u >> d;
    counts[c * A + (centre + 40) % A] = 1;
    if (A == 256) counts[c * A + 0x7F] += 500;  // FP8: the pair symbol of paired frames (§4.10.6) is frequent
  }
  f.file.resize(sz_symbol_table_file_size(dt, kTensors, kPeriod, kGroups));
  size_t size = 0;
  if (sz_symbol_calibrate(counts.data(), dt, kTensors, kPeriod, kGroups, f.file.data(), f.file.size(), &size,
                          nullptr) != SZ_OK ||
      sz_symbol_table_parse(f.file.data(), size, &f.t) != SZ_OK)
    fail("fixed table", SZ_OK, SZ_OK);
  f.workspace.resize(sz_symbol_table_workspace_size(&f.t));
  if (sz_symbol_table_prepare(&f.t, f.workspace.data(), f.workspace.size()) != SZ_OK) fail("prepare", SZ_OK, SZ_OK);
  ready[dt] = true;
  return f;
}

// A row map of kMapRows rows (every frame the fuzzer can make has fewer rows of kPeriod values) whose rows pair
// with the previous row of a token from a small vocabulary.
constexpr uint64_t kMapRows = 1u << 17;
const sz_row_map& fixed_map() {
  static std::vector<uint8_t> file;
  static sz_row_map m;
  if (!file.empty()) return m;
  std::vector<uint32_t> tokens(kMapRows);
  for (uint64_t r = 0; r < kMapRows; ++r) tokens[r] = (uint32_t)((r * 2654435761u >> 7) % 11);
  std::vector<uint8_t> ws(sz_row_map_workspace_size(kMapRows));
  file.resize(sz_row_map_file_size(kMapRows));
  size_t size = 0;
  if (sz_row_map_from_tokens(tokens.data(), kMapRows, ws.data(), ws.size(), file.data(), file.size(), &size) != SZ_OK ||
      sz_row_map_parse(file.data(), size, &m) != SZ_OK)
    fail("fixed row map", SZ_OK, SZ_OK);
  return m;
}

void decode_both(const uint8_t* data, size_t size, const sz_symbol_table& t, const sz_row_map* map = nullptr) {
  sz_frame_info info;
  const sz_status is = sz_frame_info_get(data, size, &info);
  uint64_t cap = 4096;
  if (is == SZ_OK) cap = info.decompressed_size < kMaxOutput ? info.decompressed_size : kMaxOutput;
  std::vector<uint8_t> a(cap ? cap : 1, 0xA5), b(cap ? cap : 1, 0x5A);
  size_t na = 0, nb = 0;
  const sz_status sa = sz_decompress_entropy_paired(data, size, &t, map, a.data(), cap, &na, 1 + (unsigned)(size % 3));
  const sz_status sb = sz_decompress_entropy_paired_reference(data, size, &t, map, b.data(), cap, &nb);
  if (sa != sb) fail("the decoders disagree on the status", sa, sb);
  if (sa == SZ_OK) {
    if (is != SZ_OK) fail("decoders accept a frame whose info is rejected", sa, is);
    if (na != nb || na != info.decompressed_size) fail("decoded sizes differ", sa, sb);
    if (memcmp(a.data(), b.data(), na) != 0) fail("decoders disagree on the output", sa, sb);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  size_t tsize = (size_t)(data[0] | (data[1] << 8));
  if (tsize > size - 2) tsize = size - 2;
  const uint8_t* tbytes = data + 2;
  const uint8_t* rest = tbytes + tsize;
  const size_t rsize = size - 2 - tsize;

  sz_symbol_table t;
  const sz_status ps = sz_symbol_table_parse(tbytes, tsize, &t);
  if (ps == SZ_OK) {
    std::vector<uint8_t> ws(sz_symbol_table_workspace_size(&t));
    if (ws.size() > (64u << 20)) return 0;
    const sz_status pr = sz_symbol_table_prepare(&t, ws.data(), ws.size());
    if (pr != SZ_OK) fail("a parsed table does not prepare", ps, pr);
    decode_both(rest, rsize, t);
  }
  if (rsize == 0) return 0;
  const sz_dtype dt = (sz_dtype)(1 + rest[0] % 5);
  const Fixed& fx = fixed_table(dt);
  decode_both(rest, rsize, fx.t, &fixed_map());
  sz_row_map parsed;
  if (sz_row_map_parse(rest, rsize, &parsed) == SZ_OK) {
    for (uint64_t r = 0; r < parsed.rows; ++r) {
      const uint8_t* q = parsed.pair + 4 * r;
      if ((uint64_t)(q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24) > r) fail("a forward pair parsed", SZ_OK, SZ_OK);
    }
  }

  // Round trip: the rest as values of dt.
  const size_t vb = sz_dtype_size(dt);
  const uint64_t n = (rsize - 1) / vb;
  sz_params p = sz_params_default();
  p.chunk_log2 = 8 + rest[0] % 9;
  p.flags = (rest[0] & 0x80) ? 0 : (rest[0] & 0x20) ? SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH : SZ_FLAG_CHECKSUMS;
  const uint32_t tensor = (rest[0] >> 6) & 1;
  const uint64_t bound = sz_compress_bound(n, dt);
  std::vector<uint8_t> fa(bound, 0xA5), fb(bound, 0x5A);  // dirty, differently: every byte must be written
  size_t sa = 0, sb = 0;
  const sz_status ea = sz_compress_entropy(rest + 1, n, dt, &fx.t, tensor, &p, fa.data(), fa.size(), &sa);
  const sz_status eb = sz_compress_entropy_reference(rest + 1, n, dt, &fx.t, tensor, &p, fb.data(), fb.size(), &sb);
  if (ea != SZ_OK || eb != SZ_OK) fail("an encoder failed", ea, eb);
  if (sa != sb || memcmp(fa.data(), fb.data(), sa) != 0) fail("the encoders disagree", ea, eb);
  if (sa > bound) fail("a frame above the bound", ea, eb);
  std::vector<uint8_t> back(n * vb + 1);
  size_t w = 0;
  const sz_status da = sz_decompress_entropy(fa.data(), sa, &fx.t, back.data(), back.size(), &w, 2);
  if (da != SZ_OK || w != n * vb || memcmp(back.data(), rest + 1, w) != 0) fail("round trip", da, SZ_OK);
  const sz_status db = sz_decompress_entropy_reference(fa.data(), sa, &fx.t, back.data(), back.size(), &w);
  if (db != SZ_OK || w != n * vb || memcmp(back.data(), rest + 1, w) != 0) fail("reference round trip", db, SZ_OK);
  // A smaller output buffer than the frame needs is refused exactly so.
  if (sa > 0) {
    const sz_status ds = sz_compress_entropy(rest + 1, n, dt, &fx.t, tensor, &p, fa.data(), sa - 1, &w);
    if (ds != SZ_ERROR_DST_TOO_SMALL) fail("dst one byte short", ds, SZ_ERROR_DST_TOO_SMALL);
  }
  // FP8: the same values as a paired frame with the fixed map, both encoders, both decoders.
  if (vb == 1) {
    const sz_row_map& m = fixed_map();
    const sz_status pa = sz_compress_entropy_paired(rest + 1, n, dt, &fx.t, tensor, &m, &p, fa.data(), fa.size(), &sa);
    const sz_status pb =
        sz_compress_entropy_paired_reference(rest + 1, n, dt, &fx.t, tensor, &m, &p, fb.data(), fb.size(), &sb);
    if (pa != SZ_OK || pb != SZ_OK) fail("a paired encoder failed", pa, pb);
    if (sa != sb || memcmp(fa.data(), fb.data(), sa) != 0) fail("the paired encoders disagree", pa, pb);
    if (sa > bound) fail("a paired frame above the bound", pa, pb);
    const sz_status qa = sz_decompress_entropy_paired(fa.data(), sa, &fx.t, &m, back.data(), back.size(), &w, 2);
    if (qa != SZ_OK || w != n || memcmp(back.data(), rest + 1, w) != 0) fail("paired round trip", qa, SZ_OK);
    const sz_status qb = sz_decompress_entropy_paired_reference(fa.data(), sa, &fx.t, &m, back.data(), back.size(), &w);
    if (qb != SZ_OK || w != n || memcmp(back.data(), rest + 1, w) != 0) fail("paired reference round trip", qb, SZ_OK);
  }
  return 0;
}
