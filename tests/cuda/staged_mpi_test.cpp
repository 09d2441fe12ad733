// Two ranks on one GPU (issue 13, item 8): NCCL refuses that, so the gradients go through MPI
// staged in pinned host memory (--comm mpi on the CUDA backend). Under mpirun -np 2: replicas
// that start different end bit-identical after training with bucketed, overlapped allreduces;
// bucket times are recorded; a stop seen by one rank stops both at the same iteration; float64
// and int32 sums pass the staging exactly, bfloat16 (no MPI type) is refused. ZeRO on
// the GPU (issue 25), through the same staging: with the f32 master weights sharded in mapped
// device memory (cuda/mapped_buffer.h) a reduced Llama trains to the parameters of the whole
// master bit for bit and of replicated data parallelism to 1e-6, and the master's chunks really
// go back; ZeRO-2 (its gradients mapped only while needed) gives stage 1's parameters bit for
// bit and holds less. Skips (on every rank) without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <span>
#include <string>

#include "../comm/mpi_test_env.h"
#include "gpu_presence.h"
#include "backend/cuda/mapped_buffer.h"
#include "comm/make_communicator.h"
#include "core/error.h"
#include "models/llama.h"
#include "models/resnet.h"
#include "train/cluster/cluster.h"
#include "train/parallel/gradient_exchange.h"
#include "train/optim/adam.h"
#include "train/feed/llama_data.h"
#include "train/param_store.h"
#include "train/parallel/zero.h"
#include "train/feed/synthetic_data.h"
#include "train/trainer.h"

namespace dlperf::test {
namespace {

using cuda_test::have_gpu;

uint64_t fnv1a(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

TEST(StagedMpiOnOneGpu, ReplicasEndBitIdenticalAndStopTogether) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto be = make_backend(BackendKind::cuda, {Precision::fp32, 0, world().local_rank});  // local_rank % 1 GPU: shared
  ResNetConfig rc;
  rc.blocks = {1, 1, 1, 1};
  rc.width = 8;
  rc.classes = 10;
  rc.batch = 4;
  rc.image_size = 32;
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(1000 + static_cast<uint64_t>(world().rank));  // replicas start different
  auto comm = make_staged_communicator(MPI_COMM_WORLD, world(), fast_options(), static_cast<CUstream_st*>(be->stream_handle()));
  auto control = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, world(), fast_options());
  comm->broadcast(store.values().data(), store.size(), 0);
  BucketedAllreduce exchange(*comm, store, 32 * 1024);
  ASSERT_GT(exchange.bucket_count(), 3u);
  Sgd sgd(*be, store, SgdConfig{0.9f, 1e-4f});
  TrainConfig tc;
  tc.iterations = 8;
  tc.warmup = 1;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::constant, 0.05f, 0, 8};
  SyntheticImages data(rc.batch, rc.image_size, rc.classes, 77 + static_cast<uint64_t>(world().rank));
  install_stop_handlers();
  Trainer t(*model, *be, sgd, tc, &store.grads());
  RankTrace trace;
  const auto boundary = [&](const BoundaryFlags& local) {
    return agree_at_boundary(*control, BoundaryFlags{stop_requested().load(), local.diverged});
  };
  const auto after = [&](const RankTrace& tr) {
    if (world().rank == 1 && tr.iterations.size() == 3) std::raise(SIGUSR1);  // only rank 1 is told to stop
  };
  t.run(data, &exchange, trace, boundary, nullptr, after);
  // Rank 1 saw the signal after iteration 2 was retired, while iteration 3 was queued: both
  // ranks leave before iteration 4 and retire 0-3.
  EXPECT_EQ(trace.iterations.size(), 4u);
  for (const auto& it : trace.iterations) {
    ASSERT_EQ(it.buckets.size(), exchange.bucket_count());
    for (const auto& b : it.buckets) EXPECT_LE(b.start, b.end);
    EXPECT_GT(it.comm_seconds, 0.0f);
  }
  std::vector<float> values(store.size());
  store.values().read(values);
  const uint64_t mine = fnv1a(values);
  std::vector<uint64_t> all(static_cast<size_t>(world().size));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r << "'s parameters differ from rank 0's";
}

// ZeRO's gradient norm is a float64 sum: the staging sums whatever its host communicator sums,
// and refuses in one line what MPI has no type for.
template <typename T>
std::vector<T> sum_on_device(Communicator& comm, Backend& be, const std::vector<T>& mine, DataType type) {
  auto d = comm.make_byte_buffer(mine.size() * sizeof(T));
  d->upload_bytes(std::as_bytes(std::span(mine)));
  CommRequest req = comm.allreduce_start(d->bytes(), d->bytes(), mine.size(), type);
  comm.join(req);
  be.synchronize();
  std::vector<T> sum(mine.size());
  d->download_bytes(std::as_writable_bytes(std::span(sum)));
  return sum;
}

TEST(StagedMpiOnOneGpu, SumsTheTypesItsHostSums) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto be = make_backend(BackendKind::cuda, {Precision::fp32, 0, world().local_rank});
  auto comm = make_staged_communicator(MPI_COMM_WORLD, world(), fast_options(), static_cast<CUstream_st*>(be->stream_handle()));
  const int n = comm->size(), r = comm->rank();
  ASSERT_TRUE(comm->supports(DataType::float64));
  ASSERT_TRUE(comm->supports(DataType::int32));
  EXPECT_FALSE(comm->supports(DataType::bfloat16));
  // 1 + 2^-40 is not a float: the sum stays double on the way through the pinned staging.
  const std::vector<double> sum = sum_on_device<double>(*comm, *be, {1.0 + std::ldexp(1.0, -40), 0.25 * r, -3.0}, DataType::float64);
  EXPECT_EQ(sum[0], n * (1.0 + std::ldexp(1.0, -40)));
  EXPECT_EQ(sum[1], 0.25 * n * (n - 1) / 2);
  EXPECT_EQ(sum[2], -3.0 * n);
  const std::vector<int32_t> isum = sum_on_device<int32_t>(*comm, *be, {r + 1, 1 << 20}, DataType::int32);
  EXPECT_EQ(isum[0], n * (n + 1) / 2);
  EXPECT_EQ(isum[1], n << 20);
  auto d = comm->make_byte_buffer(sizeof(double));
  try {
    comm->allreduce_start(d->bytes(), d->bytes(), 1, DataType::bfloat16);
    ADD_FAILURE() << "a bfloat16 sum was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot sum bfloat16"), std::string::npos) << e.what();
  }
}

// A reduced Llama in bf16 on the CUDA backend, 4 AdamW steps, its gradients exchanged through
// the staged communicator: zero 0 (allreduce), or zero 1 with the master whole or sharded;
// gather_in_forward: --zero-gather forward (else step).
struct ZeroRun {
  std::vector<float> params;        // flat, whole again (restore_values)
  int64_t held_after = 0;           // the backend's device allocations after the steps
  int64_t values_bytes = 0;         // the flat value buffer
  bool sharded_master = false;      // the backend frees decommitted memory: the master was sharded
  int64_t driver_calls = 0;         // chunk maps, unmaps, creates and releases during the steps
};

ZeroRun train_zero(int zero, bool master, bool gather_in_forward = true) {
  auto be = make_backend(BackendKind::cuda, {Precision::bf16, 0, world().local_rank});
  LlamaConfig c = llama_preset("llama3_8b");
  // ~54 M parameters (216 MB of f32 values), tensors up to 14 MiB, cut into 32 MiB buckets:
  // each rank's half of a bucket spans several 2 MiB chunks.
  c.layers = 4, c.hidden = 1024, c.heads = 16, c.kv_heads = 4, c.ffn = 3584, c.vocab = 2048;
  c.batch = 1, c.seq_len = 64;
  auto model = make_llama(*be, c);
  const bool shard_master = master && be->frees_decommitted();
  ParamStore store(*be, model->layers(), zero == 2 || shard_master, shard_master);
  model->init_params(5);
  auto comm = make_staged_communicator(MPI_COMM_WORLD, world(), fast_options(), static_cast<CUstream_st*>(be->stream_handle()));
  comm->broadcast(store.values().data(), store.size(), 0);
  constexpr size_t kBucket = 32u << 20;
  const BucketCut cut = cut_buckets(store, kBucket);
  const ShardLayout shard = make_shard_layout(cut.buckets, comm->size(), comm->rank());
  auto shard_grads = be->buffer(std::max<size_t>(1, shard.local_size));
  const OptimizerShard os{shard_ranges(store, shard), shard_grads.get(), shard.local_size};
  std::unique_ptr<Optimizer> opt = std::make_unique<AdamW>(*be, store, AdamConfig{0.9f, 0.95f, 1e-8f, 0.1f}, zero ? &os : nullptr);
  std::unique_ptr<GradientExchange> exchange;
  ZeroExchange* z = nullptr;
  if (zero) {
    // global_norm: the gradients' norm as clipping and fp16's loss scale form it, a float64
    // allreduce (dlperf-train's default --clip); the parameters do not depend on it here.
    auto ex = std::make_unique<ZeroExchange>(*comm, store, cut, shard, *shard_grads, *be, true, zero, 1, shard_master, gather_in_forward);
    z = ex.get();
    opt = std::make_unique<GatherAfterStep>(std::move(opt), *ex);
    exchange = std::move(ex);
  } else {
    exchange = std::make_unique<BucketedAllreduce>(*comm, store, kBucket);
  }
  TrainConfig tc;
  tc.iterations = 4;
  tc.warmup = 0;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::constant, 1e-3f, 0, 4};
  SyntheticLlamaTokens data(c.batch, c.seq_len, c.vocab, 31 + static_cast<uint64_t>(world().rank));
  Trainer t(*model, *be, *opt, tc, &store.grads(), &store);
  RankTrace trace;
  const cuda::MappingStats before = cuda::mapping_stats();
  t.run(data, exchange.get(), trace, {}, nullptr);
  be->synchronize();
  const cuda::MappingStats steps = cuda::mapping_stats() - before;
  // The last buckets' chunks are unmapped by the next commit that finds their work done: one of
  // the first value (mapped already, or one more chunk).
  if (shard_master) store.values().commit(0, 1);
  ZeroRun out;
  out.sharded_master = shard_master;
  out.driver_calls = steps.maps + steps.unmaps + steps.creates + steps.releases;
  out.held_after = be->allocated_bytes();
  out.values_bytes = static_cast<int64_t>(store.size() * sizeof(float));
  if (z) z->restore_values();
  out.params.resize(store.size());
  store.values().read(out.params);
  return out;
}

TEST(StagedMpiOnOneGpu, ZeroShardedMasterInMappedMemory) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const ZeroRun replicated = train_zero(0, false), whole = train_zero(1, false), sharded = train_zero(1, true);
  const ZeroRun stage2 = train_zero(2, true), at_step_end = train_zero(1, true, false);
  ASSERT_TRUE(sharded.sharded_master) << "this GPU has no virtual memory management: the master could not be sharded";
  ASSERT_EQ(sharded.params.size(), whole.params.size());
  // The all-gathers waited for layer by layer in forward (the default), or all at the step's
  // end: the same bf16 copies before every layer's forward, the same parameters.
  EXPECT_EQ(std::memcmp(at_step_end.params.data(), sharded.params.data(), whole.params.size() * sizeof(float)), 0)
      << "--zero-gather step and forward gave other parameters";
  // The same collectives, optimizer kernels and conversions: bit for bit.
  EXPECT_EQ(std::memcmp(sharded.params.data(), whole.params.data(), whole.params.size() * sizeof(float)), 0)
      << "sharding the master in mapped memory changed the parameters";
  // ZeRO-2 runs stage 1's collectives on the same buffers, its gradients mapped before backward
  // writes them and unmapped once reduce-scattered: stage 1's parameters, bit for bit.
  EXPECT_EQ(std::memcmp(stage2.params.data(), sharded.params.data(), whole.params.size() * sizeof(float)), 0)
      << "ZeRO-2 on mapped gradients changed the parameters";
  EXPECT_LT(stage2.held_after, sharded.held_after) << "ZeRO-2 gave no gradient memory back";
  // The other ranks' values take turns in the values' pool (Buffer::share): set up before the
  // steps, so the steps of stage 1 map nothing (stage 2's take turns from its third step).
  EXPECT_EQ(sharded.driver_calls, 0) << "the sharded master was remapped in the steps";
  EXPECT_EQ(at_step_end.driver_calls, 0) << "the sharded master was remapped in the steps (--zero-gather step)";
  // Against the allreduce: one addition per element on 2 ranks, so equal up to the optimizer's
  // association; held to 1e-6 of the parameters' scale.
  double worst = 0, scale = 0;
  for (size_t i = 0; i < whole.params.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(whole.params[i]) - replicated.params[i]));
    scale = std::max(scale, std::abs(static_cast<double>(replicated.params[i])));
  }
  EXPECT_LE(worst, 1e-6 * scale);
  // Between steps a rank holds its half of the matrices' values, the kept ones (the embedding,
  // the norms, chunks shared with them) and the pool the other values take turns in (the
  // buckets live at once: two or three of 32 MiB, half of each): an eighth of the value buffer
  // is given back at the very least.
  EXPECT_LT(sharded.held_after, whole.held_after - sharded.values_bytes / 8)
      << "sharded " << sharded.held_after << " bytes, whole " << whole.held_after << ", values " << sharded.values_bytes;
}

}  // namespace
}  // namespace dlperf::test
