// Batched matrix products on cuBLAS (cublasGemmStridedBatchedEx), BERT's attention products:
//   c (batch, m, n) = alpha op(a) op(b),  a (m, k) or (k, m) stored, b (k, n) or (n, k) stored.
// With A = op(a), B = op(b): dA = alpha dc B^T, dB = alpha A^T dc, each written in the stored
// orientation of a and b (a transposed operand gets the transposed gradient).
//
// Operands are dense (batch, rows, cols) or head-interleaved (MatmulOperand::heads): batch =
// (B, heads) and matrix (b, h) sits inside a (B, rows, heads, cols) tensor at b * rows * heads
// * cols + h * cols, row pitch heads * cols. All-dense products are one strided-batched call.
// A product with an interleaved operand is a two-level stride pattern no single batch stride
// describes, so it is one cublasGemmBatchedEx over every (b, h) with arrays of matrix pointers;
// the arrays are built on the device by one small kernel the first time a call sees a set of
// tensors, and kept (each op runs on the same tensors every step).
#include <array>

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
    const bool dense = s.a_layout == MatmulOperand::dense && s.b_layout == MatmulOperand::dense && s.c_layout == MatmulOperand::dense;
    const std::string shape = "(" + std::to_string(s.batch) + " x " + std::to_string(s.m) + " x " + std::to_string(s.k) + ") x (" +
                              std::to_string(s.k) + " x " + std::to_string(s.n) + ") " + to_string(t) + (dense ? "" : " head-interleaved");
    for (const char* pass : {"forward", "backward"})
      ctx_->record_kernel("batched_matmul", pass, shape,
                          std::string(dense ? "cublas strided batched" : "cublas pointer-array batched (one call)") + ", " +
                              ctx_->gemm_math_name(t));
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
    g.batch = s_.batch;
    if (dense) {
      auto operand = [](const Tensor& t, const Stored& o) { return GemmOperand{dev(t).data(), o.cols, o.rows * o.cols}; };
      gemm_ex(*ctx_, g, s_.alpha, operand(x, xs), operand(y, ys), dtype_, 0.0f, operand(z, zs), dtype_);
      return;
    }
    void** ptrs = pointers({dev(x).data(), dev(y).data(), dev(z).data()}, {&xs, &ys, &zs});
    const int64_t n = s_.batch;
    GemmPointers p{ptrs, ptrs + n, ptrs + 2 * n, pitch(xs), pitch(ys), pitch(zs)};
    gemm_batched(*ctx_, g, s_.alpha, p, dtype_, 0.0f, dtype_);
  }

  int64_t pitch(const Stored& o) const { return o.layout == MatmulOperand::heads ? s_.heads * o.cols : o.cols; }

  // The device arrays of the (b, h) matrix pointers of x, y, z (3 * batch), made on first use.
  void** pointers(const std::array<const void*, 3>& base, const std::array<const Stored*, 3>& stored) {
    for (auto& e : ptr_cache_)
      if (e.base == base) return e.mem.as<void*>();
    BatchPointers bp;
    for (int k = 0; k < 3; ++k) {
      const Stored& o = *stored[static_cast<size_t>(k)];
      bp.base[k] = base[static_cast<size_t>(k)];
      bp.image_stride[k] = s_.heads * o.rows * o.cols;  // matrix (b, 0) starts there in either layout
      bp.head_stride[k] = o.layout == MatmulOperand::heads ? o.cols : o.rows * o.cols;
    }
    if (ptr_cache_.size() >= 8) ptr_cache_.erase(ptr_cache_.begin());  // callers cycling through tensors (tests)
    PtrArrays e{base, ctx_->alloc(static_cast<size_t>(3 * s_.batch) * sizeof(void*))};
    DLPERF_CHECK(launch_batch_pointers(bp, static_cast<int64_t>(dtype_size(dtype_)), s_.batch / s_.heads, s_.heads, e.mem.as<void*>(), ctx_->s()));
    ptr_cache_.push_back(std::move(e));
    return ptr_cache_.back().mem.as<void*>();
  }

  struct PtrArrays {
    std::array<const void*, 3> base;
    DeviceMemory mem;
  };

  Ctx ctx_;
  BatchedMatmulSpec s_;
  DType dtype_;
  Stored a_, b_, c_;
  std::vector<PtrArrays> ptr_cache_;  // forward and the two backward products: three entries in a model
};

}  // namespace

std::unique_ptr<BatchedMatmul> make_batched_matmul(Ctx ctx, const BatchedMatmulSpec& s, DType dtype) {
  return std::make_unique<CudaBatchedMatmul>(std::move(ctx), s, dtype);
}

}  // namespace dlperf::cuda
