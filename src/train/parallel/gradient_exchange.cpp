#include "train/parallel/gradient_exchange.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "train/parallel/sharding.h"

namespace dlperf {
namespace {
double seconds(CommClock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
}  // namespace

BucketedAllreduce::BucketedAllreduce(Communicator& comm, ParamStore& store, size_t bucket_bytes) : comm_(comm), store_(store) {
  BucketCut cut = cut_buckets(store, bucket_bytes);  // train/parallel/sharding.h
  for (const auto& b : cut.buckets) buckets_.push_back({b.begin, b.end, b.params, 0});
  bucket_of_entry_ = std::move(cut.bucket_of_entry);
  for (auto& r : requests_) r.resize(buckets_.size());
}

void BucketedAllreduce::begin_step(int64_t step) {
  DLPERF_ASSERT(step >= step_, "steps begin in order");
  DLPERF_ASSERT(step == step_ || completed_step_ >= step - 2, "a step's buckets complete before its parity is reused");
  for (auto& b : buckets_) b.pending = b.params;
  step_ = step;
  launched_ = 0;
}

void BucketedAllreduce::act(std::function<void()> work) {
  if (actor_) actor_(std::move(work));
  else work();
}

void BucketedAllreduce::launch(size_t b) {
  act([this, b] { start_bucket(b); });
}

void BucketedAllreduce::on_ready(const Layer& layer) {
  const auto& entries = store_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].layer != &layer) continue;
    Bucket& b = buckets_[bucket_of_entry_[i]];
    DLPERF_ASSERT(b.pending > 0, "a parameter reported final twice in one step");
    --b.pending;
  }
  // Every rank must start the same buckets in the same order: start each bucket that is
  // final once all buckets before it have started (backward's order is the same everywhere).
  while (launched_ < buckets_.size() && buckets_[launched_].pending == 0) launch(launched_++);
}

void BucketedAllreduce::start_bucket(size_t b) {
  const Bucket& k = buckets_[b];
  requests(step_)[b] = comm_.allreduce_sum_start(store_.grads().data() + k.begin, k.end - k.begin);
}

void BucketedAllreduce::finish() {
  while (launched_ < buckets_.size()) launch(launched_++);  // layers without a report (none in practice)
  act([this] {
    for (auto& r : requests(step_)) comm_.join(r);
  });
}

void BucketedAllreduce::complete(int64_t step) {
  DLPERF_ASSERT(step > completed_step_ && step <= step_, "steps complete once, in order");
  for (auto& r : requests(step)) comm_.wait(r);
  completed_step_ = step;
}

void BucketedAllreduce::poll() {
  // The oldest step not yet completed holds the requests a dead peer would stall.
  const int64_t step = completed_step_ + 1;
  if (step > step_) return;
  for (auto& r : requests(step))
    if (r.valid() && !comm_.test(r)) return;
}

std::vector<BucketTime> BucketedAllreduce::timings(int64_t step, StepRecorder& recorder) {
  std::vector<BucketTime> out;
  for (const auto& r : requests(step)) {
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

int64_t BucketedAllreduce::bytes_moved(int64_t step) {
  std::vector<CommRequest> done;
  for (const auto& r : requests(step))
    if (r.valid()) done.push_back(r);
  return ring_bytes(done, comm_.size());
}

double BucketedAllreduce::in_flight_seconds(const std::vector<BucketTime>& t) {
  std::vector<std::pair<double, double>> iv;
  for (const auto& b : t) iv.emplace_back(b.start, b.end);
  std::sort(iv.begin(), iv.end());
  double total = 0, cur_begin = 0, cur_end = -1;
  for (const auto& [b, e] : iv) {
    if (b > cur_end) {
      if (cur_end > cur_begin) total += cur_end - cur_begin;
      cur_begin = b;
      cur_end = e;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (cur_end > cur_begin) total += cur_end - cur_begin;
  return total;
}

}  // namespace dlperf
