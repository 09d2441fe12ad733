// The parallel image loader: `threads` worker threads fill batch slots ahead of the training
// step, through a SampleSink (CPU decode, or nvJPEG staging). A bounded queue: at most
// `prefetch` batches are filled ahead, and the step may hold `outstanding` batches it has
// not released yet (the one being copied to the device, and the next). Slots, batch buffers,
// label arrays and every worker's decoder and scratch buffers are allocated once: no
// allocation per sample in steady state (libjpeg's own per-image pool aside).
//
// Order and determinism: batch k of this rank holds stream positions [k*B, (k+1)*B) of its
// ShardedOrder; image i's crop and flip come from a generator seeded by (seed, rank,
// position), so the batches are the same whatever the number of threads. A sample that
// cannot be read or decoded is warned about once (one line), counted, and replaced by
// another sample of the rank's share (deterministically chosen); more than
// max_bad_samples bad samples fail the run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/sample_sink.h"
#include "data/sampler.h"

namespace dlperf::data {

struct LoaderConfig {
  int threads = 1;
  int prefetch = 3;     // batches filled ahead of the step
  int outstanding = 2;  // batches the step may hold before release()
  uint64_t seed = 42;
  int rank = 0, world = 1;
  int64_t max_bad_samples = 0;  // more than this many bad samples fail the run
  std::vector<int> cores;       // CPU ids the threads may run on; empty: no pinning
  WarnFn warn;                  // one line per bad sample (may be empty)
};

struct LoadedBatch {
  const void* images = nullptr;       // format().batch_bytes(), host memory or device (on_device)
  bool on_device = false;
  std::span<const int32_t> labels;    // (N)
  std::span<const uint32_t> samples;  // (N) dataset index of each image
  int64_t index = 0;                  // the batch's number in this rank's stream
};

struct LoaderStats {
  int64_t images = 0;       // put into batches (decoded, or staged for the GPU)
  int64_t bytes_read = 0;   // compressed bytes read from storage
  int64_t bad_samples = 0;  // distinct samples skipped as unreadable or corrupt (indexing included)
  int64_t queue_depth = 0;  // batches ready when the step last asked for one
  double busy_seconds = 0;  // summed over the threads: reading and decoding
  double running_seconds = 0;  // since the threads started (they prefetch before the first step)
};

class ImageLoader {
 public:
  // The sink's slot count must be prefetch + outstanding (slots()).
  ImageLoader(const Dataset& dataset, std::unique_ptr<SampleSink> sink, const LoaderConfig& config);
  ~ImageLoader();  // stops and joins the threads
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  static int slots(const LoaderConfig& c) { return c.prefetch + c.outstanding; }

  // The next batch, waiting for it when it is not ready. Valid until release() gives it back.
  // Throws Error(fault) when the loader failed (too many bad samples).
  const LoadedBatch& next();
  // Gives back the oldest batch next() returned: its buffers may be refilled.
  void release();
  LoaderStats stats() const;
  const ImageBatchFormat& format() const { return sink_->format(); }

 private:
  enum class SlotState : uint8_t { free, filling, staged, ready, out };
  struct Slot {
    SlotState state = SlotState::free;
    int64_t batch = -1;
    int claimed = 0, done = 0;
    std::vector<int32_t> labels;
    std::vector<uint32_t> samples;
    std::vector<uint64_t> positions;
    LoadedBatch view;
  };
  struct Task {
    int slot = -1, index = 0;
  };

  void worker_main(int id);
  void batch_main();  // the sink's batch step, batches in order
  bool claim(Task& t, std::unique_lock<std::mutex>& lock);
  void process(Task t, SinkWorker& w, std::vector<uint8_t>& buf, std::string& path);
  // Under the lock: records sample `id` as bad; false when the run must stop.
  bool mark_bad(uint32_t id, const std::string& why);
  void fail(const std::string& why);  // under the lock

  const Dataset& dataset_;
  std::unique_ptr<SampleSink> sink_;
  LoaderConfig cfg_;
  int64_t batch_size_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_, staged_cv_;
  ShardedOrder order_;
  std::vector<Slot> slots_;
  std::vector<uint8_t> bad_;  // per dataset sample: known bad
  int64_t next_open_ = 0;     // the next batch to open
  int fill_slot_ = -1;        // the slot being claimed from, -1 when none
  int64_t next_out_ = 0;      // the next batch next() hands out
  int64_t next_staged_ = 0;   // the next batch the batch step finishes
  std::deque<int> held_;      // slots handed out, oldest first
  LoaderStats stats_;
  double started_ = 0;  // when the threads started
  std::string error_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace dlperf::data
