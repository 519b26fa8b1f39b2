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
  uint32_t sym_off, bucket_off, used_off, tensor_off, cmap_off, reserved2[3];
};
static_assert(sizeof(Header) == 64, "the image header is 64 bytes");

struct TensorEntry {
  uint32_t local_groups, list_first;
};

SZ_HD uint64_t align16(uint64_t x) { return (x + 15) & ~(uint64_t)15; }

// Section offsets of an image of this shape; lists_total = the sum of the tensors' local group counts.
struct Offsets {
  uint64_t sym, bucket, used, tensor, lists, cmap, end;
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
  o.end = align16(o.cmap + 4 * tensors * period);
  return o;
}

}  // namespace eimg
}  // namespace splitzip
