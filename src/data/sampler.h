// Which samples a rank reads, and in which order. Epoch e's order is one permutation of the
// whole dataset (Fisher-Yates driven by a generator seeded with (run seed, e)), the same on
// every rank; rank r reads positions [r*M, (r+1)*M) of it, M = N / world. So the ranks read
// disjoint samples within an epoch, every epoch is reshuffled, and the last N mod world
// samples of each epoch's order are left out (PyTorch's DistributedSampler with drop_last).
#pragma once

#include <cstdint>
#include <vector>

namespace dlperf::data {

class ShardedOrder {
 public:
  // Throws Error(usage) when the dataset has fewer samples than ranks.
  ShardedOrder(uint64_t dataset_size, int world, int rank, uint64_t seed);

  uint64_t per_rank() const { return per_rank_; }
  // The dataset index at `position` of this rank's stream (epoch = position / per_rank()).
  // Not thread-safe: it keeps the current epoch's permutation (4 bytes per sample).
  uint32_t at(uint64_t position);
  // A stand-in for a sample that could not be decoded: another sample of this rank's share
  // of the epoch at() reached last, chosen by (position, attempt), so it stays disjoint from
  // what the other ranks read in that epoch.
  uint32_t replacement(uint64_t position, int attempt);

 private:
  void shuffle(uint64_t epoch);
  uint64_t size_, per_rank_, first_;
  uint64_t seed_;
  uint64_t epoch_ = UINT64_MAX;
  std::vector<uint32_t> order_;
};

}  // namespace dlperf::data
