// What the trainer needs from a model: its layers (parameters in forward order), its input
// tensors to fill, forward to a loss, and backward that reports when each layer's gradients
// are final (so their allreduce can start while backward goes on).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace dlperf {

// Called during backward once every parameter gradient of `layer` is written.
using GradReadyFn = std::function<void(const Layer& layer)>;

// The exact format of one of a model's input tensors: dims, element type and layout. A data
// source that writes an input this way (the image loader) makes loading it one plain copy.
struct InputSpec {
  Dims dims;                          // (N, 3, H, W) for images
  DType dtype = DType::f32;
  Layout layout = Layout::canonical;  // canonical: NCHW; channels_last: stored as NHWC
  bool operator==(const InputSpec&) const = default;
};

// Bytes of one input in exactly its InputSpec format: host memory (pinned on CUDA), or device
// memory when a GPU decoder produced them.
struct RawInput {
  const void* data = nullptr;
  size_t bytes = 0;
  InputSpec spec;
};

// The inputs of one step; a data source fills them, the model copies them in.
struct HostBatch {
  std::map<std::string, std::vector<float>> floats;    // "images": (N, 3, H, W), canonical f32, converted on load
  std::map<std::string, std::vector<int32_t>> ints;    // "labels": (N)
  std::map<std::string, RawInput> raw;                 // "images" in Model::raw_input("images"), instead of floats
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual int64_t samples_per_step() const = 0;  // the per-device batch
  virtual std::vector<Layer*> layers() = 0;       // every layer with parameters, forward order

  // The tensors a batch of floats/ints fills, fixed for the model's life, and how it fills
  // them: load_into writes one batch into tensors shaped, typed and ordered like inputs() (the
  // model's own, or an input stage's staging copies, train/feed/input_stage.h), with any host-side
  // preparation (BERT builds its attention mask and masked-LM rows there); prepare_inputs then
  // turns the model's own input tensors into what forward reads (ResNet/VGG: the images into
  // the compute dtype and layout), queued on the device.
  virtual std::vector<Tensor*> inputs() = 0;
  virtual void load_into(const HostBatch& batch, std::span<Tensor* const> dst) = 0;
  virtual void prepare_inputs() {}
  // One batch into the model's tensors, ready for forward: floats/ints through load_into and
  // prepare_inputs, or HostBatch::raw bytes (raw_input's format) copied as they are.
  virtual void load(const HostBatch& batch) {
    load_into(batch, inputs());
    prepare_inputs();
  }
  // The format in which the model takes input `name` as HostBatch::raw bytes; nullopt when it
  // does not (then it takes floats/ints).
  virtual std::optional<InputSpec> raw_input(const std::string& /*name*/) const { return std::nullopt; }
  virtual void forward() = 0;                     // through the loss
  virtual float loss() = 0;                       // the last forward's loss (synchronises)
  // Where the last forward's loss lives in the backend's memory: the loss is the sum of these
  // floats (ResNet one term; BERT masked-LM + next-sentence). The trainer copies them back a
  // step late instead of calling loss(). Empty: the trainer calls loss().
  virtual std::vector<const float*> loss_terms() { return {}; }
  // scale multiplies the loss gradient (fp16 loss scaling; 1 otherwise).
  virtual void backward(const LossGradScale& scale, const GradReadyFn& on_ready) = 0;
  // Called by backward before it first writes a layer's parameter gradients (a block's layers
  // before the block, a tied weight before the first op that writes it): ZeRO-2 gives each
  // bucket's gradients back once reduced, and a GPU's must be mapped again before anything
  // writes them (train/parallel/zero.h). Unset: nothing is called.
  void set_gradient_write_hook(GradReadyFn hook) { write_hook_ = std::move(hook); }
  // Called by forward before it first reads a layer's parameters (a block's layers before the
  // block, a tied weight before its first op): ZeRO's all-gather of the new weights runs into
  // the next forward, and each layer waits here for the buckets that hold it
  // (train/parallel/zero.h). Recompute in backward reads weights forward already waited for.
  // Unset: nothing is called.
  void set_weight_read_hook(GradReadyFn hook) { read_hook_ = std::move(hook); }
  // Deterministic initialisation of every parameter from the seed (framework defaults).
  virtual void init_params(uint64_t seed) = 0;

 protected:
  void writing(const Layer& layer) const {
    if (write_hook_) write_hook_(layer);
  }
  template <class Block>  // a block with collect(std::vector<Layer*>&): all its layers
  void writing_block(Block& block) const {
    each_layer(block, write_hook_);
  }
  void reading(const Layer& layer) const {
    if (read_hook_) read_hook_(layer);
  }
  template <class Block>
  void reading_block(Block& block) const {
    each_layer(block, read_hook_);
  }

 private:
  template <class Block>
  static void each_layer(Block& block, const GradReadyFn& hook) {
    if (!hook) return;
    std::vector<Layer*> v;
    block.collect(v);
    for (const Layer* l : v) hook(*l);
  }
  GradReadyFn write_hook_;
  GradReadyFn read_hook_;
};

// Tensors reused across the layers of a model, keyed by role and dims: gradient buffers of
// blocks that run one after another in backward can share storage.
class TensorCache {
 public:
  explicit TensorCache(Backend& be) : be_(be) {}
  Tensor& like(const std::string& role, const Tensor& t);

 private:
  Backend& be_;
  std::map<std::string, TensorPtr> cache_;
};

// Where one block's inner activations live (--recompute): its own tensors, or with `shared`
// the cache's buffers, one per role and shape, that every block of that shape overwrites; the
// model then refills them by running the block's forward again just before its backward.
class ActivationStore {
 public:
  explicit ActivationStore(TensorCache* shared) : shared_(shared) {}
  // t: a tensor of the activation's format, fresh from make_output/tensor_like.
  Tensor* keep(TensorPtr t, const std::string& role);

 private:
  TensorCache* shared_;
  std::vector<TensorPtr> owned_;
};

}  // namespace dlperf
