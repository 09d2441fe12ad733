// Optimizers over the flat buffers and the learning-rate schedule.
//
// SGD with momentum (PyTorch semantics), weight decay only on weights (never on biases or
// batch-norm parameters), fused by the backend over contiguous ranges of equal decay.
// Schedule: linear warm-up from lr/warmup to lr, then cosine decay to 0 (as NVIDIA's
// ResNet-50 v1.5 recipe, in iterations rather than epochs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "train/param_store.h"

namespace dlperf {

enum class LrScheduleKind : uint8_t { cosine, constant };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::cosine;
  float base = 0.1f;
  int64_t warmup = 0;  // iterations of linear warm-up
  int64_t total = 1;   // iterations in all
  float at(int64_t iteration) const;
};

struct SgdConfig {
  float momentum = 0.875f;               // NVIDIA's ResNet-50 v1.5 recipe
  float weight_decay = 3.0517578125e-5f;  // 1/32768, same recipe
};

// An optimizer updates the flat parameter buffer from the flat gradient buffer.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // grad_scale multiplies every gradient first (1/world_size averaging, 1/loss_scale); so does
  // *scale_by when not null, a factor in the backend's memory (Backend::clip_coefficient:
  // global-norm clipping on the device, without a host round trip).
  virtual void step(float lr, float grad_scale, const float* scale_by = nullptr) = 0;
};

class Sgd final : public Optimizer {
 public:
  Sgd(Backend& be, ParamStore& store, SgdConfig c);
  std::string name() const override { return "sgd"; }
  void step(float lr, float grad_scale, const float* scale_by = nullptr) override;  // same default as Optimizer::step

 private:
  struct Range {
    size_t begin, end;
    bool decay;
  };
  Backend& be_;
  ParamStore& store_;
  SgdConfig cfg_;
  std::unique_ptr<Buffer> momentum_;
  std::vector<Range> ranges_;
  bool first_ = true;
};

}  // namespace dlperf
