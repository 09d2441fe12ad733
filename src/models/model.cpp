#include "models/model.h"

namespace dlperf {

Tensor& TensorCache::like(const std::string& role, const Tensor& t) {
  const std::string key = role + to_string(t.dims()) + to_string(t.dtype()) + std::to_string(t.storage_bytes());
  auto& slot = cache_[key];
  if (!slot) slot = be_.tensor_like(t);
  return *slot;
}

Tensor* ActivationStore::keep(TensorPtr t, const std::string& role) {
  if (shared_) return &shared_->like("recompute_" + role, *t);
  owned_.push_back(std::move(t));
  return owned_.back().get();
}

}  // namespace dlperf
