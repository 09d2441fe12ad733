// Backend::pack / unpack, the compute-precision all-gather's conversion (train/parallel/zero.h):
// on the cpu backend the packed bf16 must be what the backend's own f32 -> bf16 conversion
// (oneDNN's reorders, which make the compute copies) gives, bit for bit, or a ZeRO run's bf16
// copies would differ from replicated training's. Ties, denormals, the largest finite values
// and infinities, then many random values; and the f32 runs and the words' layout.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "../common/cpu_bf16.h"

namespace dlperf {
namespace {

float from_bits(uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(Pack, Bf16IsTheCpuBackendsOwnConversion) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  auto be = make_backend(BackendKind::cpu, {Precision::bf16, 1, 0});
  std::vector<float> v = {1.0f, -0.0f, 0.0f, std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f807fffu, 0x00000001u, 0x007fffffu, 0x807fffffu, 0x00800001u, 0x7f7f8000u,
                     0x7f7f7fffu, 0xbf808000u})
    v.push_back(from_bits(u));  // ties to even and odd, just below and above them, denormals, the edges of the range
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  while (v.size() < 4096) {
    const float f = from_bits(any(rng));
    if (f == f) v.push_back(f);  // NaN payloads are not compared
  }
  const Dims d{1, static_cast<int64_t>(v.size())};
  auto f32 = be->tensor(d, DType::f32);
  auto bf16 = be->tensor(d, DType::bf16);
  f32->write(v);
  be->convert(*f32, *bf16);
  std::vector<float> want(v.size());
  bf16->read(want);

  // Three runs: bf16 of an odd count, f32, bf16: each from its own word.
  const size_t a = 1001, b = 50, c = v.size() - a - b;
  const std::vector<Backend::PackRun> runs = {
      {0, a, 0, true}, {a, b, (a + 1) / 2, false}, {a + b, c, (a + 1) / 2 + b, true}};
  const size_t words = (a + 1) / 2 + b + (c + 1) / 2;
  auto table = be->pack_table(runs);
  std::vector<float> packed(words + 1, from_bits(0xffffffffu)), back(v.size(), 0.0f);
  be->pack(*table, v.data(), packed.data());
  EXPECT_EQ(bits(packed[words]), 0xffffffffu) << "nothing written past the runs' words";
  EXPECT_EQ(bits(packed[(a + 1) / 2 - 1]) >> 16, 0u) << "an odd run's last half-word is zero";  // little-endian: the upper half
  be->unpack(*table, packed.data(), back.data());
  size_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool narrow = i < a || i >= a + b;
    const uint32_t expect = narrow ? bits(want[i]) : bits(v[i]);
    if (bits(back[i]) != expect && bad++ < 5)
      ADD_FAILURE() << "value " << i << " (0x" << std::hex << bits(v[i]) << "): unpacked 0x" << bits(back[i]) << ", the backend's 0x" << expect;
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace dlperf
