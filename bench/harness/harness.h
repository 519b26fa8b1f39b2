// harness.h — the measuring that every splitzip benchmark shares: `splitzip bench` (cli/cmd_bench.cpp), bench/*.cpp,
// bench/transfer, bench/gpu and tools/core_throughput.cpp. One clock, one median, one way to repeat a measurement
// after a warm-up, one formula for the roofline and for speeds relative to a baseline measured in the same run, and
// one CSV writer, so that every table of docs/BENCHMARKS.md counts the same way.
//
// Not product code: a static library (splitzip_bench_harness) that is neither installed nor part of the public
// headers. It uses no part of splitzip, and no CUDA: GPU timings (CUDA events) reach it as plain numbers through
// median_of().
//
// Units: seconds, bytes and GB/s = 1e9 bytes per second, everywhere.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace szbench {

// ---- clock ------------------------------------------------------------------------------------------------------

// Seconds on a monotonic clock (std::chrono::steady_clock) from an arbitrary origin: only differences mean anything.
double now_s();

// A stopwatch on that clock, running from its construction (or the last restart()).
class Timer {
 public:
  Timer() : start_(now_s()) {}
  void restart() { start_ = now_s(); }
  double seconds() const { return now_s() - start_; }

 private:
  double start_;
};

// ---- statistics -------------------------------------------------------------------------------------------------

// The median: the middle value of an odd count, the mean of the two middle values of an even count, 0 for none.
double median(std::vector<double> values);

// ---- repeated measurements --------------------------------------------------------------------------------------

// The median of `repeats` samples taken after one warm-up sample, which is discarded (it pays for cold caches, page
// faults, lazy initialisation and first launches). sample() takes one timing and returns it, in any unit: this is
// the form for timings that the harness cannot take itself, such as CUDA events.
template <class Sample>
double median_of(unsigned repeats, Sample&& sample) {
  sample();
  std::vector<double> samples;
  samples.reserve(repeats);
  for (unsigned r = 0; r < repeats; ++r) samples.push_back(double(sample()));
  return median(std::move(samples));
}

// Seconds per call of op in one batch: op is called until at least min_time_s seconds have passed (once at least),
// and the batch's time is divided by the number of calls. A batch keeps calls far shorter than the clock's
// resolution and the timer's own cost measurable.
double batch_seconds(const std::function<void()>& op, double min_time_s);

// Seconds per call of op: one warm-up call, then the median of `repeats` batches of batch_seconds(op, min_time_s).
// With min_time_s = 0 every batch is a single call.
double median_seconds(const std::function<void()>& op, unsigned repeats, double min_time_s = 0);

// Two operations measured in alternation, for a ratio that load coming and going on a shared machine hits on both
// sides alike: a() and b() once each to warm up, then per repeat a batch of a and a batch of b
// (batch_seconds(..., min_time_s)). a_s and b_s are the medians of the batch means, a_over_b the median of the
// per-repeat ratios a / b (not the ratio of the medians).
struct Paired {
  double a_s = 0, b_s = 0, a_over_b = 0;
};
Paired paired_seconds(const std::function<void()>& a, const std::function<void()>& b, unsigned repeats,
                      double min_time_s);

// ---- arithmetic -------------------------------------------------------------------------------------------------

// GB/s of `bytes` moved in `seconds`; 0 when seconds <= 0 (nothing was timed).
double gbps(uint64_t bytes, double seconds);

// Compression ratio raw / compressed; 0 when compressed is 0 (nothing was compressed).
double ratio(uint64_t raw_bytes, uint64_t compressed_bytes);

// value / baseline (a speed over memcpy's, over the roofline, over a peer codec's, all measured in the same run);
// 0 when baseline <= 0.
double fraction_of(double value, double baseline);

// The roofline of a codec call that reads raw_bytes and writes compressed_bytes (encode), or the reverse (decode),
// in GB/s of raw bytes: a copy measured in the same run moves copy_gbps GB/s counted as bytes read + written, and
// the call must move raw + compressed bytes, so copy_gbps * raw / (raw + compressed). 0 when both sizes are 0.
double roofline_gbps(double copy_gbps, uint64_t raw_bytes, uint64_t compressed_bytes);

// ---- CSV --------------------------------------------------------------------------------------------------------

// One CSV field as RFC 4180 writes it: as it is, unless it holds a comma, a double quote, a CR or an LF; then in
// double quotes, with each double quote doubled.
std::string csv_field(const std::string& text);

// printf("%.*f", decimals, value): the numbers of a CSV row or a table cell.
std::string fixed(double value, int decimals);

// A CSV file: the header line when opened, then one line per row() (fields quoted by csv_field, lines ended by
// "\n"), each flushed when written, so that a run cut short (a timeout on the GPU machine) keeps its rows.
class CsvWriter {
 public:
  // Creates or truncates path and writes the header; ok() says whether the file could be opened. An empty path
  // writes nothing (a tool run without --csv), but its rows are still checked against the header.
  CsvWriter(const std::string& path, const std::vector<std::string>& header);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  bool ok() const { return file_ != nullptr; }
  // Writes one row, which must have as many cells as the header (else std::invalid_argument: a bug in the caller).
  void row(const std::vector<std::string>& cells);
  // Flushes and closes the file; false if a write failed.
  bool close();

 private:
  void line(const std::vector<std::string>& cells);
  std::FILE* file_ = nullptr;
  size_t columns_ = 0;
  bool failed_ = false;
};

}  // namespace szbench
