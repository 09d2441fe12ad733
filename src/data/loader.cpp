#include "data/loader.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/error.h"
#include "data/jpeg_decoder.h"

namespace dlperf::data {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Loader threads run under SCHED_BATCH: the same CPU share as normal threads, but a loader
// thread woken by release() does not preempt the training thread on its core (CFS skips
// wakeup preemption for batch threads). Where loader and compute share cores this keeps a
// batch's decoding out of the step's data wait. Failing to set it is harmless.
void name_and_pin(const char* name, const std::vector<int>& cores) {
  pthread_setname_np(pthread_self(), name);
  sched_param param{};
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
  if (cores.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: a refused mask leaves the thread unpinned
}

constexpr int kMaxReplacementTries = 64;

}  // namespace

ImageLoader::ImageLoader(const Dataset& dataset, std::unique_ptr<SampleSink> sink, const LoaderConfig& config)
    : dataset_(dataset),
      sink_(std::move(sink)),
      cfg_(config),
      batch_size_(sink_->format().batch),
      order_(dataset.size(), config.world, config.rank, config.seed),
      slots_(static_cast<size_t>(slots(config))),
      bad_(dataset.size(), 0) {
  DLPERF_ASSERT(cfg_.threads >= 1 && cfg_.prefetch >= 1 && cfg_.outstanding >= 1, "loader threads, prefetch and outstanding >= 1");
  for (auto& s : slots_) {
    s.labels.resize(static_cast<size_t>(batch_size_));
    s.samples.resize(static_cast<size_t>(batch_size_));
    s.positions.resize(static_cast<size_t>(batch_size_));
  }
  stats_.bad_samples = dataset.skipped();
  if (stats_.bad_samples > cfg_.max_bad_samples)
    throw Error(ErrorKind::usage, "--data " + dataset.root() + ": " + std::to_string(stats_.bad_samples) +
                                      " unlabelled samples, more than --max-bad-samples allows (" + std::to_string(cfg_.max_bad_samples) + ")");
  started_ = now();
  for (int t = 0; t < cfg_.threads; ++t) threads_.emplace_back([this, t] { worker_main(t); });
  if (sink_->has_batch_step()) threads_.emplace_back([this] { batch_main(); });
}

ImageLoader::~ImageLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  staged_cv_.notify_all();
  ready_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ImageLoader::fail(const std::string& why) {
  if (error_.empty()) error_ = why;
  work_cv_.notify_all();
  staged_cv_.notify_all();
  ready_cv_.notify_all();
}

bool ImageLoader::mark_bad(uint32_t id, const std::string& why) {
  if (bad_[id]) return true;
  bad_[id] = 1;
  ++stats_.bad_samples;
  if (cfg_.warn) cfg_.warn("skipping bad sample " + dataset_.describe(id) + ": " + why);
  if (stats_.bad_samples > cfg_.max_bad_samples) {
    fail(std::to_string(stats_.bad_samples) + " bad samples, more than --max-bad-samples allows (" + std::to_string(cfg_.max_bad_samples) +
         "); the last: " + dataset_.describe(id) + ": " + why);
    return false;
  }
  return true;
}

bool ImageLoader::claim(Task& t, std::unique_lock<std::mutex>& lock) {
  const auto n = static_cast<int64_t>(slots_.size());
  while (true) {
    if (stop_ || !error_.empty()) return false;
    if (fill_slot_ >= 0) {
      Slot& s = slots_[static_cast<size_t>(fill_slot_)];
      t = {fill_slot_, s.claimed++};
      if (s.claimed == batch_size_) fill_slot_ = -1;
      return true;
    }
    const int slot = static_cast<int>(next_open_ % n);
    Slot& s = slots_[static_cast<size_t>(slot)];
    // At most `prefetch` batches ahead of the one the step will ask for next; the other slots
    // are for batches the step still holds.
    if (s.state == SlotState::free && next_open_ < next_out_ + cfg_.prefetch) {  // open the next batch: its samples are fixed now
      s.state = SlotState::filling;
      s.batch = next_open_;
      s.claimed = s.done = 0;
      for (int64_t i = 0; i < batch_size_; ++i) {
        const uint64_t pos = static_cast<uint64_t>(next_open_ * batch_size_ + i);
        uint32_t id = order_.at(pos);
        for (int a = 0; bad_[id] && a < kMaxReplacementTries; ++a) id = order_.replacement(pos, a);  // known bad: silently
        s.positions[static_cast<size_t>(i)] = pos;
        s.samples[static_cast<size_t>(i)] = id;
        s.labels[static_cast<size_t>(i)] = dataset_.sample(id).label;
      }
      ++next_open_;
      fill_slot_ = slot;
      continue;
    }
    work_cv_.wait(lock);
  }
}

void ImageLoader::process(Task t, SinkWorker& w, std::vector<uint8_t>& buf, std::string& path) {
  Slot& s = slots_[static_cast<size_t>(t.slot)];
  const auto i = static_cast<size_t>(t.index);
  const uint64_t pos = s.positions[i];
  uint32_t id = s.samples[i];
  for (int attempt = 0;; ++attempt) {
    const double t0 = now();
    std::string why;
    size_t bytes = 0;
    try {
      bytes = dataset_.read(id, buf, path);
      SplitMix rng(mix64(cfg_.seed ^ mix64((static_cast<uint64_t>(cfg_.rank) << 40) ^ pos)) + static_cast<uint64_t>(attempt));
      w.put(t.slot, t.index, {buf.data(), bytes}, rng);
    } catch (const ReadError& e) {
      why = e.what();
    } catch (const DecodeError& e) {
      why = e.what();
    }
    const double busy = now() - t0;
    std::lock_guard<std::mutex> lock(mu_);
    stats_.busy_seconds += busy;
    stats_.bytes_read += static_cast<int64_t>(bytes);
    if (why.empty()) {
      ++stats_.images;
      if (++s.done == batch_size_) {
        s.state = sink_->has_batch_step() ? SlotState::staged : SlotState::ready;
        (sink_->has_batch_step() ? staged_cv_ : ready_cv_).notify_all();
      }
      return;
    }
    if (!mark_bad(id, why)) return;
    int a = 0;
    do id = order_.replacement(pos, attempt * kMaxReplacementTries + a);
    while (bad_[id] && ++a < kMaxReplacementTries);
    if (bad_[id]) {
      fail("no readable sample left to replace " + dataset_.describe(s.samples[i]) + " with");
      return;
    }
    s.samples[i] = id;
    s.labels[i] = dataset_.sample(id).label;
  }
}

void ImageLoader::worker_main(int /*id*/) {
  name_and_pin("dlperf-loader", cfg_.cores);
  try {
    auto w = sink_->make_worker();
    // Scratch sized up front (the largest shard member, at least 2 MiB), so that a thread's
    // first meeting with a large file does not allocate in steady state.
    std::vector<uint8_t> buf;
    buf.reserve(std::max<size_t>(2u << 20, dataset_.max_sample_bytes()));
    std::string path;
    path.reserve(4096);
    while (true) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!claim(t, lock)) return;
      }
      process(t, *w, buf, path);
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    fail(std::string("data loader thread failed: ") + e.what());
  }
}

void ImageLoader::batch_main() {
  name_and_pin("dlperf-batch", cfg_.cores);
  const auto n = static_cast<int64_t>(slots_.size());
  try {
    while (true) {
      int slot = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        staged_cv_.wait(lock, [&] {
          const Slot& s = slots_[static_cast<size_t>(next_staged_ % n)];
          return stop_ || !error_.empty() || (s.state == SlotState::staged && s.batch == next_staged_);
        });
        if (stop_ || !error_.empty()) return;
        slot = static_cast<int>(next_staged_ % n);
      }
      const std::span<const int> failed = sink_->finish(slot);
      std::lock_guard<std::mutex> lock(mu_);
      Slot& s = slots_[static_cast<size_t>(slot)];
      for (int i : failed)
        if (!mark_bad(s.samples[static_cast<size_t>(i)], "could not be decoded on the GPU (a mean image stands in for it)")) return;
      s.state = SlotState::ready;
      ++next_staged_;
      ready_cv_.notify_all();
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    fail(std::string("data loader batch thread failed: ") + e.what());
  }
}

const LoadedBatch& ImageLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  DLPERF_ASSERT(static_cast<int>(held_.size()) < cfg_.outstanding, "release() batches before asking for more than `outstanding`");
  stats_.queue_depth = std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == SlotState::ready; });
  const int slot = static_cast<int>(next_out_ % static_cast<int64_t>(slots_.size()));
  Slot& s = slots_[static_cast<size_t>(slot)];
  ready_cv_.wait(lock, [&] { return !error_.empty() || (s.state == SlotState::ready && s.batch == next_out_); });
  if (!error_.empty()) throw Error(ErrorKind::fault, "--data " + dataset_.root() + ": " + error_);
  s.state = SlotState::out;
  held_.push_back(slot);
  ++next_out_;
  s.view = LoadedBatch{sink_->images(slot), sink_->on_device(), s.labels, s.samples, s.batch};
  lock.unlock();
  work_cv_.notify_all();  // one more batch may be opened
  return s.view;
}

void ImageLoader::release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    DLPERF_ASSERT(!held_.empty(), "release() without a batch from next()");
    slots_[static_cast<size_t>(held_.front())].state = SlotState::free;
    held_.pop_front();
  }
  work_cv_.notify_all();
}

LoaderStats ImageLoader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  LoaderStats s = stats_;
  s.running_seconds = now() - started_;
  return s;
}

}  // namespace dlperf::data
