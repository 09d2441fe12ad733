#include "train/adam.h"

#include <cmath>

namespace dlperf {

AdamW::AdamW(Backend& be, ParamStore& store, AdamConfig c)
    : be_(be), store_(store), cfg_(c), m_(be.buffer(store.size())), v_(be.buffer(store.size())) {
  // Neighbouring parameters of equal decay form one range (the padding between them is zero in
  // values, gradients and moments, and stays zero).
  for (const auto& e : store.entries()) {
    if (!ranges_.empty() && ranges_.back().decay == e.decay) ranges_.back().end = e.offset + e.elems;
    else ranges_.push_back({e.offset, e.offset + e.elems, e.decay});
  }
}

void AdamW::step(float lr, float grad_scale, const float* gate) {
  ++t_;
  float* w = store_.values().data();
  const float* g = store_.grads().data();
  float* m = m_->data();
  float* v = v_->data();
  for (const auto& r : ranges_) {
    const size_t n = r.end - r.begin;
    const AdamStep s{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, r.decay ? cfg_.weight_decay : 0.0f, grad_scale, t_, gate};
    be_.adamw_step({w + r.begin, n}, {g + r.begin, n}, {m + r.begin, n}, {v + r.begin, n}, s);
  }
}

Lamb::Lamb(Backend& be, ParamStore& store, AdamConfig c)
    : be_(be), store_(store), cfg_(c), m_(be.buffer(store.size())), v_(be.buffer(store.size())),
      update_(be.buffer(store.size())) {}

void Lamb::step(float lr, float grad_scale, const float* gate) {
  ++t_;
  float* w = store_.values().data();
  const float* g = store_.grads().data();
  float* m = m_->data();
  float* v = v_->data();
  float* u = update_->data();
  for (const auto& e : store_.entries()) {
    const size_t o = e.offset, n = e.elems;
    const AdamStep s{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, e.decay ? cfg_.weight_decay : 0.0f, grad_scale, t_, gate};
    const LambNorms norms = be_.lamb_update({w + o, n}, {g + o, n}, {m + o, n}, {v + o, n}, {u + o, n}, s);
    double ratio = 1.0;
    if (e.decay && norms.w_sq > 0.0 && norms.u_sq > 0.0) ratio = std::sqrt(norms.w_sq / norms.u_sq);
    be_.lamb_apply({w + o, n}, {u + o, n}, static_cast<float>(lr * ratio), gate);
  }
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
