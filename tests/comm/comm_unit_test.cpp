// Single-process checks of the communication layer's arithmetic and messages (no MPI calls).
#include <gtest/gtest.h>

#include "comm/allreduce_bench.h"
#include "core/error.h"

namespace dlperf {
namespace {

TEST(BenchSizes, GeometricSweepInFloatMultiples) {
  BenchConfig c;
  c.min_bytes = 8;
  c.max_bytes = 64;
  c.factor = 2;
  EXPECT_EQ(bench_sizes(c), (std::vector<size_t>{8, 16, 32, 64}));
  c.min_bytes = c.max_bytes = 6;  // rounded down to whole floats
  EXPECT_EQ(bench_sizes(c), (std::vector<size_t>{4}));
}

TEST(BusBandwidth, NcclTestsDefinition) {
  EXPECT_DOUBLE_EQ(bus_bandwidth(10.0, 2), 10.0);  // 2(n-1)/n = 1
  EXPECT_DOUBLE_EQ(bus_bandwidth(10.0, 4), 15.0);  // 1.5
  EXPECT_DOUBLE_EQ(bus_bandwidth(10.0, 1), 0.0);   // nothing crosses a link
}

TEST(CheckPattern, SumIsExactSmallInteger) {
  for (int n : {1, 2, 3, 4, 64})
    for (size_t i : {size_t{0}, size_t{5}, size_t{12}, size_t{1} << 24}) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += check_value(r, i);
      EXPECT_EQ(s, expected_sum(n, i));
      EXPECT_LE(expected_sum(n, i), 13.0f * static_cast<float>(n));
    }
}

TEST(RequestText, NamesOperationAndSize) {
  RequestState s;
  s.op = CommOp::allreduce_sum;
  s.seq = 12;
  s.bytes = 4096;
  s.started = CommClock::now();
  const std::string text = describe_request(s);
  EXPECT_NE(text.find("allreduce #12 (4096 bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace dlperf
