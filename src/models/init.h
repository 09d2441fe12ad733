// Deterministic parameter initialisation, the same on every platform and rank: a
// counter-based generator (SplitMix64) feeds uniform and Box-Muller normal draws, so one
// seed always gives the same weights.
//
// The fills run in parallel (OpenMP, chunks of kInitChunk elements) with the serial result bit
// for bit: draw k of a generator depends only on its state plus k (Rng::skip), so each chunk
// starts its own generator where the serial loop would be, and the caller's generator ends
// where the serial loop would leave it. Serially, a normal draw costs about 64 ns: Llama 3.2
// 1B took over a minute to initialise, the 8B 8 minutes per rank, before the first step.
#pragma once

#include <cstdint>
#include <span>

namespace dlperf {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  float uniform(float lo, float hi);  // [lo, hi)
  float normal(float mean, float stddev);  // two draws
  void skip(uint64_t draws) { state_ += draws * kGamma; }  // as if `draws` next() calls were made
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

 private:
  uint64_t state_;
};

// Kaiming normal with fan_out and ReLU gain (torchvision's ResNet/VGG convolutions).
void kaiming_normal_fan_out(std::span<float> w, int64_t fan_out, Rng& rng);
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's nn.Linear default for weight and bias.
void uniform_fan_in(std::span<float> w, int64_t fan_in, Rng& rng);
void normal_init(std::span<float> w, float stddev, Rng& rng);
void fill(std::span<float> w, float value);
inline constexpr int64_t kInitChunk = int64_t{1} << 16;  // elements a thread fills from one skip

}  // namespace dlperf
