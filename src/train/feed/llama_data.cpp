#include "train/feed/llama_data.h"

#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/fnv.h"
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

namespace {

// The Fisher-Yates order of W windows for (seed, epoch, dataset d, cycle c); (d, c) = (0, 0)
// gives the order one dataset always had.
std::vector<int64_t> shuffled_windows(int64_t windows, uint64_t seed, int64_t epoch, size_t d, int64_t cycle) {
  std::vector<int64_t> order(static_cast<size_t>(windows));
  for (int64_t i = 0; i < windows; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1 + static_cast<uint64_t>(d) * 0xD1B54A32D192ED03ull +
          static_cast<uint64_t>(cycle) * 0x8CB92BA72F3D8DD7ull);
  for (int64_t i = windows - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.next() % static_cast<uint64_t>(i + 1)]);
  return order;
}

}  // namespace

struct IndexedTokens::Component {
  Component(const std::string& path, int64_t vocab) : ds(path, vocab) {}
  data::IndexedDataset ds;
  int64_t windows = 0;
  double weight = 0;            // normalised
  int64_t order_epoch = -1, order_cycle = -1;  // what `order` was shuffled for
  std::vector<int64_t> order;
};

IndexedTokens::IndexedTokens(const std::string& spec, int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed, int rank,
                             int world)
    : batch_(batch), seq_len_(seq_len), seed_(seed), rank_(rank), world_(world) {
  const std::vector<TokenSource> sources = parse_token_sources(spec);
  if (sources.size() > 65535) throw_usage_error("--data " + spec + ": more than 65,535 datasets in one blend");
  int64_t total_windows = 0;
  double total_weight = 0;
  for (const auto& source : sources) {
    auto part = std::make_unique<Component>(source.prefix, vocab);
    part->windows = part->ds.tokens() > 0 ? (part->ds.tokens() - 1) / seq_len : 0;
    if (part->windows == 0 && sources.size() > 1)
      throw_usage_error(source.prefix + ": " + std::to_string(part->ds.tokens()) + " tokens make no window of --seq-len " +
                        std::to_string(seq_len) + " + 1 tokens");
    part->weight = source.weight > 0 ? source.weight : static_cast<double>(part->windows);
    total_windows += part->windows;
    total_weight += part->weight;
    parts_.push_back(std::move(part));
  }
  steps_per_epoch_ = total_windows / (static_cast<int64_t>(world) * batch);
  if (steps_per_epoch_ == 0)
    throw_usage_error(spec + ": " + std::to_string(parts_.size() == 1 ? parts_.front()->ds.tokens() : total_windows) +
                      (parts_.size() == 1 ? " tokens make " + std::to_string(total_windows) + " windows" : " windows") + " of --seq-len " +
                      std::to_string(seq_len) + " + 1, fewer than ranks x --batch-size = " + std::to_string(world * batch));
  Fnv1a h;
  for (size_t d = 0; d < parts_.size(); ++d) {
    auto& part = *parts_[d];
    part.weight /= total_weight;
    uint64_t weight_bits = 0;
    std::memcpy(&weight_bits, &part.weight, sizeof weight_bits);
    h.text(std::filesystem::path(sources[d].prefix).filename().string()).number(static_cast<uint64_t>(part.ds.tokens()));
    h.number(static_cast<uint64_t>(part.ds.documents())).number(static_cast<uint64_t>(part.ds.dtype_code())).number(weight_bits);
  }
  fingerprint_ = h.hex();
  if (parts_.size() > 1) {  // Megatron's blending indices, once: every epoch draws the same mix
    const int64_t samples = steps_per_epoch_ * world * batch;
    part_of_.resize(static_cast<size_t>(samples));
    nth_of_.resize(static_cast<size_t>(samples));
    std::vector<int64_t> drawn(parts_.size(), 0);
    for (int64_t j = 0; j < samples; ++j) {
      size_t best = 0;
      double best_error = -1e300;
      for (size_t d = 0; d < parts_.size(); ++d) {
        const double error = parts_[d]->weight * static_cast<double>(j + 1) - static_cast<double>(drawn[d]);
        if (error > best_error) best = d, best_error = error;
      }
      part_of_[static_cast<size_t>(j)] = static_cast<uint16_t>(best);
      nth_of_[static_cast<size_t>(j)] = drawn[best]++;
    }
  }
  out_.ints[kLlamaTokens].resize(static_cast<size_t>(batch * (seq_len + 1)));
}

IndexedTokens::~IndexedTokens() = default;

int64_t IndexedTokens::windows() const {
  int64_t w = 0;
  for (const auto& part : parts_) w += part->windows;
  return w;
}

std::vector<double> IndexedTokens::weights() const {
  std::vector<double> w;
  for (const auto& part : parts_) w.push_back(part->weight);
  return w;
}

// A rank reads each dataset's samples in increasing k within an epoch, so one order per
// dataset is kept, reshuffled when the epoch or the cycle changes.
int64_t IndexedTokens::window_of(size_t d, int64_t k) {
  Component& part = *parts_[d];
  const int64_t cycle = k / part.windows;
  if (part.order_epoch != epoch_ || part.order_cycle != cycle) {
    part.order = shuffled_windows(part.windows, seed_, epoch_, d, cycle);
    part.order_epoch = epoch_, part.order_cycle = cycle;
  }
  return part.order[static_cast<size_t>(k % part.windows)];
}

const HostBatch& IndexedTokens::next() {
  if (step_ == steps_per_epoch_) step_ = 0, ++epoch_;
  std::vector<int32_t>& tok = out_.ints[kLlamaTokens];
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t j = (step_ * world_ + rank_) * batch_ + b;
    const size_t d = part_of_.empty() ? 0 : part_of_[static_cast<size_t>(j)];
    const int64_t k = part_of_.empty() ? j : nth_of_[static_cast<size_t>(j)];
    const int64_t w = window_of(d, k);
    const data::IndexedDataset& ds = parts_[d]->ds;
    for (int64_t t = 0; t <= seq_len_; ++t) tok[static_cast<size_t>(b * (seq_len_ + 1) + t)] = static_cast<int32_t>(ds.token(w * seq_len_ + t));
  }
  ++step_;
  return out_;
}

}  // namespace dlperf
