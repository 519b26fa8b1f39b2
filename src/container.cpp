// container.cpp — containers of many named items (docs/FORMAT.md §6): reading without allocation, and writing the
// header, index and footer for items that the caller has placed.
//
// The index is a sequence of variable-size entries, so the reader walks it. The whole-index checks (items and
// original ranges do not overlap, names unique) sort the items three ways when the caller lends memory for that
// (sz_container_items: its item array; sz_container_write_index: its destination), in O(n log n); without memory
// (sz_container_open) they take one pass when the index is already sorted that way and pairwise comparisons
// otherwise.
//
// Every check of the index lives in read_items (with check_item and check_all_sorted), which needs only the index
// and footer: sz_container_items runs it over a whole container and then checks the items' bytes against their
// entries; sz_container_index_items runs it over the index that a caller read from a file on its own.
#include <string.h>

#include <algorithm>

#include "internal.h"

using namespace splitzip;
using namespace splitzip::layout;

namespace {

constexpr size_t kEntryFixed = 38;  // kind, dtype, ndim, reserved, name_size (6) + 4 u64 (32)

struct IndexWalker {  // walks the index entries of a container buffer
  const uint8_t* index;
  const uint8_t* end;
  uint64_t index_offset;
  const uint8_t* p;
  void reset() { p = index; }
  // Parses one entry and checks everything local to it; SZ_ERROR_CORRUPT if anything is off.
  sz_status next(sz_item* it) {
    if ((size_t)(end - p) < kEntryFixed) return SZ_ERROR_CORRUPT;
    sz_item x;
    memset(&x, 0, sizeof x);
    x.kind = p[0];
    x.dtype = p[1];
    x.ndim = p[2];
    x.reserved = p[3];
    x.name_size = load_u16(p + 4);
    if (x.ndim > SZ_MAX_NDIM || x.reserved != 0 || x.name_size > SZ_MAX_NAME) return SZ_ERROR_CORRUPT;
    const size_t size = kEntryFixed + x.name_size + 8u * x.ndim;
    if ((size_t)(end - p) < size) return SZ_ERROR_CORRUPT;
    x.name = (const char*)(p + 6);
    const uint8_t* q = p + 6 + x.name_size;
    for (unsigned d = 0; d < x.ndim; ++d) x.shape[d] = load_u64(q + 8 * d);
    q += 8u * x.ndim;
    x.original_offset = load_u64(q);
    x.original_size = load_u64(q + 8);
    x.data_offset = load_u64(q + 16);
    x.data_size = load_u64(q + 24);
    p += size;
    *it = x;
    return SZ_OK;
  }
};

struct ArrayWalker {  // the same interface over the caller's items (writer side)
  const sz_item* items;
  uint32_t i;
  void reset() { i = 0; }
  sz_status next(sz_item* it) {
    *it = items[i++];
    return SZ_OK;
  }
};

bool names_equal(const sz_item& a, const sz_item& b) {
  return a.name_size == b.name_size && (a.name_size == 0 || memcmp(a.name, b.name, a.name_size) == 0);
}
int names_compare(const sz_item& a, const sz_item& b) {
  const size_t m = a.name_size < b.name_size ? a.name_size : b.name_size;
  const int r = m ? memcmp(a.name, b.name, m) : 0;
  if (r != 0) return r;
  return (int)a.name_size - (int)b.name_size;
}
bool overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
  if (an == 0 || bn == 0) return false;
  return a < b + bn && b < a + an;
}

// Checks of one item that need no other item. `bad` is the status for a violation (CORRUPT for a reader,
// INVALID_ARGUMENT for a writer).
sz_status check_item(const sz_item& x, uint64_t index_offset, sz_status bad) {
  if (x.kind == SZ_ITEM_FRAME) {
    if (!dtype_known(x.dtype)) return bad;
  } else if (x.kind == SZ_ITEM_STORED) {
    if (x.dtype != 0 || x.data_size != x.original_size) return bad;
  } else if (x.kind == SZ_ITEM_BOOK || x.kind == SZ_ITEM_TABLE || x.kind == SZ_ITEM_ROW_MAP) {
    // Not part of the original file (§6.3).
    if (x.dtype != 0 || x.ndim != 0 || x.original_offset != 0 || x.original_size != 0) return bad;
  } else {
    return bad;
  }
  if (x.ndim > SZ_MAX_NDIM || x.reserved != 0 || x.name_size > SZ_MAX_NAME) return bad;
  if (x.name_size != 0 && (x.name == nullptr || memchr(x.name, 0, x.name_size) != nullptr)) return bad;
  if (x.data_offset % SZ_CONTAINER_ALIGN != 0 || x.data_offset < SZ_CONTAINER_HEADER_SIZE) return bad;
  if (x.data_offset > index_offset || x.data_size > index_offset - x.data_offset) return bad;
  if (x.original_offset + x.original_size < x.original_offset) return bad;
  if (x.kind == SZ_ITEM_FRAME) {
    const unsigned vb = dtype_traits(x.dtype).value_bits / 8;
    if (x.original_size % vb != 0) return bad;
    if (x.ndim > 0) {
      uint64_t prod = 1;
      for (unsigned d = 0; d < x.ndim; ++d)
        if (__builtin_mul_overflow(prod, x.shape[d], &prod)) return bad;
      if (prod != x.original_size / vb) return bad;
    }
  }
  return SZ_OK;
}

// Checks across items: no two items overlap, no two original ranges overlap and together they cover
// [0, sum of sizes), names are unique.
template <class Walker>
sz_status check_all(Walker w, uint32_t count, uint64_t index_offset, sz_status bad) {
  uint64_t total = 0;
  bool sorted_data = true, sorted_orig = true, sorted_name = true;
  sz_item prev, x;
  memset(&prev, 0, sizeof prev);
  memset(&x, 0, sizeof x);
  w.reset();
  for (uint32_t i = 0; i < count; ++i) {
    const sz_status s = w.next(&x);
    if (s != SZ_OK) return s;
    const sz_status si = check_item(x, index_offset, bad);
    if (si != SZ_OK) return si;
    if (total + x.original_size < total) return bad;
    total += x.original_size;
    if (i > 0) {
      if (x.data_offset < prev.data_offset + prev.data_size) sorted_data = false;
      if (x.original_offset != prev.original_offset + prev.original_size) sorted_orig = false;
      if (names_compare(prev, x) >= 0) sorted_name = false;
    } else if (x.original_offset != 0) {
      sorted_orig = false;
    }
    prev = x;
  }
  // Every original range lies inside [0, total); with no overlaps they then tile it exactly.
  w.reset();
  for (uint32_t i = 0; i < count; ++i) {
    w.next(&x);
    if (x.original_offset + x.original_size > total) return bad;
  }
  if (sorted_data && sorted_orig && sorted_name) return SZ_OK;
  Walker outer = w, inner = w;
  outer.reset();
  for (uint32_t i = 0; i < count; ++i) {
    outer.next(&x);
    inner.reset();
    sz_item y;
    memset(&y, 0, sizeof y);
    for (uint32_t j = 0; j < i; ++j) {
      inner.next(&y);
      if (!sorted_data && overlap(x.data_offset, x.data_size, y.data_offset, y.data_size)) return bad;
      if (!sorted_orig && overlap(x.original_offset, x.original_size, y.original_offset, y.original_size)) return bad;
      if (!sorted_name && names_equal(x, y)) return bad;
    }
  }
  return SZ_OK;
}

// The checks across items of check_all, in O(n log n): sorts [first, last) (sz_item, or indices that item() maps to
// items) by data offset, by original offset and by name, and compares neighbours. Every item passed check_item
// and the original sizes sum to total without overflow.
template <class It, class ItemOf>
sz_status check_all_sorted(It first, It last, ItemOf item, uint64_t total, sz_status bad) {
  using V = typename std::iterator_traits<It>::value_type;
  // Ranges sorted by start overlap iff a non-empty one starts before the furthest end of the non-empty ones before.
  auto ranges_disjoint = [&](auto begin_of, auto size_of) {
    std::sort(first, last, [&](const V& a, const V& b) { return begin_of(item(a)) < begin_of(item(b)); });
    uint64_t end = 0;
    for (It i = first; i != last; ++i) {
      const sz_item& x = item(*i);
      if (size_of(x) == 0) continue;
      if (begin_of(x) < end) return false;
      end = std::max(end, begin_of(x) + size_of(x));
    }
    return true;
  };
  if (!ranges_disjoint([](const sz_item& x) { return x.data_offset; }, [](const sz_item& x) { return x.data_size; }))
    return bad;
  if (!ranges_disjoint([](const sz_item& x) { return x.original_offset; },
                       [](const sz_item& x) { return x.original_size; }))
    return bad;
  for (It i = first; i != last; ++i)
    if (item(*i).original_offset + item(*i).original_size > total) return bad;
  std::sort(first, last, [&](const V& a, const V& b) { return names_compare(item(a), item(b)) < 0; });
  for (It i = first; i != last && i + 1 != last; ++i)
    if (names_equal(item(*i), item(*(i + 1)))) return bad;
  return SZ_OK;
}

struct Layout {
  const uint8_t* base;   // the whole container, or null when only its index is at hand
  const uint8_t* index;  // the index entries, then the footer
  uint64_t size, index_offset, index_size;
  uint32_t count;
};

// The footer checks that need nothing but the footer: magic, checksum, an index between header and footer.
// footer: the last SZ_CONTAINER_FOOTER_SIZE bytes of a container of file_size bytes (at least header + footer).
sz_status check_footer(const uint8_t* f, uint64_t file_size, uint64_t* index_offset, uint64_t* index_size) {
  if (load_u32(f + 28) != kContainerMagic) return SZ_ERROR_CORRUPT;
  if (load_u32(f + 24) != detail::h32(f, 24)) return SZ_ERROR_CHECKSUM;
  const uint64_t io = load_u64(f), is = load_u64(f + 8);
  if (io < SZ_CONTAINER_HEADER_SIZE || io > file_size - SZ_CONTAINER_FOOTER_SIZE ||
      is != file_size - SZ_CONTAINER_FOOTER_SIZE - io)
    return SZ_ERROR_CORRUPT;
  *index_offset = io;
  *index_size = is;
  return SZ_OK;
}

// Footer and index checksum of a container of file_size bytes whose last tail_size bytes are at tail (index and
// footer: tail_size == file_size - index offset); fills *l but for l->base.
sz_status open_index(const uint8_t* tail, uint64_t tail_size, uint64_t file_size, Layout* l) {
  if (tail_size < SZ_CONTAINER_FOOTER_SIZE || file_size < SZ_CONTAINER_HEADER_SIZE + SZ_CONTAINER_FOOTER_SIZE)
    return SZ_ERROR_SRC_TRUNCATED;
  const uint8_t* f = tail + tail_size - SZ_CONTAINER_FOOTER_SIZE;
  uint64_t index_offset, index_size;
  const sz_status s = check_footer(f, file_size, &index_offset, &index_size);
  if (s != SZ_OK) return s;
  if (index_size != tail_size - SZ_CONTAINER_FOOTER_SIZE) return SZ_ERROR_CORRUPT;  // not where the footer says
  if (load_u32(f + 20) != detail::h32(tail, index_size)) return SZ_ERROR_CHECKSUM;
  l->base = nullptr;
  l->index = tail;
  l->size = file_size;
  l->index_offset = index_offset;
  l->index_size = index_size;
  l->count = load_u32(f + 16);
  if (l->count > index_size / kEntryFixed) return SZ_ERROR_CORRUPT;
  return SZ_OK;
}

// Header, footer and index checksum of a whole container; fills *l.
sz_status open_layout(const void* src, size_t src_size, Layout* l) {
  if (src == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* p = (const uint8_t*)src;
  if (src_size < SZ_CONTAINER_HEADER_SIZE) return SZ_ERROR_SRC_TRUNCATED;
  if (load_u32(p) != kContainerMagic) return SZ_ERROR_BAD_MAGIC;
  if (p[4] != kFormatVersion) return SZ_ERROR_UNSUPPORTED_VERSION;
  for (int i = 5; i < 16; ++i)
    if (p[i] != 0) return SZ_ERROR_CORRUPT;
  if (src_size < SZ_CONTAINER_HEADER_SIZE + SZ_CONTAINER_FOOTER_SIZE) return SZ_ERROR_SRC_TRUNCATED;
  uint64_t index_offset, index_size;
  const sz_status s = check_footer(p + src_size - SZ_CONTAINER_FOOTER_SIZE, src_size, &index_offset, &index_size);
  if (s != SZ_OK) return s;
  const sz_status si = open_index(p + index_offset, src_size - index_offset, src_size, l);
  l->base = p;
  return si;
}

// A frame item's header must agree with its entry: dtype, frame size, number of values. A channel book, symbol table
// or row map item must be a valid file of its kind of exactly its size.
sz_status check_frame_entry(const Layout& l, const sz_item& x) {
  if (x.kind == SZ_ITEM_BOOK) {
    sz_channel_book b;
    const sz_status s = sz_channel_book_parse(l.base + x.data_offset, (size_t)x.data_size, &b);
    if (s != SZ_OK) return s;
    return sz_channel_book_file_size(&b) == x.data_size ? SZ_OK : SZ_ERROR_CORRUPT;
  }
  if (x.kind == SZ_ITEM_TABLE) {
    sz_symbol_table tb;
    const sz_status s = sz_symbol_table_parse(l.base + x.data_offset, (size_t)x.data_size, &tb);
    if (s != SZ_OK) return s;
    return sz_symbol_table_file_size((sz_dtype)tb.dtype, tb.tensors, tb.period, tb.groups) == x.data_size
               ? SZ_OK
               : SZ_ERROR_CORRUPT;
  }
  if (x.kind == SZ_ITEM_ROW_MAP) {
    sz_row_map m;
    const sz_status s = sz_row_map_parse(l.base + x.data_offset, (size_t)x.data_size, &m);
    if (s != SZ_OK) return s;
    return sz_row_map_file_size(m.rows) == x.data_size ? SZ_OK : SZ_ERROR_CORRUPT;
  }
  if (x.kind != SZ_ITEM_FRAME) return SZ_OK;
  detail::FrameHeader h;
  const sz_status s = detail::parse_frame_header_only(l.base + x.data_offset, (size_t)x.data_size, &h);
  if (s != SZ_OK) return s;
  if (h.dtype != x.dtype || h.off.end != x.data_size || h.n * (h.t.value_bits / 8) != x.original_size)
    return SZ_ERROR_CORRUPT;
  return SZ_OK;
}

IndexWalker walker_of(const Layout& l) {
  IndexWalker w;
  w.index = l.index;
  w.end = w.index + l.index_size;
  w.index_offset = l.index_offset;
  w.p = w.index;
  return w;
}

// The index checks of sz_container_items, which need no item bytes: every entry (check_item), the checks across
// items (sorting the caller's array, then walking again to put it back in index order) and an index that the
// walk consumes exactly. Fills items[0..l.count).
sz_status read_items(const Layout& l, sz_item* items) {
  // One walk: the checks local to each entry, the sum of the original sizes.
  IndexWalker w = walker_of(l);
  uint64_t total = 0;
  sz_status s;
  for (uint32_t i = 0; i < l.count; ++i) {
    s = w.next(&items[i]);
    if (s != SZ_OK) return s;
    s = check_item(items[i], l.index_offset, SZ_ERROR_CORRUPT);
    if (s != SZ_OK) return s;
    if (total + items[i].original_size < total) return SZ_ERROR_CORRUPT;
    total += items[i].original_size;
  }
  // The checks across items come in check_all's order, so sz_container_items and sz_container_open give the same
  // status for any input.
  s = check_all_sorted(items, items + l.count, [](const sz_item& x) -> const sz_item& { return x; }, total,
                       SZ_ERROR_CORRUPT);
  if (s != SZ_OK) return s;
  w.reset();
  for (uint32_t i = 0; i < l.count; ++i) w.next(&items[i]);
  return w.p == w.end ? SZ_OK : SZ_ERROR_CORRUPT;
}

}  // namespace

extern "C" {

SZ_API int sz_is_container(const void* src, size_t src_size) {
  return src != nullptr && src_size >= 4 && load_u32((const uint8_t*)src) == kContainerMagic;
}

SZ_API sz_status sz_container_open(const void* src, size_t src_size, uint32_t* count) {
  if (count == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  Layout l;
  sz_status s = open_layout(src, src_size, &l);
  if (s != SZ_OK) return s;
  IndexWalker w = walker_of(l);
  s = check_all(w, l.count, l.index_offset, SZ_ERROR_CORRUPT);
  if (s != SZ_OK) return s;
  // The walk must consume the index exactly (as read_items checks), then the items' bytes must agree.
  sz_item x;
  memset(&x, 0, sizeof x);
  w.reset();
  for (uint32_t i = 0; i < l.count; ++i) w.next(&x);
  if (w.p != w.end) return SZ_ERROR_CORRUPT;
  w.reset();
  for (uint32_t i = 0; i < l.count; ++i) {
    w.next(&x);
    s = check_frame_entry(l, x);
    if (s != SZ_OK) return s;
  }
  *count = l.count;
  return SZ_OK;
}

SZ_API sz_status sz_container_items(const void* src, size_t src_size, sz_item* items, uint32_t capacity,
                                    uint32_t* count) {
  if (count == nullptr || (items == nullptr && capacity != 0)) return SZ_ERROR_INVALID_ARGUMENT;
  Layout l;
  sz_status s = open_layout(src, src_size, &l);
  if (s != SZ_OK) return s;
  *count = l.count;
  if (items == nullptr) return SZ_OK;
  if (capacity < l.count) return SZ_ERROR_DST_TOO_SMALL;
  s = read_items(l, items);
  if (s != SZ_OK) return s;
  for (uint32_t i = 0; i < l.count; ++i) {
    s = check_frame_entry(l, items[i]);
    if (s != SZ_OK) return s;
  }
  return SZ_OK;
}

SZ_API sz_status sz_container_locate_index(const void* tail, size_t tail_size, uint64_t file_size,
                                           uint64_t* index_offset, uint64_t* index_size) {
  if (tail == nullptr || index_offset == nullptr || index_size == nullptr || tail_size > file_size)
    return SZ_ERROR_INVALID_ARGUMENT;
  if (tail_size < SZ_CONTAINER_FOOTER_SIZE || file_size < SZ_CONTAINER_HEADER_SIZE + SZ_CONTAINER_FOOTER_SIZE)
    return SZ_ERROR_SRC_TRUNCATED;
  uint64_t io, is;
  const sz_status s =
      check_footer((const uint8_t*)tail + tail_size - SZ_CONTAINER_FOOTER_SIZE, file_size, &io, &is);
  if (s != SZ_OK) return s;
  *index_offset = io;
  *index_size = is + SZ_CONTAINER_FOOTER_SIZE;
  return SZ_OK;
}

SZ_API sz_status sz_container_index_items(const void* index, size_t index_size, uint64_t file_size, sz_item* items,
                                          uint32_t capacity, uint32_t* count) {
  if (index == nullptr || count == nullptr || (items == nullptr && capacity != 0) || index_size > file_size)
    return SZ_ERROR_INVALID_ARGUMENT;
  Layout l;
  sz_status s = open_index((const uint8_t*)index, index_size, file_size, &l);
  if (s != SZ_OK) return s;
  if (items == nullptr || capacity < l.count) {
    *count = l.count;
    return items == nullptr ? SZ_OK : SZ_ERROR_DST_TOO_SMALL;
  }
  s = read_items(l, items);
  if (s != SZ_OK) return s;
  *count = l.count;
  return SZ_OK;
}

SZ_API sz_status sz_container_item(const void* src, size_t src_size, uint32_t index, sz_item* item) {
  if (item == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  Layout l;
  sz_status s = open_layout(src, src_size, &l);
  if (s != SZ_OK) return s;
  if (index >= l.count) return SZ_ERROR_INVALID_ARGUMENT;
  IndexWalker w = walker_of(l);
  sz_item x;
  memset(&x, 0, sizeof x);
  for (uint32_t i = 0; i <= index; ++i) {
    s = w.next(&x);
    if (s != SZ_OK) return s;
  }
  s = check_item(x, l.index_offset, SZ_ERROR_CORRUPT);
  if (s != SZ_OK) return s;
  *item = x;
  return SZ_OK;
}

SZ_API sz_status sz_container_find(const void* src, size_t src_size, const char* name, size_t name_size,
                                   uint32_t* index) {
  if (index == nullptr || (name == nullptr && name_size != 0)) return SZ_ERROR_INVALID_ARGUMENT;
  Layout l;
  sz_status s = open_layout(src, src_size, &l);
  if (s != SZ_OK) return s;
  IndexWalker w = walker_of(l);
  sz_item x;
  for (uint32_t i = 0; i < l.count; ++i) {
    s = w.next(&x);
    if (s != SZ_OK) return s;
    if (x.name_size == name_size && (name_size == 0 || memcmp(x.name, name, name_size) == 0)) {
      *index = i;
      return SZ_OK;
    }
  }
  return SZ_ERROR_NOT_FOUND;
}

SZ_API sz_status sz_container_index_size(const sz_item* items, uint32_t count, uint64_t* size) {
  if (size == nullptr || (items == nullptr && count != 0)) return SZ_ERROR_INVALID_ARGUMENT;
  uint64_t total = SZ_CONTAINER_FOOTER_SIZE;
  for (uint32_t i = 0; i < count; ++i) {
    if (items[i].ndim > SZ_MAX_NDIM || items[i].name_size > SZ_MAX_NAME) return SZ_ERROR_INVALID_ARGUMENT;
    total += kEntryFixed + items[i].name_size + 8u * items[i].ndim;
  }
  *size = total;
  return SZ_OK;
}

SZ_API sz_status sz_container_write_header(void* dst, size_t dst_capacity) {
  if (dst == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (dst_capacity < SZ_CONTAINER_HEADER_SIZE) return SZ_ERROR_DST_TOO_SMALL;
  uint8_t* p = (uint8_t*)dst;
  memset(p, 0, SZ_CONTAINER_HEADER_SIZE);
  store_u32(p, kContainerMagic);
  p[4] = kFormatVersion;
  return SZ_OK;
}

SZ_API sz_status sz_container_write_index(const sz_item* items, uint32_t count, uint64_t index_offset, void* dst,
                                          size_t dst_capacity, size_t* written) {
  if (dst == nullptr || written == nullptr || (items == nullptr && count != 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (index_offset < SZ_CONTAINER_HEADER_SIZE) return SZ_ERROR_INVALID_ARGUMENT;
  uint64_t size;
  sz_status s = sz_container_index_size(items, count, &size);
  if (s != SZ_OK) return s;
  if (size <= dst_capacity) {
    // dst is about to receive at least 38 bytes per item: until then it lends room for an index permutation
    // (4 bytes per item), so the checks across items sort instead of comparing pairwise.
    uint64_t total = 0;
    for (uint32_t i = 0; i < count; ++i) {
      s = check_item(items[i], index_offset, SZ_ERROR_INVALID_ARGUMENT);
      if (s != SZ_OK) return s;
      if (total + items[i].original_size < total) return SZ_ERROR_INVALID_ARGUMENT;
      total += items[i].original_size;
    }
    const uintptr_t at = ((uintptr_t)dst + alignof(uint32_t) - 1) & ~(uintptr_t)(alignof(uint32_t) - 1);
    uint32_t* perm = (uint32_t*)at;
    for (uint32_t i = 0; i < count; ++i) perm[i] = i;
    s = check_all_sorted(perm, perm + count, [items](uint32_t i) -> const sz_item& { return items[i]; }, total,
                         SZ_ERROR_INVALID_ARGUMENT);
    if (s != SZ_OK) return s;
  } else {
    ArrayWalker w{items, 0};
    s = check_all(w, count, index_offset, SZ_ERROR_INVALID_ARGUMENT);
    if (s != SZ_OK) return s;
    return SZ_ERROR_DST_TOO_SMALL;
  }
  uint8_t* p = (uint8_t*)dst;
  uint8_t* q = p;
  for (uint32_t i = 0; i < count; ++i) {
    const sz_item& x = items[i];
    q[0] = x.kind;
    q[1] = x.dtype;
    q[2] = x.ndim;
    q[3] = 0;
    store_u16(q + 4, x.name_size);
    if (x.name_size) memcpy(q + 6, x.name, x.name_size);
    q += 6 + x.name_size;
    for (unsigned d = 0; d < x.ndim; ++d, q += 8) store_u64(q, x.shape[d]);
    store_u64(q, x.original_offset);
    store_u64(q + 8, x.original_size);
    store_u64(q + 16, x.data_offset);
    store_u64(q + 24, x.data_size);
    q += 32;
  }
  const uint64_t index_size = (uint64_t)(q - p);
  uint8_t* f = q;
  store_u64(f, index_offset);
  store_u64(f + 8, index_size);
  store_u32(f + 16, count);
  store_u32(f + 20, detail::h32(p, index_size));
  store_u32(f + 24, detail::h32(f, 24));
  store_u32(f + 28, kContainerMagic);
  *written = (size_t)size;
  return SZ_OK;
}

}  // extern "C"
