// The oneDNN linear layer (matmul-based, linear.cpp) against a direct double-precision
// reference, in each of its planning paths: plain operands; fp32 with in > out and many rows,
// where backward reorders x and W into blocked layouts; few rows; no bias; bf16. Checks y, dx,
// dW and db: the whole layer, not a sample (gradcheck covers a small shape by differences).
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "../common/cpu_bf16.h"

namespace dlperf::testing {
namespace {

struct Shape {
  int64_t m, in, out;
  bool bias;
};

double max_rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  double err = 0, scale = 1e-12;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(got[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / scale;
}

void check_linear(Precision p, const Shape& s, double tol) {
  auto be = make_backend(BackendKind::cpu, {p, 2, 0});
  auto x = be->tensor({s.m, s.in}, be->dtype());
  const auto xv = random_values(static_cast<size_t>(s.m * s.in), 1);
  x->write(xv);
  auto fc = be->linear({"fc", s.in, s.out, s.bias}, *x);
  OwnedParams owned;
  owned.bind(*be, *fc);
  OwnedParams::randomize(*fc, 2);
  std::vector<float> w(static_cast<size_t>(s.out * s.in)), b(static_cast<size_t>(s.out), 0.0f);
  fc->read_param(0, w);
  if (s.bias) fc->read_param(1, b);
  auto y = fc->make_output();
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto dyv = random_values(static_cast<size_t>(s.m * s.out), 3);
  dy->write(dyv);
  // Low-precision runs compute on rounded inputs: the reference reads what the tensors hold.
  const auto xr = read_all(*x), dyr = read_all(*dy);
  fc->refresh_compute_weights();
  fc->forward(*x, *y);
  fc->backward(*x, *dy, dx.get());

  std::vector<double> y_ref(static_cast<size_t>(s.m * s.out)), dx_ref(static_cast<size_t>(s.m * s.in), 0.0),
      dw_ref(w.size(), 0.0), db_ref(b.size(), 0.0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = b[static_cast<size_t>(o)];
      const double g = dyr[static_cast<size_t>(i * s.out + o)];
      for (int64_t k = 0; k < s.in; ++k) {
        const auto xi = static_cast<size_t>(i * s.in + k), wi = static_cast<size_t>(o * s.in + k);
        acc += static_cast<double>(xr[xi]) * w[wi];
        dx_ref[xi] += g * w[wi];
        dw_ref[wi] += g * xr[xi];
      }
      y_ref[static_cast<size_t>(i * s.out + o)] = acc;
      db_ref[static_cast<size_t>(o)] += g;
    }
  const std::string what = std::string(to_string(p)) + " m " + std::to_string(s.m) + " in " + std::to_string(s.in) + " out " +
                           std::to_string(s.out);
  EXPECT_LE(max_rel_err(read_all(*y), y_ref), tol) << what << " y";
  EXPECT_LE(max_rel_err(read_all(*dx), dx_ref), tol) << what << " dx";
  EXPECT_LE(max_rel_err(OwnedParams::grad(*fc, 0), dw_ref), tol) << what << " dW";
  if (s.bias) {
    EXPECT_LE(max_rel_err(OwnedParams::grad(*fc, 1), db_ref), tol) << what << " db";
  }
}

// fp32 accumulates in f32: errors ~1e-6 of the largest value.
TEST(LinearMatmul, Fp32PlainOperands) { check_linear(Precision::fp32, {300, 40, 96, true}, 1e-5); }
TEST(LinearMatmul, Fp32WideInputManyRowsUsesBlockedBackward) { check_linear(Precision::fp32, {300, 96, 40, true}, 1e-5); }
TEST(LinearMatmul, Fp32WideInputFewRows) { check_linear(Precision::fp32, {16, 96, 40, true}, 1e-5); }
TEST(LinearMatmul, Fp32WithoutBias) { check_linear(Precision::fp32, {300, 96, 40, false}, 1e-5); }
// bf16: weights and outputs rounded to 8 mantissa bits (2^-8 = 0.4%).
TEST(LinearMatmul, Bf16) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  check_linear(Precision::bf16, {300, 96, 40, true}, 2e-2);
}

}  // namespace
}  // namespace dlperf::testing
