// Synthetic token windows for Llama pretraining: B sequences of T + 1 tokens per batch (the
// model predicts tokens 1..T from 0..T-1). The stream is learnable, so the loss must fall: each
// sequence is an arithmetic progression t_k = (start + step k) mod V with a random start and a
// step from a small set, which a causal model predicts from the two tokens before. A few
// batches are generated up front and cycled, as SyntheticImages does.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace dlperf
