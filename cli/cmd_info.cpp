// cmd_info.cpp — `splitzip info FILE...`: what a frame, container or codebook file holds, as text or JSON.
#include "codec.h"
#include "commands.h"
#include "containers.h"
#include "common.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

namespace splitzip_cli {

namespace {

using nlohmann::ordered_json;

std::string dtype_str(unsigned dtype) {
  const char* name = sz_dtype_name(sz_dtype(dtype));
  return name ? name : "dtype" + std::to_string(dtype);
}

std::string codebook_values(const sz_codebook& cb) {
  std::string s;
  for (unsigned i = 0; i < cb.count; ++i) s += (i ? " " : "") + std::to_string(cb.values[i]);
  return s;
}

std::string codebook_text(const sz_codebook& cb) {
  return "k=" + std::to_string(cb.code_bits) + ", " + std::to_string(cb.count) + " entries: " + codebook_values(cb);
}

// How a frame maps exponents to codes: its codebook (version 1) or channel windows from a channel book (version 2).
std::string mapping_text(const sz_frame_info& f) {
  if (f.version == SZ_FORMAT_VERSION_ENTROPY) return "entropy-coded symbols (symbol table)";
  if (f.version >= SZ_FORMAT_VERSION_CHANNELS)
    return "channel windows, k=" + std::to_string(f.codebook.code_bits);
  return "codebook " + codebook_text(f.codebook);
}

std::string book_text(const sz_channel_book& b) {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)b.id);
  return std::string(sz_dtype_name(sz_dtype(b.dtype))) + ", k=" + std::to_string(b.code_bits) + ", " +
         std::to_string(b.tensors) + " tensors x " + std::to_string(b.period) + " channels, id " + id;
}

ordered_json book_json(const sz_channel_book& b) {
  ordered_json j;
  j["dtype"] = sz_dtype_name(sz_dtype(b.dtype));
  j["code_bits"] = b.code_bits;
  j["tensors"] = b.tensors;
  j["period"] = b.period;
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)b.id);
  j["id"] = id;
  return j;
}

uint64_t paired_rows(const sz_row_map& m) {
  uint64_t k = 0;
  for (uint64_t r = 0; r < m.rows; ++r) {
    const uint8_t* q = m.pair + 4 * r;
    k += (q[0] | q[1] | q[2] | q[3]) != 0;
  }
  return k;
}

std::string row_map_text(const sz_row_map& m) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%u rows, %llu paired, id %016llx", m.rows, (unsigned long long)paired_rows(m),
                (unsigned long long)m.id);
  return buf;
}

ordered_json row_map_json(const sz_row_map& m) {
  ordered_json j;
  j["rows"] = m.rows;
  j["paired_rows"] = paired_rows(m);
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)m.id);
  j["id"] = id;
  return j;
}

std::string table_text(const sz_symbol_table& t) {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)t.id);
  return std::string(sz_dtype_name(sz_dtype(t.dtype))) + ", " + std::to_string(t.symbol_bits) + "-bit symbols, " +
         std::to_string(t.tensors) + " tensors x " + std::to_string(t.period) + " channels in " +
         std::to_string(t.groups) + " groups, id " + id;
}

ordered_json table_json(const sz_symbol_table& t) {
  ordered_json j;
  j["dtype"] = sz_dtype_name(sz_dtype(t.dtype));
  j["symbol_bits"] = t.symbol_bits;
  j["tensors"] = t.tensors;
  j["period"] = t.period;
  j["groups"] = t.groups;
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)t.id);
  j["id"] = id;
  return j;
}

ordered_json codebook_json(const sz_codebook& cb) {
  ordered_json j;
  j["dtype"] = dtype_str(cb.dtype);
  j["code_bits"] = cb.code_bits;
  j["count"] = cb.count;
  std::vector<unsigned> v(cb.values, cb.values + cb.count);
  j["values"] = v;
  return j;
}

std::string flags_text(uint32_t flags) {
  std::string s;
  if (flags & SZ_FLAG_CHECKSUMS) s = (flags & SZ_FLAG_LANE_HASH) ? "checksums (lh32)" : "checksums (h32)";
  if (flags & SZ_FLAG_CHANNELS) s += (s.empty() ? "" : ", ") + std::string("channels");
  if (flags & SZ_FLAG_ENTROPY) s += (s.empty() ? "" : ", ") + std::string("entropy");
  if (flags & SZ_FLAG_PAIRED) s += (s.empty() ? "" : ", ") + std::string("paired rows");
  if (flags & ~(SZ_FLAG_CHECKSUMS | SZ_FLAG_CHANNELS | SZ_FLAG_ENTROPY | SZ_FLAG_LANE_HASH | SZ_FLAG_PAIRED))
    s += (s.empty() ? "" : ", ") + std::string("unknown bits");
  return s.empty() ? "none" : s;
}

double ratio(uint64_t original, uint64_t stored) { return stored ? double(original) / double(stored) : 0.0; }

ordered_json frame_json(const sz_frame_info& f) {
  ordered_json j;
  j["dtype"] = dtype_str(f.dtype);
  j["values"] = f.n_values;
  j["compressed_size"] = f.frame_size;
  j["decompressed_size"] = f.decompressed_size;
  j["ratio"] = ratio(f.decompressed_size, f.frame_size);
  j["escapes"] = f.escapes;
  j["escape_rate"] = f.n_values ? double(f.escapes) / double(f.n_values) : 0.0;
  j["chunk_size"] = uint64_t(1) << f.chunk_log2;
  j["chunks"] = f.n_chunks;
  j["coded_chunks"] = f.coded_chunks;
  j["raw_chunks"] = f.raw_chunks;
  j["checksums"] = (f.flags & SZ_FLAG_CHECKSUMS) != 0;
  if (f.flags & SZ_FLAG_CHECKSUMS) j["checksum_kind"] = (f.flags & SZ_FLAG_LANE_HASH) ? "lh32" : "h32";
  if (f.version == SZ_FORMAT_VERSION_ENTROPY) {
    j["entropy_coded"] = true;
  } else if (f.version >= SZ_FORMAT_VERSION_CHANNELS) {
    ordered_json w;
    w["code_bits"] = f.codebook.code_bits;
    j["channel_windows"] = w;
  } else {
    j["codebook"] = codebook_json(f.codebook);
  }
  return j;
}

std::string escapes_text(const sz_frame_info& f) {
  double rate = f.n_values ? 100.0 * double(f.escapes) / double(f.n_values) : 0.0;
  return std::to_string(f.escapes) + " (" + format_fixed(rate, 4) + "% of values)";
}

std::string shape_text(const sz_item& it) {
  if (it.ndim == 0) return "-";
  std::string s;
  for (unsigned d = 0; d < it.ndim; ++d) s += (d ? "x" : "") + std::to_string(it.shape[d]);
  return s;
}

std::string pad(const std::string& s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// Frames back to back (what a raw input longer than one frame compresses to): totals, then one line per frame.
void info_frames(const std::string& file, const std::vector<sz_frame_info>& frames, bool json, std::ostream& text,
                 ordered_json* out) {
  uint64_t values = 0, compressed = 0, decompressed = 0, escapes = 0;
  for (const sz_frame_info& f : frames) {
    values += f.n_values;
    compressed += f.frame_size;
    decompressed += f.decompressed_size;
    escapes += f.escapes;
  }
  ordered_json j;
  j["file"] = file;
  j["type"] = "frames";
  j["frames"] = frames.size();
  j["values"] = values;
  j["compressed_size"] = compressed;
  j["decompressed_size"] = decompressed;
  j["ratio"] = ratio(decompressed, compressed);
  j["escapes"] = escapes;
  ordered_json list = ordered_json::array();
  for (const sz_frame_info& f : frames) list.push_back(frame_json(f));
  j["frame_list"] = list;
  if (json) {
    *out = j;
    return;
  }
  text << file << ": " << frames.size() << " SplitZip frames (format v1), " << values << " values, " << compressed
       << " bytes, original " << decompressed << " bytes, ratio " << format_fixed(ratio(decompressed, compressed), 4)
       << "\n";
  text << "  " << pad("#", 5, true) << "  " << pad("dtype", 8) << "  " << pad("values", 10, true) << "  "
       << pad("stored", 10, true) << "  " << pad("ratio", 7, true) << "  " << pad("escapes", 9, true) << "  "
       << "chunks c/r\n";
  for (size_t i = 0; i < frames.size(); ++i) {
    const sz_frame_info& f = frames[i];
    text << "  " << pad(std::to_string(i), 5, true) << "  " << pad(dtype_str(f.dtype), 8) << "  "
         << pad(std::to_string(f.n_values), 10, true) << "  " << pad(std::to_string(f.frame_size), 10, true) << "  "
         << pad(format_fixed(ratio(f.decompressed_size, f.frame_size), 4), 7, true) << "  "
         << pad(format_fixed(f.n_values ? 100.0 * double(f.escapes) / double(f.n_values) : 0.0, 3) + "%", 9, true)
         << "  " << f.coded_chunks << "/" << f.raw_chunks << "\n";
  }
  std::vector<std::string> seen;
  for (const sz_frame_info& f : frames) {
    std::string line = "frames: chunk " + std::to_string(uint64_t(1) << f.chunk_log2) + " values, flags " +
                       flags_text(f.flags) + ", " + dtype_str(f.dtype) + " " + mapping_text(f);
    if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
    seen.push_back(line);
    text << "  " << line << "\n";
  }
}

void info_file(const std::string& path, bool json, std::ostream& text, ordered_json* out) {
  std::string file = display_name(path);
  InputFile in(path);
  const std::vector<uint8_t>& head = in.peek(4);
  if (sz_is_frame(head.data(), head.size())) {
    // Frames are read one at a time: info of a large file needs the memory of one frame.
    FrameReader reader(in, file);
    std::vector<sz_frame_info> frames;
    sz_frame_info f;
    while (reader.next(&f)) frames.push_back(f);
    if (frames.size() > 1) return info_frames(file, frames, json, text, out);
    f = frames[0];
    ordered_json j;
    j["file"] = file;
    j["type"] = "frame";
    j["format_version"] = f.version;
    ordered_json fj = frame_json(f);
    for (auto it = fj.begin(); it != fj.end(); ++it) j[it.key()] = it.value();
    if (json) {
      *out = j;
      return;
    }
    text << file << ": SplitZip frame (format v" << unsigned(f.version) << ")\n"
         << "  dtype         " << dtype_str(f.dtype) << "\n"
         << "  values        " << f.n_values << "\n"
         << "  compressed    " << f.frame_size << " bytes\n"
         << "  decompressed  " << f.decompressed_size << " bytes\n"
         << "  ratio         " << format_fixed(ratio(f.decompressed_size, f.frame_size), 4) << "\n"
         << "  escapes       " << escapes_text(f) << "\n"
         << "  chunks        " << f.n_chunks << " of " << (uint64_t(1) << f.chunk_log2) << " values: "
         << f.coded_chunks << " coded, " << f.raw_chunks << " raw\n"
         << "  flags         " << flags_text(f.flags) << "\n"
         << "  codebook      "
         << (f.version >= SZ_FORMAT_VERSION_CHANNELS ? mapping_text(f) : codebook_text(f.codebook)) << "\n";
    return;
  }
  // A container file is read through its index (containers.h: the index and the items' headers); other files,
  // and stdin, whole.
  Buffer data;
  std::unique_ptr<ContainerImage> image;
  if (in.seekable() && sz_is_container(head.data(), head.size())) {
    image = std::make_unique<ContainerImage>(Source(in), true);
  } else {
    data = in.read_all();
  }
  const uint8_t* p = image ? image->data() : data.data();
  size_t size = image ? image->size() : data.size();
  ordered_json j;
  j["file"] = file;
  if (sz_is_container(p, size)) {
    std::vector<sz_item> items = read_container_index(p, size, file);
    const uint32_t count = uint32_t(items.size());
    uint64_t original = 0;
    std::vector<sz_frame_info> frames(count);
    std::vector<sz_channel_book> books(count);
    std::vector<sz_symbol_table> tables(count);
    std::vector<sz_row_map> maps(count);
    for (uint32_t i = 0; i < count; ++i) {
      original += items[i].original_size;
      if (items[i].kind == SZ_ITEM_ROW_MAP)  // validated by read_container_index
        check_status(sz_row_map_parse(p + items[i].data_offset, size_t(items[i].data_size), &maps[i]), file);
      if (items[i].kind == SZ_ITEM_TABLE)  // validated by read_container_index
        check_status(sz_symbol_table_parse(p + items[i].data_offset, size_t(items[i].data_size), &tables[i]), file);
      if (items[i].kind == SZ_ITEM_BOOK)  // validated by read_container_index
        check_status(sz_channel_book_parse(p + items[i].data_offset, size_t(items[i].data_size), &books[i]), file);
      if (items[i].kind == SZ_ITEM_FRAME) {
        std::string what = file + ": item '" + printable_name(std::string(items[i].name, items[i].name_size)) + "'";
        check_status(sz_frame_info_get(p + items[i].data_offset, size_t(items[i].data_size), &frames[i]), what);
        if (!frames[i].stats_valid) check_status(SZ_ERROR_SRC_TRUNCATED, what);
      }
    }
    j["type"] = "container";
    j["items"] = count;
    j["compressed_size"] = uint64_t(size);
    j["decompressed_size"] = original;
    j["ratio"] = ratio(original, size);
    ordered_json list = ordered_json::array();
    for (uint32_t i = 0; i < count; ++i) {
      const sz_item& it = items[i];
      ordered_json e;
      e["name"] = std::string(it.name, it.name_size);
      e["kind"] = it.kind == SZ_ITEM_FRAME     ? "frame"
                  : it.kind == SZ_ITEM_BOOK    ? "book"
                  : it.kind == SZ_ITEM_TABLE   ? "table"
                  : it.kind == SZ_ITEM_ROW_MAP ? "rowmap"
                                               : "stored";
      std::vector<uint64_t> shape(it.shape, it.shape + it.ndim);
      e["shape"] = shape;
      e["original_offset"] = it.original_offset;
      e["original_size"] = it.original_size;
      e["data_offset"] = it.data_offset;
      e["data_size"] = it.data_size;
      if (it.kind == SZ_ITEM_FRAME) {
        ordered_json fj = frame_json(frames[i]);
        for (auto f = fj.begin(); f != fj.end(); ++f) e[f.key()] = f.value();
      } else if (it.kind == SZ_ITEM_BOOK) {
        e["channel_book"] = book_json(books[i]);
      } else if (it.kind == SZ_ITEM_TABLE) {
        e["symbol_table"] = table_json(tables[i]);
      } else if (it.kind == SZ_ITEM_ROW_MAP) {
        e["row_map"] = row_map_json(maps[i]);
      }
      list.push_back(e);
    }
    j["item_list"] = list;
    if (json) {
      *out = j;
      return;
    }
    text << file << ": SplitZip container (format v1), " << count << " items, " << size << " bytes, original "
         << original << " bytes, ratio " << format_fixed(ratio(original, size), 4) << "\n";
    text << "  " << pad("#", 3, true) << "  " << pad("kind", 6) << "  " << pad("dtype", 8) << "  "
         << pad("shape", 16) << "  " << pad("original", 10, true) << "  " << pad("stored", 10, true) << "  "
         << pad("ratio", 7, true) << "  " << pad("escapes", 9, true) << "  " << pad("chunks c/r", 11) << "  "
         << "name\n";
    for (uint32_t i = 0; i < count; ++i) {
      const sz_item& it = items[i];
      bool frame = it.kind == SZ_ITEM_FRAME;
      const sz_frame_info& f = frames[i];
      std::string esc = "-", chunks = "-", cb;
      if (frame) {
        esc = format_fixed(f.n_values ? 100.0 * double(f.escapes) / double(f.n_values) : 0.0, 3) + "%";
        chunks = std::to_string(f.coded_chunks) + "/" + std::to_string(f.raw_chunks);
      }
      const char* kind = frame                          ? "frame"
                         : it.kind == SZ_ITEM_BOOK    ? "book"
                         : it.kind == SZ_ITEM_TABLE   ? "table"
                         : it.kind == SZ_ITEM_ROW_MAP ? "rowmap"
                                                      : "stored";
      text << "  " << pad(std::to_string(i), 3, true) << "  " << pad(kind, 6) << "  "
           << pad(frame ? dtype_str(it.dtype) : "-", 8) << "  " << pad(shape_text(it), 16) << "  "
           << pad(std::to_string(it.original_size), 10, true) << "  " << pad(std::to_string(it.data_size), 10, true)
           << "  " << pad(format_fixed(ratio(it.original_size, it.data_size), 4), 7, true) << "  "
           << pad(esc, 9, true) << "  " << pad(chunks, 11) << "  " << printable_name(std::string(it.name, it.name_size))
           << "\n";
    }
    for (uint32_t i = 0; i < count; ++i)
      if (items[i].kind == SZ_ITEM_BOOK) text << "  channel book: " << book_text(books[i]) << "\n";
    for (uint32_t i = 0; i < count; ++i)
      if (items[i].kind == SZ_ITEM_TABLE) text << "  symbol table: " << table_text(tables[i]) << "\n";
    for (uint32_t i = 0; i < count; ++i)
      if (items[i].kind == SZ_ITEM_ROW_MAP) text << "  row map: " << row_map_text(maps[i]) << "\n";
    // Frame parameters, stated once for each distinct combination (per item in --json).
    std::vector<std::string> seen;
    for (uint32_t i = 0; i < count; ++i) {
      if (items[i].kind != SZ_ITEM_FRAME) continue;
      const sz_frame_info& f = frames[i];
      std::string line = "frames: chunk " + std::to_string(uint64_t(1) << f.chunk_log2) + " values, flags " +
                         flags_text(f.flags) + ", " + dtype_str(f.dtype) + " " + mapping_text(f);
      bool dup = false;
      for (const std::string& l : seen) dup = dup || l == line;
      if (dup) continue;
      seen.push_back(line);
      text << "  " << line << "\n";
    }
    return;
  }
  if (size >= 4 && p[0] == 'S' && p[1] == 'P' && p[2] == 'Z' && p[3] == 'K') {
    sz_channel_book b;
    check_status(sz_channel_book_parse(p, size, &b), file);
    j["type"] = "channel_book";
    j["channel_book"] = book_json(b);
    if (json) {
      *out = j;
      return;
    }
    text << file << ": SplitZip channel book\n  " << book_text(b) << "\n";
    return;
  }
  if (size >= 4 && p[0] == 'S' && p[1] == 'P' && p[2] == 'Z' && p[3] == 'T') {
    sz_symbol_table t;
    check_status(sz_symbol_table_parse(p, size, &t), file);
    j["type"] = "symbol_table";
    j["symbol_table"] = table_json(t);
    if (json) {
      *out = j;
      return;
    }
    text << file << ": SplitZip symbol table\n  " << table_text(t) << "\n";
    return;
  }
  if (size >= 4 && p[0] == 'S' && p[1] == 'P' && p[2] == 'Z' && p[3] == 'R') {
    sz_row_map m;
    check_status(sz_row_map_parse(p, size, &m), file);
    j["type"] = "row_map";
    j["row_map"] = row_map_json(m);
    if (json) {
      *out = j;
      return;
    }
    text << file << ": SplitZip row map\n  " << row_map_text(m) << "\n";
    return;
  }
  if (size >= 4 && p[0] == 'S' && p[1] == 'P' && p[2] == 'Z' && p[3] == 'B') {
    sz_codebook cb;
    check_status(sz_codebook_deserialize(p, size, &cb), file);
    j["type"] = "codebook";
    j["codebook"] = codebook_json(cb);
    if (json) {
      *out = j;
      return;
    }
    text << file << ": SplitZip codebook\n"
         << "  dtype         " << dtype_str(cb.dtype) << "\n"
         << "  codebook      " << codebook_text(cb) << "\n";
    return;
  }
  if (size < 4) check_status(SZ_ERROR_SRC_TRUNCATED, file + ": not a SplitZip file");
  throw CliError(file + ": not a SplitZip file: " + status_text(SZ_ERROR_BAD_MAGIC));
}

}  // namespace

Command add_info_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "info", "Show what a SplitZip frame, container or codebook file holds: dtype, values, sizes, ratio, escapes, "
              "chunk modes, flags, codebook; one line per item for containers");
  sub->add_option("files", o->files, "SplitZip files (\"-\": stdin)")->required();
  sub->add_flag("--json", o->json, "Print JSON (an object for one file, an array for several)");
  auto run = [o]() -> int {
    ordered_json all = ordered_json::array();
    for (const std::string& f : o->files) {
      std::ostringstream text;
      ordered_json j;
      info_file(f, o->json, text, &j);
      if (o->json) {
        all.push_back(j);
      } else {
        std::fputs(text.str().c_str(), stdout);
      }
    }
    if (o->json) {
      // Names are UTF-8 by the format, but a container need not keep to it: such bytes print as U+FFFD.
      std::string s = (all.size() == 1 ? all[0] : all).dump(2, ' ', false, ordered_json::error_handler_t::replace);
      std::fputs((s + "\n").c_str(), stdout);
    }
    return 0;
  };
  return {sub, run};
}

}  // namespace splitzip_cli
