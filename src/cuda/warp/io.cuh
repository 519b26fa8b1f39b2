// warp/io.cuh — the warp level of the CUDA codec's memory traffic: where uncompressed values live (one buffer or a
// list of pages of any size and alignment), moving rounds of them and ranges of frame bytes into shared memory (bulk
// copies on an mbarrier where they are whole aligned blocks, else cp.async or the lanes), storing 16-byte pieces and
// whole rounds back, and copying a shared-memory record out to the frame at any byte alignment. Every function here
// is called by all 32 lanes of a warp; nothing reads or writes outside the ranges it is given.
#pragma once

#include "cuda/simt.cuh"

namespace splitzip {
namespace cuda {

// Piece u (16 bytes) of a 2 KiB round in shared memory, XOR-swizzled so that both ways the kernels read a round —
// lane l taking pieces 4l..4l+3 (its 64 bytes) or pieces l, l+32, l+64, l+96 (coalesced) — are free of bank
// conflicts, and so are the copies that fill it.
SZ_HD uint32_t swz(uint32_t u) { return 16u * ((u & ~3u) | ((u & 3u) ^ ((u >> 3) & 3u))); }

// The uncompressed values of a call: one buffer (pages == nullptr), or the concatenation of pages of page_bytes
// each, in list order, at any addresses. Byte offsets are into that concatenation.
struct Span {
  uint8_t* base;
  void* const* pages;
  uint64_t page_bytes;
  uint64_t page_inv;  // (2^64 - 1) / page_bytes: page lookup by a multiply (page_of)
  // Address of byte o; *room = bytes from there to the end of its page (contiguous: unbounded).
  SZ_DEV uint8_t* locate(uint64_t o, uint64_t* room) const {
    if (!pages) {
      *room = ~0ull;
      return base + o;
    }
    uint64_t q = simt::umulhi64(o, page_inv);
    uint64_t r = o - q * page_bytes;
    while (r >= page_bytes) {  // the estimate is at most two short
      ++q;
      r -= page_bytes;
    }
    *room = page_bytes - r;
    return (uint8_t*)pages[q] + r;
  }
  SZ_HD void set_pages(void* const* p, uint64_t bytes) {
    pages = p;
    page_bytes = bytes;
    page_inv = ~0ull / bytes;
  }
  SZ_DEV uint8_t byte_at(uint64_t o) const {
    uint64_t room;
    return *locate(o, &room);
  }
};

// Byte by byte: the first `want` bytes of a piece that is not a whole aligned 16 bytes of one page, then zeros.
SZ_NOINLINE void stage_piece_bytes(uint8_t* d, const Span& src, uint64_t o, uint32_t want) {
  for (uint32_t b = 0; b < 16; ++b) d[b] = b < want ? src.byte_at(o + b) : 0;
}

// A bulk copy of `bytes` (a multiple of 16; 0: none) from src to dst, both 16-byte aligned.
struct BulkRange {
  const uint8_t* src;
  uint8_t* dst;
  uint32_t bytes;
};

// Whether the 16-byte blocks covering [g, g + len) lie inside [lo, hi).
SZ_DEV bool hull_inside(const uint8_t* g, uint64_t len, const uint8_t* lo, const uint8_t* hi) {
  const uintptr_t a = (uintptr_t)g;
  return (a & ~(uintptr_t)15) >= (uintptr_t)lo && ((a + len + 15) & ~(uintptr_t)15) <= (uintptr_t)hi;
}
// The bulk copy of the 16-byte blocks covering [g, g + len) to s (which stands for g's block; len 0: none).
SZ_DEV BulkRange hull_copy(uint8_t* s, const uint8_t* g, uint32_t len) {
  const uintptr_t a = (uintptr_t)g, a0 = a & ~(uintptr_t)15;
  return BulkRange{g - (a - a0), s, len ? (uint32_t)(((a + len + 15) & ~(uintptr_t)15) - a0) : 0u};
}

// Lane 0 initialises a ring's n mbarriers (one arrival a phase) and makes them visible to the copy engine; then
// the warp synchronises. Once per warp and kernel.
SZ_DEV void init_ring_bars(uint64_t* bars, int n) {
  if (simt::lane_id() == 0) {
    for (int i = 0; i < n; ++i) simt::mbar_init(bars + i, 1);
    simt::mbar_init_fence();
  }
  simt::syncwarp();
}

// By lane 0, once per staged slot: the phase's one arrival on bar, announcing the bytes of ranges r[0..n), then
// their bulk copies (n = 0: the arrival only). The warp's reads of the slot's previous round come before (the
// caller synchronised the warp since).
SZ_DEV void issue_bulk(uint64_t* bar, const BulkRange* r, int n) {
  uint32_t bytes = 0;
  for (int i = 0; i < n; ++i) bytes += r[i].bytes;
  simt::fence_proxy_async();
  simt::mbar_arrive_expect(bar, bytes);
  for (int i = 0; i < n; ++i)
    if (r[i].bytes) simt::bulk_copy(r[i].dst, r[i].src, r[i].bytes, bar);
}

// Stages bytes [o, o + len) of a Span into the round slot s (linear: byte i at s + i); the bytes after len up to the
// end of its lane's 64 bytes are zero. With an mbarrier (bar), a whole round (len = 2048) that lies in one page at a
// 16-byte-aligned address goes as one bulk copy completing on it; otherwise 16-byte pieces that lie in one page at
// an aligned address go by cp.async (committed by the caller) and others byte by byte, and bar (if given) receives
// an arrival with nothing announced. len <= 2048.
SZ_DEV void stage_round(uint8_t* s, const Span& src, uint64_t o, uint32_t len, uint64_t* bar) {
  const unsigned lane = simt::lane_id();
  if (bar && len == 2048u) {
    uint64_t room;
    const uint8_t* g = src.locate(o, &room);
    if (room >= 2048u && ((uintptr_t)g & 15u) == 0) {
      if (lane == 0) {
        const BulkRange q{g, s, 2048u};
        issue_bulk(bar, &q, 1);
      }
      return;
    }
  }
  const uint32_t pieces = (len + 15) / 16, padded = (len + 63) / 64 * 4;
  for (uint32_t u = lane; u < padded; u += 32) {
    uint8_t* d = s + 16u * u;
    if (u >= pieces) {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
      continue;
    }
    uint64_t room;
    const uint8_t* g = src.locate(o + 16ull * u, &room);
    const uint32_t want = len - 16 * u < 16 ? len - 16 * u : 16;
    if (want == 16 && room >= 16 && ((uintptr_t)g & 15u) == 0) {
      simt::cp_async16(d, g);
    } else {
      stage_piece_bytes(d, src, o + 16ull * u, want);
    }
  }
  if (bar && lane == 0) issue_bulk(bar, nullptr, 0);
}

// Byte by byte: a piece that is not a whole aligned 16 bytes of one page.
SZ_NOINLINE void store_piece_bytes(const Span& dst, uint64_t o, uint4 v, uint32_t n) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint64_t room;
  for (uint32_t b = 0; b < n; ++b) *dst.locate(o + b, &room) = (uint8_t)(w[b / 4] >> (8 * (b % 4)));
}

// Stores the first n (1..16) bytes of piece v at byte o of a Span.
SZ_DEV void store_piece(const Span& dst, uint64_t o, uint4 v, uint32_t n) {
  uint64_t room;
  uint8_t* g = dst.locate(o, &room);
  if (n == 16 && room >= 16 && ((uintptr_t)g & 15u) == 0) simt::st_stream16(g, v);
  else store_piece_bytes(dst, o, v, n);
}

// The frame bytes [g, g + len) for a staging slot s (16-byte aligned), so that byte i lands at s + (g & 15) + i: the
// 16-byte blocks covering the range as one bulk copy when they all lie inside [lo, hi) (the frame buffer; the
// returned byte count is what the copy delivers, issued by lane 0 after the mbarrier's announcement), else by the
// lanes at once, reading only bytes of the range (0 returned).
SZ_NOINLINE void stage_frame_lanes(uint8_t* s, const uint8_t* g, uint32_t len, const uint8_t* lo, const uint8_t* hi) {
  const uintptr_t ga = (uintptr_t)g, a0 = ga & ~(uintptr_t)15;
  const uint32_t nb = (uint32_t)((((ga + len + 15) & ~(uintptr_t)15) - a0) / 16);
  for (uint32_t i = simt::lane_id(); i < nb; i += 32) {
    const uintptr_t b = a0 + 16 * (uintptr_t)i;
    uint8_t* d = s + 16 * i;
    if (b >= (uintptr_t)lo && b + 16 <= (uintptr_t)hi) {
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(b);
    } else {
      for (uint32_t j = 0; j < 16; ++j)
        if (b + j >= ga && b + j < ga + len) d[j] = *reinterpret_cast<const uint8_t*>(b + j);
    }
  }
}
SZ_DEV BulkRange stage_frame(uint8_t* s, const uint8_t* g, uint32_t len, const uint8_t* lo, const uint8_t* hi) {
  if (len > 0 && hull_inside(g, len, lo, hi)) return hull_copy(s, g, len);
  if (len > 0) stage_frame_lanes(s, g, len, lo, hi);
  return BulkRange{nullptr, s, 0};
}

// The output of a round that is not one whole aligned 2 KiB piece of one page: piece by piece.
SZ_NOINLINE void store_round_pieces(const Span& dst, uint64_t ob, uint32_t rb, uint4 p0, uint4 p1, uint4 p2,
                                    uint4 p3) {
  const unsigned lane = simt::lane_id();
  const uint4 p[4] = {p0, p1, p2, p3};
  for (int t = 0; t < 4; ++t) {
    const uint32_t o = 16u * (lane + 32 * t);
    if (o < rb) store_piece(dst, ob + o, p[t], rb - o < 16 ? rb - o : 16);
  }
}

// N shared words from byte address p of any alignment (reads the aligned words around them, which must
// lie inside the buffer: the staging slots have slack).
template <int N>
SZ_DEV void smem_words(const uint8_t* p, uint32_t w[N]) {
  const uint32_t sh = (uint32_t)((uintptr_t)p & 3u) * 8u;
  const uint32_t* q = reinterpret_cast<const uint32_t*>(p - ((uintptr_t)p & 3u));  // keeps p's address space
  if constexpr (N % 4 == 0) {
    if (((uintptr_t)p & 15u) == 0) {
#pragma unroll
      for (int i = 0; i < N / 4; ++i) {
        const uint4 v = reinterpret_cast<const uint4*>(p)[i];
        w[4 * i] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
      }
      return;
    }
  }
  if (sh == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = q[i];
    return;
  }
  uint32_t prev = q[0];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next = q[i + 1];
    w[i] = simt::funnel_r(prev, next, sh);
    prev = next;
  }
}

// Copies len bytes from s (shared or global memory, any alignment; the aligned words around [s, s + len + 4) must be
// readable) to global g at any alignment, by the warp: the head up to g's 16-byte boundary and the tail by bytes,
// the body by 16-byte stores assembled from 5 source words with funnel shifts.
SZ_DEV void copy_out(uint8_t* g, const uint8_t* s, uint32_t len) {
  const unsigned lane = simt::lane_id();
  uint32_t head = (uint32_t)((16u - ((uintptr_t)g & 15u)) & 15u);
  if (head > len) head = len;
  if (lane < head) g[lane] = s[lane];
  const uint32_t body = (len - head) >> 4;
  const uint8_t* const sb = s + head;
  const uint32_t sh = (uint32_t)((uintptr_t)sb & 3u) * 8u;
  const uint32_t* const sw = reinterpret_cast<const uint32_t*>(sb - ((uintptr_t)sb & 3u));
  uint8_t* const gb = g + head;
  for (uint32_t b = lane; b < body; b += 32) {
    const uint32_t* p = sw + 4 * b;
    const uint32_t w0 = p[0], w1 = p[1], w2 = p[2], w3 = p[3], w4 = p[4];
    simt::st_stream16(gb + 16 * b, make_uint4(simt::funnel_r(w0, w1, sh), simt::funnel_r(w1, w2, sh),
                                              simt::funnel_r(w2, w3, sh), simt::funnel_r(w3, w4, sh)));
  }
  const uint32_t done = head + 16 * body;
  if (done + lane < len) g[done + lane] = s[done + lane];
}

// Little-endian stores of 8 / 4 bytes at any alignment (index and checksum entries).
SZ_DEV void put_u64(uint8_t* p, uint64_t v) {
  if (((uintptr_t)p & 7u) == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
  } else {
    for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
  }
}
SZ_DEV void put_u32(uint8_t* p, uint32_t v) {
  if (((uintptr_t)p & 3u) == 0) {
    *reinterpret_cast<uint32_t*>(p) = v;
  } else {
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
  }
}
}  // namespace cuda
}  // namespace splitzip
