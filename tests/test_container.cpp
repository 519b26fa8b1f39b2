// Containers (docs/FORMAT.md §6): writing with the API gives the spec layout byte for byte, items are found by index
// and by name and decode on their own, and every §6 check rejects a container built by hand to break it.
#include <chrono>

#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

namespace {

std::vector<uint8_t> frame_of(const std::vector<uint8_t>& src, sz_dtype d) {
  std::vector<uint8_t> f;
  EXPECT_EQ(compress_vec(true, src.data(), src.size() / value_bytes(d), d, nullptr, nullptr, &f), SZ_OK);
  return f;
}

// Three items as a .safetensors-like file would give: a stored header, a BF16 tensor, an FP8 tensor.
struct Fixture {
  std::vector<uint8_t> meta, k_src, v_src, k_frame, v_frame;
  std::vector<spec::Item> items;
};

Fixture fixture() {
  Fixture fx;
  fx.meta = random_bytes(37, 1);
  fx.k_src = skewed_values(SZ_DTYPE_BF16, 2 * 3 * 100, 2, 120, 0.5, 0.01);
  fx.v_src = skewed_values(SZ_DTYPE_FP8_E4M3, 333, 3, 7, 0.5, 0.01);
  fx.k_frame = frame_of(fx.k_src, SZ_DTYPE_BF16);
  fx.v_frame = frame_of(fx.v_src, SZ_DTYPE_FP8_E4M3);
  spec::Item m;
  m.kind = 2;
  m.name = "__header__";
  m.original_offset = 0;
  m.original_size = fx.meta.size();
  m.data = fx.meta;
  spec::Item k;
  k.kind = 1;
  k.dtype = SZ_DTYPE_BF16;
  k.ndim = 3;
  k.shape = {2, 3, 100};
  k.name = "layers.0.k";
  k.original_offset = fx.meta.size();
  k.original_size = fx.k_src.size();
  k.data = fx.k_frame;
  spec::Item v;
  v.kind = 1;
  v.dtype = SZ_DTYPE_FP8_E4M3;
  v.ndim = 0;
  v.name = "layers.0.v \xC3\xA9";  // UTF-8 name
  v.original_offset = fx.meta.size() + fx.k_src.size();
  v.original_size = fx.v_src.size();
  v.data = fx.v_frame;
  fx.items = {m, k, v};
  spec::container(fx.items);  // assigns the data offsets, so edits below can refer to them
  return fx;
}

sz_item to_api(const spec::Item& s) {
  sz_item it;
  memset(&it, 0, sizeof it);
  it.kind = s.kind;
  it.dtype = s.dtype;
  it.ndim = s.ndim;
  it.name_size = (uint16_t)s.name.size();
  it.name = s.name.data();
  for (size_t i = 0; i < s.shape.size() && i < SZ_MAX_NDIM; ++i) it.shape[i] = s.shape[i];
  it.original_offset = s.original_offset;
  it.original_size = s.original_size;
  it.data_offset = s.data_offset;
  it.data_size = s.data_size;
  return it;
}

// Items read from the index alone (container_items_from_index) must equal those of the whole container: the
// same fields, names with the same bytes at the same place in the index.
void expect_same_items(const std::vector<uint8_t>& c, const std::vector<sz_item>& whole,
                       const std::vector<uint8_t>& index, uint64_t index_offset, const std::vector<sz_item>& part) {
  ASSERT_EQ(part.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    sz_item a = whole[i], b = part[i];
    EXPECT_EQ(a.name - (const char*)c.data(), (int64_t)index_offset + (b.name - (const char*)index.data()))
        << "item " << i << ": its name points elsewhere in the index";
    a.name = b.name = nullptr;
    EXPECT_EQ(memcmp(&a, &b, sizeof a), 0) << "item " << i;
  }
}

bool header_intact(const std::vector<uint8_t>& c) {
  uint8_t h[SZ_CONTAINER_HEADER_SIZE];
  EXPECT_EQ(sz_container_write_header(h, sizeof h), SZ_OK);
  return c.size() >= sizeof h && memcmp(c.data(), h, sizeof h) == 0;
}

// sz_container_open's status, checked to be sz_container_items' too (the two validate the same things), that
// sz_container_items hands back the items sz_container_item gives one by one, and that the index read alone
// (sz_container_locate_index + sz_container_index_items) gives them too, or, when it rejects the container, the
// status the whole container gets (the header aside: the index alone does not see it).
sz_status open(const std::vector<uint8_t>& c, uint32_t* count = nullptr) {
  uint32_t n = 0;
  const sz_status st = sz_container_open(c.data(), c.size(), &n);
  if (count) *count = n;
  uint32_t cap = 0;
  std::vector<sz_item> items;
  if (sz_container_items(c.data(), c.size(), nullptr, 0, &cap) == SZ_OK) {
    items.resize(cap + 1);
    uint32_t got = 0;
    EXPECT_EQ(sz_container_items(c.data(), c.size(), items.data(), cap, &got), st);
    items.resize(cap);
    if (st == SZ_OK) {
      EXPECT_EQ(got, n);
      for (uint32_t i = 0; i < n; ++i) {
        sz_item one;
        EXPECT_EQ(sz_container_item(c.data(), c.size(), i, &one), SZ_OK);
        EXPECT_EQ(memcmp(&one, &items[i], sizeof one), 0) << "item " << i;
      }
    }
  } else {
    EXPECT_NE(st, SZ_OK);
  }
  std::vector<uint8_t> index;
  uint64_t index_offset = 0;
  std::vector<sz_item> part;
  const sz_status si = container_items_from_index(c, &index, &index_offset, &part);
  if (st == SZ_OK) {
    EXPECT_EQ(si, SZ_OK) << "the index alone is rejected";
    if (si == SZ_OK) expect_same_items(c, items, index, index_offset, part);
  } else if (si != SZ_OK && header_intact(c)) {
    EXPECT_EQ(si, st) << "the index alone is rejected otherwise than the whole container";
  }
  return st;
}

}  // namespace

TEST(ContainerWrite, ApiWritesTheSpecLayoutByteForByte) {
  Fixture fx = fixture();
  const std::vector<uint8_t> expect = spec::container(fx.items);  // fills in data offsets
  std::vector<sz_item> items;
  for (const spec::Item& s : fx.items) items.push_back(to_api(s));
  const uint64_t index_offset = fx.items.back().data_offset + fx.items.back().data_size;

  uint64_t tail = 0;
  ASSERT_EQ(sz_container_index_size(items.data(), (uint32_t)items.size(), &tail), SZ_OK);
  EXPECT_EQ(index_offset + tail, expect.size());

  std::vector<uint8_t> out(index_offset + tail, 0);
  ASSERT_EQ(sz_container_write_header(out.data(), 15), SZ_ERROR_DST_TOO_SMALL);
  ASSERT_EQ(sz_container_write_header(out.data(), out.size()), SZ_OK);
  for (const spec::Item& s : fx.items) memcpy(&out[s.data_offset], s.data.data(), s.data.size());
  size_t written = 0;
  EXPECT_EQ(sz_container_write_index(items.data(), (uint32_t)items.size(), index_offset, &out[index_offset],
                                     (size_t)tail - 1, &written),
            SZ_ERROR_DST_TOO_SMALL);
  ASSERT_EQ(sz_container_write_index(items.data(), (uint32_t)items.size(), index_offset, &out[index_offset],
                                     (size_t)tail, &written),
            SZ_OK);
  EXPECT_EQ(written, tail);
  EXPECT_TRUE(out == expect) << "container bytes differ from the spec layout";
}

TEST(ContainerRead, ItemsByIndexAndByNameDecodeOnTheirOwn) {
  Fixture fx = fixture();
  const std::vector<uint8_t> c = spec::container(fx.items);
  uint32_t count = 0;
  ASSERT_EQ(open(c, &count), SZ_OK);
  ASSERT_EQ(count, 3u);
  EXPECT_EQ(sz_is_container(c.data(), c.size()), 1);
  for (uint32_t i = 0; i < count; ++i) {
    sz_item it;
    ASSERT_EQ(sz_container_item(c.data(), c.size(), i, &it), SZ_OK);
    const spec::Item& s = fx.items[i];
    EXPECT_EQ(it.kind, s.kind);
    EXPECT_EQ(it.dtype, s.dtype);
    EXPECT_EQ(it.ndim, s.ndim);
    ASSERT_EQ(it.name_size, s.name.size());
    EXPECT_EQ(std::string(it.name, it.name_size), s.name);
    EXPECT_TRUE(it.name >= (const char*)c.data() && it.name + it.name_size <= (const char*)c.data() + c.size())
        << "names point into the container buffer";
    for (unsigned d = 0; d < s.ndim; ++d) EXPECT_EQ(it.shape[d], s.shape[d]);
    EXPECT_EQ(it.original_offset, s.original_offset);
    EXPECT_EQ(it.original_size, s.original_size);
    EXPECT_EQ(it.data_offset, s.data_offset);
    EXPECT_EQ(it.data_size, s.data_size);
    EXPECT_EQ(it.data_offset % 64, 0u);
    uint32_t found = 99;
    ASSERT_EQ(sz_container_find(c.data(), c.size(), s.name.data(), s.name.size(), &found), SZ_OK);
    EXPECT_EQ(found, i);
  }
  sz_item it;
  EXPECT_NE(sz_container_item(c.data(), c.size(), 3, &it), SZ_OK);
  uint32_t idx;
  EXPECT_EQ(sz_container_find(c.data(), c.size(), "layers.0", 8, &idx), SZ_ERROR_NOT_FOUND);
  EXPECT_EQ(sz_container_find(c.data(), c.size(), "layers.0.kk", 11, &idx), SZ_ERROR_NOT_FOUND);

  // Decode item "layers.0.k" from its slice alone (a copy, so nothing else of the container is reachable).
  ASSERT_EQ(sz_container_find(c.data(), c.size(), "layers.0.k", 10, &idx), SZ_OK);
  ASSERT_EQ(sz_container_item(c.data(), c.size(), idx, &it), SZ_OK);
  const std::vector<uint8_t> slice(c.begin() + it.data_offset, c.begin() + it.data_offset + it.data_size);
  std::vector<uint8_t> out;
  ASSERT_EQ(decompress_vec(false, slice, it.original_size, &out), SZ_OK);
  EXPECT_TRUE(out == fx.k_src);

  // Restore the "original file" from all items.
  std::vector<uint8_t> original(fx.meta.size() + fx.k_src.size() + fx.v_src.size());
  for (uint32_t i = 0; i < count; ++i) {
    ASSERT_EQ(sz_container_item(c.data(), c.size(), i, &it), SZ_OK);
    if (it.kind == SZ_ITEM_STORED) {
      memcpy(&original[it.original_offset], &c[it.data_offset], it.data_size);
    } else {
      size_t got = 0;
      ASSERT_EQ(sz_decompress(&c[it.data_offset], it.data_size, &original[it.original_offset], it.original_size, &got,
                              1),
                SZ_OK);
    }
  }
  std::vector<uint8_t> want = fx.meta;
  want.insert(want.end(), fx.k_src.begin(), fx.k_src.end());
  want.insert(want.end(), fx.v_src.begin(), fx.v_src.end());
  EXPECT_TRUE(original == want);
}

TEST(ContainerRead, EmptyContainerHasNoItems) {
  std::vector<spec::Item> none;
  const std::vector<uint8_t> c = spec::container(none);
  EXPECT_EQ(c.size(), 48u);
  uint32_t count = 7;
  ASSERT_EQ(open(c, &count), SZ_OK);
  EXPECT_EQ(count, 0u);
  uint32_t idx;
  EXPECT_EQ(sz_container_find(c.data(), c.size(), "x", 1, &idx), SZ_ERROR_NOT_FOUND);
  uint64_t tail = 0;
  ASSERT_EQ(sz_container_index_size(nullptr, 0, &tail), SZ_OK);
  EXPECT_EQ(tail, 32u);
}

TEST(ContainerChecks, EveryTruncationIsRejected) {
  Fixture fx = fixture();
  const std::vector<uint8_t> c = spec::container(fx.items);
  for (size_t len = 0; len < c.size(); ++len) {
    const std::vector<uint8_t> p(c.begin(), c.begin() + len);
    uint32_t count;
    EXPECT_NE(sz_container_open(p.data(), p.size(), &count), SZ_OK) << "cut to " << len << " of " << c.size();
  }
}

TEST(ContainerChecks, EveryBitFlipOutsideItemDataIsRejected) {
  Fixture fx = fixture();
  std::vector<uint8_t> c = spec::container(fx.items);
  const uint64_t index_offset = spec::get_le(&c[c.size() - 32], 8);
  size_t failures = 0;
  for (size_t byte = 0; byte < c.size(); ++byte) {
    if (byte >= 16 && byte < index_offset) continue;  // item data and gaps: the frames carry their own checks
    for (int bit = 0; bit < 8; ++bit) {
      c[byte] ^= (uint8_t)(1u << bit);
      uint32_t count;
      const sz_status st = sz_container_open(c.data(), c.size(), &count);
      if (st == SZ_OK && ++failures < 10) ADD_FAILURE() << "flip of bit " << bit << " of byte " << byte << " accepted";
      c[byte] ^= (uint8_t)(1u << bit);
    }
  }
}

TEST(ContainerChecks, HeaderAndFooterErrors) {
  Fixture fx = fixture();
  const std::vector<uint8_t> good = spec::container(fx.items);
  ASSERT_EQ(open(good), SZ_OK);
  std::vector<uint8_t> c;
  c = good, c[0] = 'X';
  EXPECT_EQ(open(c), SZ_ERROR_BAD_MAGIC) << "header magic";
  c = good, c[4] = 2;
  EXPECT_EQ(open(c), SZ_ERROR_UNSUPPORTED_VERSION) << "version";
  c = good, c[6] = 1;
  EXPECT_EQ(open(c), SZ_ERROR_CORRUPT) << "reserved header byte";
  c = good, c[15] = 1;
  EXPECT_EQ(open(c), SZ_ERROR_CORRUPT) << "reserved header byte 15";
  c = good, c[c.size() - 6] ^= 1;
  EXPECT_EQ(open(c), SZ_ERROR_CHECKSUM) << "footer checksum";
  c = good, c[c.size() - 10] ^= 1;
  EXPECT_EQ(open(c), SZ_ERROR_CHECKSUM) << "index checksum";
  c = good, c[c.size() - 40] ^= 1;  // a byte of the index
  EXPECT_EQ(open(c), SZ_ERROR_CHECKSUM) << "index byte";
  c = good, c[c.size() - 1] = 0;
  EXPECT_NE(open(c), SZ_OK) << "footer magic";
  c = good;
  c.push_back(0);
  EXPECT_NE(open(c), SZ_OK) << "a byte appended after the footer";
}

TEST(ContainerChecks, FooterFieldsOutOfRangeAreCorrupt) {
  Fixture fx = fixture();
  const std::vector<uint8_t> good = spec::container(fx.items);
  const size_t F = good.size() - 32;
  const uint64_t io = spec::get_le(&good[F], 8), is = spec::get_le(&good[F + 8], 8);
  struct Edit {
    const char* what;
    uint64_t io, is;
    uint32_t count;
  } edits[] = {
      {"index_offset + index_size short of footer", io, is - 1, 3},
      {"index_offset + index_size past footer", io, is + 1, 3},
      {"index_offset below 16", 8, F - 8, 3},
      {"huge index_size", io, ~(uint64_t)0 - io + 1, 3},
      {"item_count too large", io, is, 4},
      {"item_count too small", io, is, 2},
      {"item_count huge", io, is, 0xFFFFFFFFu},
  };
  for (const Edit& e : edits) {
    std::vector<uint8_t> c = good;
    spec::put_le(&c[F], e.io, 8);
    spec::put_le(&c[F + 8], e.is, 8);
    spec::put_le(&c[F + 16], e.count, 4);
    spec::reseal_container(c);
    EXPECT_EQ(open(c), SZ_ERROR_CORRUPT) << e.what;
  }
}

TEST(ContainerChecks, IndexEntriesBreakingSection6AreCorrupt) {
  struct Case {
    const char* what;
    void (*edit)(Fixture&);
  };
  const Case cases[] = {
      {"kind 0", [](Fixture& f) { f.items[0].kind = 0; }},
      {"kind 3", [](Fixture& f) { f.items[0].kind = 3; }},
      {"ndim 9", [](Fixture& f) { f.items[1].ndim = 9, f.items[1].shape.assign(9, 1), f.items[1].shape[0] = 600; }},
      {"reserved byte", [](Fixture& f) { f.items[1].reserved = 1; }},
      {"duplicate names", [](Fixture& f) { f.items[2].name = f.items[1].name; }},
      {"NUL in name", [](Fixture& f) { f.items[2].name = std::string("a\0b", 3); }},
      {"name longer than 4096", [](Fixture& f) { f.items[0].name.assign(4097, 'n'); }},
      {"shape product differs from n_values", [](Fixture& f) { f.items[1].shape = {2, 3, 101}; }},
      {"stored item with a dtype", [](Fixture& f) { f.items[0].dtype = SZ_DTYPE_BF16; }},
      {"stored item data_size != original_size", [](Fixture& f) { f.items[0].original_size += 1,
                                                                  f.items[1].original_offset += 1,
                                                                  f.items[2].original_offset += 1; }},
      {"frame original_size != n * W / 8", [](Fixture& f) { f.items[1].original_size -= 2,
                                                            f.items[2].original_offset -= 2; }},
      {"original ranges overlap", [](Fixture& f) { f.items[2].original_offset -= 1, f.items[0].original_offset = 1; }},
      {"original ranges leave a gap", [](Fixture& f) { f.items[2].original_offset += 1; }},
      {"original ranges do not start at 0", [](Fixture& f) {
         for (auto& it : f.items) it.original_offset += 5;
       }},
      {"data offset not a multiple of 64", [](Fixture& f) { f.items[1].data_offset = 96 + 8; }},
      {"item inside the header", [](Fixture& f) { f.items[0].data_offset = 0; }},
      {"items overlap", [](Fixture& f) { f.items[2].data_offset = f.items[1].data_offset; }},
      {"frame item whose data is not a frame", [](Fixture& f) { f.items[1].data.assign(f.items[1].data.size(), 0); }},
  };
  for (const Case& k : cases) {
    Fixture fx = fixture();
    k.edit(fx);
    const std::vector<uint8_t> c = spec::container(fx.items);
    const sz_status st = open(c);
    EXPECT_NE(st, SZ_OK) << k.what;
    EXPECT_TRUE(st == SZ_ERROR_CORRUPT || st == SZ_ERROR_BAD_MAGIC || st == SZ_ERROR_SRC_TRUNCATED ||
                st == SZ_ERROR_CHECKSUM)
        << k.what << " gave " << status_str(st);
  }
}

TEST(ContainerChecks, PreciseErrorsForSection6IndexChecks) {
  // The §6 list says SZ_ERROR_CORRUPT for these (their frame data are intact).
  const struct {
    const char* what;
    void (*edit)(Fixture&);
  } cases[] = {
      {"kind 3", [](Fixture& f) { f.items[0].kind = 3; }},
      {"ndim 9", [](Fixture& f) { f.items[1].ndim = 9, f.items[1].shape.assign(9, 1), f.items[1].shape[0] = 600; }},
      {"duplicate names", [](Fixture& f) { f.items[2].name = f.items[1].name; }},
      {"NUL in name", [](Fixture& f) { f.items[2].name = std::string("a\0b", 3); }},
      {"shape product", [](Fixture& f) { f.items[1].shape = {2, 3, 99}; }},
      {"original gap", [](Fixture& f) { f.items[2].original_offset += 1; }},
      {"unaligned item", [](Fixture& f) { f.items[1].data_offset = 104; }},
      {"overlapping items", [](Fixture& f) { f.items[2].data_offset = f.items[1].data_offset; }},
      {"item before offset 16", [](Fixture& f) { f.items[0].data_offset = 0; }},
  };
  for (const auto& k : cases) {
    Fixture fx = fixture();
    k.edit(fx);
    const std::vector<uint8_t> c = spec::container(fx.items);
    EXPECT_EQ(open(c), SZ_ERROR_CORRUPT) << k.what;
  }
}

TEST(ContainerWrite, WriterRejectsItemsAReaderWouldReject) {
  Fixture fx = fixture();
  auto try_write = [&](std::vector<spec::Item> its, uint64_t index_offset) {
    std::vector<sz_item> items;
    for (const spec::Item& s : its) items.push_back(to_api(s));
    std::vector<uint8_t> buf(1 << 16);
    size_t written = 0;
    return sz_container_write_index(items.data(), (uint32_t)items.size(), index_offset, buf.data(), buf.size(),
                                    &written);
  };
  const uint64_t end = fx.items.back().data_offset + fx.items.back().data_size;
  EXPECT_EQ(try_write(fx.items, end), SZ_OK);
  EXPECT_NE(try_write(fx.items, end - 1), SZ_OK) << "index before the end of the last item";
  {
    auto its = fx.items;
    its[2].data_offset = its[1].data_offset;
    EXPECT_NE(try_write(its, end), SZ_OK) << "overlapping items";
  }
  {
    auto its = fx.items;
    its[2].name = its[0].name;
    EXPECT_NE(try_write(its, end), SZ_OK) << "duplicate names";
  }
  {
    auto its = fx.items;
    its[1].data_offset += 8;
    EXPECT_NE(try_write(its, end + 8), SZ_OK) << "unaligned item";
  }
  {
    auto its = fx.items;
    its[0].kind = 7;
    EXPECT_NE(try_write(its, end), SZ_OK) << "unknown kind";
  }
  {
    auto its = fx.items;
    its[2].original_offset += 3;
    EXPECT_NE(try_write(its, end), SZ_OK) << "gap in original ranges";
  }
}

TEST(ContainerRead, ItemsQueriesTheCountAndRefusesASmallArray) {
  Fixture fx = fixture();
  const std::vector<uint8_t> c = spec::container(fx.items);
  uint32_t count = 0;
  ASSERT_EQ(sz_container_items(c.data(), c.size(), nullptr, 0, &count), SZ_OK);
  EXPECT_EQ(count, 3u);
  std::vector<sz_item> items(3);
  count = 0;
  EXPECT_EQ(sz_container_items(c.data(), c.size(), items.data(), 2, &count), SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(sz_container_items(c.data(), c.size(), nullptr, 3, &count), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_items(c.data(), c.size(), items.data(), 3, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_items(nullptr, 100, items.data(), 3, &count), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_container_items(c.data(), c.size(), items.data(), 3, &count), SZ_OK);
  EXPECT_EQ(std::string(items[1].name, items[1].name_size), "layers.0.k");
  EXPECT_EQ(items[1].ndim, 3u);
  EXPECT_EQ(items[1].shape[2], 100u);
}

// 30,000 stored items whose index order matches neither their data offsets nor their original offsets nor their
// names: the writer and sz_container_items must not compare them pairwise (that took tens of seconds).
TEST(ContainerScale, ThirtyThousandUnsortedItemsWriteAndReadInLinearithmicTime) {
  const uint32_t n = 30000;
  std::vector<uint32_t> slot(n), place(n);
  for (uint32_t i = 0; i < n; ++i) slot[i] = place[i] = i;
  shuffle(slot, 11);   // where item i sits in the container
  shuffle(place, 12);  // where item i's bytes go in the original file
  std::vector<std::string> names(n);
  for (uint32_t i = 0; i < n; ++i)
    names[i] = "t" + std::to_string(Rng(i).next() % 1000000007u) + "_" + std::to_string(i);
  std::vector<sz_item> items(n);
  for (uint32_t i = 0; i < n; ++i) {
    sz_item& it = items[i];
    memset(&it, 0, sizeof it);
    it.kind = SZ_ITEM_STORED;
    it.name = names[i].data();
    it.name_size = (uint16_t)names[i].size();
    it.original_offset = place[i];
    it.original_size = 1;
    it.data_offset = 64 + 64ull * slot[i];
    it.data_size = 1;
  }
  const uint64_t index_offset = 64 + 64ull * n;
  uint64_t index_size = 0;
  ASSERT_EQ(sz_container_index_size(items.data(), n, &index_size), SZ_OK);
  std::vector<uint8_t> c(index_offset + index_size, 0);
  ASSERT_EQ(sz_container_write_header(c.data(), c.size()), SZ_OK);
  for (uint32_t i = 0; i < n; ++i) c[items[i].data_offset] = (uint8_t)place[i];
  const auto t0 = std::chrono::steady_clock::now();
  size_t written = 0;
  ASSERT_EQ(sz_container_write_index(items.data(), n, index_offset, &c[index_offset], index_size, &written), SZ_OK);
  ASSERT_EQ(written, index_size);
  std::vector<sz_item> back(n);
  uint32_t count = 0;
  ASSERT_EQ(sz_container_items(c.data(), c.size(), back.data(), n, &count), SZ_OK);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(count, n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::string(back[i].name, back[i].name_size), names[i]);
    ASSERT_EQ(back[i].data_offset, items[i].data_offset);
  }
  EXPECT_LT(seconds, 2.0) << "writing and reading the index of " << n << " items";
  // A duplicate name far apart in index order is still found.
  names[n - 1] = names[7];
  items[n - 1].name = names[n - 1].data();
  items[n - 1].name_size = (uint16_t)names[n - 1].size();
  EXPECT_EQ(sz_container_write_index(items.data(), n, index_offset, &c[index_offset], index_size, &written),
            SZ_ERROR_INVALID_ARGUMENT);
}

// ---- the index alone (sz_container_locate_index, sz_container_index_items) ----------------------------------------

TEST(ContainerIndexOnly, ItemsEqualThoseOfTheWholeContainer) {
  Fixture fx = fixture();
  const std::vector<uint8_t> c = spec::container(fx.items);
  ASSERT_EQ(open(c), SZ_OK);  // compares the two reads
  std::vector<uint8_t> index;
  uint64_t index_offset = 0;
  std::vector<sz_item> items;
  ASSERT_EQ(container_items_from_index(c, &index, &index_offset, &items), SZ_OK);
  EXPECT_EQ(index_offset, fx.items.back().data_offset + fx.items.back().data_size);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(std::string(items[2].name, items[2].name_size), fx.items[2].name);
  EXPECT_EQ(items[1].shape[1], 3u);

  // Any tail that holds the footer locates the index; the file's last bytes are the footer's.
  uint64_t at = 0, size = 0;
  EXPECT_EQ(sz_container_locate_index(c.data(), c.size(), c.size(), &at, &size), SZ_OK);
  EXPECT_EQ(at, index_offset);
  EXPECT_EQ(size, c.size() - index_offset);

  // An empty container: an index of its footer alone.
  std::vector<spec::Item> none;
  const std::vector<uint8_t> e = spec::container(none);
  ASSERT_EQ(container_items_from_index(e, &index, &index_offset, &items), SZ_OK);
  EXPECT_EQ(index_offset, 16u);
  EXPECT_EQ(index.size(), 32u);
  EXPECT_TRUE(items.empty());
}

TEST(ContainerIndexOnly, ManyUnsortedItemsEqualThoseOfTheWholeContainer) {
  const uint32_t n = 500;
  std::vector<uint32_t> slot(n), place(n);
  for (uint32_t i = 0; i < n; ++i) slot[i] = place[i] = i;
  shuffle(slot, 21);
  shuffle(place, 22);
  std::vector<spec::Item> items(n);
  for (uint32_t i = 0; i < n; ++i) {
    items[i].name = "t" + std::to_string(Rng(i).next() % 1000003u) + "." + std::to_string(i);
    items[i].original_offset = 3ull * place[i];
    items[i].original_size = 3;
    items[i].data_offset = 64 + 64ull * slot[i];
    items[i].data = random_bytes(3, i);
  }
  const std::vector<uint8_t> c = spec::container(items);
  uint32_t count = 0;
  ASSERT_EQ(open(c, &count), SZ_OK);
  EXPECT_EQ(count, n);
}

TEST(ContainerIndexOnly, ArgumentsAndSizes) {
  Fixture fx = fixture();
  const std::vector<uint8_t> c = spec::container(fx.items);
  const uint8_t* tail = c.data() + c.size() - SZ_CONTAINER_FOOTER_SIZE;
  uint64_t at = 7, size = 9;
  EXPECT_EQ(sz_container_locate_index(nullptr, 32, c.size(), &at, &size), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_locate_index(tail, 32, c.size(), nullptr, &size), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_locate_index(tail, 32, c.size(), &at, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_locate_index(tail, 32, 31, &at, &size), SZ_ERROR_INVALID_ARGUMENT) << "tail past the file";
  EXPECT_EQ(sz_container_locate_index(tail + 1, 31, c.size(), &at, &size), SZ_ERROR_SRC_TRUNCATED) << "short tail";
  EXPECT_EQ(sz_container_locate_index(tail, 32, 47, &at, &size), SZ_ERROR_SRC_TRUNCATED) << "file below 48 bytes";
  EXPECT_EQ(at, 7u);
  EXPECT_EQ(size, 9u);  // nothing written on error
  ASSERT_EQ(sz_container_locate_index(tail, 32, c.size(), &at, &size), SZ_OK);

  const uint8_t* index = c.data() + at;
  std::vector<sz_item> items(3);
  uint32_t count = 99;
  EXPECT_EQ(sz_container_index_items(nullptr, size, c.size(), nullptr, 0, &count), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_index_items(index, size, c.size(), nullptr, 3, &count), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_index_items(index, size, c.size(), items.data(), 3, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_index_items(index, size, size - 1, items.data(), 3, &count), SZ_ERROR_INVALID_ARGUMENT)
      << "an index larger than the file";
  EXPECT_EQ(count, 99u);
  ASSERT_EQ(sz_container_index_items(index, size, c.size(), nullptr, 0, &count), SZ_OK);
  EXPECT_EQ(count, 3u);
  count = 0;
  EXPECT_EQ(sz_container_index_items(index, size, c.size(), items.data(), 2, &count), SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(count, 3u);
  ASSERT_EQ(sz_container_index_items(index, size, c.size(), items.data(), 3, &count), SZ_OK);
  EXPECT_EQ(std::string(items[1].name, items[1].name_size), "layers.0.k");
  EXPECT_TRUE(items[1].name >= (const char*)index && items[1].name < (const char*)index + size)
      << "names point into the index buffer";
}

TEST(ContainerIndexOnly, TruncatedOrCorruptFootersAndIndexesAreRejected) {
  Fixture fx = fixture();
  const std::vector<uint8_t> c = spec::container(fx.items);
  uint64_t at = 0, size = 0;
  ASSERT_EQ(sz_container_locate_index(c.data() + c.size() - 32, 32, c.size(), &at, &size), SZ_OK);
  // The file cut short: its last 32 bytes are no footer, or one that places the index elsewhere.
  for (size_t len = 0; len < c.size(); ++len) {
    const std::vector<uint8_t> p(c.begin(), c.begin() + len);
    std::vector<uint8_t> index;
    uint64_t io = 0;
    std::vector<sz_item> items;
    EXPECT_NE(container_items_from_index(p, &index, &io, &items), SZ_OK) << "cut to " << len << " of " << c.size();
  }
  // The index handed over without its first or last byte, or with one byte more in front.
  uint32_t count = 0;
  EXPECT_NE(sz_container_index_items(c.data() + at + 1, size - 1, c.size(), nullptr, 0, &count), SZ_OK);
  EXPECT_NE(sz_container_index_items(c.data() + at, size - 1, c.size(), nullptr, 0, &count), SZ_OK);
  EXPECT_NE(sz_container_index_items(c.data() + at - 1, size + 1, c.size(), nullptr, 0, &count), SZ_OK);
  EXPECT_NE(sz_container_index_items(c.data() + at, size, c.size() + 1, nullptr, 0, &count), SZ_OK)
      << "the index of a file one byte longer";
  // Every bit of index and footer flipped.
  std::vector<uint8_t> index(c.begin() + at, c.end());
  size_t accepted = 0;
  for (size_t byte = 0; byte < index.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      index[byte] ^= (uint8_t)(1u << bit);
      std::vector<sz_item> items(3);
      uint64_t io = 0, is = 0;
      const sz_status sl = sz_container_locate_index(&index[index.size() - 32], 32, c.size(), &io, &is);
      const sz_status si = sz_container_index_items(index.data(), index.size(), c.size(), items.data(), 3, &count);
      if (si == SZ_OK && ++accepted < 10) ADD_FAILURE() << "flip of bit " << bit << " of index byte " << byte;
      if (byte >= index.size() - 32 && sl == SZ_OK && (io != at || is != size) && ++accepted < 10)
        ADD_FAILURE() << "flip of bit " << bit << " of footer byte " << byte << " moved the index";
      index[byte] ^= (uint8_t)(1u << bit);
    }
  }
}

TEST(ContainerIndexOnly, ItemsPastTheIndexOrTheFileAreRejected) {
  // Item data must end before the index, so within the file: entries pointing past it are corrupt (footers that
  // place the index past the file's end: FooterFieldsOutOfRangeAreCorrupt, through open()).
  const struct {
    const char* what;
    void (*edit)(std::vector<spec::Item>&);
  } cases[] = {
      {"data_size into the index", [](std::vector<spec::Item>& it) { it[2].data_size += 64; }},
      {"data_offset past the file", [](std::vector<spec::Item>& it) { it[1].data_offset = uint64_t(1) << 40; }},
      {"data_offset + data_size wraps", [](std::vector<spec::Item>& it) { it[1].data_size = ~uint64_t(0) - 63; }},
  };
  for (const auto& k : cases) {
    Fixture fx = fixture();
    const std::vector<uint8_t> good = spec::container(fx.items);
    const uint64_t io = spec::get_le(&good[good.size() - 32], 8);
    k.edit(fx.items);
    // The same items' bytes, then the edited index and its footer.
    std::vector<uint8_t> c(good.begin(), good.begin() + io);
    const std::vector<uint8_t> ix = spec::index_bytes(fx.items);
    c.insert(c.end(), ix.begin(), ix.end());
    c.resize(c.size() + 32, 0);
    uint8_t* f = &c[c.size() - 32];
    spec::put_le(f, io, 8);
    spec::put_le(f + 8, ix.size(), 8);
    spec::put_le(f + 16, fx.items.size(), 4);
    spec::put_le(f + 28, 0x435A5053u, 4);
    spec::reseal_container(c);
    std::vector<uint8_t> index;
    uint64_t at = 0;
    std::vector<sz_item> items;
    EXPECT_EQ(container_items_from_index(c, &index, &at, &items), SZ_ERROR_CORRUPT) << k.what;
    EXPECT_EQ(open(c), SZ_ERROR_CORRUPT) << k.what;
  }
}
