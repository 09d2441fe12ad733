// Max/average pooling and global average pooling on oneDNN. Max pooling keeps the argmax
// workspace from forward for its backward. Global average pooling is a pooling over the whole
// H x W window followed by a reorder into the plain (N, C) matrix the classifier reads.
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuPool2d final : public Pool2d {
 public:
  CpuPool2d(Ctx ctx, const std::string& op, const Dims& xd, DType t, const md& x_md, PoolKind kind,
            const dnnl::memory::dims& kernel, const dnnl::memory::dims& stride, const dnnl::memory::dims& pad)
      : ctx_(std::move(ctx)), dtype_(t) {
    if (xd.size() != 4) throw_usage_error("pool2d: input " + to_string(xd) + " is not (N, C, H, W)");
    const int64_t ho = (xd[2] + 2 * pad[0] - kernel[0]) / stride[0] + 1;
    const int64_t wo = (xd[3] + 2 * pad[1] - kernel[1]) / stride[1] + 1;
    if (ho < 1 || wo < 1) throw_usage_error("pool2d: input " + to_string(xd) + " is smaller than the pooling window");
    y_dims_ = {xd[0], xd[1], ho, wo};
    const auto alg = kind == PoolKind::max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
    const md y_md = any_md(y_dims_, t);
    fwd_pd_ = compat::pooling_forward(ctx_->engine, alg, x_md, y_md, stride, kernel, pad);
    bwd_pd_ = compat::pooling_backward(ctx_->engine, alg, x_md, fwd_pd_.dst_desc(), stride, kernel, pad, fwd_pd_);
    fwd_ = dnnl::pooling_forward(fwd_pd_);
    bwd_ = dnnl::pooling_backward(bwd_pd_);
    record_kernel(*ctx_, op, "forward", shape_of(xd, t), fwd_pd_);
    record_kernel(*ctx_, op, "backward", shape_of(xd, t), bwd_pd_);
    if (kind == PoolKind::max) workspace_ = ChargedMemory(*ctx_, fwd_pd_.workspace_desc());
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, y_dims_, dtype_, fwd_pd_.dst_desc()); }
  md dst_desc() const { return fwd_pd_.dst_desc(); }

  void forward(const Tensor& x, Tensor& y) override { forward_mem(cpu(x).mem(), cpu(y).mem()); }
  void backward(const Tensor& dy, Tensor& dx) override { backward_mem(cpu(dy).mem(), cpu(dx).mem()); }

  void forward_mem(const dnnl::memory& x, const dnnl::memory& y) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}};
    if (workspace_) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    fwd_.execute(ctx_->stream, args);
  }
  void backward_mem(const dnnl::memory& dy, const dnnl::memory& dx) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, dx}};
    if (workspace_) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    bwd_.execute(ctx_->stream, args);
  }

 private:
  Ctx ctx_;
  DType dtype_;
  Dims y_dims_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  ChargedMemory workspace_;
};

class CpuGlobalAvgPool final : public GlobalAvgPool {
 public:
  CpuGlobalAvgPool(Ctx ctx, const CpuTensor& x)
      : ctx_(ctx),
        pool_(ctx, "global_avg_pool", x.dims(), x.dtype(), x.desc(), PoolKind::avg, {x.dims().at(2), x.dims().at(3)}, {1, 1}, {0, 0}),
        dtype_(x.dtype()) {
    const Dims& xd = x.dims();
    y_dims_ = {xd[0], xd[1]};
    pooled_ = ChargedMemory(*ctx_, pool_.dst_desc());
    dpooled_ = ChargedMemory(*ctx_, pool_.dst_desc());
    // (N, C) row-major is the same memory as (N, C, 1, 1) nchw: the reorders go through that view.
    view_md_ = md({xd[0], xd[1], 1, 1}, to_dnnl(dtype_), tag::nchw);
    to_plain_ = PlannedReorder(*ctx_, pool_.dst_desc(), view_md_, "global_avg_pool");
    from_plain_ = PlannedReorder(*ctx_, view_md_, pool_.dst_desc(), "global_avg_pool");
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, y_dims_, dtype_, plain_md(y_dims_, dtype_)); }

  void forward(const Tensor& x, Tensor& y) override {
    pool_.forward_mem(cpu(x).mem(), pooled_);
    to_plain_.run(*ctx_, pooled_, dnnl::memory(view_md_, ctx_->engine, cpu(y).data()));
  }

  void backward(const Tensor& dy, Tensor& dx) override {
    from_plain_.run(*ctx_, dnnl::memory(view_md_, ctx_->engine, cpu(dy).data()), dpooled_);
    pool_.backward_mem(dpooled_, cpu(dx).mem());
  }

 private:
  Ctx ctx_;
  CpuPool2d pool_;
  DType dtype_;
  Dims y_dims_;
  md view_md_;
  ChargedMemory pooled_, dpooled_;
  PlannedReorder to_plain_, from_plain_;
};

}  // namespace

std::unique_ptr<Pool2d> make_pool2d(Ctx ctx, const Pool2dSpec& s, const Tensor& x) {
  const auto& t = cpu(x);
  return std::make_unique<CpuPool2d>(std::move(ctx), s.kind == PoolKind::max ? "max_pool" : "avg_pool", t.dims(), t.dtype(), t.desc(), s.kind, dnnl::memory::dims{s.kernel, s.kernel},
                                     dnnl::memory::dims{s.stride, s.stride}, dnnl::memory::dims{s.padding, s.padding});
}

std::unique_ptr<GlobalAvgPool> make_global_avg_pool(Ctx ctx, const Tensor& x) {
  if (x.dims().size() != 4) throw_usage_error("global_avg_pool: input " + to_string(x.dims()) + " is not (N, C, H, W)");
  return std::make_unique<CpuGlobalAvgPool>(std::move(ctx), cpu(x));
}

}  // namespace dlperf::onednn
