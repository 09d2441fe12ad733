#include "train/gradient_exchange.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace dlperf {
namespace {
double seconds(CommClock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
}  // namespace

BucketedAllreduce::BucketedAllreduce(Communicator& comm, ParamStore& store, size_t bucket_bytes) : comm_(comm), store_(store) {
  DLPERF_ASSERT(bucket_bytes > 0, "bucket size is positive");
  const auto& entries = store.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const bool open_new = buckets_.empty() || (buckets_.back().end - buckets_.back().begin) * sizeof(float) >= bucket_bytes;
    if (open_new) buckets_.push_back({e.offset, e.offset, 0, 0});
    Bucket& b = buckets_.back();
    b.end = e.offset + e.elems;
    b.params += 1;
    bucket_of_entry_.push_back(buckets_.size() - 1);
  }
  // Alignment padding between entries belongs to the bucket before it: it is zero on every
  // rank, so reducing it changes nothing, and it keeps the buckets a partition of the buffer.
  for (size_t b = 0; b + 1 < buckets_.size(); ++b) buckets_[b].end = buckets_[b + 1].begin;
  if (!buckets_.empty()) buckets_.back().end = store.size();
  requests_.resize(buckets_.size());
  timings_.resize(buckets_.size());
}

void BucketedAllreduce::begin_step() {
  for (auto& b : buckets_) b.pending = b.params;
  started_ = 0;
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
  while (started_ < buckets_.size() && buckets_[started_].pending == 0) start(started_);
}

void BucketedAllreduce::start(size_t b) {
  Bucket& k = buckets_[b];
  requests_[b] = comm_.allreduce_sum_start(store_.grads().data() + k.begin, k.end - k.begin);
  ++started_;
}

void BucketedAllreduce::finish() {
  while (started_ < buckets_.size()) start(started_);  // layers without a report (none in practice)
  for (size_t b = 0; b < buckets_.size(); ++b) {
    comm_.wait(requests_[b]);
    timings_[b] = {buckets_[b].begin, buckets_[b].end, seconds(requests_[b].started_at()), seconds(*requests_[b].completed_at())};
  }
}

double BucketedAllreduce::comm_seconds() const {
  std::vector<std::pair<double, double>> iv;
  for (const auto& t : timings_) iv.emplace_back(t.started, t.completed);
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
