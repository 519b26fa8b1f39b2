// hash.cpp — the one TU that compiles xxHash (header-only, XXH_INLINE_ALL): H32/H64 of docs/FORMAT.md §1; and the
// portable build of LH32 (§4.6.1, lanehash.h).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "internal.h"
#include "lanehash.h"

namespace splitzip {
namespace detail {

uint64_t h64(const void* data, size_t size) { return (uint64_t)XXH3_64bits(data, size); }
uint32_t h32(const void* data, size_t size) { return (uint32_t)XXH3_64bits(data, size); }
uint32_t lh32(const void* data, size_t size) { return lh32::lh32(data, size); }
uint32_t chunk_checksum(uint32_t flags, const void* data, size_t size) {
  return (flags & layout::kFlagLaneHash) ? lh32(data, size) : h32(data, size);
}
uint64_t h64_pair(const void* a, size_t a_size, const void* b, size_t b_size) {
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, a, a_size);
  XXH3_64bits_update(&st, b, b_size);
  return (uint64_t)XXH3_64bits_digest(&st);
}

}  // namespace detail
}  // namespace splitzip
