// Two ranks on one GPU (issue 13, item 8): NCCL refuses that, so the gradients go through MPI
// staged in pinned host memory (--comm mpi on the CUDA backend). Under mpirun -np 2: replicas
// that start different end bit-identical after training with bucketed, overlapped allreduces;
// bucket times are recorded; a stop seen by one rank stops both at the same iteration. Skips
// (on every rank) without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <csignal>

#include "../comm/mpi_test_env.h"
#include "comm/make_communicator.h"
#include "models/resnet.h"
#include "train/cluster.h"
#include "train/gradient_exchange.h"
#include "train/param_store.h"
#include "train/synthetic_data.h"
#include "train/trainer.h"

namespace dlperf::test {
namespace {

bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

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

}  // namespace
}  // namespace dlperf::test
