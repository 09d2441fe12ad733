#include "train/parallel/zero.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace dlperf {
namespace {
double seconds(CommClock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
}  // namespace

std::string zero_banner(const ShardLayout& shard, int stage, bool master, bool gather_in_forward, const std::string& gather_type) {
  const auto [lo, hi] = std::minmax_element(shard.rank_elems.begin(), shard.rank_elems.end());
  const std::string what = stage == 2 ? (master ? "optimizer state, gradients and f32 master weights" : "optimizer state and gradients")
                                      : (master ? "optimizer state and f32 master weights" : "optimizer state");
  return "\nzero: stage " + std::to_string(stage) + ", " + what + " sharded over " + std::to_string(shard.world) + " ranks: " +
         std::to_string(*lo) + " to " + std::to_string(*hi) + " parameters per rank (" + std::to_string(shard.counts.size()) +
         " buckets reduce-scattered, weights all-gathered " + (gather_type.empty() ? "" : "in " + gather_type + " ") +
         (gather_in_forward ? "into the next forward)" : "at the step's end)");
}

ZeroExchange::ZeroExchange(Communicator& comm, ParamStore& store, const BucketCut& cut, const ShardLayout& shard, Buffer& shard_grads,
                           Backend& be, bool global_norm, int stage, int64_t micro_batches, bool shard_master,
                           bool gather_in_forward)
    : comm_(comm),
      store_(store),
      shard_(shard),
      shard_grads_(shard_grads),
      be_(be),
      bucket_of_entry_(cut.bucket_of_entry),
      stage_(stage),
      micro_batches_(stage == 2 ? micro_batches : 1),
      gather_in_forward_(gather_in_forward) {
  DLPERF_ASSERT(stage == 1 || stage == 2, "ZeRO stage 1 or 2");
  DLPERF_ASSERT(micro_batches >= 1, "micro-batches per step");
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
    r.scatter.resize(buckets_.size() * static_cast<size_t>(micro_batches_));
    r.gather.resize(buckets_.size());
  }
  if (stage_ == 2) {
    // The store's gradients start decommitted (never counted in full, not even before the first
    // step): every bucket starts freed.
    DLPERF_ASSERT(store.gradients_decommitted(), "ZeRO-2's parameter store starts with its gradients decommitted");
    written_.assign(store.entries().size(), false);
  }
  plan_gathers(cut);
  // The values are final (after the initial broadcast): the compute copies from them (from now
  // on this exchange rebuilds them as the all-gathers arrive), then the rest of the master goes,
  // before this exchange's own buffers are made: set-up never holds them beside the whole master
  // (the memory plan's whole-master moment).
  be_.refresh_compute_weights(layers_);
  if (shard_master) plan_master_release();
  if (stage_ == 2 && micro_batches_ > 1) micro_recv_ = be.buffer(std::max<size_t>(1, shard.local_size));
  if (be.dtype() != DType::f32) plan_packing();
  // Stage 1 keeps the full gradients. With sharded master weights they started decommitted (not
  // held before the master was released); they are made whole now, before the first backward
  // writes them (a GPU's mapped chunks must be mapped before any work touches them).
  if (stage_ == 1 && store.gradients_decommitted()) store.grads().commit(0, store.size());
}

void ZeroExchange::plan_gathers(const BucketCut& cut) {
  const auto& entries = store_.entries();
  const size_t n = buckets_.size();
  // Each layer's first and last bucket (its parameters are neighbours in flat order).
  std::vector<std::pair<size_t, size_t>> span;
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t b = cut.bucket_of_entry[i];
    const auto it = std::find(layers_.begin(), layers_.end(), entries[i].layer);
    if (it == layers_.end()) {
      layers_.push_back(entries[i].layer);
      span.emplace_back(b, b);
    } else {
      auto& [first, last] = span[static_cast<size_t>(it - layers_.begin())];
      first = std::min(first, b);
      last = std::max(last, b);
    }
  }
  // In forward order (positions; bucket_at) a layer is complete once its first bucket is
  // waited for, the last of its buckets to arrive; a bucket may go once every layer touching it
  // is complete.
  refresh_at_.assign(n, {});
  release_at_.assign(n, {});
  std::vector<size_t> done_at(n, 0);
  for (size_t pos = 0; pos < n; ++pos) done_at[bucket_at(pos)] = pos;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const size_t pos = n - 1 - span[l].first;
    refresh_at_[pos].push_back(layers_[l]);
    read_at_.push_back({layers_[l], {pos, l}});
    for (size_t b = span[l].first; b <= span[l].second; ++b) done_at[b] = std::max(done_at[b], pos);
  }
  for (size_t b = 0; b < n; ++b) release_at_[done_at[b]].push_back(b);
  std::sort(read_at_.begin(), read_at_.end(), [](const auto& x, const auto& y) { return std::less<>()(x.first, y.first); });
  read_.assign(layers_.size(), 0);
}

void ZeroExchange::plan_packing() {
  packed_ = true;
  // The weights' ranges in flat order (narrow); the rest of a block goes as f32.
  std::vector<ValueRange> narrow;
  for (const auto& e : store_.entries())
    if (e.layer->params()[e.index].role == ParamRole::weight) narrow.push_back({e.offset, e.elems});
  std::sort(narrow.begin(), narrow.end(), [](const ValueRange& x, const ValueRange& y) { return x.begin < y.begin; });
  std::array<size_t, 2> most{};  // the words of each staging buffer: the largest packed bucket at each position parity
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::vector<Backend::PackRun> mine, others;
    Packing pk;
    size_t word = 0, at = buckets_[b].range.begin;
    for (int r = 0; r < shard_.world; ++r) {
      const size_t first_word = word, end = at + shard_.counts[b][static_cast<size_t>(r)];
      auto& runs = r == shard_.rank ? mine : others;
      const auto run = [&](size_t begin, size_t stop, bool is_narrow) {
        if (stop <= begin) return;
        runs.push_back({begin, stop - begin, word, is_narrow});
        word += is_narrow ? (stop - begin + 1) / 2 : stop - begin;
      };
      auto it = std::upper_bound(narrow.begin(), narrow.end(), at, [](size_t v, const ValueRange& x) { return v < x.begin + x.count; });
      for (size_t cursor = at; cursor < end;) {
        if (it == narrow.end() || it->begin >= end) {
          run(cursor, end, false);
          break;
        }
        run(cursor, std::max(cursor, it->begin), false);
        const size_t stop = std::min(end, it->begin + it->count);
        run(std::max(cursor, it->begin), stop, true);
        cursor = stop;
        ++it;
      }
      if (r == shard_.rank) pk.my_word = first_word;
      pk.words.push_back(word - first_word);
      at = end;
    }
    // A bucket of mostly kept values (an embedding table) gains little from packing and would
    // need a staging buffer of its size: it is all-gathered in place in f32, as in fp32 runs.
    if (4 * word <= 3 * (buckets_[b].range.end - buckets_[b].range.begin)) {
      const size_t slot = (buckets_.size() - 1 - b) % 2;  // its position's parity (bucket_at)
      most[slot] = std::max(most[slot], word);
      pk.mine = be_.pack_table(std::move(mine));
      pk.others = be_.pack_table(std::move(others));
    }
    packing_.push_back(std::move(pk));
  }
  for (size_t words : most) staging_.push_back(be_.buffer(std::max<size_t>(words, 1)));
}

void ZeroExchange::plan_master_release() {
  shard_master_ = true;
  const auto& entries = store_.entries();
  const size_t n = buckets_.size();
  releasable_.assign(n, {});
  // The keep set: this rank's block of each bucket, and every parameter read in f32 in the step.
  std::vector<std::vector<ValueRange>> keep(n);
  for (size_t b = 0; b < n; ++b) keep[b].push_back({block_begin(b), shard_.counts[b][static_cast<size_t>(shard_.rank)]});
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].layer->params()[entries[i].index].role != ParamRole::weight) keep[bucket_of_entry_[i]].push_back({entries[i].offset, entries[i].elems});
  for (size_t b = 0; b < n; ++b) {
    auto& k = keep[b];
    std::sort(k.begin(), k.end(), [](const ValueRange& x, const ValueRange& y) { return x.begin < y.begin; });
    size_t at = buckets_[b].range.begin;
    for (const ValueRange& r : k) {
      if (r.begin > at) releasable_[b].push_back({at, r.begin - at});
      at = std::max(at, r.begin + r.count);
    }
    if (buckets_[b].range.end > at) releasable_[b].push_back({at, buckets_[b].range.end - at});
  }
  for (size_t b = 0; b < n; ++b) release_values(b);
  if (stage_ == 1) share_values();  // stage 2 shares them with the gradients once a step is recorded (next_cycle)
}

void ZeroExchange::share_values() {
  // Events: join iterations (gather_params is -1). Bucket b's released values are committed from
  // its all-gather's start (iteration pos - 1, pos its position) to its release (the iteration
  // release_at_ holds it in): in between its all-gather or unpack writes them and refreshes
  // read them. A granule's span is the union of the spans of the buckets whose released ranges
  // touch it (neighbours in flat order are neighbours in position: an interval). Kept values
  // are never decommitted, so a granule holding any is not shared (Buffer::share).
  const size_t granule = store_.values().share_granularity() / sizeof(float);  // elements
  if (granule == 0) return;
  const size_t n = buckets_.size();
  std::vector<Buffer::Spans> live((store_.size() + granule - 1) / granule);
  for (size_t pos = 0; pos < n; ++pos)
    for (size_t b : release_at_[pos]) {
      const int64_t first = static_cast<int64_t>(n - 1 - b) - 1, last = static_cast<int64_t>(pos);
      for (const ValueRange& r : releasable_[b])
        for (size_t g = r.begin / granule; g < (r.begin + r.count + granule - 1) / granule; ++g) {
          if (live[g].empty()) live[g].push_back({first, last});
          Buffer::Span& s = live[g].front();
          s = {std::min(s.first, first), std::max(s.last, last)};
        }
    }
  store_.values().share(live);
}

void ZeroExchange::release_values(size_t b) {
  for (const ValueRange& r : releasable_[b]) {
    touch(false, false, r.begin, r.count);
    store_.values().decommit(r.begin, r.count);
  }
}

void ZeroExchange::touch(bool grads, bool commit, size_t offset, size_t count) { note({grads, commit, false, offset, count}); }

void ZeroExchange::note(const Touch& t) {
  if (turns_ == Turns::recording) cycle_.push_back(t);
  if (turns_ != Turns::checking) return;
  DLPERF_ASSERT(cycle_at_ < cycle_.size() && cycle_[cycle_at_] == t,
                "ZeRO-2 committed or released buffers in another order than in the step it recorded (their memory is shared by it)");
  ++cycle_at_;
}

void ZeroExchange::next_cycle() {
  if (stage_ != 2 || store_.grads().share_granularity() == 0) return;
  if (turns_ == Turns::off && cycle_.empty()) {
    turns_ = Turns::recording;
  } else if (turns_ == Turns::recording) {
    share_cycle();
    turns_ = Turns::checking;
  } else if (turns_ == Turns::checking) {
    DLPERF_ASSERT(cycle_at_ == cycle_.size(), "ZeRO-2 committed or released fewer ranges than in the step it recorded");
  }
  cycle_at_ = 0;
}

void ZeroExchange::share_cycle() {
  // A granule's spans: per micro-batch, the first to the last of the recorded commits and
  // releases that touch it. At a micro-batch's end every gradient is decommitted (finish frees
  // the last buckets), and the released values are by the first's (the all-gathers are joined in
  // its forward): that is when a granule is held.
  const size_t granule = store_.grads().share_granularity() / sizeof(float);  // elements
  const size_t granules = (store_.size() + granule - 1) / granule;
  std::vector<Buffer::Spans> values(shard_master_ ? granules : 0), grads(granules);
  int64_t micro_begin = 0;  // the micro-batch's first event
  for (size_t i = 0; i < cycle_.size(); ++i) {
    const Touch& t = cycle_[i];
    const auto e = static_cast<int64_t>(i);
    if (t.end) {
      micro_begin = e + 1;
      continue;
    }
    auto& spans = t.grads ? grads : values;
    for (size_t g = t.offset / granule; g < (t.offset + t.count + granule - 1) / granule; ++g) {
      if (spans[g].empty() || spans[g].back().last < micro_begin) spans[g].push_back({e, e});
      spans[g].back().last = e;
    }
  }
  std::vector<ShareRequest> parts{{&store_.grads(), grads}};
  if (shard_master_) parts.push_back({&store_.values(), values});
  share_together(parts);
}

void ZeroExchange::begin_step(int64_t step) {
  DLPERF_ASSERT(step >= step_, "steps begin in order");
  DLPERF_ASSERT(step == step_ || completed_step_ >= step - 2, "a step's buckets complete before its parity is reused");
  for (auto& b : buckets_) b.pending = b.range.params;
  if (step != step_) micro_ = 0;
  step_ = step;
  launched_ = 0;
}

void ZeroExchange::act(std::function<void()> work) {
  if (actor_) actor_(std::move(work));
  else work();
}

void ZeroExchange::before_write(const Layer& layer) {
  if (stage_ != 2) return;
  const auto& entries = store_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].layer != &layer || written_[i]) continue;
    touch(true, true, entries[i].offset, entries[i].elems);
    committed_bytes_ += store_.grads().commit(entries[i].offset, entries[i].elems);  // freed pages held again
    committed_peak_ = std::max(committed_peak_, committed_bytes_);
    written_[i] = true;
  }
}

void ZeroExchange::on_ready(const Layer& layer) {
  const auto& entries = store_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].layer != &layer) continue;
    Bucket& b = buckets_[bucket_of_entry_[i]];
    DLPERF_ASSERT(stage_ != 2 || written_[i], "backward wrote a gradient its model did not announce first (Model::writing)");
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
      if (stage_ == 2) {
        if (in_flight_.size() >= kInFlight) {
          free_bucket(in_flight_.front());
          in_flight_.erase(in_flight_.begin());
        }
        in_flight_.push_back(b);
      }
      const GradBucket& r = buckets_[b].range;
      const size_t p = piece_of_bucket_[b];
      Buffer& into = micro_ > 0 ? *micro_recv_ : shard_grads_;
      float* recv = into.data() + (p == SIZE_MAX ? 0 : shard_.pieces[p].local);
      scatter(b) = comm_.reduce_scatter_start(store_.grads().data() + r.begin, recv, shard_.counts[b]);
    });
  }
}

void ZeroExchange::free_bucket(size_t b) {
  comm_.join(scatter(b));
  const GradBucket& r = buckets_[b].range;
  // From the start of the page this bucket shares with the one before it (a boundary is a
  // tensor's start, on 64 bytes, seldom on a page). Buckets are freed in order, so that one is
  // freed already and the page goes with this one: decommit gives back whole pages only, and
  // without this the page, and on a GPU its 2 MiB chunk, stayed held for the run (one chunk per
  // boundary: about 0.4 GiB of Llama 3.1 8B's gradients).
  const size_t page = std::max<size_t>(1, store_.grads().decommit_unit() / sizeof(float));
  const size_t begin = b > 0 ? r.begin / page * page : r.begin;
  touch(true, false, begin, r.end - begin);
  committed_bytes_ -= store_.grads().decommit(begin, r.end - begin);
  for (size_t i = 0; i < written_.size(); ++i)
    if (bucket_of_entry_[i] == b) written_[i] = false;
}

void ZeroExchange::finish() {
  for (size_t b = launched_; b < buckets_.size(); ++b) buckets_[b].pending = 0;  // layers without a report (none in practice)
  launch_ready();
  act([this] {
    for (size_t b : in_flight_) free_bucket(b);  // stage 2: the last buckets' gradients are not needed either
    in_flight_.clear();
    if (stage_ == 2) note({.end = true});  // every gradient freed
    for (size_t b = 0; b < buckets_.size(); ++b) comm_.join(scatter(b));
    if (micro_ > 0) be_.accumulate({shard_grads_.data(), shard_.local_size}, {micro_recv_->data(), shard_.local_size}, false);
    if (++micro_ < micro_batches_) return;  // stage 2, an earlier micro-batch: begin_step starts the next one's buckets
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

void ZeroExchange::sum_over_ranks(double* values, size_t count) {
  if (count == 0) return;
  act([this, values, count] {
    CommRequest& r = requests(step_).sums;
    r = comm_.allreduce_start(values, values, count, DataType::float64);
    comm_.join(r);
  });
}

size_t ZeroExchange::block_begin(size_t b) const {
  size_t at = buckets_[b].range.begin;
  for (int r = 0; r < shard_.rank; ++r) at += shard_.counts[b][static_cast<size_t>(r)];
  return at;
}

CommRequest ZeroExchange::start_gather(size_t b, std::optional<size_t> pos) {
  const GradBucket& range = buckets_[b].range;
  if (shard_master_) {
    touch(false, true, range.begin, range.end - range.begin);
    store_.values().commit(range.begin, range.end - range.begin);
  }
  float* values = store_.values().data();
  if (!pos || !packed_ || !packing_[b].mine)  // in place: this rank's block is the source
    return comm_.all_gather_start(values + block_begin(b), values + range.begin, shard_.counts[b]);
  // The words are only copied by the collective (as f32 elements: any bit pattern goes through).
  const Packing& pk = packing_[b];
  float* words = staging_[*pos % 2]->data();
  be_.pack(*pk.mine, values, words);  // the runs' words count from the bucket's first
  return comm_.all_gather_start(words + pk.my_word, words, pk.words);
}

void ZeroExchange::gather_params() {
  act([this] {
    DLPERF_ASSERT(gather_joined_ == buckets_.size() || gather_step_ < 0, "the last step's all-gathers were waited for");
    next_cycle();
    gather_step_ = step_;
    gather_joined_ = 0;
    // Sharded master or staged words: one bucket ahead of the one waited for (join_gathers);
    // otherwise all at once.
    const size_t ahead = shard_master_ || packed_ ? std::min<size_t>(1, buckets_.size()) : buckets_.size();
    auto& g = requests(step_).gather;
    for (gather_started_ = 0; gather_started_ < ahead; ++gather_started_) {
      const size_t b = bucket_at(gather_started_);
      g[b] = start_gather(b, gather_started_);
    }
    if (!gather_in_forward_) join_gathers(buckets_.size(), Phase::optimizer);
  });
}

void ZeroExchange::join_gathers(size_t end, std::optional<Phase> phase) {
  auto& g = requests(gather_step_).gather;
  const size_t n = buckets_.size();
  for (; gather_joined_ < std::min(end, n); ++gather_joined_) {
    const size_t pos = gather_joined_;
    // Sharded master or staged words: two buckets at a time; the next one's all-gather runs
    // while this one's layers are refreshed and its values released.
    for (; gather_started_ < std::min(pos + 2, n); ++gather_started_) {
      const size_t b = bucket_at(gather_started_);
      g[b] = start_gather(b, gather_started_);
    }
    if (phase && marker_) marker_(true, *phase);
    comm_.join(g[bucket_at(pos)]);
    if (phase && marker_) marker_(false, *phase);
    if (packed_ && packing_[bucket_at(pos)].mine)
      be_.unpack(*packing_[bucket_at(pos)].others, staging_[pos % 2]->data(), store_.values().data());
    if (!refresh_at_[pos].empty()) be_.refresh_compute_weights(refresh_at_[pos]);
    if (shard_master_)
      for (size_t done : release_at_[pos]) release_values(done);
  }
}

// The announcements are host bookkeeping of the forward being queued; only a layer that needs a
// later position than the ones before it in this forward hands work to the actor, so a forward
// waits once per bucket at most.
void ZeroExchange::before_read(const Layer& layer) {
  const auto it = std::lower_bound(read_at_.begin(), read_at_.end(), &layer,
                                   [](const auto& e, const Layer* k) { return std::less<>()(e.first, k); });
  if (it == read_at_.end() || it->first != &layer) return;  // a layer without parameters in the store
  read_[it->second.index] = 1;
  const size_t end = it->second.pos + 1;
  if (end <= forward_end_) return;  // an earlier layer of this forward waited for it
  forward_end_ = end;
  act([this, end] {
    if (gather_step_ >= 0) join_gathers(end, Phase::forward);
  });
}

void ZeroExchange::after_forward() {
  for (size_t l = 0; l < layers_.size(); ++l)
    DLPERF_ASSERT(read_[l], "forward read a layer's weights its model did not announce first (Model::reading)");
  std::fill(read_.begin(), read_.end(), 0);
  forward_end_ = 0;
  act([this] {
    if (gather_step_ >= 0) join_gathers(buckets_.size(), Phase::forward);
  });
}

void ZeroExchange::restore_values() {
  act([this] {  // the run is over: ZeRO-2's shared gradients private (and decommitted) again
    turns_ = Turns::off;
    if (stage_ == 2) store_.grads().unshare();
  });
  if (!shard_master_ && !packed_) return;
  act([this] {
    // Stage 1's whole gradients are dead after the last step: given back before the whole master
    // is made again (the memory plan's whole-master moment counts neither).
    if (shard_master_ && stage_ == 1 && store_.gradients_decommitted()) store_.grads().decommit(0, store_.size());
    if (shard_master_) store_.values().unshare();  // every bucket's values at once: private memory again
    std::vector<CommRequest> g(buckets_.size());
    for (size_t b = 0; b < buckets_.size(); ++b) g[b] = start_gather(b, std::nullopt);
    for (auto& r : g) comm_.wait(r);
  });
}

void ZeroExchange::complete(int64_t step) {
  DLPERF_ASSERT(step > completed_step_ && step <= step_, "steps complete once, in order");
  // The run's last step: no forward follows to wait for its all-gathers (and start the rest).
  if (step == gather_step_ && gather_joined_ < buckets_.size()) join_gathers(buckets_.size(), std::nullopt);
  for (auto& r : requests(step).scatter) comm_.wait(r);
  for (auto& r : requests(step).gather) comm_.wait(r);
  if (requests(step).norm.valid()) comm_.wait(requests(step).norm);
  if (requests(step).sums.valid()) comm_.wait(requests(step).sums);
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
