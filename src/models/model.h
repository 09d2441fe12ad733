// What the trainer needs from a model: its layers (parameters in forward order), its input
// tensors to fill, forward to a loss, and backward that reports when each layer's gradients
// are final (so their allreduce can start while backward goes on).
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace dlperf {

// Called during backward once every parameter gradient of `layer` is written.
using GradReadyFn = std::function<void(const Layer& layer)>;

// The host-side inputs of one step; a data source fills them, the model copies them in.
struct HostBatch {
  std::map<std::string, std::vector<float>> floats;    // "images": (N, 3, H, W)
  std::map<std::string, std::vector<int32_t>> ints;    // "labels": (N)
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual int64_t samples_per_step() const = 0;  // the per-device batch
  virtual std::vector<Layer*> layers() = 0;       // every layer with parameters, forward order

  // The tensors a batch fills, fixed for the model's life, and how it fills them: load_into
  // writes one batch into tensors shaped, typed and ordered like inputs() (the model's own, or
  // an input stage's staging copies, train/input_stage.h), with any host-side preparation
  // (BERT builds its attention mask and masked-LM rows there).
  virtual std::vector<Tensor*> inputs() = 0;
  virtual void load_into(const HostBatch& batch, std::span<Tensor* const> dst) = 0;
  void load(const HostBatch& batch) { load_into(batch, inputs()); }  // straight into the model's tensors
  virtual void forward() = 0;                     // through the loss
  virtual float loss() = 0;                       // the last forward's loss (synchronises)
  // Where the last forward's loss lives in the backend's memory: the loss is the sum of these
  // floats (ResNet one term; BERT masked-LM + next-sentence). The trainer copies them back a
  // step late instead of calling loss(). Empty: the trainer calls loss().
  virtual std::vector<const float*> loss_terms() { return {}; }
  // scale multiplies the loss gradient (fp16 loss scaling; 1 otherwise).
  virtual void backward(const LossGradScale& scale, const GradReadyFn& on_ready) = 0;
  // Deterministic initialisation of every parameter from the seed (framework defaults).
  virtual void init_params(uint64_t seed) = 0;
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

}  // namespace dlperf
