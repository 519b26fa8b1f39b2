// harness.cpp — the benchmark harness's clock, statistics, arithmetic and CSV writer (see harness.h).
#include "harness/harness.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace szbench {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

double batch_seconds(const std::function<void()>& op, double min_time_s) {
  const Timer timer;
  uint64_t calls = 0;
  double elapsed = 0;
  do {
    op();
    ++calls;
    elapsed = timer.seconds();
  } while (elapsed < min_time_s);
  return elapsed / double(calls);
}

double median_seconds(const std::function<void()>& op, unsigned repeats, double min_time_s) {
  op();  // warm-up: caches, page faults in the destination
  std::vector<double> per_call;
  per_call.reserve(repeats);
  for (unsigned r = 0; r < repeats; ++r) per_call.push_back(batch_seconds(op, min_time_s));
  return median(std::move(per_call));
}

Paired paired_seconds(const std::function<void()>& a, const std::function<void()>& b, unsigned repeats,
                      double min_time_s) {
  a();  // warm-up
  b();
  std::vector<double> ta, tb, ratios;
  for (unsigned r = 0; r < repeats; ++r) {
    ta.push_back(batch_seconds(a, min_time_s));
    tb.push_back(batch_seconds(b, min_time_s));
    ratios.push_back(fraction_of(ta.back(), tb.back()));
  }
  return {median(std::move(ta)), median(std::move(tb)), median(std::move(ratios))};
}

double gbps(uint64_t bytes, double seconds) { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0; }

double ratio(uint64_t raw_bytes, uint64_t compressed_bytes) {
  return compressed_bytes ? double(raw_bytes) / double(compressed_bytes) : 0.0;
}

double fraction_of(double value, double baseline) { return baseline > 0 ? value / baseline : 0.0; }

double roofline_gbps(double copy_gbps, uint64_t raw_bytes, uint64_t compressed_bytes) {
  const uint64_t moved = raw_bytes + compressed_bytes;
  return moved ? copy_gbps * double(raw_bytes) / double(moved) : 0.0;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& header)
    : file_(path.empty() ? nullptr : std::fopen(path.c_str(), "w")), columns_(header.size()) {
  if (file_) line(header);
}

CsvWriter::~CsvWriter() { close(); }

void CsvWriter::row(const std::vector<std::string>& cells) {
  if (cells.size() != columns_)
    throw std::invalid_argument("CSV row of " + std::to_string(cells.size()) + " cells under a header of " +
                                std::to_string(columns_));
  if (file_) line(cells);
}

void CsvWriter::line(const std::vector<std::string>& cells) {
  std::string text;
  for (size_t i = 0; i < cells.size(); ++i) text += (i ? "," : "") + csv_field(cells[i]);
  text += '\n';
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) failed_ = true;
}

bool CsvWriter::close() {
  if (file_) {
    if (std::fclose(file_) != 0) failed_ = true;
    file_ = nullptr;
  }
  return !failed_;
}

}  // namespace szbench
