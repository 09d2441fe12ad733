#include "train/optim/optimizer.h"

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

std::vector<SegmentGroup> segment_groups(const ParamStore& store, const OptimizerShard* shard) {
  std::vector<SegmentGroup> groups;
  if (shard) {
    for (const auto& r : shard->ranges) {
      const bool same_piece = !groups.empty() && r.begin - groups.back().flat == r.local - groups.back().local;
      if (!same_piece) groups.push_back({r.begin, r.local, {}});
      groups.back().segments.push_back({r.begin - groups.back().flat, r.count, r.decay});
    }
    return groups;
  }
  // Neighbouring parameters of equal decay form one segment (the padding between them is zero in
  // values, gradients and optimizer state, and the update leaves it zero).
  auto& segments = groups.emplace_back().segments;
  for (const auto& e : store.entries()) {
    if (!segments.empty() && segments.back().decay == e.decay) segments.back().count = e.offset + e.elems - segments.back().offset;
    else segments.push_back({e.offset, e.elems, e.decay});
  }
  return groups;
}

Sgd::Sgd(Backend& be, ParamStore& store, SgdConfig c, const OptimizerShard* shard)
    : be_(be),
      store_(store),
      cfg_(c),
      grads_(shard ? shard->grads : &store.grads()),
      momentum_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())),
      groups_(segment_groups(store, shard)) {}

void Sgd::step(float lr, float grad_scale, const float* gate) {
  // One call per group (the CUDA backend: one launch each; the default: one call per segment).
  const SgdStep s{lr, cfg_.momentum, cfg_.weight_decay, grad_scale, first_, gate};
  for (const SegmentGroup& g : groups_)
    be_.sgd_step(store_.values().data() + g.flat, grads_->data() + g.local, momentum_->data() + g.local, g.segments, s);
  first_ = false;
}

}  // namespace dlperf
