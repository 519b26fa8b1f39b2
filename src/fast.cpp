// fast.cpp — the fast CPU codec: sz_compress / sz_decompress. Same frames as the reference codec (reference.cpp),
// byte for byte, for every input and thread count; only faster.
//
// Structure
//   - Per-chunk kernels, picked at run time (selected_isa: the best set for the CPU, or the one sz_set_cpu_isa names): BF16
//     has AVX-512 BW+VBMI kernels (fast_avx512.cpp) and AVX2+BMI2 kernels (fast_avx2.cpp), FP16 and FP8 have
//     AVX2+BMI2 kernels, and every dtype has portable loops templated on dtype and code width (also used for the
//     tail of a chunk that is not a multiple of the vector width, and for FP32). Values whose exponent is not in the codebook
//     are listed in per-chunk scratch while the codes are written (their code is 0), then appended as escape lists;
//     a chunk whose coded record would be larger than its raw exponents is re-packed raw (§4.7).
//   - Threads (encode): chunks are cut into contiguous ranges, one per thread. Rest fields go straight to their
//     fixed place. Thread t writes its records from the offset they would have if every earlier chunk were stored
//     raw (an upper bound, so ranges never collide); after the join each range is moved down to its exact offset
//     (prefix sum of the range sizes) and its index entries are shifted. A single thread writes in place and checks
//     the capacity record by record, so SZ_ERROR_DST_TOO_SMALL means exactly "the frame does not fit".
//   - Threads (decode): chunk ranges decode independently; the error reported is that of the first failing chunk,
//     as the reference (which goes chunk by chunk) would report it.
//   - Threads are only used for at least 1 MiB of input each, at most 256; the calling thread takes a share.
//     Chunk checksums use XXH3 or LH32 compiled for the selected ISA.
//   - Memory and threads: an encoding thread needs escape scratch for one chunk (3 bytes a value). The one-shot calls
//     allocate it and start their threads per call; a context (sz_cctx / sz_dctx) allocates its scratch and starts
//     its threads once, parks the threads between calls, and its calls allocate nothing and start nothing.
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>

#include "internal.h"
#if defined(SPLITZIP_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#include "kernels.h"

namespace splitzip {
namespace detail {

using namespace layout;
using kernels::CodeTables;

namespace {
// AMD's family 17h (Zen 1 and 2, and Hygon's family 18h built on it) runs pdep and pext, on which the AVX2 kernels'
// code packing rests, as microcode of some hundred cycles: measured there, the AVX2 kernels ran at half the speed
// of the portable ones (bench/NOTES.md). Zen 3 and later run them in one cycle.
bool slow_bmi2() {
#if defined(SPLITZIP_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;    // "AuthenticAMD"
  const bool hygon = b == 0x6f677948u && d == 0x6e65476eu && c == 0x656e6975u;  // "HygonGenuine"
  if ((!amd && !hygon) || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned base = (a >> 8) & 15u, family = base + (base == 15u ? (a >> 20) & 255u : 0u);
  return family == 0x17 || family == 0x18;
#else
  return false;
#endif
}

// The richest set the CPU can run, among those compiled in.
Isa supported_isa() {
#if defined(__GNUC__) || defined(__clang__)
#if defined(SPLITZIP_HAVE_AVX2_TU)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#if defined(SPLITZIP_HAVE_AVX512_TU)
  if (avx2 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi")) return Isa::kAvx512;
#endif
  if (avx2) return Isa::kAvx2;
#endif
#endif
  return Isa::kPortable;
}

// sz_set_cpu_isa's choice (an Isa value), or -1: none, the fastest set for this CPU.
std::atomic<int> g_isa_choice{-1};
}  // namespace

Isa selected_isa() {
  static const Isa supported = supported_isa();
  static const Isa best = supported == Isa::kAvx2 && slow_bmi2() ? Isa::kPortable : supported;
  const int choice = g_isa_choice.load(std::memory_order_relaxed);
  if (choice < 0) return best;
  return choice < (int)supported ? (Isa)choice : supported;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "portable";
  }
}

namespace {

// Below this many input bytes per thread, extra threads cost more than they gain.
constexpr uint64_t kMinBytesPerThread = (uint64_t)1 << 20;
// Most threads one call uses (bookkeeping lives in fixed arrays, no allocation).
constexpr unsigned kMaxThreads = 256;

void build_tables(const uint8_t* values, unsigned count, unsigned k, CodeTables* t) {
  memset(t, 0, sizeof *t);
  memset(t->code_of, 0xFF, sizeof t->code_of);
  t->k = (uint8_t)k;
  t->count = (uint8_t)count;
  for (unsigned i = 0; i < count; ++i) {
    const unsigned e = values[i];
    t->code_of[e] = (uint8_t)i;
    t->exp_of[i] = (uint8_t)e;
    const unsigned hi = e >> 4;
    unsigned h = 0;
    while (h < t->n_nibbles && t->nibbles[h] != hi) ++h;
    if (h == t->n_nibbles) t->nibbles[t->n_nibbles++] = (uint8_t)hi;
    t->nibble_lut[h][e & 15] = (uint8_t)(i + 1);
  }
}

// ---- bit streams of §3 (LSB-first, groups of 8 fields of b bits = b bytes) ----------------------------------------
struct BitWriter {
  uint8_t* p;
  uint64_t acc = 0;
  unsigned bits = 0;
  explicit BitWriter(uint8_t* out) : p(out) {}
  inline void put(uint32_t v, unsigned b) {  // b <= 24
    acc |= (uint64_t)v << bits;
    bits += b;
    if (bits >= 32) {
      store_u32(p, (uint32_t)acc);
      p += 4;
      acc >>= 32;
      bits -= 32;
    }
  }
  inline void flush() {  // bits is a multiple of 8 at a group boundary
    while (bits > 0) {
      *p++ = (uint8_t)acc;
      acc >>= 8;
      bits = bits >= 8 ? bits - 8 : 0;
    }
  }
};

struct BitReader {
  const uint8_t* p;
  const uint8_t* end;
  uint64_t acc = 0;
  unsigned bits = 0;
  BitReader(const uint8_t* begin, const uint8_t* stop) : p(begin), end(stop) {}
  inline uint32_t get(unsigned b) {  // b <= 24
    if (bits < b) {
      while (bits <= 56 && p < end) {
        acc |= (uint64_t)*p++ << bits;
        bits += 8;
      }
    }
    const uint32_t v = (uint32_t)(acc & ((1ull << b) - 1));
    acc >>= b;
    bits -= b;
    return v;
  }
};

inline uint32_t field_at(const uint8_t* base, uint64_t j, unsigned b) {  // one field, b <= 24
  const uint64_t bit = j * b;
  const uint8_t* p = base + bit / 8;
  const unsigned shift = (unsigned)(bit % 8);
  const unsigned nbytes = (shift + b + 7) / 8;
  uint64_t v = 0;
  for (unsigned i = 0; i < nbytes; ++i) v |= (uint64_t)p[i] << (8 * i);
  return (uint32_t)((v >> shift) & ((1ull << b) - 1));
}

template <unsigned VB>
inline uint32_t load_value(const uint8_t* p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  typename std::conditional<VB == 1, uint8_t, typename std::conditional<VB == 2, uint16_t, uint32_t>::type>::type v;
  memcpy(&v, p, VB);
  return v;
#else
  if (VB == 1) return p[0];
  if (VB == 2) return load_u16(p);
  return load_u32(p);
#endif
}
template <unsigned VB>
inline void store_value(uint8_t* p, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  typename std::conditional<VB == 1, uint8_t, typename std::conditional<VB == 2, uint16_t, uint32_t>::type>::type w =
      (decltype(w))v;
  memcpy(p, &w, VB);
#else
  if (VB == 1) {
    p[0] = (uint8_t)v;
  } else if (VB == 2) {
    store_u16(p, (uint16_t)v);
  } else {
    store_u32(p, v);
  }
#endif
}

// A chunk's checksum (H32, or LH32 with lane) with the widest build of it that the CPU runs.
inline uint32_t chunk_hash(bool avx2, bool avx512, bool lane, const void* data, size_t size) {
#if defined(SPLITZIP_HAVE_AVX512_TU)
  if (avx512) return lane ? kernels::avx512::lh32(data, size) : kernels::avx512::h32(data, size);
#endif
#if defined(SPLITZIP_HAVE_AVX2_TU)
  if (avx2) return lane ? kernels::avx2::lh32(data, size) : kernels::avx2::h32(data, size);
#endif
  (void)avx2;
  (void)avx512;
  return lane ? lh32(data, size) : h32(data, size);
}

// ---- per-call context ------------------------------------------------------------------------------------------
struct EncodeCtx {
  const uint8_t* src;
  uint64_t n;
  DtypeTraits t;
  unsigned dtype, vb, k, chunk_log2;
  bool checksums, lane_hash;  // lane_hash: the checksums are LH32
  bool avx2;    // AVX2 + BMI2 kernels
  bool avx512;  // AVX-512 BW + VBMI kernels (implies avx2)
  CodeTables tables;
  const uint8_t* bases;  // version 2 (channel windows): the tensor's bases; nullptr for version 1
  uint32_t period;
  uint8_t* dst;
  FrameOffsets off;  // exponents = start of the exponent section
};

// The code of exponent e in the window of base b (k-bit codes), or 0xFF when e is outside it (§4.9).
inline uint32_t window_code(uint32_t e, uint32_t b, unsigned k) { return e - b < (1u << k) ? e - b : 0xFFu; }

template <unsigned DT>
constexpr DtypeTraits traits_of() {
  return DT == 1 ? DtypeTraits{16, 8, 8, 7}
       : DT == 2 ? DtypeTraits{16, 5, 11, 10}
       : DT == 3 ? DtypeTraits{32, 8, 24, 23}
       : DT == 4 ? DtypeTraits{8, 4, 4, 3}
                 : DtypeTraits{8, 5, 3, 2};
}

// Little-endian loads/stores of B bytes (B a compile-time constant, at most sizeof(T)) to and from an integer.
typedef unsigned __int128 u128;
template <unsigned B, class T>
inline T load_le(const uint8_t* p) {
  T v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (B == 1 || B == 2 || B == 4 || B == 8 || B == 16) {
    memcpy(&v, p, B);
    return v;
  }
#endif
  // Odd sizes byte by byte: a memcpy of 3 bytes into an integer can go through the stack and stall the load.
  for (unsigned i = 0; i < B; ++i) v |= (T)p[i] << (8 * i);
  return v;
}
template <unsigned B, class T>
inline void store_le(uint8_t* p, T v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, &v, B);
#else
  for (unsigned i = 0; i < B; ++i) p[i] = (uint8_t)(v >> (8 * i));
#endif
}

// Portable encode of values [j0, j1) of a chunk (j0 a multiple of 8), one group of 8 values at a time: rest fields
// into rest (the chunk's rest slice), codes into codes (the chunk's code area), escapes into pos/exps from index x
// Returns the new x.
// CH: channel windows (version 2); ch is the channel of value j0 and advances with j.
template <unsigned DT, unsigned K, bool CH>
size_t encode_portable(const EncodeCtx& c, const uint8_t* values, size_t j0, size_t j1, uint8_t* rest,
                       uint8_t* codes, uint16_t* pos, uint8_t* exps, size_t x, uint32_t ch) {
  constexpr DtypeTraits t = traits_of<DT>();
  constexpr unsigned VB = t.value_bits / 8, R = t.rest_bits;
  static_assert(8 * R <= 128 || R == 24, "rest fields of a group fit 128 bits, or are whole bytes");
  const uint8_t* code_of = c.tables.code_of;
  for (size_t g = j0; g < j1; g += 8) {
    const unsigned m = j1 - g < 8 ? (unsigned)(j1 - g) : 8u;  // values in this group; the rest is zero padding
    uint32_t cw = 0;
    typename std::conditional<(8 * R > 64), u128, uint64_t>::type rw = 0;
    for (unsigned u = 0; u < 8; ++u) {
      const uint32_t v = u < m ? load_value<VB>(values + (g + u) * VB) : 0;
      const uint32_t e = exponent_of(v, t);
      uint32_t code;
      if (CH) {
        code = window_code(e, c.bases[ch], K);
        if (++ch == c.period) ch = 0;
      } else {
        code = code_of[e];
      }
      if (code == 0xFF) {  // escapes are rare on real data: a predictable branch beats two stores per value
        if (u < m) {
          pos[x] = (uint16_t)(g + u);
          exps[x] = (uint8_t)e;
          ++x;
        }
        code = 0;
      }
      if (u >= m) code = 0;  // padding fields are zero
      cw |= code << (u * K);
      const uint32_t r = rest_of(v, t);
      if (R == 24) {
        store_le<3, uint32_t>(rest + (g + u) * 3, r);
      } else {
        rw |= (decltype(rw))r << (u * R);
      }
    }
    store_le<K, uint32_t>(codes + g / 8 * K, cw);
    if (R != 24) store_le<(R == 24 ? 1 : R), decltype(rw)>(rest + g / 8 * R, rw);
  }
  return x;
}

template <unsigned DT, bool CH>
size_t encode_portable_k(const EncodeCtx& c, const uint8_t* values, size_t j0, size_t j1, uint8_t* rest,
                         uint8_t* codes, uint16_t* pos, uint8_t* exps, size_t x, uint32_t ch) {
  switch (c.k) {
    case 1: return encode_portable<DT, 1, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    case 2: return encode_portable<DT, 2, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    case 3: return encode_portable<DT, 3, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    default: return encode_portable<DT, 4, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
  }
}

template <bool CH>
size_t encode_values_t(const EncodeCtx& c, const uint8_t* values, size_t j0, size_t j1, uint8_t* rest,
                       uint8_t* codes, uint16_t* pos, uint8_t* exps, size_t x, uint32_t ch) {
  switch (c.dtype) {
    case 1: return encode_portable_k<1, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    case 2: return encode_portable_k<2, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    case 3: return encode_portable_k<3, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    case 4: return encode_portable_k<4, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
    default: return encode_portable_k<5, CH>(c, values, j0, j1, rest, codes, pos, exps, x, ch);
  }
}

// Values [j0, j1) of a chunk; first = the frame index of the chunk's value 0 (for the channel of a value).
size_t encode_values(const EncodeCtx& c, const uint8_t* values, size_t j0, size_t j1, uint8_t* rest, uint8_t* codes,
                     uint16_t* pos, uint8_t* exps, size_t x, uint64_t first) {
  if (c.bases) return encode_values_t<true>(c, values, j0, j1, rest, codes, pos, exps, x,
                                            (uint32_t)((first + j0) % c.period));
  return encode_values_t<false>(c, values, j0, j1, rest, codes, pos, exps, x, 0);
}

// Raw exponent record (§4.5 mode 1).
void write_raw_exponents(const EncodeCtx& c, const uint8_t* values, size_t len, uint8_t* record) {
  BitWriter w(record);
  for (size_t j = 0; j < len; ++j) {
    uint32_t v;
    if (c.vb == 1) v = values[j];
    else if (c.vb == 2) v = load_u16(values + 2 * j);
    else v = load_u32(values + 4 * j);
    w.put(exponent_of(v, c.t), c.t.exponent_bits);
  }
  for (size_t j = len; j % 8 != 0; ++j) w.put(0, c.t.exponent_bits);
  w.flush();
}


// Escape scratch of one encoding thread, for chunks of up to `values` values: positions then exponents (+8: the
// portable kernel writes one entry past the last escape). 2-byte aligned.
inline size_t scratch_values(uint64_t n, unsigned chunk_log2) {
  return (size_t)std::min<uint64_t>((uint64_t)1 << chunk_log2, n) + 8;
}
constexpr size_t kScratchPerValue = 3;
constexpr size_t kMaxScratch = (((size_t)1 << SZ_MAX_CHUNK_LOG2) + 8) * kScratchPerValue;

// Encodes chunks [c0, c1): records from `out` on, never past `limit`. Index entries hold offsets relative to `out`
// (the caller shifts them). *used receives the bytes written. mem: scratch_values(n, chunk_log2) * 3 bytes.
sz_status encode_range(const EncodeCtx& c, uint64_t c0, uint64_t c1, uint8_t* out, const uint8_t* limit,
                       uint64_t* used, uint8_t* mem) {
  const uint64_t S = (uint64_t)1 << c.chunk_log2;
  const size_t cap = scratch_values(c.n, c.chunk_log2);
  struct {
    uint16_t* pos;
    uint8_t* exps;
  } scratch{reinterpret_cast<uint16_t*>(mem), mem + cap * 2}, *s = &scratch;
  uint8_t* cursor = out;
  sz_status status = SZ_OK;
  for (uint64_t ci = c0; ci < c1; ++ci) {
    const size_t len = (size_t)chunk_len(c.n, c.chunk_log2, ci);
    const uint8_t* values = c.src + ci * S * c.vb;
    uint8_t* rest = c.dst + c.off.rest + ci * S / 8 * c.t.rest_bits;
    const uint64_t g = packed_bytes(len, c.k);
    const uint64_t raw = packed_bytes(len, c.t.exponent_bits);
    if ((uint64_t)(limit - cursor) < g) {
      status = SZ_ERROR_DST_TOO_SMALL;
      break;
    }
    size_t x = 0, j = 0;
    const bool simd = c.bases == nullptr;  // the vector kernels serve codebooks; channel windows are portable
#if defined(SPLITZIP_HAVE_AVX512_TU)
    if (simd && c.avx512 && c.dtype == SZ_DTYPE_BF16) {
      j = len & ~(size_t)63;
      x = kernels::avx512::encode_bf16(values, j, rest, cursor, c.tables, s->pos, s->exps, 0);
    }
#endif
#if defined(SPLITZIP_HAVE_AVX2_TU)
    if (!simd) {
    } else if (j == 0 && c.avx2 && c.dtype == SZ_DTYPE_BF16) {
      j = len & ~(size_t)31;
      x = kernels::avx2::encode_bf16(values, j, rest, cursor, c.tables, s->pos, s->exps, 0);
    } else if (j == 0 && c.avx2 && c.dtype == SZ_DTYPE_FP16) {
      j = len & ~(size_t)31;
      x = kernels::avx2::encode_fp16(values, j, rest, cursor, c.tables, s->pos, s->exps, 0);
    } else if (j == 0 && c.avx2 && (c.dtype == SZ_DTYPE_FP8_E4M3 || c.dtype == SZ_DTYPE_FP8_E5M2)) {
      j = len & ~(size_t)31;
      x = kernels::avx2::encode_fp8(c.t.mantissa_bits, values, j, rest, cursor, c.tables, s->pos, s->exps, 0);
    }
#endif
    if (j < len) x = encode_values(c, values, j, len, rest, cursor, s->pos, s->exps, x, ci * S);
    const uint64_t coded = g + kEscapeBytes * x;
    uint64_t mode, size;
    if (coded <= raw) {
      mode = kModeCoded;
      size = coded;
      if ((uint64_t)(limit - cursor) < size) {
        status = SZ_ERROR_DST_TOO_SMALL;
        break;
      }
      uint8_t* p = cursor + g;
      for (size_t i = 0; i < x; ++i) store_u16(p + 2 * i, s->pos[i]);
      memcpy(p + 2 * x, s->exps, x);
    } else {
      mode = kModeRaw;
      size = raw;
      if ((uint64_t)(limit - cursor) < size) {
        status = SZ_ERROR_DST_TOO_SMALL;
        break;
      }
      write_raw_exponents(c, values, len, cursor);
    }
    cursor += size;
    store_u64(c.dst + c.off.index + kIndexEntrySize * ci, (uint64_t)(cursor - out) | (mode << kIndexModeShift));
    if (c.checksums) {
      const size_t bytes = len * c.vb;
      const uint32_t h = chunk_hash(c.avx2, c.avx512, c.lane_hash, values, bytes);
      store_u32(c.dst + c.off.checksums + kChecksumEntrySize * ci, h);
    }
  }
  *used = (uint64_t)(cursor - out);
  return status;
}

unsigned resolve_threads(unsigned requested, uint64_t bytes, uint64_t chunks) {
  unsigned t = requested;
  if (t == 0) {
    t = std::thread::hardware_concurrency();
    if (t == 0) t = 1;
  }
  const uint64_t by_size = std::max<uint64_t>(1, bytes / kMinBytesPerThread);
  return (unsigned)std::max<uint64_t>(1, std::min<uint64_t>({(uint64_t)t, by_size, chunks, (uint64_t)kMaxThreads}));
}

// Runs fn(i) for i in [0, n) on n threads started for this call (the calling thread takes i = 0). If a thread
// cannot be started, its work runs on the calling thread.
template <class Fn>
void run_parallel(unsigned n, Fn fn) {
  std::thread pool[kMaxThreads];
  for (unsigned i = 1; i < n; ++i) {
    try {
      pool[i] = std::thread(fn, i);
    } catch (...) {  // no thread: do that share here
      fn(i);
    }
  }
  fn(0);
  for (unsigned i = 1; i < n; ++i)
    if (pool[i].joinable()) pool[i].join();
}

// Worker threads parked between calls: run(n, fn) runs fn(i) for i in [0, n), n <= size(), i = 0 on the calling
// thread, and returns when all are done. One run at a time (a context serves one call at a time).
class Pool {
 public:
  // Starts size - 1 workers; false if one could not be started (then the pool must be destroyed).
  bool start(unsigned size) {
    for (unsigned i = 1; i < size; ++i) {
      try {
        workers_[i] = std::thread([this, i] { work(i); });
      } catch (...) {
        return false;
      }
      ++started_;
    }
    return true;
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (unsigned i = 1; i <= started_; ++i) workers_[i].join();
  }
  unsigned size() const { return started_ + 1; }
  template <class Fn>
  void run(unsigned n, Fn& fn) {
    if (n <= 1) {
      fn(0u);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      task_ = [](void* f, unsigned i) { (*static_cast<Fn*>(f))(i); };
      arg_ = &fn;
      n_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    wake_.notify_all();
    fn(0u);
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void work(unsigned i) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (i >= n_) continue;
      void (*task)(void*, unsigned) = task_;
      void* arg = arg_;
      lock.unlock();
      task(arg, i);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }
  std::thread workers_[kMaxThreads];
  unsigned started_ = 0;
  std::mutex m_;
  std::condition_variable wake_, done_;
  void (*task_)(void*, unsigned) = nullptr;
  void* arg_ = nullptr;
  unsigned n_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// Threads of a one-shot call: started for the call.
struct FreshThreads {
  template <class Fn>
  void run(unsigned n, Fn& fn) {
    run_parallel(n, fn);
  }
};

// ---- decode ------------------------------------------------------------------------------------------------------
struct DecodeCtx {
  const uint8_t* src;
  const FrameHeader* h;
  uint8_t* dst;
  unsigned vb;
  bool avx2, avx512;
  CodeTables tables;
  const uint8_t* bases;  // version 2: the frame's tensor's bases; nullptr for version 1
  uint32_t period;
};

// CH: channel windows (version 2); ch is the channel of value j0. Returns false on a code with no exponent.
template <unsigned DT, unsigned K, bool CH>
bool decode_values_portable(const DecodeCtx& d, const uint8_t* rest, const uint8_t* codes, size_t j0, size_t j1,
                            uint8_t* out, uint32_t ch) {
  constexpr DtypeTraits t = traits_of<DT>();
  constexpr unsigned VB = t.value_bits / 8, R = t.rest_bits;
  constexpr unsigned k = K;
  const unsigned count = d.tables.count;
  constexpr uint32_t code_mask = (1u << k) - 1;
  constexpr uint32_t rest_mask = (1u << R) - 1;
  const uint8_t* exp_of = d.tables.exp_of;
  uint32_t max_code = 0, max_exp = 0;
  for (size_t g = j0; g < j1; g += 8) {
    const unsigned m = j1 - g < 8 ? (unsigned)(j1 - g) : 8u;
    const uint32_t cw = load_le<K, uint32_t>(codes + g / 8 * k);
    typedef typename std::conditional<(8 * R > 64), u128, uint64_t>::type RestWord;
    const RestWord rw = R == 24 ? 0 : load_le<(R == 24 ? 1 : R), RestWord>(rest + g / 8 * R);
    for (unsigned u = 0; u < m; ++u) {
      const uint32_t code = (cw >> (u * k)) & code_mask;
      uint32_t e;
      if (CH) {
        e = d.bases[ch] + code;
        if (++ch == d.period) ch = 0;
        max_exp = e > max_exp ? e : max_exp;
      } else {
        max_code = code > max_code ? code : max_code;
        e = exp_of[code];
      }
      const uint32_t r = R == 24 ? load_le<3, uint32_t>(rest + (g + u) * 3) : (uint32_t)(rw >> (u * R)) & rest_mask;
      store_value<VB>(out + (g + u) * VB, join(e & ((1u << t.exponent_bits) - 1u), r, t));
    }
  }
  return CH ? max_exp < (1u << t.exponent_bits) : max_code < count;
}

template <unsigned DT, bool CH>
bool decode_values_k(const DecodeCtx& d, const uint8_t* rest, const uint8_t* codes, size_t j0, size_t j1,
                     uint8_t* out, uint32_t ch) {
  switch (d.tables.k) {
    case 1: return decode_values_portable<DT, 1, CH>(d, rest, codes, j0, j1, out, ch);
    case 2: return decode_values_portable<DT, 2, CH>(d, rest, codes, j0, j1, out, ch);
    case 3: return decode_values_portable<DT, 3, CH>(d, rest, codes, j0, j1, out, ch);
    default: return decode_values_portable<DT, 4, CH>(d, rest, codes, j0, j1, out, ch);
  }
}

template <bool CH>
bool decode_values_t(const DecodeCtx& d, const uint8_t* rest, const uint8_t* codes, size_t j0, size_t j1,
                     uint8_t* out, uint32_t ch) {
  switch (d.h->dtype) {
    case 1: return decode_values_k<1, CH>(d, rest, codes, j0, j1, out, ch);
    case 2: return decode_values_k<2, CH>(d, rest, codes, j0, j1, out, ch);
    case 3: return decode_values_k<3, CH>(d, rest, codes, j0, j1, out, ch);
    case 4: return decode_values_k<4, CH>(d, rest, codes, j0, j1, out, ch);
    default: return decode_values_k<5, CH>(d, rest, codes, j0, j1, out, ch);
  }
}

// Values [j0, j1) of a chunk whose value 0 is value `first` of the frame.
bool decode_values(const DecodeCtx& d, const uint8_t* rest, const uint8_t* codes, size_t j0, size_t j1,
                   uint8_t* out, uint64_t first) {
  if (d.bases) return decode_values_t<true>(d, rest, codes, j0, j1, out, (uint32_t)((first + j0) % d.period));
  return decode_values_t<false>(d, rest, codes, j0, j1, out, 0);
}

inline void store_joined(const DecodeCtx& d, uint8_t* out, size_t j, uint32_t e, uint32_t r) {
  const uint32_t v = join(e, r, d.h->t);
  if (d.vb == 1) out[j] = (uint8_t)v;
  else if (d.vb == 2) store_u16(out + 2 * j, (uint16_t)v);
  else store_u32(out + 4 * j, v);
}

// Validates and decodes chunk ci (its index entry already passed check_frame_index).
sz_status decode_chunk(const DecodeCtx& d, uint64_t ci) {
  const FrameHeader& h = *d.h;
  const DtypeTraits t = h.t;
  const uint64_t S = (uint64_t)1 << h.chunk_log2;
  const uint8_t* index = d.src + h.off.index;
  const uint64_t entry = load_u64(index + kIndexEntrySize * ci);
  const uint64_t end = entry & kIndexEndMask;
  const uint64_t begin = ci == 0 ? 0 : (load_u64(index + kIndexEntrySize * (ci - 1)) & kIndexEndMask);
  const uint64_t mode = entry >> kIndexModeShift;
  const size_t len = (size_t)chunk_len(h.n, h.chunk_log2, ci);
  const uint8_t* record = d.src + h.off.exponents + begin;
  const uint8_t* rest = d.src + h.off.rest + ci * S / 8 * t.rest_bits;
  uint8_t* out = d.dst + ci * S * d.vb;
  const bool last = ci + 1 == h.chunks;

  // Padding bits of the rest section (its last group lies in the last chunk).
  if (last && len % 8 != 0)
    for (size_t j = len; j % 8 != 0; ++j)
      if (field_at(rest, j, t.rest_bits) != 0) return SZ_ERROR_CORRUPT;

  if (mode == kModeRaw) {
    BitReader er(record, record + packed_bytes(len, t.exponent_bits));
    BitReader rr(rest, rest + packed_bytes(len, t.rest_bits));
    for (size_t j = 0; j < len; ++j) {
      const uint32_t e = er.get(t.exponent_bits);
      const uint32_t r = t.rest_bits == 8 ? rest[j] : rr.get(t.rest_bits);
      store_joined(d, out, j, e, r);
    }
    for (size_t j = len; j % 8 != 0; ++j)
      if (field_at(record, j, t.exponent_bits) != 0) return SZ_ERROR_CORRUPT;
  } else {
    const unsigned k = h.code_bits;
    const uint64_t g = packed_bytes(len, k);
    const size_t x = (size_t)((end - begin - g) / kEscapeBytes);
    const uint8_t* positions = record + g;
    const uint8_t* exps = positions + 2 * x;
    size_t j = 0;
    bool ok = true;
    const bool simd = d.bases == nullptr;  // the vector kernels serve codebooks; channel windows are portable
#if defined(SPLITZIP_HAVE_AVX2_TU)
    const size_t readable = (size_t)(h.off.end - h.off.exponents - begin);
#if defined(SPLITZIP_HAVE_AVX512_TU)
    if (simd && d.avx512 && h.dtype == SZ_DTYPE_BF16) {
      j = len & ~(size_t)63;
      ok = kernels::avx512::decode_bf16(rest, record, j, d.tables, out);
    }
#endif
    if (!simd) {
    } else if (j == 0 && d.avx2 && h.dtype == SZ_DTYPE_BF16) {
      j = len & ~(size_t)31;
      ok = kernels::avx2::decode_bf16(rest, record, readable, j, d.tables, out);
    } else if (j == 0 && d.avx2 && h.dtype == SZ_DTYPE_FP16) {
      j = len & ~(size_t)31;
      const size_t rest_readable = (size_t)(h.off.end - (uint64_t)(rest - d.src));
      ok = kernels::avx2::decode_fp16(rest, rest_readable, record, readable, j, d.tables, out);
    } else if (j == 0 && d.avx2 && (h.dtype == SZ_DTYPE_FP8_E4M3 || h.dtype == SZ_DTYPE_FP8_E5M2)) {
      j = len & ~(size_t)31;
      const size_t rest_readable = (size_t)(h.off.end - (uint64_t)(rest - d.src));
      ok = kernels::avx2::decode_fp8(t.mantissa_bits, rest, rest_readable, record, readable, j, d.tables, out);
    }
#endif
    if (j < len) ok &= decode_values(d, rest, record, j, len, out, ci * S);
    if (!ok) return SZ_ERROR_CORRUPT;
    for (size_t j2 = len; j2 % 8 != 0; ++j2)
      if (field_at(record, j2, k) != 0) return SZ_ERROR_CORRUPT;
    // Escapes: positions strictly increasing and inside the chunk, code 0, exponent outside the codebook; then the
    // value is rebuilt with its own exponent. A code field lies in two bytes (k <= 4) and since x >= 1 the byte
    // after the codes is still inside the record.
    const uint8_t* code_of = d.tables.code_of;
    const uint32_t code_mask = (1u << k) - 1;
    const uint32_t exp_limit = 1u << t.exponent_bits;
    uint32_t prev = 0;
    for (size_t i = 0; i < x; ++i) {
      const uint32_t p = load_u16(positions + 2 * i);
      const uint32_t e = exps[i];
      if (p >= len || (i > 0 && p <= prev) || e >= exp_limit) return SZ_ERROR_CORRUPT;
      const bool in_book = d.bases ? window_code(e, d.bases[(ci * S + p) % d.period], k) != 0xFFu : code_of[e] != 0xFF;
      if (in_book) return SZ_ERROR_CORRUPT;
      const uint32_t bit = p * k;
      if (((load_u16(record + bit / 8) >> (bit % 8)) & code_mask) != 0) return SZ_ERROR_CORRUPT;
      if (h.dtype == SZ_DTYPE_BF16) {
        const uint32_t r = rest[p];
        store_u16(out + 2 * p, (uint16_t)(((r & 0x80u) << 8) | (e << 7) | (r & 0x7Fu)));
      } else {
        store_joined(d, out, p, e, t.rest_bits == 8 ? rest[p] : field_at(rest, p, t.rest_bits));
      }
      prev = p;
    }
  }
  if (h.checksums) {
    const size_t bytes = len * d.vb;
    const uint32_t hv = chunk_hash(d.avx2, d.avx512, (h.flags & kFlagLaneHash) != 0, out, bytes);
    if (hv != load_u32(d.src + h.off.checksums + kChecksumEntrySize * ci)) return SZ_ERROR_CHECKSUM;
  }
  return SZ_OK;
}

}  // namespace
}  // namespace detail
}  // namespace splitzip

using namespace splitzip;
using namespace splitzip::layout;
using namespace splitzip::detail;

namespace {

// A reusable context: the ISA chosen at creation, escape scratch for every thread, parked worker threads.
struct CpuContext {
  unsigned threads = 1;
  Isa isa = Isa::kPortable;
  uint8_t* scratch = nullptr;  // threads * kMaxScratch bytes (compression only)
  Pool* pool = nullptr;        // nullptr for one thread
  ~CpuContext() {
    delete pool;
    delete[] scratch;
  }
  bool init(unsigned want, bool with_scratch) {
    if (want == 0) {
      want = std::thread::hardware_concurrency();
      if (want == 0) want = 1;
    }
    threads = want < kMaxThreads ? want : kMaxThreads;
    isa = selected_isa();
    if (with_scratch) {
      scratch = new (std::nothrow) uint8_t[kMaxScratch * threads];
      if (scratch == nullptr) return false;
    }
    if (threads > 1) {
      pool = new (std::nothrow) Pool;
      if (pool == nullptr || !pool->start(threads)) return false;
    }
    return true;
  }
};

}  // namespace

// The public types are the same object; they are distinct so that a compression context is not passed to
// decompression by mistake, and so that they may differ later.
struct sz_cctx : CpuContext {};
struct sz_dctx : CpuContext {};

namespace {

template <class T>
T* context_create(unsigned threads, bool scratch) {
  T* c = new (std::nothrow) T;
  if (c != nullptr && !c->init(threads, scratch)) {
    delete c;
    c = nullptr;
  }
  return c;
}

template <class Runner>
sz_status compress_impl(const void* src_v, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                        const sz_channel_book* book, uint32_t tensor, const sz_params* params, void* dst_v, size_t dst_capacity, size_t* dst_size, Isa isa,
                        unsigned requested_threads, uint8_t* ctx_scratch, Runner& runner) {
  sz_codebook cb;
  sz_params p;
  sz_status s = check_compress_args(src_v, n, dtype, codebook, params, dst_v, dst_size, &cb, &p);
  if (s != SZ_OK) return s;
  if (book && (s = check_book_arg(book, dtype, tensor)) != SZ_OK) return s;
  EncodeCtx c;
  c.src = (const uint8_t*)src_v;
  c.n = n;
  c.dtype = (unsigned)dtype;
  c.t = dtype_traits(c.dtype);
  c.vb = c.t.value_bits / 8;
  c.k = book ? book->code_bits : cb.code_bits;
  c.bases = book ? book->bases + (uint64_t)tensor * book->period : nullptr;
  c.period = book ? book->period : 0;
  c.chunk_log2 = p.chunk_log2;
  c.checksums = (p.flags & kFlagChecksums) != 0;
  c.lane_hash = (p.flags & kFlagLaneHash) != 0;
  c.avx2 = isa >= Isa::kAvx2;
  c.avx512 = isa >= Isa::kAvx512;
  build_tables(cb.values, cb.count, cb.code_bits, &c.tables);
  c.dst = (uint8_t*)dst_v;
  c.off = frame_offsets(n, p.chunk_log2, c.checksums, c.t, 0);
  const uint64_t chunks = n_chunks(n, p.chunk_log2);
  // The smallest possible frame (every record at least its codes) must fit before anything is written.
  if (c.off.exponents + packed_bytes(n, c.k) > (uint64_t)dst_capacity) return SZ_ERROR_DST_TOO_SMALL;

  const uint64_t raw_all = packed_bytes(n, c.t.exponent_bits);  // every record at most its raw size
  unsigned threads = resolve_threads(requested_threads, n * c.vb, chunks);
  if (c.off.exponents + raw_all > (uint64_t)dst_capacity) threads = 1;  // exact capacity checks, in place
  // Scratch: the context's (kMaxScratch per thread), else allocated for this call.
  const size_t stride = ctx_scratch ? kMaxScratch : scratch_values(n, p.chunk_log2) * kScratchPerValue;
  uint8_t* scratch = ctx_scratch;
  if (scratch == nullptr) {
    scratch = new (std::nothrow) uint8_t[stride * threads];
    if (scratch == nullptr) return SZ_ERROR_OUT_OF_MEMORY;
  }
  uint8_t* exp_base = c.dst + c.off.exponents;
  uint64_t exp_size = 0;
  if (threads <= 1) {
    s = encode_range(c, 0, chunks, exp_base, c.dst + dst_capacity, &exp_size, scratch);
  } else {
    const uint64_t S = (uint64_t)1 << p.chunk_log2;
    uint64_t first[kMaxThreads + 1], used[kMaxThreads] = {};
    sz_status status[kMaxThreads];
    for (unsigned i = 0; i <= threads; ++i) first[i] = chunks * i / threads;
    auto provisional = [&](unsigned i) {  // where range i's records would start if all earlier ones were raw
      return first[i] * (S / 8) * c.t.exponent_bits;
    };
    auto work = [&](unsigned i) {
      status[i] = encode_range(c, first[i], first[i + 1], exp_base + provisional(i),
                               exp_base + (i + 1 < threads ? provisional(i + 1) : raw_all), &used[i],
                               scratch + stride * i);
    };
    runner.run(threads, work);
    for (unsigned i = 0; i < threads && s == SZ_OK; ++i) s = status[i];
    for (unsigned i = 0; i < threads && s == SZ_OK; ++i) {
      if (i > 0 && exp_size != provisional(i)) memmove(exp_base + exp_size, exp_base + provisional(i), used[i]);
      if (exp_size != 0) {
        for (uint64_t ci = first[i]; ci < first[i + 1]; ++ci) {
          uint8_t* e = c.dst + c.off.index + kIndexEntrySize * ci;
          store_u64(e, load_u64(e) + exp_size);  // end fits in 62 bits: no carry into the mode bits
        }
      }
      exp_size += used[i];
    }
  }
  if (ctx_scratch == nullptr) delete[] scratch;
  if (s != SZ_OK) return s;
  write_frame_header(c.dst, cb, p.chunk_log2, p.flags, n, exp_size, book, tensor);
  *dst_size = (size_t)(c.off.exponents + exp_size);
  return SZ_OK;
}

template <class Runner>
sz_status decompress_impl(const void* src_v, size_t src_size, const sz_channel_book* book, void* dst_v, size_t dst_capacity, size_t* dst_size,
                          Isa isa, unsigned threads, Runner& runner) {
  if (src_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* src = (const uint8_t*)src_v;
  FrameHeader h;
  sz_status s = parse_frame_header(src, src_size, &h);
  if (s != SZ_OK) return s;
  if ((s = check_frame_book(h, book)) != SZ_OK) return s;
  DecodeCtx d;
  d.bases = h.channels ? book->bases + (uint64_t)h.tensor * book->period : nullptr;
  d.period = h.channels ? book->period : 0;
  d.src = src;
  d.h = &h;
  d.dst = (uint8_t*)dst_v;
  d.vb = h.t.value_bits / 8;
  const uint64_t out_size = h.n * d.vb;
  if (out_size > (uint64_t)dst_capacity) return SZ_ERROR_DST_TOO_SMALL;
  if (d.dst == nullptr && out_size != 0) return SZ_ERROR_INVALID_ARGUMENT;
  s = check_frame_index(src, h);
  if (s != SZ_OK) return s;
  d.avx2 = isa >= Isa::kAvx2;
  d.avx512 = isa >= Isa::kAvx512;
  build_tables(h.codebook, h.count, h.code_bits, &d.tables);

  const unsigned nt = resolve_threads(threads, out_size, h.chunks);
  if (nt <= 1) {
    for (uint64_t ci = 0; ci < h.chunks; ++ci) {
      s = decode_chunk(d, ci);
      if (s != SZ_OK) return s;
    }
  } else {
    uint64_t first[kMaxThreads + 1];
    sz_status status[kMaxThreads];
    for (unsigned i = 0; i <= nt; ++i) first[i] = h.chunks * i / nt;
    auto work = [&](unsigned i) {
      status[i] = SZ_OK;
      for (uint64_t ci = first[i]; ci < first[i + 1]; ++ci) {
        const sz_status cs = decode_chunk(d, ci);
        if (cs != SZ_OK) {
          status[i] = cs;
          return;
        }
      }
    };
    runner.run(nt, work);
    for (unsigned i = 0; i < nt; ++i)  // ranges are in chunk order: the first failing range has the first failure
      if (status[i] != SZ_OK) return status[i];
  }
  *dst_size = (size_t)out_size;
  return SZ_OK;
}

// The context's runner: its parked threads, or the calling thread alone.
struct ContextThreads {
  Pool* pool;
  template <class Fn>
  void run(unsigned n, Fn& fn) {
    if (pool == nullptr) {
      for (unsigned i = 0; i < n; ++i) fn(i);
    } else {
      pool->run(n, fn);
    }
  }
};

}  // namespace

extern "C" {

SZ_API sz_status sz_compress(const void* src_v, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                             const sz_params* params, void* dst_v, size_t dst_capacity, size_t* dst_size) {
  FreshThreads runner;
  const unsigned threads = params != nullptr ? params->threads : 1;
  return compress_impl(src_v, n, dtype, codebook, nullptr, 0, params, dst_v, dst_capacity, dst_size, selected_isa(),
                       threads, nullptr, runner);
}

SZ_API sz_status sz_compress_channels(const void* src, uint64_t n, sz_dtype dtype, const sz_channel_book* book,
                                      uint32_t tensor, const sz_params* params, void* dst, size_t dst_capacity,
                                      size_t* dst_size) {
  if (book == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  FreshThreads runner;
  const unsigned threads = params != nullptr ? params->threads : 1;
  return compress_impl(src, n, dtype, nullptr, book, tensor, params, dst, dst_capacity, dst_size, selected_isa(),
                       threads, nullptr, runner);
}

SZ_API sz_status sz_decompress(const void* src_v, size_t src_size, void* dst_v, size_t dst_capacity, size_t* dst_size,
                               unsigned threads) {
  FreshThreads runner;
  return decompress_impl(src_v, src_size, nullptr, dst_v, dst_capacity, dst_size, selected_isa(), threads, runner);
}

SZ_API sz_status sz_decompress_book(const void* src, size_t src_size, const sz_channel_book* book, void* dst,
                                    size_t dst_capacity, size_t* dst_size, unsigned threads) {
  FreshThreads runner;
  return decompress_impl(src, src_size, book, dst, dst_capacity, dst_size, selected_isa(), threads, runner);
}

SZ_API sz_cctx* sz_cctx_create(unsigned threads) { return context_create<sz_cctx>(threads, true); }
SZ_API void sz_cctx_free(sz_cctx* cctx) { delete cctx; }
SZ_API unsigned sz_cctx_threads(const sz_cctx* cctx) { return cctx ? cctx->threads : 0; }

SZ_API sz_status sz_compress_cctx(sz_cctx* cctx, const void* src, uint64_t n_values, sz_dtype dtype,
                                  const sz_codebook* codebook, const sz_params* params, void* dst,
                                  size_t dst_capacity, size_t* dst_size) {
  if (cctx == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  ContextThreads runner{cctx->pool};
  return compress_impl(src, n_values, dtype, codebook, nullptr, 0, params, dst, dst_capacity, dst_size, cctx->isa,
                       cctx->threads, cctx->scratch, runner);
}

SZ_API sz_dctx* sz_dctx_create(unsigned threads) { return context_create<sz_dctx>(threads, false); }
SZ_API void sz_dctx_free(sz_dctx* dctx) { delete dctx; }
SZ_API unsigned sz_dctx_threads(const sz_dctx* dctx) { return dctx ? dctx->threads : 0; }

SZ_API sz_status sz_decompress_dctx(sz_dctx* dctx, const void* src, size_t src_size, void* dst, size_t dst_capacity,
                                    size_t* dst_size) {
  if (dctx == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  ContextThreads runner{dctx->pool};
  return decompress_impl(src, src_size, nullptr, dst, dst_capacity, dst_size, dctx->isa, dctx->threads, runner);
}

SZ_API const char* sz_cpu_isa(void) { return splitzip::detail::isa_name(splitzip::detail::selected_isa()); }

SZ_API sz_status sz_set_cpu_isa(const char* name) {
  using splitzip::detail::Isa;
  int choice = -1;  // NULL or "best": the best set for this CPU
  if (name != nullptr && strcmp(name, "best") != 0) {
    choice = (int)Isa::kAvx512;
    while (choice >= 0 && strcmp(name, splitzip::detail::isa_name((Isa)choice)) != 0) --choice;
    if (choice < 0) return SZ_ERROR_INVALID_ARGUMENT;
  }
  splitzip::detail::g_isa_choice.store(choice, std::memory_order_relaxed);
  return SZ_OK;
}

}  // extern "C"
