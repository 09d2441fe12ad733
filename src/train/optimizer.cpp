#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dlperf {

float LrSchedule::at(int64_t it) const {
  if (warmup > 0 && it < warmup) return base * static_cast<float>(it + 1) / static_cast<float>(warmup);
  if (kind == LrScheduleKind::constant || total <= warmup) return base;
  const double progress = static_cast<double>(it - warmup) / static_cast<double>(total - warmup);
  return static_cast<float>(0.5 * base * (1.0 + std::cos(std::numbers::pi * progress)));
}

Sgd::Sgd(Backend& be, ParamStore& store, SgdConfig c, const OptimizerShard* shard)
    : be_(be),
      store_(store),
      cfg_(c),
      grads_(shard ? shard->grads : &store.grads()),
      momentum_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())) {
  if (shard) {
    for (const auto& r : shard->ranges) ranges_.push_back({r.begin, r.begin + r.count, r.decay, r.local});
    return;
  }
  // Merge neighbouring parameters of equal decay into one range (padding between them is zero
  // in values, gradients and momentum, so it is left unchanged by the update).
  for (const auto& e : store.entries()) {
    if (!ranges_.empty() && ranges_.back().decay == e.decay) {
      ranges_.back().end = e.offset + e.elems;
    } else {
      ranges_.push_back({e.offset, e.offset + e.elems, e.decay, e.offset});
    }
  }
}

void Sgd::step(float lr, float grad_scale, const float* gate) {
  float* w = store_.values().data();
  float* g = grads_->data();
  float* m = momentum_->data();
  for (const auto& r : ranges_) {
    const size_t n = r.end - r.begin;
    SgdStep s{lr, cfg_.momentum, r.decay ? cfg_.weight_decay : 0.0f, grad_scale, first_, gate};
    be_.sgd_step({w + r.begin, n}, {g + r.local, n}, {m + r.local, n}, s);
  }
  first_ = false;
}

}  // namespace dlperf
