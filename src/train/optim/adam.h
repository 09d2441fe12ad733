// Adam-family optimizers for BERT over the flat buffers, and global gradient-norm clipping.
//
// AdamW (Loshchilov & Hutter 2019; torch.optim.AdamW): bias-corrected moments, decoupled
// weight decay w -= lr * wd * w, on weights and embeddings only (never biases or LayerNorm).
// LAMB (You et al. 2019, NVIDIA's BERT recipe; apex FusedLAMB): the Adam direction plus weight
// decay, u = m_hat / (sqrt(v_hat) + eps) + wd * w, scaled per parameter (one ParamStore entry)
// by the trust ratio ||w|| / ||u||; like FusedLAMB without nvlamb, parameters without weight
// decay (biases, LayerNorm) take ratio 1.
// Both step every parameter at once through the backend's multi-tensor calls
// (Backend::adamw_step / lamb_step over ParamSegments): on CUDA a fixed number of launches per
// step, LAMB's per-tensor norms and trust ratios computed and applied on the device.
#pragma once

#include "train/optim/optimizer.h"

namespace dlperf {

struct AdamConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-6f;           // NVIDIA's BERT recipe
  float weight_decay = 0.01f;  // on weights and embeddings only
};

class AdamW final : public Optimizer {
 public:
  // shard: null for the whole store; else its ranges only (train/optim/optimizer.h).
  AdamW(Backend& be, ParamStore& store, AdamConfig c, const OptimizerShard* shard = nullptr);
  std::string name() const override { return "adamw"; }
  void step(float lr, float grad_scale, const float* gate = nullptr) override;
  bool capturable() const override { return true; }
  void release_state() override { m_.reset(), v_.reset(); }

 private:
  Backend& be_;
  ParamStore& store_;
  AdamConfig cfg_;
  std::unique_ptr<Buffer> m_, v_;
  std::vector<SegmentGroup> groups_;  // train/optim/optimizer.h
  Buffer* grads_;
  int64_t t_ = 0;
};

// LAMB over a shard (ZeRO, train/parallel/zero.h): a parameter's trust ratio needs its whole
// norms, and its elements may lie in several ranks' shards. Each rank forms the squared norms of
// its pieces per parameter (Backend::lamb_shard_norms), the ranks sum them (the shard reducer:
// an allreduce of 2 doubles per store entry in the backend's memory, set by GatherAfterStep),
// then each rank applies its pieces with the parameter's ratio (lamb_shard_apply); on CUDA the
// norms never leave the device. Without a reducer (a --find-max-batch trial, which never
// communicates) the ratios come from this rank's pieces alone.
class Lamb final : public Optimizer {
 public:
  // shard: null for the whole store; else its ranges only (train/optim/optimizer.h).
  Lamb(Backend& be, ParamStore& store, AdamConfig c, const OptimizerShard* shard = nullptr);
  std::string name() const override { return "lamb"; }
  void step(float lr, float grad_scale, const float* gate = nullptr) override;
  bool capturable() const override { return true; }
  void set_shard_reducer(ShardReducer reducer) override { reduce_ = std::move(reducer); }
  void release_state() override { m_.reset(), v_.reset(), update_.reset(), sums_.reset(); }

 private:
  Backend& be_;
  ParamStore& store_;
  AdamConfig cfg_;
  std::unique_ptr<Buffer> m_, v_, update_;
  std::vector<ParamSegment> params_;  // unsharded: one per ParamStore entry, each its own trust ratio
  std::vector<LambPiece> pieces_;     // sharded: the shard's ranges cut at the store entries
  Buffer* grads_ = nullptr;           // sharded: the shard's reduced gradients
  std::unique_ptr<Buffer> sums_;      // sharded: (w_sq, u_sq) f64 per store entry, as 4 floats
  ShardReducer reduce_;
  int64_t t_ = 0;
};

// Clip by global norm (torch.nn.utils.clip_grad_norm_): when ||g * grad_scale|| over every
// gradient exceeds max_norm, the gradients are scaled by max_norm / ||g * grad_scale||. In a
// training step the factor is part of the step gate (backend/step_gate.h: update_step_gate
// computes the norm and folds the coefficient into gate[grad_scale] on the device), so the
// inner kernels read each gradient once and the host never waits for the norm.
class ClipGradNorm final : public Optimizer {
 public:
  ClipGradNorm(Backend& be, ParamStore& store, std::unique_ptr<Optimizer> inner, float max_norm);
  std::string name() const override { return inner_->name(); }
  // Without a gate: reads the norm back (one host wait) and folds the coefficient into
  // grad_scale. With a gate the trainer has already folded clipping into it (clip_norm()).
  void step(float lr, float grad_scale, const float* gate = nullptr) override;
  float clip_norm() const override { return max_norm_; }
  bool capturable() const override { return inner_->capturable(); }
  void set_shard_reducer(ShardReducer reducer) override { inner_->set_shard_reducer(std::move(reducer)); }
  void release_state() override { inner_->release_state(); }
  float last_norm() const { return last_norm_; }  // before clipping, gate-less steps only

 private:
  Backend& be_;
  ParamStore& store_;
  std::unique_ptr<Optimizer> inner_;
  float max_norm_;
  float last_norm_ = 0.0f;
};

}  // namespace dlperf
