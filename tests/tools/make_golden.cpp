// make_golden — writes the golden files of tests/golden from docs/FORMAT.md, independently of the library's
// encoder: frames come from the naive spec encoder of tests/spec_format.h or are assembled byte by byte here, and
// invalid ones are valid frames with one field broken on purpose (and the header checksum recomputed where the
// break must be reached past it). The library is only used to cross-check: every valid frame must decode with both
// decoders, canonical ones must equal the library's own encoding, and every invalid one must give the status the
// manifest records; disagreements are printed and make the exit status 1 (the files are written anyway, because they
// follow the spec, not the library).
//
// Run once and commit the output:  cmake --build build-tests --target splitzip_make_golden &&
//                                  build-tests/tests/splitzip_make_golden tests/golden
#include <stdio.h>
#include <sys/stat.h>

#include <functional>

#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

namespace {

std::string g_root;
FILE* g_valid_manifest = nullptr;
FILE* g_invalid_manifest = nullptr;
int g_disagreements = 0;

void write_or_die(const std::string& path, const std::vector<uint8_t>& bytes) {
  if (!write_file(path, bytes.data(), bytes.size())) {
    fprintf(stderr, "make_golden: cannot write %s\n", path.c_str());
    exit(2);
  }
}

void disagree(const std::string& what) {
  fprintf(stderr, "make_golden: library disagrees: %s\n", what.c_str());
  ++g_disagreements;
}

// A valid frame: writes NAME.spz and NAME.raw, cross-checks with the library.
void valid_frame(const std::string& name, const std::vector<uint8_t>& frame, const std::vector<uint8_t>& raw,
                 bool canonical, const std::string& description) {
  write_or_die(g_root + "/valid/" + name + ".spz", frame);
  write_or_die(g_root + "/valid/" + name + ".raw", raw);
  fprintf(g_valid_manifest, "%s %s.spz %s.raw  # %s\n", canonical ? "frame" : "frame-noncanonical", name.c_str(),
          name.c_str(), description.c_str());
  for (bool ref : {true, false}) {
    std::vector<uint8_t> out;
    const sz_status st = decompress_vec(ref, frame, raw.size(), &out);
    if (st != SZ_OK || out != raw)
      disagree(name + ": " + (ref ? "reference" : "fast") + " decoder gives " + status_str(st));
  }
  if (canonical) {
    sz_frame_info info;
    if (sz_frame_info_get(frame.data(), frame.size(), &info) != SZ_OK) {
      disagree(name + ": frame info");
      return;
    }
    const sz_params p = make_params(info.chunk_log2, info.flags);
    std::vector<uint8_t> lib;
    const sz_status st = compress_vec(true, raw.empty() ? (const void*)"" : (const void*)raw.data(), info.n_values, (sz_dtype)info.dtype, &info.codebook, &p, &lib);
    if (st != SZ_OK || lib != frame) disagree(name + ": sz_compress_reference writes different bytes");
  }
}

void invalid(const std::string& kind, const std::string& name, const std::vector<uint8_t>& bytes, sz_status expect,
             const std::string& description) {
  const std::string ext = kind == "frame" ? ".spz" : (kind == "container" ? ".spzc" : ".spzb");
  write_or_die(g_root + "/invalid/" + name + ext, bytes);
  fprintf(g_invalid_manifest, "%s %s%s %s  # %s\n", kind.c_str(), name.c_str(), ext.c_str(), status_str(expect).c_str(),
          description.c_str());
  std::vector<sz_status> got;
  if (kind == "frame") {
    for (bool ref : {true, false}) {
      std::vector<uint8_t> out;
      got.push_back(decompress_vec(ref, bytes, 1 << 20, &out));
    }
  } else if (kind == "container") {
    uint32_t count;
    got.push_back(sz_container_open(bytes.data(), bytes.size(), &count));
  } else {
    sz_codebook cb;
    got.push_back(sz_codebook_deserialize(bytes.data(), bytes.size(), &cb));
  }
  for (sz_status s : got)
    if (s != expect) disagree(name + ": expected " + status_str(expect) + ", library gives " + status_str(s));
}

// ---- inputs --------------------------------------------------------------------------------------------------

const uint16_t kHandValues[6] = {0x3F80, 0xBF80, 0x4000, 0x0000, 0x7F80, 0x3F81};

// The tiny BF16 frame of tests/test_spec_oracle.cpp, assembled byte by byte.
std::vector<uint8_t> hand_frame() {
  std::vector<uint8_t> f = {0x53, 0x50, 0x5A, 0x46, 0x01, 0x01, 0x02, 0x08, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
                            0x00, 0x06, 0, 0, 0, 0, 0, 0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0x80};
  f.resize(64, 0);
  spec::put_le(f.data() + 60, (uint32_t)XXH3_64bits(f.data(), 60), 4);
  const uint8_t index[8] = {0x08, 0, 0, 0, 0, 0, 0, 0};
  f.insert(f.end(), index, index + 8);
  uint8_t raw[12];
  for (int i = 0; i < 6; ++i) raw[2 * i] = (uint8_t)kHandValues[i], raw[2 * i + 1] = (uint8_t)(kHandValues[i] >> 8);
  const uint32_t h = (uint32_t)XXH3_64bits(raw, 12);
  for (int i = 0; i < 4; ++i) f.push_back((uint8_t)(h >> (8 * i)));
  const uint8_t tail[16] = {0x00, 0x80, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,   // rest
                            0x10, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0xFF};  // codes, positions, exponents
  f.insert(f.end(), tail, tail + 16);
  return f;
}

std::vector<uint8_t> hand_raw() {
  std::vector<uint8_t> raw(12);
  for (int i = 0; i < 6; ++i) store_value(&raw[2 * i], 16, kHandValues[i]);
  return raw;
}

// BF16, 3 chunks of 256/256/85: chunk 0 coded with escapes, chunk 1 raw (all escapes), chunk 2 coded.
std::vector<uint8_t> bf16_mixed_input() {
  const DtypeFacts f = dtype_facts(SZ_DTYPE_BF16);
  std::vector<uint8_t> src(2 * 597);
  Rng rng(17);
  for (int i = 0; i < 597; ++i) {
    uint32_t e = 118 + (uint32_t)rng.below(4);
    if (i >= 256 && i < 512) e = 3 + (uint32_t)rng.below(50);
    if (i == 5 || i == 77 || i == 255 || i == 520 || i == 596) e = 200;
    store_value(&src[2 * i], 16, make_value((uint32_t)rng.below(2), e, (uint32_t)rng.next(), f));
  }
  return src;
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& src, sz_dtype d, const sz_codebook& cb, unsigned cl,
                            uint32_t flags, std::vector<int> force = {}) {
  spec::Options o;
  o.chunk_log2 = cl;
  o.flags = flags;
  o.force_mode = std::move(force);
  return spec::encode(src.data(), src.size() / value_bytes(d), d, cb, o);
}

// Applies `edit` to a copy of `f`; reseal recomputes the header checksum afterwards.
std::vector<uint8_t> edited(std::vector<uint8_t> f, const std::function<void(std::vector<uint8_t>&)>& edit,
                            bool reseal = true) {
  edit(f);
  if (reseal) spec::reseal_header(f);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTPUT_DIR (normally tests/golden)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  mkdir(g_root.c_str(), 0755);
  mkdir((g_root + "/valid").c_str(), 0755);
  mkdir((g_root + "/invalid").c_str(), 0755);
  g_valid_manifest = fopen((g_root + "/valid/MANIFEST.txt").c_str(), "w");
  g_invalid_manifest = fopen((g_root + "/invalid/MANIFEST.txt").c_str(), "w");
  if (!g_valid_manifest || !g_invalid_manifest) {
    fprintf(stderr, "make_golden: cannot write the manifests under %s\n", g_root.c_str());
    return 2;
  }
  fprintf(g_valid_manifest,
          "# Golden files that every decoder must accept. Columns: kind file expected-output  # description\n"
          "# kind frame: canonical (re-encoding the output gives the same bytes); frame-noncanonical: valid but not\n"
          "# what the canonical encoder writes; codebook: expected is the 32-byte file itself; container: expected is\n"
          "# the original file the items restore. Generated by tests/tools/make_golden.cpp; do not edit by hand.\n");
  fprintf(g_invalid_manifest,
          "# Golden files that must be rejected with exactly the status given. Columns: kind file status  # why\n"
          "# Generated by tests/tools/make_golden.cpp; do not edit by hand.\n");

  // ---- valid frames ------------------------------------------------------------------------------------------
  valid_frame("bf16_hand_tie", hand_frame(), hand_raw(), true,
              "6 BF16 values assembled byte by byte: 2 escapes (exponents 0 and 255), coded record size equals the "
              "raw size (tie: coded)");
  const std::vector<uint8_t> mixed = bf16_mixed_input();
  const sz_codebook cb_bf16 = centered_codebook(SZ_DTYPE_BF16, 2, 4, 120);
  valid_frame("bf16_coded_raw_coded", encode(mixed, SZ_DTYPE_BF16, cb_bf16, 8, SZ_FLAG_CHECKSUMS), mixed, true,
              "597 BF16 values, chunks of 256: coded with escapes, raw, coded partial; checksums");
  valid_frame("bf16_noncanonical_raw_chunk", encode(mixed, SZ_DTYPE_BF16, cb_bf16, 8, SZ_FLAG_CHECKSUMS, {1, -1, 1}),
              mixed, false, "as bf16_coded_raw_coded but chunks 0 and 2 stored raw although coded is smaller");
  {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 5000, 31, 14, 0.5, 0.01);
    valid_frame("fp16_k4_chunk10_nochecksum", encode(src, SZ_DTYPE_FP16, centered_codebook(SZ_DTYPE_FP16, 4, 16, 14), 10, 0),
                src, true, "5000 FP16 values, k=4, 1024-value chunks, no checksums");
  }
  {
    const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu,
                                 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFF800001u, 0x7FFFFFFFu, 0x7FA5A5A5u,
                                 0x3F800000u, 0xBF800000u, 0x40490FDBu, 0xC2F6E979u, 0x3EAAAAABu};
    std::vector<uint8_t> src(sizeof specials);
    for (size_t i = 0; i < sizeof specials / 4; ++i) store_value(&src[4 * i], 32, specials[i]);
    sz_codebook cb = centered_codebook(SZ_DTYPE_FP32, 3, 6, 127);
    cb.values[4] = 0;
    cb.values[5] = 255;
    valid_frame("fp32_specials_k3", encode(src, SZ_DTYPE_FP32, cb, 8, SZ_FLAG_CHECKSUMS), src, true,
                "17 FP32 values: +-0, subnormals, +-Inf, NaN payloads; codebook of 6 entries holds 0 and 255");
    std::vector<uint8_t> one(src.begin() + 4 * 8, src.begin() + 4 * 9);
    valid_frame("fp32_one_nan", encode(one, SZ_DTYPE_FP32, centered_codebook(SZ_DTYPE_FP32, 1, 1, 127), 8,
                                       SZ_FLAG_CHECKSUMS),
                one, true, "one FP32 quiet NaN, an escape in a 1-entry codebook (raw chunk)");
  }
  {
    std::vector<uint8_t> src(256 * 3);
    for (size_t i = 0; i < src.size(); ++i) src[i] = (uint8_t)(i * 151 + 7);
    valid_frame("e4m3_all_patterns_k3", encode(src, SZ_DTYPE_FP8_E4M3, centered_codebook(SZ_DTYPE_FP8_E4M3, 3, 8, 7),
                                                8, SZ_FLAG_CHECKSUMS),
                src, true, "every FP8 E4M3 byte 3 times, k=3");
  }
  {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP8_E5M2, 70001, 8, 15, 0.4, 0.001);
    valid_frame("e5m2_k1_chunk16", encode(src, SZ_DTYPE_FP8_E5M2, centered_codebook(SZ_DTYPE_FP8_E5M2, 1, 2, 15), 16,
                                          SZ_FLAG_CHECKSUMS),
                src, true, "70001 FP8 E5M2 values, k=1, 65536-value chunks (escape positions up to 65535)");
  }
  valid_frame("bf16_empty", encode({}, SZ_DTYPE_BF16, centered_codebook(SZ_DTYPE_BF16, 4, 16, 120), 12,
                                   SZ_FLAG_CHECKSUMS),
              {}, true, "zero values: header only");

  // ---- invalid frames ------------------------------------------------------------------------------------------
  // Bases without checksums, so a structural break is reported as CORRUPT and not as a checksum mismatch.
  const std::vector<uint8_t> base = encode(mixed, SZ_DTYPE_BF16, cb_bf16, 8, 0);
  const std::vector<uint8_t> base_ck = encode(mixed, SZ_DTYPE_BF16, cb_bf16, 8, SZ_FLAG_CHECKSUMS);
  const spec::Layout L = spec::layout_of(base.data());
  const spec::Layout Lc = spec::layout_of(base_ck.data());
  const uint64_t r0 = L.exponents;                              // chunk 0's record (coded): codes at +0..63
  const uint64_t r0_pos = r0 + 64;                              // its escape positions (u16 each)
  const uint64_t X0 = (spec::record_end(base.data(), L, 0) - 64) / 3;  // its escape count
  const uint64_t r0_exp = r0_pos + 2 * X0;
  const uint64_t r2 = L.exponents + spec::record_begin(base.data(), L, 2);  // chunk 2 (coded, 85 values)
  auto F = [&](const char* n, std::vector<uint8_t> b, sz_status s, const char* why) { invalid("frame", n, b, s, why); };

  F("truncated_header", std::vector<uint8_t>(base.begin(), base.begin() + 40), SZ_ERROR_SRC_TRUNCATED,
    "40 bytes: shorter than the header");
  F("truncated_last_byte", std::vector<uint8_t>(base.begin(), base.end() - 1), SZ_ERROR_SRC_TRUNCATED,
    "one byte short of the exponent section's end");
  F("truncated_in_rest", std::vector<uint8_t>(base_ck.begin(), base_ck.begin() + (long)Lc.rest + 10),
    SZ_ERROR_SRC_TRUNCATED, "cut inside the rest section");
  F("bad_magic", edited(base, [](std::vector<uint8_t>& f) { f[0] = 0x54; }), SZ_ERROR_BAD_MAGIC, "magic SPZF -> TPZF");
  F("container_magic", edited(base, [](std::vector<uint8_t>& f) { f[3] = 0x43; }), SZ_ERROR_BAD_MAGIC,
    "a container's magic where a frame's is expected");
  F("version_4", edited(base, [](std::vector<uint8_t>& f) { f[4] = 4; }), SZ_ERROR_UNSUPPORTED_VERSION,
    "version 4 with a valid header checksum");
  F("version_3_with_code_bits", edited(base, [](std::vector<uint8_t>& f) { f[4] = 3; }), SZ_ERROR_CORRUPT,
    "version 3 (entropy-coded) with the code width and codebook of a version 1 header");
  F("version_2_no_channels", edited(base, [](std::vector<uint8_t>& f) { f[4] = 2; }), SZ_ERROR_CORRUPT,
    "version 2 (channel windows) without the CHANNELS flag");
  F("version_0_bad_checksum", edited(base, [](std::vector<uint8_t>& f) { f[4] = 0; }, false),
    SZ_ERROR_UNSUPPORTED_VERSION, "version 0; the version is checked before the header checksum");
  F("header_checksum", edited(base, [](std::vector<uint8_t>& f) { f[62] ^= 0x10; }, false), SZ_ERROR_CHECKSUM,
    "header checksum off by one bit");
  F("n_values_changed_unsealed", edited(base, [](std::vector<uint8_t>& f) { f[16] ^= 1; }, false), SZ_ERROR_CHECKSUM,
    "n_values changed without recomputing the header checksum");
  F("dtype_0", edited(base, [](std::vector<uint8_t>& f) { f[5] = 0; }), SZ_ERROR_UNSUPPORTED_DTYPE, "dtype id 0");
  F("dtype_6", edited(base, [](std::vector<uint8_t>& f) { f[5] = 6; }), SZ_ERROR_UNSUPPORTED_DTYPE, "dtype id 6");
  F("code_bits_0", edited(base, [](std::vector<uint8_t>& f) { f[6] = 0; }), SZ_ERROR_CORRUPT, "k = 0");
  F("code_bits_5", edited(base, [](std::vector<uint8_t>& f) { f[6] = 5; }), SZ_ERROR_CORRUPT, "k = 5");
  {
    std::vector<uint8_t> src(64, 0x38);
    const std::vector<uint8_t> e4 = encode(src, SZ_DTYPE_FP8_E4M3, centered_codebook(SZ_DTYPE_FP8_E4M3, 3, 8, 7), 8, 0);
    F("e4m3_code_bits_4", edited(e4, [](std::vector<uint8_t>& f) { f[6] = 4; }), SZ_ERROR_CORRUPT,
      "FP8 E4M3 with k = 4 = E (k must be < E)");
  }
  F("chunk_log2_7", edited(base, [](std::vector<uint8_t>& f) { f[7] = 7; }), SZ_ERROR_CORRUPT, "chunk_log2 7");
  F("chunk_log2_17", edited(base, [](std::vector<uint8_t>& f) { f[7] = 17; }), SZ_ERROR_CORRUPT, "chunk_log2 17");
  F("unknown_flag", edited(base, [](std::vector<uint8_t>& f) { f[8] |= 4; }), SZ_ERROR_CORRUPT, "flag bit 2 set");
  F("codebook_count_0", edited(base, [](std::vector<uint8_t>& f) { f[12] = 0; }), SZ_ERROR_CORRUPT, "count 0");
  F("codebook_count_5", edited(base, [](std::vector<uint8_t>& f) { f[12] = 5, f[36] = 1; }), SZ_ERROR_CORRUPT,
    "count 5 > 2^k = 4");
  F("reserved_13", edited(base, [](std::vector<uint8_t>& f) { f[13] = 1; }), SZ_ERROR_CORRUPT, "reserved byte 13");
  F("reserved_55", edited(base, [](std::vector<uint8_t>& f) { f[55] = 0x40; }), SZ_ERROR_CORRUPT, "reserved byte 55");
  F("n_values_2_48", edited(base, [](std::vector<uint8_t>& f) { spec::put_le(f.data() + 16, 1ull << 48, 8); }),
    SZ_ERROR_CORRUPT, "n_values = 2^48");
  F("codebook_duplicate", edited(base, [](std::vector<uint8_t>& f) { f[33] = f[32]; }), SZ_ERROR_CORRUPT,
    "codebook entries 0 and 1 equal");
  F("codebook_unused_entry", edited(base, [](std::vector<uint8_t>& f) { f[47] = 9; }), SZ_ERROR_CORRUPT,
    "codebook entry 15 not zero although count = 4");
  {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 40, 3, 14);
    const std::vector<uint8_t> f16 = encode(src, SZ_DTYPE_FP16, centered_codebook(SZ_DTYPE_FP16, 2, 3, 14), 8, 0);
    F("fp16_codebook_entry_32", edited(f16, [](std::vector<uint8_t>& f) { f[34] = 32; }), SZ_ERROR_CORRUPT,
      "FP16 codebook entry 32 >= 2^5");
  }
  F("index_mode_2", edited(base, [&](std::vector<uint8_t>& f) { f[L.index + 7] |= 0x80; }, false), SZ_ERROR_CORRUPT,
    "chunk 0 mode 2 (reserved)");
  F("index_mode_3", edited(base, [&](std::vector<uint8_t>& f) { f[L.index + 8 * 2 + 7] |= 0xC0; }, false),
    SZ_ERROR_CORRUPT, "chunk 2 mode 3 (reserved)");
  F("index_raw_chunk_as_coded", edited(base, [&](std::vector<uint8_t>& f) { f[L.index + 8 + 7] &= 0x3F; }, false),
    SZ_ERROR_CORRUPT, "chunk 1 (raw, 256 bytes) marked coded: 256 - 64 = 192 is a multiple of 3, but its escape "
                      "positions are not valid");
  F("index_last_end_short", edited(base, [&](std::vector<uint8_t>& f) { f[L.index + 16] -= 3; }, false),
    SZ_ERROR_CORRUPT, "end of the last chunk != exponent_section_size");
  F("index_decreasing", edited(base, [&](std::vector<uint8_t>& f) {
      const uint64_t e0 = spec::record_end(f.data(), L, 0), e1 = spec::record_end(f.data(), L, 1);
      spec::put_le(f.data() + L.index, e1 + 3, 8);  // end_0 > end_1
      (void)e0;
    }, false), SZ_ERROR_CORRUPT, "end_0 > end_1");
  F("raw_record_wrong_size", edited(base, [&](std::vector<uint8_t>& f) {
      // Move 3 bytes from chunk 1 (raw) to chunk 0: chunk 0 gets one more (bogus) escape, chunk 1 is 253 bytes.
      spec::put_le(f.data() + L.index, spec::record_end(f.data(), L, 0) + 3, 8);
    }, false), SZ_ERROR_CORRUPT, "raw chunk record of 253 bytes instead of 256");
  F("coded_record_not_3x", edited(base, [&](std::vector<uint8_t>& f) {
      const uint64_t e1 = spec::record_end(f.data(), L, 1);
      spec::put_le(f.data() + L.index + 8, (e1 + 1) | (1ull << 62), 8);  // chunk 2 loses one byte
    }, false), SZ_ERROR_CORRUPT, "coded record size - G not a multiple of 3 (and raw chunk one byte long)");
  F("code_out_of_range", edited(base, [&](std::vector<uint8_t>& f) {
      // Codebook of 3 entries: a value coded 0..2 stays, but some value's code is 3.
      f[12] = 3;
      f[35] = 0;
    }), SZ_ERROR_CORRUPT, "codebook count lowered to 3 while codes 3 are present");
  F("escape_code_not_zero", edited(base, [&](std::vector<uint8_t>& f) {
      const uint16_t p = (uint16_t)spec::get_le(f.data() + r0_pos, 2);
      spec::put_field(f.data() + r0, p, 2, 1);  // OR-in a 1 (the escape's code was 0)
    }, false), SZ_ERROR_CORRUPT, "an escaped value's code is 1");
  F("escape_positions_not_increasing", edited(base, [&](std::vector<uint8_t>& f) {
      const uint64_t a = spec::get_le(f.data() + r0_pos, 2), b = spec::get_le(f.data() + r0_pos + 2, 2);
      spec::put_le(f.data() + r0_pos, b, 2);
      spec::put_le(f.data() + r0_pos + 2, a, 2);
    }, false), SZ_ERROR_CORRUPT, "first two escape positions swapped");
  F("escape_position_duplicate", edited(base, [&](std::vector<uint8_t>& f) {
      spec::put_le(f.data() + r0_pos + 2, spec::get_le(f.data() + r0_pos, 2), 2);
    }, false), SZ_ERROR_CORRUPT, "first two escape positions equal");
  F("escape_position_past_chunk", edited(base, [&](std::vector<uint8_t>& f) {
      spec::put_le(f.data() + r0_pos + 2 * (X0 - 1), 256, 2);
    }, false), SZ_ERROR_CORRUPT, "last escape position 256 in a chunk of 256 values");
  {
    // Chunk 2 has 85 values: a position 85..255 is past its end although below S.
    const uint64_t X2 = (spec::record_end(base.data(), L, 2) - spec::record_begin(base.data(), L, 2) - 22) / 3;
    F("escape_position_past_short_chunk", edited(base, [&](std::vector<uint8_t>& f) {
        spec::put_le(f.data() + r2 + 22 + 2 * (X2 - 1), 85, 2);
      }, false), SZ_ERROR_CORRUPT, "escape position 85 in the last chunk of 85 values");
  }
  F("escape_exponent_in_codebook", edited(base, [&](std::vector<uint8_t>& f) { f[r0_exp] = f[32]; }, false),
    SZ_ERROR_CORRUPT, "an escape exponent equal to codebook entry 0");
  {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 40, 3, 14, 0.3, 0.1);
    const std::vector<uint8_t> f16 = encode(src, SZ_DTYPE_FP16, centered_codebook(SZ_DTYPE_FP16, 2, 4, 14), 8, 0);
    const spec::Layout L16 = spec::layout_of(f16.data());
    const uint64_t end0 = spec::record_end(f16.data(), L16, 0);
    const uint64_t X = (end0 - 10) / 3;
    if (X > 0 && (f16[L16.index + 7] >> 6) == 0) {
      F("fp16_escape_exponent_32", edited(f16, [&](std::vector<uint8_t>& f) { f[L16.exponents + 10 + 2 * X] = 32; },
                                          false),
        SZ_ERROR_CORRUPT, "FP16 escape exponent 32 >= 2^5");
    } else {
      fprintf(stderr, "make_golden: fp16 escape case has no escapes (X=%llu)\n", (unsigned long long)X);
      return 2;
    }
  }
  F("rest_padding_not_zero", edited(base, [&](std::vector<uint8_t>& f) { f[L.exponents - 1] |= 0x01; }, false),
    SZ_ERROR_CORRUPT, "597 values: the rest byte of padding value 599 is not zero");
  F("code_padding_not_zero", edited(base, [&](std::vector<uint8_t>& f) { f[r2 + 21] |= 0x40; }, false),
    SZ_ERROR_CORRUPT, "last chunk (85 values, k=2): padding code of value 87 is not zero");
  F("raw_padding_not_zero", edited(encode(mixed, SZ_DTYPE_BF16, cb_bf16, 8, 0, {-1, -1, 1}),
                                   [&](std::vector<uint8_t>& f) { f[f.size() - 1] |= 1; }, false),
    SZ_ERROR_CORRUPT, "last chunk stored raw (85 exponents, 11 groups): padding exponent not zero");
  F("empty_with_exponent_bytes", edited(encode({}, SZ_DTYPE_BF16, cb_bf16, 8, 0), [](std::vector<uint8_t>& f) {
      spec::put_le(f.data() + 24, 3, 8);
      spec::reseal_header(f);
      f.insert(f.end(), {1, 2, 3});
    }, false), SZ_ERROR_CORRUPT, "n = 0 (no chunks) but exponent_section_size = 3");
  F("chunk_checksum_mismatch", edited(base_ck, [&](std::vector<uint8_t>& f) { f[Lc.rest + 300] ^= 0x20; }, false),
    SZ_ERROR_CHECKSUM, "a rest byte of chunk 1 flipped (sign bit of value 300)");
  F("chunk_checksum_entry", edited(base_ck, [&](std::vector<uint8_t>& f) { f[Lc.checksums + 9] ^= 1; }, false),
    SZ_ERROR_CHECKSUM, "chunk 2's checksum entry flipped");
  F("escape_exponent_changed_checksummed", edited(base_ck, [&](std::vector<uint8_t>& f) {
      const uint64_t pos = Lc.exponents + 64 + 2 * X0;
      f[pos] = (uint8_t)(f[pos] == 201 ? 202 : 201);
    }, false), SZ_ERROR_CHECKSUM, "escape exponent replaced by another out-of-codebook exponent");

  // ---- codebook files ----------------------------------------------------------------------------------------
  {
    uint8_t buf[32];
    const sz_codebook cb = centered_codebook(SZ_DTYPE_BF16, 4, 13, 120);
    std::vector<uint8_t> good(32, 0);
    spec::put_le(good.data(), 0x425A5053u, 4);
    good[4] = 1;
    good[5] = SZ_DTYPE_BF16;
    good[6] = 4;
    good[7] = 13;
    memcpy(&good[8], cb.values, 16);
    spec::put_le(good.data() + 28, spec::h32(good.data(), 28), 4);
    write_or_die(g_root + "/valid/bf16_k4_13.spzb", good);
    fprintf(g_valid_manifest, "codebook bf16_k4_13.spzb -  # BF16 codebook k=4 with 13 entries\n");
    if (sz_codebook_serialize(&cb, buf, 32) != SZ_OK || memcmp(buf, good.data(), 32) != 0)
      disagree("codebook: sz_codebook_serialize writes different bytes");
    auto reseal = [](std::vector<uint8_t>& b) { spec::put_le(b.data() + 28, spec::h32(b.data(), 28), 4); };
    auto B = [&](const char* n, std::vector<uint8_t> b, bool rs, sz_status s, const char* why) {
      if (rs) reseal(b);
      invalid("codebook", n, b, s, why);
    };
    B("codebook_truncated", std::vector<uint8_t>(good.begin(), good.begin() + 31), false, SZ_ERROR_SRC_TRUNCATED,
      "31 bytes");
    std::vector<uint8_t> b = good;
    b[2] = 0x5B;
    B("codebook_bad_magic", b, true, SZ_ERROR_BAD_MAGIC, "magic SPZB -> SP[B");
    b = good, b[4] = 3;
    B("codebook_version_3", b, true, SZ_ERROR_UNSUPPORTED_VERSION, "version 3");
    b = good, b[28] ^= 0xFF;
    B("codebook_checksum", b, false, SZ_ERROR_CHECKSUM, "checksum byte inverted");
    b = good, b[5] = 77;
    B("codebook_dtype_77", b, true, SZ_ERROR_UNSUPPORTED_DTYPE, "dtype 77");
    b = good, b[6] = 0;
    B("codebook_k_0", b, true, SZ_ERROR_CORRUPT, "k = 0");
    b = good, b[7] = 17;
    B("codebook_count_17", b, true, SZ_ERROR_CORRUPT, "count 17");
    b = good, b[9] = b[8];
    B("codebook_duplicate", b, true, SZ_ERROR_CORRUPT, "duplicate entries");
    b = good, b[26] = 1;
    B("codebook_reserved", b, true, SZ_ERROR_CORRUPT, "reserved byte 26");
  }

  // ---- containers ----------------------------------------------------------------------------------------------
  {
    const std::vector<uint8_t> meta = {'{', '"', 'a', '"', ':', '1', '}'};
    const std::vector<uint8_t> k_src = skewed_values(SZ_DTYPE_BF16, 600, 2, 120, 0.5, 0.01);
    const std::vector<uint8_t> v_src = skewed_values(SZ_DTYPE_FP8_E5M2, 333, 3, 15, 0.5, 0.01);
    std::vector<spec::Item> items(3);
    items[0].kind = 2, items[0].name = "__metadata__", items[0].original_offset = 0,
    items[0].original_size = meta.size(), items[0].data = meta;
    items[1].kind = 1, items[1].dtype = SZ_DTYPE_BF16, items[1].ndim = 2, items[1].shape = {6, 100},
    items[1].name = "model.layers.0.k", items[1].original_offset = meta.size(), items[1].original_size = k_src.size(),
    items[1].data = encode(k_src, SZ_DTYPE_BF16, centered_codebook(SZ_DTYPE_BF16, 4, 16, 120), 8, SZ_FLAG_CHECKSUMS);
    items[2].kind = 1, items[2].dtype = SZ_DTYPE_FP8_E5M2, items[2].ndim = 1, items[2].shape = {333},
    items[2].name = "model.layers.0.v", items[2].original_offset = meta.size() + k_src.size(),
    items[2].original_size = v_src.size(),
    items[2].data = encode(v_src, SZ_DTYPE_FP8_E5M2, centered_codebook(SZ_DTYPE_FP8_E5M2, 3, 8, 15), 8, SZ_FLAG_CHECKSUMS);
    std::vector<spec::Item> its = items;
    const std::vector<uint8_t> c = spec::container(its);
    std::vector<uint8_t> original = meta;
    original.insert(original.end(), k_src.begin(), k_src.end());
    original.insert(original.end(), v_src.begin(), v_src.end());
    write_or_die(g_root + "/valid/three_items.spzc", c);
    write_or_die(g_root + "/valid/three_items.raw", original);
    fprintf(g_valid_manifest, "container three_items.spzc three_items.raw  # stored metadata, BF16 and E5M2 frames\n");
    uint32_t count = 0;
    if (sz_container_open(c.data(), c.size(), &count) != SZ_OK || count != 3) disagree("container: open");

    auto C = [&](const char* n, std::vector<uint8_t> b, sz_status s, const char* why) { invalid("container", n, b, s, why); };
    std::vector<uint8_t> b = c;
    b[1] = 0;
    C("container_bad_magic", b, SZ_ERROR_BAD_MAGIC, "header magic");
    b = c, b[4] = 2;
    C("container_version_2", b, SZ_ERROR_UNSUPPORTED_VERSION, "version 2");
    b = c, b[12] = 1;
    C("container_reserved", b, SZ_ERROR_CORRUPT, "reserved header byte 12");
    b = c, b[b.size() - 8] ^= 4;
    C("container_footer_checksum", b, SZ_ERROR_CHECKSUM, "footer checksum");
    b = c, b[b.size() - 40] ^= 4;
    C("container_index_checksum", b, SZ_ERROR_CHECKSUM, "a byte of the index changed");
    {
      std::vector<spec::Item> x = items;
      x[2].data_offset = 64 * 3;  // inside item 1's frame
      C("container_items_overlap", spec::container(x), SZ_ERROR_CORRUPT, "item 2 placed inside item 1");
    }
    {
      std::vector<spec::Item> x = items;
      x[2].name = x[1].name;
      C("container_duplicate_name", spec::container(x), SZ_ERROR_CORRUPT, "two items named model.layers.0.k");
    }
    {
      std::vector<spec::Item> x = items;
      x[1].shape = {6, 99};
      C("container_shape_mismatch", spec::container(x), SZ_ERROR_CORRUPT, "shape 6x99 for a frame of 600 values");
    }
    {
      std::vector<spec::Item> x = items;
      x[2].original_offset += 1;
      C("container_original_gap", spec::container(x), SZ_ERROR_CORRUPT, "original ranges leave a one-byte gap");
    }
    {
      std::vector<spec::Item> x = items;
      x[0].kind = 3;
      C("container_kind_3", spec::container(x), SZ_ERROR_CORRUPT, "item kind 3");
    }
    {
      b = c;
      const size_t F = b.size() - 32;
      spec::put_le(b.data() + F + 8, spec::get_le(b.data() + F + 8, 8) - 1, 8);
      spec::reseal_container(b);
      C("container_index_size_short", b, SZ_ERROR_CORRUPT, "index_offset + index_size != size - 32");
    }
  }

  fclose(g_valid_manifest);
  fclose(g_invalid_manifest);
  if (g_disagreements) {
    fprintf(stderr, "make_golden: %d disagreement(s) between the spec and the library (files written anyway)\n",
            g_disagreements);
    return 1;
  }
  printf("make_golden: wrote %s; the library agrees with every file\n", g_root.c_str());
  return 0;
}
