// bench_transfer.cpp — raw vs compressed KV transfer through the same UCX pipeline on loopback (issue 6).
//
// A receiver (discard mode: every chunk is decoded and verified, then dropped) runs in a thread of this process and
// a sender sends real KV, tiled to the size asked for, through transfer::send(). For every emulated link rate
// (the sender paces its messages as such a link, GB/s of wire bytes) and codec thread count it times raw and
// compressed mode and prints the speedup next to the compression ratio. It also measures the codec alone
// (sz_compress / sz_decompress, per message, on the same data) and the pipeline with no rate cap, which is the link
// rate above which the codec is the bottleneck. --big streams many GB in one session and reports the peak RSS
// (getrusage) and the RSS before and after, to show bounded memory and no leak.
//
// --gpu: the same with device-resident source and destination and the GPU codec (sz_cuda_*): the sender encodes
// on CUDA streams from device memory, the receiver decodes into a device buffer (ServeOptions::destination), and the
// messages reach UCX from device memory or through pinned host staging (--gpu-path; `auto` takes device memory when
// the UCX build reports CUDA support). The codec-alone table is then the GPU codec per message, both synced after
// every message on `threads` streams (what the pipeline does) and batched on one stream (the kernels' own rate).
//
// --files DIR: the receiver writing tensors to files. For raw and compressed mode, in rounds, alternating which goes
// first, it times a session that discards, one that writes its tensor to DIR (then checks it byte for byte and
// removes it), and a plain write of the same bytes to a fresh file in DIR in 2 MiB write() calls (what a copy
// costs); the ratio out / discard of one round is the figure to read, since the machine may be shared, and the
// medians over the rounds sum it up. --files-memory says what memory the page cache gets (see prepare below).
//
// Output: a Markdown table on stdout and, with --json FILE, the numbers for bench/transfer/ttft_model.py.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpu.h"
#include "harness/harness.h"
#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"
#include "splitzip/transfer.hpp"

namespace tr = splitzip::transfer;
using json = nlohmann::json;

namespace {

std::vector<uint8_t> read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

long peak_rss_kib() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

long current_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return atol(line.c_str() + 6);
  }
  return -1;
}

double process_cpu_s() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)u.ru_stime.tv_usec;
}

struct Run {
  double seconds = 0;
  uint64_t raw_bytes = 0, wire_bytes = 0;
  double sender_codec_s = 0, receiver_codec_s = 0;
  double cpu_s = 0;  // CPU time of the whole process during the session (user + system)
  bool gpu_direct = false;
  bool ok = false;
  std::string error;
};

// --gpu: where the receiver decodes to (one device buffer as large as the largest tensor, reused), and the path.
struct GpuSetup {
  bool on = false;
  tr::GpuPath path = tr::GpuPath::kAuto;
  void* dst = nullptr;
};
GpuSetup g_gpu;
bool g_direct_io = false;  // --files-direct-io: the receiver writes its files with direct I/O

// One session through a fresh in-process receiver; it discards what it receives unless out_dir is given.
Run transfer_once(const std::vector<tr::Tensor>& tensors, bool raw, double rate_gbs, unsigned threads,
                  uint64_t chunk_values, unsigned window, const std::string& out_dir = "") {
  Run r;
  tr::ServeOptions so;
  so.discard = out_dir.empty();
  so.out_dir = out_dir;
  so.direct_io = g_direct_io;
  if (g_gpu.on) {
    so.gpu = true;
    so.gpu_path = g_gpu.path;
    so.destination = [](const std::string&, sz_dtype, uint64_t) { return g_gpu.dst; };
  }
  so.threads = threads;
  so.timeout_s = 60;
  so.accept_timeout_s = 60;
  so.max_total_bytes = (uint64_t)1 << 50;
  tr::Server server;
  std::string err;
  if (server.open(so, &err) != SZ_OK) {
    r.error = err;
    return r;
  }
  tr::SessionStats ss;
  sz_status sst = SZ_ERROR_INTERNAL;
  std::string serr;
  std::thread t([&] { sst = server.serve_one(&ss, &serr); });
  tr::SendOptions o;
  o.raw = raw;
  o.rate_bytes_per_s = rate_gbs * 1e9;
  o.threads = threads;
  o.chunk_values = chunk_values;
  o.window = window;
  o.timeout_s = 60;
  o.gpu_path = g_gpu.path;
  tr::SendStats st;
  const double cpu0 = process_cpu_s();
  const sz_status cst = tr::send("127.0.0.1", server.port(), tensors, o, &st, &err);
  t.join();
  r.cpu_s = process_cpu_s() - cpu0;
  if (cst != SZ_OK || sst != SZ_OK) {
    r.error = cst != SZ_OK ? err : serr;
    return r;
  }
  r.ok = true;
  r.seconds = st.seconds;
  r.raw_bytes = st.raw_bytes;
  r.wire_bytes = st.wire_bytes;
  r.sender_codec_s = st.codec_seconds;
  r.receiver_codec_s = ss.codec_seconds;
  r.gpu_direct = st.gpu_direct;
  if (g_gpu.on && (!st.gpu || !ss.gpu)) {
    r.ok = false;
    r.error = "the GPU path was not taken";
  }
  return r;
}

// The GPU codec alone on the same messages (device memory): `streams` streams, each message synced before the next
// on its stream (as the pipeline's codec threads do), and, with streams == 0, all messages batched on one stream.
bool gpu_codec_rates(const uint8_t* d_data, uint64_t bytes, uint64_t chunk_values, unsigned streams, double* enc_gbs,
                     double* dec_gbs, double* ratio, std::string* why) {
  const uint64_t chunk_bytes = chunk_values * 2;
  const uint64_t n_msgs = bytes / chunk_bytes;
  const size_t bound = sz_compress_bound(chunk_values, SZ_DTYPE_BF16);
  const unsigned ns = std::max(1u, streams);
  sz_params p = sz_params_default();
  p.flags = SZ_FLAG_CHECKSUMS;
  size_t ws = 0, dws = 0;
  if (sz_cuda_compress_workspace_size(chunk_values, SZ_DTYPE_BF16, &p, &ws) != SZ_OK ||
      sz_cuda_decompress_workspace_size(bound, chunk_bytes, &dws) != SZ_OK) {
    *why = "workspace size query failed";
    return false;
  }
  tr::gpu::Mem frames, out, d_sizes, h_sizes, d_status;
  std::vector<tr::gpu::Mem> wsp(ns), dwsp(ns);
  std::vector<tr::gpu::Stream> st(ns);
  bool ok = frames.alloc(tr::gpu::Mem::kDevice, n_msgs * bound, why) == SZ_OK &&
            out.alloc(tr::gpu::Mem::kDevice, ns * chunk_bytes, why) == SZ_OK &&
            d_sizes.alloc(tr::gpu::Mem::kDevice, n_msgs * 8, why) == SZ_OK &&
            h_sizes.alloc(tr::gpu::Mem::kPinned, n_msgs * 8, why) == SZ_OK &&
            d_status.alloc(tr::gpu::Mem::kDevice, n_msgs * 16, why) == SZ_OK;
  for (unsigned i = 0; ok && i < ns; ++i)
    ok = st[i].create(why) == SZ_OK && wsp[i].alloc(tr::gpu::Mem::kDevice, std::max<size_t>(ws, 1), why) == SZ_OK &&
         dwsp[i].alloc(tr::gpu::Mem::kDevice, std::max<size_t>(dws, 1), why) == SZ_OK;
  if (!ok) return false;
  uint64_t* hs = reinterpret_cast<uint64_t*>(h_sizes.get());
  auto run = [&](bool encode) -> double {
    const szbench::Timer timer;
    std::vector<std::thread> ts;
    for (unsigned w = 0; w < ns; ++w) {
      ts.emplace_back([&, w] {
        for (uint64_t i = w; i < n_msgs; i += ns) {
          const sz_cuda_stream s = st[w].get();
          if (encode) {
            sz_cuda_compress(d_data + i * chunk_bytes, chunk_values, SZ_DTYPE_BF16, nullptr, &p,
                             frames.get() + i * bound, bound, wsp[w].get(), wsp[w].size(),
                             reinterpret_cast<uint64_t*>(d_sizes.get()) + i, hs + i, s);
          } else {
            sz_cuda_decompress(frames.get() + i * bound, hs[i], out.get() + w * chunk_bytes, chunk_bytes,
                               dwsp[w].get(), dwsp[w].size(), reinterpret_cast<int32_t*>(d_status.get() + 16 * i),
                               reinterpret_cast<uint64_t*>(d_status.get() + 16 * i + 8), s);
          }
          if (streams > 0) tr::gpu::sync(s, nullptr);
        }
        tr::gpu::sync(st[w].get(), nullptr);
      });
      if (streams == 0) ts.back().join();
    }
    for (auto& t : ts)
      if (t.joinable()) t.join();
    return timer.seconds();
  };
  run(true);  // warm-up (and the frame sizes for the decoder)
  const double te = run(true);
  run(false);
  const double td = run(false);
  uint64_t comp = 0;
  for (uint64_t i = 0; i < n_msgs; ++i) comp += hs[i];
  *enc_gbs = szbench::gbps(n_msgs * chunk_bytes, te);
  *dec_gbs = szbench::gbps(n_msgs * chunk_bytes, td);
  *ratio = szbench::ratio(n_msgs * chunk_bytes, comp);
  return true;
}

// The codec alone on the same messages, `threads` threads each taking every threads-th message.
void codec_rates(const uint8_t* data, uint64_t bytes, uint64_t chunk_values, unsigned threads, double* enc_gbs,
                 double* dec_gbs, double* ratio, double* memcpy_gbs) {
  const uint64_t chunk_bytes = chunk_values * 2;
  const uint64_t n_msgs = bytes / chunk_bytes;
  std::vector<std::vector<uint8_t>> frames(n_msgs);
  sz_params p = sz_params_default();
  p.threads = 1;
  uint64_t comp = 0;
  for (auto& f : frames) f.resize(sz_compress_bound(chunk_values, SZ_DTYPE_BF16));  // not timed: page faults
  szbench::Timer timer;
  {
    std::vector<std::thread> ts;
    std::vector<uint64_t> sizes(threads, 0);
    for (unsigned w = 0; w < threads; ++w) {
      ts.emplace_back([&, w] {
        for (uint64_t i = w; i < n_msgs; i += threads) {
          size_t out = 0;
          sz_compress(data + i * chunk_bytes, chunk_values, SZ_DTYPE_BF16, nullptr, &p, frames[i].data(),
                      frames[i].size(), &out);
          frames[i].resize(out);
          sizes[w] += out;
        }
      });
    }
    for (auto& t : ts) t.join();
    for (auto s : sizes) comp += s;
  }
  const double t_enc = timer.seconds();
  timer.restart();
  {
    std::vector<std::thread> ts;
    for (unsigned w = 0; w < threads; ++w) {
      ts.emplace_back([&, w] {
        std::vector<uint8_t> out(chunk_bytes);
        for (uint64_t i = w; i < n_msgs; i += threads) {
          size_t got = 0;
          sz_decompress(frames[i].data(), frames[i].size(), out.data(), out.size(), &got, 1);
        }
      });
    }
    for (auto& t : ts) t.join();
  }
  const double t_dec = timer.seconds();
  // memcpy of the same messages by the same threads: the baseline of this run, the machine being shared
  timer.restart();
  {
    std::vector<std::thread> ts;
    for (unsigned w = 0; w < threads; ++w) {
      ts.emplace_back([&, w] {
        std::vector<uint8_t> out(chunk_bytes);
        for (uint64_t i = w; i < n_msgs; i += threads) {
          memcpy(out.data(), data + i * chunk_bytes, chunk_bytes);
          asm volatile("" : : "r"(out.data()) : "memory");
        }
      });
    }
    for (auto& t : ts) t.join();
  }
  *memcpy_gbs = szbench::gbps(n_msgs * chunk_bytes, timer.seconds());
  *enc_gbs = szbench::gbps(n_msgs * chunk_bytes, t_enc);
  *dec_gbs = szbench::gbps(n_msgs * chunk_bytes, t_dec);
  *ratio = szbench::ratio(n_msgs * chunk_bytes, comp);
}

// Writes `n` bytes to a fresh file `path` in pieces of `piece` bytes and closes it: the baseline of --files.
double write_file_seconds(const std::string& path, const uint8_t* data, uint64_t n, size_t piece) {
  const szbench::Timer timer;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  for (uint64_t off = 0; off < n;) {
    const ssize_t w = write(fd, data + off, (size_t)std::min<uint64_t>(piece, n - off));
    if (w <= 0) {
      close(fd);
      return -1;
    }
    off += (uint64_t)w;
  }
  if (close(fd) != 0) return -1;
  return timer.seconds();
}

// Is the file at `path` exactly the n bytes at data?
bool file_equals(const std::string& path, const uint8_t* data, uint64_t n) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::vector<uint8_t> piece(8 << 20);
  uint64_t off = 0;
  bool same = true;
  for (;;) {
    const ssize_t got = read(fd, piece.data(), piece.size());
    if (got <= 0) {
      same = same && got == 0;
      break;
    }
    if (off + (uint64_t)got > n || memcmp(piece.data(), data + off, (size_t)got) != 0) {
      same = false;
      break;
    }
    off += (uint64_t)got;
  }
  close(fd);
  return same && off == n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"splitzip transfer benchmark: raw vs compressed KV over UCX loopback"};
  std::vector<std::string> inputs;
  std::vector<double> rates = {0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 25};
  std::vector<unsigned> thread_counts = {1, 2};
  double seconds_per_point = 2.0;
  uint64_t buffer_mib = 256;
  uint64_t chunk_values = 1u << 20;
  unsigned window = 8;
  double big_gb = 0;
  unsigned repeats = 1;
  std::string json_path;
  bool only_big = false;
  bool gpu = false;
  std::string gpu_path = "auto";
  std::string files_dir;
  bool only_files = false;
  unsigned files_repeats = 3;
  std::string files_memory = "warm";
  double cold_pause_s = 3;
  app.add_flag("--gpu", gpu, "Device-resident source and destination, GPU codec (needs a CUDA build and a GPU)");
  app.add_option("--gpu-path", gpu_path, "With --gpu: auto, direct (device memory to UCX) or staged (pinned host)")
      ->check(CLI::IsMember({"auto", "direct", "staged"}));
  app.add_flag("--only-big", only_big, "Skip the codec and rate sweep (so that the peak RSS is the big session's)");
  app.add_option("--input", inputs, "Raw BF16 KV files (default: ../shared trained-d512 BF16 KV, else data/ slice)");
  app.add_option("--rates", rates, "Emulated link rates in GB/s of wire bytes (0 = no cap)");
  app.add_option("--threads", thread_counts, "Codec thread counts to try");
  app.add_option("--seconds", seconds_per_point, "Target duration of a raw transfer per point (sets its size)");
  app.add_option("--buffer-mib", buffer_mib, "Size of the tiled KV buffer in MiB (largest single transfer)");
  app.add_option("--chunk-values", chunk_values, "Values per message");
  app.add_option("--window", window, "Messages in flight");
  app.add_option("--repeats", repeats, "Runs per point; the fastest is kept");
  app.add_option("--big", big_gb, "Also stream this many GB compressed in one session (peak RSS, leak check)");
  app.add_option("--files", files_dir,
                 "Also compare a receiver writing to files in this directory with one that discards, and with a "
                 "plain file write of the same bytes (raw and compressed, uncapped, --buffer-mib per session)");
  app.add_flag("--only-files", only_files, "Run only the --files comparison");
  app.add_option("--files-repeats", files_repeats, "Alternating rounds of the --files comparison");
  app.add_option("--files-memory", files_memory,
                 "warm: write and delete a file of the tensor's size before each timed step; cold: pause instead "
                 "(--cold-pause), so that a VM that reports free memory to its host has returned it")
      ->check(CLI::IsMember({"warm", "cold"}));
  app.add_flag("--files-direct-io", g_direct_io, "With --files: the receiver writes with direct I/O (O_DIRECT)");
  app.add_option("--cold-pause", cold_pause_s, "Seconds to pause before each timed step with --files-memory cold");
  app.add_option("--json", json_path, "Write the results as JSON here");
  CLI11_PARSE(app, argc, argv);

  if (inputs.empty()) {
    const std::string shared = std::string(SPLITZIP_SOURCE_DIR) + "/../shared/data/kv/trained-d512/";
    if (!read_file(shared + "kv_code_bf16.bin").empty()) {
      inputs = {shared + "kv_code_bf16.bin", shared + "kv_prose_bf16.bin"};
    } else {
      fprintf(stderr, "bench_transfer: ../shared/data absent; using data/kv_code_bf16_slice.bin\n");
      inputs = {std::string(SPLITZIP_SOURCE_DIR) + "/data/kv_code_bf16_slice.bin"};
    }
  }
  std::vector<uint8_t> kv;
  for (const auto& f : inputs) {
    auto d = read_file(f);
    if (d.empty()) {
      fprintf(stderr, "bench_transfer: cannot read %s\n", f.c_str());
      return 1;
    }
    kv.insert(kv.end(), d.begin(), d.end());
  }
  // Tile the real KV into the buffer (whole messages, so every message is real KV as recorded).
  const uint64_t chunk_bytes = chunk_values * 2;
  uint64_t buf_bytes = buffer_mib << 20;
  buf_bytes -= buf_bytes % chunk_bytes;
  std::vector<uint8_t> buf(buf_bytes);
  for (uint64_t o = 0; o < buf_bytes; o += kv.size()) memcpy(buf.data() + o, kv.data(), std::min<uint64_t>(kv.size(), buf_bytes - o));

  json out;
  tr::gpu::Mem d_buf, d_dst;
  if (gpu) {
    std::string why;
    if (!tr::gpu::available(&why)) {
      fprintf(stderr, "bench_transfer: --gpu: %s\n", why.c_str());
      return 2;
    }
    if (d_buf.alloc(tr::gpu::Mem::kDevice, buf_bytes, &why) != SZ_OK ||
        d_dst.alloc(tr::gpu::Mem::kDevice, buf_bytes, &why) != SZ_OK ||
        tr::gpu::copy(d_buf.get(), buf.data(), buf_bytes, &why) != SZ_OK) {
      fprintf(stderr, "bench_transfer: --gpu: %s\n", why.c_str());
      return 1;
    }
    g_gpu.on = true;
    g_gpu.path = gpu_path == "direct" ? tr::GpuPath::kDirect
                 : gpu_path == "staged" ? tr::GpuPath::kStaged
                                        : tr::GpuPath::kAuto;
    g_gpu.dst = d_dst.get();
  }
  const uint8_t* src = gpu ? d_buf.get() : buf.data();
  out["gpu"] = gpu;
  out["inputs"] = inputs;
  out["input_bytes"] = kv.size();
  out["chunk_values"] = chunk_values;
  out["window"] = window;
  out["hardware_threads"] = std::thread::hardware_concurrency();

  if (only_big || only_files) {
    rates.clear();
    thread_counts.erase(thread_counts.begin(), thread_counts.end() - 1);
  }
  // ---- the codec alone ----
  if (gpu) {
    printf("## GPU codec alone (sz_cuda_compress / sz_cuda_decompress per %llu-value message, real KV in device "
           "memory)\n\n| streams | encode GB/s | decode GB/s | ratio |\n|---|---:|---:|---:|\n",
           (unsigned long long)chunk_values);
    std::vector<unsigned> sc = thread_counts;
    sc.push_back(0);
    for (unsigned th : (only_big || only_files) ? std::vector<unsigned>{} : sc) {
      double e = 0, d = 0, r = 0;
      std::string why;
      if (!gpu_codec_rates(d_buf.get(), std::min<uint64_t>(buf_bytes, 512ull << 20), chunk_values, th, &e, &d, &r,
                           &why)) {
        fprintf(stderr, "bench_transfer: GPU codec: %s\n", why.c_str());
        return 1;
      }
      printf("| %s | %.2f | %.2f | %.4f |\n",
             th == 0 ? "1, batched (no sync per message)" : (std::to_string(th) + ", synced per message").c_str(), e,
             d, r);
      out["gpu_codec"].push_back({{"streams", th}, {"batched", th == 0}, {"encode_gbs", e}, {"decode_gbs", d},
                                  {"ratio", r}});
    }
    printf("\n");
  }
  if (!gpu) {
    printf("## Codec alone (sz_compress / sz_decompress per %llu-value message, real KV)\n\n",
           (unsigned long long)chunk_values);
    printf("| threads | encode GB/s | decode GB/s | memcpy GB/s (same run) | ratio |\n|---:|---:|---:|---:|---:|\n");
  }
  for (unsigned th : (only_big || only_files || gpu) ? std::vector<unsigned>{} : thread_counts) {
    double e, d, r, m;
    codec_rates(buf.data(), std::min<uint64_t>(buf_bytes, 128ull << 20), chunk_values, th, &e, &d, &r, &m);
    printf("| %u | %.3f | %.3f | %.3f | %.4f |\n", th, e, d, m, r);
    out["codec"].push_back({{"threads", th}, {"encode_gbs", e}, {"decode_gbs", d}, {"memcpy_gbs", m}, {"ratio", r}});
  }
  fflush(stdout);

  // ---- raw vs compressed through the pipeline ----
  printf("\n## Transfer through the UCX pipeline (loopback, receiver decodes and verifies every chunk%s)\n\n",
         gpu ? (", device to device, GPU codec, --gpu-path " + gpu_path).c_str() : "");
  printf("| link GB/s | threads | bytes | raw s | raw GB/s | compressed s | compressed GB/s | ratio | speedup | "
         "speedup / ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (double rate : rates) {
    for (unsigned th : thread_counts) {
      uint64_t bytes = rate > 0 ? (uint64_t)(rate * 1e9 * seconds_per_point) : buf_bytes;
      bytes = std::max<uint64_t>(bytes, 16ull << 20);
      bytes = std::min<uint64_t>(bytes, buf_bytes);
      bytes -= bytes % chunk_bytes;
      const std::vector<tr::Tensor> tensors = {{"kv.bf16", SZ_DTYPE_BF16, src, bytes, gpu}};
      Run best_raw, best_comp;
      for (unsigned k = 0; k < repeats; ++k) {
        Run a = transfer_once(tensors, true, rate, th, chunk_values, window);
        Run b = transfer_once(tensors, false, rate, th, chunk_values, window);
        if (!a.ok || !b.ok) {
          fprintf(stderr, "bench_transfer: %s\n", (!a.ok ? a.error : b.error).c_str());
          return 1;
        }
        if (!best_raw.ok || a.seconds < best_raw.seconds) best_raw = a;
        if (!best_comp.ok || b.seconds < best_comp.seconds) best_comp = b;
      }
      const double ratio = szbench::ratio(best_raw.wire_bytes, best_comp.wire_bytes);
      if (gpu) out["gpu_direct"] = best_comp.gpu_direct;
      const double speedup = szbench::fraction_of(best_raw.seconds, best_comp.seconds);
      printf("| %s | %u | %llu | %.3f | %.3f | %.3f | %.3f | %.4f | %.3f | %.3f |\n",
             rate > 0 ? std::to_string(rate).substr(0, std::to_string(rate).find('.') + 3).c_str() : "no cap", th,
             (unsigned long long)bytes, best_raw.seconds, szbench::gbps(bytes, best_raw.seconds), best_comp.seconds,
             szbench::gbps(bytes, best_comp.seconds), ratio, speedup, szbench::fraction_of(speedup, ratio));
      fflush(stdout);
      out["transfer"].push_back({{"rate_gbs", rate},
                                 {"threads", th},
                                 {"bytes", bytes},
                                 {"raw_s", best_raw.seconds},
                                 {"raw_wire_bytes", best_raw.wire_bytes},
                                 {"compressed_s", best_comp.seconds},
                                 {"compressed_wire_bytes", best_comp.wire_bytes},
                                 {"ratio", ratio},
                                 {"speedup", speedup},
                                 {"sender_codec_cpu_s", best_comp.sender_codec_s},
                                 {"receiver_codec_cpu_s", best_comp.receiver_codec_s}});
    }
  }

  if (gpu && out.contains("transfer")) {
    // The link rate above which the GPU codec, not the link, limits: the uncapped compressed pipeline's rate, and
    // the codec alone (synced per message, as the pipeline runs it) for comparison.
    for (const auto& row : out["transfer"]) {
      if (row["rate_gbs"].get<double>() != 0) continue;
      const double pipe = szbench::gbps(row["bytes"].get<uint64_t>(), row["compressed_s"].get<double>());
      printf("\n- %u codec threads/streams: the compressed pipeline runs at %.2f GB/s of KV uncapped (%s); links "
             "slower than that see the full ratio.\n",
             row["threads"].get<unsigned>(), pipe, out.value("gpu_direct", false) ? "direct" : "staged");
      out["gpu_bottleneck"].push_back({{"threads", row["threads"]}, {"pipeline_gbs", pipe}});
    }
  }

  // ---- writing to files against discarding, same run ----
  if (!files_dir.empty()) {
    if (gpu) {
      fprintf(stderr, "bench_transfer: --files measures the host receiver; leave out --gpu\n");
      return 2;
    }
    const bool cold = files_memory == "cold";
    const unsigned th = thread_counts.back();
    const std::string target = files_dir + "/kv.bf16";
    const std::string copy = files_dir + "/kv.bf16.copy";
    const std::vector<tr::Tensor> tensors = {{"kv.bf16", SZ_DTYPE_BF16, buf.data(), buf_bytes, false}};
    // Before each timed step, memory as a machine that keeps writing files has it (warm: a file of the tensor's
    // size written and deleted just before, so that the page cache gets back memory it just had in use), or as a
    // virtual machine that returns free memory to its host has it after a pause (cold: there the first write to
    // each fresh page costs a fault in the host, and a plain file write runs several times slower).
    const std::string scratch_file = files_dir + "/kv.bf16.warm";
    auto prepare = [&] {
      if (cold) {
        std::this_thread::sleep_for(std::chrono::duration<double>(cold_pause_s));
        return;
      }
      write_file_seconds(scratch_file, buf.data(), buf_bytes, chunk_bytes);
      unlink(scratch_file.c_str());
    };
    printf("\n## Receiver writing to files (%s) vs discarding, %llu bytes per session, %u codec threads, no rate "
           "cap, %s memory%s\n\n| round | mode | discard GB/s | --out GB/s | out / discard | file write GB/s (2 MiB "
           "writes) | receiver codec CPU s, discard / out |\n|---:|---|---:|---:|---:|---:|---:|\n",
           files_dir.c_str(), (unsigned long long)buf_bytes, th, cold ? "cold" : "warm",
           g_direct_io ? ", receiver with direct I/O" : "");
    unlink(target.c_str());
    unlink(copy.c_str());
    std::vector<double> discard_gbs[2], out_gbs[2], ratios[2], write_gbs[2];  // [raw]
    for (unsigned round = 1; round <= files_repeats; ++round) {
      for (const bool raw : {true, false}) {
        Run d, f;
        // alternate which session goes first, so that neither always follows the other
        for (int k = 0; k < 2; ++k) {
          prepare();
          if ((k == 0) == (round % 2 == 1)) {
            d = transfer_once(tensors, raw, 0, th, chunk_values, window);
          } else {
            f = transfer_once(tensors, raw, 0, th, chunk_values, window, files_dir);
            if (f.ok && !file_equals(target, buf.data(), buf_bytes)) {
              f.ok = false;
              f.error = "the received file differs from the sent tensor";
            }
            unlink(target.c_str());
          }
        }
        prepare();
        const double c = write_file_seconds(copy, buf.data(), buf_bytes, chunk_bytes);
        unlink(copy.c_str());
        if (!d.ok || !f.ok || c < 0) {
          fprintf(stderr, "bench_transfer: --files: %s\n",
                  !d.ok ? d.error.c_str() : !f.ok ? f.error.c_str() : "cannot write the copy");
          return 1;
        }
        const double dg = szbench::gbps(buf_bytes, d.seconds), fg = szbench::gbps(buf_bytes, f.seconds);
        printf("| %u | %s | %.3f | %.3f | %.3f | %.3f | %.3f / %.3f |\n", round, raw ? "raw" : "compressed", dg, fg,
               szbench::fraction_of(fg, dg), szbench::gbps(buf_bytes, c), d.receiver_codec_s, f.receiver_codec_s);
        fflush(stdout);
        discard_gbs[raw].push_back(dg);
        out_gbs[raw].push_back(fg);
        ratios[raw].push_back(szbench::fraction_of(fg, dg));
        write_gbs[raw].push_back(szbench::gbps(buf_bytes, c));
        out["files"].push_back({{"round", round},
                                {"raw", raw},
                                {"memory", files_memory},
                                {"direct_io", g_direct_io},
                                {"bytes", buf_bytes},
                                {"threads", th},
                                {"discard_s", d.seconds},
                                {"out_s", f.seconds},
                                {"file_write_s", c},
                                {"discard_receiver_codec_cpu_s", d.receiver_codec_s},
                                {"out_receiver_codec_cpu_s", f.receiver_codec_s},
                                {"discard_process_cpu_s", d.cpu_s},
                                {"out_process_cpu_s", f.cpu_s}});
      }
    }
    printf("\nMedians of %u rounds:\n\n| mode | discard GB/s | --out GB/s | out / discard (median of rounds) | file write "
           "GB/s |\n|---|---:|---:|---:|---:|\n", files_repeats);
    for (const bool raw : {true, false})
      printf("| %s | %.3f | %.3f | %.3f | %.3f |\n", raw ? "raw" : "compressed", szbench::median(discard_gbs[raw]),
             szbench::median(out_gbs[raw]), szbench::median(ratios[raw]), szbench::median(write_gbs[raw]));
  }

  // ---- many GB in one session ----
  if (big_gb > 0) {
    const unsigned th = thread_counts.back();
    const uint64_t want = (uint64_t)(big_gb * 1e9);
    const uint64_t n_tensors = (want + buf_bytes - 1) / buf_bytes;
    std::vector<tr::Tensor> tensors;
    for (uint64_t i = 0; i < n_tensors; ++i)
      tensors.push_back({"kv." + std::to_string(i), SZ_DTYPE_BF16, src, buf_bytes, gpu});
    // A small session first, so that the RSS after it includes everything a session keeps (UCX, pools).
    Run warm = transfer_once({tensors[0]}, false, 0, th, chunk_values, window);
    const long rss_before = current_rss_kib();
    const long peak_before = peak_rss_kib();
    Run big = transfer_once(tensors, false, 0, th, chunk_values, window);
    const long rss_after = current_rss_kib();
    const long peak_after = peak_rss_kib();
    if (!warm.ok || !big.ok) {
      fprintf(stderr, "bench_transfer: %s\n", (!warm.ok ? warm.error : big.error).c_str());
      return 1;
    }
    printf("\n## %.2f GB in one compressed session (%llu tensors of %llu MiB, %u codec threads, no rate cap)\n\n",
           (double)big.raw_bytes / 1e9, (unsigned long long)n_tensors, (unsigned long long)(buf_bytes >> 20), th);
    printf("| bytes | wire bytes | seconds | GB/s | RSS before (MiB) | RSS after (MiB) | peak RSS before | peak RSS "
           "after (MiB) | KV buffer (MiB) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    printf("| %llu | %llu | %.2f | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", (unsigned long long)big.raw_bytes,
           (unsigned long long)big.wire_bytes, big.seconds, szbench::gbps(big.raw_bytes, big.seconds),
           rss_before / 1024.0, rss_after / 1024.0, peak_before / 1024.0, peak_after / 1024.0,
           (double)buf_bytes / 1048576.0);
    out["big"] = {{"bytes", big.raw_bytes},       {"wire_bytes", big.wire_bytes}, {"seconds", big.seconds},
                  {"rss_before_kib", rss_before}, {"rss_after_kib", rss_after}, {"peak_before_kib", peak_before},
                  {"peak_after_kib", peak_after}, {"buffer_bytes", buf_bytes}, {"threads", th}};
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
  }
  return 0;
}
