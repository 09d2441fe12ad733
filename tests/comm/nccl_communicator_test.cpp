// NcclCommunicator under mpirun: runs only where every local rank has its own GPU (NCCL does
// not allow two ranks on one device); skips cleanly elsewhere, identically on every rank. Under
// DLPERF_REQUIRE_GPU=1 (scripts/gpu-check.sh) too few GPUs is a failure instead.
#include <cuda_runtime_api.h>
#include <algorithm>
#include <cstdlib>
#include <gtest/gtest.h>
#include <string_view>

#include "comm/allreduce_bench.h"
#include "comm/nccl/nccl_communicator.h"
#include "mpi_test_env.h"

namespace dlperf {
namespace {

bool enough_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  const bool ok = n >= test::world().local_size;
  const char* required = std::getenv("DLPERF_REQUIRE_GPU");
  if (!ok && required && std::string_view(required) == "1")
    ADD_FAILURE() << "DLPERF_REQUIRE_GPU=1, but " << n << " usable GPU(s) for " << test::world().local_size << " local rank(s)";
  return ok;
}

TEST(NcclCommunicator, AllreduceBroadcastAndCorruptCheck) {
  if (!enough_gpus()) GTEST_SKIP() << "needs one GPU per local rank";
  select_device_by_local_rank(test::world(), MPI_COMM_WORLD);
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

// Reduce-scatter and all-gather (issue 25): exact, equal blocks (ncclReduceScatter/AllGather)
// and unequal ones (grouped ncclReduce/ncclBroadcast), all-gather in place and out of place.
TEST(NcclCommunicator, ReduceScatterAndAllGatherAreExact) {
  if (!enough_gpus()) GTEST_SKIP() << "needs one GPU per local rank";
  select_device_by_local_rank(test::world(), MPI_COMM_WORLD);
  NcclCommunicator comm(MPI_COMM_WORLD, test::world(), nullptr, test::fast_options());
  const auto ranks = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  std::vector<std::vector<size_t>> layouts{std::vector<size_t>(ranks, 4096), {}};
  for (size_t r = 0; r < ranks; ++r) layouts[1].push_back(r == 0 ? 0 : 1000 + 7 * r);
  if (ranks == 1) layouts.pop_back();  // one rank (gpu-check on a one-GPU machine): the unequal layout would be empty
  for (const auto& counts : layouts) {
    size_t total = 0, mine = 0;
    for (size_t r = 0; r < ranks; ++r) {
      if (r < me) mine += counts[r];
      total += counts[r];
    }
    std::vector<float> host(total);
    for (size_t i = 0; i < total; ++i) host[i] = check_value(comm.rank(), i);
    auto send = comm.make_buffer(total), recv = comm.make_buffer(std::max<size_t>(1, counts[me]));
    send->upload(host);
    CommRequest rs = comm.reduce_scatter_start(send->data(), recv->data(), counts);
    comm.wait(rs);
    std::vector<float> got(std::max<size_t>(1, counts[me]));
    recv->download(got);
    size_t wrong = 0;
    for (size_t i = 0; i < counts[me]; ++i) wrong += got[i] != expected_sum(comm.size(), mine + i);
    EXPECT_EQ(wrong, 0u) << "reduce-scatter";
    // all-gather in place: every rank's block of `host` is its check values; the result is the
    // whole `host` pattern of each block's owner.
    std::vector<float> want(total);
    size_t off = 0;
    for (size_t r = 0; r < ranks; ++r)
      for (size_t i = 0; i < counts[r]; ++i, ++off) want[off] = check_value(static_cast<int>(r), off);
    std::vector<float> start(total, -1.0f);
    std::copy(want.begin() + static_cast<std::ptrdiff_t>(mine), want.begin() + static_cast<std::ptrdiff_t>(mine + counts[me]),
              start.begin() + static_cast<std::ptrdiff_t>(mine));
    auto data = comm.make_buffer(total);
    data->upload(start);
    CommRequest ag = comm.all_gather_start(data->data() + mine, data->data(), counts);
    comm.wait(ag);
    data->download(start);
    EXPECT_EQ(start, want) << "all-gather in place";
  }
}

}  // namespace
}  // namespace dlperf
