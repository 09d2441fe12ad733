#include "train/synthetic_data.h"

#include "models/init.h"

namespace dlperf {

SyntheticImages::SyntheticImages(int64_t batch, int64_t image_size, int64_t classes, uint64_t seed, int pool) {
  Rng rng(seed ^ 0xD1B54A32D192ED03ull);
  std::vector<float> mu(static_cast<size_t>(classes * 3));
  for (auto& v : mu) v = rng.normal(0.0f, 1.0f);
  const int64_t plane = image_size * image_size;
  for (int p = 0; p < pool; ++p) {
    HostBatch b;
    auto& img = b.floats["images"];
    auto& lab = b.ints["labels"];
    img.resize(static_cast<size_t>(batch * 3 * plane));
    lab.resize(static_cast<size_t>(batch));
    for (int64_t n = 0; n < batch; ++n) {
      const auto label = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(classes));
      lab[static_cast<size_t>(n)] = label;
      for (int64_t c = 0; c < 3; ++c) {
        float* dst = img.data() + (n * 3 + c) * plane;
        const float offset = mu[static_cast<size_t>(label * 3 + c)];
        for (int64_t i = 0; i < plane; ++i) dst[i] = offset + rng.normal(0.0f, 1.0f);
      }
    }
    pool_.push_back(std::move(b));
  }
}

const HostBatch& SyntheticImages::next() {
  const HostBatch& b = pool_[cursor_];
  cursor_ = (cursor_ + 1) % pool_.size();
  return b;
}

}  // namespace dlperf
