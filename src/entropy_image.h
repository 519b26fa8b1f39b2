// entropy_image.h — the device image of a symbol table (docs/FORMAT.md §5.3): what the CUDA decoder of entropy-coded
// frames (§4.10) reads, laid out for it. Built on the host by sz_cuda_symbol_table_image() (entropy.cpp), copied to
// device memory by the caller, read by src/cuda/agent/entropy_decode.cuh. An in-memory structure of this library's
// own, never stored in frames or files: it may change with the library, the format does not.
//
// Layout (little-endian, sections at 16-byte offsets from the image's start):
//   Header (64 bytes)
//   sym[groups][A + 2]   u32: the group's symbol indices of nonzero frequency (A = the escape) in increasing order,
//                        entry i = Cum_g[s_i] | s_i << 16, then sentinels 4096 (F of entry i is the next entry's Cum
//                        minus its own, so a decoder never steps over a symbol that has no slot)
//   bucket[groups][1024] u8: the entry whose range holds slot 4b, capped at 255 (a decoder steps forward from it
//                        while the slot lies at or past the next entry's Cum: at most the entries that start inside
//                        the bucket, and one more from 255 for FP8's and BF16's escape at entry 256)
//   used[groups][8]      u32: bit s set when F_g[s] > 0 (s < 256: an escaped symbol must have F_g[s] = 0)
//   tensors[tensors]     {u32 local groups, u32 first list entry}: the distinct groups of the tensor's channels in
//                        order of first use (a CTA copies these groups' tables into shared memory)
//   lists[]              u16: global group ids, the tensors' lists one after another
//   cmap[tensors][period] u32: channel c of tensor t: its local group (index into t's list) | its global group << 16
//   enc[groups][A + 1]   {u32 word, u32 magic}: the encoder's entry of symbol index s (A = the escape), enc_word and
//                        enc_magic below: F_g[s], Cum_g[s] and what divides a state by F_g[s]; a symbol with
//                        F_g[s] = 0 has the escape's entry with kEncEscaped set
#pragma once

#include <stdint.h>

#include "layout.h"  // SZ_HD

namespace splitzip {
namespace eimg {

constexpr uint32_t kMagic = 0x495A5053u;  // "SPZI"
constexpr uint32_t kBuckets = 1024;       // 4096 slots / 4
constexpr unsigned kBucketShift = 2;
constexpr uint32_t kSentinel = 4096u;

struct Header {
  uint32_t magic;
  uint8_t dtype, symbol_bits, reserved[2];
  uint32_t period, tensors, groups, sym_stride;  // sym_stride = A + 2 entries per group
  uint64_t id;                                    // the table's identifier (frames name it)
  uint32_t sym_off, bucket_off, used_off, tensor_off, cmap_off, enc_off, reserved2[2];
};
static_assert(sizeof(Header) == 64, "the image header is 64 bytes");

struct TensorEntry {
  uint32_t local_groups, list_first;
};

SZ_HD uint64_t align16(uint64_t x) { return (x + 15) & ~(uint64_t)15; }

// Entry `tensor` of an image (of image_size bytes) whose tensor table, ending at tens_end, lies inside it: its local
// groups and the start of its group list, which must be a valid count and lie inside the image. The readers of a
// device image (the GPU coders) check it with this before they use the entry.
SZ_HD bool tensor_entry(const uint8_t* image, uint64_t image_size, uint64_t tensor_off, uint64_t tens_end,
                        uint32_t groups, uint32_t tensor, TensorEntry* te) {
  *te = *reinterpret_cast<const TensorEntry*>(image + tensor_off + sizeof(TensorEntry) * tensor);
  return te->local_groups >= 1 && te->local_groups <= groups &&
         tens_end + 2ull * ((uint64_t)te->list_first + te->local_groups) <= image_size;
}

// Section offsets of an image of this shape; lists_total = the sum of the tensors' local group counts.
struct Offsets {
  uint64_t sym, bucket, used, tensor, lists, cmap, enc, end;
};
SZ_HD Offsets offsets(uint32_t symbol_bits, uint64_t tensors, uint64_t period, uint64_t groups,
                       uint64_t lists_total) {
  Offsets o;
  const uint64_t stride = (1ull << symbol_bits) + 2;
  o.sym = sizeof(Header);
  o.bucket = align16(o.sym + 4 * stride * groups);
  o.used = align16(o.bucket + kBuckets * groups);
  o.tensor = align16(o.used + 32 * groups);
  o.lists = o.tensor + sizeof(TensorEntry) * tensors;
  o.cmap = align16(o.lists + 2 * lists_total);
  o.enc = align16(o.cmap + 4 * tensors * period);
  o.end = align16(o.enc + 8 * (stride - 1) * groups);
  return o;
}

// The encoder's entry of a symbol of frequency f (1..4096) and cumulative frequency cum (< 4096), laid out so that a
// step is few operations: the state x is divided by f as q = (x + t) >> sh (a 33-bit sum) with t = the high 32 bits
// of magic * x (Granlund and Montgomery's division by an invariant integer, exact for every 32-bit x): with
// l = ceil(log2 f), magic = floor(2^32 (2^l - f) / f) + 1 (< 2^32) and sh = l, their t + ((x - t) >> 1) >> (l - 1)
// written as one shift of x + t (f = 1: t = 0, sh = 0); the coded state is then q (2^12 - f) + x + cum.
// word = (2^12 - f) | sh << 12 | cum << 20, and bit 17 marks an escaped symbol's entry (F = 0), which holds the
// escape's fields instead, so that a step codes the escape without a second lookup.
constexpr uint32_t kEncEscaped = 1u << 17;
SZ_HD uint32_t enc_word(uint32_t f, uint32_t cum) {
  uint32_t l = 0;
  while ((1u << l) < f) ++l;
  return (layout::kRansProbTotal - f) | l << 12 | cum << 20;
}
SZ_HD uint32_t enc_magic(uint32_t f) {
  uint32_t l = 0;
  while ((1u << l) < f) ++l;
  return (uint32_t)((((uint64_t)1 << 32) * ((1ull << l) - f)) / f + 1);
}
SZ_HD uint32_t enc_comp(uint32_t word) { return word & 0xFFFu; }  // 2^12 - f
SZ_HD uint32_t enc_cum(uint32_t word) { return word >> 20; }
// x / f by an entry (word, magic).
SZ_HD uint32_t enc_div(uint32_t x, uint32_t word, uint32_t magic) {
  const uint32_t t = (uint32_t)(((uint64_t)magic * x) >> 32);
  const uint64_t sum = (uint64_t)x + t;
#if defined(__CUDA_ARCH__)
  return __funnelshift_r((uint32_t)sum, (uint32_t)(sum >> 32), word >> 12);  // (shifts by its low 5 bits: sh)
#else
  return (uint32_t)(sum >> ((word >> 12) & 31u));
#endif
}
// Whether x must emit a word before it codes the entry's symbol (layout::rans_enc_renorm, f = 2^12 - comp).
SZ_HD bool enc_renorm(uint32_t x, uint32_t word) {
  return (x >> layout::kRansEncShift) + enc_comp(word) >= layout::kRansProbTotal;
}
// The coded state of x (renormalised) by the entry.
SZ_HD uint32_t enc_push(uint32_t x, uint32_t word, uint32_t magic) {
  return enc_div(x, word, magic) * enc_comp(word) + x + enc_cum(word);
}

}  // namespace eimg
}  // namespace splitzip
