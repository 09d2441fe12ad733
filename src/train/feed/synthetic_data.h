// Synthetic image batches, as DLPerf's synthetic-data runs use: generated once before the
// timed loop (a few distinct batches, cycled), so the data phase measures only the copy into
// the model. The task is learnable: class c adds a fixed per-channel offset mu_c ~ N(0, 1)
// to N(0, 1) noise, so a network can learn to classify it and the loss must fall.
#pragma once

#include <cstdint>
#include <vector>

#include "train/feed/data_source.h"

namespace dlperf {

class SyntheticImages final : public DataSource {
 public:
  SyntheticImages(int64_t batch, int64_t image_size, int64_t classes, uint64_t seed, int pool = 4);
  const HostBatch& next() override;  // the next batch of the cycle

 private:
  std::vector<HostBatch> pool_;
  size_t cursor_ = 0;
};

}  // namespace dlperf
