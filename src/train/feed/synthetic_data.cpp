#include "train/feed/synthetic_data.h"

#include "models/init.h"

namespace dlperf {

SyntheticImages::SyntheticImages(int64_t batch, int64_t image_size, int64_t classes, uint64_t seed, int pool) {
  Rng rng(seed ^ 0xD1B54A32D192ED03ull);
  std::vector<float> mu(static_cast<size_t>(classes * 3));
  for (auto& v : mu) v = rng.normal(0.0f, 1.0f);
  const int64_t plane = image_size * image_size;
  // Sample by sample, one generator in sequence: a label draw, then 3 x plane normal draws (two
  // draws each). Each sample's draws start at a known place in that sequence (Rng::skip), so the
  // samples are drawn in parallel with the serial values: the pool of batch 256 at 224 x 224 is
  // 154 million normal draws, some 10 s of a run's start on one core.
  const uint64_t per_sample = 1 + 2 * static_cast<uint64_t>(3 * plane);
  for (int p = 0; p < pool; ++p) {
    HostBatch b;
    auto& img = b.floats["images"];
    auto& lab = b.ints["labels"];
    img.resize(static_cast<size_t>(batch * 3 * plane));
    lab.resize(static_cast<size_t>(batch));
    const Rng start = rng;
#pragma omp parallel for schedule(static) if (batch > 1)
    for (int64_t n = 0; n < batch; ++n) {
      Rng r = start;
      r.skip(static_cast<uint64_t>(n) * per_sample);
      const auto label = static_cast<int32_t>(r.next() % static_cast<uint64_t>(classes));
      lab[static_cast<size_t>(n)] = label;
      for (int64_t c = 0; c < 3; ++c) {
        float* dst = img.data() + (n * 3 + c) * plane;
        const float offset = mu[static_cast<size_t>(label * 3 + c)];
        for (int64_t i = 0; i < plane; ++i) dst[i] = offset + r.normal(0.0f, 1.0f);
      }
    }
    rng.skip(static_cast<uint64_t>(batch) * per_sample);
    pool_.push_back(std::move(b));
  }
}

const HostBatch& SyntheticImages::next() {
  const HostBatch& b = pool_[cursor_];
  cursor_ = (cursor_ + 1) % pool_.size();
  return b;
}

}  // namespace dlperf
