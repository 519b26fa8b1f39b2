// codec.cpp — whole-file compression / decompression (see codec.h).
#include "codec.h"
#include "containers.h"

#include <cstring>

namespace splitzip_cli {

sz_tensor_kind parse_kind(const std::string& name) {
  if (name == "k" || name == "key" || name == "K") return SZ_KIND_KEY;
  if (name == "v" || name == "value" || name == "V") return SZ_KIND_VALUE;
  if (name == "generic" || name == "kv") return SZ_KIND_GENERIC;
  throw CliError("unknown tensor kind '" + name + "' (use k, v or generic)");
}

sz_codebook load_codebook_file(const std::string& path) {
  Buffer bytes = read_input(path);
  sz_codebook cb;
  sz_status st = sz_codebook_deserialize(bytes.data(), bytes.size(), &cb);
  if (st != SZ_OK) throw CliError(display_name(path) + ": not a valid codebook file: " + status_text(st));
  return cb;
}

sz_codebook CodebookChoice::for_dtype(sz_dtype dtype) const {
  if (user && user->dtype == uint8_t(dtype)) return *user;
  sz_codebook cb;
  check_status(sz_default_codebook(dtype, kind, &cb),
               std::string("no default codebook for ") + sz_dtype_name(dtype));
  return cb;
}

uint64_t Compressed::size() const {
  uint64_t total = 0;
  for (const Buffer& b : parts) total += b.size();
  return total;
}

static uint64_t align64(uint64_t x) { return (x + SZ_CONTAINER_ALIGN - 1) / SZ_CONTAINER_ALIGN * SZ_CONTAINER_ALIGN; }

Buffer container_index(const std::vector<sz_item>& items, uint64_t pos, const std::string& file) {
  uint64_t index_size = 0;
  check_status(sz_container_index_size(items.data(), uint32_t(items.size()), &index_size), file + ": container index");
  Buffer index{size_t(index_size)};
  size_t written = 0;
  check_status(sz_container_write_index(items.data(), uint32_t(items.size()), pos, index.data(), index.size(),
                                        &written),
               file + ": container index");
  index.shrink(written);
  return index;
}

// A container whose body (header and items) ends at pos: the body, then the index and footer for its items.
static Compressed finish_container(Buffer body, uint64_t pos, const std::vector<sz_item>& items,
                                   const std::string& file) {
  body.shrink(size_t(pos));
  Buffer index = container_index(items, pos, file);
  Compressed out;
  out.parts.push_back(std::move(body));
  out.parts.push_back(std::move(index));
  return out;
}

namespace {
// The container of an input in memory, in memory.
class MemorySink : public Sink {
 public:
  void write_at(uint64_t offset, const uint8_t* data, size_t size) override {
    if (bytes.size() < offset + size) bytes.resize(size_t(offset + size));
    if (size) std::memcpy(bytes.data() + offset, data, size);
  }
  std::vector<uint8_t> bytes;
};
}  // namespace

Compressed compress_plan(const uint8_t* data, size_t size, const InputPlan& plan, const CodebookChoice& codebooks,
                         const sz_params& params, const std::string& file, Progress* progress) {
  MemorySink sink;
  write_container(Source(data, size), plan, codebooks, params, file, sink, progress);
  Buffer all(sink.bytes.size());
  if (!sink.bytes.empty()) std::memcpy(all.data(), sink.bytes.data(), sink.bytes.size());
  Compressed out;
  out.parts.push_back(std::move(all));
  return out;
}

KvShape parse_kv_shape(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t p = 0;;) {
    const size_t q = text.find(',', p);
    parts.push_back(text.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  const std::string bad = "--kv-shape '" + text + "': ";
  if (parts.size() != 5) throw CliError(bad + "expected L,2,T,H,D (layers, K and V, tokens or *, kv_heads, head_dim)");
  auto number = [&](const std::string& x, const char* what) -> uint64_t {
    if (x.empty() || x.size() > 9 || x.find_first_not_of("0123456789") != std::string::npos || std::stoull(x) == 0)
      throw CliError(bad + what + " must be a positive integer below 10^9, not '" + x + "'");
    return std::stoull(x);
  };
  KvShape k;
  k.layers = number(parts[0], "L");
  if (parts[1] != "2") throw CliError(bad + "the second dimension is K and V: it must be 2");
  k.tokens = parts[2] == "*" ? 0 : number(parts[2], "T");
  k.heads = number(parts[3], "H");
  k.dims = number(parts[4], "D");
  if (2 * k.layers > SZ_MAX_TENSORS || k.heads * k.dims > SZ_MAX_PERIOD ||
      2 * k.layers * k.heads * k.dims > (uint64_t(1) << 26))
    throw CliError(bad + "a channel book holds at most " + std::to_string(SZ_MAX_TENSORS) + " tensors (2 L) of at most " +
                   std::to_string(SZ_MAX_PERIOD) + " channels (H D), 2^26 channels in all");
  return k;
}

uint64_t KvShape::tokens_of(uint64_t bytes, sz_dtype dtype, const std::string& file) const {
  const uint64_t token_bytes = 2 * layers * heads * dims * sz_dtype_size(dtype);
  if (bytes == 0 || bytes % token_bytes != 0)
    throw CliError(file + ": " + std::to_string(bytes) + " bytes are not whole tokens of the --kv-shape (" +
                   std::to_string(token_bytes) + " bytes of " + sz_dtype_name(dtype) + " per token)");
  const uint64_t t = bytes / token_bytes;
  if (tokens != 0 && t != tokens)
    throw CliError(file + ": holds " + std::to_string(t) + " tokens but --kv-shape says " + std::to_string(tokens) +
                   " (use * for files of different lengths)");
  return t;
}

bool is_channel_book_file(const Buffer& bytes) {
  static const uint8_t magic[4] = {'S', 'P', 'Z', 'K'};
  return bytes.size() >= 4 && std::memcmp(bytes.data(), magic, 4) == 0;
}

LoadedBook load_channel_book(Buffer bytes, const std::string& file) {
  LoadedBook b{std::move(bytes), {}};
  const sz_status st = sz_channel_book_parse(b.bytes.data(), b.bytes.size(), &b.book);
  if (st != SZ_OK) throw CliError(file + ": not a valid channel book file: " + status_text(st));
  if (sz_channel_book_file_size(&b.book) != b.bytes.size())
    throw CliError(file + ": not a valid channel book file: bytes after the book");
  return b;
}

namespace {

// An item of a KV container that is not part of the original file: a channel book, symbol table or row map.
struct SideItem {
  uint8_t kind;
  const char* name;
  const Buffer* bytes;
};

// A container of the side items (in order) and one frame per tensor of a raw KV file, each frame made by
// `compress_tensor(values, n, tensor, dst, capacity, &written)`.
template <class CompressTensor>
Compressed kv_container(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape,
                        const std::vector<SideItem>& side, const std::string& file, Progress* progress,
                        CompressTensor compress_tensor) {
  const uint32_t tensors = shape.tensors();
  const uint64_t tokens = shape.tokens_of(size, dtype, file);
  const uint64_t n = tokens * shape.period(), tensor_bytes = n * sz_dtype_size(dtype);
  if (progress) progress->phase("compressing", file, size);
  const uint64_t bound = sz_compress_bound(n, dtype);
  uint64_t capacity = align64(SZ_CONTAINER_HEADER_SIZE) + tensors * align64(bound);
  for (const SideItem& si : side) capacity += align64(si.bytes->size());
  Buffer body{size_t(capacity)};
  std::memset(body.data(), 0, body.size());  // the padding between items
  check_status(sz_container_write_header(body.data(), body.size()), file);
  std::vector<sz_item> items;
  std::vector<std::string> names;
  names.reserve(tensors);
  for (uint32_t t = 0; t < tensors; ++t)
    names.push_back("layer" + std::to_string(t / 2) + (t % 2 ? ".v" : ".k"));
  uint64_t pos = align64(SZ_CONTAINER_HEADER_SIZE);
  sz_item it;
  for (const SideItem& si : side) {
    std::memset(&it, 0, sizeof it);
    it.kind = si.kind;
    it.name = si.name;
    it.name_size = uint16_t(std::strlen(si.name));
    it.data_offset = pos;
    it.data_size = si.bytes->size();
    std::memcpy(body.data() + pos, si.bytes->data(), si.bytes->size());
    items.push_back(it);
    pos = align64(pos + it.data_size);
  }
  for (uint32_t t = 0; t < tensors; ++t) {
    std::memset(&it, 0, sizeof it);
    it.kind = SZ_ITEM_FRAME;
    it.dtype = uint8_t(dtype);
    it.ndim = 3;
    it.shape[0] = tokens;
    it.shape[1] = shape.heads;
    it.shape[2] = shape.dims;
    it.name = names[t].data();
    it.name_size = uint16_t(names[t].size());
    it.original_offset = t * tensor_bytes;
    it.original_size = tensor_bytes;
    it.data_offset = pos;
    size_t written = 0;
    check_status(compress_tensor(data + t * tensor_bytes, n, t, body.data() + pos, size_t(capacity - pos), &written),
                 file + ": tensor '" + names[t] + "'");
    it.data_size = written;
    items.push_back(it);
    // The encoders may use dst past the frame as scratch: the gap to the next item must be zero (FORMAT.md §6).
    std::memset(body.data() + pos + written, 0, size_t(align64(pos + written) - (pos + written)));
    pos = align64(pos + written);
    if (progress) progress->advance(tensor_bytes);
  }
  // The last item ends the body (the index follows it directly).
  pos = items.back().data_offset + items.back().data_size;
  return finish_container(std::move(body), pos, items, file);
}

}  // namespace

Compressed compress_kv(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape, const LoadedBook& lb,
                       const sz_params& params, const std::string& file, Progress* progress) {
  const sz_channel_book& book = lb.book;
  if (book.dtype != uint8_t(dtype))
    throw CliError(file + ": the channel book is for " + sz_dtype_name(sz_dtype(book.dtype)) + " but --dtype is " +
                   sz_dtype_name(dtype));
  if (book.tensors != shape.tensors() || book.period != shape.period())
    throw CliError(file + ": the channel book has " + std::to_string(book.tensors) + " tensors of " +
                   std::to_string(book.period) + " channels, --kv-shape gives " + std::to_string(shape.tensors()) +
                   " of " + std::to_string(shape.period()));
  return kv_container(data, size, dtype, shape, {{SZ_ITEM_BOOK, "channel_book", &lb.bytes}}, file, progress,
                      [&](const uint8_t* src, uint64_t n, uint32_t t, uint8_t* dst, size_t cap, size_t* written) {
                        return sz_compress_channels(src, n, dtype, &book, t, &params, dst, cap, written);
                      });
}

bool is_symbol_table_file(const Buffer& bytes) {
  static const uint8_t magic[4] = {'S', 'P', 'Z', 'T'};
  return bytes.size() >= 4 && std::memcmp(bytes.data(), magic, 4) == 0;
}

std::unique_ptr<LoadedTable> load_symbol_table(Buffer bytes, const std::string& file) {
  auto lt = std::make_unique<LoadedTable>();
  lt->bytes = std::move(bytes);
  const sz_status st = sz_symbol_table_parse(lt->bytes.data(), lt->bytes.size(), &lt->table);
  if (st != SZ_OK) throw CliError(file + ": not a valid symbol table file: " + status_text(st));
  const sz_symbol_table& t = lt->table;
  if (sz_symbol_table_file_size(sz_dtype(t.dtype), t.tensors, t.period, t.groups) != lt->bytes.size())
    throw CliError(file + ": not a valid symbol table file: bytes after the table");
  lt->workspace.resize(sz_symbol_table_workspace_size(&t));
  check_status(sz_symbol_table_prepare(&lt->table, lt->workspace.data(), lt->workspace.size()), file);
  return lt;
}

bool is_row_map_file(const Buffer& bytes) {
  static const uint8_t magic[4] = {'S', 'P', 'Z', 'R'};
  return bytes.size() >= 4 && std::memcmp(bytes.data(), magic, 4) == 0;
}

std::unique_ptr<LoadedRowMap> load_row_map(Buffer bytes, const std::string& file) {
  auto lm = std::make_unique<LoadedRowMap>();
  lm->bytes = std::move(bytes);
  const sz_status st = sz_row_map_parse(lm->bytes.data(), lm->bytes.size(), &lm->map);
  if (st != SZ_OK) throw CliError(file + ": not a valid row map file: " + status_text(st));
  if (sz_row_map_file_size(lm->map.rows) != lm->bytes.size())
    throw CliError(file + ": not a valid row map file: bytes after the map");
  return lm;
}

namespace {

void require_fp8_pairs(sz_dtype dtype) {
  if (sz_dtype_size(dtype) != 1)
    throw CliError(std::string("paired rows are for FP8 KV (fp8_e4m3, fp8_e5m2), not ") + sz_dtype_name(dtype));
}

}  // namespace

std::unique_ptr<LoadedRowMap> row_map_of_kv(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape,
                                            const std::string& file) {
  require_fp8_pairs(dtype);
  const uint64_t tokens = shape.tokens_of(size, dtype, file), row = shape.period();
  Buffer bytes{sz_row_map_file_size(tokens)};
  std::vector<uint8_t> ws(sz_row_map_workspace_size(tokens));
  size_t written = 0;
  // Layer 0's V (tensor 1) is a function of the token: equal rows there are the same token.
  check_status(sz_row_map_from_rows(data + tokens * row, tokens, size_t(row), ws.data(), ws.size(), bytes.data(),
                                    bytes.size(), &written),
               file + ": row map");
  return load_row_map(std::move(bytes), file + ": row map");
}

Compressed compress_kv_entropy(const uint8_t* data, size_t size, sz_dtype dtype, const KvShape& shape,
                               const LoadedTable& lt, const LoadedRowMap* rows, const sz_params& params,
                               const std::string& file, Progress* progress) {
  const sz_symbol_table& table = lt.table;
  if (table.dtype != uint8_t(dtype))
    throw CliError(file + ": the symbol table is for " + sz_dtype_name(sz_dtype(table.dtype)) + " but --dtype is " +
                   sz_dtype_name(dtype));
  if (table.tensors != shape.tensors() || table.period != shape.period())
    throw CliError(file + ": the symbol table has " + std::to_string(table.tensors) + " tensors of " +
                   std::to_string(table.period) + " channels, --kv-shape gives " + std::to_string(shape.tensors()) +
                   " of " + std::to_string(shape.period()));
  std::vector<SideItem> side = {{SZ_ITEM_TABLE, "symbol_table", &lt.bytes}};
  const sz_row_map* map = nullptr;
  if (rows != nullptr) {
    require_fp8_pairs(dtype);
    const uint64_t tokens = shape.tokens_of(size, dtype, file);
    if (rows->map.rows < tokens)
      throw CliError(file + ": the row map has " + std::to_string(rows->map.rows) + " rows, the KV cache " +
                     std::to_string(tokens) + " tokens");
    side.push_back({SZ_ITEM_ROW_MAP, "row_map", &rows->bytes});
    map = &rows->map;
  }
  return kv_container(data, size, dtype, shape, side, file, progress,
                      [&](const uint8_t* src, uint64_t n, uint32_t t, uint8_t* dst, size_t cap, size_t* written) {
                        return sz_compress_entropy_paired(src, n, dtype, &table, t, map, &params, dst, cap, written);
                      });
}

std::vector<sz_item> read_container_index(const uint8_t* data, size_t size, const std::string& file) {
  uint32_t count = 0;
  check_status(sz_container_items(data, size, nullptr, 0, &count), file);
  std::vector<sz_item> items(count);
  check_status(sz_container_items(data, size, items.data(), count, &count), file);
  return items;
}

StreamResult compress_raw_stream(InputFile& in, OutputFile* out, sz_dtype dtype, const CodebookChoice& codebooks,
                                 const sz_params& params, const std::string& file, Progress* progress) {
  if (codebooks.user && codebooks.user->dtype != uint8_t(dtype))
    throw CliError(file + ": the codebook is for " + sz_dtype_name(sz_dtype(codebooks.user->dtype)) +
                   " but the input holds " + sz_dtype_name(dtype) + " data");
  const size_t vb = sz_dtype_size(dtype);
  const size_t piece = size_t(kStreamFrameValues) * vb;
  // Uninitialised: a small input touches only the pages it uses.
  Buffer src(piece), frame(size_t(sz_compress_bound(kStreamFrameValues, dtype)));
  const sz_codebook cb = codebooks.for_dtype(dtype);
  Cctx ctx(params.threads);
  StreamResult r;
  for (;;) {
    const size_t got = in.read(src.data(), piece);
    r.in += got;
    if (got % vb != 0)
      throw CliError(file + ": size " + std::to_string(r.in) + " is not a multiple of the " + sz_dtype_name(dtype) +
                     " value size (" + std::to_string(vb) + " bytes)");
    if (got == 0 && r.frames > 0) break;  // the input ended with a whole frame
    size_t written = 0;
    check_status(sz_compress_cctx(ctx.p, src.data(), got / vb, dtype, &cb, &params, frame.data(), frame.size(),
                                  &written),
                 file);
    if (out) out->write(frame.data(), written);
    r.out += written;
    ++r.frames;
    if (progress) progress->advance(got);
    if (got < piece) break;
  }
  return r;
}

std::string FrameReader::what() const {
  return frames_ <= 1 ? file_ : file_ + ": frame " + std::to_string(frames_);
}

bool FrameReader::next(sz_frame_info* info, Progress* progress) {
  uint8_t header[SZ_FRAME_HEADER_SIZE];
  const size_t got = in_.read(header, sizeof header);
  if (got == 0 && frames_ > 0) return false;
  ++frames_;
  if (frames_ > 1 && !sz_is_frame(header, got))
    throw CliError(file_ + ": the bytes after frame " + std::to_string(frames_ - 1) +
                   " are not a SplitZip frame (trailing garbage)");
  check_status(sz_frame_info_get(header, got, info), what());
  // A regular file shorter than the frame is truncated: say so before allocating for the frame.
  if (in_.size_hint() != 0 && info->frame_size > in_.size_hint() - consumed_)
    check_status(SZ_ERROR_SRC_TRUNCATED, what());
  const size_t need = size_t(info->frame_size);
  size_t have = sizeof header;
  // A file holds the whole frame (checked above): one buffer. From a pipe the frame size is only a claim: the
  // buffer grows with the bytes that actually arrive.
  const size_t first = in_.size_hint() != 0 ? need : std::min<size_t>(need, size_t(64) << 20);
  if (buf_.size() < first) buf_ = Buffer(first);
  std::memcpy(buf_.data(), header, sizeof header);
  while (have < need) {
    if (buf_.size() == have) {
      Buffer bigger(std::min(need, std::max(have * 2, size_t(64) << 20)));
      std::memcpy(bigger.data(), buf_.data(), have);
      buf_ = std::move(bigger);
    }
    const size_t want = std::min(need, buf_.size()) - have;
    const size_t r = in_.read(buf_.data() + have, want);
    have += r;
    if (r < want) check_status(SZ_ERROR_SRC_TRUNCATED, what());
  }
  size_ = need;
  consumed_ += need;
  check_status(sz_frame_info_get(buf_.data(), size_, info), what());
  if (progress) progress->advance(need);
  return true;
}

StreamResult decompress_stream(InputFile& in, OutputFile* out, unsigned threads, const std::string& file,
                               Progress* progress) {
  const std::vector<uint8_t>& head = in.peek(4);
  StreamResult r;
  if (sz_is_container(head.data(), head.size())) {
    // A file is read where its index says (it sits at the end); stdin is read whole first.
    Buffer data;
    if (!in.seekable()) data = in.read_all();
    const Source src = in.seekable() ? Source(in) : Source(data.data(), data.size());
    r.in = src.size();
    r.out = decompress_container(src, threads, file, progress, [&](const uint8_t* p, size_t n) {
      if (out) out->write(p, n);
    });
    return r;
  }
  if (!sz_is_frame(head.data(), head.size())) decompress_any(head.data(), head.size(), threads, file, nullptr);
  FrameReader frames(in, file);
  Dctx ctx(threads);
  Buffer plain;
  sz_frame_info info;
  while (frames.next(&info, progress)) {
    if (plain.size() < info.decompressed_size) plain = Buffer(size_t(info.decompressed_size));
    size_t written = 0;
    check_status(sz_decompress_dctx(ctx.p, frames.data(), frames.size(), plain.data(),
                                    size_t(info.decompressed_size), &written),
                 frames.what());
    if (out) out->write(plain.data(), written);
    r.out += written;
  }
  r.in = frames.consumed();
  r.frames = frames.frames();
  return r;
}

Buffer decompress_any(const uint8_t* data, size_t size, unsigned threads, const std::string& file,
                      Progress* progress) {
  if (sz_is_frame(data, size)) {
    sz_frame_info info;
    check_status(sz_frame_info_get(data, size, &info), file);
    if (info.frame_size > size) check_status(SZ_ERROR_SRC_TRUNCATED, file);
    if (progress) progress->phase("decompressing", file, info.decompressed_size);
    Buffer out{size_t(info.decompressed_size)};
    size_t written = 0;
    Dctx ctx(threads);
    check_status(sz_decompress_dctx(ctx.p, data, size, out.data(), out.size(), &written), file);
    if (written != out.size()) check_status(SZ_ERROR_INTERNAL, file);
    if (info.frame_size != size)
      throw CliError(file + ": trailing garbage after the frame (" + std::to_string(size - info.frame_size) + " bytes)");
    if (progress) progress->advance(written);
    return out;
  }
  if (sz_is_container(data, size)) {
    std::vector<uint8_t> plain;
    decompress_container(Source(data, size), threads, file, progress,
                         [&](const uint8_t* p, size_t n) { plain.insert(plain.end(), p, p + n); });
    Buffer out(plain.size());
    if (!plain.empty()) std::memcpy(out.data(), plain.data(), plain.size());
    return out;
  }
  if (size < 4) check_status(SZ_ERROR_SRC_TRUNCATED, file + ": not a SplitZip file");
  throw CliError(file + ": not a SplitZip file: " + status_text(SZ_ERROR_BAD_MAGIC));
}

}  // namespace splitzip_cli
