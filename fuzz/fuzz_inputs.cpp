// fuzz_inputs — arbitrary bytes as .npy, .safetensors and raw files through the CLI's input parsers (cli/inputs.cpp)
// and, for every input a parser accepts, through the container writer (cli/codec.cpp: sz_compress, the container
// header and sz_container_write_index) and back (sz_container_items, sz_decompress). Nothing may crash or touch memory
// outside the buffers (ASan/UBSan); a parser may only refuse with a CliError; an accepted plan must tile the file,
// write without error and restore the input byte for byte.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "codec.h"
#include "common.h"
#include "inputs.h"

using namespace splitzip_cli;

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  fprintf(stderr, "fuzz_inputs: %s: %s\n", what, detail.c_str());
  abort();
}

void round_trip(const uint8_t* data, size_t size, const char* path, InputFormat format, std::optional<sz_dtype> dtype,
                unsigned chunk_log2) {
  InputPlan plan;
  try {
    plan = plan_input(data, size, size, path, format, dtype);
  } catch (const CliError&) {
    return;  // refused with a message: fine
  }
  uint64_t pos = 0;
  for (const Segment& s : plan.segments) {
    if (s.offset != pos) fail("segments do not tile the file", s.name);
    if (s.is_frame && s.size % sz_dtype_size(s.dtype) != 0) fail("frame segment of partial values", s.name);
    if (s.has_shape && s.shape.size() > SZ_MAX_NDIM) fail("shape of more than 8 dimensions", s.name);
    pos += s.size;
  }
  if (pos != size) fail("segments do not cover the file", std::to_string(pos) + " of " + std::to_string(size));
  sz_params params = sz_params_default();
  params.chunk_log2 = chunk_log2;
  CodebookChoice codebooks;
  std::vector<uint8_t> file;
  try {
    Compressed c = compress_plan(data, size, plan, codebooks, params, path, nullptr);
    for (const Buffer& part : c.parts) file.insert(file.end(), part.data(), part.data() + part.size());
    Buffer back = decompress_any(file.data(), file.size(), 1, path, nullptr);
    if (back.size() != size || (size && memcmp(back.data(), data, size) != 0)) fail("restored bytes differ", path);
  } catch (const CliError& e) {
    fail("an accepted input failed to compress or restore", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);  // a heap block of exactly `size` bytes, so ASan sees overreads
  const uint8_t* p = size ? buf.data() : (const uint8_t*)"";
  const unsigned chunk_log2 = SZ_MIN_CHUNK_LOG2 + (size ? p[size - 1] % 9 : 0);
  round_trip(p, size, "in.npy", InputFormat::kNpy, std::nullopt, chunk_log2);
  round_trip(p, size, "in.npy", InputFormat::kNpy, SZ_DTYPE_BF16, chunk_log2);
  round_trip(p, size, "in.safetensors", InputFormat::kSafetensors, std::nullopt, chunk_log2);
  round_trip(p, size, "in.bin", InputFormat::kAuto, SZ_DTYPE_FP8_E4M3, chunk_log2);
  return 0;
}
