#include "train/llama_data.h"

#include "models/init.h"
#include "models/llama.h"

namespace dlperf {

SyntheticLlamaTokens::SyntheticLlamaTokens(int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int pool) {
  Rng rng(seed);
  constexpr int64_t kSteps[] = {1, 2, 3, 5};
  for (int p = 0; p < pool; ++p) {
    HostBatch hb;
    std::vector<int32_t>& tok = hb.ints[kLlamaTokens];
    tok.resize(static_cast<size_t>(batch * (seq_len + 1)));
    for (int64_t b = 0; b < batch; ++b) {
      const auto start = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(vocab));
      const int64_t step = kSteps[rng.next() % 4];
      for (int64_t t = 0; t <= seq_len; ++t) tok[static_cast<size_t>(b * (seq_len + 1) + t)] = static_cast<int32_t>((start + step * t) % vocab);
    }
    pool_.push_back(std::move(hb));
  }
}

const HostBatch& SyntheticLlamaTokens::next() {
  const HostBatch& b = pool_[cursor_];
  cursor_ = (cursor_ + 1) % pool_.size();
  return b;
}

}  // namespace dlperf
