// codec.cuh — pieces shared by the CUDA encoder and decoder (src/cuda/encode.cu, decode.cu): dtype traits as
// compile-time constants, bit packing of 8 fields (docs/FORMAT.md §3) in registers, and the views of the
// uncompressed data (one contiguous buffer, or a list of equal pages) with vector loads and stores where aligned.
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"

namespace splitzip {
namespace cuda {

constexpr int kThreads = 256;         // threads of a CTA, encoder and decoder
constexpr int kGroupsPerThread = 2;   // groups of 8 values a thread handles per round
constexpr int kRoundGroups = kThreads * kGroupsPerThread;  // 512 groups = 4096 values a round

template <int DT>
struct Traits;
template <>
struct Traits<1> { static constexpr int W = 16, E = 8, R = 8, M = 7; };
template <>
struct Traits<2> { static constexpr int W = 16, E = 5, R = 11, M = 10; };
template <>
struct Traits<3> { static constexpr int W = 32, E = 8, R = 24, M = 23; };
template <>
struct Traits<4> { static constexpr int W = 8, E = 4, R = 4, M = 3; };
template <>
struct Traits<5> { static constexpr int W = 8, E = 5, R = 3, M = 2; };

template <int DT>
__device__ __forceinline__ uint32_t exp_of(uint32_t x) {
  using T = Traits<DT>;
  return (x >> T::M) & ((1u << T::E) - 1u);
}
template <int DT>
__device__ __forceinline__ uint32_t rest_of(uint32_t x) {
  using T = Traits<DT>;
  return (((x >> (T::W - 1)) & 1u) << T::M) | (x & ((1u << T::M) - 1u));
}
template <int DT>
__device__ __forceinline__ uint32_t join(uint32_t e, uint32_t r) {
  using T = Traits<DT>;
  return (((r >> T::M) & 1u) << (T::W - 1)) | (e << T::M) | (r & ((1u << T::M) - 1u));
}

// 8 fields of B bits (B compile-time, 1..24) packed as in §3 into NW 32-bit words (little-endian bit order).
template <int B>
struct Packed {
  static constexpr int kWords = (8 * B + 31) / 32;
  uint32_t w[kWords];
};
template <int B>
__device__ __forceinline__ Packed<B> pack8(const uint32_t f[8]) {
  Packed<B> p;
#pragma unroll
  for (int i = 0; i < Packed<B>::kWords; ++i) p.w[i] = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int bit = j * B, wi = bit / 32, sh = bit % 32;
    p.w[wi] |= f[j] << sh;
    if (sh + B > 32) p.w[wi + 1] |= f[j] >> (32 - sh);
  }
  return p;
}
template <int B>
__device__ __forceinline__ void unpack8(const Packed<B>& p, uint32_t f[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int bit = j * B, wi = bit / 32, sh = bit % 32;
    uint32_t v = p.w[wi] >> sh;
    if (sh + B > 32) v |= p.w[wi + 1] << (32 - sh);
    f[j] = v & ((1u << B) - 1u);
  }
}
template <int B>
__device__ __forceinline__ uint8_t packed_byte(const Packed<B>& p, int i) {
  return (uint8_t)(p.w[i / 4] >> (8 * (i % 4)));
}

// Stores the B bytes of a packed group at any address: 8-byte, 4-byte or byte stores by alignment.
template <int B>
__device__ __forceinline__ void store_packed(uint8_t* dst, const Packed<B>& p) {
  const uintptr_t a = (uintptr_t)dst;
  if constexpr (B % 8 == 0) {
    if ((a & 7) == 0) {
#pragma unroll
      for (int i = 0; i < B / 8; ++i)
        reinterpret_cast<uint2*>(dst)[i] = make_uint2(p.w[2 * i], p.w[2 * i + 1]);
      return;
    }
  }
  if constexpr (B % 4 == 0) {
    if ((a & 3) == 0) {
#pragma unroll
      for (int i = 0; i < B / 4; ++i) reinterpret_cast<uint32_t*>(dst)[i] = p.w[i];
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < B; ++i) dst[i] = packed_byte<B>(p, i);
}
template <int B>
__device__ __forceinline__ Packed<B> load_packed(const uint8_t* src) {
  Packed<B> p;
  const uintptr_t a = (uintptr_t)src;
  if constexpr (B % 8 == 0) {
    if ((a & 7) == 0) {
#pragma unroll
      for (int i = 0; i < B / 8; ++i) {
        const uint2 v = reinterpret_cast<const uint2*>(src)[i];
        p.w[2 * i] = v.x;
        p.w[2 * i + 1] = v.y;
      }
      return p;
    }
  }
  if constexpr (B % 4 == 0) {
    if ((a & 3) == 0) {
#pragma unroll
      for (int i = 0; i < B / 4; ++i) p.w[i] = reinterpret_cast<const uint32_t*>(src)[i];
      return p;
    }
  }
#pragma unroll
  for (int i = 0; i < Packed<B>::kWords; ++i) p.w[i] = 0;
#pragma unroll
  for (int i = 0; i < B; ++i) p.w[i / 4] |= (uint32_t)src[i] << (8 * (i % 4));
  return p;
}

// ---- views of the uncompressed values ----------------------------------------------------------------------------
// A group (8 consecutive values) of W-bit values is W bytes. v = number of real values in the group (1..8); the
// others read as 0 and are never written.
// kGlobal: p is global memory (streaming loads); else shared memory (plain loads: .cs is global-only).
template <int W, bool kGlobal = true>
__device__ __forceinline__ void load_group_at(const uint8_t* p, unsigned v, uint32_t x[8]) {
  const uintptr_t a = (uintptr_t)p;
  if (v == 8) {
    if constexpr (W == 16) {
      if ((a & 15) == 0) {
        const uint4 q = kGlobal ? __ldcs(reinterpret_cast<const uint4*>(p)) : *reinterpret_cast<const uint4*>(p);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          x[2 * i] = w[i] & 0xFFFFu;
          x[2 * i + 1] = w[i] >> 16;
        }
        return;
      }
    } else if constexpr (W == 32) {
      if ((a & 15) == 0) {
        const uint4 q0 = kGlobal ? __ldcs(reinterpret_cast<const uint4*>(p)) : reinterpret_cast<const uint4*>(p)[0];
        const uint4 q1 = kGlobal ? __ldcs(reinterpret_cast<const uint4*>(p) + 1) : reinterpret_cast<const uint4*>(p)[1];
        x[0] = q0.x; x[1] = q0.y; x[2] = q0.z; x[3] = q0.w;
        x[4] = q1.x; x[5] = q1.y; x[6] = q1.z; x[7] = q1.w;
        return;
      }
    } else {
      if ((a & 7) == 0) {
        const uint2 q = kGlobal ? __ldcs(reinterpret_cast<const uint2*>(p)) : *reinterpret_cast<const uint2*>(p);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          x[i] = (q.x >> (8 * i)) & 0xFFu;
          x[4 + i] = (q.y >> (8 * i)) & 0xFFu;
        }
        return;
      }
    }
  }
  constexpr int kB = W / 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    uint32_t val = 0;
    if ((unsigned)j < v) {
#pragma unroll
      for (int b = 0; b < kB; ++b) val |= (uint32_t)p[j * kB + b] << (8 * b);
    }
    x[j] = val;
  }
}
// kGlobal: p is global memory (streaming stores); else shared memory (plain stores: .cs is global-only).
template <int W, bool kGlobal = true>
__device__ __forceinline__ void store_group_at(uint8_t* p, unsigned v, const uint32_t x[8]) {
  const uintptr_t a = (uintptr_t)p;
  if (v == 8) {
    if constexpr (W == 16) {
      if ((a & 15) == 0) {
        const uint4 q = make_uint4(x[0] | (x[1] << 16), x[2] | (x[3] << 16), x[4] | (x[5] << 16), x[6] | (x[7] << 16));
        if constexpr (kGlobal) __stcs(reinterpret_cast<uint4*>(p), q);
        else *reinterpret_cast<uint4*>(p) = q;
        return;
      }
    } else if constexpr (W == 32) {
      if ((a & 15) == 0) {
        const uint4 q0 = make_uint4(x[0], x[1], x[2], x[3]), q1 = make_uint4(x[4], x[5], x[6], x[7]);
        if constexpr (kGlobal) {
          __stcs(reinterpret_cast<uint4*>(p), q0);
          __stcs(reinterpret_cast<uint4*>(p) + 1, q1);
        } else {
          reinterpret_cast<uint4*>(p)[0] = q0;
          reinterpret_cast<uint4*>(p)[1] = q1;
        }
        return;
      }
    } else {
      if ((a & 7) == 0) {
        const uint2 q = make_uint2(x[0] | (x[1] << 8) | (x[2] << 16) | (x[3] << 24),
                                   x[4] | (x[5] << 8) | (x[6] << 16) | (x[7] << 24));
        if constexpr (kGlobal) __stcs(reinterpret_cast<uint2*>(p), q);
        else *reinterpret_cast<uint2*>(p) = q;
        return;
      }
    }
  }
  constexpr int kB = W / 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if ((unsigned)j < v) {
#pragma unroll
      for (int b = 0; b < kB; ++b) p[j * kB + b] = (uint8_t)(x[j] >> (8 * b));
    }
  }
}

// The uncompressed values: either one buffer (pages == nullptr) or n_pages pages of page_values values each, in
// list order. Offsets are in values (groups) or bytes of that concatenation.
template <int W, bool PAGED>
struct Values {
  uint8_t* base;           // contiguous
  void* const* pages;      // paged
  uint64_t page_values;    // paged
  uint64_t page_bytes;     // paged

  __device__ __forceinline__ uint8_t* addr_of_value(uint64_t i) const {
    if constexpr (PAGED) {
      const uint64_t pg = i / page_values;
      return (uint8_t*)pages[pg] + (i - pg * page_values) * (W / 8);
    } else {
      return base + i * (W / 8);
    }
  }
  __device__ __forceinline__ uint8_t* addr_of_byte(uint64_t o) const {
    if constexpr (PAGED) {
      const uint64_t pg = o / page_bytes;
      return (uint8_t*)pages[pg] + (o - pg * page_bytes);
    } else {
      return base + o;
    }
  }
  // Group g: values 8g .. 8g+v-1.
  __device__ __forceinline__ void load_group(uint64_t g, unsigned v, uint32_t x[8]) const {
    if constexpr (PAGED) {
      const uint64_t i0 = g * 8, pg = i0 / page_values, off = i0 - pg * page_values;
      if (off + v <= page_values) {
        load_group_at<W>((const uint8_t*)pages[pg] + off * (W / 8), v, x);
      } else {
        for (unsigned j = 0; j < 8; ++j) {
          uint32_t val = 0;
          if (j < v) {
            const uint8_t* p = addr_of_value(i0 + j);
            for (int b = 0; b < W / 8; ++b) val |= (uint32_t)p[b] << (8 * b);
          }
          x[j] = val;
        }
      }
    } else {
      load_group_at<W>(base + g * W, v, x);
    }
  }
  __device__ __forceinline__ void store_group(uint64_t g, unsigned v, const uint32_t x[8]) const {
    if constexpr (PAGED) {
      const uint64_t i0 = g * 8, pg = i0 / page_values, off = i0 - pg * page_values;
      if (off + v <= page_values) {
        store_group_at<W>((uint8_t*)pages[pg] + off * (W / 8), v, x);
      } else {
        for (unsigned j = 0; j < v; ++j) {
          uint8_t* p = addr_of_value(i0 + j);
          for (int b = 0; b < W / 8; ++b) p[b] = (uint8_t)(x[j] >> (8 * b));
        }
      }
    } else {
      store_group_at<W>(base + g * W, v, x);
    }
  }
};

// Reads the bytes [begin, begin + len) of a Values view for the warp hash (xxh3_64_warp's fetch). Word loads go
// to L2 (ld.cg): the decoder hashes output that its own CTA has just written.
template <int W, bool PAGED>
struct ByteFetch {
  Values<W, PAGED> vals;
  uint64_t begin;
  __device__ __forceinline__ uint8_t byte(uint64_t o) const { return *vals.addr_of_byte(begin + o); }
  __device__ __forceinline__ uint64_t word(uint64_t o) const {
    const uint64_t b = begin + o;
    if constexpr (PAGED) {
      const uint64_t pg = b / vals.page_bytes, off = b - pg * vals.page_bytes;
      if (off + 8 <= vals.page_bytes) {
        const uint8_t* p = (const uint8_t*)vals.pages[pg] + off;
        if (((uintptr_t)p & 7) == 0) return __ldcg(reinterpret_cast<const unsigned long long*>(p));
        return layout::load_u64(p);
      }
      uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v |= (uint64_t)*vals.addr_of_byte(b + i) << (8 * i);
      return v;
    } else {
      const uint8_t* p = vals.base + b;
      if (((uintptr_t)p & 7) == 0) return __ldcg(reinterpret_cast<const unsigned long long*>(p));
      return layout::load_u64(p);
    }
  }
};

// Exclusive scan over the threads of a CTA of kThreads (all threads call it). s_warp: kThreads/32 words of shared
// memory. Returns this thread's exclusive prefix; *total receives the sum over all threads.
__device__ __forceinline__ uint32_t block_exclusive_scan(uint32_t v, uint32_t* s_warp, uint32_t* total) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  uint32_t incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t o = __shfl_up_sync(0xFFFFFFFFu, incl, d);
    if (lane >= (unsigned)d) incl += o;
  }
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  uint32_t before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) {
    const uint32_t s = s_warp[w];
    if ((unsigned)w < warp) before += s;
    all += s;
  }
  __syncthreads();
  *total = all;
  return before + incl - v;
}

// ---- asynchronous staging of global bytes in shared memory (cp.async through the pipeline primitives) ----------
// The chunk-size-4096 kernels copy the next chunk's input into shared memory while they work on the current one.
// stage_async issues copies of the global bytes [g, g + len) into the 16-byte-aligned shared slot s so that byte i
// lands at s + (g & 15) + i, and returns that address. Every 16-byte block of global memory that overlaps the
// range and lies inside [lo, hi) goes by one cp.async (its bytes outside the range land in the slot's slack: the
// slot needs len + 32 bytes); a block that crosses lo or hi (only at the very ends of a buffer) is copied byte by
// byte, and only bytes of the range. So nothing outside [lo, hi) is read. All threads of the CTA call it; the
// copies are complete after the caller's __pipeline_wait_prior and __syncthreads.
__device__ __forceinline__ const uint8_t* stage_async(uint8_t* s, const uint8_t* g, uint32_t len, const uint8_t* lo,
                                                       const uint8_t* hi) {
  const uintptr_t ga = (uintptr_t)g, l = (uintptr_t)lo, h = (uintptr_t)hi;
  const uintptr_t a0 = ga & ~(uintptr_t)15;
  const uint32_t nb = (uint32_t)((((ga + len + 15) & ~(uintptr_t)15) - a0) / 16);
  for (uint32_t i = threadIdx.x; i < nb; i += kThreads) {
    const uintptr_t b = a0 + 16 * (uintptr_t)i;
    uint8_t* d = s + 16 * i;
    if (b >= l && b + 16 <= h) {
      __pipeline_memcpy_async(d, reinterpret_cast<const void*>(b), 16);
    } else {
      for (uint32_t j = 0; j < 16; ++j)
        if (b + j >= ga && b + j < ga + len) d[j] = *reinterpret_cast<const uint8_t*>(b + j);
    }
  }
  return s + (ga & 15);
}

// The paged form: copies bytes [o, o + len) of the concatenation of the pages (page_bytes each) into the 16-byte-
// aligned slot s, byte i at s + i. A 16-byte block that lies inside one page at a 16-byte-aligned address goes by
// cp.async; others (pages whose size or address is not a multiple of 16) byte by byte.
__device__ __forceinline__ void stage_pages_async(uint8_t* s, const void* const* pages, uint64_t page_bytes, uint64_t o,
                                                  uint32_t len) {
  const uint32_t nb = (len + 15) / 16;
  for (uint32_t i = threadIdx.x; i < nb; i += kThreads) {
    const uint64_t b = o + 16ull * i;
    const uint64_t pg = b / page_bytes, off = b - pg * page_bytes;
    const uint8_t* p = (const uint8_t*)pages[pg] + off;
    uint8_t* d = s + 16 * i;
    const uint32_t want = len - 16 * i < 16 ? len - 16 * i : 16;
    if (want == 16 && off + 16 <= page_bytes && ((uintptr_t)p & 15) == 0) {
      __pipeline_memcpy_async(d, p, 16);
    } else {
      for (uint32_t j = 0; j < want; ++j) {
        const uint64_t q = b + j, qp = q / page_bytes;
        d[j] = ((const uint8_t*)pages[qp])[q - qp * page_bytes];
      }
    }
  }
}

// Sum of a 64-bit value over the CTA (all threads call it, all get the sum). s_red: kThreads/32 words.
__device__ __forceinline__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* s_red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  if ((threadIdx.x & 31u) == 0) s_red[threadIdx.x >> 5] = v;
  __syncthreads();
  unsigned long long all = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) all += s_red[w];
  __syncthreads();
  return all;
}

// ---- BF16 in packed form (the common case, specialised to keep the fast kernels' instruction count low) --------
// Four k-bit codes (k = K, compile time) from the low 4K bits of `bits`, one per nibble: a __byte_perm selector.
template <int K>
__device__ __forceinline__ uint32_t spread4(uint32_t bits) {
  if constexpr (K == 4) return bits & 0xFFFFu;
  uint32_t s = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) s |= ((bits >> (i * K)) & ((1u << K) - 1u)) << (4 * i);
  return s;
}
// Table lookup of four codes at once: byte i of the result is table byte (nibble i of sel); t[] holds the 16 table
// bytes little-endian. Codes of up to 3 bits are one byte permute; 4-bit codes take two and a per-byte select whose
// mask comes from a sign-replicating permute of bit 3 of each nibble.
template <int K>
__device__ __forceinline__ uint32_t lut4(const uint32_t t[4], uint32_t sel) {
  if constexpr (K < 4) {
    return __byte_perm(t[0], t[1], sel);
  } else {
    const uint32_t s7 = sel & 0x7777u;
    const uint32_t lo = __byte_perm(t[0], t[1], s7), hi = __byte_perm(t[2], t[3], s7);
    // prmt with bit 3 of a selector nibble set replicates the sign of the selected byte (__byte_perm ignores that
    // bit): byte 1 of 0x8000 gives 0xFF, byte 0 gives 0x00.
    uint32_t m;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(m) : "r"(0x8000u), "r"(0u), "r"(((sel >> 3) & 0x1111u) | 0x8888u));
    return (lo & ~m) | (hi & m);
  }
}
// Two BF16 values from their rest bytes (byte 0 and 1 of r) and exponents (byte 0 and 1 of e): one output word.
// sel picks [r_a, e_a, r_b, e_b]; then sign (rest bit 7) -> bit 15, exponent -> bits 7..14, mantissa -> bits 0..6.
__device__ __forceinline__ uint32_t bf16_join2(uint32_t r, uint32_t e, uint32_t sel) {
  const uint32_t t = __byte_perm(r, e, sel);
  return ((t >> 1) & 0x7F807F80u) | (t & 0x007F007Fu) | ((t << 8) & 0x80008000u);
}
// The inverse for one word of two BF16 values: rest fields in bytes 0 and 2, exponents in bytes 0 and 2.
__device__ __forceinline__ uint32_t bf16_rest2(uint32_t w) { return (w & 0x007F007Fu) | ((w >> 8) & 0x00800080u); }
__device__ __forceinline__ uint32_t bf16_exp2(uint32_t w) { return (w >> 7) & 0x00FF00FFu; }

// The BF16 warp kernels stage a round of 1024 values (2 KiB) in shared memory, lane l holding values 32 l .. 32 l + 31
// as 16-byte pieces 4 l .. 4 l + 3. Byte address of piece u: the pieces of a lane are XOR-swizzled so that the
// lanes' 16-byte writes, and coalesced 16-byte reads of consecutive pieces, are free of bank conflicts.
__device__ __forceinline__ uint32_t stage_piece(uint32_t u) {
  const uint32_t l = u >> 2, t = u & 3u;
  return 16u * (4u * l + (t ^ ((l >> 1) & 3u)));
}

// The inputs of one round of a lane: its 4k code bytes and 32 rest bytes.
}  // namespace cuda
}  // namespace splitzip
