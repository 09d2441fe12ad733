#include "train/setup.h"

#include <algorithm>

#include "train/memory/memory_plan.h"
#include "train/registry.h"

namespace dlperf {

TrainingStack build_stack(const TrainOptions& o, const WorldInfo& w, bool defer_sharded_optimizer) {
  TrainingStack s;
  BackendOptions bo;
  bo.precision = o.precision;
  bo.threads = o.threads;
  bo.device = w.local_rank;
  bo.memory_limit_bytes = o.memory_limit_mb << 20;
  bo.conv_autotune = o.conv_autotune;
  bo.deterministic = o.deterministic;
  bo.timeout_s = o.timeout_s;
  bo.cuda_attention = o.attention == "fused"     ? BackendOptions::AttentionImpl::fused
                      : o.attention == "unfused" ? BackendOptions::AttentionImpl::unfused
                                                 : BackendOptions::AttentionImpl::automatic;
  s.backend = make_backend(o.backend, bo);
  Backend* model_be = s.backend.get();
  if (o.profile_ops > 0) {
    s.profiler = std::make_unique<OpProfiler>(o.warmup, o.profile_ops);  // the first measured iterations
    s.profiled = make_profiling_backend(*s.backend, *s.profiler);
    model_be = s.profiled.get();
  }
  const int64_t before = s.backend->allocated_bytes();
  s.model = make_model(o, *model_be);
  s.model_bytes = static_cast<double>(s.backend->allocated_bytes() - before);
  s.shard_master = shards_master_weights(o, w.size) && s.backend->frees_decommitted();
  // Gradients decommitted until backward writes them: stage 2 frees them again; with sharded
  // master weights they are not counted (nor mapped) before the master is released.
  s.store = std::make_unique<ParamStore>(*s.backend, s.model->layers(), (o.zero == 2 || s.shard_master) && w.size > 1, s.shard_master);
  if (o.zero > 0 && w.size > 1) {  // one rank owns everything: nothing to shard
    s.cut = std::make_unique<BucketCut>(cut_buckets(*s.store, bucket_bytes(o)));
    s.shard = std::make_unique<ShardLayout>(make_shard_layout(s.cut->buckets, w.size, w.rank));
    s.shard_grads = s.backend->buffer(std::max<size_t>(1, s.shard->local_size));
    s.optimizer_shard = std::make_unique<OptimizerShard>(OptimizerShard{shard_ranges(*s.store, *s.shard), s.shard_grads.get(), s.shard->local_size});
  }
  if (!(defer_sharded_optimizer && s.shard_master)) s.optimizer = make_optimizer(o, *s.backend, *s.store, s.optimizer_shard.get());
  return s;
}

void init_stack(TrainingStack& s, const TrainOptions& o, const WorldInfo& w, const std::shared_ptr<const data::Dataset>& dataset) {
  s.model->init_params(o.seed);
  if (dataset) s.data = make_image_data(o, w, dataset, *s.model->raw_input("images"), *s.backend);
  else s.data = make_data(o, w.rank, w.size);
}

size_t bucket_bytes(const TrainOptions& o) { return static_cast<size_t>(o.bucket_mb * 1024 * 1024); }

TrainConfig train_config(const TrainOptions& o, int world_size, OpProfiler* profiler) {
  TrainConfig tc;
  tc.iterations = o.iterations;
  tc.warmup = o.warmup;
  tc.print_every = o.print_every;
  tc.lr = make_lr_schedule(o, world_size);
  if (o.precision == Precision::fp16) tc.loss_scale = {LossScaling::dynamic, 65536.0f, 2000};
  tc.input = o.data_on_device ? InputMode::resident : InputMode::automatic;
  tc.cuda_graph = o.cuda_graph;
  tc.grad_accum = o.grad_accum;
  tc.timeout = std::chrono::seconds(o.timeout_s);
  tc.profiler = profiler;
  tc.max_loss_growth = o.max_loss_growth;
  return tc;
}

}  // namespace dlperf
