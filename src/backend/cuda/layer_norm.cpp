// Layer normalisation over the features of x (M, C), and BERT's fused sublayer output
// y = LayerNorm(r + dropout(a)) (kernels in layer_norm.cu: one launch forward, one backward,
// the parameter gradients included). Weight and bias are read from the f32 master values,
// their gradients written in f32; the row statistics (M) are kept from forward for backward.
#include <utility>

#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

// The state both ops share: parameters, statistics, the backward's partial sums and ticket.
class NormCore {
 public:
  NormCore(Ctx ctx, const LayerNormSpec& s, int64_t rows) : ctx_(std::move(ctx)), spec_(s), rows_(rows) {
    grid_ = add_norm_grid(rows, s.features, ctx_->props.multiProcessorCount);
    if (!grid_.supported)
      throw_usage_error("layer_norm " + s.name + ": " + std::to_string(s.features) + " features exceed the CUDA kernels' 16384");
    stats_ = ctx_->alloc(static_cast<size_t>(2 * rows) * sizeof(float));  // mean (M) | rstd (M)
    // The backward's partial sums live within its one launch: in the shared scratch
    // (stream-ordered), not a buffer per op; the ticket counter stays the op's own.
    ctx_->scratch.reserve(static_cast<size_t>(2 * grid_.blocks * s.features) * sizeof(float));
    counter_ = ctx_->alloc(sizeof(int));
    DLPERF_CHECK(cudaMemsetAsync(counter_.get(), 0, sizeof(int), ctx_->s()));
  }

  AddNormForward forward_args(const float* gamma, const float* beta) const {
    AddNormForward f;
    f.gamma = gamma;
    f.beta = beta;
    f.mean = stats_.as<float>();
    f.rstd = stats_.as<float>() + rows_;
    f.rows = rows_;
    f.cols = spec_.features;
    f.eps = spec_.eps;
    return f;
  }
  AddNormBackward backward_args(const float* gamma, float* dgamma, float* dbeta) const {
    AddNormBackward b;
    b.gamma = gamma;
    b.mean = stats_.as<float>();
    b.rstd = stats_.as<float>() + rows_;
    b.dgamma = dgamma;
    b.dbeta = dbeta;
    b.partial = ctx_->scratch.get<float>();
    b.counter = counter_.as<int>();
    b.rows = rows_;
    b.cols = spec_.features;
    return b;
  }
  AddNormGrid grid() const { return grid_; }

 private:
  Ctx ctx_;
  LayerNormSpec spec_;
  int64_t rows_;
  AddNormGrid grid_;
  DeviceMemory stats_, counter_;
};

class CudaLayerNorm final : public WithParams<LayerNorm> {
 public:
  CudaLayerNorm(Ctx ctx, const LayerNormSpec& s, const CudaTensor& x)
      : ctx_(std::move(ctx)), spec_(s), dtype_(x.dtype()), rows_(check(s, x)), core_(ctx_, s, rows_) {
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.features}, DType::f32);
    add_param(ctx_, s.name + ".bias", ParamRole::norm_shift, {s.features}, DType::f32);
    for (const char* pass : {"forward", "backward"}) ctx_->record_kernel(s.name, pass, shape_str(x.dims(), dtype_), "dlperf:layer_norm");
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{rows_, spec_.features}, dtype_, Layout::canonical);
  }

  void forward(const Tensor& x, Tensor& y) override {
    AddNormForward f = core_.forward_args(params_[0].value(), params_[1].value());
    f.a = dev(x).data();
    f.y = dev(y).data();
    DLPERF_CHECK(launch_add_norm_forward(f, elem(dtype_), core_.grid(), ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    AddNormBackward b = core_.backward_args(params_[0].value(), params_[0].grad(), params_[1].grad());
    b.x = dev(x).data();
    b.dy = dev(dy).data();
    b.dx = dev(dx).data();
    DLPERF_CHECK(launch_add_norm_backward(b, elem(dtype_), core_.grid(), ctx_->s()));
  }

  static int64_t check(const LayerNormSpec& s, const CudaTensor& x) {
    const Dims& xd = x.dims();
    if (xd.size() != 2 || xd[1] != s.features || x.padded())
      throw_usage_error("layer_norm " + s.name + ": input " + to_string(xd) + " is not (M, " + std::to_string(s.features) + ")");
    return xd[0];
  }

 private:
  Ctx ctx_;
  LayerNormSpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  NormCore core_;
};

class CudaDropoutAddNorm final : public WithParams<DropoutAddNorm> {
 public:
  CudaDropoutAddNorm(Ctx ctx, const AddNormSpec& s, const CudaTensor& a)
      : ctx_(std::move(ctx)), spec_(s), dtype_(a.dtype()), rows_(CudaLayerNorm::check(s.norm, a)), core_(ctx_, s.norm, rows_) {
    if (!(s.dropout >= 0.0f && s.dropout < 1.0f)) throw_usage_error("dropout probability " + std::to_string(s.dropout) + " is not in [0, 1)");
    add_param(ctx_, s.norm.name + ".weight", ParamRole::norm_scale, {s.norm.features}, DType::f32);
    add_param(ctx_, s.norm.name + ".bias", ParamRole::norm_shift, {s.norm.features}, DType::f32);
    sum_ = std::make_unique<CudaTensor>(ctx_, a.dims(), dtype_, Layout::canonical);  // s, kept for backward
    counter_ = ctx_->alloc(sizeof(uint64_t));  // on the device, as CudaDropout's (dropout.cpp)
    DLPERF_CHECK(cudaMemsetAsync(counter_.get(), 0, sizeof(uint64_t), ctx_->s()));
    for (const char* pass : {"forward", "backward"})
      ctx_->record_kernel(s.norm.name, pass, shape_str(a.dims(), dtype_), "dlperf:dropout_add_layer_norm");
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{rows_, spec_.norm.features}, dtype_, Layout::canonical);
  }

  void repeat_last_mask() override { repeat_ = true; }

  void forward(const Tensor& a, const Tensor& r, Tensor& y, uint64_t seed) override {
    DLPERF_ASSERT(a.same_layout(*sum_) && r.same_layout(*sum_) && y.same_layout(*sum_), "dropout_add_norm operands of the planned shape");
    seed_ = seed;
    // repeat_last_mask(): the last forward's mask again
    if (!std::exchange(repeat_, false) && spec_.dropout > 0.0f) DLPERF_CHECK(launch_dropout_advance(counter_.as<uint64_t>(), ctx_->s()));
    AddNormForward f = core_.forward_args(params_[0].value(), params_[1].value());
    f.a = dev(a).data();
    f.r = dev(r).data();
    f.s = sum_->data();
    f.y = dev(y).data();
    f.p = spec_.dropout;
    f.scale = 1.0f / (1.0f - spec_.dropout);
    f.seed = seed_;
    f.mask_counter = counter_.as<uint64_t>();
    DLPERF_CHECK(launch_add_norm_forward(f, elem(dtype_), core_.grid(), ctx_->s()));
  }

  void backward(const Tensor& dy, Tensor& da, Tensor& dr) override {
    AddNormBackward b = core_.backward_args(params_[0].value(), params_[0].grad(), params_[1].grad());
    b.x = sum_->data();
    b.dy = dev(dy).data();
    b.dx = dev(dr).data();
    b.da = dev(da).data();
    b.p = spec_.dropout;
    b.scale = 1.0f / (1.0f - spec_.dropout);
    b.seed = seed_;
    b.mask_counter = counter_.as<uint64_t>();
    DLPERF_CHECK(launch_add_norm_backward(b, elem(dtype_), core_.grid(), ctx_->s()));
  }

 private:
  Ctx ctx_;
  AddNormSpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  NormCore core_;
  std::unique_ptr<CudaTensor> sum_;  // (M, C): r + dropout(a) of the last forward
  uint64_t seed_ = 0;
  DeviceMemory counter_;  // (1) uint64: forwards so far
  bool repeat_ = false;
};

}  // namespace

std::unique_ptr<LayerNorm> make_layer_norm(Ctx ctx, const LayerNormSpec& s, const Tensor& x) {
  return std::make_unique<CudaLayerNorm>(std::move(ctx), s, dev(x));
}

std::unique_ptr<DropoutAddNorm> make_dropout_add_norm(Ctx ctx, const AddNormSpec& s, const Tensor& a) {
  return std::make_unique<CudaDropoutAddNorm>(std::move(ctx), s, dev(a));
}

}  // namespace dlperf::cuda
