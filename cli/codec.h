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

// Raw inputs are compressed as frames of this many values, back to back (one frame when the input is shorter), so
// that compressing and decompressing them take memory bounded by one frame whatever the input size.
constexpr uint64_t kStreamFrameValues = uint64_t(1) << 22;

struct StreamResult {
  uint64_t in = 0, out = 0;  // bytes read and written
  uint64_t frames = 0;       // frames written (compress) or read (decompress; 0 for a container)
};

// Compresses a raw input of `dtype` one frame of kStreamFrameValues values at a time: read, compress, write to out
// (nothing when out is null). progress advances by the input bytes.
StreamResult compress_raw_stream(InputFile& in, OutputFile* out, sz_dtype dtype, const CodebookChoice& codebooks,
                                 const sz_params& params, const std::string& file, Progress* progress);

// Decompresses a SplitZip file to out (nothing when out is null: -t): frames back to back one at a time, in memory
// bounded by the largest frame, or a container (read whole: its index is at its end).
StreamResult decompress_stream(InputFile& in, OutputFile* out, unsigned threads, const std::string& file,
                               Progress* progress);

// Frames back to back in an input (zstd's concatenation semantics: the file decompresses to the concatenation of
// the frames' values), read one at a time into a buffer that grows to the largest frame.
class FrameReader {
 public:
  FrameReader(InputFile& in, const std::string& file) : in_(in), file_(file) {}
  // Reads the next whole frame and its info (stats included); false at the end of the input, which is never before
  // a first frame. Throws CliError for a truncated frame, a bad header, or bytes after a frame that are not one.
  bool next(sz_frame_info* info, Progress* progress = nullptr);
  const uint8_t* data() const { return buf_.data(); }
  size_t size() const { return size_; }
  uint64_t frames() const { return frames_; }
  uint64_t consumed() const { return consumed_; }
  // "file" for the first frame, "file: frame N" after it: how errors name the frame just read.
  std::string what() const;

 private:
  InputFile& in_;
  std::string file_;
  Buffer buf_;
  size_t size_ = 0;
  uint64_t frames_ = 0, consumed_ = 0;
};

// Validates a container and returns its items in index order (one pass; names point into data).
std::vector<sz_item> read_container_index(const uint8_t* data, size_t size, const std::string& file);

// Decompresses a frame or container (detected by magic). Errors name `file` and, for containers, the item.
Buffer decompress_any(const uint8_t* data, size_t size, unsigned threads, const std::string& file,
                      Progress* progress);

}  // namespace splitzip_cli
