// codec.h — whole-file compression and decompression on top of the C API: a raw input becomes a bare frame, an
// .npy or .safetensors input a container (docs/FORMAT.md §6) whose items restore the file byte for byte.
#pragma once

#include "common.h"
#include "inputs.h"

#include <optional>
#include <string>
#include <vector>

namespace splitzip_cli {

// Which codebook a frame of a given dtype gets: the user's (--codebook) when its dtype matches, else the library's
// default codebook for (dtype, kind).
struct CodebookChoice {
  std::optional<sz_codebook> user;
  sz_tensor_kind kind = SZ_KIND_GENERIC;
  sz_codebook for_dtype(sz_dtype dtype) const;
};

sz_tensor_kind parse_kind(const std::string& name);
sz_codebook load_codebook_file(const std::string& path);

// Compressed output in pieces that are written back to back (the container's body and its index), so that the
// body need not be copied to append the index.
struct Compressed {
  std::vector<Buffer> parts;
  uint64_t size() const;
};

// Compresses `data` as the plan says. progress may be null.
Compressed compress_plan(const uint8_t* data, size_t size, const InputPlan& plan, const CodebookChoice& codebooks,
                         const sz_params& params, const std::string& file, Progress* progress);

// Validates a container and returns its items in index order (one pass; names point into data).
std::vector<sz_item> read_container_index(const uint8_t* data, size_t size, const std::string& file);

// Decompresses a frame or container (detected by magic). Errors name `file` and, for containers, the item.
Buffer decompress_any(const uint8_t* data, size_t size, unsigned threads, const std::string& file,
                      Progress* progress);

}  // namespace splitzip_cli
