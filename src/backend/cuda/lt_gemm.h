// Row-major GEMMs on cuBLASLt with a fused epilogue, planned once (descriptors, layouts and the
// heuristics' algorithm chosen at plan time):
//   bias    z (m, n) = op(x) op(y) + b,  b (n) in z's type         (a linear layer's forward)
//   bgrad   z = op(x) op(y), and the bias gradient from x (below)   (its weight gradient)
// Shapes and operands as gemm_ex (context.h): x stored (m, k) or (k, m), y (k, n) or (n, k),
// each with a row pitch. In cuBLASLt's column-major terms z^T = op(y)^T op(x)^T, so the bias
// broadcast along cuBLASLt's rows is one value per column n of z, and BGRADB, the bias gradient
// reduced over k from cuBLASLt's B operand (our x), is, for the weight gradient dW (out, in) =
// dy^T x_in with x = dy stored (M, out) transposed, db (out) = sum over the M rows of dy: the
// bias gradient comes out of the weight-gradient GEMM in f32 (the type of dW).
//
// cuBLASLt's GELU epilogues compute the tanh approximation of GELU; BERT (and the HuggingFace
// model the benchmark compares with) uses the erf form, so GELU stays an elementwise kernel and
// only the bias is fused. A shape cuBLASLt has no algorithm for (valid() false) falls back to
// the plain GEMM and the bias kernels, with a one-line warning.
#pragma once

#include <cublasLt.h>

#include "backend/cuda/context.h"

namespace dlperf::cuda {

enum class LtEpilogue : uint8_t { bias, bgrad };

class LtGemm {
 public:
  LtGemm(Context& ctx, const GemmShape& g, int64_t x_pitch, int64_t y_pitch, int64_t z_pitch, DType in_type, DType out_type,
         LtEpilogue epilogue);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  bool valid() const { return valid_; }
  const std::string& why_not() const { return why_not_; }
  // z = alpha op(x) op(y) (+ bias), or with bgrad: also vec = the bias gradient (f32).
  void run(Context& ctx, float alpha, const void* x, const void* y, void* z, const void* vec);

 private:
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
  bool valid_ = false;
  std::string why_not_;
};

}  // namespace dlperf::cuda
