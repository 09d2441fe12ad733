// Synthetic token windows for Llama pretraining: B sequences of T + 1 tokens per batch (the
// model predicts tokens 1..T from 0..T-1). The stream is learnable, so the loss must fall: each
// sequence is an arithmetic progression t_k = (start + step k) mod V with a random start and a
// step from a small set, which a causal model predicts from the two tokens before. A few
// batches are generated up front and cycled, as SyntheticImages does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

#include "train/data_source.h"

namespace dlperf {

class SyntheticLlamaTokens final : public DataSource {
 public:
  SyntheticLlamaTokens(int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int pool = 4);
  const HostBatch& next() override;

 private:
  std::vector<HostBatch> pool_;
  size_t cursor_ = 0;
};

// Real tokens from a Megatron/NeMo indexed dataset (data/indexed_dataset.h): the documents
// concatenated and cut into W = (tokens - 1) / T windows of T + 1 tokens (window w starts at
// token w T; consecutive windows share one token, as Megatron's GPT dataset does). Each epoch
// visits every window in an order shuffled from (seed, epoch), the same on every rank; step s of
// rank r reads the windows at positions (s * world + r) * B + b, so the ranks' shares of an
// epoch are disjoint and an epoch is W / (world * B) steps (the remainder is left out).
class IndexedTokens final : public DataSource {
 public:
  IndexedTokens(const std::string& prefix, int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int rank, int world);
  const HostBatch& next() override;
  int64_t windows() const { return windows_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  void shuffle();

  data::IndexedDataset ds_;
  int64_t batch_, seq_len_, windows_ = 0, steps_per_epoch_ = 0;
  uint64_t seed_;
  int rank_, world_;
  int64_t epoch_ = 0, step_ = 0;
  std::vector<int64_t> order_;  // (W) this epoch's window order
  HostBatch out_;
};

}  // namespace dlperf
