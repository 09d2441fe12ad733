// Batched matrix products on cuBLAS (cublasGemmStridedBatchedEx), BERT's attention products:
//   c (batch, m, n) = alpha op(a) op(b),  a (m, k) or (k, m) stored, b (k, n) or (n, k) stored.
// With A = op(a), B = op(b): dA = alpha dc B^T, dB = alpha A^T dc, each written in the stored
// orientation of a and b (a transposed operand gets the transposed gradient).
//
// Operands are dense (batch, rows, cols) or head-interleaved (MatmulOperand::heads): batch =
// (B, heads) and matrix (b, h) sits inside a (B, rows, heads, cols) tensor, row pitch
// heads * cols, consecutive heads `cols` apart. cuBLAS has one batch stride, so a product
// with any interleaved operand runs as B calls of `heads` matrices each; all-dense products
// are one call.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

struct Stored {
  int64_t rows = 0, cols = 0;  // of one stored matrix
  MatmulOperand layout = MatmulOperand::dense;
};

class CudaBatchedMatmul final : public BatchedMatmul {
 public:
  CudaBatchedMatmul(Ctx ctx, const BatchedMatmulSpec& s, DType t) : ctx_(std::move(ctx)), s_(s), dtype_(t) {
    if (s.batch <= 0 || s.m <= 0 || s.n <= 0 || s.k <= 0 || s.heads <= 0 || s.batch % s.heads != 0)
      throw_usage_error("batched_matmul: batch, m, n, k must be positive and batch a multiple of heads");
    a_ = {s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k, s.a_layout};
    b_ = {s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n, s.b_layout};
    c_ = {s.m, s.n, s.c_layout};
  }

  void forward(const Tensor& a, const Tensor& b, Tensor& c) override {
    check(a, a_, "a");
    check(b, b_, "b");
    check(c, c_, "c");
    run({s_.transpose_a, s_.transpose_b, s_.m, s_.n, s_.k, 1}, a, a_, b, b_, c, c_);
  }

  void backward(const Tensor& a, const Tensor& b, const Tensor& dc, Tensor& da, Tensor& db) override {
    const bool ta = s_.transpose_a, tb = s_.transpose_b;
    const int64_t m = s_.m, n = s_.n, k = s_.k;
    if (!ta)
      run({false, !tb, m, k, n, 1}, dc, c_, b, b_, da, a_);  // da (m, k) = dc op(b)^T
    else
      run({tb, true, k, m, n, 1}, b, b_, dc, c_, da, a_);  // da (k, m) = op(b) dc^T
    if (!tb)
      run({!ta, false, k, n, m, 1}, a, a_, dc, c_, db, b_);  // db (k, n) = op(a)^T dc
    else
      run({true, ta, n, k, m, 1}, dc, c_, a, a_, db, b_);  // db (n, k) = dc^T op(a)
  }

 private:
  void check(const Tensor& t, const Stored& o, const char* what) const {
    DLPERF_ASSERT(t.dtype() == dtype_ && t.numel() == s_.batch * o.rows * o.cols, std::string("batched_matmul ") + what + " of the planned shape");
  }

  // z = alpha op(x) op(y) over every (b, h).
  void run(GemmShape g, const Tensor& x, const Stored& xs, const Tensor& y, const Stored& ys, Tensor& z, const Stored& zs) {
    const bool dense = xs.layout == MatmulOperand::dense && ys.layout == MatmulOperand::dense && zs.layout == MatmulOperand::dense;
    const int64_t heads = s_.heads, images = s_.batch / heads;
    const size_t esize = dtype_size(dtype_);
    auto operand = [&](const Tensor& t, const Stored& o, int64_t image) {
      const bool interleaved = o.layout == MatmulOperand::heads;
      // Matrix (image, 0) starts image * heads * rows * cols elements in, in either layout.
      const auto* base = static_cast<const char*>(dev(t).data()) + static_cast<size_t>(image * heads * o.rows * o.cols) * esize;
      return GemmOperand{base, interleaved ? heads * o.cols : o.cols, interleaved ? o.cols : o.rows * o.cols};
    };
    if (dense) {
      g.batch = s_.batch;
      gemm_ex(*ctx_, g, s_.alpha, operand(x, xs, 0), operand(y, ys, 0), dtype_, 0.0f, operand(z, zs, 0), dtype_);
      return;
    }
    g.batch = heads;
    for (int64_t i = 0; i < images; ++i)
      gemm_ex(*ctx_, g, s_.alpha, operand(x, xs, i), operand(y, ys, i), dtype_, 0.0f, operand(z, zs, i), dtype_);
  }

  Ctx ctx_;
  BatchedMatmulSpec s_;
  DType dtype_;
  Stored a_, b_, c_;
};

}  // namespace

std::unique_ptr<BatchedMatmul> make_batched_matmul(Ctx ctx, const BatchedMatmulSpec& s, DType dtype) {
  return std::make_unique<CudaBatchedMatmul>(std::move(ctx), s, dtype);
}

}  // namespace dlperf::cuda
