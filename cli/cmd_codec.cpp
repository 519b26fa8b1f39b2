// cmd_codec.cpp — `splitzip compress` and `splitzip decompress`, modelled on zstd: FILE -> FILE.spz and back,
// -c/--stdout, "-" for stdin, -f to overwrite, the input kept unless --rm, never a partial output file, the input's
// times kept, and a bad file in a list reported while the others are still processed (exit 1 at the end).
//
// Raw inputs stream: they are read, compressed and written one frame of kStreamFrameValues values at a time, and a
// file of frames back to back decompresses one frame at a time, so memory stays bounded whatever the file size.
// .npy and .safetensors files become containers written item by item, and containers decompress item by item, a
// large frame in pieces of kPieceBytes (containers.h); from stdin they are read whole first.
#include "codec.h"
#include "commands.h"
#include "containers.h"
#include "common.h"
#include "inputs.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include <unistd.h>

namespace splitzip_cli {

namespace {

const char* kSuffix = ".spz";

bool has_suffix(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, kSuffix) == 0;
}

struct CommonOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool to_stdout = false;
  bool force = false;
  bool keep = false;
  bool remove_input = false;
  bool quiet = false;
  bool verbose = false;
  unsigned threads = 1;
};

void add_common(CLI::App* sub, CommonOptions* o, const char* verb) {
  sub->add_option("inputs", o->inputs, std::string("Files to ") + verb + " (\"-\": stdin)")->required();
  sub->add_option("-o,--output", o->output, "Output file (only with one input; \"-\": stdout)");
  sub->add_flag("-c,--stdout", o->to_stdout, "Write to stdout");
  sub->add_flag("-f,--force", o->force, "Overwrite existing output files (and write compressed data to a terminal)");
  sub->add_flag("-k,--keep", o->keep, "Keep the input file (the default, as in zstd)");
  sub->add_flag("--rm", o->remove_input, "Remove the input file after success (not when writing to stdout)");
  sub->add_flag("-q,--quiet", o->quiet, "Print no summary line and no progress");
  sub->add_flag("-v,--verbose", o->verbose, "Also print frames, time and speed of each file");
  sub->add_option("--threads,-T", o->threads, "CPU threads (0: one per hardware thread; never changes the output)")
      ->default_val(1);
}

void check_common(const CommonOptions& o) {
  if (o.inputs.size() > 1 && !o.output.empty() && o.output != "-")
    throw CliError("-o names one output file, but " + std::to_string(o.inputs.size()) + " inputs were given");
  if (o.keep && o.remove_input) throw CliError("--keep and --rm contradict each other");
  if (o.quiet && o.verbose) throw CliError("--quiet and --verbose contradict each other");
  size_t stdins = 0;
  for (const std::string& in : o.inputs) stdins += in == "-";
  if (stdins > 1) throw CliError("stdin (\"-\") can be read only once");
}

std::string target_path(const CommonOptions& o, const std::string& input, bool compress) {
  if (o.to_stdout) return "-";
  if (!o.output.empty()) return o.output;
  if (input == "-") return "-";
  if (compress) return input + kSuffix;
  if (!has_suffix(input)) throw CliError(input + ": unknown suffix (expected " + kSuffix + "; use -o to name the output)");
  return input.substr(0, input.size() - 4);
}

// --rm, as zstd does it: only after success, and not when the output went to stdout.
void finish_input(const CommonOptions& o, const std::string& input, const std::string& output) {
  if (o.remove_input && input != "-" && output != "-") {
    if (unlink(input.c_str()) != 0) throw CliError("cannot remove '" + input + "'");
  }
}

void summary(const CommonOptions& o, const std::string& input, const std::string& output, const StreamResult& r,
             bool compress, double seconds) {
  if (o.quiet || (output == "-" && !o.verbose)) return;
  const uint64_t from = r.in, to = r.out;
  double ratio = compress ? (to ? double(from) / double(to) : 0.0) : (from ? double(to) / double(from) : 0.0);
  std::string extra;
  if (o.verbose) {
    const uint64_t plain = compress ? from : to;
    extra = ", " + (r.frames ? std::to_string(r.frames) + (r.frames == 1 ? " frame" : " frames") : "container") +
            ", " + format_fixed(seconds, 3) + " s, " +
            format_fixed(seconds > 0 ? double(plain) / seconds / 1e6 : 0.0, 1) + " MB/s";
  }
  std::fprintf(stderr, "%s: %llu -> %llu bytes (ratio %s%s) -> %s\n", display_name(input).c_str(),
               (unsigned long long)from, (unsigned long long)to, format_fixed(ratio, 4).c_str(), extra.c_str(),
               output == "-" ? "stdout" : display_name(output).c_str());
}

// Runs one input's work; a failure is reported and the next input still processed, as zstd does. Returns false
// when it failed.
template <class Fn>
bool each_input(const std::string& input, Fn fn) {
  try {
    fn();
    return true;
  } catch (const CliError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "splitzip: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "splitzip: error: %s: out of memory\n", display_name(input).c_str());
  }
  return false;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Command add_compress_command(CLI::App& app) {
  struct Options : CommonOptions {
    std::string dtype, codebook, kind = "generic", format = "auto", kv_shape, mode = "fast", row_map;
    unsigned chunk_log2 = 0;
    bool no_checksum = false, pair_rows = false;
    std::string checksum;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "compress",
      "Compress raw tensors (--dtype), .npy or .safetensors files into FILE.spz. Raw input gives frames of 4 Mi "
      "values back to back (one frame when shorter), streamed in bounded memory; .npy and .safetensors give a "
      "container that restores the file byte for byte. The input is kept.");
  add_common(sub, o.get(), "compress");
  sub->add_option("--dtype,-d", o->dtype, "Value type of raw input: bf16|fp16|fp32|fp8_e4m3|fp8_e5m2");
  sub->add_option("--format", o->format, "Input format: auto (by extension, then magic), raw, npy, safetensors")
      ->default_val("auto");
  sub->add_option("--codebook", o->codebook,
                  "Codebook or channel book file from `splitzip calibrate` (else the default codebook)");
  sub->add_option("--kv-shape", o->kv_shape,
                  "L,2,T,H,D: the input is a raw KV cache [layers][K, V][tokens][kv_heads][head_dim] (T may be *); "
                  "with a channel book (--codebook) it becomes a container of the book and one frame per tensor");
  sub->add_option("--kind", o->kind, "Default codebook to use: k, v or generic")->default_val("generic");
  sub->add_option("--mode", o->mode,
                  "fast: fixed-length exponent codes (codebook or channel book); max: entropy-coded symbols with a "
                  "symbol table (--codebook FILE from `splitzip calibrate --mode max`, with --kv-shape)")
      ->default_val("fast");
  sub->add_option("--chunk-log2", o->chunk_log2,
                  "Chunk size as log2 of values, 8..16 (default 12; with --mode max 16, or less for tensors of "
                  "fewer than 2^29 values, at least 12: sz_entropy_chunk_log2)");
  sub->add_flag("--no-checksum", o->no_checksum, "Omit the per-chunk checksums");
  sub->add_option("--checksum", o->checksum, kChecksumHelp);
  sub->add_flag("--pair-rows", o->pair_rows,
                "--mode max, FP8: paired frames (each token's rows paired with its previous occurrence's; the row map "
                "from the input's layer-0 V rows, stored in the container)");
  sub->add_option("--row-map", o->row_map,
                  "--mode max, FP8: paired frames with this row map file (e.g. splitzip.RowMap.from_tokens(ids).save), "
                  "stored in the container");

  auto run = [o]() -> int {
    check_common(*o);
    if (o->mode != "fast" && o->mode != "max") throw CliError("--mode must be fast or max, not '" + o->mode + "'");
    if ((o->pair_rows || !o->row_map.empty()) && (o->mode != "max" || o->kv_shape.empty()))
      throw CliError("--pair-rows and --row-map pair the rows of max-mode KV frames: they need --mode max --kv-shape");
    if (o->pair_rows && !o->row_map.empty()) throw CliError("--pair-rows or --row-map, not both");
    std::unique_ptr<LoadedRowMap> given_rows;
    if (!o->row_map.empty()) {
      Buffer bytes = read_input(o->row_map);
      if (!is_row_map_file(bytes)) throw CliError(display_name(o->row_map) + ": not a row map file");
      given_rows = load_row_map(std::move(bytes), display_name(o->row_map));
    }
    const bool max_mode = o->mode == "max";
    // (max mode without --chunk-log2: 0, which the library resolves per frame from its values)
    if (o->chunk_log2 == 0 && !max_mode) o->chunk_log2 = SZ_DEFAULT_CHUNK_LOG2;
    if (o->chunk_log2 != 0) check_chunk_log2(o->chunk_log2);
    if (o->inputs.size() > 1 && (o->to_stdout || o->output == "-"))
      throw CliError("-c takes one input: a container cannot be followed by more data in one stream");
    std::optional<sz_dtype> dtype;
    if (!o->dtype.empty()) dtype = parse_dtype(o->dtype);
    InputFormat format = parse_format(o->format);
    CodebookChoice codebooks;
    codebooks.kind = parse_kind(o->kind);
    std::optional<LoadedBook> book;
    std::unique_ptr<LoadedTable> table;
    std::optional<KvShape> kv;
    if (!o->kv_shape.empty()) kv = parse_kv_shape(o->kv_shape);
    if (max_mode && o->codebook.empty())
      throw CliError("--mode max needs a symbol table (--codebook FILE from `splitzip calibrate --mode max`)");
    if (!o->codebook.empty()) {
      Buffer bytes = read_input(o->codebook);
      if (is_symbol_table_file(bytes)) {
        if (!max_mode) throw CliError(display_name(o->codebook) + " is a symbol table: it is for --mode max");
        table = load_symbol_table(std::move(bytes), display_name(o->codebook));
      } else if (max_mode) {
        throw CliError(display_name(o->codebook) + ": --mode max needs a symbol table file (from `splitzip calibrate "
                       "--mode max`), not a codebook or channel book");
      } else if (is_channel_book_file(bytes)) {
        book = load_channel_book(std::move(bytes), display_name(o->codebook));
      } else {
        codebooks.user = load_codebook_file(o->codebook);
      }
    }
    if (table && !kv) throw CliError("a symbol table needs --kv-shape (which tensor and channel each value is)");
    if (book && !kv) throw CliError("a channel book needs --kv-shape (which tensor and channel each value is)");
    if (kv && !book && !table)
      throw CliError("--kv-shape needs a channel book (--codebook FILE from `splitzip calibrate --kv-shape`)");
    if (kv && !dtype) throw CliError("--kv-shape needs --dtype (the input is a raw KV cache)");
    sz_params params = sz_params_default();
    params.chunk_log2 = o->chunk_log2;
    params.threads = o->threads;
    params.flags = checksum_flags(o->checksum, o->no_checksum);

    bool ok = true;
    for (const std::string& input : o->inputs) {
      ok &= each_input(input, [&] {
        const auto t0 = std::chrono::steady_clock::now();
        std::string output = target_path(*o, input, true);
        if (output == "-" && is_stdout_terminal() && !o->force)
          throw CliError("refusing to write compressed data to a terminal (use -f, or -o FILE)");
        if (output != "-" && input != "-" && same_file(input, output))
          throw CliError("'" + input + "': input and output are the same file");
        InputFile in(input);
        // The format from the first bytes: raw inputs stream; .npy and .safetensors files are planned from their
        // header and read item by item (from stdin, read whole).
        const std::vector<uint8_t>& head9 = in.peek(9);
        const std::vector<uint8_t>& head = in.peek(std::max<size_t>(64, detect_prefix_size(head9.data(),
                                                                                           head9.size())));
        const InputFormat fmt = detect_format(head.data(), head.size(), input, format);
        OutputFile out(output, o->force, input);
        Progress progress(!o->quiet);
        StreamResult r;
        if (kv) {
          if (fmt != InputFormat::kRaw) throw CliError(display_name(input) + ": --kv-shape takes a raw KV file");
          check_raw_input(head.data(), head.size(), input, format == InputFormat::kAuto, dtype);
          progress.phase("reading", display_name(input), in.size_hint());
          Buffer data = in.read_all(&progress);
          std::unique_ptr<LoadedRowMap> own_rows;
          if (o->pair_rows) own_rows = row_map_of_kv(data.data(), data.size(), *dtype, *kv, display_name(input));
          const LoadedRowMap* rows = own_rows ? own_rows.get() : given_rows.get();
          Compressed result = table ? compress_kv_entropy(data.data(), data.size(), *dtype, *kv, *table, rows, params,
                                                          display_name(input), &progress)
                                    : compress_kv(data.data(), data.size(), *dtype, *kv, *book, params,
                                                  display_name(input), &progress);
          progress.phase("writing", output == "-" ? std::string("stdout") : display_name(output), result.size());
          for (const Buffer& part : result.parts) out.write(part.data(), part.size(), &progress);
          r.in = data.size();
          r.out = result.size();
        } else if (fmt == InputFormat::kRaw) {
          check_raw_input(head.data(), head.size(), input, format == InputFormat::kAuto, dtype);
          progress.phase("compressing", display_name(input), in.size_hint());
          r = compress_raw_stream(in, &out, *dtype, codebooks, params, display_name(input), &progress);
        } else if (in.seekable()) {
          // The plan from the header alone; the items are then read where they lie.
          const uint64_t want = std::min(in.size_hint(), plan_prefix_size(head.data(), head.size(), fmt));
          const std::vector<uint8_t>& prefix = in.peek(size_t(std::max<uint64_t>(want, head.size())));
          InputPlan plan = plan_input(prefix.data(), prefix.size(), in.size_hint(), input, fmt, dtype);
          r.out = write_container(Source(in), plan, codebooks, params, display_name(input), out, &progress);
          r.in = in.size_hint();
        } else {
          progress.phase("reading", display_name(input), 0);
          Buffer data = in.read_all(&progress);
          InputPlan plan = plan_input(data.data(), data.size(), data.size(), input, fmt, dtype);
          r.out = write_container(Source(data.data(), data.size()), plan, codebooks, params, display_name(input), out,
                                  &progress);
          r.in = data.size();
        }
        progress.finish();
        out.commit();
        if (input != "-" && output != "-") copy_times(input, output);
        summary(*o, input, output, r, true, since(t0));
        finish_input(*o, input, output);
      });
    }
    return ok ? 0 : 1;
  };
  return {sub, run};
}

Command add_decompress_command(CLI::App& app) {
  struct Options : CommonOptions {
    bool test = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "decompress",
      "Decompress FILE.spz into FILE (frames back to back, streamed, or a container, which restores the original "
      ".npy/.safetensors byte for byte). The input is kept.");
  add_common(sub, o.get(), "decompress");
  sub->add_flag("-t,--test", o->test, "Only check that the files decompress (all checksums verified); write nothing");

  auto run = [o]() -> int {
    check_common(*o);
    bool ok = true;
    for (const std::string& input : o->inputs) {
      ok &= each_input(input, [&] {
        const auto t0 = std::chrono::steady_clock::now();
        if (o->test) {
          InputFile in(input);
          Progress progress(!o->quiet);
          progress.phase("testing", display_name(input), in.size_hint());
          StreamResult r = decompress_stream(in, nullptr, o->threads, display_name(input), &progress);
          progress.finish();
          if (!o->quiet) std::fprintf(stderr, "%s: OK (%llu bytes)\n", display_name(input).c_str(),
                                      (unsigned long long)r.out);
          return;
        }
        std::string output = target_path(*o, input, false);
        if (output != "-" && input != "-" && same_file(input, output))
          throw CliError("'" + input + "': input and output are the same file");
        InputFile in(input);
        OutputFile out(output, o->force, input);
        Progress progress(!o->quiet);
        progress.phase("decompressing", display_name(input), in.size_hint());
        StreamResult r = decompress_stream(in, &out, o->threads, display_name(input), &progress);
        progress.finish();
        out.commit();
        if (input != "-" && output != "-") copy_times(input, output);
        summary(*o, input, output, r, false, since(t0));
        finish_input(*o, input, output);
      });
    }
    return ok ? 0 : 1;
  };
  return {sub, run};
}

}  // namespace splitzip_cli
