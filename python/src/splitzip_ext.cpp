// splitzip_ext.cpp — the thin nanobind glue between the C ABI (include/splitzip/*.h) and the Python package.
//
// Model (../shared/STYLE.md, FlashInfer): tensors cross as DLPack arrays (numpy, torch, cupy), already reinterpreted
// as contiguous byte or word views by the Python layer. This file only checks device, contiguity and sizes, releases
// the GIL around the library call and returns the library's sz_status as an int; the Python layer turns statuses
// into exceptions and allocates every output and workspace through the framework. Nothing here links a framework,
// allocates device memory or synchronises a stream. One object lives here: a symbol table (the max mode) owns its
// file bytes and prepared lookup tables, host memory that the library's parsed table points into.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"

namespace nb = nanobind;

namespace {

constexpr int kDevCpu = 1;         // DLPack kDLCPU
constexpr int kDevCuda = 2;        // kDLCUDA
constexpr int kDevCudaHost = 3;    // kDLCUDAHost (pinned host memory)
constexpr int kDevCudaManaged = 13;  // kDLCUDAManaged

using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

enum class Where { kHost, kDevice };

// A checked raw view of a DLPack array: C-contiguous (unit-size axes ignored), on the side of the codec we call.
struct Raw {
  const void* ptr;
  size_t nbytes;
};

template <typename Array>
Raw raw_view(const Array& a, const char* what, Where where) {
  const int dev = a.device_type();
  if (where == Where::kHost) {
    if (dev != kDevCpu && dev != kDevCudaHost && dev != kDevCudaManaged) {
      throw nb::value_error((std::string(what) + ": expected an array in host memory").c_str());
    }
  } else if (dev != kDevCuda && dev != kDevCudaManaged) {
    throw nb::value_error((std::string(what) + ": expected an array in CUDA device memory").c_str());
  }
  for (size_t i = 0; i < a.ndim(); ++i) {
    // An empty array has no layout to check (exporters give it arbitrary strides, numpy 2.5 and torch give 0).
    if (a.shape(i) == 0) return Raw{static_cast<const void*>(a.data()), 0};
  }
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) {
      throw nb::value_error((std::string(what) + ": array must be C-contiguous").c_str());
    }
    expect *= static_cast<int64_t>(a.shape(i));
  }
  return Raw{static_cast<const void*>(a.data()), a.nbytes()};
}

// Codebooks cross as None or a tuple (dtype id, code_bits, [values...]).
bool codebook_from(nb::handle obj, sz_codebook* cb) {
  if (obj.is_none()) return false;
  auto t = nb::cast<std::tuple<int, int, std::vector<int>>>(obj);
  *cb = sz_codebook{};
  const auto& values = std::get<2>(t);
  if (values.size() > SZ_MAX_CODEBOOK) throw nb::value_error("codebook: more than 16 entries");
  cb->dtype = static_cast<uint8_t>(std::get<0>(t));
  cb->code_bits = static_cast<uint8_t>(std::get<1>(t));
  cb->count = static_cast<uint8_t>(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > 255) throw nb::value_error("codebook: entry out of range 0..255");
    cb->values[i] = static_cast<uint8_t>(values[i]);
  }
  return true;
}

nb::tuple codebook_to(const sz_codebook& cb) {
  nb::list values;
  for (unsigned i = 0; i < cb.count && i < SZ_MAX_CODEBOOK; ++i) values.append(static_cast<int>(cb.values[i]));
  return nb::make_tuple(static_cast<int>(cb.dtype), static_cast<int>(cb.code_bits), values);
}

sz_params params_from(unsigned chunk_log2, unsigned flags, unsigned threads) {
  sz_params p = sz_params_default();
  p.chunk_log2 = chunk_log2;
  p.flags = flags;
  p.threads = threads;
  return p;
}

sz_cuda_stream stream_from(uintptr_t s) { return reinterpret_cast<sz_cuda_stream>(s); }

// ---- CPU codec ---------------------------------------------------------------------------------------------------

std::tuple<int, size_t> compress(const InArray& src, uint64_t n_values, int dtype, nb::handle codebook,
                                 unsigned chunk_log2, unsigned flags, unsigned threads, const OutArray& dst,
                                 bool reference) {
  const Raw s = raw_view(src, "src", Where::kHost);
  const Raw d = raw_view(dst, "dst", Where::kHost);
  const size_t vsize = sz_dtype_size(static_cast<sz_dtype>(dtype));
  if (vsize == 0) return {SZ_ERROR_UNSUPPORTED_DTYPE, 0};
  if (n_values > s.nbytes / vsize) throw nb::value_error("src: fewer bytes than n_values values");
  sz_codebook cb;
  const sz_codebook* cbp = codebook_from(codebook, &cb) ? &cb : nullptr;
  const sz_params p = params_from(chunk_log2, flags, threads);
  size_t size = 0;
  sz_status st;
  {
    nb::gil_scoped_release release;
    void* out = const_cast<void*>(d.ptr);
    st = reference ? sz_compress_reference(s.ptr, n_values, static_cast<sz_dtype>(dtype), cbp, &p, out, d.nbytes,
                                           &size)
                   : sz_compress(s.ptr, n_values, static_cast<sz_dtype>(dtype), cbp, &p, out, d.nbytes, &size);
  }
  return {static_cast<int>(st), size};
}

std::tuple<int, size_t> decompress(const InArray& src, const OutArray& dst, unsigned threads, bool reference) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  const Raw d = raw_view(dst, "out", Where::kHost);
  size_t size = 0;
  sz_status st;
  {
    nb::gil_scoped_release release;
    void* out = const_cast<void*>(d.ptr);
    st = reference ? sz_decompress_reference(s.ptr, s.nbytes, out, d.nbytes, &size)
                   : sz_decompress(s.ptr, s.nbytes, out, d.nbytes, &size, threads);
  }
  return {static_cast<int>(st), size};
}

std::tuple<int, nb::object> frame_info(const InArray& src) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  sz_frame_info fi{};
  const sz_status st = sz_frame_info_get(s.ptr, s.nbytes, &fi);
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  nb::dict d;
  d["version"] = static_cast<int>(fi.version);
  d["dtype_id"] = static_cast<int>(fi.dtype);
  d["chunk_log2"] = static_cast<int>(fi.chunk_log2);
  d["flags"] = fi.flags;
  d["codebook"] = codebook_to(fi.codebook);
  d["n_values"] = fi.n_values;
  d["decompressed_size"] = fi.decompressed_size;
  d["frame_size"] = fi.frame_size;
  d["n_chunks"] = fi.n_chunks;
  d["stats_valid"] = fi.stats_valid != 0;
  if (fi.stats_valid) {
    d["coded_chunks"] = fi.coded_chunks;
    d["raw_chunks"] = fi.raw_chunks;
    d["escapes"] = fi.escapes;
  }
  return {static_cast<int>(st), nb::object(d)};
}

// ---- containers (docs/FORMAT.md §6) ------------------------------------------------------------------------------

// Validates a container and returns its items in index order as (kind, dtype, shape, name bytes, original_offset,
// original_size, data_offset, data_size) tuples. The item array is the only memory the check needs.
std::tuple<int, nb::list> container_items(const InArray& src) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  nb::list out;
  uint32_t count = 0;
  sz_status st = sz_container_items(s.ptr, s.nbytes, nullptr, 0, &count);
  if (st != SZ_OK) return {static_cast<int>(st), out};
  std::vector<sz_item> items(count);
  {
    nb::gil_scoped_release release;
    st = sz_container_items(s.ptr, s.nbytes, items.data(), count, &count);
  }
  if (st != SZ_OK) return {static_cast<int>(st), out};
  for (const sz_item& it : items) {
    nb::list shape;
    for (unsigned d = 0; d < it.ndim; ++d) shape.append(it.shape[d]);
    out.append(nb::make_tuple(static_cast<int>(it.kind), static_cast<int>(it.dtype), nb::tuple(shape),
                              nb::bytes(it.name, it.name_size), it.original_offset, it.original_size,
                              it.data_offset, it.data_size));
  }
  return {static_cast<int>(st), out};
}

nb::bytes container_header() {
  uint8_t buf[SZ_CONTAINER_HEADER_SIZE];
  sz_container_write_header(buf, sizeof buf);
  return nb::bytes(reinterpret_cast<const char*>(buf), sizeof buf);
}

// Index and footer for items given as the tuples container_items returns, the index starting at index_offset.
std::tuple<int, nb::bytes> container_index(const std::vector<nb::tuple>& entries, uint64_t index_offset) {
  std::vector<sz_item> items(entries.size());
  std::vector<std::string> names(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const nb::tuple& e = entries[i];
    if (e.size() != 8) throw nb::value_error("container item: expected 8 fields");
    sz_item& it = items[i];
    it = sz_item{};
    it.kind = static_cast<uint8_t>(nb::cast<unsigned>(e[0]));
    it.dtype = static_cast<uint8_t>(nb::cast<unsigned>(e[1]));
    const auto shape = nb::cast<std::vector<uint64_t>>(e[2]);
    if (shape.size() > SZ_MAX_NDIM) throw nb::value_error("container item: more than 8 dimensions");
    it.ndim = static_cast<uint8_t>(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) it.shape[d] = shape[d];
    const nb::bytes name = nb::cast<nb::bytes>(e[3]);
    names[i].assign(name.c_str(), name.size());
    if (names[i].size() > SZ_MAX_NAME) throw nb::value_error("container item: name longer than 4096 bytes");
    it.name = names[i].data();
    it.name_size = static_cast<uint16_t>(names[i].size());
    it.original_offset = nb::cast<uint64_t>(e[4]);
    it.original_size = nb::cast<uint64_t>(e[5]);
    it.data_offset = nb::cast<uint64_t>(e[6]);
    it.data_size = nb::cast<uint64_t>(e[7]);
  }
  if (items.size() > UINT32_MAX) throw nb::value_error("container: too many items");
  uint64_t size = 0;
  sz_status st = sz_container_index_size(items.data(), static_cast<uint32_t>(items.size()), &size);
  if (st != SZ_OK) return {static_cast<int>(st), nb::bytes("", 0)};
  std::string buf(static_cast<size_t>(size), '\0');
  size_t written = 0;
  st = sz_container_write_index(items.data(), static_cast<uint32_t>(items.size()), index_offset, buf.data(),
                                buf.size(), &written);
  if (st != SZ_OK) return {static_cast<int>(st), nb::bytes("", 0)};
  return {static_cast<int>(st), nb::bytes(buf.data(), written)};
}

// ---- codebooks and calibration ----------------------------------------------------------------------------------

std::tuple<int, nb::object> default_codebook(int dtype, int kind) {
  sz_codebook cb{};
  const sz_status st = sz_default_codebook(static_cast<sz_dtype>(dtype), static_cast<sz_tensor_kind>(kind), &cb);
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  return {static_cast<int>(st), nb::object(codebook_to(cb))};
}

int codebook_validate(nb::handle codebook) {
  sz_codebook cb;
  if (!codebook_from(codebook, &cb)) throw nb::value_error("codebook: None");
  return static_cast<int>(sz_codebook_validate(&cb));
}

std::tuple<int, nb::bytes> codebook_serialize(nb::handle codebook) {
  sz_codebook cb;
  if (!codebook_from(codebook, &cb)) throw nb::value_error("codebook: None");
  uint8_t buf[SZ_CODEBOOK_FILE_SIZE] = {};
  const sz_status st = sz_codebook_serialize(&cb, buf, sizeof buf);
  return {static_cast<int>(st), nb::bytes(reinterpret_cast<const char*>(buf), st == SZ_OK ? sizeof buf : 0)};
}

std::tuple<int, nb::object> codebook_deserialize(nb::bytes data) {
  sz_codebook cb{};
  const sz_status st = sz_codebook_deserialize(data.c_str(), data.size(), &cb);
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  return {static_cast<int>(st), nb::object(codebook_to(cb))};
}

int codebook_save(nb::handle codebook, const std::string& path) {
  sz_codebook cb;
  if (!codebook_from(codebook, &cb)) throw nb::value_error("codebook: None");
  return static_cast<int>(sz_codebook_save(&cb, path.c_str()));
}

std::tuple<int, nb::object> codebook_load(const std::string& path) {
  sz_codebook cb{};
  const sz_status st = sz_codebook_load(path.c_str(), &cb);
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  return {static_cast<int>(st), nb::object(codebook_to(cb))};
}

// Calibrates one codebook over several host arrays of the same dtype (their bytes are values of that dtype).
std::tuple<int, nb::object, double, std::vector<uint64_t>> calibrate(const std::vector<InArray>& arrays, int dtype) {
  sz_histogram hist;
  sz_status st = sz_histogram_init(&hist, static_cast<sz_dtype>(dtype));
  std::vector<uint64_t> counts;
  if (st != SZ_OK) return {static_cast<int>(st), nb::none(), 0.0, counts};
  const size_t vsize = sz_dtype_size(static_cast<sz_dtype>(dtype));
  std::vector<Raw> raws;
  raws.reserve(arrays.size());
  for (const auto& a : arrays) raws.push_back(raw_view(a, "tensor", Where::kHost));
  sz_codebook cb{};
  double bits = 0.0;
  {
    nb::gil_scoped_release release;
    for (const Raw& r : raws) {
      st = sz_histogram_add(&hist, r.ptr, r.nbytes / vsize);
      if (st != SZ_OK) break;
    }
    if (st == SZ_OK) st = sz_calibrate(&hist, &cb, &bits);
  }
  counts.assign(hist.counts, hist.counts + 256);
  if (st != SZ_OK) return {static_cast<int>(st), nb::none(), 0.0, counts};
  return {static_cast<int>(st), nb::object(codebook_to(cb)), bits, counts};
}

// ---- channel books (docs/FORMAT.md §4.9, §5.2): CPU codec ------------------------------------------------------

// A book crosses as (dtype id, code_bits, period, tensors, bases: a host uint8 array of tensors * period bytes);
// sz_channel_book_init checks the fields and computes the id. *status gets its status.
sz_channel_book book_from(nb::handle obj, sz_status* status) {
  auto t = nb::cast<std::tuple<int, int, uint32_t, uint32_t, InArray>>(obj);
  const Raw b = raw_view(std::get<4>(t), "book bases", Where::kHost);
  sz_channel_book book{};
  const uint32_t period = std::get<2>(t), tensors = std::get<3>(t);
  if ((uint64_t)period * tensors != b.nbytes) {
    *status = SZ_ERROR_INVALID_ARGUMENT;
    return book;
  }
  *status = sz_channel_book_init(&book, static_cast<sz_dtype>(std::get<0>(t)), static_cast<unsigned>(std::get<1>(t)),
                                 period, tensors, static_cast<const uint8_t*>(b.ptr));
  return book;
}

// Per-channel histograms (counts of hsize bytes) over raw KV caches, each array whole tokens of `tensors` tensors
// of `period` values, by `add(counts, i, values, tokens)` for array i (sz_channel_histogram_add,
// sz_symbol_histogram_add_paired); the host views are taken with the GIL held, the counting runs without it.
template <class Add>
sz_status kv_histograms(const std::vector<InArray>& arrays, sz_dtype dt, uint32_t tensors, uint32_t period,
                        size_t hsize, Add add, std::vector<uint32_t>* counts) {
  const uint64_t token_bytes = (uint64_t)tensors * period * sz_dtype_size(dt);
  std::vector<Raw> raws;
  for (const auto& a : arrays) {
    raws.push_back(raw_view(a, "kv", Where::kHost));
    if (raws.back().nbytes % token_bytes != 0) return SZ_ERROR_INVALID_ARGUMENT;
  }
  counts->assign(hsize / sizeof(uint32_t), 0u);
  nb::gil_scoped_release release;
  for (size_t i = 0; i < raws.size(); ++i) {
    const sz_status st = add(counts->data(), i, raws[i].ptr, raws[i].nbytes / token_bytes);
    if (st != SZ_OK) return st;
  }
  return SZ_OK;
}

// Per-channel histograms over raw KV caches (each array: tensors tensors of whole tokens of period values), then
// the windows: (status, code_bits, expected bits per value, bases bytes).
std::tuple<int, int, double, nb::bytes> channel_calibrate(const std::vector<InArray>& arrays, int dtype,
                                                          uint32_t tensors, uint32_t period, unsigned code_bits) {
  const sz_dtype dt = static_cast<sz_dtype>(dtype);
  const size_t hsize = sz_channel_histogram_size(dt, tensors, period);
  if (hsize == 0) return {SZ_ERROR_INVALID_ARGUMENT, 0, 0.0, nb::bytes("", 0)};
  std::vector<uint32_t> counts;
  std::string bases((size_t)tensors * period, '\0');
  unsigned k = 0;
  double bits = 0.0;
  auto add = [&](uint32_t* c, size_t, const void* v, uint64_t tokens) {
    return sz_channel_histogram_add(c, dt, tensors, period, v, tokens);
  };
  sz_status st = kv_histograms(arrays, dt, tensors, period, hsize, add, &counts);
  if (st == SZ_OK) {
    nb::gil_scoped_release release;
    st = sz_channel_calibrate(counts.data(), dt, tensors, period, code_bits, reinterpret_cast<uint8_t*>(bases.data()),
                              &k, &bits);
  }
  if (st != SZ_OK) return {static_cast<int>(st), 0, 0.0, nb::bytes("", 0)};
  return {static_cast<int>(st), static_cast<int>(k), bits, nb::bytes(bases.data(), bases.size())};
}

// (status, id, file bytes) of a book.
std::tuple<int, uint64_t, nb::bytes> channel_book_serialize(nb::handle book_t) {
  sz_status st;
  const sz_channel_book book = book_from(book_t, &st);
  if (st != SZ_OK) return {static_cast<int>(st), 0, nb::bytes("", 0)};
  std::string buf(sz_channel_book_file_size(&book), '\0');
  size_t size = 0;
  st = sz_channel_book_serialize(&book, buf.data(), buf.size(), &size);
  return {static_cast<int>(st), book.id, nb::bytes(buf.data(), st == SZ_OK ? size : 0)};
}

// (status, (dtype, code_bits, period, tensors, id, bases bytes)) of a book file that must be exactly the book.
std::tuple<int, nb::object> channel_book_parse(const InArray& src) {
  const Raw s = raw_view(src, "data", Where::kHost);
  sz_channel_book b{};
  sz_status st = sz_channel_book_parse(s.ptr, s.nbytes, &b);
  if (st == SZ_OK && sz_channel_book_file_size(&b) != s.nbytes) st = SZ_ERROR_CORRUPT;
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  return {static_cast<int>(st),
          nb::make_tuple(static_cast<int>(b.dtype), static_cast<int>(b.code_bits), b.period, b.tensors, b.id,
                         nb::bytes(reinterpret_cast<const char*>(b.bases), (size_t)b.period * b.tensors))};
}

std::tuple<int, size_t> compress_channels(const InArray& src, uint64_t n_values, int dtype, nb::handle book_t,
                                          uint32_t tensor, unsigned chunk_log2, unsigned flags, unsigned threads,
                                          const OutArray& dst, bool reference) {
  const Raw s = raw_view(src, "src", Where::kHost);
  const Raw d = raw_view(dst, "dst", Where::kHost);
  const size_t vsize = sz_dtype_size(static_cast<sz_dtype>(dtype));
  if (vsize == 0) return {SZ_ERROR_UNSUPPORTED_DTYPE, 0};
  if (n_values > s.nbytes / vsize) throw nb::value_error("src: fewer bytes than n_values values");
  sz_status st;
  const sz_channel_book book = book_from(book_t, &st);
  if (st != SZ_OK) return {static_cast<int>(st), 0};
  const sz_params p = params_from(chunk_log2, flags, threads);
  size_t size = 0;
  {
    nb::gil_scoped_release release;
    void* out = const_cast<void*>(d.ptr);
    st = reference ? sz_compress_channels_reference(s.ptr, n_values, static_cast<sz_dtype>(dtype), &book, tensor, &p,
                                                    out, d.nbytes, &size)
                   : sz_compress_channels(s.ptr, n_values, static_cast<sz_dtype>(dtype), &book, tensor, &p, out,
                                          d.nbytes, &size);
  }
  return {static_cast<int>(st), size};
}

std::tuple<int, size_t> decompress_book(const InArray& src, nb::handle book_t, const OutArray& dst, unsigned threads,
                                        bool reference) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  const Raw d = raw_view(dst, "out", Where::kHost);
  sz_status st;
  const sz_channel_book book = book_from(book_t, &st);
  if (st != SZ_OK) return {static_cast<int>(st), 0};
  size_t size = 0;
  {
    nb::gil_scoped_release release;
    void* out = const_cast<void*>(d.ptr);
    st = reference ? sz_decompress_book_reference(s.ptr, s.nbytes, &book, out, d.nbytes, &size)
                   : sz_decompress_book(s.ptr, s.nbytes, &book, out, d.nbytes, &size, threads);
  }
  return {static_cast<int>(st), size};
}

// (status, book id, tensor, period) of a version 2 frame's header.
std::tuple<int, uint64_t, uint32_t, uint32_t> frame_book_ref(const InArray& src) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  uint64_t id = 0;
  uint32_t tensor = 0, period = 0;
  const sz_status st = sz_frame_book_ref(s.ptr, s.nbytes, &id, &tensor, &period);
  return {static_cast<int>(st), id, tensor, period};
}

// ---- symbol tables and entropy-coded frames (docs/FORMAT.md §4.10, §5.3): CPU codec ----------------------------

// A symbol table file, parsed and prepared once. It owns the file bytes and the workspace of
// sz_symbol_table_prepare (which the parsed table points into), so it is neither copied nor moved: the Python
// object holds it for as long as frames are coded with it.
struct SymbolTable {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> workspace;
  sz_symbol_table table{};
  SymbolTable() = default;
  SymbolTable(const SymbolTable&) = delete;
  SymbolTable& operator=(const SymbolTable&) = delete;
};

// (status, SymbolTable or None) of a table file that must be exactly the table (bytes after it: SZ_ERROR_CORRUPT).
std::tuple<int, nb::object> symbol_table_parse(const InArray& src) {
  const Raw s = raw_view(src, "data", Where::kHost);
  auto t = std::make_unique<SymbolTable>();
  const uint8_t* p = static_cast<const uint8_t*>(s.ptr);
  t->bytes.assign(p, p + s.nbytes);
  sz_status st = sz_symbol_table_parse(t->bytes.data(), t->bytes.size(), &t->table);
  if (st == SZ_OK && sz_symbol_table_file_size(static_cast<sz_dtype>(t->table.dtype), t->table.tensors,
                                               t->table.period, t->table.groups) != t->bytes.size())
    st = SZ_ERROR_CORRUPT;
  if (st == SZ_OK) {
    t->workspace.resize(sz_symbol_table_workspace_size(&t->table));
    st = sz_symbol_table_prepare(&t->table, t->workspace.data(), t->workspace.size());
  }
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  return {static_cast<int>(st), nb::cast(t.release(), nb::rv_policy::take_ownership)};
}

// A row map file, parsed once; it owns the bytes the parsed map points into.
struct RowMap {
  std::vector<uint8_t> bytes;
  sz_row_map map{};
  RowMap() = default;
  RowMap(const RowMap&) = delete;
  RowMap& operator=(const RowMap&) = delete;
};

const sz_row_map* row_map_of(const RowMap* m) { return m ? &m->map : nullptr; }

// Per-channel symbol histograms over raw KV caches (each array: whole tokens of `tensors` tensors of `period`
// values; with `maps`, one row map an array, the paired symbols of FP8 frames), then the clustered table:
// (status, predicted symbol bits per value, table file bytes).
std::tuple<int, double, nb::bytes> symbol_calibrate(const std::vector<InArray>& arrays,
                                                    const std::vector<const RowMap*>& maps, int dtype, uint32_t tensors,
                                                    uint32_t period, uint32_t groups) {
  const sz_dtype dt = static_cast<sz_dtype>(dtype);
  const size_t hsize = sz_symbol_histogram_size(dt, tensors, period);
  const size_t fsize = sz_symbol_table_file_size(dt, tensors, period, groups);
  if (hsize == 0 || fsize == 0 || (!maps.empty() && maps.size() != arrays.size()))
    return {SZ_ERROR_INVALID_ARGUMENT, 0.0, nb::bytes("", 0)};
  std::vector<uint32_t> counts;
  std::string file(fsize, '\0');
  size_t size = 0;
  double bits = 0.0;
  auto add = [&](uint32_t* c, size_t i, const void* v, uint64_t tokens) {
    return sz_symbol_histogram_add_paired(c, dt, tensors, period, v, tokens, maps.empty() ? nullptr : &maps[i]->map);
  };
  sz_status st = kv_histograms(arrays, dt, tensors, period, hsize, add, &counts);
  if (st == SZ_OK) {
    nb::gil_scoped_release release;
    st = sz_symbol_calibrate(counts.data(), dt, tensors, period, groups, file.data(), file.size(), &size, &bits);
  }
  if (st != SZ_OK) return {static_cast<int>(st), 0.0, nb::bytes("", 0)};
  return {static_cast<int>(st), bits, nb::bytes(file.data(), size)};
}


std::tuple<int, size_t> compress_entropy(const InArray& src, uint64_t n_values, int dtype, const SymbolTable& table,
                                         uint32_t tensor, unsigned chunk_log2, unsigned flags, const OutArray& dst,
                                         bool reference, const RowMap* row_map) {
  const Raw s = raw_view(src, "src", Where::kHost);
  const Raw d = raw_view(dst, "dst", Where::kHost);
  const size_t vsize = sz_dtype_size(static_cast<sz_dtype>(dtype));
  if (vsize == 0) return {SZ_ERROR_UNSUPPORTED_DTYPE, 0};
  if (n_values > s.nbytes / vsize) throw nb::value_error("src: fewer bytes than n_values values");
  const sz_params p = params_from(chunk_log2, flags, 1);
  size_t size = 0;
  sz_status st;
  {
    nb::gil_scoped_release release;
    void* out = const_cast<void*>(d.ptr);
    const sz_row_map* m = row_map_of(row_map);
    st = reference ? sz_compress_entropy_paired_reference(s.ptr, n_values, static_cast<sz_dtype>(dtype), &table.table,
                                                          tensor, m, &p, out, d.nbytes, &size)
                   : sz_compress_entropy_paired(s.ptr, n_values, static_cast<sz_dtype>(dtype), &table.table, tensor,
                                                m, &p, out, d.nbytes, &size);
  }
  return {static_cast<int>(st), size};
}

std::tuple<int, size_t> decompress_entropy(const InArray& src, const SymbolTable& table, const OutArray& dst,
                                           unsigned threads, bool reference, const RowMap* row_map) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  const Raw d = raw_view(dst, "out", Where::kHost);
  size_t size = 0;
  sz_status st;
  {
    nb::gil_scoped_release release;
    void* out = const_cast<void*>(d.ptr);
    const sz_row_map* m = row_map_of(row_map);
    st = reference ? sz_decompress_entropy_paired_reference(s.ptr, s.nbytes, &table.table, m, out, d.nbytes, &size)
                   : sz_decompress_entropy_paired(s.ptr, s.nbytes, &table.table, m, out, d.nbytes, &size, threads);
  }
  return {static_cast<int>(st), size};
}

// ---- row maps (docs/FORMAT.md §5.4) and paired frames (§4.10.6) ----------------------------------------------------

// (status, RowMap or None) of a row map file that must be exactly the map (bytes after it: SZ_ERROR_CORRUPT).
std::tuple<int, nb::object> row_map_parse(const InArray& src) {
  const Raw s = raw_view(src, "data", Where::kHost);
  auto m = std::make_unique<RowMap>();
  const uint8_t* p = static_cast<const uint8_t*>(s.ptr);
  m->bytes.assign(p, p + s.nbytes);
  sz_status st = sz_row_map_parse(m->bytes.data(), m->bytes.size(), &m->map);
  if (st == SZ_OK && sz_row_map_file_size(m->map.rows) != m->bytes.size()) st = SZ_ERROR_CORRUPT;
  if (st != SZ_OK) return {static_cast<int>(st), nb::none()};
  return {static_cast<int>(st), nb::cast(m.release(), nb::rv_policy::take_ownership)};
}

// (status, file bytes) of the row map of `rows` rows built from token ids (u32 each) or from rows of row_bytes bytes.
std::tuple<int, nb::bytes> row_map_build(const InArray& src, uint64_t rows, uint64_t row_bytes, bool tokens) {
  const Raw s = raw_view(src, tokens ? "tokens" : "rows", Where::kHost);
  const uint64_t need = tokens ? 4 * rows : rows * row_bytes;
  if (s.nbytes < need) throw nb::value_error(tokens ? "tokens: fewer than rows ids" : "rows: fewer bytes than rows");
  const size_t fsize = sz_row_map_file_size(rows), wsize = sz_row_map_workspace_size(rows);
  if (fsize == 0 || (!tokens && row_bytes == 0)) return {SZ_ERROR_INVALID_ARGUMENT, nb::bytes("", 0)};
  std::string file(fsize, '\0');
  std::vector<uint8_t> ws(wsize);
  size_t size = 0;
  sz_status st;
  {
    nb::gil_scoped_release release;
    st = tokens ? sz_row_map_from_tokens(static_cast<const uint32_t*>(s.ptr), rows, ws.data(), ws.size(),
                                         file.data(), file.size(), &size)
                : sz_row_map_from_rows(s.ptr, rows, (size_t)row_bytes, ws.data(), ws.size(), file.data(), file.size(),
                                       &size);
  }
  if (st != SZ_OK) return {static_cast<int>(st), nb::bytes("", 0)};
  return {static_cast<int>(st), nb::bytes(file.data(), size)};
}

// (status, table id, tensor, period) of a version 3 frame's header.
std::tuple<int, uint64_t, uint32_t, uint32_t> frame_table_ref(const InArray& src) {
  const Raw s = raw_view(src, "buffer", Where::kHost);
  uint64_t id = 0;
  uint32_t tensor = 0, period = 0;
  const sz_status st = sz_frame_table_ref(s.ptr, s.nbytes, &id, &tensor, &period);
  return {static_cast<int>(st), id, tensor, period};
}

// ---- CUDA codec: every call is enqueued on the caller's stream; outputs and workspace come from the caller -------

std::tuple<int, size_t> cuda_compress_workspace_size(uint64_t n_values, int dtype, unsigned chunk_log2,
                                                     unsigned flags) {
  const sz_params p = params_from(chunk_log2, flags, 1);
  size_t ws = 0;
  const sz_status st = sz_cuda_compress_workspace_size(n_values, static_cast<sz_dtype>(dtype), &p, &ws);
  return {static_cast<int>(st), ws};
}

// The device buffers of a GPU compress call, checked (src holds n_values values, frame_size 8 bytes); dtype_ok is
// false for an unknown dtype, which the call reports as a status.
struct EncodeViews {
  Raw s, d, w, fs;
  bool dtype_ok;
};
EncodeViews encode_views(const InArray& src, uint64_t n_values, int dtype, const OutArray& dst,
                         const OutArray& workspace, const OutArray& frame_size) {
  EncodeViews v{raw_view(src, "src", Where::kDevice), raw_view(dst, "dst", Where::kDevice),
                raw_view(workspace, "workspace", Where::kDevice), raw_view(frame_size, "frame_size", Where::kDevice),
                true};
  if (v.fs.nbytes < sizeof(uint64_t)) throw nb::value_error("frame_size: needs 8 bytes");
  const size_t vsize = sz_dtype_size(static_cast<sz_dtype>(dtype));
  if (vsize == 0) {
    v.dtype_ok = false;
  } else if (n_values > v.s.nbytes / vsize) {
    throw nb::value_error("src: fewer bytes than n_values values");
  }
  return v;
}

int cuda_compress(const InArray& src, uint64_t n_values, int dtype, nb::handle codebook, unsigned chunk_log2,
                  unsigned flags, const OutArray& dst, const OutArray& workspace, const OutArray& frame_size,
                  uintptr_t stream) {
  const EncodeViews v = encode_views(src, n_values, dtype, dst, workspace, frame_size);
  if (!v.dtype_ok) return SZ_ERROR_UNSUPPORTED_DTYPE;
  sz_codebook cb;
  const sz_codebook* cbp = codebook_from(codebook, &cb) ? &cb : nullptr;
  const sz_params p = params_from(chunk_log2, flags, 1);
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_compress(v.s.ptr, n_values, static_cast<sz_dtype>(dtype), cbp, &p,
                                           const_cast<void*>(v.d.ptr), v.d.nbytes, const_cast<void*>(v.w.ptr),
                                           v.w.nbytes, static_cast<uint64_t*>(const_cast<void*>(v.fs.ptr)), nullptr,
                                           stream_from(stream)));
}

std::tuple<int, size_t> cuda_decompress_workspace_size(size_t src_size, size_t dst_capacity) {
  size_t ws = 0;
  const sz_status st = sz_cuda_decompress_workspace_size(src_size, dst_capacity, &ws);
  return {static_cast<int>(st), ws};
}

// dst_size: None, or a device array of 8 bytes that receives the bytes written (0 on error).
int cuda_decompress(const InArray& src, const OutArray& dst, const OutArray& workspace, const OutArray& status,
                    uintptr_t stream, nb::handle dst_size) {
  const Raw s = raw_view(src, "buffer", Where::kDevice);
  const Raw d = raw_view(dst, "out", Where::kDevice);
  const Raw w = raw_view(workspace, "workspace", Where::kDevice);
  const Raw ds = raw_view(status, "status", Where::kDevice);
  if (ds.nbytes < sizeof(int32_t)) throw nb::value_error("status: needs 4 bytes");
  uint64_t* size_out = nullptr;
  if (!dst_size.is_none()) {
    const Raw z = raw_view(nb::cast<OutArray>(dst_size), "dst_size", Where::kDevice);
    if (z.nbytes < sizeof(uint64_t)) throw nb::value_error("dst_size: needs 8 bytes");
    size_out = static_cast<uint64_t*>(const_cast<void*>(z.ptr));
  }
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_decompress(s.ptr, s.nbytes, const_cast<void*>(d.ptr), d.nbytes,
                                             const_cast<void*>(w.ptr), w.nbytes,
                                             static_cast<int32_t*>(const_cast<void*>(ds.ptr)), size_out,
                                             stream_from(stream)));
}

// ---- GPU-to-GPU hand-off: word `index` of a device array of uint64 flags (the caller's, or a peer's by IPC) --------

uint64_t* flag_word(const Raw& f, uint64_t index) {
  if (reinterpret_cast<uintptr_t>(f.ptr) % 8 != 0) throw nb::value_error("flags: not 8-byte aligned");
  if (index >= f.nbytes / sizeof(uint64_t)) throw nb::index_error("flags: index past the array's 8-byte words");
  return static_cast<uint64_t*>(const_cast<void*>(f.ptr)) + index;
}

int cuda_signal(const OutArray& flags, uint64_t index, uint64_t value, uintptr_t stream) {
  uint64_t* f = flag_word(raw_view(flags, "flags", Where::kDevice), index);
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_signal(f, value, stream_from(stream)));
}

int cuda_wait(const InArray& flags, uint64_t index, uint64_t value, uintptr_t stream) {
  const uint64_t* f = flag_word(raw_view(flags, "flags", Where::kDevice), index);
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_wait(f, value, stream_from(stream)));
}

// The device image of a symbol table (sz_cuda_symbol_table_image, host code in every build): (status, bytes).
std::tuple<int, nb::bytes> symbol_table_image(const SymbolTable& t) {
  const size_t n = sz_cuda_symbol_table_image_size(&t.table);
  if (n == 0) return {static_cast<int>(SZ_ERROR_BAD_CODEBOOK), nb::bytes("", 0)};
  std::vector<uint8_t> buf(n);
  size_t got = 0;
  const sz_status st = sz_cuda_symbol_table_image(&t.table, buf.data(), buf.size(), &got);
  return {static_cast<int>(st), nb::bytes(reinterpret_cast<const char*>(buf.data()), st == SZ_OK ? got : 0)};
}

std::tuple<int, size_t> cuda_compress_entropy_workspace_size(uint64_t n_values, int dtype, unsigned chunk_log2,
                                                             unsigned flags) {
  const sz_params p = params_from(chunk_log2, flags, 1);
  size_t ws = 0;
  const sz_status st = sz_cuda_compress_entropy_workspace_size(n_values, static_cast<sz_dtype>(dtype), &p, &ws);
  return {static_cast<int>(st), ws};
}

// Tensor `tensor` of a symbol table, n values in device memory, coded on the GPU into a version 3 frame with the
// table's device image: the CPU coder's bytes. The frame size goes to frame_size (0: the kernel found the image or
// the workspace unusable).
int cuda_compress_entropy(const InArray& src, uint64_t n_values, int dtype, const InArray& image, uint32_t tensor,
                          unsigned chunk_log2, unsigned flags, const OutArray& dst, const OutArray& workspace,
                          const OutArray& frame_size, uintptr_t stream) {
  const EncodeViews v = encode_views(src, n_values, dtype, dst, workspace, frame_size);
  const Raw im = raw_view(image, "table image", Where::kDevice);
  if (!v.dtype_ok) return SZ_ERROR_UNSUPPORTED_DTYPE;
  const sz_params p = params_from(chunk_log2, flags, 1);
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_compress_entropy(v.s.ptr, n_values, static_cast<sz_dtype>(dtype), im.ptr,
                                                   im.nbytes, tensor, &p, const_cast<void*>(v.d.ptr), v.d.nbytes,
                                                   const_cast<void*>(v.w.ptr), v.w.nbytes,
                                                   static_cast<uint64_t*>(const_cast<void*>(v.fs.ptr)), nullptr,
                                                   stream_from(stream)));
}

// A version 3 frame in device memory decoded with the table's device image (also in device memory).
int cuda_decompress_entropy(const InArray& src, const InArray& image, const OutArray& dst, const OutArray& workspace,
                            const OutArray& status, uintptr_t stream) {
  const Raw s = raw_view(src, "buffer", Where::kDevice);
  const Raw im = raw_view(image, "table image", Where::kDevice);
  const Raw d = raw_view(dst, "out", Where::kDevice);
  const Raw w = raw_view(workspace, "workspace", Where::kDevice);
  const Raw ds = raw_view(status, "status", Where::kDevice);
  if (ds.nbytes < sizeof(int32_t)) throw nb::value_error("status: needs 4 bytes");
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_decompress_entropy(s.ptr, s.nbytes, im.ptr, im.nbytes, const_cast<void*>(d.ptr),
                                                     d.nbytes, const_cast<void*>(w.ptr), w.nbytes,
                                                     static_cast<int32_t*>(const_cast<void*>(ds.ptr)), nullptr,
                                                     stream_from(stream)));
}

std::tuple<int, size_t> cuda_compress_pages_workspace_size(uint32_t n_pages, uint64_t page_values, int dtype,
                                                           unsigned chunk_log2, unsigned flags) {
  const sz_params p = params_from(chunk_log2, flags, 1);
  size_t ws = 0;
  const sz_status st =
      sz_cuda_compress_pages_workspace_size(n_pages, page_values, static_cast<sz_dtype>(dtype), &p, &ws);
  return {static_cast<int>(st), ws};
}

// A page-pointer table: a 1-D device array of at least n_pages 64-bit integers (int64: what torch computes them in,
// or uint64), each a device address. Checked before the device, so a wrong table is refused on any machine.
Raw pointer_table(const InArray& page_ptrs, uint32_t n_pages) {
  const nb::dlpack::dtype dt = page_ptrs.dtype();
  if (dt != nb::dtype<int64_t>() && dt != nb::dtype<uint64_t>()) {
    throw nb::type_error("page pointers: expected an int64 or uint64 array of device addresses");
  }
  if (page_ptrs.ndim() != 1) throw nb::value_error("page pointers: expected a 1-D array");
  if (page_ptrs.shape(0) < n_pages) {
    throw nb::value_error(("page pointers: " + std::to_string(page_ptrs.shape(0)) + " addresses for " +
                           std::to_string(n_pages) + " pages").c_str());
  }
  return raw_view(page_ptrs, "page pointers", Where::kDevice);
}

// page_ptrs: the device page-pointer table of n_pages pages (pointer_table); the Python layer builds it on the
// device (base address + block id * page stride).
int cuda_compress_pages(const InArray& page_ptrs, uint32_t n_pages, uint64_t page_values, int dtype,
                        nb::handle codebook, unsigned chunk_log2, unsigned flags, const OutArray& dst,
                        const OutArray& workspace, const OutArray& frame_size, uintptr_t stream) {
  const Raw pp = pointer_table(page_ptrs, n_pages);
  const Raw d = raw_view(dst, "dst", Where::kDevice);
  const Raw w = raw_view(workspace, "workspace", Where::kDevice);
  const Raw fs = raw_view(frame_size, "frame_size", Where::kDevice);
  if (fs.nbytes < sizeof(uint64_t)) throw nb::value_error("frame_size: needs 8 bytes");
  sz_codebook cb;
  const sz_codebook* cbp = codebook_from(codebook, &cb) ? &cb : nullptr;
  const sz_params p = params_from(chunk_log2, flags, 1);
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_compress_pages(static_cast<const void* const*>(pp.ptr), n_pages, page_values,
                                                 static_cast<sz_dtype>(dtype), cbp, &p, const_cast<void*>(d.ptr),
                                                 d.nbytes, const_cast<void*>(w.ptr), w.nbytes,
                                                 static_cast<uint64_t*>(const_cast<void*>(fs.ptr)), nullptr,
                                                 stream_from(stream)));
}

int cuda_decompress_pages(const InArray& src, const InArray& page_ptrs, uint32_t n_pages, uint64_t page_values,
                          const OutArray& workspace, const OutArray& status, uintptr_t stream) {
  const Raw pp = pointer_table(page_ptrs, n_pages);
  const Raw s = raw_view(src, "buffer", Where::kDevice);
  const Raw w = raw_view(workspace, "workspace", Where::kDevice);
  const Raw ds = raw_view(status, "status", Where::kDevice);
  if (ds.nbytes < sizeof(int32_t)) throw nb::value_error("status: needs 4 bytes");
  nb::gil_scoped_release release;
  return static_cast<int>(sz_cuda_decompress_pages(s.ptr, s.nbytes,
                                                   static_cast<void* const*>(const_cast<void*>(pp.ptr)), n_pages,
                                                   page_values, const_cast<void*>(w.ptr), w.nbytes,
                                                   static_cast<int32_t*>(const_cast<void*>(ds.ptr)),
                                                   stream_from(stream)));
}

}  // namespace

#ifdef SPLITZIP_PY_TRANSFER
void register_transfer(nb::module_& parent);  // transfer_ext.cpp: the submodule _splitzip.transfer
#endif

NB_MODULE(_splitzip, m) {
  m.doc() = "Low-level binding of the splitzip C ABI; use the splitzip package instead.";

  m.attr("FORMAT_VERSION") = SZ_FORMAT_VERSION;
  m.attr("DEFAULT_CHUNK_LOG2") = SZ_DEFAULT_CHUNK_LOG2;
  m.attr("MIN_CHUNK_LOG2") = SZ_MIN_CHUNK_LOG2;
  m.attr("MAX_CHUNK_LOG2") = SZ_MAX_CHUNK_LOG2;
  m.attr("FLAG_CHECKSUMS") = SZ_FLAG_CHECKSUMS;
  m.attr("FLAG_LANE_HASH") = SZ_FLAG_LANE_HASH;
  m.attr("FRAME_HEADER_SIZE") = SZ_FRAME_HEADER_SIZE;

  m.def("version", [] { return std::string(sz_version_string()); });
  m.def("version_number", [] { return sz_version_number(); });
  m.def("cuda_available", [] { return sz_cuda_available() != 0; });
  m.def("status_name", [](int s) { return std::string(sz_status_name(static_cast<sz_status>(s))); });
  m.def("status_message", [](int s) {
    const char* msg = sz_status_message(static_cast<sz_status>(s));
    return std::string(msg ? msg : "");
  });
  m.def("dtype_size", [](int d) { return sz_dtype_size(static_cast<sz_dtype>(d)); });
  m.def("dtype_exponent_bits", [](int d) { return sz_dtype_exponent_bits(static_cast<sz_dtype>(d)); });
  m.def("dtype_name", [](int d) -> nb::object {
    const char* n = sz_dtype_name(static_cast<sz_dtype>(d));
    if (!n) return nb::none();
    return nb::str(n);
  });
  m.def("dtype_from_name", [](const std::string& name) {
    sz_dtype d = SZ_DTYPE_BF16;
    const sz_status st = sz_dtype_from_name(name.c_str(), &d);
    return std::make_tuple(static_cast<int>(st), static_cast<int>(d));
  });
  m.def("compress_bound", [](uint64_t n, int d) { return sz_compress_bound(n, static_cast<sz_dtype>(d)); });

  m.def("compress", &compress, nb::arg("src").noconvert(), nb::arg("n_values"), nb::arg("dtype"),
        nb::arg("codebook").none(), nb::arg("chunk_log2"), nb::arg("flags"), nb::arg("threads"),
        nb::arg("dst").noconvert(), nb::arg("reference") = false);
  m.def("decompress", &decompress, nb::arg("src").noconvert(), nb::arg("dst").noconvert(), nb::arg("threads"),
        nb::arg("reference") = false);
  m.def("frame_info", &frame_info, nb::arg("src").noconvert());
  m.attr("CONTAINER_HEADER_SIZE") = SZ_CONTAINER_HEADER_SIZE;
  m.attr("CONTAINER_ALIGN") = SZ_CONTAINER_ALIGN;
  m.attr("MAX_NDIM") = SZ_MAX_NDIM;
  m.def("container_items", &container_items, nb::arg("src").noconvert());
  m.def("is_container", [](const InArray& src) {
    const Raw s = raw_view(src, "buffer", Where::kHost);
    return sz_is_container(s.ptr, s.nbytes) != 0;
  }, nb::arg("src").noconvert());
  m.def("container_header", &container_header);
  m.def("container_index", &container_index, nb::arg("entries"), nb::arg("index_offset"));

  m.def("default_codebook", &default_codebook);
  m.def("codebook_validate", &codebook_validate);
  m.def("codebook_serialize", &codebook_serialize);
  m.def("codebook_deserialize", &codebook_deserialize);
  m.def("codebook_save", &codebook_save);
  m.def("codebook_load", &codebook_load);
  m.def("calibrate", &calibrate, nb::arg("arrays"), nb::arg("dtype"));
  m.attr("FORMAT_VERSION_CHANNELS") = SZ_FORMAT_VERSION_CHANNELS;
  m.attr("MAX_PERIOD") = SZ_MAX_PERIOD;
  m.attr("MAX_TENSORS") = SZ_MAX_TENSORS;
  m.def("channel_calibrate", &channel_calibrate, nb::arg("arrays"), nb::arg("dtype"), nb::arg("tensors"),
        nb::arg("period"), nb::arg("code_bits"));
  m.def("channel_book_serialize", &channel_book_serialize, nb::arg("book"));
  m.def("channel_book_parse", &channel_book_parse, nb::arg("data").noconvert());
  m.def("compress_channels", &compress_channels, nb::arg("src").noconvert(), nb::arg("n_values"), nb::arg("dtype"),
        nb::arg("book"), nb::arg("tensor"), nb::arg("chunk_log2"), nb::arg("flags"), nb::arg("threads"),
        nb::arg("dst").noconvert(), nb::arg("reference") = false);
  m.def("decompress_book", &decompress_book, nb::arg("src").noconvert(), nb::arg("book"),
        nb::arg("dst").noconvert(), nb::arg("threads"), nb::arg("reference") = false);
  m.def("frame_book_ref", &frame_book_ref, nb::arg("src").noconvert());

  m.attr("FORMAT_VERSION_ENTROPY") = SZ_FORMAT_VERSION_ENTROPY;
  m.attr("ENTROPY_CHUNK_LOG2") = SZ_ENTROPY_CHUNK_LOG2;
  m.def("entropy_chunk_log2", &sz_entropy_chunk_log2, nb::arg("n_values"));
  m.attr("MAX_GROUPS") = SZ_MAX_GROUPS;
  nb::class_<SymbolTable>(m, "SymbolTable", "A parsed and prepared symbol table file (use splitzip.SymbolTable).")
      .def_prop_ro("dtype", [](const SymbolTable& t) { return static_cast<int>(t.table.dtype); })
      .def_prop_ro("symbol_bits", [](const SymbolTable& t) { return static_cast<int>(t.table.symbol_bits); })
      .def_prop_ro("period", [](const SymbolTable& t) { return t.table.period; })
      .def_prop_ro("tensors", [](const SymbolTable& t) { return t.table.tensors; })
      .def_prop_ro("groups", [](const SymbolTable& t) { return t.table.groups; })
      .def_prop_ro("id", [](const SymbolTable& t) { return t.table.id; })
      .def_prop_ro("nbytes", [](const SymbolTable& t) { return t.bytes.size(); })
      .def("to_bytes", [](const SymbolTable& t) {
        return nb::bytes(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
      })
      .def("group_of_bytes", [](const SymbolTable& t) {
        return nb::bytes(reinterpret_cast<const char*>(t.table.group_of), 2 * (size_t)t.table.tensors * t.table.period);
      })
      .def("freq_bytes", [](const SymbolTable& t) {
        return nb::bytes(reinterpret_cast<const char*>(t.table.freq),
                         2 * (size_t)t.table.groups * ((size_t(1) << t.table.symbol_bits) + 1));
      });
  m.def("symbol_table_parse", &symbol_table_parse, nb::arg("data").noconvert());
  m.def("symbol_calibrate", &symbol_calibrate, nb::arg("arrays"), nb::arg("maps"), nb::arg("dtype"),
        nb::arg("tensors"), nb::arg("period"), nb::arg("groups"));
  m.def("compress_entropy", &compress_entropy, nb::arg("src").noconvert(), nb::arg("n_values"), nb::arg("dtype"),
        nb::arg("table"), nb::arg("tensor"), nb::arg("chunk_log2"), nb::arg("flags"), nb::arg("dst").noconvert(),
        nb::arg("reference") = false, nb::arg("row_map").none() = nb::none());
  m.def("decompress_entropy", &decompress_entropy, nb::arg("src").noconvert(), nb::arg("table"),
        nb::arg("dst").noconvert(), nb::arg("threads"), nb::arg("reference") = false,
        nb::arg("row_map").none() = nb::none());
  nb::class_<RowMap>(m, "RowMap", "A parsed row map file (use splitzip.RowMap).")
      .def_prop_ro("rows", [](const RowMap& r) { return r.map.rows; })
      .def_prop_ro("id", [](const RowMap& r) { return r.map.id; })
      .def("to_bytes", [](const RowMap& r) {
        return nb::bytes(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
      })
      .def("pair_bytes", [](const RowMap& r) {
        return nb::bytes(reinterpret_cast<const char*>(r.map.pair), 4 * (size_t)r.map.rows);
      });
  m.def("row_map_parse", &row_map_parse, nb::arg("data").noconvert());
  m.def("row_map_build", &row_map_build, nb::arg("src").noconvert(), nb::arg("rows"), nb::arg("row_bytes"),
        nb::arg("tokens"));
  m.def("frame_row_map_id", [](const InArray& src) {
    const Raw s = raw_view(src, "buffer", Where::kHost);
    uint64_t id = 0;
    const sz_status st = sz_frame_row_map_ref(s.ptr, s.nbytes, &id);
    return std::make_tuple(static_cast<int>(st), id);
  }, nb::arg("src").noconvert());
  m.def("frame_table_ref", &frame_table_ref, nb::arg("src").noconvert());

  m.def("cuda_compress_workspace_size", &cuda_compress_workspace_size);
  m.def("cuda_compress", &cuda_compress, nb::arg("src").noconvert(), nb::arg("n_values"), nb::arg("dtype"),
        nb::arg("codebook").none(), nb::arg("chunk_log2"), nb::arg("flags"), nb::arg("dst").noconvert(),
        nb::arg("workspace").noconvert(), nb::arg("frame_size").noconvert(), nb::arg("stream"));
  m.def("cuda_decompress_workspace_size", &cuda_decompress_workspace_size);
  m.def("cuda_decompress", &cuda_decompress, nb::arg("src").noconvert(), nb::arg("dst").noconvert(),
        nb::arg("workspace").noconvert(), nb::arg("status").noconvert(), nb::arg("stream"),
        nb::arg("dst_size").none() = nb::none());
  m.def("cuda_signal", &cuda_signal, nb::arg("flags").noconvert(), nb::arg("index"), nb::arg("value"),
        nb::arg("stream"));
  m.def("cuda_wait", &cuda_wait, nb::arg("flags").noconvert(), nb::arg("index"), nb::arg("value"), nb::arg("stream"));
  m.def("cuda_enable_peer_access", [](int peer) { return static_cast<int>(sz_cuda_enable_peer_access(peer)); },
        nb::arg("peer_device"));
  m.def("symbol_table_image", &symbol_table_image, nb::arg("table"));
  m.def("cuda_compress_entropy_workspace_size", &cuda_compress_entropy_workspace_size);
  m.def("cuda_compress_entropy", &cuda_compress_entropy, nb::arg("src").noconvert(), nb::arg("n_values"),
        nb::arg("dtype"), nb::arg("image").noconvert(), nb::arg("tensor"), nb::arg("chunk_log2"), nb::arg("flags"),
        nb::arg("dst").noconvert(), nb::arg("workspace").noconvert(), nb::arg("frame_size").noconvert(),
        nb::arg("stream"));
  m.def("cuda_decompress_entropy", &cuda_decompress_entropy, nb::arg("src").noconvert(), nb::arg("image").noconvert(),
        nb::arg("dst").noconvert(), nb::arg("workspace").noconvert(), nb::arg("status").noconvert(),
        nb::arg("stream"));
  m.def("cuda_compress_pages_workspace_size", &cuda_compress_pages_workspace_size);
  m.def("cuda_compress_pages", &cuda_compress_pages, nb::arg("page_ptrs").noconvert(), nb::arg("n_pages"),
        nb::arg("page_values"), nb::arg("dtype"), nb::arg("codebook").none(), nb::arg("chunk_log2"),
        nb::arg("flags"), nb::arg("dst").noconvert(), nb::arg("workspace").noconvert(),
        nb::arg("frame_size").noconvert(), nb::arg("stream"));
  m.def("cuda_decompress_pages", &cuda_decompress_pages, nb::arg("src").noconvert(),
        nb::arg("page_ptrs").noconvert(), nb::arg("n_pages"), nb::arg("page_values"),
        nb::arg("workspace").noconvert(), nb::arg("status").noconvert(), nb::arg("stream"));
#ifdef SPLITZIP_PY_TRANSFER
  register_transfer(m);
#endif
}
