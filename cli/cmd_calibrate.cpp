// cmd_calibrate.cpp — `splitzip calibrate SAMPLES... -o CODEBOOK`: one exponent histogram over all samples, then
// the library's calibration (sz_calibrate), written as a codebook file (docs/FORMAT.md §5). With --kv-shape the
// samples are raw KV caches and the output is a channel book (§5.2): per-channel histograms, sz_channel_calibrate.
#include "codec.h"
#include "commands.h"
#include "common.h"
#include "inputs.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

namespace splitzip_cli {

namespace {

// Per-channel counts over every sample file (raw KV caches of `shape`), by the library's histogram call `add`
// (sz_channel_histogram_add or sz_symbol_histogram_add); returns the values seen.
template <class Options, class Add>
uint64_t kv_histograms(const Options& o, sz_dtype dtype, const KvShape& shape, Add add) {
  Progress progress(!o.quiet);
  uint64_t values = 0;
  for (const std::string& path : o.samples) {
    const std::string file = display_name(path);
    Buffer data = read_input(path, &progress);
    const uint64_t tokens = shape.tokens_of(data.size(), dtype, file);
    check_status(add(data.data(), tokens), file);
    values += data.size() / sz_dtype_size(dtype);
  }
  progress.finish();
  return values;
}

template <class Options>
int calibrate_channels(const Options& o, std::optional<sz_dtype> dtype) {
  if (!dtype) throw CliError("--kv-shape needs --dtype (the samples are raw KV caches)");
  if (o.format != "auto" && o.format != "raw") throw CliError("--kv-shape reads raw KV files, not --format " + o.format);
  if (o.code_bits > 4) throw CliError("--code-bits must be 0..4");
  const KvShape shape = parse_kv_shape(o.kv_shape);
  const uint32_t tensors = shape.tensors(), period = shape.period();
  const size_t hist_size = sz_channel_histogram_size(*dtype, tensors, period);
  if (hist_size == 0) throw CliError(std::string("no channel book for ") + sz_dtype_name(*dtype) + " of this shape");
  std::vector<uint32_t> counts(hist_size / sizeof(uint32_t), 0u);
  OutputFile out(o.output, o.force);
  const uint64_t values = kv_histograms(o, *dtype, shape, [&](const uint8_t* p, uint64_t tokens) {
    return sz_channel_histogram_add(counts.data(), *dtype, tensors, period, p, tokens);
  });
  std::vector<uint8_t> bases(size_t(tensors) * period);
  unsigned k = 0;
  double bits = 0;
  check_status(sz_channel_calibrate(counts.data(), *dtype, tensors, period, o.code_bits, bases.data(), &k, &bits),
               "calibration");
  sz_channel_book book;
  check_status(sz_channel_book_init(&book, *dtype, k, period, tensors, bases.data()), "channel book");
  Buffer bytes{sz_channel_book_file_size(&book)};
  size_t size = 0;
  check_status(sz_channel_book_serialize(&book, bytes.data(), bytes.size(), &size), "channel book");
  out.write(bytes.data(), size);
  out.commit();
  if (!o.quiet) {
    const unsigned width = unsigned(sz_dtype_size(*dtype) * 8), rest = width - sz_dtype_exponent_bits(*dtype);
    std::fprintf(stderr,
                 "%s: %s channel book from %llu values: %u tensors x %u channels, k=%u, id %016llx; predicted %.4f "
                 "exponent bits/value, ratio %.4f\n",
                 o.output.c_str(), sz_dtype_name(*dtype), (unsigned long long)values, tensors, period, k,
                 (unsigned long long)book.id, bits, double(width) / (rest + bits));
  }
  return 0;
}

// --mode max: per-channel symbol histograms, clustered into groups, written as a symbol table file (§5.3).
template <class Options>
int calibrate_table(const Options& o, std::optional<sz_dtype> dtype) {
  if (!dtype) throw CliError("--mode max needs --dtype (the samples are raw KV caches)");
  if (o.kv_shape.empty()) throw CliError("--mode max needs --kv-shape (the tables are per channel)");
  if (o.format != "auto" && o.format != "raw") throw CliError("--mode max reads raw KV files, not --format " + o.format);
  if (o.code_bits != 0) throw CliError("--code-bits is for channel books (--mode fast)");
  if (o.groups < 1 || o.groups > SZ_MAX_GROUPS)
    throw CliError("--groups must be 1.." + std::to_string(SZ_MAX_GROUPS));
  const KvShape shape = parse_kv_shape(o.kv_shape);
  const uint32_t tensors = shape.tensors(), period = shape.period();
  const size_t hist_size = sz_symbol_histogram_size(*dtype, tensors, period);
  if (hist_size == 0) throw CliError(std::string("no symbol table for ") + sz_dtype_name(*dtype) + " of this shape");
  std::vector<uint32_t> counts(hist_size / sizeof(uint32_t), 0u);
  OutputFile out(o.output, o.force);
  if (o.pair_rows && sz_dtype_size(*dtype) != 1)
    throw CliError(std::string("--pair-rows is for FP8 KV (fp8_e4m3, fp8_e5m2), not ") + sz_dtype_name(*dtype));
  const uint64_t values = kv_histograms(o, *dtype, shape, [&](const uint8_t* p, uint64_t tokens) {
    if (!o.pair_rows) return sz_symbol_histogram_add(counts.data(), *dtype, tensors, period, p, tokens);
    // Paired symbols (§4.10.6): each sample's rows paired by its own layer-0 V rows (the map serves every tensor).
    const auto rows = row_map_of_kv(p, size_t(tokens * tensors * period), *dtype, shape, "sample");
    return sz_symbol_histogram_add_paired(counts.data(), *dtype, tensors, period, p, tokens, &rows->map);
  });
  Buffer bytes{sz_symbol_table_file_size(*dtype, tensors, period, o.groups)};
  size_t size = 0;
  double bits = 0;
  check_status(sz_symbol_calibrate(counts.data(), *dtype, tensors, period, o.groups, bytes.data(), bytes.size(), &size,
                                   &bits),
               "calibration");
  sz_symbol_table table;
  check_status(sz_symbol_table_parse(bytes.data(), size, &table), "symbol table");
  out.write(bytes.data(), size);
  out.commit();
  if (!o.quiet) {
    const unsigned width = unsigned(sz_dtype_size(*dtype) * 8), raw = width == 8 ? 0 : width - sz_dtype_exponent_bits(*dtype);
    std::fprintf(stderr,
                 "%s: %s symbol table from %llu values: %u tensors x %u channels in %u groups, %zu bytes, id "
                 "%016llx; predicted %.4f symbol bits/value, ratio %.4f\n",
                 o.output.c_str(), sz_dtype_name(*dtype), (unsigned long long)values, tensors, period, table.groups,
                 size, (unsigned long long)table.id, bits, double(width) / (raw + bits));
  }
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> samples;
    std::string output, dtype, format = "auto", kv_shape, mode = "fast";
    unsigned code_bits = 0, groups = 64;
    bool force = false, pair_rows = false;
    bool quiet = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Build the codebook that minimises the compressed size of data like the samples (raw files need --dtype; "
      ".npy and .safetensors use their own dtype, --dtype picks which tensors of a mixed .safetensors file count)");
  sub->add_option("samples", o->samples, "Sample tensors (raw, .npy, .safetensors; \"-\": stdin)")->required();
  sub->add_option("-o,--output", o->output, "Codebook file to write")->required();
  sub->add_option("--dtype,-d", o->dtype, "bf16|fp16|fp32|fp8_e4m3|fp8_e5m2");
  sub->add_option("--format", o->format, "Input format: auto, raw, npy, safetensors")->default_val("auto");
  sub->add_option("--kv-shape", o->kv_shape,
                  "L,2,T,H,D: the samples are raw KV caches [layers][K, V][tokens][kv_heads][head_dim] (T may be *: "
                  "each file's own); writes a channel book with a window per (layer, K/V, head, dim)");
  sub->add_option("--code-bits,-k", o->code_bits, "With --kv-shape: code width 1..4 (0: the best for the samples)")
      ->default_val(0);
  sub->add_option("--mode", o->mode,
                  "fast: a codebook or (with --kv-shape) a channel book; max: a symbol table for entropy-coded frames "
                  "(needs --dtype and --kv-shape)")
      ->default_val("fast");
  sub->add_option("--groups", o->groups, "With --mode max: probability tables, channels clustered into them (1..4096)")
      ->default_val(64);
  sub->add_flag("--pair-rows", o->pair_rows,
                "With --mode max, FP8: tables for paired frames (`compress --pair-rows`): each sample's rows paired "
                "with their token's previous rows (by its layer-0 V rows)");
  sub->add_flag("-f,--force", o->force, "Overwrite an existing codebook file");
  sub->add_flag("-q,--quiet", o->quiet, "Print no summary");

  auto run = [o]() -> int {
    std::optional<sz_dtype> dtype;
    if (!o->dtype.empty()) dtype = parse_dtype(o->dtype);
    if (o->mode != "fast" && o->mode != "max") throw CliError("--mode must be fast or max, not '" + o->mode + "'");
    if (o->mode == "max") return calibrate_table(*o, dtype);
    if (o->groups != 64) throw CliError("--groups is for symbol tables (--mode max)");
    if (o->pair_rows) throw CliError("--pair-rows is for symbol tables (--mode max)");
    if (!o->kv_shape.empty()) return calibrate_channels(*o, dtype);
    if (o->code_bits != 0) throw CliError("--code-bits is for channel books (--kv-shape)");
    InputFormat format = parse_format(o->format);
    OutputFile out(o->output, o->force);
    std::optional<sz_dtype> hist_dtype = dtype;
    sz_histogram hist;
    bool hist_ready = false;
    uint64_t values = 0;
    Progress progress(true);
    for (const std::string& path : o->samples) {
      std::string file = display_name(path);
      Buffer data = read_input(path, &progress);
      InputPlan plan = plan_input(data.data(), data.size(), data.size(), path, format, dtype);
      bool any = false;
      for (const Segment& s : plan.segments) {
        if (!s.is_frame) continue;
        if (hist_dtype && *hist_dtype != s.dtype) {
          if (dtype) continue;  // --dtype chose which tensors of a mixed file count
          throw CliError(file + ": tensor '" + s.name + "' is " + sz_dtype_name(s.dtype) + " but earlier samples are " +
                         sz_dtype_name(*hist_dtype) + " (use --dtype to pick one)");
        }
        if (!hist_ready) {
          hist_dtype = s.dtype;
          check_status(sz_histogram_init(&hist, s.dtype), "histogram");
          hist_ready = true;
        }
        uint64_t n = s.size / sz_dtype_size(s.dtype);
        check_status(sz_histogram_add(&hist, data.data() + s.offset, size_t(n)), file);
        values += n;
        any = true;
      }
      if (!any) throw CliError(file + ": holds no " + (dtype ? std::string(sz_dtype_name(*dtype)) + " " : "") +
                               "floating-point tensor to calibrate on");
    }
    progress.finish();
    if (values == 0) throw CliError("the samples hold no values");
    sz_codebook cb;
    double bits = 0;
    check_status(sz_calibrate(&hist, &cb, &bits), "calibration");
    uint8_t bytes[SZ_CODEBOOK_FILE_SIZE];
    check_status(sz_codebook_serialize(&cb, bytes, sizeof bytes), "codebook");
    out.write(bytes, sizeof bytes);
    out.commit();
    if (!o->quiet) {
      // Expected size per value = rest bits + exponent-stream bits (the calibration's prediction).
      unsigned width = unsigned(sz_dtype_size(sz_dtype(cb.dtype)) * 8);
      unsigned rest = width - sz_dtype_exponent_bits(sz_dtype(cb.dtype));
      std::string vals;
      for (unsigned i = 0; i < cb.count; ++i) vals += (i ? " " : "") + std::to_string(cb.values[i]);
      std::fprintf(stderr,
                   "%s: %s codebook from %llu values: k=%u, %u entries: %s; predicted %.4f exponent bits/value, "
                   "ratio %.4f\n",
                   o->output.c_str(), sz_dtype_name(sz_dtype(cb.dtype)), (unsigned long long)values,
                   unsigned(cb.code_bits), unsigned(cb.count), vals.c_str(), bits, double(width) / (rest + bits));
    }
    return 0;
  };
  return {sub, run};
}

}  // namespace splitzip_cli
