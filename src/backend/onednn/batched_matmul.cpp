// Batched matrix products on oneDNN's matmul primitive (attention: scores = q k^T / sqrt(d),
// context = probs v). Transposes and BERT's head-interleaved operands are expressed as
// strides of 4-D descriptors (B, heads, rows, cols), so no operand is ever copied.
//
//   c = alpha op(a) op(b)                      (m, n) = (m, k) (k, n)
//   d op(a) = alpha dc op(b)^T                 (m, k) = (m, n) (n, k)
//   d op(b) = alpha op(a)^T dc                 (k, n) = (k, m) (m, n)
// and for a transposed operand its gradient is the transpose of that: da = alpha op(b) dc^T
// when a is stored (k, m), db = alpha dc^T op(a) when b is stored (n, k).
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

struct Plan {
  dnnl::matmul prim;
  md src, wei, dst;
};

struct Stored {
  int64_t rows = 0, cols = 0;  // of one stored matrix
  MatmulOperand layout = MatmulOperand::dense;
};

class CpuBatchedMatmul final : public BatchedMatmul {
 public:
  CpuBatchedMatmul(Ctx ctx, const BatchedMatmulSpec& s, DType t) : ctx_(std::move(ctx)), s_(s), dtype_(t) {
    if (s.batch <= 0 || s.m <= 0 || s.n <= 0 || s.k <= 0 || s.heads <= 0 || s.batch % s.heads != 0)
      throw_usage_error("batched_matmul: batch, m, n, k must be positive and batch a multiple of heads");
    if (t != DType::f32 && t != DType::bf16) throw_usage_error("batched_matmul: f32 or bf16 only");
    a_ = {s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k, s.a_layout};
    b_ = {s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n, s.b_layout};
    c_ = {s.m, s.n, s.c_layout};
    fwd_ = plan(view(a_, s.transpose_a), view(b_, s.transpose_b), view(c_, false), "forward");
    da_ = s.transpose_a ? plan(view(b_, s.transpose_b), view(c_, true), view(a_, false), "backward_a")
                        : plan(view(c_, false), view(b_, !s.transpose_b), view(a_, false), "backward_a");
    db_ = s.transpose_b ? plan(view(c_, true), view(a_, s.transpose_a), view(b_, false), "backward_b")
                        : plan(view(a_, !s.transpose_a), view(c_, false), view(b_, false), "backward_b");
  }

  void forward(const Tensor& a, const Tensor& b, Tensor& c) override {
    check(a, a_), check(b, b_), check(c, c_);
    run(fwd_, a, b, c);
  }

  void backward(const Tensor& a, const Tensor& b, const Tensor& dc, Tensor& da, Tensor& db) override {
    check(a, a_), check(b, b_), check(dc, c_), check(da, a_), check(db, b_);
    if (s_.transpose_a) run(da_, b, dc, da);
    else run(da_, dc, b, da);
    if (s_.transpose_b) run(db_, dc, a, db);
    else run(db_, a, dc, db);
  }

 private:
  // One stored operand as a (B, heads, rows, cols) descriptor, optionally viewed transposed.
  md view(const Stored& o, bool transposed) const {
    const int64_t h = s_.heads, B = s_.batch / h, r = o.rows, c = o.cols;
    dnnl::memory::dims dims{B, h, r, c};
    dnnl::memory::dims strides = o.layout == MatmulOperand::dense ? dnnl::memory::dims{h * r * c, r * c, c, 1}
                                                                  : dnnl::memory::dims{r * h * c, c, h * c, 1};
    if (transposed) {
      std::swap(dims[2], dims[3]);
      std::swap(strides[2], strides[3]);
    }
    return md(dims, to_dnnl(dtype_), strides);
  }

  Plan plan(const md& src, const md& wei, const md& dst, const char* pass) const {
    dnnl::primitive_attr attr;
    if (s_.alpha != 1.0f) compat::scale_output(attr, s_.alpha);
    const auto pd = compat::matmul(ctx_->engine, src, wei, md{}, dst, attr);
    const std::string shape = "(" + std::to_string(s_.batch) + " x " + std::to_string(s_.m) + "x" + std::to_string(s_.k) + " . " +
                              std::to_string(s_.k) + "x" + std::to_string(s_.n) + ") " + to_string(dtype_);
    record_kernel(*ctx_, "batched_matmul", pass, shape, pd);
    return {dnnl::matmul(pd), src, wei, dst};
  }

  // The tensors hold the bytes; the planned descriptors say how to read them.
  void run(const Plan& p, const Tensor& src, const Tensor& wei, Tensor& dst) const {
    const auto& e = ctx_->engine;
    p.prim.execute(ctx_->stream, {{DNNL_ARG_SRC, dnnl::memory(p.src, e, cpu(src).data())},
                                  {DNNL_ARG_WEIGHTS, dnnl::memory(p.wei, e, cpu(wei).data())},
                                  {DNNL_ARG_DST, dnnl::memory(p.dst, e, cpu(dst).data())}});
  }

  void check(const Tensor& t, const Stored& o) const {
    DLPERF_ASSERT(t.dtype() == dtype_ && t.numel() == s_.batch * o.rows * o.cols,
                  "batched_matmul operand " + to_string(t.dims()) + " of the planned size and dtype");
  }

  Ctx ctx_;
  BatchedMatmulSpec s_;
  DType dtype_;
  Stored a_, b_, c_;
  Plan fwd_, da_, db_;
};

}  // namespace

std::unique_ptr<BatchedMatmul> make_batched_matmul(Ctx ctx, const BatchedMatmulSpec& s, DType dtype) {
  return std::make_unique<CpuBatchedMatmul>(std::move(ctx), s, dtype);
}

}  // namespace dlperf::onednn
