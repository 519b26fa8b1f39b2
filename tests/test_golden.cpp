// Golden files (tests/golden, written once by tests/tools/make_golden.cpp from docs/FORMAT.md and committed):
// every file under valid/ must decode to its expected bytes with both decoders (canonical frames must also be what
// the encoders write today), and every file under invalid/ must be rejected with exactly the status of its manifest.
// A change of the format or of an error shows up here as a failure against committed bytes.
#include <fstream>
#include <set>
#include <sstream>

#include "test_util.h"

using namespace sztest;

namespace {

struct Entry {
  std::string kind, file, third, line;
};

std::vector<Entry> manifest(const std::string& dir) {
  std::vector<Entry> out;
  std::ifstream in(repo_path("tests/golden/" + dir + "/MANIFEST.txt"));
  std::string line;
  while (std::getline(in, line)) {
    const std::string body = line.substr(0, line.find('#'));
    std::istringstream ss(body);
    Entry e;
    if (!(ss >> e.kind >> e.file >> e.third)) continue;
    e.line = line;
    out.push_back(e);
  }
  return out;
}

std::vector<uint8_t> golden(const std::string& dir, const std::string& file) {
  std::vector<uint8_t> b;
  EXPECT_TRUE(read_file(repo_path("tests/golden/" + dir + "/" + file), &b)) << "cannot read " << dir << "/" << file;
  return b;
}

sz_status status_from_name(const std::string& name) {
  for (int i = 0; i <= 16; ++i)
    if (name == sz_status_name((sz_status)i)) return (sz_status)i;
  ADD_FAILURE() << "unknown status name in manifest: " << name;
  return SZ_ERROR_INTERNAL;
}

}  // namespace

TEST(Golden, ManifestsListFilesOfEveryKind) {
  const std::vector<Entry> v = manifest("valid"), iv = manifest("invalid");
  ASSERT_GE(v.size(), 8u) << "tests/golden/valid/MANIFEST.txt missing or short";
  ASSERT_GE(iv.size(), 40u) << "tests/golden/invalid/MANIFEST.txt missing or short";
  size_t frames = 0, containers = 0, codebooks = 0;
  for (const Entry& e : iv) {
    frames += e.kind == "frame";
    containers += e.kind == "container";
    codebooks += e.kind == "codebook";
  }
  EXPECT_GT(frames, 30u);
  EXPECT_GT(containers, 5u);
  EXPECT_GT(codebooks, 5u);
}

TEST(Golden, ValidFramesDecodeToTheirExpectedBytes) {
  size_t checked = 0;
  for (const Entry& e : manifest("valid")) {
    if (e.kind != "frame" && e.kind != "frame-noncanonical") continue;
    const std::vector<uint8_t> f = golden("valid", e.file), raw = golden("valid", e.third);
    for (bool ref : {true, false}) {
      for (unsigned threads : {1u, 3u}) {
        if (ref && threads != 1) continue;
        std::vector<uint8_t> out;
        ASSERT_EQ(decompress_vec(ref, f, raw.size(), &out, threads), SZ_OK)
            << e.file << (ref ? " (reference)" : " (fast)");
        EXPECT_TRUE(out == raw) << e.file << (ref ? " (reference)" : " (fast)") << " decodes to different bytes";
      }
    }
    sz_frame_info info;
    ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK) << e.file;
    EXPECT_EQ(info.frame_size, f.size()) << e.file;
    EXPECT_EQ(info.decompressed_size, raw.size()) << e.file;
    if (e.kind == "frame") {
      // Canonical: today's encoders write exactly these bytes from the decoded data and the frame's parameters.
      const sz_params p = make_params(info.chunk_log2, info.flags, 2);
      const std::vector<uint8_t> again = check_roundtrip(raw, (sz_dtype)info.dtype, &info.codebook, p, e.file);
      EXPECT_TRUE(again == f) << e.file << ": the encoders no longer write the committed frame";
    }
    ++checked;
  }
  EXPECT_GE(checked, 8u);
}

TEST(Golden, InvalidFramesGiveExactlyTheManifestStatus) {
  size_t checked = 0;
  for (const Entry& e : manifest("invalid")) {
    if (e.kind != "frame") continue;
    const std::vector<uint8_t> f = golden("invalid", e.file);
    const sz_status expect = status_from_name(e.third);
    for (bool ref : {true, false}) {
      std::vector<uint8_t> out;
      EXPECT_EQ(decompress_vec(ref, f, 1 << 20, &out), expect)
          << e.file << " (" << (ref ? "reference" : "fast") << " decoder): " << e.line;
    }
    // sz_frame_info_get checks the header and the index structure only: it either accepts the frame or reports
    // the same error; for breaks of the header or of the index it must report them.
    sz_frame_info info;
    const sz_status is = sz_frame_info_get(f.data(), f.size(), &info);
    EXPECT_TRUE(is == SZ_OK || is == expect) << e.file << ": sz_frame_info_get gave " << status_str(is);
    static const std::set<std::string> must_see = {
        // header (§4.1 steps 1-6)
        "truncated_header.spz", "bad_magic.spz", "container_magic.spz", "version_4.spz", "version_3_with_code_bits.spz",
        "version_2_no_channels.spz",
        "version_0_bad_checksum.spz",
        "header_checksum.spz", "n_values_changed_unsealed.spz", "dtype_0.spz", "dtype_6.spz", "code_bits_0.spz",
        "code_bits_5.spz", "e4m3_code_bits_4.spz", "chunk_log2_7.spz", "chunk_log2_17.spz", "unknown_flag.spz",
        "codebook_count_0.spz", "codebook_count_5.spz", "reserved_13.spz", "reserved_55.spz", "n_values_2_48.spz",
        "codebook_duplicate.spz", "codebook_unused_entry.spz", "fp16_codebook_entry_32.spz",
        // chunk index and record sizes (§4.3)
        "index_mode_2.spz", "index_mode_3.spz", "index_last_end_short.spz", "index_decreasing.spz",
        "raw_record_wrong_size.spz", "coded_record_not_3x.spz", "empty_with_exponent_bytes.spz"};
    const bool structural = must_see.count(e.file) != 0;
    if (structural) {
      EXPECT_EQ(is, expect) << e.file << ": sz_frame_info_get must see this";
    }
    ++checked;
  }
  EXPECT_GT(checked, 30u);
}

TEST(Golden, CodebookFiles) {
  for (const Entry& e : manifest("valid")) {
    if (e.kind != "codebook") continue;
    const std::vector<uint8_t> b = golden("valid", e.file);
    sz_codebook cb;
    ASSERT_EQ(sz_codebook_deserialize(b.data(), b.size(), &cb), SZ_OK) << e.file;
    uint8_t again[32];
    ASSERT_EQ(sz_codebook_serialize(&cb, again, 32), SZ_OK);
    EXPECT_EQ(memcmp(again, b.data(), 32), 0) << e.file;
    ASSERT_EQ(sz_codebook_load(repo_path("tests/golden/valid/" + e.file).c_str(), &cb), SZ_OK) << e.file;
  }
  for (const Entry& e : manifest("invalid")) {
    if (e.kind != "codebook") continue;
    const std::vector<uint8_t> b = golden("invalid", e.file);
    sz_codebook cb;
    EXPECT_EQ(sz_codebook_deserialize(b.data(), b.size(), &cb), status_from_name(e.third)) << e.line;
    EXPECT_EQ(sz_codebook_load(repo_path("tests/golden/invalid/" + e.file).c_str(), &cb), status_from_name(e.third))
        << "load: " << e.line;
  }
}

TEST(Golden, Containers) {
  for (const Entry& e : manifest("valid")) {
    if (e.kind != "container") continue;
    const std::vector<uint8_t> c = golden("valid", e.file), original = golden("valid", e.third);
    uint32_t count = 0;
    ASSERT_EQ(sz_container_open(c.data(), c.size(), &count), SZ_OK) << e.file;
    std::vector<uint8_t> restored(original.size(), 0xEE);
    uint64_t covered = 0;
    for (uint32_t i = 0; i < count; ++i) {
      sz_item it;
      ASSERT_EQ(sz_container_item(c.data(), c.size(), i, &it), SZ_OK);
      ASSERT_LE(it.original_offset + it.original_size, restored.size());
      covered += it.original_size;
      if (it.kind == SZ_ITEM_STORED) {
        memcpy(&restored[it.original_offset], &c[it.data_offset], it.original_size);
      } else {
        size_t got = 0;
        ASSERT_EQ(sz_decompress_reference(&c[it.data_offset], it.data_size, &restored[it.original_offset],
                                          it.original_size, &got),
                  SZ_OK);
      }
    }
    EXPECT_EQ(covered, original.size());
    EXPECT_TRUE(restored == original) << e.file;
  }
  for (const Entry& e : manifest("invalid")) {
    if (e.kind != "container") continue;
    const std::vector<uint8_t> c = golden("invalid", e.file);
    uint32_t count;
    EXPECT_EQ(sz_container_open(c.data(), c.size(), &count), status_from_name(e.third)) << e.line;
  }
}
