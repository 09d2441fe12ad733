// Optimizers over the flat buffers and the learning-rate schedule.
//
// SGD with momentum (PyTorch semantics), weight decay only on weights (never on biases or
// batch-norm parameters), fused by the backend over contiguous ranges of equal decay.
// Schedule: linear warm-up from lr/warmup to lr, then cosine decay to 0 (as NVIDIA's
// ResNet-50 v1.5 recipe, in iterations rather than epochs).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "train/param_store.h"
#include "train/parallel/sharding.h"

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

// A sharded optimizer (ZeRO, train/parallel/zero.h) steps only its rank's ranges of the flat
// parameters, reads their reduced gradients from the shard-sized buffer, and keeps its state
// (momentum, moments) shard-sized: ranges[i] is flat [begin, begin + count) = local [local, ...).
struct OptimizerShard {
  std::vector<ShardRange> ranges;
  Buffer* grads = nullptr;  // (local_size)
  size_t local_size = 0;
};

// The multi-tensor update's unit: segments that share one offset between the flat parameters
// and the gradient/state buffers (the whole store: one group, offsets equal; a shard: one group
// per contiguous piece). Segment offsets are relative to flat (parameters) and local (the rest).
struct SegmentGroup {
  size_t flat = 0, local = 0;
  std::vector<ParamSegment> segments;  // neighbouring parameters of equal decay merged
};
std::vector<SegmentGroup> segment_groups(const ParamStore& store, const OptimizerShard* shard);

// Sums `count` doubles in the backend's memory over the data-parallel ranks, in place and in
// queue order: the backend's later work reads the sums (a host communicator waits for them, a
// device one orders the compute stream after them). What a sharded optimizer needs when a
// quantity spans shards (LAMB's per-parameter norms).
using ShardReducer = std::function<void(double* values, size_t count)>;

// An optimizer updates the flat parameter buffer from the flat gradient buffer.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // grad_scale multiplies every gradient first (1/world_size averaging, 1/loss_scale).
  // gate: the step gate in the backend's memory (backend/step_gate.h), or nullptr. With a gate
  // the kernels skip the step, scale the gradients and the learning rate as the gate says, as
  // they run: the trainer calls step(1, 1, gate) and keeps lr and scales on the device.
  virtual void step(float lr, float grad_scale, const float* gate = nullptr) = 0;
  // Global gradient-norm clipping threshold this optimizer applies (0: none). With a gate the
  // trainer folds clipping into the gate (update_step_gate) rather than reading the norm back.
  virtual float clip_norm() const { return 0.0f; }
  // True when step() with a gate reads only device values and queues work without waiting on
  // the host, so it can be captured in a CUDA graph: the learning rate, the gradient scale and
  // the Adam family's bias correction (from the applied-step count) come from the gate, and
  // LAMB's norms and trust ratios stay on the device (Backend::lamb_step). The trainer always
  // passes a gate; without one the host's values would be frozen into the graph.
  virtual bool capturable() const { return false; }
  // A sharded optimizer whose update needs sums over the ranks gets them from here (set by
  // GatherAfterStep, train/parallel/zero.h); wrappers pass it on. Others ignore it.
  virtual void set_shard_reducer(ShardReducer) {}
  // True when step() also rebuilds the layers' compute copies (bf16/fp16) of the weights it
  // changed (ZeRO with sharded master weights refreshes each bucket as it is all-gathered): the
  // trainer then does not refresh them before forward.
  virtual bool refreshes_compute_weights() const { return false; }
  // After the run's last step: gives the state's memory back (ZeRO's restore_values then holds
  // the whole f32 master beside what is left). step() may not be called again.
  virtual void release_state() = 0;
};

class Sgd final : public Optimizer {
 public:
  // shard: null for the whole store (replicated data parallelism); else its ranges only.
  Sgd(Backend& be, ParamStore& store, SgdConfig c, const OptimizerShard* shard = nullptr);
  std::string name() const override { return "sgd"; }
  void step(float lr, float grad_scale, const float* gate = nullptr) override;
  bool capturable() const override { return true; }
  void release_state() override { momentum_.reset(); }

 private:
  Backend& be_;
  ParamStore& store_;
  SgdConfig cfg_;
  Buffer* grads_;  // the store's, or the shard's reduced gradients
  std::unique_ptr<Buffer> momentum_;
  std::vector<SegmentGroup> groups_;  // one multi-tensor update per group
  bool first_ = true;
};

}  // namespace dlperf
