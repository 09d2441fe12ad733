// The step gate: the few per-step control values a training step needs, kept in the backend's
// memory (device memory on CUDA) so that no decision inside a step reads a value back to the
// host (issue 13) and a captured CUDA graph can replay a step whose learning rate and loss
// scale change.
//
// Layout: kGateFloats floats, indexed by GateField. The trainer writes `lr` each step
// (Backend::fill, in queue order) and calls Backend::update_step_gate after the gradient
// exchange; the optimizer kernels (SgdStep::gate, AdamStep::gate, Backend::lamb_apply) read
//   skip        != 0: this step changes nothing (inf/nan gradients under dynamic loss scaling)
//   grad_scale  multiplies every gradient (the host's grad_scale x 1/loss scale x clip coefficient)
//   lr          multiplies the host's lr (the trainer passes lr 1 and keeps the rate here)
//   applied     optimizer steps applied so far, this one included: Adam's bias-correction step
// and the cross-entropy backward reads loss_scale (LossGradScale::device).
//
// update_step_gate, in order (NVIDIA apex's dynamic loss scaling; torch's clip_grad_norm_):
//   used = loss_scale;  sq = sum of squares of the gradients (only when needed)
//   check_finite and sq is inf/nan:  skip = 1, loss_scale = used / 2, good = 0, skipped += 1
//   otherwise: skip = 0, applied += 1, m = grad_scale / used;
//              clip_norm > 0: norm = sqrt(sq) * m, grad_norm = norm, m *= clip / (norm + 1e-6) when norm > clip
//              grad_scale = m;  check_finite: good += 1, and when good reaches growth_interval
//              loss_scale = used * 2, good = 0
// Every rank holds the same summed gradients after the exchange, so every rank decides alike.
#pragma once

#include <cstdint>

namespace dlperf {

enum class GateField : int {
  skip,
  grad_scale,
  lr,
  applied,
  loss_scale,
  good_steps,
  skipped,
  grad_norm,
  count
};
inline constexpr int kGateFloats = static_cast<int>(GateField::count);
constexpr int gate_index(GateField f) { return static_cast<int>(f); }

struct StepGateUpdate {
  bool check_finite = false;    // dynamic loss scaling: skip the step on inf/nan and adapt the scale
  int64_t growth_interval = 2000;
  float clip_norm = 0.0f;       // > 0: clip by global norm (the norm after grad_scale and 1/loss scale)
  float grad_scale = 1.0f;      // the host's part of the multiplier (1 / world size)
  // The sum of squares of every gradient, already formed in the backend's memory (a sharded
  // optimizer's: each rank sums its shard, then the ranks' sums are allreduced); the gradient
  // span passed to update_step_gate is then not read. Null: the backend sums that span.
  const double* sq_sum = nullptr;
};

}  // namespace dlperf
