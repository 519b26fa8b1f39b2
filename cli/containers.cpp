// containers.cpp — containers written and read item by item (see containers.h). Large frames are written from the
// frames of their pieces and read as frames of their pieces with the library's frame-piece calls
// (sz_frame_builder_*, sz_frame_slice*), which know where each section of a frame lies (docs/FORMAT.md §4).
#include "containers.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>

#include <sys/mman.h>
#include <unistd.h>

namespace splitzip_cli {

void Source::read(uint64_t offset, uint8_t* dst, size_t n) const {
  if (n == 0) return;
  if (data_ != nullptr) {
    std::memcpy(dst, data_ + offset, n);
  } else {
    file_->read_at(offset, dst, n);
  }
}

namespace {

uint64_t align64(uint64_t x) { return (x + SZ_CONTAINER_ALIGN - 1) / SZ_CONTAINER_ALIGN * SZ_CONTAINER_ALIGN; }

// Stored items and spooled output are copied in blocks of this size.
constexpr size_t kCopyBlock = size_t(4) << 20;

// Throws unless the codebook the user gave (if any) is used by a frame of the plan.
void check_codebook_used(const InputPlan& plan, const CodebookChoice& codebooks, const std::string& file) {
  if (!codebooks.user) return;
  bool used = false;
  for (const Segment& s : plan.segments) used = used || (s.is_frame && uint8_t(s.dtype) == codebooks.user->dtype);
  if (used) return;
  std::string have;
  for (const Segment& s : plan.segments)
    if (s.is_frame) have = sz_dtype_name(s.dtype);
  throw CliError(file + ": the codebook is for " + sz_dtype_name(sz_dtype(codebooks.user->dtype)) +
                 " but the input holds " + (have.empty() ? std::string("no floating tensors") : have + " data"));
}

// Makes b hold at least n bytes (its contents are not kept).
void reserve(Buffer& b, uint64_t n) {
  if (b.size() < n) b = Buffer(size_t(n));
}

// The largest frame of a piece of kPieceBytes (one-byte values: the most chunks). The buffers of pieces and of the
// items no larger are allocated at these sizes once, uninitialised (untouched pages cost nothing), so no item
// makes them grow in steps.
uint64_t piece_frame_bound() { return sz_compress_bound(kPieceBytes, SZ_DTYPE_FP8_E4M3); }

// Writes the frame of segment `s` of src at `at` of sink, through the buffers in and frame (grown as needed, kept
// for the next frame); returns its size.
uint64_t write_frame(const Source& src, const Segment& s, const CodebookChoice& codebooks, const sz_params& params,
                     Cctx& ctx, Buffer& in, Buffer& frame, Sink& sink, uint64_t at, const std::string& what,
                     Progress* progress) {
  const size_t vb = sz_dtype_size(s.dtype);
  const uint64_t n = s.size / vb;
  const sz_codebook cb = codebooks.for_dtype(s.dtype);
  const uint64_t piece_values = kPieceBytes / vb;
  if (src.memory() != nullptr || n <= piece_values) {  // one call
    const uint8_t* values = src.memory() ? src.memory() + s.offset : nullptr;
    if (values == nullptr) {
      reserve(in, s.size);
      src.read(s.offset, in.data(), size_t(s.size));
      values = in.data();
    }
    reserve(frame, sz_compress_bound(n, s.dtype));
    size_t written = 0;
    check_status(sz_compress_cctx(ctx.p, values, n, s.dtype, &cb, &params, frame.data(), frame.size(), &written),
                 what);
    sink.write_at(at, frame.data(), written);
    if (progress) progress->advance(s.size);
    return written;
  }
  reserve(in, piece_values * vb);
  reserve(frame, sz_compress_bound(piece_values, s.dtype));
  sz_frame_builder builder;
  check_status(sz_frame_builder_begin(&builder, n), what);
  for (uint64_t v0 = 0; v0 < n; v0 += piece_values) {
    const uint64_t m = std::min(piece_values, n - v0);
    src.read(s.offset + v0 * vb, in.data(), size_t(m * vb));
    size_t written = 0;
    check_status(sz_compress_cctx(ctx.p, in.data(), m, s.dtype, &cb, &params, frame.data(), frame.size(), &written),
                 what);
    // The piece's chunk index is rebased in place onto the whole frame; then each section goes to its place.
    sz_frame_layout layout;
    check_status(sz_frame_layout_get(frame.data(), written, &layout), what);
    sz_frame_piece piece;
    check_status(sz_frame_builder_add(&builder, frame.data(), written, frame.data() + layout.index_offset,
                                      size_t(layout.index_size), &piece),
                 what);
    for (const sz_frame_span* span : {&piece.index, &piece.checksums, &piece.rest, &piece.exponents})
      sink.write_at(at + span->frame_offset, frame.data() + span->piece_offset, size_t(span->size));
    if (progress) progress->advance(m * vb);
  }
  uint8_t header[SZ_FRAME_HEADER_SIZE];
  uint64_t frame_size = 0;
  check_status(sz_frame_builder_finish(&builder, header, sizeof header, &frame_size), what);
  sink.write_at(at, header, sizeof header);
  return frame_size;
}

class FileSink : public Sink {
 public:
  explicit FileSink(OutputFile& out) : out_(out) {}
  void write_at(uint64_t offset, const uint8_t* data, size_t size) override { out_.write_at(offset, data, size); }

 private:
  OutputFile& out_;
};

// An unlinked temporary file, copied to the output at the end.
class SpoolSink : public Sink {
 public:
  SpoolSink() : f_(std::tmpfile()) {
    if (f_ == nullptr) throw CliError(std::string("cannot create a temporary file: ") + std::strerror(errno));
  }
  ~SpoolSink() override { std::fclose(f_); }
  void write_at(uint64_t offset, const uint8_t* data, size_t size) override {
    while (size > 0) {
      const ssize_t w = ::pwrite(fileno(f_), data, size, off_t(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw CliError(std::string("cannot write a temporary file: ") + std::strerror(errno));
      data += w;
      offset += uint64_t(w);
      size -= size_t(w);
    }
  }
  void copy_to(OutputFile& out, uint64_t size) {
    Buffer block(size_t(std::min<uint64_t>(size, kCopyBlock)));
    for (uint64_t pos = 0; pos < size;) {
      const size_t want = size_t(std::min<uint64_t>(size - pos, block.size()));
      const ssize_t r = ::pread(fileno(f_), block.data(), want, off_t(pos));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw CliError(std::string("cannot read a temporary file: ") + std::strerror(r < 0 ? errno : EIO));
      out.write(block.data(), size_t(r));
      pos += uint64_t(r);
    }
  }

 private:
  std::FILE* f_;
};

}  // namespace

uint64_t write_container(const Source& src, const InputPlan& plan, const CodebookChoice& codebooks,
                         const sz_params& params, const std::string& file, Sink& sink, Progress* progress) {
  check_codebook_used(plan, codebooks, file);
  uint64_t total_in = 0;
  for (const Segment& s : plan.segments) total_in += s.size;
  if (progress) progress->phase("compressing", file, total_in);
  Cctx ctx(params.threads);
  uint8_t header[SZ_CONTAINER_HEADER_SIZE];
  check_status(sz_container_write_header(header, sizeof header), file);
  sink.write_at(0, header, sizeof header);
  // Every item at a 64-byte aligned offset, then index and footer right after the last one.
  std::vector<sz_item> items;
  uint64_t pos = SZ_CONTAINER_HEADER_SIZE;
  Buffer in{kPieceBytes}, frame{size_t(piece_frame_bound())};  // for every frame and stored item
  for (const Segment& s : plan.segments) {
    const uint64_t start = align64(pos);
    sz_item it;
    std::memset(&it, 0, sizeof it);
    it.kind = uint8_t(s.is_frame ? SZ_ITEM_FRAME : SZ_ITEM_STORED);
    it.dtype = uint8_t(s.is_frame ? s.dtype : 0);
    it.ndim = uint8_t(s.has_shape ? s.shape.size() : 0);
    for (size_t d = 0; d < it.ndim; ++d) it.shape[d] = s.shape[d];
    it.name = s.name.data();
    it.name_size = uint16_t(s.name.size());
    it.original_offset = s.offset;
    it.original_size = s.size;
    it.data_offset = start;
    if (s.is_frame) {
      it.data_size = write_frame(src, s, codebooks, params, ctx, in, frame, sink, start,
                                 file + ": tensor '" + printable_name(s.name) + "'", progress);
    } else if (src.memory() != nullptr) {
      sink.write_at(start, src.memory() + s.offset, size_t(s.size));
      it.data_size = s.size;
      if (progress) progress->advance(s.size);
    } else {
      for (uint64_t done = 0; done < s.size;) {
        const size_t n = size_t(std::min<uint64_t>(s.size - done, kCopyBlock));
        reserve(in, n);
        src.read(s.offset + done, in.data(), n);
        sink.write_at(start + done, in.data(), n);
        done += n;
        if (progress) progress->advance(n);
      }
      it.data_size = s.size;
    }
    pos = start + it.data_size;
    items.push_back(it);
  }
  const Buffer index = container_index(items, pos, file);
  sink.write_at(pos, index.data(), index.size());
  return pos + index.size();
}

uint64_t write_container(const Source& src, const InputPlan& plan, const CodebookChoice& codebooks,
                         const sz_params& params, const std::string& file, OutputFile& out, Progress* progress) {
  if (out.seekable()) {
    FileSink sink(out);
    return write_container(src, plan, codebooks, params, file, sink, progress);
  }
  SpoolSink spool;
  const uint64_t size = write_container(src, plan, codebooks, params, file, spool, progress);
  spool.copy_to(out, size);
  return size;
}

// ---- reading -----------------------------------------------------------------------------------------------------

ContainerImage::ContainerImage(const Source& src, bool frame_stats) : size_(src.size()) {
  if (src.memory() != nullptr) {
    data_ = src.memory();
    return;
  }
  map_ = mmap(nullptr, size_t(size_), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw CliError(std::string("cannot map ") + std::to_string(size_) + " bytes of address space: " +
                   std::strerror(errno));
  }
  uint8_t* image = static_cast<uint8_t*>(map_);
  data_ = image;
  // Reads [offset, offset + n) of the file into the image, clipped to the file.
  auto load = [&](uint64_t offset, uint64_t n) {
    if (offset >= size_) return;
    src.read(offset, image + offset, size_t(std::min(n, size_ - offset)));
  };
  load(0, SZ_CONTAINER_HEADER_SIZE);
  // The footer says where the index lies, the index where the items do (sz_container_locate_index,
  // sz_container_index_items); a container they reject is left for sz_container_items to reject with its status.
  if (size_ < SZ_CONTAINER_FOOTER_SIZE) return;
  load(size_ - SZ_CONTAINER_FOOTER_SIZE, SZ_CONTAINER_FOOTER_SIZE);
  uint64_t index_offset = 0, index_size = 0;
  if (sz_container_locate_index(image + size_ - SZ_CONTAINER_FOOTER_SIZE, SZ_CONTAINER_FOOTER_SIZE, size_,
                                &index_offset, &index_size) != SZ_OK)
    return;
  load(index_offset, index_size);
  uint32_t count = 0;
  if (sz_container_index_items(image + index_offset, size_t(index_size), size_, nullptr, 0, &count) != SZ_OK) return;
  std::vector<sz_item> items(count);
  if (sz_container_index_items(image + index_offset, size_t(index_size), size_, items.data(), count, &count) != SZ_OK)
    return;
  // Each item lies before the index (checked): channel books, symbol tables and row maps whole, frames' headers.
  for (const sz_item& it : items) {
    const uint8_t kind = it.kind;
    const uint64_t data_offset = it.data_offset, data_size = it.data_size;
    if (kind == SZ_ITEM_BOOK || kind == SZ_ITEM_TABLE || kind == SZ_ITEM_ROW_MAP) {
      load(data_offset, data_size);
    } else if (kind == SZ_ITEM_FRAME) {
      load(data_offset, std::min<uint64_t>(data_size, SZ_FRAME_HEADER_SIZE));
      sz_frame_info info;
      sz_frame_layout layout;
      if (!frame_stats || data_size < SZ_FRAME_HEADER_SIZE ||
          sz_frame_info_get(image + data_offset, SZ_FRAME_HEADER_SIZE, &info) != SZ_OK ||
          sz_frame_layout_get(image + data_offset, SZ_FRAME_HEADER_SIZE, &layout) != SZ_OK)
        continue;
      if (info.version == SZ_FORMAT_VERSION_ENTROPY)
        load(data_offset, data_size);
      else if (layout.index_offset < data_size)
        load(data_offset + layout.index_offset, std::min(layout.index_size, data_size - layout.index_offset));
    }
  }
}

ContainerImage::~ContainerImage() {
  if (map_ != nullptr) munmap(map_, size_t(size_));
}

namespace {

// Decodes the version 1 frame at [at, at + info.frame_size) of src piece by piece, as frames of their own, in the
// buffers frame and out (grown as needed).
void decode_pieces(const Source& src, uint64_t at, const sz_frame_info& info, Dctx& ctx, const std::string& what,
                   Buffer& frame, Buffer& out, const std::function<void(const uint8_t*, size_t)>& emit) {
  const sz_dtype dtype = sz_dtype(info.dtype);
  const size_t vb = sz_dtype_size(dtype);
  const uint64_t n = info.n_values, piece_values = kPieceBytes / vb;
  uint8_t header[SZ_FRAME_HEADER_SIZE];
  src.read(at, header, sizeof header);
  reserve(out, std::min(n, piece_values) * vb);
  reserve(frame, sz_compress_bound(std::min(n, piece_values), dtype));
  std::vector<uint8_t> index;
  for (uint64_t v0 = 0; v0 < n; v0 += piece_values) {
    const uint64_t m = std::min(piece_values, n - v0);
    // The index entries the piece needs, then its header and rebased index, then its other sections.
    sz_frame_piece piece;
    check_status(sz_frame_slice_locate(header, sizeof header, v0, m, &piece), what);
    index.resize(size_t(piece.index.size));
    src.read(at + piece.index.frame_offset, index.data(), index.size());
    check_status(sz_frame_slice(header, sizeof header, v0, m, index.data(), index.size(), frame.data(), frame.size(),
                                &piece),
                 what);
    for (const sz_frame_span* span : {&piece.checksums, &piece.rest, &piece.exponents})
      src.read(at + span->frame_offset, frame.data() + span->piece_offset, size_t(span->size));
    size_t written = 0;
    check_status(sz_decompress_dctx(ctx.p, frame.data(), size_t(piece.frame_size), out.data(), size_t(m * vb),
                                    &written),
                 what);
    if (written != m * vb) check_status(SZ_ERROR_CORRUPT, what);
    emit(out.data(), written);
  }
}

}  // namespace

uint64_t decompress_container(const Source& src, unsigned threads, const std::string& file, Progress* progress,
                              const std::function<void(const uint8_t*, size_t)>& emit) {
  ContainerImage image(src, false);
  const uint8_t* data = image.data();
  const uint64_t size = image.size();
  std::vector<sz_item> items = read_container_index(data, size_t(size), file);
  // Channel books, symbol tables and row maps (whole in the image, validated by read_container_index), found by the
  // id that version 2 and 3 frames name; tables prepared once.
  std::vector<sz_channel_book> books;
  std::vector<std::unique_ptr<LoadedTable>> tables;
  std::vector<sz_row_map> row_maps;
  for (const sz_item& it : items) {
    if (it.kind == SZ_ITEM_ROW_MAP) {
      sz_row_map m;
      check_status(sz_row_map_parse(data + it.data_offset, size_t(it.data_size), &m), file);
      row_maps.push_back(m);
    } else if (it.kind == SZ_ITEM_BOOK) {
      sz_channel_book b;
      check_status(sz_channel_book_parse(data + it.data_offset, size_t(it.data_size), &b), file);
      books.push_back(b);
    } else if (it.kind == SZ_ITEM_TABLE) {
      Buffer bytes{size_t(it.data_size)};
      std::memcpy(bytes.data(), data + it.data_offset, size_t(it.data_size));
      tables.push_back(load_symbol_table(std::move(bytes), file + ": item '" +
                                                                printable_name(std::string(it.name, it.name_size)) + "'"));
    }
  }
  uint64_t total = 0;
  for (const sz_item& it : items) total += it.original_size;
  // The original ranges tile [0, total) (sz_container_items checked it): in their order the file comes out in order.
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return items[a].original_offset < items[b].original_offset; });
  Dctx ctx(threads);
  Buffer in{size_t(piece_frame_bound())}, out{kPieceBytes};  // for every item
  for (size_t i : order) {
    const sz_item& it = items[i];
    const std::string what = file + ": item '" + printable_name(std::string(it.name, it.name_size)) + "'";
    if (it.original_offset + it.original_size > total || it.data_offset + it.data_size > size)
      check_status(SZ_ERROR_CORRUPT, what);
    if (it.kind == SZ_ITEM_BOOK || it.kind == SZ_ITEM_TABLE || it.kind == SZ_ITEM_ROW_MAP)
      continue;  // not part of the original file
    if (it.kind == SZ_ITEM_STORED) {
      if (it.data_size != it.original_size) check_status(SZ_ERROR_CORRUPT, what);
      for (uint64_t done = 0; done < it.data_size;) {
        const size_t n = size_t(std::min<uint64_t>(it.data_size - done, kCopyBlock));
        if (src.memory() != nullptr) {
          emit(src.memory() + it.data_offset + done, n);
        } else {
          reserve(in, n);
          src.read(it.data_offset + done, in.data(), n);
          emit(in.data(), n);
        }
        done += n;
      }
      if (progress) progress->advance(it.data_size);
      continue;
    }
    sz_frame_info info;
    check_status(sz_frame_info_get(data + it.data_offset, size_t(std::min<uint64_t>(it.data_size, SZ_FRAME_HEADER_SIZE)),
                                   &info),
                 what);
    if (info.dtype != it.dtype || info.frame_size != it.data_size || info.decompressed_size != it.original_size)
      check_status(SZ_ERROR_CORRUPT, what);
    if (info.version == SZ_FORMAT_VERSION && info.decompressed_size > kPieceBytes) {
      decode_pieces(src, it.data_offset, info, ctx, what, in, out, emit);
      if (progress) progress->advance(it.data_size);
      continue;
    }
    const uint8_t* frame = src.memory() ? src.memory() + it.data_offset : nullptr;
    if (frame == nullptr) {
      reserve(in, it.data_size);
      src.read(it.data_offset, in.data(), size_t(it.data_size));
      frame = in.data();
    }
    reserve(out, it.original_size);
    size_t written = 0;
    uint64_t book_id = 0;
    if (sz_frame_table_ref(frame, size_t(it.data_size), &book_id, nullptr, nullptr) == SZ_OK) {
      const sz_symbol_table* table = nullptr;
      for (const auto& t : tables)
        if (t->table.id == book_id) table = &t->table;
      if (table == nullptr) check_status(SZ_ERROR_BOOK_MISMATCH, what + " (its symbol table is not in the container)");
      uint64_t map_id = 0;
      check_status(sz_frame_row_map_ref(frame, size_t(it.data_size), &map_id), what);
      const sz_row_map* map = nullptr;
      for (const sz_row_map& m : row_maps)
        if (map_id != 0 && m.id == map_id) map = &m;
      if (map_id != 0 && map == nullptr)
        check_status(SZ_ERROR_BOOK_MISMATCH, what + " (its row map is not in the container)");
      check_status(sz_decompress_entropy_paired(frame, size_t(it.data_size), table, map, out.data(),
                                                size_t(it.original_size), &written, threads),
                   what);
    } else if (sz_frame_book_ref(frame, size_t(it.data_size), &book_id, nullptr, nullptr) == SZ_OK) {
      const sz_channel_book* book = nullptr;
      for (const sz_channel_book& b : books)
        if (b.id == book_id) book = &b;
      if (book == nullptr) check_status(SZ_ERROR_BOOK_MISMATCH, what + " (its channel book is not in the container)");
      check_status(sz_decompress_book(frame, size_t(it.data_size), book, out.data(), size_t(it.original_size),
                                      &written, threads),
                   what);
    } else {
      check_status(sz_decompress_dctx(ctx.p, frame, size_t(it.data_size), out.data(), size_t(it.original_size),
                                      &written),
                   what);
    }
    if (written != it.original_size) check_status(SZ_ERROR_CORRUPT, what);
    emit(out.data(), written);
    if (progress) progress->advance(it.data_size);
  }
  return total;
}

}  // namespace splitzip_cli
