// bench_transfer.cpp — raw vs compressed KV transfer through the same UCX pipeline on loopback (issue 6).
//
// A receiver (discard mode: every chunk is decoded and verified, then dropped) runs in a thread of this process and
// a sender sends real KV, tiled to the size asked for, through transfer::send(). For every emulated link rate
// (the sender's token bucket, in GB/s of wire bytes) and codec thread count it times raw and compressed mode and
// prints the speedup next to the compression ratio. It also measures the codec alone (sz_compress / sz_decompress,
// per message, on the same data) and the pipeline with no rate cap, which is the link rate above which the codec is
// the bottleneck. --big streams many GB in one session and reports the peak RSS (getrusage) and the RSS before and
// after, to show bounded memory and no leak.
//
// Output: a Markdown table on stdout and, with --json FILE, the numbers for bench/transfer/ttft_model.py.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "splitzip/splitzip.h"
#include "splitzip/transfer.hpp"

namespace tr = splitzip::transfer;
using json = nlohmann::json;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

struct Run {
  double seconds = 0;
  uint64_t raw_bytes = 0, wire_bytes = 0;
  double sender_codec_s = 0, receiver_codec_s = 0;
  bool ok = false;
  std::string error;
};

// One session through a fresh in-process receiver.
Run transfer_once(const std::vector<tr::Tensor>& tensors, bool raw, double rate_gbs, unsigned threads,
                  uint64_t chunk_values, unsigned window) {
  Run r;
  tr::ServeOptions so;
  so.discard = true;
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
  tr::SendStats st;
  const sz_status cst = tr::send("127.0.0.1", server.port(), tensors, o, &st, &err);
  t.join();
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
  return r;
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
  double t0 = now_s();
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
  const double t_enc = now_s() - t0;
  t0 = now_s();
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
  const double t_dec = now_s() - t0;
  // memcpy of the same messages by the same threads: the baseline of this run, the machine being shared
  t0 = now_s();
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
  *memcpy_gbs = (double)(n_msgs * chunk_bytes) / (now_s() - t0) / 1e9;
  *enc_gbs = (double)(n_msgs * chunk_bytes) / t_enc / 1e9;
  *dec_gbs = (double)(n_msgs * chunk_bytes) / t_dec / 1e9;
  *ratio = (double)(n_msgs * chunk_bytes) / (double)comp;
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
  out["inputs"] = inputs;
  out["input_bytes"] = kv.size();
  out["chunk_values"] = chunk_values;
  out["window"] = window;
  out["hardware_threads"] = std::thread::hardware_concurrency();

  if (only_big) {
    rates.clear();
    thread_counts.erase(thread_counts.begin(), thread_counts.end() - 1);
  }
  // ---- the codec alone ----
  printf("## Codec alone (sz_compress / sz_decompress per %llu-value message, real KV)\n\n",
         (unsigned long long)chunk_values);
  printf("| threads | encode GB/s | decode GB/s | memcpy GB/s (same run) | ratio |\n|---:|---:|---:|---:|---:|\n");
  for (unsigned th : only_big ? std::vector<unsigned>{} : thread_counts) {
    double e, d, r, m;
    codec_rates(buf.data(), std::min<uint64_t>(buf_bytes, 128ull << 20), chunk_values, th, &e, &d, &r, &m);
    printf("| %u | %.3f | %.3f | %.3f | %.4f |\n", th, e, d, m, r);
    out["codec"].push_back({{"threads", th}, {"encode_gbs", e}, {"decode_gbs", d}, {"memcpy_gbs", m}, {"ratio", r}});
  }
  fflush(stdout);

  // ---- raw vs compressed through the pipeline ----
  printf("\n## Transfer through the UCX pipeline (loopback, receiver decodes and verifies every chunk)\n\n");
  printf("| link GB/s | threads | bytes | raw s | raw GB/s | compressed s | compressed GB/s | ratio | speedup | "
         "speedup / ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (double rate : rates) {
    for (unsigned th : thread_counts) {
      uint64_t bytes = rate > 0 ? (uint64_t)(rate * 1e9 * seconds_per_point) : buf_bytes;
      bytes = std::max<uint64_t>(bytes, 16ull << 20);
      bytes = std::min<uint64_t>(bytes, buf_bytes);
      bytes -= bytes % chunk_bytes;
      const std::vector<tr::Tensor> tensors = {{"kv.bf16", SZ_DTYPE_BF16, buf.data(), bytes}};
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
      const double ratio = (double)best_raw.wire_bytes / (double)best_comp.wire_bytes;
      const double speedup = best_raw.seconds / best_comp.seconds;
      printf("| %s | %u | %llu | %.3f | %.3f | %.3f | %.3f | %.4f | %.3f | %.3f |\n",
             rate > 0 ? std::to_string(rate).substr(0, std::to_string(rate).find('.') + 3).c_str() : "no cap", th,
             (unsigned long long)bytes, best_raw.seconds, (double)bytes / best_raw.seconds / 1e9, best_comp.seconds,
             (double)bytes / best_comp.seconds / 1e9, ratio, speedup, speedup / ratio);
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

  // ---- many GB in one session ----
  if (big_gb > 0) {
    const unsigned th = thread_counts.back();
    const uint64_t want = (uint64_t)(big_gb * 1e9);
    const uint64_t n_tensors = (want + buf_bytes - 1) / buf_bytes;
    std::vector<tr::Tensor> tensors;
    for (uint64_t i = 0; i < n_tensors; ++i)
      tensors.push_back({"kv." + std::to_string(i), SZ_DTYPE_BF16, buf.data(), buf_bytes});
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
           (unsigned long long)big.wire_bytes, big.seconds, (double)big.raw_bytes / big.seconds / 1e9,
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
