#include "data/sampler.h"

#include <numeric>
#include <string>
#include <utility>

#include "core/error.h"
#include "data/random.h"

namespace dlperf::data {

ShardedOrder::ShardedOrder(uint64_t dataset_size, int world, int rank, uint64_t seed)
    : size_(dataset_size), per_rank_(dataset_size / static_cast<uint64_t>(world)), first_(per_rank_ * static_cast<uint64_t>(rank)),
      seed_(seed) {
  if (size_ > UINT32_MAX) throw_usage_error("--data: more than 2^32 samples are not supported");
  if (per_rank_ == 0)
    throw_usage_error("--data: the dataset has " + std::to_string(size_) + " samples, fewer than the " + std::to_string(world) +
                      " ranks that each need a share");
}

void ShardedOrder::shuffle(uint64_t epoch) {
  if (order_.empty()) {
    order_.resize(size_);
    std::iota(order_.begin(), order_.end(), 0u);
  }
  // Each epoch shuffles the previous order again: the result is as uniform as shuffling the
  // identity, and needs no reset. Epochs are visited in order, so this is deterministic.
  SplitMix rng(mix64(seed_ ^ mix64(epoch + 0x5851F42D4C957F2Dull)));
  for (uint64_t i = size_ - 1; i > 0; --i) std::swap(order_[i], order_[rng.below(i + 1)]);
  epoch_ = epoch;
}

uint32_t ShardedOrder::at(uint64_t position) {
  const uint64_t epoch = position / per_rank_;
  DLPERF_ASSERT(epoch_ == UINT64_MAX ? epoch == 0 : epoch >= epoch_, "the sample stream is read in order");
  while (epoch_ == UINT64_MAX || epoch_ < epoch) shuffle(epoch_ == UINT64_MAX ? 0 : epoch_ + 1);
  return order_[first_ + position % per_rank_];
}

uint32_t ShardedOrder::replacement(uint64_t position, int attempt) {
  if (epoch_ == UINT64_MAX) at(position);
  const uint64_t pick = mix64(seed_ ^ mix64(position * 131 + static_cast<uint64_t>(attempt))) % per_rank_;
  return order_[first_ + pick];
}

}  // namespace dlperf::data
