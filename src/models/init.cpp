#include "models/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dlperf {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float Rng::uniform(float lo, float hi) {
  const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;  // [0, 1)
  return static_cast<float>(lo + (hi - lo) * u);
}

float Rng::normal(float mean, float stddev) {
  const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return static_cast<float>(mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

void kaiming_normal_fan_out(std::span<float> w, int64_t fan_out, Rng& rng) {
  const float std = static_cast<float>(std::sqrt(2.0 / static_cast<double>(fan_out)));
  for (auto& v : w) v = rng.normal(0.0f, std);
}

void uniform_fan_in(std::span<float> w, int64_t fan_in, Rng& rng) {
  const float b = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  for (auto& v : w) v = rng.uniform(-b, b);
}

void normal_init(std::span<float> w, float stddev, Rng& rng) {
  for (auto& v : w) v = rng.normal(0.0f, stddev);
}

void fill(std::span<float> w, float value) { std::fill(w.begin(), w.end(), value); }

}  // namespace dlperf
