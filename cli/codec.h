// codec.h — whole-file compression and decompression on top of the C API: a raw input becomes frames back to back,
// an .npy or .safetensors input a container (docs/FORMAT.md §6, written by containers.h) whose items restore the file
// byte for byte.
#pragma once

#include "common.h"
#include "inputs.h"

#include <memory>
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
// The index and footer of a container whose items end at pos (the library writes them; file names the errors).
Buffer container_index(const std::vector<sz_item>& items, uint64_t pos, const std::string& file);
sz_codebook load_codebook_file(const std::string& path);

// A compression or decompression context for all the frames of a file: scratch and threads once, not per frame.
struct Cctx {
  sz_cctx* p;
  explicit Cctx(unsigned threads) : p(sz_cctx_create(threads)) {
    if (p == nullptr) check_status(SZ_ERROR_OUT_OF_MEMORY, "codec context");
  }
  ~Cctx() { sz_cctx_free(p); }
  Cctx(const Cctx&) = delete;
  Cctx& operator=(const Cctx&) = delete;
};
struct Dctx {
  sz_dctx* p;
  explicit Dctx(unsigned threads) : p(sz_dctx_create(threads)) {
    if (p == nullptr) check_status(SZ_ERROR_OUT_OF_MEMORY, "codec context");
  }
  ~Dctx() { sz_dctx_free(p); }
  Dctx(const Dctx&) = delete;
  Dctx& operator=(const Dctx&) = delete;
};

// Compressed output in pieces that are written back to back (the container's body and its index), so that the
// body need not be copied to append the index.
struct Compressed {
  std::vector<Buffer> parts;
  uint64_t size() const;
};

// Compresses `data` (a whole input in memory) into the container of the plan (a container format), in memory.
// progress may be null. Files are compressed with write_container (containers.h), in bounded memory.
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
// bounded by the largest frame, or a container item by item (decompress_container; from stdin read whole first,
// since its index is at its end).
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

// The layout of a raw KV cache file as ../shared/data has it: [layers][2 (K, V)][tokens][kv_heads][head_dim] values.
// tokens 0: any (each file's own, from its size). A channel book has 2 * layers tensors of kv_heads * head_dim
// channels; tensor 2 l + j is layer l's K (j = 0) or V (j = 1), tokens * period values starting at its offset.
struct KvShape {
  uint64_t layers = 0, tokens = 0, heads = 0, dims = 0;
  uint32_t tensors() const { return uint32_t(2 * layers); }
  uint32_t period() const { return uint32_t(heads * dims); }
  // The tokens of a file of `bytes` bytes of `dtype`; throws CliError naming `file` when it holds no whole tokens
  // or another number than the shape says.
  uint64_t tokens_of(uint64_t bytes, sz_dtype dtype, const std::string& file) const;
};
// Parses "L,2,T,H,D" (T may be "*": any); throws CliError.
KvShape parse_kv_shape(const std::string& text);

// A channel book file (docs/FORMAT.md §5.2) and the bytes its bases point into.
struct LoadedBook {
  Buffer bytes;
  sz_channel_book book;
};
// Is this file's content a channel book (by its magic)?
bool is_channel_book_file(const Buffer& bytes);
LoadedBook load_channel_book(Buffer bytes, const std::string& file);

// Compresses a raw KV file with a channel book: a container of the book (kind 3) and one version 2 frame per
// tensor, named "layer<l>.k" / "layer<l>.v" with shape [tokens, kv_heads, head_dim], that restores the file.
Compressed compress_kv(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape, const LoadedBook& book,
                       const sz_params& params, const std::string& file, Progress* progress);

// A symbol table file (docs/FORMAT.md §5.3), the bytes it points into, and its prepared lookup tables (the
// workspace of sz_symbol_table_prepare).
struct LoadedTable {
  Buffer bytes;
  std::vector<uint8_t> workspace;
  sz_symbol_table table;
};
// Is this file's content a symbol table (by its magic)?
bool is_symbol_table_file(const Buffer& bytes);
// Parses (exact size) and prepares a table; the result must not be copied (table points into it): hence unique_ptr.
std::unique_ptr<LoadedTable> load_symbol_table(Buffer bytes, const std::string& file);

// A row map file (docs/FORMAT.md §5.4) and the bytes it points into.
struct LoadedRowMap {
  Buffer bytes;
  sz_row_map map;
};
// Is this file's content a row map (by its magic)?
bool is_row_map_file(const Buffer& bytes);
// Parses a row map file (exact size); the result must not be copied (map points into it).
std::unique_ptr<LoadedRowMap> load_row_map(Buffer bytes, const std::string& file);
// The row map of a raw FP8 KV file (`shape`) from its layer-0 V rows: equal rows there are the same token, so each
// token's rows pair with its previous occurrence's (what a serving engine builds from the token ids).
std::unique_ptr<LoadedRowMap> row_map_of_kv(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape,
                                            const std::string& file);

// Compresses a raw KV file with a symbol table ("max" mode): a container of the table (kind 4), the row map (kind 5)
// when `rows` is given (FP8: paired frames, §4.10.6), and one version 3 frame per tensor, named and shaped as
// compress_kv does.
Compressed compress_kv_entropy(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape,
                               const LoadedTable& table, const LoadedRowMap* rows, const sz_params& params,
                               const std::string& file, Progress* progress);

// Validates a container and returns its items in index order (one pass; names point into data).
std::vector<sz_item> read_container_index(const uint8_t* data, size_t size, const std::string& file);

// Decompresses a frame or container (detected by magic) in memory. Errors name `file` and, for containers, the item.
Buffer decompress_any(const uint8_t* data, size_t size, unsigned threads, const std::string& file,
                      Progress* progress);

}  // namespace splitzip_cli
