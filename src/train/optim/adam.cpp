#include "train/optim/adam.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dlperf {

AdamW::AdamW(Backend& be, ParamStore& store, AdamConfig c, const OptimizerShard* shard)
    : be_(be),
      store_(store),
      cfg_(c),
      m_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())),
      v_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())),
      groups_(segment_groups(store, shard)),
      grads_(shard ? shard->grads : &store.grads()) {}

void AdamW::step(float lr, float grad_scale, const float* gate) {
  ++t_;
  const AdamStep s{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, grad_scale, t_, gate};
  for (const SegmentGroup& g : groups_)
    be_.adamw_step(store_.values().data() + g.flat, grads_->data() + g.local, m_->data() + g.local, v_->data() + g.local, g.segments, s);
}

Lamb::Lamb(Backend& be, ParamStore& store, AdamConfig c, const OptimizerShard* shard)
    : be_(be),
      store_(store),
      cfg_(c),
      m_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())),
      v_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())),
      update_(be.buffer(shard ? std::max<size_t>(1, shard->local_size) : store.size())) {
  const auto& entries = store.entries();
  if (!shard) {
    for (const auto& e : entries) params_.push_back({e.offset, e.elems, e.decay});
    return;
  }
  grads_ = shard->grads;
  sums_ = be.buffer(4 * entries.size());
  // The shard's ranges (neighbours of equal decay merged) cut back at the entries' extents: an
  // entry owns its offset up to the next entry's (its padding included).
  for (const ShardRange& r : shard->ranges) {
    auto it = std::upper_bound(entries.begin(), entries.end(), r.begin, [](size_t at, const auto& e) { return at < e.offset; });
    DLPERF_ASSERT(it != entries.begin(), "a shard range inside the store");
    for (size_t i = static_cast<size_t>(it - entries.begin()) - 1, at = r.begin; at < r.begin + r.count; ++i) {
      const size_t to = std::min(r.begin + r.count, i + 1 < entries.size() ? entries[i + 1].offset : store.size());
      pieces_.push_back({.offset = at, .local = r.local + (at - r.begin), .count = to - at, .param = i, .decay = entries[i].decay});
      at = to;
    }
  }
}

void Lamb::step(float lr, float grad_scale, const float* gate) {
  ++t_;
  const AdamStep s{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, grad_scale, t_, gate};
  if (!grads_) {  // unsharded
    be_.lamb_step(store_.values().data(), store_.grads().data(), m_->data(), v_->data(), update_->data(), params_, s);
    return;
  }
  // As Backend::lamb_step, with each parameter's norms summed over its pieces on every rank.
  // The padding after a parameter is zero in w and g, so it adds nothing to them.
  const size_t params = store_.entries().size();
  auto* sums = reinterpret_cast<double*>(sums_->data());
  be_.lamb_shard_norms(store_.values().data(), grads_->data(), m_->data(), v_->data(), update_->data(), pieces_, params, s, sums);
  if (reduce_) reduce_(sums, 2 * params);
  be_.lamb_shard_apply(store_.values().data(), update_->data(), pieces_, sums, s);
}

ClipGradNorm::ClipGradNorm(Backend& be, ParamStore& store, std::unique_ptr<Optimizer> inner, float max_norm)
    : be_(be), store_(store), inner_(std::move(inner)), max_norm_(max_norm) {}

void ClipGradNorm::step(float lr, float grad_scale, const float* gate) {
  if (gate) return inner_->step(lr, grad_scale, gate);  // clipping is in the gate already
  const double sq = be_.sum_squares({store_.grads().data(), store_.size()});
  const double norm = std::sqrt(sq) * grad_scale;
  last_norm_ = static_cast<float>(norm);
  const double coef = norm > max_norm_ ? max_norm_ / (norm + 1e-6) : 1.0;  // torch's clip_grad_norm_
  inner_->step(lr, static_cast<float>(grad_scale * coef));
}

}  // namespace dlperf
