// The profiling decorator of op_profile.h: a Backend that plans every op on the inner backend
// and hands the model a wrapper timing each call. Only planning is wrapped; tensors, buffers,
// the optimizer kernels and everything else go straight to the inner backend. A wrapped layer
// presents the inner layer's parameters as its own, so the ParamStore, the gradient buckets
// and the models see no difference.
#include <string>
#include <vector>

#include "core/error.h"
#include "train/measure/op_profile.h"

namespace dlperf {
namespace {

std::string shape_of(const Tensor& x) { return to_string(x.dims()) + " " + to_string(x.dtype()); }

// A wrapped layer's inner one, for calls that take the model's layer list
// (Backend::refresh_compute_weights).
class Wrapped {
 public:
  virtual ~Wrapped() = default;
  virtual Layer* inner_layer() = 0;
};

// The Layer plumbing: parameters, binding and weight refresh forwarded to the inner op.
template <class I>
class LayerWrap : public I, public Wrapped {
 public:
  LayerWrap(std::unique_ptr<I> in, OpProfiler& p, int op) : in_(std::move(in)), p_(p), op_(op) {
    for (const auto& s : in_->params()) this->params_specs().push_back(s);
  }
  void bind(std::span<const ParamSlot> slots) override { in_->bind(slots); }
  void write_param(size_t i, std::span<const float> c) override { in_->write_param(i, c); }
  void read_param(size_t i, std::span<float> c) const override { in_->read_param(i, c); }
  void read_grad(size_t i, std::span<float> c) const override { in_->read_grad(i, c); }
  void refresh_compute_weights() override {
    p_.timed(op_, [&] { in_->refresh_compute_weights(); }, false);
  }
  I& inner() { return *in_; }
  Layer* inner_layer() override { return in_.get(); }

 protected:
  std::unique_ptr<I> in_;
  OpProfiler& p_;
  int op_;
};

class Conv2dWrap final : public LayerWrap<Conv2d> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override { p_.timed(op_, [&] { in_->backward(x, dy, dx); }); }
};

class BatchNormWrap final : public LayerWrap<BatchNorm> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(x, dy, dx); }); }
  void forward_add(const Tensor& x, const Tensor& z, Tensor& y) override { p_.timed(op_, [&] { in_->forward_add(x, z, y); }); }
  void backward_add(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dz) override {
    p_.timed(op_, [&] { in_->backward_add(x, dy, dx, dz); });
  }
  void read_running_stats(std::span<float> mean, std::span<float> var) const override { in_->read_running_stats(mean, var); }
  // --recompute block with --profile-ops: the inner op's (the base class's default refuses).
  void set_running_stats_update(bool on) override { in_->set_running_stats_update(on); }
};

class DropoutAddNormWrap final : public LayerWrap<DropoutAddNorm> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& a, const Tensor& r, Tensor& y, uint64_t seed) override { p_.timed(op_, [&] { in_->forward(a, r, y, seed); }); }
  void backward(const Tensor& dy, Tensor& da, Tensor& dr) override { p_.timed(op_, [&] { in_->backward(dy, da, dr); }); }
  void repeat_last_mask() override { in_->repeat_last_mask(); }
};

class LinearWrap final : public LayerWrap<Linear> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override { p_.timed(op_, [&] { in_->backward(x, dy, dx); }); }
  void backward_add(const Tensor& x, const Tensor& dy, Tensor* dx) override { p_.timed(op_, [&] { in_->backward_add(x, dy, dx); }); }
};

class LayerNormWrap final : public LayerWrap<LayerNorm> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(x, dy, dx); }); }
};

class EmbeddingWrap final : public LayerWrap<Embedding> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& ids, Tensor& y) override { p_.timed(op_, [&] { in_->forward(ids, y); }); }
  void backward(const Tensor& ids, const Tensor& dy) override { p_.timed(op_, [&] { in_->backward(ids, dy); }); }
};

// Ops without parameters: the inner op and its row.
template <class I>
class Wrap : public I {
 public:
  Wrap(std::unique_ptr<I> in, OpProfiler& p, int op) : in_(std::move(in)), p_(p), op_(op) {}

 protected:
  std::unique_ptr<I> in_;
  OpProfiler& p_;
  int op_;
};

class Pool2dWrap final : public Wrap<Pool2d> {
 public:
  using Wrap::Wrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(dy, dx); }); }
};

class GlobalAvgPoolWrap final : public Wrap<GlobalAvgPool> {
 public:
  using Wrap::Wrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(dy, dx); }); }
};

class ActivationWrap final : public Wrap<Activation> {
 public:
  using Wrap::Wrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(x, dy, dx); }); }
};

class AddWrap final : public Wrap<Add> {
 public:
  using Wrap::Wrap;
  void forward(const Tensor& a, const Tensor& b, Tensor& y) override { p_.timed(op_, [&] { in_->forward(a, b, y); }); }
  void backward_relu(const Tensor& y, const Tensor& dy, Tensor& d) override { p_.timed(op_, [&] { in_->backward_relu(y, dy, d); }); }
};

class CrossEntropyWrap final : public Wrap<SoftmaxCrossEntropy> {
 public:
  using Wrap::Wrap;
  void forward(const Tensor& logits, const Tensor& labels) override { p_.timed(op_, [&] { in_->forward(logits, labels); }); }
  float loss() override { return in_->loss(); }
  const float* loss_location() const override { return in_->loss_location(); }
  void backward(Tensor& dlogits, const LossGradScale& scale) override { p_.timed(op_, [&] { in_->backward(dlogits, scale); }); }
};

class DropoutWrap final : public Wrap<Dropout> {
 public:
  using Wrap::Wrap;
  void forward(const Tensor& x, Tensor& y, uint64_t seed) override { p_.timed(op_, [&] { in_->forward(x, y, seed); }); }
  void backward(const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(dy, dx); }); }
  void repeat_last_mask() override { in_->repeat_last_mask(); }
};

class BatchedMatmulWrap final : public Wrap<BatchedMatmul> {
 public:
  using Wrap::Wrap;
  void forward(const Tensor& a, const Tensor& b, Tensor& c) override { p_.timed(op_, [&] { in_->forward(a, b, c); }); }
  void backward(const Tensor& a, const Tensor& b, const Tensor& dc, Tensor& da, Tensor& db) override {
    p_.timed(op_, [&] { in_->backward(a, b, dc, da, db); });
  }
};

class MaskedSoftmaxWrap final : public Wrap<MaskedSoftmax> {
 public:
  using Wrap::Wrap;
  void forward(const Tensor& x, const Tensor& mask, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, mask, y); }); }
  void backward(const Tensor& y, const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(y, dy, dx); }); }
};

class RowGatherWrap final : public Wrap<RowGather> {
 public:
  using Wrap::Wrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, const Tensor& idx, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, idx, y); }); }
  void backward(const Tensor& idx, const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(idx, dy, dx); }); }
};

class RmsNormWrap final : public LayerWrap<RmsNorm> {
 public:
  using LayerWrap::LayerWrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(x, dy, dx); }); }
};

class RopeWrap final : public Wrap<Rope> {
 public:
  using Wrap::Wrap;
  void forward(const Tensor& x, Tensor& y) override { p_.timed(op_, [&] { in_->forward(x, y); }); }
  void backward(const Tensor& dy, Tensor& dx) override { p_.timed(op_, [&] { in_->backward(dy, dx); }); }
};

class SwiGluWrap final : public Wrap<SwiGlu> {
 public:
  using Wrap::Wrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& a, const Tensor& b, Tensor& y) override { p_.timed(op_, [&] { in_->forward(a, b, y); }); }
  void backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) override {
    p_.timed(op_, [&] { in_->backward(a, b, dy, da, db); });
  }
};

class CausalAttentionWrap final : public Wrap<CausalAttention> {
 public:
  using Wrap::Wrap;
  TensorPtr make_output() const override { return in_->make_output(); }
  void forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) override { p_.timed(op_, [&] { in_->forward(q, k, v, o); }); }
  void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& dout, Tensor& dq, Tensor& dk,
                Tensor& dv) override {
    p_.timed(op_, [&] { in_->backward(q, k, v, o, dout, dq, dk, dv); });
  }
};

class ProfilingBackend final : public Backend {
 public:
  ProfilingBackend(Backend& inner, OpProfiler& p) : Backend({inner.precision(), 0, 0}), in_(inner), p_(p) {}

  BackendKind kind() const override { return in_.kind(); }
  std::string description() const override { return in_.description() + "; every op timed (--profile-ops)"; }
  std::string isa() const override { return in_.isa(); }
  std::vector<PlannedKernel> planned_kernels() const override { return in_.planned_kernels(); }
  Layout image_layout() const override { return in_.image_layout(); }
  void plan_convert(const Tensor& src, const Tensor& dst) override { in_.plan_convert(src, dst); }
  HostMemory host_memory(size_t bytes) override { return in_.host_memory(bytes); }
  // The inner backend converts its own layers' weights (on CUDA in one launch over all of
  // them): hand it the layers inside the wrappers. Not timed per op: one launch serves all.
  void refresh_compute_weights(std::span<Layer* const> layers) override {
    std::vector<Layer*> inner;
    inner.reserve(layers.size());
    for (Layer* l : layers) {
      auto* w = dynamic_cast<Wrapped*>(l);
      inner.push_back(w ? w->inner_layer() : l);
    }
    in_.refresh_compute_weights(inner);
  }
  std::unique_ptr<PackTable> pack_table(std::vector<PackRun> runs) override { return in_.pack_table(std::move(runs)); }
  void pack(const PackTable& t, const float* values, float* words) override { in_.pack(t, values, words); }
  void unpack(const PackTable& t, const float* words, float* values) override { in_.unpack(t, words, values); }

  TensorPtr tensor(const Dims& dims, DType dtype, Layout layout) override { return in_.tensor(dims, dtype, layout); }
  TensorPtr tensor_like(const Tensor& t) override { return in_.tensor_like(t); }
  TensorPtr rows_of(Tensor& t, int64_t first, int64_t count) override { return in_.rows_of(t, first, count); }
  void convert(const Tensor& src, Tensor& dst) override {
    if (!p_.active()) return in_.convert(src, dst);  // no row lookup outside profiled steps
    p_.timed(p_.convert_op(src, dst), [&] { in_.convert(src, dst); });
  }
  std::unique_ptr<Buffer> buffer(size_t elems) override { return in_.buffer(elems); }
  std::unique_ptr<Buffer> decommitted_buffer(size_t elems) override { return in_.decommitted_buffer(elems); }
  std::unique_ptr<Buffer> releasable_buffer(size_t elems) override { return in_.releasable_buffer(elems); }
  int64_t allocated_peak_bytes() const override { return in_.allocated_peak_bytes(); }
  int64_t allocated_bytes() const override { return in_.allocated_bytes(); }
  bool frees_decommitted() const override { return in_.frees_decommitted(); }
  std::string memory_mapping_summary(int64_t measured_steps) const override { return in_.memory_mapping_summary(measured_steps); }
  void begin_measured_window() override { in_.begin_measured_window(); }
  int64_t peak_memory_bytes() const override { return in_.peak_memory_bytes(); }
  int64_t device_memory_used_bytes() const override { return in_.device_memory_used_bytes(); }
  DeviceFacts device_facts() const override { return in_.device_facts(); }
  void synchronize() override { in_.synchronize(); }
  void* stream_handle() override { return in_.stream_handle(); }
  std::unique_ptr<StepRecorder> step_recorder() override { return in_.step_recorder(); }
  std::unique_ptr<InputPipe> input_pipe(std::span<Tensor* const> inputs) override { return in_.input_pipe(inputs); }
  size_t input_pipe_bytes(std::span<Tensor* const> inputs) const override { return in_.input_pipe_bytes(inputs); }
  void fill(float* dst, size_t count, float value) override { in_.fill(dst, count, value); }
  void update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u) override {
    in_.update_step_gate(grads, gate, u);
  }
  bool supports_graphs() const override { return false; }  // graphs would hide the ops

  std::unique_ptr<Conv2d> conv2d(const Conv2dSpec& s, const Tensor& x) override {
    return std::make_unique<Conv2dWrap>(in_.conv2d(s, x), p_, p_.add_op(s.name, "conv2d", shape_of(x)));
  }
  std::unique_ptr<BatchNorm> batch_norm(const BatchNormSpec& s, const Tensor& x) override {
    return std::make_unique<BatchNormWrap>(in_.batch_norm(s, x), p_, p_.add_op(s.name, "batch_norm", shape_of(x)));
  }
  std::unique_ptr<Pool2d> pool2d(const Pool2dSpec& s, const Tensor& x) override {
    const char* kind = s.kind == PoolKind::max ? "max_pool" : "avg_pool";
    return std::make_unique<Pool2dWrap>(in_.pool2d(s, x), p_, p_.add_op(p_.unnamed(kind), kind, shape_of(x)));
  }
  std::unique_ptr<GlobalAvgPool> global_avg_pool(const Tensor& x) override {
    return std::make_unique<GlobalAvgPoolWrap>(in_.global_avg_pool(x), p_,
                                               p_.add_op(p_.unnamed("global_avg_pool"), "global_avg_pool", shape_of(x)));
  }
  std::unique_ptr<Linear> linear(const LinearSpec& s, const Tensor& x) override {
    return std::make_unique<LinearWrap>(in_.linear(s, x), p_, p_.add_op(s.name, "linear", shape_of(x)));
  }
  std::unique_ptr<Activation> activation(ActivationKind k, const Tensor& x) override {
    const char* kind = k == ActivationKind::relu ? "relu" : k == ActivationKind::gelu ? "gelu" : "tanh";
    return std::make_unique<ActivationWrap>(in_.activation(k, x), p_, p_.add_op(p_.unnamed(kind), kind, shape_of(x)));
  }
  std::unique_ptr<Add> add(const Tensor& a, const Tensor& b, bool fuse_relu) override {
    const char* kind = fuse_relu ? "add_relu" : "add";
    return std::make_unique<AddWrap>(in_.add(a, b, fuse_relu), p_, p_.add_op(p_.unnamed(kind), kind, shape_of(a)));
  }
  using Backend::add;
  std::unique_ptr<SoftmaxCrossEntropy> cross_entropy(const CrossEntropySpec& s, const Tensor& logits) override {
    return std::make_unique<CrossEntropyWrap>(in_.cross_entropy(s, logits), p_,
                                              p_.add_op(p_.unnamed("cross_entropy"), "cross_entropy", shape_of(logits)));
  }
  std::unique_ptr<DropoutAddNorm> dropout_add_norm(const AddNormSpec& s, const Tensor& a) override {
    return std::make_unique<DropoutAddNormWrap>(in_.dropout_add_norm(s, a), p_, p_.add_op(s.norm.name, "dropout_add_norm", shape_of(a)));
  }
  std::unique_ptr<LayerNorm> layer_norm(const LayerNormSpec& s, const Tensor& x) override {
    return std::make_unique<LayerNormWrap>(in_.layer_norm(s, x), p_, p_.add_op(s.name, "layer_norm", shape_of(x)));
  }
  std::unique_ptr<Embedding> embedding(const EmbeddingSpec& s, const Tensor& ids) override {
    return std::make_unique<EmbeddingWrap>(in_.embedding(s, ids), p_, p_.add_op(s.name, "embedding", shape_of(ids)));
  }
  std::unique_ptr<Dropout> dropout(float prob, const Tensor& x) override {
    return std::make_unique<DropoutWrap>(in_.dropout(prob, x), p_, p_.add_op(p_.unnamed("dropout"), "dropout", shape_of(x)));
  }
  std::unique_ptr<BatchedMatmul> batched_matmul(const BatchedMatmulSpec& s, DType t) override {
    const std::string shape = "(" + std::to_string(s.batch) + ", " + std::to_string(s.m) + ", " + std::to_string(s.n) + ", " +
                              std::to_string(s.k) + ") " + to_string(t);  // (batch, m, n, k)
    return std::make_unique<BatchedMatmulWrap>(in_.batched_matmul(s, t), p_,
                                               p_.add_op(p_.unnamed("batched_matmul"), "batched_matmul", shape));
  }
  std::unique_ptr<MaskedSoftmax> masked_softmax(const Tensor& x) override {
    return std::make_unique<MaskedSoftmaxWrap>(in_.masked_softmax(x), p_,
                                               p_.add_op(p_.unnamed("masked_softmax"), "masked_softmax", shape_of(x)));
  }
  std::unique_ptr<RowGather> gather_rows(const Tensor& x, const Tensor& idx) override {
    return std::make_unique<RowGatherWrap>(in_.gather_rows(x, idx), p_, p_.add_op(p_.unnamed("gather_rows"), "gather_rows", shape_of(x)));
  }
  std::unique_ptr<RmsNorm> rms_norm(const RmsNormSpec& s, const Tensor& x) override {
    return std::make_unique<RmsNormWrap>(in_.rms_norm(s, x), p_, p_.add_op(s.name, "rms_norm", shape_of(x)));
  }
  std::unique_ptr<Rope> rope(const RopeSpec& s, const Tensor& x) override {
    return std::make_unique<RopeWrap>(in_.rope(s, x), p_, p_.add_op(p_.unnamed("rope"), "rope", shape_of(x)));
  }
  std::unique_ptr<SwiGlu> swiglu(const Tensor& a) override {
    return std::make_unique<SwiGluWrap>(in_.swiglu(a), p_, p_.add_op(p_.unnamed("swiglu"), "swiglu", shape_of(a)));
  }
  std::unique_ptr<CausalAttention> causal_attention(const AttentionSpec& s, const Tensor& q) override {
    return std::make_unique<CausalAttentionWrap>(in_.causal_attention(s, q), p_,
                                                 p_.add_op(p_.unnamed("causal_attention"), "causal_attention", shape_of(q)));
  }
  std::unique_ptr<SoftmaxCrossEntropy> token_cross_entropy(const CrossEntropySpec& s, const Tensor& logits) override {
    return std::make_unique<CrossEntropyWrap>(in_.token_cross_entropy(s, logits), p_,
                                              p_.add_op(p_.unnamed("token_cross_entropy"), "token_cross_entropy", shape_of(logits)));
  }
  std::unique_ptr<Linear> tied_linear(const LinearSpec& s, Embedding& tied, const Tensor& x) override {
    // The inner backend ties its decoder to its own embedding, not to the wrapper.
    auto* wrapped = dynamic_cast<EmbeddingWrap*>(&tied);
    Embedding& inner = wrapped ? wrapped->inner() : tied;
    return std::make_unique<LinearWrap>(in_.tied_linear(s, inner, x), p_, p_.add_op(s.name, "tied_linear", shape_of(x)));
  }

  void sgd_step(std::span<float> w, std::span<const float> g, std::span<float> m, const SgdStep& s) override { in_.sgd_step(w, g, m, s); }
  void adamw_step(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v, const AdamStep& s) override {
    in_.adamw_step(w, g, m, v, s);
  }
  LambNorms lamb_update(std::span<const float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                        std::span<float> update, const AdamStep& s) override {
    return in_.lamb_update(w, g, m, v, update, s);
  }
  void lamb_apply(std::span<float> w, std::span<const float> update, float step, const float* gate) override {
    in_.lamb_apply(w, update, step, gate);
  }
  double sum_squares(std::span<const float> x) override { return in_.sum_squares(x); }
  void sgd_step(float* w, const float* g, float* m, std::span<const ParamSegment> segments, const SgdStep& s) override {
    in_.sgd_step(w, g, m, segments, s);
  }
  void accumulate(std::span<float> dst, std::span<const float> src, bool first) override { in_.accumulate(dst, src, first); }
  void adamw_step(float* w, const float* g, float* m, float* v, std::span<const ParamSegment> segments, const AdamStep& s) override {
    in_.adamw_step(w, g, m, v, segments, s);
  }
  void lamb_step(float* w, const float* g, float* m, float* v, float* update, std::span<const ParamSegment> segments,
                 const AdamStep& s) override {
    in_.lamb_step(w, g, m, v, update, segments, s);
  }
  void lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, std::span<const LambPiece> pieces, size_t params,
                        const AdamStep& s, double* sums) override {
    in_.lamb_shard_norms(w, g, m, v, update, pieces, params, s, sums);
  }
  void lamb_shard_apply(float* w, const float* update, std::span<const LambPiece> pieces, const double* sums, const AdamStep& s) override {
    in_.lamb_shard_apply(w, update, pieces, sums, s);
  }

 private:
  Backend& in_;
  OpProfiler& p_;
};

}  // namespace

std::unique_ptr<Backend> make_profiling_backend(Backend& inner, OpProfiler& profiler) {
  return std::make_unique<ProfilingBackend>(inner, profiler);
}

}  // namespace dlperf
