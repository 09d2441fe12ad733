// Data-parallel gradient averaging, overlapped with backward (as PyTorch DDP and Horovod do).
//
// Buckets are contiguous slices of the flat gradient buffer, cut at parameter boundaries in
// flat order (= reverse layer order) once a slice reaches bucket_bytes (default 25 MiB).
// Backward reports each layer whose gradients are final; when the last parameter of a
// bucket is final, that bucket's in-place sum-allreduce starts at once and runs while
// backward goes on. finish() waits for the rest; the optimizer then divides by world size.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "train/param_store.h"
#include "train/trainer.h"

namespace dlperf {

struct BucketTiming {
  size_t begin = 0, end = 0;  // [begin, end) in the flat buffers
  double started = 0;         // steady seconds
  double completed = 0;
};

class BucketedAllreduce final : public GradientExchange {
 public:
  BucketedAllreduce(Communicator& comm, ParamStore& store, size_t bucket_bytes);

  int world_size() const override { return comm_.size(); }
  void begin_step() override;
  void on_ready(const Layer& layer) override;
  void finish() override;
  double comm_seconds() const override;  // union of the buckets' in-flight intervals

  size_t bucket_count() const { return buckets_.size(); }
  const std::vector<BucketTiming>& last_step() const { return timings_; }

 private:
  struct Bucket {
    size_t begin, end;
    int params = 0;   // parameters in the bucket
    int pending = 0;  // not yet final this step
  };
  void start(size_t b);

  Communicator& comm_;
  ParamStore& store_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_entry_;  // per store entry
  std::vector<CommRequest> requests_;
  std::vector<BucketTiming> timings_;
  size_t started_ = 0;
};

}  // namespace dlperf
