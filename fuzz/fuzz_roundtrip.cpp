// fuzz_roundtrip — the encoders on fuzzer-chosen parameters and values. The first bytes choose:
//   byte 0  dtype (5 choices)             byte 1  chunk_log2 8..16
//   byte 2  bit 0: checksums, bits 1-3: threads 0..7 (0 = all cores), bit 7: calibrate the codebook from the data
//   byte 3  code width k (1..min(4, E-1))  byte 4  codebook count 1..2^k
//   bytes 5..20  codebook entries (mod 2^E, duplicates replaced by the next unused exponent)
// and the rest are the values. Both encoders must write the same frame, within sz_compress_bound; both decoders
// must restore the values bit for bit; a second compression must give the same bytes; frame info must agree.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "splitzip/splitzip.h"
#include "fuzz_isa.h"

namespace {

void fail(const char* what, sz_status st) {
  fprintf(stderr, "fuzz_roundtrip: %s (%s)\n", what, sz_status_name(st));
  abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHead = 21;
  if (size < kHead) return 0;
  const sz_dtype dtype = (sz_dtype)(1 + data[0] % 5);
  const unsigned E = sz_dtype_exponent_bits(dtype);
  const size_t vb = sz_dtype_size(dtype);
  sz_params params = sz_params_default();
  params.chunk_log2 = 8 + data[1] % 9;
  params.flags = (data[2] & 1) ? SZ_FLAG_CHECKSUMS : 0;
  if ((data[2] & 0x40) && params.flags) params.flags |= SZ_FLAG_LANE_HASH;  // LH32 rather than H32
  params.threads = (data[2] >> 1) & 7;
  const bool calibrate = (data[2] & 0x80) != 0;

  const uint64_t n = (size - kHead) / vb;
  std::vector<uint8_t> values(data + kHead, data + kHead + n * vb);
  values.reserve(values.size());
  const void* src = n ? (const void*)values.data() : (const void*)"";

  sz_codebook cb;
  memset(&cb, 0, sizeof cb);
  if (calibrate && n > 0) {
    sz_histogram h;
    sz_status st = sz_histogram_init(&h, dtype);
    if (st == SZ_OK) st = sz_histogram_add(&h, src, n);
    if (st == SZ_OK) st = sz_calibrate(&h, &cb, nullptr);
    if (st != SZ_OK) fail("calibration of a non-empty histogram", st);
    if (sz_codebook_validate(&cb) != SZ_OK) fail("calibrated codebook does not validate", st);
  } else {
    const unsigned kmax = E - 1 < 4 ? E - 1 : 4;
    cb.dtype = (uint8_t)dtype;
    cb.code_bits = (uint8_t)(1 + data[3] % kmax);
    cb.count = (uint8_t)(1 + data[4] % (1u << cb.code_bits));
    bool used[256] = {false};
    for (unsigned i = 0; i < cb.count; ++i) {
      unsigned e = data[5 + i] % (1u << E);
      while (used[e]) e = (e + 1) % (1u << E);
      used[e] = true;
      cb.values[i] = (uint8_t)e;
    }
    const sz_status st = sz_codebook_validate(&cb);
    if (st != SZ_OK) fail("constructed codebook does not validate", st);
  }

  const uint64_t bound = sz_compress_bound(n, dtype);
  std::vector<uint8_t> fast(bound, 0xA5), ref(bound, 0x5A), again(bound, 0x3C);  // dirty: every byte is written
  size_t nf = 0, nr = 0, na = 0;
  sz_status st = sz_compress(src, n, dtype, &cb, &params, fast.data(), fast.size(), &nf);
  if (st != SZ_OK) fail("sz_compress", st);
  st = sz_compress_reference(src, n, dtype, &cb, &params, ref.data(), ref.size(), &nr);
  if (st != SZ_OK) fail("sz_compress_reference", st);
  if (nf != nr || memcmp(fast.data(), ref.data(), nf) != 0) fail("fast and reference frames differ", SZ_OK);
  if (nf > bound) fail("frame larger than sz_compress_bound", SZ_OK);
  st = sz_compress(src, n, dtype, &cb, &params, again.data(), again.size(), &na);
  if (st != SZ_OK || na != nf || memcmp(again.data(), fast.data(), nf) != 0) fail("compressing twice differs", st);

  sz_frame_info info;
  st = sz_frame_info_get(ref.data(), nr, &info);
  if (st != SZ_OK) fail("frame info", st);
  if (info.n_values != n || info.frame_size != nr || info.stats_valid != 1 ||
      info.coded_chunks + info.raw_chunks != info.n_chunks || info.dtype != dtype)
    fail("frame info fields", st);

  std::vector<uint8_t> out(n * vb ? n * vb : 1, 0xEE);
  size_t no = 0;
  st = sz_decompress(ref.data(), nr, out.data(), n * vb, &no, params.threads);
  if (st != SZ_OK || no != n * vb || memcmp(out.data(), src, no) != 0) fail("fast decoder round trip", st);
  memset(out.data(), 0xEE, out.size());
  st = sz_decompress_reference(ref.data(), nr, out.data(), n * vb, &no);
  if (st != SZ_OK || no != n * vb || memcmp(out.data(), src, no) != 0) fail("reference decoder round trip", st);
  return 0;
}
