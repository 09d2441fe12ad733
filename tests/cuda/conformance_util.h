// Shared pieces of the CUDA conformance suites: the GPU check (tests skip, saying why, without
// one), inputs exactly representable in f16 and bf16 (so a low-precision run and the f32 CPU
// reference start from the same numbers), relative-error comparison with per-precision
// tolerances, and parameter binding for single-layer tests.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gpu_presence.h"

namespace dlperf::cuda_test {

#define DLPERF_NEED_GPU() \
  if (!::dlperf::cuda_test::have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: the CUDA backend is compiled, not run"

// Uniform in [-scale, scale), rounded to multiples of scale / 128: exact in f16 and bf16 (at
// most 8 significant bits).
inline std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-128, 127);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * static_cast<float>(u(rng)) / 128.0f;
  return v;
}

inline std::vector<float> read(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.read(v);
  return v;
}

// ||got - want|| / ||want|| within tol, and every element finite.
inline void expect_rel(const std::vector<float>& want, const std::vector<float>& got, double tol, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double num = 0.0, den = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) ++bad;
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": non-finite values";
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(rel, tol) << what << ": relative L2 error " << rel;
}

// Relative-error tolerances of a result against the f32 CPU reference, by the CUDA run's precision:
// fp32 differs by summation order only; TF32 rounds products' inputs to 10 mantissa bits; f16
// and bf16 results are rounded to 11 and 8 bits (with f32 accumulation).
inline double tolerance(Precision p) {
  switch (p) {
    case Precision::fp32: return 2e-5;
    case Precision::tf32: return 4e-3;
    case Precision::fp16: return 1e-2;
    case Precision::bf16: return 3e-2;
  }
  return 1e-5;
}

// Binds a layer's parameters to fresh buffers and fills them with the same values on every
// backend (per parameter: seed + 17 i).
struct Bound {
  std::unique_ptr<Buffer> values, grads;
};
inline Bound bind(Backend& be, Layer& l, uint32_t seed, float scale = 0.5f) {
  size_t total = 0;
  for (const auto& p : l.params()) total += (p.storage_elems + 15) / 16 * 16;
  Bound b{be.buffer(std::max<size_t>(total, 1)), be.buffer(std::max<size_t>(total, 1))};
  std::vector<ParamSlot> slots;
  size_t off = 0;
  for (const auto& p : l.params()) {
    slots.push_back({b.values->data() + off, b.grads->data() + off});
    off += (p.storage_elems + 15) / 16 * 16;  // 64-byte aligned, as the ParamStore lays them out
  }
  l.bind(slots);
  for (size_t i = 0; i < l.params().size(); ++i)
    l.write_param(i, randoms(static_cast<size_t>(product(l.params()[i].dims)), seed + 17 * static_cast<uint32_t>(i), scale));
  l.refresh_compute_weights();
  return b;
}

inline std::vector<float> grad(const Layer& l, size_t i) {
  std::vector<float> v(static_cast<size_t>(product(l.params()[i].dims)));
  l.read_grad(i, v);
  return v;
}

// A tensor in the backend's compute dtype and given layout holding `values` (via f32).
inline TensorPtr input(Backend& be, const Dims& d, DType t, Layout layout, const std::vector<float>& values) {
  auto x32 = be.tensor(d, DType::f32);
  x32->write(values);
  if (t == DType::f32 && layout == Layout::canonical) return x32;
  auto x = be.tensor(d, t, layout);
  be.convert(*x32, *x);
  return x;
}

inline const char* name(Precision p) { return to_string(p); }

}  // namespace dlperf::cuda_test
