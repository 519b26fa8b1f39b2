// spec_format.h — a second, deliberately naive implementation of docs/FORMAT.md (frames §4 and containers §6),
// written from the document alone for the tests: it builds canonical frames bit by bit, can build non-canonical or
// corrupt ones on purpose, and parses the header to locate sections. It shares no code with src/ (not even
// src/layout.h), so a test that compares the library's bytes against it checks the library against the spec.
//
// Slow by design (one bit at a time); use it for frames up to a few million values.
#pragma once

#include <stdint.h>
#include <string.h>

#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "test_util.h"

namespace sztest {
namespace spec {

inline uint32_t h32(const void* p, size_t n) { return (uint32_t)XXH3_64bits(p, n); }

// LH32 of §4.6.1, word by word as the text states it.
inline uint64_t lh_sm(uint64_t i) {
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline uint64_t lh_av(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}
inline uint32_t lh32(const void* data, size_t len) {
  const uint8_t* b = (const uint8_t*)data;
  std::vector<uint8_t> padded(b, b + len);
  padded.resize((len + 15) / 16 * 16, 0);
  auto word = [&](size_t q) {
    uint64_t w = 0;
    for (unsigned i = 0; i < 8; ++i) w |= (uint64_t)padded[8 * q + i] << (8 * i);
    return w;
  };
  uint64_t a[64];
  for (unsigned j = 0; j < 64; ++j) a[j] = lh_sm(64 + j);
  for (size_t q = 0; q < padded.size() / 8; ++q) {
    const size_t j = q % 64, t = (q % 256) / 64, r = q / 256;
    const uint64_t u = (uint32_t)(r * 0x9E3779B1ull);
    const uint64_t x = word(q) ^ lh_sm(j) ^ lh_sm(128 + t) ^ (u | (u << 32));
    a[j] += (x & 0xFFFFFFFFull) * (x >> 32) + word(q ^ 1);
  }
  uint64_t S = 0;
  for (unsigned l = 0; l < 32; ++l) S += lh_av(a[2 * l] ^ ((a[2 * l + 1] << 32) | (a[2 * l + 1] >> 32)));
  return (uint32_t)lh_av(S ^ (len * 0x9E3779B185EBCA87ull));
}
// A chunk's checksum entry by the frame's flags (§4.6: bit 3, LANE_HASH).
inline uint32_t chunk_sum(uint32_t flags, const void* p, size_t n) { return (flags & 8u) ? lh32(p, n) : h32(p, n); }

inline void put_le(uint8_t* p, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
inline uint64_t get_le(const uint8_t* p, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
inline void put_le(std::vector<uint8_t>& b, size_t off, uint64_t v, unsigned bytes) {
  if (b.size() < off + bytes) b.resize(off + bytes, 0);
  put_le(b.data() + off, v, bytes);
}

// §3: fields of b bits in groups of 8 into b bytes = a little-endian bit stream with field i at bit i*b.
inline void put_field(uint8_t* base, uint64_t i, unsigned b, uint32_t v) {
  for (unsigned t = 0; t < b; ++t) {
    const uint64_t bit = i * b + t;
    if ((v >> t) & 1u) base[bit >> 3] |= (uint8_t)(1u << (bit & 7));
  }
}
inline uint32_t get_field(const uint8_t* base, uint64_t i, unsigned b) {
  uint32_t v = 0;
  for (unsigned t = 0; t < b; ++t) {
    const uint64_t bit = i * b + t;
    v |= (uint32_t)((base[bit >> 3] >> (bit & 7)) & 1u) << t;
  }
  return v;
}
inline uint64_t packed(uint64_t n, unsigned b) { return (n + 7) / 8 * b; }

struct Stats {
  uint64_t coded_chunks = 0, raw_chunks = 0, escapes = 0;
};

// Mode override for building non-canonical frames: -1 canonical, 0 force coded, 1 force raw.
struct Options {
  unsigned chunk_log2 = 12;
  uint32_t flags = SZ_FLAG_CHECKSUMS;
  std::vector<int> force_mode;  // per chunk, optional
};

// Header fields in the order of §4.1.
struct Header {
  uint32_t magic = 0x465A5053u;
  uint8_t version = 1, dtype = 0, code_bits = 0, chunk_log2 = 0;
  uint32_t flags = 0;
  uint8_t codebook_count = 0;
  uint8_t reserved13[3] = {0, 0, 0};
  uint64_t n_values = 0, exp_size = 0;
  uint8_t codebook[16] = {0};
  uint8_t reserved48[12] = {0};
};

inline void write_header(uint8_t* p, const Header& h) {
  memset(p, 0, 64);
  put_le(p + 0, h.magic, 4);
  p[4] = h.version;
  p[5] = h.dtype;
  p[6] = h.code_bits;
  p[7] = h.chunk_log2;
  put_le(p + 8, h.flags, 4);
  p[12] = h.codebook_count;
  memcpy(p + 13, h.reserved13, 3);
  put_le(p + 16, h.n_values, 8);
  put_le(p + 24, h.exp_size, 8);
  memcpy(p + 32, h.codebook, 16);
  memcpy(p + 48, h.reserved48, 12);
  put_le(p + 60, h32(p, 60), 4);
}
// Recomputes the header checksum after a test edited header bytes.
inline void reseal_header(std::vector<uint8_t>& f) { put_le(f.data() + 60, h32(f.data(), 60), 4); }

// Where the sections of a frame are (from its header; no validation).
struct Layout {
  unsigned dtype, k, chunk_log2, count;
  uint32_t flags;
  uint64_t n, exp_size, chunks, index, checksums, rest, exponents, end;
  DtypeFacts f;
};
inline Layout layout_of(const uint8_t* p) {
  Layout L;
  L.dtype = p[5];
  L.k = p[6];
  L.chunk_log2 = p[7];
  L.flags = (uint32_t)get_le(p + 8, 4);
  L.count = p[12];
  L.n = get_le(p + 16, 8);
  L.exp_size = get_le(p + 24, 8);
  L.f = dtype_facts(L.dtype);
  const uint64_t S = (uint64_t)1 << L.chunk_log2;
  L.chunks = (L.n + S - 1) / S;
  L.index = 64;
  L.checksums = L.index + 8 * L.chunks;
  L.rest = L.checksums + ((L.flags & 1) ? 4 * L.chunks : 0);
  L.exponents = L.rest + packed(L.n, L.f.W - L.f.E);
  L.end = L.exponents + L.exp_size;
  return L;
}
// Start of chunk c's record in the exponent section, from the index (begin_c = end_{c-1}).
inline uint64_t record_begin(const uint8_t* frame, const Layout& L, uint64_t c) {
  if (c == 0) return 0;
  return get_le(frame + L.index + 8 * (c - 1), 8) & ((1ull << 62) - 1);
}
inline uint64_t record_end(const uint8_t* frame, const Layout& L, uint64_t c) {
  return get_le(frame + L.index + 8 * c, 8) & ((1ull << 62) - 1);
}

// Encodes n values (little-endian bytes in src) into a frame, canonically unless opt.force_mode says otherwise.
inline std::vector<uint8_t> encode(const uint8_t* src, uint64_t n, unsigned dtype, const sz_codebook& cb,
                                   const Options& opt, Stats* stats = nullptr) {
  const DtypeFacts f = dtype_facts(dtype);
  const unsigned R = f.W - f.E, k = cb.code_bits, vb = f.W / 8;
  const uint64_t S = (uint64_t)1 << opt.chunk_log2;
  const uint64_t C = (n + S - 1) / S;
  int code_of[256];
  for (int& c : code_of) c = -1;
  for (unsigned i = 0; i < cb.count; ++i) code_of[cb.values[i]] = (int)i;

  // Rest section.
  std::vector<uint8_t> rest(packed(n, R), 0);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t x = load_value(src + i * vb, f.W);
    const uint32_t sign = x >> (f.W - 1);
    put_field(rest.data(), i, R, (sign << f.M) | (x & ((1u << f.M) - 1u)));
  }
  // Exponent records.
  std::vector<uint8_t> exps, index(8 * C, 0), sums(4 * C, 0);
  Stats st;
  for (uint64_t c = 0; c < C; ++c) {
    const uint64_t b = c * S, L = (n - b < S) ? n - b : S;
    std::vector<uint8_t> codes(packed(L, k), 0), raw(packed(L, f.E), 0), pos, ex;
    uint64_t X = 0;
    for (uint64_t j = 0; j < L; ++j) {
      const uint32_t e = exponent_field(load_value(src + (b + j) * vb, f.W), f);
      put_field(raw.data(), j, f.E, e);
      if (code_of[e] >= 0) {
        put_field(codes.data(), j, k, (uint32_t)code_of[e]);
      } else {
        pos.push_back((uint8_t)j);
        pos.push_back((uint8_t)(j >> 8));
        ex.push_back((uint8_t)e);
        ++X;
      }
    }
    int mode = (codes.size() + 3 * X <= raw.size()) ? 0 : 1;
    if (c < opt.force_mode.size() && opt.force_mode[c] >= 0) mode = opt.force_mode[c];
    if (mode == 0) {
      exps.insert(exps.end(), codes.begin(), codes.end());
      exps.insert(exps.end(), pos.begin(), pos.end());
      exps.insert(exps.end(), ex.begin(), ex.end());
      ++st.coded_chunks;
      st.escapes += X;
    } else {
      exps.insert(exps.end(), raw.begin(), raw.end());
      ++st.raw_chunks;
    }
    put_le(index.data() + 8 * c, (uint64_t)exps.size() | ((uint64_t)mode << 62), 8);
    put_le(sums.data() + 4 * c, chunk_sum(opt.flags, src + b * vb, L * vb), 4);
  }
  if (stats) *stats = st;

  Header h;
  h.dtype = (uint8_t)dtype;
  h.code_bits = (uint8_t)k;
  h.chunk_log2 = (uint8_t)opt.chunk_log2;
  h.flags = opt.flags;
  h.codebook_count = cb.count;
  h.n_values = n;
  h.exp_size = exps.size();
  memcpy(h.codebook, cb.values, 16);
  std::vector<uint8_t> out(64);
  write_header(out.data(), h);
  out.insert(out.end(), index.begin(), index.end());
  if (opt.flags & 1) out.insert(out.end(), sums.begin(), sums.end());
  out.insert(out.end(), rest.begin(), rest.end());
  out.insert(out.end(), exps.begin(), exps.end());
  return out;
}

inline std::vector<uint8_t> encode(const std::vector<uint8_t>& src, unsigned dtype, const sz_codebook& cb,
                                   unsigned chunk_log2, uint32_t flags, Stats* stats = nullptr) {
  Options o;
  o.chunk_log2 = chunk_log2;
  o.flags = flags;
  return encode(src.data(), src.size() / value_bytes(dtype), dtype, cb, o, stats);
}

// ---- §6 containers --------------------------------------------------------------------------------------------
constexpr uint64_t kAuto = ~(uint64_t)0;
struct Item {
  uint8_t kind = 2, dtype = 0, ndim = 0, reserved = 0;
  std::string name;
  std::vector<uint64_t> shape;
  uint64_t original_offset = 0, original_size = 0;
  uint64_t data_offset = kAuto;  // kAuto: place after the previous item, aligned to 64
  uint64_t data_size = kAuto;    // kAuto: data.size()
  std::vector<uint8_t> data;
};

inline std::vector<uint8_t> index_bytes(const std::vector<Item>& items) {
  std::vector<uint8_t> ix;
  for (const Item& it : items) {
    const size_t o = ix.size();
    ix.resize(o + 6);
    ix[o] = it.kind;
    ix[o + 1] = it.dtype;
    ix[o + 2] = it.ndim;
    ix[o + 3] = it.reserved;
    put_le(ix.data() + o + 4, it.name.size(), 2);
    ix.insert(ix.end(), it.name.begin(), it.name.end());
    for (uint64_t d : it.shape) put_le(ix, ix.size(), d, 8);
    put_le(ix, ix.size(), it.original_offset, 8);
    put_le(ix, ix.size(), it.original_size, 8);
    put_le(ix, ix.size(), it.data_offset, 8);
    put_le(ix, ix.size(), it.data_size, 8);
  }
  return ix;
}

// Assembles a container: header, item data at their offsets (filling in automatic offsets and sizes), index,
// footer. `items` is updated with the offsets used.
inline std::vector<uint8_t> container(std::vector<Item>& items) {
  std::vector<uint8_t> out(16, 0);
  put_le(out.data(), 0x435A5053u, 4);
  out[4] = 1;
  uint64_t cursor = 16;
  for (Item& it : items) {
    if (it.data_offset == kAuto) it.data_offset = (cursor + 63) / 64 * 64;
    if (it.data_size == kAuto) it.data_size = it.data.size();
    const uint64_t end = it.data_offset + it.data.size();
    if (out.size() < end) out.resize(end, 0);
    // An item placed inside the header on purpose does not overwrite the header.
    if (!it.data.empty() && it.data_offset >= 16) memcpy(out.data() + it.data_offset, it.data.data(), it.data.size());
    if (it.data_offset + it.data_size > cursor) cursor = it.data_offset + it.data_size;
  }
  if (out.size() < cursor) out.resize(cursor, 0);
  const uint64_t index_offset = out.size();
  const std::vector<uint8_t> ix = index_bytes(items);
  out.insert(out.end(), ix.begin(), ix.end());
  uint8_t foot[32];
  put_le(foot + 0, index_offset, 8);
  put_le(foot + 8, ix.size(), 8);
  put_le(foot + 16, items.size(), 4);
  put_le(foot + 20, h32(ix.data(), ix.size()), 4);
  put_le(foot + 24, h32(foot, 24), 4);
  put_le(foot + 28, 0x435A5053u, 4);
  out.insert(out.end(), foot, foot + 32);
  return out;
}

// Recomputes index and footer checksums from the footer's offset/size fields (after a test edited them).
inline void reseal_container(std::vector<uint8_t>& c) {
  uint8_t* foot = c.data() + c.size() - 32;
  const uint64_t io = get_le(foot, 8), is = get_le(foot + 8, 8);
  if (io <= c.size() && is <= c.size() - io) put_le(foot + 20, h32(c.data() + io, is), 4);
  put_le(foot + 24, h32(foot, 24), 4);
}

}  // namespace spec
}  // namespace sztest
