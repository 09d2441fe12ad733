// exp for dlperf's own softmax-style CPU kernels (blockwise attention, token cross-entropy), in
// a form the compiler vectorises (std::exp is a scalar libm call unless -ffast-math), and the
// attribute that compiles a kernel for AVX-512, AVX2 and the x86-64 baseline, the loader
// picking the best the CPU has (the rest of the build targets the baseline only).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define DLPERF_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace dlperf::onednn {

// exp(x) for x <= 0 (scores minus their row's maximum or log-sum-exp): x = n ln2 + r with
// |r| <= ln2 / 2 (Cody-Waite, two-part ln2), exp(r) by Cephes' degree-5 minimax polynomial
// (relative error about 1e-7, as expf's), times 2^n built in the exponent bits. Below -87
// (exp < 1.7e-38) it returns 0, as no f32 normal number is smaller.
inline float fast_exp(float x) {
  const float xc = std::max(x, -87.0f);
  const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < -87.0f ? 0.0f : e * scale;
}

}  // namespace dlperf::onednn
