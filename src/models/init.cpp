#include "models/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dlperf {

uint64_t Rng::next() {
  uint64_t z = (state_ += kGamma);
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

namespace {

// w[i] = draw(r) for every i, in chunks on the OpenMP threads, each chunk's generator skipped to
// where the serial loop would have it (`per` draws an element); rng ends past all of them.
template <class Draw>
void fill_drawn(std::span<float> w, Rng& rng, uint64_t per, Draw draw) {
  const int64_t n = static_cast<int64_t>(w.size());
  const int64_t chunks = (n + kInitChunk - 1) / kInitChunk;
  const Rng start = rng;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    Rng r = start;
    r.skip(per * static_cast<uint64_t>(c * kInitChunk));
    const int64_t end = std::min(n, (c + 1) * kInitChunk);
    for (int64_t i = c * kInitChunk; i < end; ++i) w[static_cast<size_t>(i)] = draw(r);
  }
  rng.skip(per * static_cast<uint64_t>(n));
}

}  // namespace

void kaiming_normal_fan_out(std::span<float> w, int64_t fan_out, Rng& rng) {
  const float std = static_cast<float>(std::sqrt(2.0 / static_cast<double>(fan_out)));
  fill_drawn(w, rng, 2, [std](Rng& r) { return r.normal(0.0f, std); });
}

void uniform_fan_in(std::span<float> w, int64_t fan_in, Rng& rng) {
  const float b = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  fill_drawn(w, rng, 1, [b](Rng& r) { return r.uniform(-b, b); });
}

void normal_init(std::span<float> w, float stddev, Rng& rng) {
  fill_drawn(w, rng, 2, [stddev](Rng& r) { return r.normal(0.0f, stddev); });
}

void fill(std::span<float> w, float value) { std::fill(w.begin(), w.end(), value); }

}  // namespace dlperf
