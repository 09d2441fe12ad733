// BERT's sublayer output y = LayerNorm(r + dropout(a)) on the CPU: the backend's own dropout,
// binary add and layer norm primitives in sequence (the CUDA backend fuses the three into one
// kernel each way; the semantics are the same, the dropout masks each backend's own). The sum
// s is kept for backward; the layer norm's parameters are this layer's.
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuDropoutAddNorm final : public DropoutAddNorm {
 public:
  CpuDropoutAddNorm(Ctx ctx, const AddNormSpec& s, const CpuTensor& a) : ctx_(ctx) {
    if (a.dims().size() != 2) throw_usage_error("dropout_add_norm " + s.norm.name + ": input " + to_string(a.dims()) + " is not (M, C)");
    drop_ = make_dropout(ctx, s.dropout, a);
    dropped_ = std::make_unique<CpuTensor>(ctx, a.dims(), a.dtype(), a.desc());
    add_ = make_add(ctx, a, a, false);
    sum_ = std::make_unique<CpuTensor>(ctx, a.dims(), a.dtype(), a.desc());
    norm_ = make_layer_norm(ctx, s.norm, *sum_);
    for (const ParamSpec& p : norm_->params()) params_specs().push_back(p);
  }

  void bind(std::span<const ParamSlot> slots) override { norm_->bind(slots); }
  void write_param(size_t i, std::span<const float> c) override { norm_->write_param(i, c); }
  void read_param(size_t i, std::span<float> c) const override { norm_->read_param(i, c); }
  void read_grad(size_t i, std::span<float> c) const override { norm_->read_grad(i, c); }
  void refresh_compute_weights() override { norm_->refresh_compute_weights(); }

  TensorPtr make_output() const override { return norm_->make_output(); }

  void forward(const Tensor& a, const Tensor& r, Tensor& y, uint64_t seed) override {
    drop_->forward(a, *dropped_, seed);
    add_->forward(*dropped_, r, *sum_);
    norm_->forward(*sum_, y);
  }

  void repeat_last_mask() override { drop_->repeat_last_mask(); }

  void backward(const Tensor& dy, Tensor& da, Tensor& dr) override {
    norm_->backward(*sum_, dy, dr);  // the gradient of s is the residual's
    drop_->backward(dr, da);
  }

 private:
  Ctx ctx_;
  std::unique_ptr<Dropout> drop_;
  std::unique_ptr<Add> add_;
  std::unique_ptr<LayerNorm> norm_;
  std::unique_ptr<CpuTensor> dropped_, sum_;  // dropout(a), s = r + dropout(a)
};

}  // namespace

std::unique_ptr<DropoutAddNorm> make_dropout_add_norm(Ctx ctx, const AddNormSpec& s, const Tensor& a) {
  return std::make_unique<CpuDropoutAddNorm>(std::move(ctx), s, cpu(a));
}

}  // namespace dlperf::onednn
