/*
 * splitzip.hpp — a thin C++17 layer over the C API of splitzip.h: RAII values instead of raw structs, results into
 * std::vector<uint8_t>, a container reader view and a container writer. No exceptions: every call returns the
 * sz_status of the C API (memory exhaustion while growing a vector becomes SZ_ERROR_OUT_OF_MEMORY).
 *
 *   #include <splitzip/splitzip.hpp>
 *   std::vector<uint8_t> frame, back;
 *   sz_status s = splitzip::compress(kv, n, SZ_DTYPE_BF16, frame);          // default codebook and params
 *   if (s == SZ_OK) s = splitzip::decompress(frame.data(), frame.size(), back);
 *   if (s != SZ_OK) fprintf(stderr, "%s\n", splitzip::status_name(s));
 *
 *   splitzip::ContainerWriter w;                                           // many tensors in one buffer
 *   w.add_compressed("layer0.k", k0, n, SZ_DTYPE_BF16, {1536, 4, 64});
 *   w.add_stored("meta", json.data(), json.size());
 *   std::vector<uint8_t> file;
 *   w.finish(file);
 *   splitzip::ContainerReader r;
 *   r.open(file.data(), file.size());                                      // validates the whole index
 *   uint32_t i; r.find("layer0.k", &i); r.extract(i, back);                // one item, without the others
 */
#ifndef SPLITZIP_SPLITZIP_HPP
#define SPLITZIP_SPLITZIP_HPP

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "splitzip.h"

namespace splitzip {

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define SPLITZIP_HPP_TRY try
#define SPLITZIP_HPP_CATCH_OOM \
  catch (...) { return SZ_ERROR_OUT_OF_MEMORY; }
#else
#define SPLITZIP_HPP_TRY
#define SPLITZIP_HPP_CATCH_OOM
#endif

inline const char* status_name(sz_status s) { return sz_status_name(s); }
inline const char* status_message(sz_status s) { return sz_status_message(s); }

/** Parameters with the library defaults (chunk 4096 values, checksums on, 1 thread). */
inline sz_params default_params() { return sz_params_default(); }

/** A codebook value. Default-constructed it is empty (count 0) and invalid: fill it with one of the factories. */
class Codebook {
 public:
  Codebook() { std::memset(&cb_, 0, sizeof cb_); }
  explicit Codebook(const sz_codebook& cb) : cb_(cb) {}

  /** The shipped default for a dtype and tensor kind. */
  static sz_status default_for(sz_dtype dtype, sz_tensor_kind kind, Codebook* out) {
    return sz_default_codebook(dtype, kind, &out->cb_);
  }
  static sz_status load(const char* path, Codebook* out) { return sz_codebook_load(path, &out->cb_); }
  static sz_status deserialize(const void* src, size_t size, Codebook* out) {
    return sz_codebook_deserialize(src, size, &out->cb_);
  }
  sz_status save(const char* path) const { return sz_codebook_save(&cb_, path); }
  sz_status serialize(uint8_t (&dst)[SZ_CODEBOOK_FILE_SIZE]) const {
    return sz_codebook_serialize(&cb_, dst, SZ_CODEBOOK_FILE_SIZE);
  }
  sz_status validate() const { return sz_codebook_validate(&cb_); }

  const sz_codebook* get() const { return &cb_; }
  sz_codebook* get() { return &cb_; }
  sz_dtype dtype() const { return (sz_dtype)cb_.dtype; }
  unsigned code_bits() const { return cb_.code_bits; }
  unsigned count() const { return cb_.count; }

 private:
  sz_codebook cb_;
};

/** Exponent histogram of sample data, and calibration of a codebook from it. */
class Histogram {
 public:
  explicit Histogram(sz_dtype dtype) { status_ = sz_histogram_init(&h_, dtype); }
  /** SZ_OK, or the error of the constructor (an unknown dtype). */
  sz_status status() const { return status_; }
  sz_status add(const void* values, size_t n) { return status_ != SZ_OK ? status_ : sz_histogram_add(&h_, values, n); }
  sz_status calibrate(Codebook* out, double* expected_bits_per_value = nullptr) const {
    return status_ != SZ_OK ? status_ : sz_calibrate(&h_, out->get(), expected_bits_per_value);
  }
  const sz_histogram& get() const { return h_; }

 private:
  sz_histogram h_;
  sz_status status_;
};

/** Compresses n values into out (resized to the frame size). codebook / params: nullptr = library defaults. */
inline sz_status compress(const void* src, uint64_t n, sz_dtype dtype, std::vector<uint8_t>& out,
                          const sz_codebook* codebook = nullptr, const sz_params* params = nullptr) {
  const uint64_t bound = sz_compress_bound(n, dtype);
  if (bound == 0) return SZ_ERROR_INVALID_ARGUMENT;
  SPLITZIP_HPP_TRY { out.resize((size_t)bound); }
  SPLITZIP_HPP_CATCH_OOM
  size_t size = 0;
  const sz_status s = sz_compress(src, n, dtype, codebook, params, out.data(), out.size(), &size);
  out.resize(s == SZ_OK ? size : 0);
  return s;
}
inline sz_status compress(const void* src, uint64_t n, sz_dtype dtype, std::vector<uint8_t>& out,
                          const Codebook& codebook, const sz_params* params = nullptr) {
  return compress(src, n, dtype, out, codebook.get(), params);
}

/** Frame facts (sz_frame_info_get). */
inline sz_status frame_info(const void* src, size_t size, sz_frame_info* info) {
  return sz_frame_info_get(src, size, info);
}

/** Decompresses a frame into out (resized to the decompressed size). threads: 0 = all hardware threads. */
inline sz_status decompress(const void* src, size_t size, std::vector<uint8_t>& out, unsigned threads = 1) {
  sz_frame_info info;
  sz_status s = sz_frame_info_get(src, size, &info);
  if (s != SZ_OK) return s;
  SPLITZIP_HPP_TRY { out.resize((size_t)info.decompressed_size); }
  SPLITZIP_HPP_CATCH_OOM
  size_t written = 0;
  s = sz_decompress(src, size, out.data(), out.size(), &written, threads);
  out.resize(s == SZ_OK ? written : 0);
  return s;
}

/** A read-only view of a container in caller memory (the buffer must outlive the view). open() validates it. */
class ContainerReader {
 public:
  /** Validates the container and reads its index once (sz_container_items). */
  sz_status open(const void* data, size_t size) {
    data_ = nullptr;
    size_ = 0;
    items_.clear();
    uint32_t count = 0;
    sz_status s = sz_container_items(data, size, nullptr, 0, &count);
    if (s != SZ_OK) return s;
    SPLITZIP_HPP_TRY { items_.resize(count); }
    SPLITZIP_HPP_CATCH_OOM
    s = sz_container_items(data, size, items_.data(), count, &count);
    if (s != SZ_OK) {
      items_.clear();
      return s;
    }
    data_ = static_cast<const uint8_t*>(data);
    size_ = size;
    return SZ_OK;
  }
  uint32_t size() const { return static_cast<uint32_t>(items_.size()); }
  sz_status item(uint32_t index, sz_item* out) const {
    if (out == nullptr || index >= items_.size()) return SZ_ERROR_INVALID_ARGUMENT;
    *out = items_[index];
    return SZ_OK;
  }
  sz_status find(std::string_view name, uint32_t* index) const {
    return sz_container_find(data_, size_, name.data(), name.size(), index);
  }
  static std::string_view name_of(const sz_item& it) { return std::string_view(it.name, it.name_size); }
  /** The item's bytes in the container (a frame, or the stored bytes). */
  const uint8_t* item_data(const sz_item& it) const { return data_ + it.data_offset; }
  /** The item's original bytes into out: frames are decompressed, stored bytes copied. */
  sz_status extract(uint32_t index, std::vector<uint8_t>& out, unsigned threads = 1) const {
    sz_item it;
    const sz_status s = item(index, &it);
    if (s != SZ_OK) return s;
    if (it.kind == SZ_ITEM_FRAME) return decompress(item_data(it), (size_t)it.data_size, out, threads);
    SPLITZIP_HPP_TRY { out.assign(item_data(it), item_data(it) + it.data_size); }
    SPLITZIP_HPP_CATCH_OOM
    return SZ_OK;
  }
  /** Size of the original file that the items' original ranges tile. */
  uint64_t original_size() const {
    uint64_t total = 0;
    for (const sz_item& it : items_) total += it.original_size;
    return total;
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<sz_item> items_;
};

/** Builds a container in memory: items are appended at 64-byte aligned offsets, finish() adds index and footer.
 *  original_offset = kAppend places an item's original bytes right after the previous item's. */
class ContainerWriter {
 public:
  static constexpr uint64_t kAppend = ~(uint64_t)0;

  ContainerWriter() {
    SPLITZIP_HPP_TRY {
      data_.resize(SZ_CONTAINER_HEADER_SIZE);
      sz_container_write_header(data_.data(), data_.size());
    }
    catch (...) {
      status_ = SZ_ERROR_OUT_OF_MEMORY;
    }
  }

  /** Compresses n values and appends the frame. */
  sz_status add_compressed(std::string_view name, const void* src, uint64_t n, sz_dtype dtype,
                           std::initializer_list<uint64_t> shape = {}, const sz_codebook* codebook = nullptr,
                           const sz_params* params = nullptr, uint64_t original_offset = kAppend) {
    return add_compressed(name, src, n, dtype, shape.begin(), shape.size(), codebook, params, original_offset);
  }
  sz_status add_compressed(std::string_view name, const void* src, uint64_t n, sz_dtype dtype, const uint64_t* shape,
                           size_t ndim, const sz_codebook* codebook = nullptr, const sz_params* params = nullptr,
                           uint64_t original_offset = kAppend) {
    if (status_ != SZ_OK) return status_;
    const uint64_t bound = sz_compress_bound(n, dtype);
    if (bound == 0) return SZ_ERROR_INVALID_ARGUMENT;
    const size_t at = aligned_end();
    SPLITZIP_HPP_TRY { data_.resize(at + (size_t)bound); }
    SPLITZIP_HPP_CATCH_OOM
    size_t frame_size = 0;
    const sz_status s = sz_compress(src, n, dtype, codebook, params, data_.data() + at, (size_t)bound, &frame_size);
    if (s != SZ_OK) {
      data_.resize(end_);
      return s;
    }
    data_.resize(at + frame_size);
    return push(name, SZ_ITEM_FRAME, dtype, shape, ndim, original_offset, n * sz_dtype_size(dtype), at, frame_size);
  }
  /** Appends an already compressed frame (validated by its header). */
  sz_status add_frame(std::string_view name, const void* frame, size_t size, const uint64_t* shape = nullptr,
                      size_t ndim = 0, uint64_t original_offset = kAppend) {
    if (status_ != SZ_OK) return status_;
    sz_frame_info info;
    const sz_status s = sz_frame_info_get(frame, size, &info);
    if (s != SZ_OK) return s;
    if (info.frame_size != size) return SZ_ERROR_INVALID_ARGUMENT;
    const size_t at = aligned_end();
    SPLITZIP_HPP_TRY {
      data_.resize(at);
      const uint8_t* p = static_cast<const uint8_t*>(frame);
      data_.insert(data_.end(), p, p + size);
    }
    SPLITZIP_HPP_CATCH_OOM
    return push(name, SZ_ITEM_FRAME, (sz_dtype)info.dtype, shape, ndim, original_offset, info.decompressed_size, at,
                size);
  }
  /** Appends bytes stored verbatim (metadata, headers, tensors of other dtypes). */
  sz_status add_stored(std::string_view name, const void* bytes, size_t size, const uint64_t* shape = nullptr,
                       size_t ndim = 0, uint64_t original_offset = kAppend) {
    if (status_ != SZ_OK) return status_;
    if (bytes == nullptr && size != 0) return SZ_ERROR_INVALID_ARGUMENT;
    const size_t at = aligned_end();
    SPLITZIP_HPP_TRY {
      data_.resize(at);
      const uint8_t* p = static_cast<const uint8_t*>(bytes);
      data_.insert(data_.end(), p, p + size);
    }
    SPLITZIP_HPP_CATCH_OOM
    return push(name, SZ_ITEM_STORED, (sz_dtype)0, shape, ndim, original_offset, size, at, size);
  }

  /** Writes index and footer and moves the container into out; the writer is empty afterwards. */
  sz_status finish(std::vector<uint8_t>& out) {
    if (status_ != SZ_OK) return status_;
    std::vector<sz_item> items(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) {
      items[i] = entries_[i].item;
      items[i].name = entries_[i].name.data();
    }
    uint64_t index_size = 0;
    sz_status s = sz_container_index_size(items.data(), (uint32_t)items.size(), &index_size);
    if (s != SZ_OK) return s;
    const size_t index_offset = end_;
    SPLITZIP_HPP_TRY { data_.resize(index_offset + (size_t)index_size); }
    SPLITZIP_HPP_CATCH_OOM
    size_t written = 0;
    s = sz_container_write_index(items.data(), (uint32_t)items.size(), index_offset, data_.data() + index_offset,
                                 (size_t)index_size, &written);
    if (s != SZ_OK) {
      data_.resize(end_);
      return s;
    }
    out.swap(data_);
    *this = ContainerWriter();
    return SZ_OK;
  }

  size_t item_count() const { return entries_.size(); }
  size_t bytes_so_far() const { return end_; }

 private:
  struct Entry {
    sz_item item;
    std::string name;
  };

  size_t aligned_end() const {
    return (end_ + SZ_CONTAINER_ALIGN - 1) / SZ_CONTAINER_ALIGN * SZ_CONTAINER_ALIGN;
  }

  sz_status push(std::string_view name, sz_item_kind kind, sz_dtype dtype, const uint64_t* shape, size_t ndim,
                 uint64_t original_offset, uint64_t original_size, size_t at, size_t size) {
    if (ndim > SZ_MAX_NDIM || name.size() > SZ_MAX_NAME || (shape == nullptr && ndim != 0)) {
      data_.resize(end_);
      return SZ_ERROR_INVALID_ARGUMENT;
    }
    Entry e;
    std::memset(&e.item, 0, sizeof e.item);
    e.item.kind = (uint8_t)kind;
    e.item.dtype = (uint8_t)dtype;
    e.item.ndim = (uint8_t)ndim;
    e.item.name_size = (uint16_t)name.size();
    for (size_t d = 0; d < ndim; ++d) e.item.shape[d] = shape[d];
    e.item.original_offset = original_offset == kAppend ? next_original_ : original_offset;
    e.item.original_size = original_size;
    e.item.data_offset = at;
    e.item.data_size = size;
    SPLITZIP_HPP_TRY {
      e.name.assign(name.data(), name.size());
      entries_.push_back(std::move(e));
    }
    SPLITZIP_HPP_CATCH_OOM
    next_original_ = entries_.back().item.original_offset + original_size;
    end_ = at + size;
    return SZ_OK;
  }

  std::vector<uint8_t> data_;
  std::vector<Entry> entries_;
  size_t end_ = SZ_CONTAINER_HEADER_SIZE;
  uint64_t next_original_ = 0;
  sz_status status_ = SZ_OK;
};

}  // namespace splitzip

#endif  // SPLITZIP_SPLITZIP_HPP
