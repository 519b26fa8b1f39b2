// cmd_bench.cpp — `splitzip bench FILES...`: compress and decompress every floating tensor of each file in memory,
// check that the round trip is bit-exact, and print one table row per file and device: ratio, the ideal ratio for
// the same codebook and escape rate, encode and decode GB/s (of uncompressed bytes), and as the reference memcpy
// GB/s measured in the same run by as many threads as the codec used. With CUDA (sz_cuda_available()), the GPU path
// runs too: data resident on the device, kernels timed with events, the GPU frame compared byte for byte with the
// CPU frame. Clock, medians, GB/s and ratios come from the benchmark harness (bench/harness/harness.h).
#include "codec.h"
#include "commands.h"
#include "common.h"
#include "harness/harness.h"
#include "inputs.h"

#include <splitzip/splitzip_cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <sys/stat.h>

#ifdef SPLITZIP_CLI_CUDA
#include <cuda_runtime.h>
#endif

namespace splitzip_cli {

namespace {

struct BenchOptions {
  std::vector<std::string> files;
  std::string dtype, format = "auto", codebook, kind = "generic";
  std::string threads_list = "1";
  std::vector<unsigned> threads;
  unsigned iters = 5;
  unsigned chunk_log2 = SZ_DEFAULT_CHUNK_LOG2;
  bool no_checksum = false;
  std::string checksum;
  bool gpu = false;
  bool cpu_only = false;
};

// One tensor of a file: where it is and how it compresses.
struct Tensor {
  const uint8_t* src;
  uint64_t n;
  uint64_t bytes;
  uint64_t out_offset;  // in the concatenated decode buffer
  sz_dtype dtype;
  sz_codebook codebook;
};

struct Row {
  std::string file, dtype, device;
  uint64_t bytes = 0, compressed = 0, escapes = 0, values = 0;
  double ideal_bytes = 0;
  double enc_gbps = 0, dec_gbps = 0, memcpy_gbps = 0;
  std::string exact;
  std::string note;
};

std::string pad(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

const size_t kWidths[] = {24, 8, 9, 7, 7, 9, 9, 9, 9, 11, 9};
const bool kRight[] = {false, false, true, true, true, true, false, true, true, true, false};

void print_cells(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += (i ? "  " : "") + pad(cells[i], kWidths[i], kRight[i]);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void print_header() {
  print_cells({"file", "dtype", "size MB", "ratio", "ideal", "escapes", "device", "enc GB/s", "dec GB/s",
               "memcpy GB/s", "bit-exact"});
}

void print_row(const Row& r) {
  double ratio = szbench::ratio(r.bytes, r.compressed);
  double ideal = r.ideal_bytes > 0 ? double(r.bytes) / r.ideal_bytes : 0.0;
  double esc = r.values ? 100.0 * double(r.escapes) / double(r.values) : 0.0;
  std::string name = r.file;
  size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  print_cells({name, r.dtype, format_fixed(double(r.bytes) / 1e6, 2), format_fixed(ratio, 4), format_fixed(ideal, 4),
               format_fixed(esc, 3) + "%", r.device, format_fixed(r.enc_gbps, 2), format_fixed(r.dec_gbps, 2),
               format_fixed(r.memcpy_gbps, 2), r.exact + (r.note.empty() ? "" : " (" + r.note + ")")});
}

// Splits "path:dtype" when path itself does not exist and the suffix is a dtype name.
void split_file_dtype(const std::string& arg, std::string* path, std::optional<sz_dtype>* dtype) {
  *path = arg;
  size_t colon = arg.find_last_of(':');
  if (colon == std::string::npos || path_exists(arg)) return;
  sz_dtype d;
  if (sz_dtype_from_name(arg.substr(colon + 1).c_str(), &d) != SZ_OK) return;
  *path = arg.substr(0, colon);
  *dtype = d;
}

// Escapes and the ideal size, from the data and the codebook alone (not from the frame, whose raw-exponent chunks
// record no escapes): a value escapes when its exponent is not in the codebook, and the ideal stores R + k bits per
// value plus 3 bytes per escape (for BF16 with k = 4 that is the 2 / (1.5 + 3 eps) of the paper).
void add_escape_stats(const std::vector<Tensor>& tensors, Row* row) {
  for (const Tensor& t : tensors) {
    sz_histogram hist;
    check_status(sz_histogram_init(&hist, t.dtype), "histogram");
    check_status(sz_histogram_add(&hist, t.src, size_t(t.n)), "histogram");
    uint64_t escapes = t.n;
    for (unsigned i = 0; i < t.codebook.count; ++i) escapes -= hist.counts[t.codebook.values[i]];
    unsigned width = unsigned(sz_dtype_size(t.dtype) * 8);
    unsigned rest = width - sz_dtype_exponent_bits(t.dtype);
    row->escapes += escapes;
    row->values += t.n;
    row->ideal_bytes += double(t.n) * (rest + t.codebook.code_bits) / 8.0 + 3.0 * double(escapes);
  }
}

// The memcpy reference: the same tensors copied by the same number of threads, each taking an equal byte range of
// the concatenated tensors.
void parallel_copy(const std::vector<Tensor>& tensors, uint8_t* dst, unsigned threads) {
  uint64_t total = tensors.empty() ? 0 : tensors.back().out_offset + tensors.back().bytes;
  auto copy_range = [&](uint64_t lo, uint64_t hi) {
    for (const Tensor& t : tensors) {
      uint64_t a = std::max(lo, t.out_offset), b = std::min(hi, t.out_offset + t.bytes);
      if (a < b) std::memcpy(dst + a, t.src + (a - t.out_offset), size_t(b - a));
    }
  };
  if (threads <= 1) {
    copy_range(0, total);
    return;
  }
  std::vector<std::thread> pool;
  uint64_t step = (total + threads - 1) / threads;
  for (unsigned i = 1; i < threads; ++i)
    pool.emplace_back(copy_range, std::min(total, i * step), std::min(total, (i + 1) * step));
  copy_range(0, std::min(total, step));
  for (std::thread& th : pool) th.join();
}

// CPU: one warm-up round, then `iters` timed rounds of compress-all and decompress-all.
Row bench_cpu(const std::vector<Tensor>& tensors, const sz_params& params, unsigned threads, unsigned iters,
              std::vector<Buffer>* frames_out) {
  Row row;
  uint64_t total = 0;
  for (const Tensor& t : tensors) total += t.bytes;
  row.bytes = total;
  sz_params p = params;
  p.threads = threads;
  std::vector<Buffer> frames;
  std::vector<size_t> sizes(tensors.size());
  for (const Tensor& t : tensors) frames.emplace_back(size_t(sz_compress_bound(t.n, t.dtype)));
  Buffer decoded{size_t(total)};
  Buffer copy{size_t(total)};
  unsigned copy_threads = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> enc, dec, cpy;
  bool exact = true, deterministic = true;
  std::vector<Buffer> first;
  for (unsigned it = 0; it <= iters; ++it) {
    double t0 = szbench::now_s();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      check_status(sz_compress(t.src, t.n, t.dtype, &t.codebook, &p, frames[i].data(), frames[i].size(), &sizes[i]),
                   "compress");
    }
    double t1 = szbench::now_s();
    if (total) std::memset(decoded.data(), 0xA5, size_t(total));
    double t2 = szbench::now_s();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      size_t written = 0;
      check_status(sz_decompress(frames[i].data(), sizes[i], decoded.data() + t.out_offset, size_t(t.bytes), &written,
                                 threads),
                   "decompress");
      if (written != t.bytes) exact = false;
    }
    double t3 = szbench::now_s();
    parallel_copy(tensors, copy.data(), copy_threads);
    double t4 = szbench::now_s();
    for (const Tensor& t : tensors)
      if (t.bytes && std::memcmp(decoded.data() + t.out_offset, t.src, size_t(t.bytes)) != 0) exact = false;
    if (it == 0) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        Buffer f(sizes[i]);
        if (sizes[i]) std::memcpy(f.data(), frames[i].data(), sizes[i]);
        first.push_back(std::move(f));
      }
      continue;  // warm-up round: checked, not timed
    }
    for (size_t i = 0; i < tensors.size(); ++i)
      if (sizes[i] != first[i].size() || (sizes[i] && std::memcmp(first[i].data(), frames[i].data(), sizes[i]) != 0))
        deterministic = false;
    enc.push_back(t1 - t0);
    dec.push_back(t3 - t2);
    cpy.push_back(t4 - t3);
  }
  for (size_t i = 0; i < tensors.size(); ++i) row.compressed += sizes[i];
  add_escape_stats(tensors, &row);
  row.enc_gbps = szbench::gbps(total, szbench::median(enc));
  row.dec_gbps = szbench::gbps(total, szbench::median(dec));
  row.memcpy_gbps = szbench::gbps(total, szbench::median(cpy));
  row.exact = exact && deterministic ? "yes" : "NO";
  if (!deterministic) row.note = "frames differ between runs";
  row.device = "cpu x" + std::to_string(copy_threads);
  if (frames_out) {
    frames_out->clear();
    for (size_t i = 0; i < tensors.size(); ++i) {
      frames[i].shrink(sizes[i]);
      frames_out->push_back(std::move(frames[i]));
    }
  }
  return row;
}

#ifdef SPLITZIP_CLI_CUDA
// Device buffers freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t size) {
    cudaError_t e = cudaMalloc(&ptr, std::max<size_t>(size, 1));
    if (e != cudaSuccess) throw CliError(std::string("cudaMalloc: ") + cudaGetErrorString(e));
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CliError(std::string(what) + ": " + cudaGetErrorString(e));
}

// GPU: the input copied to the device once; every round enqueues all tensors on one stream, timed by events.
Row bench_gpu(const std::vector<Tensor>& tensors, const sz_params& params, unsigned iters,
              const std::vector<Buffer>& cpu_frames) {
  Row row;
  uint64_t total = 0;
  for (const Tensor& t : tensors) total += t.bytes;
  row.bytes = total;
  size_t nt = tensors.size();
  std::vector<uint64_t> frame_off(nt), bound(nt);
  uint64_t frames_total = 0;
  size_t ws = 0;
  for (size_t i = 0; i < nt; ++i) {
    const Tensor& t = tensors[i];
    bound[i] = sz_compress_bound(t.n, t.dtype);
    frame_off[i] = frames_total;
    frames_total += (bound[i] + 255) / 256 * 256;
    size_t w = 0;
    check_status(sz_cuda_compress_workspace_size(t.n, t.dtype, &params, &w), "GPU workspace");
    ws = std::max(ws, w);
    check_status(sz_cuda_decompress_workspace_size(size_t(bound[i]), size_t(t.bytes), &w), "GPU workspace");
    ws = std::max(ws, w);
  }
  DeviceBuffer d_src{size_t(total)}, d_frames{size_t(frames_total)}, d_out{size_t(total)}, d_copy{size_t(total)},
      d_ws{ws}, d_sizes{nt * sizeof(uint64_t)}, d_status{nt * sizeof(int32_t)};
  cuda_check(cudaMemset(d_ws.ptr, 0, ws), "cudaMemset");  // a codec workspace is zero-filled before its first use
  for (const Tensor& t : tensors)
    if (t.bytes)
      cuda_check(cudaMemcpy(d_src.as<uint8_t>() + t.out_offset, t.src, size_t(t.bytes), cudaMemcpyHostToDevice),
                 "cudaMemcpy");
  uint64_t* h_sizes = nullptr;
  cuda_check(cudaMallocHost(reinterpret_cast<void**>(&h_sizes), nt * sizeof(uint64_t)), "cudaMallocHost");
  std::unique_ptr<uint64_t, cudaError_t (*)(void*)> h_sizes_owner(h_sizes, cudaFreeHost);
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> stream_owner(stream, cudaStreamDestroy);
  cudaEvent_t ev[4];
  for (auto& e : ev) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
  struct Events {
    cudaEvent_t* e;
    ~Events() {
      for (int i = 0; i < 4; ++i) cudaEventDestroy(e[i]);
    }
  } events_owner{ev};
  auto stream_handle = reinterpret_cast<sz_cuda_stream>(stream);

  std::vector<double> enc, dec, cpy;
  for (unsigned it = 0; it <= iters; ++it) {
    cuda_check(cudaEventRecord(ev[0], stream), "cudaEventRecord");
    for (size_t i = 0; i < nt; ++i) {
      const Tensor& t = tensors[i];
      check_status(sz_cuda_compress(d_src.as<uint8_t>() + t.out_offset, t.n, t.dtype, &t.codebook, &params,
                                    d_frames.as<uint8_t>() + frame_off[i], size_t(bound[i]), d_ws.ptr, ws,
                                    d_sizes.as<uint64_t>() + i, h_sizes + i, stream_handle),
                   "GPU compress");
    }
    cuda_check(cudaEventRecord(ev[1], stream), "cudaEventRecord");
    cuda_check(cudaStreamSynchronize(stream), "GPU compress");
    cuda_check(cudaMemsetAsync(d_out.ptr, 0xA5, size_t(total), stream), "cudaMemset");
    cuda_check(cudaEventRecord(ev[2], stream), "cudaEventRecord");
    for (size_t i = 0; i < nt; ++i) {
      const Tensor& t = tensors[i];
      check_status(sz_cuda_decompress(d_frames.as<uint8_t>() + frame_off[i], size_t(h_sizes[i]),
                                      d_out.as<uint8_t>() + t.out_offset, size_t(t.bytes), d_ws.ptr, ws,
                                      d_status.as<int32_t>() + i, nullptr, stream_handle),
                   "GPU decompress");
    }
    cuda_check(cudaEventRecord(ev[3], stream), "cudaEventRecord");
    cuda_check(cudaStreamSynchronize(stream), "GPU decompress");
    float ms_enc = 0, ms_dec = 0;
    cuda_check(cudaEventElapsedTime(&ms_enc, ev[0], ev[1]), "cudaEventElapsedTime");
    cuda_check(cudaEventElapsedTime(&ms_dec, ev[2], ev[3]), "cudaEventElapsedTime");
    cuda_check(cudaEventRecord(ev[0], stream), "cudaEventRecord");
    cuda_check(cudaMemcpyAsync(d_copy.ptr, d_src.ptr, size_t(total), cudaMemcpyDeviceToDevice, stream), "cudaMemcpy");
    cuda_check(cudaEventRecord(ev[1], stream), "cudaEventRecord");
    cuda_check(cudaStreamSynchronize(stream), "cudaMemcpy");
    float ms_cpy = 0;
    cuda_check(cudaEventElapsedTime(&ms_cpy, ev[0], ev[1]), "cudaEventElapsedTime");
    if (it == 0) continue;  // warm-up
    enc.push_back(ms_enc / 1e3);
    dec.push_back(ms_dec / 1e3);
    cpy.push_back(ms_cpy / 1e3);
  }
  // Verify the last round: statuses, decoded bytes, and the frames against the CPU frames.
  std::vector<int32_t> status(nt);
  cuda_check(cudaMemcpy(status.data(), d_status.ptr, nt * sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  Buffer decoded{size_t(total)};
  if (total) cuda_check(cudaMemcpy(decoded.data(), d_out.ptr, size_t(total), cudaMemcpyDeviceToHost), "cudaMemcpy");
  bool exact = true, same_frames = true;
  for (size_t i = 0; i < nt; ++i) {
    const Tensor& t = tensors[i];
    if (status[i] != SZ_OK) {
      exact = false;
      row.note = std::string("device status ") + sz_status_name(sz_status(status[i]));
    }
    if (t.bytes && std::memcmp(decoded.data() + t.out_offset, t.src, size_t(t.bytes)) != 0) exact = false;
    row.compressed += h_sizes[i];
    if (i < cpu_frames.size()) {
      Buffer f{size_t(h_sizes[i])};
      if (h_sizes[i])
        cuda_check(cudaMemcpy(f.data(), d_frames.as<uint8_t>() + frame_off[i], f.size(), cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
      if (f.size() != cpu_frames[i].size() || (f.size() && std::memcmp(f.data(), cpu_frames[i].data(), f.size())))
        same_frames = false;
    }
  }
  add_escape_stats(tensors, &row);
  row.enc_gbps = szbench::gbps(total, szbench::median(enc));
  row.dec_gbps = szbench::gbps(total, szbench::median(dec));
  row.memcpy_gbps = szbench::gbps(total, szbench::median(cpy));
  row.exact = exact ? "yes" : "NO";
  if (!same_frames) {
    row.exact = "NO";
    if (row.note.empty()) row.note = "GPU frame differs from CPU frame";
  }
  int dev = 0;
  cudaGetDevice(&dev);
  row.device = "gpu" + std::to_string(dev);
  return row;
}
#endif

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Compress and decompress every floating tensor of each file in memory; verify the round trip is bit-exact; "
      "print ratio, ideal ratio (same codebook and escapes), encode/decode GB/s of uncompressed bytes and memcpy "
      "GB/s measured in the same run. FILE:DTYPE gives a raw file its own dtype.");
  sub->add_option("files", o->files, "Raw (with --dtype or FILE:DTYPE), .npy or .safetensors files")->required();
  sub->add_option("--dtype,-d", o->dtype, "Value type of raw files: bf16|fp16|fp32|fp8_e4m3|fp8_e5m2");
  sub->add_option("--format", o->format, "Input format: auto, raw, npy, safetensors")->default_val("auto");
  sub->add_option("--threads,-T", o->threads_list, "CPU thread counts, comma-separated (0: all hardware threads)")
      ->default_val("1");
  sub->add_option("--iters,-i", o->iters, "Timed rounds (after one warm-up); the median is reported")
      ->default_val(5);
  sub->add_option("--codebook", o->codebook, "Codebook file (else the default codebook)");
  sub->add_option("--kind", o->kind, "Default codebook to use: k, v or generic")->default_val("generic");
  sub->add_option("--chunk-log2", o->chunk_log2, "Chunk size as log2 of values, 8..16")
      ->default_val(SZ_DEFAULT_CHUNK_LOG2);
  sub->add_flag("--no-checksum", o->no_checksum, "Frames without chunk checksums");
  sub->add_option("--checksum", o->checksum, kChecksumHelp);
  auto* gpu = sub->add_flag("--gpu", o->gpu, "Run the CUDA path too (default: when a GPU is available)");
  sub->add_flag("--cpu", o->cpu_only, "Run the CPU path only")->excludes(gpu);

  auto run = [o]() -> int {
    check_chunk_log2(o->chunk_log2);
    if (o->iters < 1) throw CliError("--iters must be at least 1");
    o->threads.clear();
    for (size_t pos = 0; pos <= o->threads_list.size();) {
      size_t comma = std::min(o->threads_list.find(',', pos), o->threads_list.size());
      std::string item = o->threads_list.substr(pos, comma - pos);
      char* end = nullptr;
      unsigned long t = std::strtoul(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || t > 4096)
        throw CliError("--threads: '" + o->threads_list + "' is not a comma-separated list of thread counts");
      o->threads.push_back(unsigned(t));
      pos = comma + 1;
    }
    std::optional<sz_dtype> default_dtype;
    if (!o->dtype.empty()) default_dtype = parse_dtype(o->dtype);
    InputFormat format = parse_format(o->format);
    CodebookChoice codebooks;
    codebooks.kind = parse_kind(o->kind);
    if (!o->codebook.empty()) codebooks.user = load_codebook_file(o->codebook);
    sz_params params = sz_params_default();
    params.chunk_log2 = o->chunk_log2;
    params.flags = checksum_flags(o->checksum, o->no_checksum);

    bool gpu = false;
    if (!o->cpu_only) {
#ifdef SPLITZIP_CLI_CUDA
      gpu = sz_cuda_available() != 0;
      if (o->gpu && !gpu) throw CliError("--gpu: no CUDA device is available to this splitzip library");
#else
      if (o->gpu) throw CliError("--gpu: this splitzip was built without CUDA (SPLITZIP_ENABLE_CUDA=OFF)");
#endif
    }
    (void)gpu;

    bool header_printed = false;
    auto header = [&]() {
      if (header_printed) return;
      header_printed = true;
      std::string book = o->codebook.empty() ? "default (" + o->kind + ")" : o->codebook;
      std::printf("splitzip %s bench: median of %u runs after 1 warm-up; chunk %u values; checksums %s; codebook %s\n",
                  sz_version_string(), o->iters, 1u << o->chunk_log2, !(params.flags & SZ_FLAG_CHECKSUMS)              ? "off"
                  : (params.flags & SZ_FLAG_LANE_HASH) ? "lh32"
                                                        : "h32",
                  book.c_str());
      std::printf("GB/s = uncompressed bytes / median time; ideal = ratio if only rest bits, k-bit codes and 3 bytes "
                  "per escape were stored\n");
      print_header();
    };
    int failures = 0;
    for (const std::string& arg : o->files) {
      std::string path;
      std::optional<sz_dtype> dtype = default_dtype;
      split_file_dtype(arg, &path, &dtype);
      Buffer data = read_input(path);
      InputPlan plan = plan_input(data.data(), data.size(), data.size(), path, format, dtype);
      std::vector<Tensor> tensors;
      uint64_t off = 0;
      std::string dtype_name;
      for (const Segment& s : plan.segments) {
        if (!s.is_frame) continue;
        Tensor t;
        t.src = data.data() + s.offset;
        t.dtype = s.dtype;
        t.bytes = s.size;
        t.n = s.size / sz_dtype_size(s.dtype);
        t.out_offset = off;
        t.codebook = codebooks.for_dtype(s.dtype);
        off += s.size;
        tensors.push_back(t);
        std::string name = sz_dtype_name(s.dtype);
        dtype_name = dtype_name.empty() || dtype_name == name ? name : "mixed";
      }
      if (tensors.empty()) throw CliError(display_name(path) + ": holds no floating-point tensor");
      std::vector<Buffer> cpu_frames;
      header();
      for (unsigned threads : o->threads) {
        Row row = bench_cpu(tensors, params, threads, o->iters, &cpu_frames);
        row.file = display_name(path);
        row.dtype = dtype_name;
        print_row(row);
        failures += row.exact != "yes";
      }
#ifdef SPLITZIP_CLI_CUDA
      if (gpu) {
        Row row;
        try {
          row = bench_gpu(tensors, params, o->iters, cpu_frames);
        } catch (const CliError& e) {
          row.bytes = off;
          row.exact = "NO";
          row.note = e.what();
          row.device = "gpu";
        }
        row.file = display_name(path);
        row.dtype = dtype_name;
        print_row(row);
        failures += row.exact != "yes";
      }
#endif
    }
    if (failures) throw CliError(std::to_string(failures) + " benchmark row(s) were not bit-exact");
    return 0;
  };
  return {sub, run};
}

}  // namespace splitzip_cli
