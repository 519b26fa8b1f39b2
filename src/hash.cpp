// hash.cpp — the one TU that compiles xxHash (header-only, XXH_INLINE_ALL): H32/H64 of docs/FORMAT.md §1.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "internal.h"

namespace splitzip {
namespace detail {

uint64_t h64(const void* data, size_t size) { return (uint64_t)XXH3_64bits(data, size); }
uint32_t h32(const void* data, size_t size) { return (uint32_t)XXH3_64bits(data, size); }

}  // namespace detail
}  // namespace splitzip
