// rowmap.cpp — row map files (docs/FORMAT.md §5.4): their size, parsing and checks, and the two builders that pair
// each row with the previous row of the same key (a token id, or a row's bytes) through an open-addressing hash table
// in the caller's workspace. The pairing of values in frames is entropy.cpp's (§4.10.6).
#include <string.h>

#include "internal.h"

using namespace splitzip;
using namespace splitzip::layout;

namespace {

// The hash table of the builders: a power of two of slots, at least twice the rows, each a 64-bit key and the
// latest row with that key plus one (0: an empty slot).
struct Slots {
  uint64_t* key;
  uint32_t* row1;
  uint64_t mask;
};

uint64_t slot_count(uint64_t rows) {
  uint64_t s = 16;
  while (s < 2 * rows) s <<= 1;
  return s;
}

bool slots_in(void* workspace, size_t workspace_size, uint64_t rows, Slots* t) {
  const uint64_t s = slot_count(rows);
  if (workspace == nullptr || (uint64_t)workspace_size < s * 12) return false;
  // Keys first (8-byte aligned within the workspace as given: the loads below are memcpy'd, so any alignment).
  t->key = (uint64_t*)workspace;
  t->row1 = (uint32_t*)((uint8_t*)workspace + s * 8);
  t->mask = s - 1;
  memset(workspace, 0, (size_t)(s * 12));
  return true;
}

inline uint64_t mix(uint64_t k) {  // spreads keys that differ in their low bits (token ids) over the slots
  k ^= k >> 31;
  k *= 0x9E3779B97F4A7C15ull;
  return k ^ (k >> 29);
}

// Pairs every row with the previous row whose key is equal and `same(prev, r)` holds, writing the file into dst.
template <class Key, class Same>
sz_status build(uint64_t rows, Key key_of, Same same, void* workspace, size_t workspace_size, void* dst_v,
                size_t dst_capacity, size_t* dst_size) {
  if (dst_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (rows == 0 || rows > kMaxRowMapRows) return SZ_ERROR_INVALID_ARGUMENT;
  const uint64_t size = row_map_file_size(rows);
  if ((uint64_t)dst_capacity < size) return SZ_ERROR_DST_TOO_SMALL;
  Slots t;
  if (!slots_in(workspace, workspace_size, rows, &t)) return SZ_ERROR_INVALID_ARGUMENT;
  uint8_t* dst = (uint8_t*)dst_v;
  memset(dst, 0, kRowMapHeader);
  store_u32(dst, kRowMapMagic);
  dst[4] = kRowMapVersion;
  store_u32(dst + 8, (uint32_t)rows);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t k = key_of(r);
    uint64_t i = mix(k) & t.mask, k_at;
    uint32_t pair = 0;
    for (;; i = (i + 1) & t.mask) {
      uint32_t r1;
      memcpy(&r1, t.row1 + i, 4);
      if (r1 == 0) break;
      memcpy(&k_at, t.key + i, 8);
      if (k_at == k) {
        if (same(r1 - 1, r)) pair = r1;
        break;  // the slot now holds row r (a hash collision of different rows only loses a pair)
      }
    }
    memcpy(t.key + i, &k, 8);
    const uint32_t r1 = (uint32_t)(r + 1);
    memcpy(t.row1 + i, &r1, 4);
    store_u32(dst + kRowMapHeader + 4 * r, pair);
  }
  store_u32(dst + size - 4, detail::h32(dst, (size_t)size - 4));
  *dst_size = (size_t)size;
  return SZ_OK;
}

}  // namespace

extern "C" {

SZ_API size_t sz_row_map_file_size(uint64_t rows) {
  return rows == 0 || rows > kMaxRowMapRows ? 0 : (size_t)row_map_file_size(rows);
}

SZ_API sz_status sz_row_map_parse(const void* src_v, size_t src_size, sz_row_map* map) {
  if (src_v == nullptr || map == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* src = (const uint8_t*)src_v;
  if (src_size < kRowMapHeader + 4) return SZ_ERROR_SRC_TRUNCATED;
  const uint64_t rows = load_u32(src + 8);
  const uint64_t size = row_map_file_size(rows);
  if ((uint64_t)src_size < size) return SZ_ERROR_SRC_TRUNCATED;
  if (load_u32(src) != kRowMapMagic) return SZ_ERROR_BAD_MAGIC;
  if (src[4] != kRowMapVersion) return SZ_ERROR_UNSUPPORTED_VERSION;
  const uint64_t id = detail::h64(src, (size_t)size - 4);
  if (load_u32(src + size - 4) != (uint32_t)id) return SZ_ERROR_CHECKSUM;
  if (rows == 0 || rows > kMaxRowMapRows || src[5] | src[6] | src[7] || load_u32(src + 12) != 0)
    return SZ_ERROR_CORRUPT;
  const uint8_t* pair = src + kRowMapHeader;
  for (uint64_t r = 0; r < rows; ++r)
    if (load_u32(pair + 4 * r) > r) return SZ_ERROR_CORRUPT;
  map->rows = (uint32_t)rows;
  map->reserved = 0;
  map->id = id;
  map->pair = pair;
  return SZ_OK;
}

SZ_API size_t sz_row_map_workspace_size(uint64_t rows) {
  return rows == 0 || rows > kMaxRowMapRows ? 0 : (size_t)(slot_count(rows) * 12);
}

SZ_API sz_status sz_row_map_from_tokens(const uint32_t* tokens, uint64_t rows, void* workspace,
                                        size_t workspace_size, void* dst, size_t dst_capacity, size_t* dst_size) {
  if (tokens == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  auto key = [&](uint64_t r) { return (uint64_t)tokens[r]; };
  auto same = [](uint64_t, uint64_t) { return true; };
  return build(rows, key, same, workspace, workspace_size, dst, dst_capacity, dst_size);
}

SZ_API sz_status sz_row_map_from_rows(const void* values_v, uint64_t rows, size_t row_bytes, void* workspace,
                                      size_t workspace_size, void* dst, size_t dst_capacity, size_t* dst_size) {
  if (values_v == nullptr || row_bytes == 0) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* v = (const uint8_t*)values_v;
  auto key = [&](uint64_t r) { return detail::h64(v + r * row_bytes, row_bytes); };
  auto same = [&](uint64_t a, uint64_t b) { return memcmp(v + a * row_bytes, v + b * row_bytes, row_bytes) == 0; };
  return build(rows, key, same, workspace, workspace_size, dst, dst_capacity, dst_size);
}

}  // extern "C"
