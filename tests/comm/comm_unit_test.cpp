// Single-process checks of the communication layer's arithmetic and messages (no MPI calls).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

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
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::allreduce_sum, 4), 1.5);  // nccl-tests: 2(n-1)/n
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::reduce_scatter_sum, 4), 0.75);  // (n-1)/n
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::all_gather, 2), 0.5);
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

// Decodes element i of a typed buffer to a double (half and bfloat16 by their bit layout).
double element(DataType t, const std::vector<std::byte>& b, size_t i) {
  const std::byte* p = b.data() + i * size_of(t);
  const auto get = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<double>(x);
  };
  switch (t) {
    case DataType::int8: return get(int8_t{});
    case DataType::uint8: return get(uint8_t{});
    case DataType::int32: return get(int32_t{});
    case DataType::uint32: return get(uint32_t{});
    case DataType::int64: return get(int64_t{});
    case DataType::uint64: return get(uint64_t{});
    case DataType::float32: return get(float{});
    case DataType::float64: return get(double{});
    case DataType::bfloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(h) << 16));
    }
    case DataType::float16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const int e = (h >> 10) & 31, m = h & 1023;
      EXPECT_TRUE(e != 31 && (e != 0 || m == 0)) << "half " << h << " is not a normal number or zero";
      return e == 0 ? 0.0 : std::ldexp(1.0 + m / 1024.0, e - 15);
    }
  }
  return 0;
}

TEST(CheckPattern, EveryTypeSumsExactly) {
  for (DataType t : kAllDataTypes)
    for (int n : {1, 2, 3, 13, 100, 300}) {
      const size_t count = 40;
      const auto want = check_expected(t, n, count);
      std::vector<double> sum(count, 0.0);
      for (int r = 0; r < n; ++r) {
        const auto in = check_input(t, r, n, count);
        for (size_t i = 0; i < count; ++i) sum[i] += element(t, in, i);
      }
      bool varied = false;
      for (size_t i = 0; i < count; ++i) {
        EXPECT_EQ(element(t, want, i), sum[i]) << to_string(t) << " n=" << n << " i=" << i;
        varied |= sum[i] != sum[0];
      }
      // The sums differ between elements (a swapped or shifted element is caught) wherever the
      // type leaves room for more than one value per rank.
      if (n == 2) {
        EXPECT_TRUE(varied) << to_string(t);
      }
    }
  // float32 keeps the pattern the float helpers (and older tests) use.
  const auto in = check_input(DataType::float32, 2, 3, 20);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(element(DataType::float32, in, i), check_value(2, i));
}

TEST(DataTypes, NcclTestsNamesAndSizes) {
  DataType t{};
  for (const char* name : {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"}) {
    ASSERT_TRUE(parse_data_type(name, t)) << name;
    EXPECT_STREQ(to_string(t), name);
  }
  EXPECT_TRUE(parse_data_type("fp16", t));
  EXPECT_EQ(t, DataType::float16);
  EXPECT_FALSE(parse_data_type("float8", t));
  EXPECT_EQ(size_of(DataType::bfloat16), 2u);
  EXPECT_EQ(size_of(DataType::float64), 8u);
  BenchConfig c;
  c.type = DataType::float64;
  c.min_bytes = 4;  // rounded up to one element
  c.max_bytes = 100;
  c.factor = 3;
  EXPECT_EQ(bench_sizes(c), (std::vector<size_t>{8, 32}));  // 4 -> 8, 12 -> 8 (again), 36 -> 32, 108 > 100
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
