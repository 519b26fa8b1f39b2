// The benchmark harness (bench/harness/harness.h) that every benchmark table is computed with: the median of odd and
// even counts, the warm-up sample that is never counted, the roofline and ratio arithmetic against values worked
// out by hand, and CSV quoting as RFC 4180 has it, read back from a written file.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "harness/harness.h"

namespace {

TEST(BenchHarness, MedianOfAnOddCountIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(szbench::median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_DOUBLE_EQ(szbench::median({7.0}), 7.0);
  EXPECT_DOUBLE_EQ(szbench::median({9.0, 2.0, 4.0, 8.0, 1.0}), 4.0);
}

TEST(BenchHarness, MedianOfAnEvenCountIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_DOUBLE_EQ(szbench::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(szbench::median({10.0, 20.0}), 15.0);
  EXPECT_DOUBLE_EQ(szbench::median({6.0, 1.0, 1.0, 6.0, 2.0, 5.0}), 3.5);
}

TEST(BenchHarness, MedianOfNothingIsZero) { EXPECT_EQ(szbench::median({}), 0.0); }

TEST(BenchHarness, MedianOfDiscardsTheWarmUpSample) {
  // The first sample (the warm-up) is far the largest; counted, it would move the median of 3, 1, 2 from 2 to 2.5.
  const std::vector<double> samples = {100.0, 3.0, 1.0, 2.0};
  size_t next = 0;
  EXPECT_DOUBLE_EQ(szbench::median_of(3, [&] { return samples.at(next++); }), 2.0);
  EXPECT_EQ(next, 4u);
}

TEST(BenchHarness, MedianSecondsWarmsUpOnceThenTimesEveryRepeat) {
  unsigned calls = 0;
  const double s = szbench::median_seconds([&] { ++calls; }, 5);
  EXPECT_EQ(calls, 6u);  // one warm-up call, then one call per repeat (no minimum batch time)
  EXPECT_GE(s, 0.0);
}

TEST(BenchHarness, BatchSecondsRunsForTheMinimumTime) {
  unsigned calls = 0;
  const szbench::Timer timer;
  const double per_call = szbench::batch_seconds([&] { ++calls; }, 0.02);
  EXPECT_GE(timer.seconds(), 0.02);
  EXPECT_GE(calls, 1u);
  EXPECT_GT(per_call, 0.0);
  EXPECT_LE(per_call * calls, timer.seconds());
}

TEST(BenchHarness, PairedSecondsAlternatesAfterOneWarmUpEach) {
  std::string order;
  szbench::paired_seconds([&] { order += 'a'; }, [&] { order += 'b'; }, 3, 0);
  EXPECT_EQ(order, "abababab");
}

TEST(BenchHarness, TimerIsMonotonicAndCountsSeconds) {
  const szbench::Timer timer;
  const double t0 = szbench::now_s();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(szbench::now_s() - t0, 0.020);
  EXPECT_GE(timer.seconds(), 0.020);
  EXPECT_LT(timer.seconds(), 60.0);
}

TEST(BenchHarness, GbpsIsBytesPerSecondOverABillion) {
  EXPECT_DOUBLE_EQ(szbench::gbps(3000000000ull, 1.5), 2.0);
  EXPECT_DOUBLE_EQ(szbench::gbps(1835008, 0.001), 1.835008);
  EXPECT_EQ(szbench::gbps(1000, 0.0), 0.0);  // nothing timed
}

TEST(BenchHarness, RatioIsRawOverCompressed) {
  EXPECT_DOUBLE_EQ(szbench::ratio(4000, 3000), 4.0 / 3.0);
  EXPECT_NEAR(szbench::ratio(1835008, 1348044), 1.361237, 5e-7);  // the shipped slice, default codebook
  EXPECT_EQ(szbench::ratio(1000, 0), 0.0);
}

TEST(BenchHarness, RooflineIsCopyRateTimesRawOverRawPlusCompressed) {
  // A copy at 4000 GB/s (read + written) moving 1 GiB raw + 0.75 GiB compressed: 4000 * 1 / 1.75 = 2285.714... GB/s.
  EXPECT_NEAR(szbench::roofline_gbps(4000.0, 1073741824ull, 805306368ull), 2285.7142857, 1e-6);
  // Ratio 1 (nothing saved): half the copy rate; ratio 2: two thirds of it.
  EXPECT_DOUBLE_EQ(szbench::roofline_gbps(3000.0, 1000, 1000), 1500.0);
  EXPECT_DOUBLE_EQ(szbench::roofline_gbps(3000.0, 1000, 500), 2000.0);
  EXPECT_EQ(szbench::roofline_gbps(3000.0, 0, 0), 0.0);
  // Speed over the roofline, and over memcpy measured in the same run.
  EXPECT_DOUBLE_EQ(szbench::fraction_of(1500.0, 2000.0), 0.75);
  EXPECT_DOUBLE_EQ(szbench::fraction_of(0.32, 6.4), 0.05);
  EXPECT_EQ(szbench::fraction_of(1.0, 0.0), 0.0);
}

TEST(BenchHarness, CsvFieldQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(szbench::csv_field("memcpy"), "memcpy");
  EXPECT_EQ(szbench::csv_field("zstd -1"), "zstd -1");
  EXPECT_EQ(szbench::csv_field("paged 4096"), "paged 4096");
  EXPECT_EQ(szbench::csv_field(""), "");
  EXPECT_EQ(szbench::csv_field("k:3:126,127 (default:key)"), "\"k:3:126,127 (default:key)\"");
  EXPECT_EQ(szbench::csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(szbench::csv_field("\""), "\"\"\"\"");
  EXPECT_EQ(szbench::csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(szbench::csv_field("cr\r"), "\"cr\r\"");
}

TEST(BenchHarness, FixedFormatsLikePrintf) {
  EXPECT_EQ(szbench::fixed(1.23456, 4), "1.2346");
  EXPECT_EQ(szbench::fixed(1024.0, 0), "1024");
  EXPECT_EQ(szbench::fixed(0.5, 0), "0");  // printf rounds half to even
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BenchHarness, CsvWriterWritesTheHeaderThenQuotedRows) {
  const std::string path = ::testing::TempDir() + "splitzip_harness_" + std::to_string(getpid()) + ".csv";
  {
    szbench::CsvWriter csv(path, {"file", "codebook", "ratio"});
    ASSERT_TRUE(csv.ok());
    EXPECT_EQ(read_all(path), "file,codebook,ratio\n");  // flushed at once
    csv.row({"a.bin", "k:3:1,2,3", szbench::fixed(1.3612374, 6)});
    csv.row({"b \"x\".bin", "", "0.000000"});
    EXPECT_THROW(csv.row({"too", "few"}), std::invalid_argument);
    EXPECT_TRUE(csv.close());
  }
  EXPECT_EQ(read_all(path),
            "file,codebook,ratio\n"
            "a.bin,\"k:3:1,2,3\",1.361237\n"
            "\"b \"\"x\"\".bin\",,0.000000\n");
  std::remove(path.c_str());
}

TEST(BenchHarness, CsvWriterWithoutPathWritesNothingButChecksRows) {
  szbench::CsvWriter csv("", {"a", "b"});
  EXPECT_FALSE(csv.ok());
  csv.row({"1", "2"});
  EXPECT_THROW(csv.row({"1"}), std::invalid_argument);
  EXPECT_TRUE(csv.close());
}

TEST(BenchHarness, CsvWriterReportsAFileItCannotOpen) {
  szbench::CsvWriter csv("/nonexistent-directory/x.csv", {"a"});
  EXPECT_FALSE(csv.ok());
}

}  // namespace
