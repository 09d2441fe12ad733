#include "train/adam.h"

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

Lamb::Lamb(Backend& be, ParamStore& store, AdamConfig c)
    : be_(be), store_(store), cfg_(c), m_(be.buffer(store.size())), v_(be.buffer(store.size())),
      update_(be.buffer(store.size())) {
  for (const auto& e : store.entries()) params_.push_back({e.offset, e.elems, e.decay});
}

void Lamb::step(float lr, float grad_scale, const float* gate) {
  ++t_;
  const AdamStep s{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, grad_scale, t_, gate};
  be_.lamb_step(store_.values().data(), store_.grads().data(), m_->data(), v_->data(), update_->data(), params_, s);
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
