// cmd_calibrate.cpp — `splitzip calibrate SAMPLES... -o CODEBOOK`: one exponent histogram over all samples, then
// the library's calibration (sz_calibrate), written as a codebook file (docs/FORMAT.md §5).
#include "codec.h"
#include "commands.h"
#include "common.h"
#include "inputs.h"

#include <cstdio>
#include <memory>

namespace splitzip_cli {

Command add_calibrate_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> samples;
    std::string output, dtype, format = "auto";
    bool force = false;
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
  sub->add_flag("-f,--force", o->force, "Overwrite an existing codebook file");
  sub->add_flag("-q,--quiet", o->quiet, "Print no summary");

  auto run = [o]() -> int {
    std::optional<sz_dtype> dtype;
    if (!o->dtype.empty()) dtype = parse_dtype(o->dtype);
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
      InputPlan plan = plan_input(data.data(), data.size(), path, format, dtype);
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
