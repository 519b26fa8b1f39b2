// codec_cases.h — inputs shared by the CUDA codec's test suites (the GPU one and the emulated one): data with
// escapes and raw stretches for every dtype, and frames rewritten into shapes that a valid encoder never writes but
// a decoder must accept or reject exactly as the reference does.
#pragma once

#include <algorithm>
#include <vector>

#include "cuda/xxh3.cuh"
#include "layout.h"
#include "test_util.h"

namespace sztest {

// Data with escapes, special values and a raw-worthy stretch, for any dtype.
inline std::vector<uint8_t> test_values(unsigned dtype, size_t n, uint64_t seed, unsigned* center) {
  const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
  *center = (1u << (f.E - 1)) - 2;
  std::vector<uint8_t> v = sztest::skewed_values(dtype, n, seed, *center, 0.45, 0.02);
  // A stretch of uniformly random bytes (forces raw chunks when long enough) and a few specials.
  Rng rng(seed ^ 0x77);
  const size_t vb = f.W / 8;
  if (n > 3000) {
    const size_t start = n / 3, len = std::min<size_t>(n / 4, 70000);
    for (size_t i = start * vb; i < (start + len) * vb; ++i) v[i] = (uint8_t)rng.next();
  }
  for (size_t i = 0; i < n && i < 16; ++i) {
    const uint32_t emax = (1u << f.E) - 1u;
    sztest::store_value(v.data() + rng.below(n) * vb, f.W, sztest::make_value(i & 1, (i & 2) ? emax : 0, i, f));
  }
  return v;
}

// A coded record larger than the raw one (more escapes than any encoder writes, which §4.7 lets a decoder meet): the
// pipelined decoder's shared-memory slot cannot hold it and must decode that chunk like the reference all the same.
inline std::vector<uint8_t> recode_raw_chunk_as_coded(const std::vector<uint8_t>& f, uint64_t* chunk) {
  using namespace splitzip::layout;
  const unsigned dtype = f[kOffDtype], k = f[kOffCodeBits], log2 = f[kOffChunkLog2], count = f[kOffCodebookCount];
  const uint32_t flags = load_u32(&f[kOffFlags]);
  const uint64_t n = load_u64(&f[kOffNValues]), exp_size = load_u64(&f[kOffExpSectionSize]);
  const DtypeTraits t = dtype_traits(dtype);
  const FrameOffsets o = frame_offsets(n, log2, (flags & kFlagChecksums) != 0, t, exp_size);
  const uint64_t nc = n_chunks(n, log2);
  auto entry = [&](uint64_t i) { return load_u64(&f[o.index + 8 * i]); };
  uint64_t c = 0;
  while (c < nc && (entry(c) >> kIndexModeShift) != kModeRaw) ++c;
  *chunk = c;
  if (c == nc) return {};
  const uint64_t begin = c ? (entry(c - 1) & kIndexEndMask) : 0, end = entry(c) & kIndexEndMask;
  const uint64_t L = chunk_len(n, log2, c), Gn = ceil_div(L, 8);
  auto get_bits = [&](const uint8_t* p, uint64_t bit, unsigned b) {
    uint32_t v = 0;
    for (unsigned i = 0; i < b; ++i) v |= (uint32_t)((p[(bit + i) / 8] >> ((bit + i) % 8)) & 1u) << i;
    return v;
  };
  int code_of[256];
  for (int& x : code_of) x = -1;
  for (unsigned j = 0; j < count; ++j) code_of[f[kOffCodebook + j]] = (int)j;
  std::vector<uint8_t> rec(Gn * k, 0), pos, ex;
  for (uint64_t i = 0; i < L; ++i) {
    const uint32_t e = get_bits(&f[o.exponents + begin], i * t.exponent_bits, t.exponent_bits);
    if (code_of[e] >= 0) {
      for (unsigned b = 0; b < k; ++b)
        if ((code_of[e] >> b) & 1) rec[(i * k + b) / 8] |= (uint8_t)(1u << ((i * k + b) % 8));
    } else {
      pos.push_back((uint8_t)i);
      pos.push_back((uint8_t)(i >> 8));
      ex.push_back((uint8_t)e);
    }
  }
  rec.insert(rec.end(), pos.begin(), pos.end());
  rec.insert(rec.end(), ex.begin(), ex.end());
  std::vector<uint8_t> g(f.begin(), f.begin() + (ptrdiff_t)(o.exponents + begin));
  g.insert(g.end(), rec.begin(), rec.end());
  g.insert(g.end(), f.begin() + (ptrdiff_t)(o.exponents + end), f.end());
  const uint64_t delta = rec.size() - (end - begin);  // > 0: the record grew
  for (uint64_t i = c; i < nc; ++i) {
    const uint64_t e = entry(i);
    const uint64_t mode = i == c ? kModeCoded : (e >> kIndexModeShift);
    store_u64(&g[o.index + 8 * i], ((e & kIndexEndMask) + delta) | (mode << kIndexModeShift));
  }
  store_u64(&g[kOffExpSectionSize], exp_size + delta);
  store_u32(&g[kOffHeaderChecksum], splitzip::xxh3::h32(g.data(), kHeaderChecksummed));
  return g;
}

}  // namespace sztest
