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
#include "train/feed/token_sources.h"

#include "train/feed/data_source.h"

namespace dlperf {

class SyntheticLlamaTokens final : public DataSource {
 public:
  SyntheticLlamaTokens(int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int pool = 4);
  const HostBatch& next() override;

 private:
  std::vector<HostBatch> pool_;
  size_t cursor_ = 0;
};

// Real tokens from Megatron/NeMo indexed datasets (data/indexed_dataset.h). Each dataset's
// documents are concatenated and cut into W_d = (tokens - 1) / T windows of T + 1 tokens (window
// w starts at token w T; consecutive windows share one token, as Megatron's GPT dataset does).
// An epoch is E = floor(sum_d W_d / (world B)) steps of world B samples, the same on every rank:
// sample j of the epoch is drawn from dataset d(j) = argmax_d (w_d (j + 1) - n_d(j)), n_d(j) the
// samples drawn from d before j (Megatron's blending indices: every prefix of the epoch as close
// to the weights as whole samples allow), as its k-th sample; that is window order_d[k mod W_d],
// the order a Fisher-Yates shuffle from (seed, epoch, d, k / W_d) (a dataset weighted above its
// size is cycled, reshuffled each time). Step s of rank r reads samples (s world + r) B + b, so
// the ranks' shares are disjoint; with one dataset each epoch visits W / (world B) world B of the
// W windows once (the remainder is left out).
class IndexedTokens final : public DataSource {
 public:
  IndexedTokens(const std::string& spec, int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int rank, int world);
  ~IndexedTokens() override;
  const HostBatch& next() override;
  int64_t windows() const;  // summed over the datasets
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The normalised weight of each dataset (given, or by size), in --data's order.
  std::vector<double> weights() const;
  // Each dataset's name (the prefix's last part), token and document counts and weight.
  std::string fingerprint() const override { return fingerprint_; }

 private:
  struct Component;
  int64_t window_of(size_t d, int64_t k);  // window of dataset d's k-th sample this epoch

  std::vector<std::unique_ptr<Component>> parts_;
  int64_t batch_, seq_len_, steps_per_epoch_ = 0;
  uint64_t seed_;
  int rank_, world_;
  int64_t epoch_ = 0, step_ = 0;
  std::vector<uint16_t> part_of_;  // (samples per epoch) the dataset of each sample; empty: one dataset
  std::vector<int64_t> nth_of_;    // (samples per epoch) its k within that dataset
  HostBatch out_;
  std::string fingerprint_;
};

}  // namespace dlperf
