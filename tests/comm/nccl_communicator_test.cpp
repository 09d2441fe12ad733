// NcclCommunicator under mpirun: runs only where every local rank has its own GPU (NCCL does
// not allow two ranks on one device); skips cleanly elsewhere, identically on every rank.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "comm/allreduce_bench.h"
#include "comm/nccl/nccl_communicator.h"
#include "mpi_test_env.h"

namespace dlperf {
namespace {

bool enough_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return false;
  return n >= test::world().local_size;
}

TEST(NcclCommunicator, AllreduceBroadcastAndCorruptCheck) {
  if (!enough_gpus()) GTEST_SKIP() << "needs one GPU per local rank";
  select_device_by_local_rank(test::world());
  NcclCommunicator comm(MPI_COMM_WORLD, test::world(), nullptr, test::fast_options());

  const size_t n = 100'003;
  auto buf = comm.make_buffer(n);
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = check_value(comm.rank(), i);
  buf->upload(host);
  CommRequest r = comm.allreduce_sum_start(buf->data(), n);
  comm.wait(r);
  buf->download(host);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += host[i] != expected_sum(comm.size(), i);
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(r.completed_at().has_value());

  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(comm.rank() * 7 + 1);
  buf->upload(host);
  comm.broadcast(buf->data(), n, 0);
  buf->download(host);
  EXPECT_EQ(host.front(), 1.0f);
  EXPECT_EQ(host.back(), 1.0f);
  comm.barrier();

  BenchConfig c;
  c.max_bytes = 4096;
  c.factor = 16;
  c.iters = 2;
  c.corrupt_rank = 0;
  for (const BenchRow& row : run_allreduce_bench(comm, c)) {
    EXPECT_EQ(row.out_of_place.wrong, static_cast<uint64_t>(comm.size()));
    EXPECT_EQ(row.in_place.wrong, static_cast<uint64_t>(comm.size()));
  }
  // Types MPI lacks, exact out of place and in place.
  for (DataType t : {DataType::float16, DataType::bfloat16, DataType::int8}) {
    c.type = t;
    c.corrupt_rank = -1;
    for (const BenchRow& row : run_allreduce_bench(comm, c)) EXPECT_EQ(row.out_of_place.wrong + row.in_place.wrong, 0u) << to_string(t);
  }
}

}  // namespace
}  // namespace dlperf
