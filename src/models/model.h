// What the trainer needs from a model: its layers (parameters in forward order), its input
// tensors to fill, forward to a loss, and backward that reports when each layer's gradients
// are final (so their allreduce can start while backward goes on).
#pragma once

#include <functional>
#include <map>
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

  virtual void load(const HostBatch& batch) = 0;  // copy one batch into the input tensors
  virtual void forward() = 0;                     // through the loss
  virtual float loss() = 0;                       // the last forward's loss (synchronises)
  // loss_scale multiplies the loss gradient (fp16 loss scaling; 1 otherwise).
  virtual void backward(float loss_scale, const GradReadyFn& on_ready) = 0;
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
