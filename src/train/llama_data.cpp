#include "train/llama_data.h"

#include "core/error.h"
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

IndexedTokens::IndexedTokens(const std::string& prefix, int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int rank,
                             int world)
    : ds_(prefix, vocab), batch_(batch), seq_len_(seq_len), seed_(seed), rank_(rank), world_(world) {
  windows_ = ds_.tokens() > 0 ? (ds_.tokens() - 1) / seq_len : 0;
  steps_per_epoch_ = windows_ / (static_cast<int64_t>(world) * batch);
  if (steps_per_epoch_ == 0)
    throw_usage_error(prefix + ": " + std::to_string(ds_.tokens()) + " tokens make " + std::to_string(windows_) + " windows of --seq-len " +
                      std::to_string(seq_len) + " + 1, fewer than ranks x --batch-size = " + std::to_string(world * batch));
  out_.ints[kLlamaTokens].resize(static_cast<size_t>(batch * (seq_len + 1)));
  shuffle();
}

// Fisher-Yates over all windows with SplitMix64 from (seed, epoch): the same order on every rank.
void IndexedTokens::shuffle() {
  order_.resize(static_cast<size_t>(windows_));
  for (int64_t i = 0; i < windows_; ++i) order_[static_cast<size_t>(i)] = i;
  Rng rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch_) + 1);
  for (int64_t i = windows_ - 1; i > 0; --i) std::swap(order_[static_cast<size_t>(i)], order_[rng.next() % static_cast<uint64_t>(i + 1)]);
}

const HostBatch& IndexedTokens::next() {
  if (step_ == steps_per_epoch_) {
    step_ = 0, ++epoch_;
    shuffle();
  }
  std::vector<int32_t>& tok = out_.ints[kLlamaTokens];
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t w = order_[static_cast<size_t>((step_ * world_ + rank_) * batch_ + b)];
    for (int64_t t = 0; t <= seq_len_; ++t) tok[static_cast<size_t>(b * (seq_len_ + 1) + t)] = static_cast<int32_t>(ds_.token(w * seq_len_ + t));
  }
  ++step_;
  return out_;
}

}  // namespace dlperf
