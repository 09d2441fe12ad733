#include "train/parallel/zero.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace dlperf {
namespace {
double seconds(CommClock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
}  // namespace

std::string zero_banner(const ShardLayout& shard) {
  const auto [lo, hi] = std::minmax_element(shard.rank_elems.begin(), shard.rank_elems.end());
  return "\nzero: stage 1, optimizer state sharded over " + std::to_string(shard.world) + " ranks: " + std::to_string(*lo) + " to " +
         std::to_string(*hi) + " parameters per rank (" + std::to_string(shard.counts.size()) +
         " buckets reduce-scattered, weights all-gathered)";
}

ZeroExchange::ZeroExchange(Communicator& comm, ParamStore& store, const BucketCut& cut, const ShardLayout& shard, Buffer& shard_grads,
                           Backend& be, bool global_norm)
    : comm_(comm), store_(store), shard_(shard), shard_grads_(shard_grads), be_(be), bucket_of_entry_(cut.bucket_of_entry) {
  if (global_norm) norm_ = comm.make_byte_buffer(sizeof(double));
  DLPERF_ASSERT(shard.world == comm.size() && shard.rank == comm.rank(), "the shard layout is this communicator's");
  DLPERF_ASSERT(shard.counts.size() == cut.buckets.size(), "the shard layout is over these buckets");
  DLPERF_ASSERT(shard_grads.size() >= shard.local_size, "the shard's gradient buffer holds the shard");
  size_t piece = 0;
  for (size_t b = 0; b < cut.buckets.size(); ++b) {
    buckets_.push_back({cut.buckets[b], 0});
    const bool mine = shard.counts[b][static_cast<size_t>(shard.rank)] > 0;
    piece_of_bucket_.push_back(mine ? piece++ : SIZE_MAX);
  }
  for (auto& r : requests_) {
    r.scatter.resize(buckets_.size());
    r.gather.resize(buckets_.size());
  }
}

void ZeroExchange::begin_step(int64_t step) {
  DLPERF_ASSERT(step >= step_, "steps begin in order");
  DLPERF_ASSERT(step == step_ || completed_step_ >= step - 2, "a step's buckets complete before its parity is reused");
  for (auto& b : buckets_) b.pending = b.range.params;
  step_ = step;
  launched_ = 0;
}

void ZeroExchange::act(std::function<void()> work) {
  if (actor_) actor_(std::move(work));
  else work();
}

void ZeroExchange::on_ready(const Layer& layer) {
  const auto& entries = store_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].layer != &layer) continue;
    Bucket& b = buckets_[bucket_of_entry_[i]];
    DLPERF_ASSERT(b.pending > 0, "a parameter reported final twice in one step");
    --b.pending;
  }
  launch_ready();
}

void ZeroExchange::launch_ready() {
  // Every rank starts the same buckets in the same order (see BucketedAllreduce::on_ready).
  while (launched_ < buckets_.size() && buckets_[launched_].pending == 0) {
    const size_t b = launched_++;
    act([this, b] {
      const GradBucket& r = buckets_[b].range;
      const size_t p = piece_of_bucket_[b];
      float* recv = shard_grads_.data() + (p == SIZE_MAX ? 0 : shard_.pieces[p].local);
      requests(step_).scatter[b] = comm_.reduce_scatter_start(store_.grads().data() + r.begin, recv, shard_.counts[b]);
    });
  }
}

void ZeroExchange::finish() {
  for (size_t b = launched_; b < buckets_.size(); ++b) buckets_[b].pending = 0;  // layers without a report (none in practice)
  launch_ready();
  act([this] {
    for (auto& r : requests(step_).scatter) comm_.join(r);
    if (!norm_) return;
    // After the joins the shard holds its reduced gradients: its sum of squares, then the sum
    // over ranks, which the step gate reads in place of summing the (unreduced) flat buffer.
    const double mine = be_.sum_squares({shard_grads_.data(), shard_.local_size});
    norm_->upload_bytes(std::as_bytes(std::span<const double>(&mine, 1)));
    Requests& q = requests(step_);
    q.norm = comm_.allreduce_start(norm_->bytes(), norm_->bytes(), 1, DataType::float64);
    comm_.join(q.norm);
  });
}

void ZeroExchange::gather_params() {
  act([this] {
    auto& g = requests(step_).gather;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      float* bucket = store_.values().data() + buckets_[b].range.begin;
      size_t mine = 0;  // this rank's block's offset in the bucket: in place
      for (int r = 0; r < shard_.rank; ++r) mine += shard_.counts[b][static_cast<size_t>(r)];
      g[b] = comm_.all_gather_start(bucket + mine, bucket, shard_.counts[b]);
    }
    for (auto& r : g) comm_.join(r);
  });
}

void ZeroExchange::complete(int64_t step) {
  DLPERF_ASSERT(step > completed_step_ && step <= step_, "steps complete once, in order");
  for (auto& r : requests(step).scatter) comm_.wait(r);
  for (auto& r : requests(step).gather) comm_.wait(r);
  if (requests(step).norm.valid()) comm_.wait(requests(step).norm);
  completed_step_ = step;
}

void ZeroExchange::poll() {
  const int64_t step = completed_step_ + 1;
  if (step > step_) return;
  for (auto* list : {&requests(step).scatter, &requests(step).gather})
    for (auto& r : *list)
      if (r.valid() && !comm_.test(r)) return;
}

int64_t ZeroExchange::bytes_moved(int64_t step) {
  std::vector<CommRequest> done;
  for (auto* list : {&requests(step).scatter, &requests(step).gather})
    for (const auto& r : *list)
      if (r.valid()) done.push_back(r);
  return ring_bytes(done, comm_.size());
}

std::vector<BucketTime> ZeroExchange::timings(int64_t step, StepRecorder& recorder) {
  std::vector<BucketTime> out;
  for (auto* list : {&requests(step).scatter, &requests(step).gather})
    for (const auto& r : *list) {
      if (!r.valid()) continue;
      const auto [begin, end] = r.device_events();
      BucketTime t{seconds(r.started_at()), seconds(*r.completed_at())};
      if (begin && end) {
        const double b = recorder.event_time(step, begin), e = recorder.event_time(step, end);
        if (std::isfinite(b) && std::isfinite(e)) t = {b, e};
      }
      out.push_back(t);
    }
  return out;
}

}  // namespace dlperf
