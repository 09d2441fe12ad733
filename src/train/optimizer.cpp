#include "train/optimizer.h"

#include <cmath>
#include <numbers>

namespace dlperf {

float LrSchedule::at(int64_t it) const {
  if (warmup > 0 && it < warmup) return base * static_cast<float>(it + 1) / static_cast<float>(warmup);
  if (kind == LrScheduleKind::constant || total <= warmup) return base;
  const double progress = static_cast<double>(it - warmup) / static_cast<double>(total - warmup);
  return static_cast<float>(0.5 * base * (1.0 + std::cos(std::numbers::pi * progress)));
}

Sgd::Sgd(Backend& be, ParamStore& store, SgdConfig c) : be_(be), store_(store), cfg_(c), momentum_(be.buffer(store.size())) {
  // Merge neighbouring parameters of equal decay into one range (padding between them is zero
  // in values, gradients and momentum, so it is left unchanged by the update).
  for (const auto& e : store.entries()) {
    if (!ranges_.empty() && ranges_.back().decay == e.decay) {
      ranges_.back().count = e.offset + e.elems - ranges_.back().offset;
    } else {
      ranges_.push_back({e.offset, e.elems, e.decay});
    }
  }
}

void Sgd::step(float lr, float grad_scale, const float* gate) {
  float* w = store_.values().data();
  float* g = store_.grads().data();
  float* m = momentum_->data();
  // One call over every range (the CUDA backend: one launch; the default: one call per range).
  const SgdStep s{lr, cfg_.momentum, cfg_.weight_decay, grad_scale, first_, gate};
  be_.sgd_step(w, g, m, ranges_, s);
  first_ = false;
}

}  // namespace dlperf
