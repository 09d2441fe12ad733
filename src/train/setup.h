// What one rank builds for a run from validated options: the backend (wrapped for the per-op
// profile when asked), the model, its flat parameters, the optimizer and the data source, and
// the loop's configuration. Shared by the benchmark run (run.cpp) and --find-max-batch's
// trials (max_batch.cpp), so a trial allocates exactly what a run would.
#pragma once

#include <memory>

#include "comm/mpi_session.h"
#include "models/model.h"
#include "train/measure/op_profile.h"
#include "train/optim/optimizer.h"
#include "train/options.h"
#include "train/param_store.h"
#include "train/parallel/sharding.h"
#include "train/feed/synthetic_data.h"
#include "train/trainer.h"
#include "train/feed/image_data.h"

namespace dlperf {

struct TrainingStack {
  std::unique_ptr<Backend> backend;        // the real one
  std::unique_ptr<OpProfiler> profiler;    // --profile-ops
  std::unique_ptr<Backend> profiled;       // the profiling decorator the model is built on
  std::unique_ptr<Model> model;
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DataSource> data;
  // --zero 1 on more than one rank (train/parallel/zero.h): the bucket cut, this rank's shard,
  // the shard's reduced gradients and the optimizer's view of them; empty otherwise.
  std::unique_ptr<BucketCut> cut;
  std::unique_ptr<ShardLayout> shard;
  std::unique_ptr<Buffer> shard_grads;
  std::unique_ptr<OptimizerShard> optimizer_shard;
  // The f32 master weights are sharded too (ZeroExchange's shard_master): bf16/fp16 on a backend
  // that frees decommitted memory. The gradients then start decommitted, as stage 2's do.
  bool shard_master = false;
  // What building the model allocated on a backend that counts (cpu): its weight copies and
  // layouts, activations, their gradients and workspaces (the memory plan's model row); 0 otherwise.
  double model_bytes = 0;
  Backend& be() { return *backend; }
  // The backend the model was built on, which the trainer drives (the profiling decorator
  // forwards everything else to the real one).
  Backend& model_be() { return profiled ? *profiled : *backend; }
};

// The stack for o.batch_size per device: backend, model, parameters (not initialised yet) and
// optimizer; enough for --plan-only. With sharded master weights, defer_sharded_optimizer leaves
// the optimizer to the caller (make_optimizer, once the exchange has given back the master's
// unkept values: set-up never holds its state beside the whole master).
TrainingStack build_stack(const TrainOptions& o, const WorldInfo& w, bool defer_sharded_optimizer = false);
// Then, for training: parameters initialised from o.seed and the data source (the image
// loader over `dataset` when given, else generated data or BERT shards).
void init_stack(TrainingStack& s, const TrainOptions& o, const WorldInfo& w, const std::shared_ptr<const data::Dataset>& dataset);

// --bucket-mb in bytes.
size_t bucket_bytes(const TrainOptions& o);

// The loop's configuration for this run (profiler: the stack's, or null).
TrainConfig train_config(const TrainOptions& o, int world_size, OpProfiler* profiler);

}  // namespace dlperf
