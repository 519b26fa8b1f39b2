// containers.h — containers (docs/FORMAT.md §6) written and read item by item, so that compressing an .npy or
// .safetensors file, and decompressing or describing a container, take memory bounded by a piece of kPieceBytes
// whatever the size of the file or of one tensor.
//
// A container item is one frame, however large its tensor. Every chunk of a frame is coded on its own (§4.2), so
// the frame of a large tensor is assembled from the frames of pieces of it, each a whole number of chunks, and is
// the frame that one call of the encoder gives (§4.7: the canonical frame); decoding cuts each piece out of it as a
// frame of its own. The library's frame-piece calls (sz_frame_builder_*, sz_frame_slice*) say where each section
// goes and write the headers and rebased chunk indexes: the CLI knows no byte of the frame layout.
#pragma once

#include "codec.h"

#include <functional>

namespace splitzip_cli {

// The bytes of an input: a regular file, read at any offset in any order, or a buffer (stdin, read whole).
class Source {
 public:
  explicit Source(const InputFile& file) : file_(&file), size_(file.size_hint()) {}
  Source(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t size() const { return size_; }
  // The bytes of an input in memory; null for a file.
  const uint8_t* memory() const { return data_; }
  // Copies n bytes at offset (offset + n <= size()).
  void read(uint64_t offset, uint8_t* dst, size_t n) const;

 private:
  const InputFile* file_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Where a container is written: at any offset, in any order (a large frame's index is known piece by piece, before
// its sections are). Bytes never written (the gaps before 64-byte aligned items) are zeros.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write_at(uint64_t offset, const uint8_t* data, size_t size) = 0;
};

// Large frames are coded and decoded in pieces of this many bytes of values: 4 Mi BF16 or FP16 values, 2 Mi FP32,
// 8 Mi FP8, each a whole number of chunks of every chunk size (§4.2) and of groups of 8 values (§3).
constexpr uint64_t kPieceBytes = uint64_t(8) << 20;

// Writes the container of `plan` (a container format) for the input `src` to `sink` and returns its size. Frames
// of inputs in memory are coded in one call each; frames of files larger than kPieceBytes in pieces of that size,
// so the memory used is that of one piece and its frame.
uint64_t write_container(const Source& src, const InputPlan& plan, const CodebookChoice& codebooks,
                         const sz_params& params, const std::string& file, Sink& sink, Progress* progress);

// write_container to an output: in place in a file (the temporary file that becomes the output); through a
// temporary spool file (tmpfile(3)) for stdout, then copied to it, since the container is not written in order.
uint64_t write_container(const Source& src, const InputPlan& plan, const CodebookChoice& codebooks,
                         const sz_params& params, const std::string& file, OutputFile& out, Progress* progress);

// A container as the library's container calls read it (sz_container_items, sz_frame_info_get). For an input in
// memory, the input itself. For a file, an address range of the file's size, unbacked (reading as zeros, costing no
// memory) but for what is read into it from the file: header, index and footer, each item's frame header (with
// `frame_stats` also each frame's chunk index, or a whole entropy-coded frame, whose chunk records hold its escape
// counts), and whole channel books and symbol tables. Where the index and the items lie comes from the library
// (sz_container_locate_index, sz_container_index_items): the CLI knows no byte of the container layout.
class ContainerImage {
 public:
  ContainerImage(const Source& src, bool frame_stats);
  ~ContainerImage();
  ContainerImage(const ContainerImage&) = delete;
  ContainerImage& operator=(const ContainerImage&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_t(size_); }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;
};

// Decompresses the container in `src`: its items in the order of their original offsets, each passed to `emit` as
// it is decoded (stored items in blocks, frames whole or, version 1 frames of more than kPieceBytes, piece by
// piece), so the original file arrives in order. Returns its size. Errors name `file` and the item.
uint64_t decompress_container(const Source& src, unsigned threads, const std::string& file, Progress* progress,
                              const std::function<void(const uint8_t*, size_t)>& emit);

}  // namespace splitzip_cli
