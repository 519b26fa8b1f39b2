// test_util.h — helpers shared by the splitzip test suites (CPU, CUDA): deterministic data generators with fixed
// seeds, file loading, lookup of the repo's data/ folder and of the optional ../shared/data with skip messages.
//
// Everything here is header-only and independent of the library's internals: tests see the library only through
// include/splitzip/splitzip.h.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "splitzip/splitzip.h"

#ifndef SPLITZIP_SOURCE_DIR
#error "SPLITZIP_SOURCE_DIR must be defined by the build (tests/CMakeLists.txt does)"
#endif

namespace sztest {

// ---- deterministic random numbers (splitmix64: same stream on every platform and compiler) -------------------------
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0 (bias below 2^-32 for the bounds used in tests).
  uint64_t below(uint64_t bound) { return next() % bound; }
  double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
};

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  Rng rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng.next();
    memcpy(out.data() + i, &v, 8);
  }
  if (i < n) {
    const uint64_t v = rng.next();
    memcpy(out.data() + i, &v, n - i);
  }
  return out;
}

// Fisher-Yates shuffle with the deterministic generator.
template <typename T>
void shuffle(std::vector<T>& v, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = (size_t)rng.below(i);
    std::swap(v[i - 1], v[j]);
  }
}

// ---- dtype facts, written from docs/FORMAT.md §2 (independently of src/layout.h, so tests also check it) --------
struct DtypeFacts {
  unsigned W, E, M;  // value bits, exponent bits, mantissa bits
};
inline DtypeFacts dtype_facts(unsigned dtype) {
  switch (dtype) {
    case SZ_DTYPE_BF16: return {16, 8, 7};
    case SZ_DTYPE_FP16: return {16, 5, 10};
    case SZ_DTYPE_FP32: return {32, 8, 23};
    case SZ_DTYPE_FP8_E4M3: return {8, 4, 3};
    case SZ_DTYPE_FP8_E5M2: return {8, 5, 2};
    default: return {0, 0, 0};
  }
}
inline size_t value_bytes(unsigned dtype) { return dtype_facts(dtype).W / 8; }
constexpr sz_dtype kAllDtypes[] = {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3,
                                   SZ_DTYPE_FP8_E5M2};

inline uint32_t load_value(const uint8_t* p, unsigned W) {
  uint32_t v = 0;
  for (unsigned b = 0; b < W / 8; ++b) v |= (uint32_t)p[b] << (8 * b);
  return v;
}
inline void store_value(uint8_t* p, unsigned W, uint32_t v) {
  for (unsigned b = 0; b < W / 8; ++b) p[b] = (uint8_t)(v >> (8 * b));
}
inline uint32_t exponent_field(uint32_t x, DtypeFacts f) { return (x >> f.M) & ((1u << f.E) - 1u); }
inline uint32_t make_value(uint32_t sign, uint32_t exponent, uint32_t mantissa, DtypeFacts f) {
  return (sign << (f.W - 1)) | (exponent << f.M) | (mantissa & ((1u << f.M) - 1u));
}

// n values of dtype whose exponents concentrate around `center` (a discretised two-sided geometric law with
// decay `p` per step) and whose sign and mantissa are uniform; a fraction `wild` of the values get a uniformly random
// exponent (these become escapes). KV caches look like this: few exponents carry almost all the mass.
inline std::vector<uint8_t> skewed_values(unsigned dtype, size_t n, uint64_t seed, unsigned center, double p = 0.5,
                                          double wild = 0.0) {
  const DtypeFacts f = dtype_facts(dtype);
  const uint32_t emax = (1u << f.E) - 1u;
  std::vector<uint8_t> out(n * (f.W / 8));
  Rng rng(seed);
  for (size_t i = 0; i < n; ++i) {
    uint32_t e;
    if (wild > 0 && rng.uniform() < wild) {
      e = (uint32_t)rng.below(emax + 1);
    } else {
      int d = 0;
      while (rng.uniform() < p && d < 64) ++d;
      const int sign = (rng.next() & 1) ? 1 : -1;
      int64_t ee = (int64_t)center + sign * d;
      if (ee < 0) ee = 0;
      if (ee > (int64_t)emax) ee = emax;
      e = (uint32_t)ee;
    }
    const uint64_t r = rng.next();
    store_value(out.data() + i * (f.W / 8), f.W, make_value((uint32_t)(r >> 63), e, (uint32_t)r, f));
  }
  return out;
}

// A channel book calibrated on `values` (tensors x tokens x period values) with code width k (0: the best), and the
// bases it points into (movable, not copyable: book.bases stays valid).
struct CalibratedBook {
  std::vector<uint8_t> bases;
  sz_channel_book book{};
  CalibratedBook() = default;
  CalibratedBook(const CalibratedBook&) = delete;
  CalibratedBook(CalibratedBook&&) = default;
};
inline CalibratedBook calibrated_book(const std::vector<uint8_t>& values, sz_dtype dtype, uint32_t tensors,
                                      uint64_t tokens, uint32_t period, unsigned k) {
  CalibratedBook b;
  std::vector<uint32_t> counts(sz_channel_histogram_size(dtype, tensors, period) / 4, 0);
  EXPECT_EQ(sz_channel_histogram_add(counts.data(), dtype, tensors, period, values.data(), tokens), SZ_OK);
  b.bases.resize((size_t)tensors * period);
  unsigned got = 0;
  EXPECT_EQ(sz_channel_calibrate(counts.data(), dtype, tensors, period, k, b.bases.data(), &got, nullptr), SZ_OK);
  EXPECT_EQ(sz_channel_book_init(&b.book, dtype, got, period, tensors, b.bases.data()), SZ_OK);
  return b;
}

// Values of `tensors` tensors of `tokens` tokens of `period` channels whose exponents centre on a per-channel value
// (as real KV does), with a few wild ones (escapes).
inline std::vector<uint8_t> channel_values(sz_dtype dtype, uint32_t tensors, uint64_t tokens, uint32_t period, uint64_t seed) {
  const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
  const unsigned vb = f.W / 8, emax = (1u << f.E) - 1;
  std::vector<uint8_t> out((size_t)tensors * tokens * period * vb);
  Rng rng(seed);
  for (uint64_t t = 0; t < tensors; ++t)
    for (uint64_t i = 0; i < tokens * period; ++i) {
      const uint32_t c = (uint32_t)(i % period);
      const int centre = (int)((c * 7 + t * 3) % (emax > 20 ? 20 : emax - 2)) + (int)(emax > 20 ? emax / 2 - 10 : 1);
      int e = centre;
      if (rng.uniform() < 0.02) {
        e = (int)rng.below(emax + 1);
      } else {
        while (rng.uniform() < 0.35 && e > 0 && e < (int)emax) e += (rng.next() & 1) ? 1 : -1;
      }
      const uint64_t r = rng.next();
      sztest::store_value(out.data() + ((t * tokens * period) + i) * vb, f.W,
                          sztest::make_value((uint32_t)(r >> 63), (uint32_t)e, (uint32_t)r, f));
    }
  return out;
}

// A calibrated, parsed and prepared symbol table that owns its file bytes and workspace.
struct CalibratedTable {
  std::vector<uint8_t> file, workspace;
  sz_symbol_table t{};
  CalibratedTable() = default;
  CalibratedTable(const CalibratedTable&) = delete;
};

inline std::unique_ptr<CalibratedTable> calibrated_table(const std::vector<uint8_t>& values, sz_dtype dtype,
                                                        uint32_t tensors, uint64_t tokens, uint32_t period,
                                                        uint32_t groups) {
  auto tb = std::make_unique<CalibratedTable>();
  std::vector<uint32_t> counts(sz_symbol_histogram_size(dtype, tensors, period) / 4, 0);
  EXPECT_EQ(sz_symbol_histogram_add(counts.data(), dtype, tensors, period, values.data(), tokens), SZ_OK);
  tb->file.resize(sz_symbol_table_file_size(dtype, tensors, period, groups));
  size_t size = 0;
  double bits = 0;
  EXPECT_EQ(sz_symbol_calibrate(counts.data(), dtype, tensors, period, groups, tb->file.data(), tb->file.size(), &size,
                                &bits),
            SZ_OK);
  tb->file.resize(size);
  EXPECT_EQ(sz_symbol_table_parse(tb->file.data(), tb->file.size(), &tb->t), SZ_OK);
  tb->workspace.resize(sz_symbol_table_workspace_size(&tb->t) + 1);
  // An odd address: the workspace may have any alignment.
  EXPECT_EQ(sz_symbol_table_prepare(&tb->t, tb->workspace.data() + 1, tb->workspace.size() - 1), SZ_OK);
  return tb;
}

// A row map (docs/FORMAT.md §5.4) that pairs each row with the previous row of the same token id, built by the
// library (its workspace at an odd address: any alignment works) and parsed; it owns its file bytes.
struct OwnedRowMap {
  std::vector<uint8_t> file;
  sz_row_map m{};
  OwnedRowMap() = default;
  OwnedRowMap(const OwnedRowMap&) = delete;
};

inline std::unique_ptr<OwnedRowMap> row_map_from_tokens(const std::vector<uint32_t>& tokens) {
  auto r = std::make_unique<OwnedRowMap>();
  std::vector<uint8_t> ws(sz_row_map_workspace_size(tokens.size()) + 3);
  r->file.assign(sz_row_map_file_size(tokens.size()), 0xEE);
  size_t size = 0;
  EXPECT_EQ(sz_row_map_from_tokens(tokens.data(), tokens.size(), ws.data() + 3, ws.size() - 3, r->file.data(),
                                   r->file.size(), &size),
            SZ_OK);
  EXPECT_EQ(size, r->file.size());
  EXPECT_EQ(sz_row_map_parse(r->file.data(), r->file.size(), &r->m), SZ_OK);
  return r;
}

// A table written by hand, whose groups reach the corners of the coder: group 0 escapes every symbol (F_A = 4096),
// group 1 gives one symbol 4095 of the 4096 slots, group 2 every symbol a small frequency (nothing escapes), group 3
// halves the frequency from one symbol to the next down to 1, the others have random frequencies and random escaped
// symbols. Channels get random groups.
struct HandTable {
  std::vector<uint8_t> group_of, freq, workspace;
  std::vector<std::vector<uint32_t>> F;  // [g][s], s = 0..A
  sz_symbol_table t{};
  HandTable() = default;
  HandTable(const HandTable&) = delete;
};

inline std::unique_ptr<HandTable> hand_table(sz_dtype dt, uint32_t tensors, uint32_t period, uint32_t groups,
                                             uint64_t seed) {
  auto h = std::make_unique<HandTable>();
  const unsigned B = dt == SZ_DTYPE_FP16 ? 5 : 8, A = 1u << B;
  Rng rng(seed);
  h->F.assign(groups, std::vector<uint32_t>(A + 1, 0));
  for (uint32_t g = 0; g < groups; ++g) {
    std::vector<uint32_t>& F = h->F[g];
    if (g == 0) {
      F[A] = 4096;
    } else if (g == 1) {
      F[A / 2 + 1] = 4095;
      F[A] = 1;
    } else if (g == 2) {
      for (unsigned s = 0; s < A; ++s) F[s] = 4096 / A - 1;
      F[A] = 4096 - A * (4096 / A - 1);
    } else if (g == 3) {
      uint32_t f = 2048, sum = 0;
      for (unsigned k = 0; k < 12; ++k, f /= 2) {
        F[(A / 3 + 5 * k) % A] = f;
        sum += f;
      }
      F[A] = 4096 - sum;
    } else {
      F[A] = 1 + (uint32_t)rng.below(64);
      std::vector<unsigned> coded;
      for (unsigned s = 0; s < A; ++s)
        if (rng.below(2)) coded.push_back(s);
      if (coded.empty()) coded.push_back(0);
      for (unsigned s : coded) F[s] = 1;
      uint32_t left = 4096 - F[A] - (uint32_t)coded.size();
      while (left > 0) {
        const uint32_t add = 1 + (uint32_t)rng.below(std::min<uint32_t>(left, 300));
        F[coded[rng.below(coded.size())]] += add;
        left -= add;
      }
    }
    for (unsigned s = 0; s <= A; ++s) {
      h->freq.push_back((uint8_t)F[s]);
      h->freq.push_back((uint8_t)(F[s] >> 8));
    }
  }
  for (uint64_t c = 0; c < (uint64_t)tensors * period; ++c) {
    const uint32_t g = (uint32_t)rng.below(groups);
    h->group_of.push_back((uint8_t)g);
    h->group_of.push_back((uint8_t)(g >> 8));
  }
  h->t.dtype = (uint8_t)dt;
  h->t.symbol_bits = (uint8_t)B;
  h->t.period = period;
  h->t.tensors = tensors;
  h->t.groups = groups;
  h->t.id = seed;
  h->t.group_of = h->group_of.data();
  h->t.freq = h->freq.data();
  h->workspace.resize(sz_symbol_table_workspace_size(&h->t));
  EXPECT_EQ(sz_symbol_table_prepare(&h->t, h->workspace.data(), h->workspace.size()), SZ_OK);
  return h;
}

// n values of tensor `tensor` whose symbols follow their channel's group, a fraction `wild` of them uniform (often
// escaped); random sign and mantissa bits.
inline std::vector<uint8_t> hand_values(const HandTable& h, sz_dtype dt, uint32_t tensor, uint64_t n, double wild,
                                        uint64_t seed) {
  const DtypeFacts f = dtype_facts(dt);
  const unsigned vb = f.W / 8, A = 1u << h.t.symbol_bits, P = h.t.period;
  Rng rng(seed);
  std::vector<uint8_t> out(n * vb);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t c = (uint64_t)tensor * P + i % P;
    const uint32_t g = h.group_of[2 * c] | (uint32_t)h.group_of[2 * c + 1] << 8;
    const std::vector<uint32_t>& F = h.F[g];
    uint32_t coded = 0;
    for (unsigned s = 0; s < A; ++s) coded += F[s];
    uint32_t sym = (uint32_t)rng.below(A);
    if (coded > 0 && rng.uniform() >= wild) {
      uint32_t r = (uint32_t)rng.below(coded);
      sym = 0;
      while (r >= F[sym]) r -= F[sym++];
    }
    const uint64_t bits = rng.next();
    const uint32_t v = vb == 1 ? sym : make_value((uint32_t)(bits >> 63), sym, (uint32_t)bits, f);
    store_value(out.data() + i * vb, f.W, v);
  }
  return out;
}

// A codebook {center, center-1, center+1, center-2, ...} of `count` entries for width k (no calibration needed).
inline sz_codebook centered_codebook(unsigned dtype, unsigned k, unsigned count, unsigned center) {
  sz_codebook cb;
  memset(&cb, 0, sizeof cb);
  cb.dtype = (uint8_t)dtype;
  cb.code_bits = (uint8_t)k;
  cb.count = (uint8_t)count;
  const unsigned emax = (1u << dtype_facts(dtype).E) - 1u;
  unsigned filled = 0;
  for (int d = 0; filled < count && d < 64; ++d) {
    const int cands[2] = {(int)center + d, (int)center - d - 1};
    for (int c : cands) {
      if (filled < count && c >= 0 && c <= (int)emax) cb.values[filled++] = (uint8_t)c;
    }
  }
  return cb;
}

// ---- files -----------------------------------------------------------------------------------------------------
inline bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  out->clear();
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + got);
  const bool ok = !ferror(f);
  fclose(f);
  return ok;
}

inline bool file_exists(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  fclose(f);
  return true;
}

inline bool write_file(const std::string& path, const void* data, size_t size) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

// The repository root and its files (data/, tests/golden/).
// The repository root: the build's, or SPLITZIP_TEST_SOURCE_DIR when tests built elsewhere run from another copy.
inline std::string source_dir() {
  const char* e = getenv("SPLITZIP_TEST_SOURCE_DIR");
  return e && *e ? e : SPLITZIP_SOURCE_DIR;
}
inline std::string repo_path(const std::string& rel) { return source_dir() + "/" + rel; }

// The shared data folder: $SPLITZIP_SHARED_DATA if set, else <repo>/../shared/data. Empty if it does not exist.
inline std::string shared_data_dir() {
  const char* env = getenv("SPLITZIP_SHARED_DATA");
  const std::string dir = (env && *env) ? std::string(env) : source_dir() + "/../shared/data";
  // A folder cannot be fopen'ed portably; probe a file every shared data copy has.
  if (file_exists(dir + "/kv/trained-d512/README.md") || file_exists(dir + "/kv/stories260K/README.md")) return dir;
  return std::string();
}

// Path of a file under the shared data folder, or "" (with *why set) when absent.
inline std::string shared_file(const std::string& rel, std::string* why) {
  const std::string dir = shared_data_dir();
  if (dir.empty()) {
    *why = "shared data not found (set SPLITZIP_SHARED_DATA or place it at ../shared/data): skipping " + rel;
    return std::string();
  }
  const std::string p = dir + "/" + rel;
  if (!file_exists(p)) {
    *why = "shared data file " + p + " is absent: skipping";
    return std::string();
  }
  return p;
}

// Loads a shared data file into `bytes`, or skips the current test with a message. Use at the top of a TEST body.
#define SZ_LOAD_SHARED_OR_SKIP(rel, bytes)                                             \
  do {                                                                                 \
    std::string sz_why_;                                                               \
    const std::string sz_path_ = ::sztest::shared_file((rel), &sz_why_);               \
    if (sz_path_.empty()) GTEST_SKIP() << sz_why_;                                     \
    ASSERT_TRUE(::sztest::read_file(sz_path_, &(bytes))) << "cannot read " << sz_path_; \
  } while (0)

// ---- CPU kernel sets ----------------------------------------------------------------------------------------------
// The instruction-set variants the library exposes through sz_set_cpu_isa (portable | avx2 | avx512), and whether
// this CPU runs them.
struct IsaVariant {
  const char* name;
  bool supported;
};

inline bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#else
  return false;
#endif
}

inline bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
#else
  return false;
#endif
}

inline std::vector<IsaVariant> isa_variants() {
  return {{"portable", true}, {"avx2", cpu_has_avx2()}, {"avx512", cpu_has_avx512()}};
}

inline bool isa_supported(const char* isa) {
  for (const IsaVariant& v : isa_variants())
    if (strcmp(v.name, isa) == 0) return v.supported;
  return false;
}

// Limits the CPU kernel sets (sz_set_cpu_isa) for the scope of one test, then lifts the limit.
// The variant is checked to be the one in use (only supported variants are asked for).
class ScopedIsa {
 public:
  explicit ScopedIsa(const char* isa) {
    EXPECT_EQ(sz_set_cpu_isa(isa), SZ_OK);
    EXPECT_STREQ(sz_cpu_isa(), isa);
  }
  ~ScopedIsa() { sz_set_cpu_isa(nullptr); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
};

// The sanitizer build runs the broadest loops on every kSanitizerThin-th case (thin() picks them, in a fixed pattern);
// the release build runs them all.
#ifdef SZ_TEST_SANITIZER_BUILD
constexpr unsigned kSanitizerThin = 3;
#else
constexpr unsigned kSanitizerThin = 1;
#endif
// Whether the next case of a loop (counter: the loop's own) runs in this build.
inline bool thin(unsigned* counter) { return (*counter)++ % kSanitizerThin == 0; }

// ---- small conveniences around the C API ----------------------------------------------------------------------
// Every kind of frame a caller can ask for: no checksums, H32 (XXH3) checksums, LH32 checksums (docs/FORMAT.md §4.6).
constexpr uint32_t kFlagSets[] = {0u, SZ_FLAG_CHECKSUMS, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH};

inline sz_params make_params(unsigned chunk_log2, uint32_t flags, unsigned threads = 1) {
  sz_params p = sz_params_default();
  p.chunk_log2 = chunk_log2;
  p.flags = flags;
  p.threads = threads;
  return p;
}

// Compresses with either codec into a vector sized by sz_compress_bound; returns the status.
inline sz_status compress_vec(bool reference, const void* src, uint64_t n, sz_dtype dtype, const sz_codebook* cb,
                              const sz_params* params, std::vector<uint8_t>* out) {
  out->assign((size_t)sz_compress_bound(n, dtype), 0xCD);
  size_t size = 0;
  const sz_status st = reference
                           ? sz_compress_reference(src, n, dtype, cb, params, out->data(), out->size(), &size)
                           : sz_compress(src, n, dtype, cb, params, out->data(), out->size(), &size);
  if (st == SZ_OK) out->resize(size);
  return st;
}

// Decompresses with either codec into a vector of `capacity` bytes; returns the status.
inline sz_status decompress_vec(bool reference, const std::vector<uint8_t>& frame, size_t capacity,
                                std::vector<uint8_t>* out, unsigned threads = 1) {
  out->assign(capacity, 0xA5);
  size_t size = 0;
  static uint8_t dummy;  // some callers decode 0 values: pass a valid pointer anyway
  void* dst = capacity ? (void*)out->data() : (void*)&dummy;
  const sz_status st = reference ? sz_decompress_reference(frame.data(), frame.size(), dst, capacity, &size)
                                 : sz_decompress(frame.data(), frame.size(), dst, capacity, &size, threads);
  if (st == SZ_OK) out->resize(size);
  return st;
}

// The round-trip property every codec must have, checked on one input: the reference and fast encoders produce
// the same frame (at most sz_compress_bound bytes), and both decoders restore the input bit for bit.
// Returns the frame (empty on failure, with gtest failures recorded). `what` labels the failure messages.
inline std::vector<uint8_t> check_roundtrip(const std::vector<uint8_t>& src, sz_dtype dtype, const sz_codebook* cb,
                                            const sz_params& params, const std::string& what) {
  const size_t vb = value_bytes(dtype);
  const uint64_t n = src.size() / vb;
  static const uint8_t empty_src[8] = {0};
  const void* in = src.empty() ? (const void*)empty_src : (const void*)src.data();
  std::vector<uint8_t> ref, fast;
  sz_status st = compress_vec(true, in, n, dtype, cb, &params, &ref);
  EXPECT_EQ(st, SZ_OK) << what << ": sz_compress_reference";
  if (st != SZ_OK) return {};
  st = compress_vec(false, in, n, dtype, cb, &params, &fast);
  EXPECT_EQ(st, SZ_OK) << what << ": sz_compress";
  if (st != SZ_OK) return {};
  EXPECT_LE(ref.size(), sz_compress_bound(n, dtype)) << what;
  EXPECT_TRUE(ref == fast) << what << ": fast frame (" << fast.size() << " B) differs from reference frame ("
                           << ref.size() << " B)";
  for (bool reference_decoder : {true, false}) {
    std::vector<uint8_t> out;
    st = decompress_vec(reference_decoder, ref, src.size(), &out, params.threads);
    EXPECT_EQ(st, SZ_OK) << what << (reference_decoder ? ": sz_decompress_reference" : ": sz_decompress");
    if (st != SZ_OK) continue;
    EXPECT_TRUE(out == src) << what << (reference_decoder ? ": reference" : ": fast")
                            << " decoder did not restore the input bit for bit";
  }
  return ref;
}

// ---- containers read as a file would be, in bounded memory --------------------------------------------------------

// Reads container c as from a file: its last SZ_CONTAINER_FOOTER_SIZE bytes (a copy of their own), where they say
// the index lies, then the items from a copy of those bytes alone (sz_container_locate_index,
// sz_container_index_items). *index receives the copy that the items' names point into; *index_offset where it lay.
inline sz_status container_items_from_index(const std::vector<uint8_t>& c, std::vector<uint8_t>* index,
                                            uint64_t* index_offset, std::vector<sz_item>* items) {
  const size_t tail_size = c.size() < SZ_CONTAINER_FOOTER_SIZE ? c.size() : SZ_CONTAINER_FOOTER_SIZE;
  const std::vector<uint8_t> tail(c.end() - tail_size, c.end());
  uint64_t at = 0, size = 0;
  sz_status s = sz_container_locate_index(tail.empty() ? (const void*)"" : tail.data(), tail.size(), c.size(), &at,
                                          &size);
  if (s != SZ_OK) return s;
  if (at + size != c.size()) ADD_FAILURE() << "the index located does not end at the end of the file";
  index->assign(c.begin() + at, c.end());
  *index_offset = at;
  uint32_t count = 0;
  s = sz_container_index_items(index->data(), index->size(), c.size(), nullptr, 0, &count);
  if (s != SZ_OK) return s;
  items->assign(count + 1, sz_item{});  // one spare: the call must not use more than the count
  uint32_t got = 0;
  s = sz_container_index_items(index->data(), index->size(), c.size(), items->data(), count + 1, &got);
  if (s != SZ_OK) return s;
  if (got != count) ADD_FAILURE() << "sz_container_index_items counted " << count << " then gave " << got;
  items->resize(got);
  return SZ_OK;
}

inline std::string status_str(sz_status s) {
  const char* n = sz_status_name(s);
  return n ? std::string(n) : std::string("(null)");
}

// Ratio as a printable string.
inline std::string ratio_str(size_t raw, size_t compressed) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.4f", compressed ? (double)raw / (double)compressed : 0.0);
  return buf;
}

}  // namespace sztest

// gtest prints sz_status as its name.
inline void PrintTo(sz_status s, std::ostream* os) { *os << sztest::status_str(s) << " (" << (int)s << ")"; }
