// Data-parallel gradient averaging, overlapped with backward (as PyTorch DDP and Horovod do).
//
// Buckets are contiguous slices of the flat gradient buffer, cut at parameter boundaries in
// flat order (= reverse layer order) once a slice reaches bucket_bytes (default 25 MiB;
// train/parallel/sharding.h, shared with the sharded optimizer's exchange, parallel/zero.h).
// Backward reports each layer whose gradients are final; when the last parameter of a
// bucket is final, that bucket's in-place sum-allreduce starts at once and runs while
// backward goes on. finish() orders the compute queue after the rest (a device communicator
// without a host wait; MPI waits); complete(step), when the trainer retires the step a step
// later, checks on the host that every bucket finished, bounded by the communicator's timeout.
// The optimizer divides by world size (the step gate's grad_scale).
//
// Requests are kept per step parity: step n+1's buckets start before step n is retired.
#pragma once

#include <array>
#include <vector>

#include "comm/communicator.h"
#include "train/param_store.h"
#include "train/trainer.h"

namespace dlperf {

class BucketedAllreduce final : public GradientExchange {
 public:
  BucketedAllreduce(Communicator& comm, ParamStore& store, size_t bucket_bytes);

  int world_size() const override { return comm_.size(); }
  size_t bucket_count() const override { return buckets_.size(); }
  void begin_step(int64_t step) override;
  void on_ready(const Layer& layer) override;
  void finish() override;
  void abort_in_flight() override { comm_.abort_in_flight(); }
  void complete(int64_t step) override;
  void poll() override;
  std::vector<BucketTime> timings(int64_t step, StepRecorder& recorder) override;
  int64_t bytes_moved(int64_t step) override;
  void set_actor(Actor actor) override { actor_ = std::move(actor); }

  // Union of the buckets' in-flight intervals (the time some allreduce was running).
  static double in_flight_seconds(const std::vector<BucketTime>& t);

 private:
  struct Bucket {
    size_t begin, end;
    int params = 0;   // parameters in the bucket
    int pending = 0;  // not yet final this step
  };
  std::vector<CommRequest>& requests(int64_t step) { return requests_[static_cast<size_t>(step & 1)]; }
  void act(std::function<void()> work);
  void launch(size_t b);       // hands bucket b's start to act()
  void start_bucket(size_t b);  // queues its allreduce now, for step_

  Communicator& comm_;
  ParamStore& store_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_entry_;  // per store entry
  std::array<std::vector<CommRequest>, 2> requests_;  // by step parity
  int64_t step_ = -1;
  int64_t completed_step_ = -1;
  size_t launched_ = 0;  // buckets of this step handed to act(), in order
  Actor actor_;
};

}  // namespace dlperf
