// The sharded data-parallel strategy (ZeRO stage 1, Rajbhandari et al. 2020): each rank keeps
// the optimizer state (SGD momentum, Adam moments) only for its shard of the flat buffers
// (train/parallel/sharding.h), and instead of allreducing whole gradients
//   * backward: as the last parameter of a bucket becomes final, the bucket is reduce-scattered
//     (started at once, overlapped with the rest of backward as the allreduce is): rank r
//     receives the sum over ranks of its block into the shard-sized gradient buffer;
//   * the optimizer updates the rank's block of the parameters from it (a sharded Sgd / AdamW,
//     train/optim/optimizer.h, train/optim/adam.h);
//   * then every bucket of the parameters is all-gathered in place, so every rank again holds
//     all the new weights for the next forward. The all-gathers start in forward order (the
//     reverse of bucket order: the flat buffers hold the layers in reverse) and, by default
//     (--zero-gather forward), run into the next forward: before a layer first reads its
//     parameters the model calls its read hook (Model::reading), and the trainer passes it here
//     (before_read), which waits for the buckets that hold the layer, in forward order, and
//     rebuilds the compute copies (bf16/fp16) of the layers they complete. The first layers wait
//     for little, the later ones compute while the rest of the weights arrive. After forward
//     (after_forward) every layer must have been announced, which the CPU's tests hold every
//     model to, and any bucket still in flight is waited for. --zero-gather step waits for
//     every all-gather at the end of the optimizer step instead (exposed, and measurable as such).
// Communicated per step and rank: reduce-scatter + all-gather of S bytes move what an allreduce
// of S moves ((n-1)/n S each, docs/communication.md), while the optimizer state shrinks to 1/n.
// The reduction order: Open MPI / NCCL sum each element over the ranks; on 2 ranks that is one
// addition, so ZeRO's parameters equal the allreduce's bit for bit; on more ranks the two
// collectives may associate the sum differently (fp32 round-off).
//
// Stage 2 also frees each bucket's full gradients once its reduce-scatter is done: the flat
// gradient buffer starts decommitted and is decommitted bucket by bucket (Buffer::decommit: on
// the CPU its whole pages go back to the kernel, on a GPU the chunks all of whose pages are
// given back are unmapped), and each layer's gradients are committed (counted, mapped) again
// before backward writes them: the model calls its write hook (Model::writing) before a layer's
// first write, or a block's, and the trainer passes it here (before_write). A gradient reported
// final without that call is an internal error, so the CPU's tests hold every model to it. A
// page shared by two buckets goes with the second (buckets are freed in order: its decommit starts
// at that page), and so does a GPU chunk two buckets share. At most kInFlight buckets are
// reduce-scattering at once; launching one more first
// waits for the oldest and frees it, so the full gradients held at any time are those in flight
// plus the buckets backward is writing (memory_plan.h bounds them). With --grad-accum the buffer
// cannot carry a sum across micro-batches, so stage 2 reduce-scatters every micro-batch (as
// DeepSpeed's stage 2 does) and sums into the shard: micro-batch 0 into the shard's gradients,
// later ones into a shard-sized receive buffer added to them. That moves the reduce-scatter's
// bytes once per micro-batch (docs/communication.md) and sums over micro-batches after summing
// over ranks, the reverse of stages 0 and 1 (fp32 round-off).
//
// Sharded master weights (bf16/fp16 runs, where Backend::frees_decommitted: the CPU's pages, a
// GPU's chunks mapped through CUDA's virtual memory management): the f32 master values
// are also kept only for the rank's blocks, as Megatron's distributed optimizer keeps them, plus
// the parameters forward and backward read in f32 (every role but ParamRole::weight: biases,
// normalisation parameters, embedding tables; small, except an untied embedding). The rest of
// the flat value buffer is decommitted. After the sharded update, each bucket is committed,
// all-gathered in f32 (the next bucket's all-gather already started), and the compute copies of
// the layers it completes are rebuilt from it (Backend::refresh_compute_weights); once every
// layer touching a bucket is refreshed, its values outside the keep set are decommitted again.
// Under --zero-gather forward the next bucket's all-gather starts when forward first waits for
// the one before it: one bucket ahead of forward.
// The full f32 values then exist for at most two buckets (and a layer spanning them) at a time,
// so the master costs 4P/n plus the kept parameters instead of 4P, and the compute copies are
// those of the whole master (the same f32 values, the same conversion): runs equal those with
// the whole master bit for bit.
// Under stage 1 the released values do not go back and come again each step: they take turns
// in one pool (Buffer::share). Each granule of them (a page; a GPU's 2 MiB chunk) is committed
// from its bucket's all-gather to its release, at the same join iterations every step, so at
// construction the granules whose spans do not meet are backed by the same pool granule
// (share_values: interval colouring, as many as are live at once: about two buckets, what the
// memory plan already holds). A step then maps, unmaps and faults in nothing (on a GPU each
// remapped chunk cost four driver calls, ~50 us each: about 1.3 s a step for Llama 3.1 8B on 8
// ranks). restore_values makes them private again.
// Stage 2 gives its gradients back too, so a pool of the values alone would add to backward's
// peak: there the values and the gradients take turns in one pool (share_together), forward's
// values and backward's gradients never at once. Backward's commits and releases follow the
// model's write announcements and the in-flight limit, so they are not planned but recorded:
// every commit and release of either buffer from one gather_params to the next (the second
// step's), then the granules' spans shared, and every later step checked against the record
// (another order is an internal error, not memory written out of turn). From the third step a
// step maps nothing; the peak is the larger of the two, as before. With --grad-accum each
// micro-batch commits and frees the gradients in the same order: a gradient granule has a span
// per micro-batch, the values one in the first (Buffer::Spans), and the pool holds what the
// first micro-batch needs (share_backing).
//
// The all-gather in the compute precision (bf16/fp16 runs, either master): what forward reads
// of a weight is its compute copy, so each rank sends its blocks' weights (ParamRole::weight)
// already converted, two to a 4-byte word (Backend::pack, the compute copies' own rounding),
// and everything else (the kept parameters, the padding) in f32; each run of a block starts on
// a word. The words of a bucket are all-gathered into one of two staging buffers, and the
// other ranks' runs widened (exactly) into the f32 values, from which the compute copies are
// rebuilt as before: bf16 -> f32 -> bf16 is the identity, so the copies, and the runs, equal
// those of an f32 all-gather bit for bit, while the second term of the bytes formula halves for
// the weights (docs/communication.md). Two buckets' words are in flight at a time (the next
// all-gather starts when the one before it is waited for), with the sharded master or not. A
// bucket whose words would exceed 3/4 of its elements (mostly kept values: an embedding table)
// is all-gathered in place in f32 instead: it would gain little, and need staging of its size.
// The f32 values of other ranks' weights are then their compute-precision roundings: nothing
// reads them in training (the optimizer reads this rank's blocks, forward the compute copies),
// and restore_values() all-gathers every bucket in f32 (end of run: checksums, the final read).
// Whatever the master, the compute copies are rebuilt here, layer by layer as their buckets
// arrive (the trainer's own refresh before forward is skipped: Optimizer::refreshes_compute_weights).
//
// Requests are kept per step parity, as BucketedAllreduce does (step n+1's buckets start before
// step n is retired).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "train/parallel/sharding.h"
#include "train/trainer.h"

namespace dlperf {

class ZeroExchange final : public GradientExchange {
 public:
  // shard: this rank's layout over `cut`'s buckets; shard_grads: (shard.local_size) floats.
  // global_norm: form the sum of squares over every shard after the reduce-scatter (clipping by
  // the global norm, and dynamic loss scaling's finite check: an inf or nan in any rank's
  // gradients makes the global sum non-finite on every rank, so every rank skips the step, as
  // the allreduced gradients make them under --zero 0): each rank sums its block on `be` (a
  // host read-back on a GPU), then the ranks' sums are allreduced in f64 into the
  // communicator's memory, where the step gate reads it.
  // stage: 1 or 2; micro_batches: --grad-accum (stage 2 reduce-scatters each one).
  // shard_master: shard the f32 master values too (see above; bf16/fp16 runs only). The store's
  // values must be final when this is constructed (after the initial broadcast): the compute
  // copies are built from them here, then the values outside the keep set are released.
  // gather_in_forward: --zero-gather forward (see above); false: step.
  ZeroExchange(Communicator& comm, ParamStore& store, const BucketCut& cut, const ShardLayout& shard, Buffer& shard_grads,
               Backend& be, bool global_norm, int stage = 1, int64_t micro_batches = 1, bool shard_master = false,
               bool gather_in_forward = true);
  static constexpr size_t kInFlight = kZeroBucketsInFlight;

  int world_size() const override { return comm_.size(); }
  bool reduces_each_micro_batch() const override { return stage_ == 2; }
  size_t bucket_count() const override { return buckets_.size(); }
  void begin_step(int64_t step) override;
  void before_write(const Layer& layer) override;  // stage 2: commits the layer's gradients
  void before_read(const Layer& layer) override;   // waits for the layer's weights (see above)
  void after_forward() override;
  void on_ready(const Layer& layer) override;
  void finish() override;
  void abort_in_flight() override { comm_.abort_in_flight(); }
  void complete(int64_t step) override;
  void poll() override;
  // Stage 2: the most bytes of full gradients held at once so far (the committed buckets).
  size_t gradient_bytes_peak() const { return committed_peak_; }
  size_t gradient_bytes_held() const { return committed_bytes_; }  // now (after a step: every bucket freed)
  // Reduce-scatters, then all-gathers, each in bucket order.
  std::vector<BucketTime> timings(int64_t step, StepRecorder& recorder) override;
  int64_t bytes_moved(int64_t step) override;
  const double* gate_sq_sum() const override { return norm_ ? static_cast<const double*>(norm_->bytes()) : nullptr; }
  void set_actor(Actor actor) override { actor_ = std::move(actor); }
  void set_wait_marker(WaitMarker marker) override { marker_ = std::move(marker); }

  // After the optimizer updated this rank's blocks: starts the buckets' all-gathers of the
  // parameter values in forward order; with --zero-gather step, also orders the compute queue
  // after them (MPI: waits) and rebuilds the compute copies.
  void gather_params();
  bool shards_master() const { return shard_master_; }
  // Sharded master or compute-precision gathers: commits and all-gathers every bucket in f32, so
  // every rank holds all the f32 values again (what read_values and checksums read); blocking.
  // Otherwise (fp32, tf32) nothing to do: every rank already holds them.
  void restore_values();
  // bf16/fp16 runs: the parameters are all-gathered in the compute precision (above).
  bool gathers_compute_precision() const { return packed_; }
  // Sums `count` doubles in the backend's memory over the ranks in place (an f64 allreduce,
  // joined: the compute queue's later work reads the sums; a host communicator waits): a
  // sharded optimizer's per-parameter quantities (LAMB's norms, train/optim/optimizer.h's
  // ShardReducer). Waited for in complete(); not counted in bytes_moved, which counts the
  // gradients' and parameters' collectives.
  void sum_over_ranks(double* values, size_t count);

 private:
  struct Bucket {
    GradBucket range;
    int pending = 0;  // parameters not yet final this step
  };
  struct Requests {
    std::vector<CommRequest> scatter;  // per micro-batch (stage 2) and bucket: [micro * buckets + b]
    std::vector<CommRequest> gather;   // per bucket
    CommRequest norm;                          // the allreduce of the shards' sums of squares
    CommRequest sums;                          // sum_over_ranks' allreduce
  };
  Requests& requests(int64_t step) { return requests_[static_cast<size_t>(step & 1)]; }
  void act(std::function<void()> work);
  void launch_ready();  // starts, in order, every bucket whose parameters are all final
  CommRequest& scatter(size_t b) { return requests(step_).scatter[static_cast<size_t>(micro_) * buckets_.size() + b]; }
  void free_bucket(size_t b);  // stage 2: waits for its reduce-scatter, then decommits it
  void plan_gathers(const BucketCut& cut);
  void plan_master_release();
  size_t block_begin(size_t b) const;  // flat offset of this rank's block of bucket b
  // Commits bucket b's values (sharded master), starts their all-gather: the `pos`-th of the
  // step, packed in the compute precision where packed_, or (pos: none) in f32.
  CommRequest start_gather(size_t b, std::optional<size_t> pos);
  void plan_packing();
  size_t bucket_at(size_t pos) const { return buckets_.size() - 1 - pos; }  // the pos-th all-gather's bucket (forward order)
  // Waits for this step's all-gathers before position `end`, refreshes, releases; each wait
  // marked as exposed communication in `phase` (none: not marked; after the run's last step).
  void join_gathers(size_t end, std::optional<Phase> phase);
  void release_values(size_t b);  // sharded master: decommits bucket b outside the keep set
  void share_values();            // sharded master: the released values' granules take turns (Buffer::share)
  // Stage 2: the commits and releases of the gradients (and the sharded master's values) and
  // the micro-batches' ends from one gather_params to the next are recorded once, their granules
  // then shared together (share_cycle), and every later step is checked against the record.
  struct Touch {
    bool grads = false, commit = false;
    bool end = false;  // a micro-batch's end: every gradient freed
    size_t offset = 0, count = 0;
    bool operator==(const Touch&) const = default;
  };
  enum class Turns { off, recording, checking };
  void touch(bool grads, bool commit, size_t offset, size_t count);
  void note(const Touch& t);
  void next_cycle();
  void share_cycle();
  Turns turns_ = Turns::off;
  std::vector<Touch> cycle_;
  size_t cycle_at_ = 0;

  Communicator& comm_;
  ParamStore& store_;
  const ShardLayout& shard_;
  Buffer& shard_grads_;
  Backend& be_;
  std::unique_ptr<CommBuffer> norm_;  // (1) f64 in the communicator's memory; null without global_norm
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_entry_;
  std::vector<size_t> piece_of_bucket_;  // index into shard_.pieces, or SIZE_MAX when this rank's block is empty
  std::array<Requests, 2> requests_;
  int stage_;
  int64_t micro_batches_;
  int64_t micro_ = 0;                    // the micro-batch backward is in (stage 2)
  std::unique_ptr<Buffer> micro_recv_;   // stage 2 with accumulation: later micro-batches' reduced shard
  std::vector<size_t> in_flight_;        // stage 2: launched buckets not yet freed, oldest first
  size_t committed_bytes_ = 0, committed_peak_ = 0;  // stage 2: full-gradient bytes held (now, at most)
  std::vector<bool> written_;  // stage 2, per store entry: committed for this micro-batch's backward
  // Per all-gather position (forward order): the layers complete once it is waited for (their
  // compute copies rebuilt then); with the sharded master, the buckets all of whose layers are
  // refreshed then (released then). Per layer: the position it waits for, and whether this
  // forward announced it. Per bucket (sharded master): the value ranges outside the keep set.
  struct ValueRange {
    size_t begin = 0, count = 0;
  };
  struct ReadAt {
    size_t pos = 0, index = 0;  // index: into read_
  };
  bool shard_master_ = false;
  bool gather_in_forward_ = true;
  std::vector<Layer*> layers_;  // the store's, each once
  std::vector<std::vector<Layer*>> refresh_at_;
  std::vector<std::vector<size_t>> release_at_;
  std::vector<std::pair<const Layer*, ReadAt>> read_at_;  // sorted by layer
  std::vector<char> read_;
  size_t forward_end_ = 0;  // the forward being queued has waited for the positions before it
  std::vector<std::vector<ValueRange>> releasable_;
  // Compute-precision all-gathers: per bucket, this rank's runs (packed before its all-gather),
  // the others' (widened after it), each rank's words; no tables for a bucket of mostly kept
  // values (gathered in place in f32). Two staging buffers, by position parity.
  struct Packing {
    std::unique_ptr<Backend::PackTable> mine, others;
    std::vector<size_t> words;  // per rank
    size_t my_word = 0;         // this rank's block in the words
  };
  bool packed_ = false;
  std::vector<Packing> packing_;
  std::vector<std::unique_ptr<Buffer>> staging_;
  // The all-gathers of step gather_step_: positions before gather_started_ are started, before
  // gather_joined_ waited for.
  int64_t gather_step_ = -1;
  size_t gather_started_ = 0, gather_joined_ = 0;
  int64_t step_ = -1;
  int64_t completed_step_ = -1;
  size_t launched_ = 0;
  Actor actor_;
  WaitMarker marker_;
};

// "\nzero: stage 1, ..." for the run's banner: the shard of each rank and how balanced they are.
// gather_type: the compute type the weights are all-gathered in ("bf16"), "" for f32.
std::string zero_banner(const ShardLayout& shard, int stage = 1, bool master = false, bool gather_in_forward = true,
                        const std::string& gather_type = "");

// The optimizer of a ZeRO run: the sharded update, then the parameters' all-gather.
class GatherAfterStep final : public Optimizer {
 public:
  GatherAfterStep(std::unique_ptr<Optimizer> inner, ZeroExchange& zero) : inner_(std::move(inner)), zero_(zero) {
    inner_->set_shard_reducer([&zero](double* values, size_t count) { zero.sum_over_ranks(values, count); });
  }
  std::string name() const override { return inner_->name(); }
  void step(float lr, float grad_scale, const float* gate = nullptr) override {
    inner_->step(lr, grad_scale, gate);
    zero_.gather_params();
  }
  float clip_norm() const override { return inner_->clip_norm(); }
  bool refreshes_compute_weights() const override { return true; }  // the exchange does, as each bucket arrives
  void release_state() override { inner_->release_state(); }

 private:
  std::unique_ptr<Optimizer> inner_;
  ZeroExchange& zero_;
};

}  // namespace dlperf
