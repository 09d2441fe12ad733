// MpiCommunicator under mpirun (2, 3, 4 ranks): exact results, bit-identical broadcasts,
// several outstanding requests, progress while the caller computes, timeouts that name the
// rank that is behind, the benchmark's corrupted-buffer check, and collectives that do not
// fault their temporary buffers in again on every call.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "comm/allreduce_bench.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "mpi_test_env.h"

namespace dlperf {
namespace {

using test::fast_options;
using test::world;

std::vector<float> check_input(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = check_value(rank, i);
  return v;
}

size_t count_wrong(const std::vector<float>& v, int ranks) {
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != expected_sum(ranks, i);
  return wrong;
}

TEST(World, LayoutIsConsistent) {
  const WorldInfo& w = world();
  EXPECT_EQ(static_cast<int>(w.hosts.size()), w.size);
  EXPECT_EQ(w.hosts[static_cast<size_t>(w.rank)], w.this_host);
  EXPECT_GE(w.node_count, 1);
  EXPECT_LT(w.local_rank, w.local_size);
  EXPECT_LT(w.node_index, w.node_count);
  if (w.node_count == 1) {
    EXPECT_EQ(w.local_size, w.size);
    EXPECT_EQ(w.local_rank, w.rank);
  }
}

// Slurm's --gpu-bind=closest shows a rank every GPU of its socket; with more ranks on a socket
// than GPUs, local rank modulo the count paired two ranks on one GPU, and NCCL ended the job at
// its set-up, after the model was built. Every rank gets the same answer, so all stop alike.
TEST(World, RanksSharingAGpuAreNamed) {
  const WorldInfo& w = world();
  if (w.node_count != 1) GTEST_SKIP() << "the ranks are on several hosts";
  const std::string shared = shared_gpu(MPI_COMM_WORLD, w, "0000:17:00.0", 4);
  EXPECT_EQ(shared.rfind("ranks 0 and 1 on " + w.this_host + " both use GPU 0000:17:00.0: each rank sees 4 GPU(s) and takes its local rank "
                         "modulo that count; show each rank all of its node's GPUs with one rank per GPU (srun --gpu-bind=none)",
                         0),
            0u)
      << shared;
  char own[32];
  std::snprintf(own, sizeof own, "0000:%02x:00.0", 0x17 + w.rank);
  EXPECT_EQ(shared_gpu(MPI_COMM_WORLD, w, own, 8), "");
  EXPECT_EQ(shared_gpu(MPI_COMM_WORLD, w, "", 0), "");  // the CPU backend: no GPU to share
}

TEST(MpiCommunicator, BroadcastIsBitIdentical) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  const size_t n = 100'003;
  // Arbitrary bit patterns (NaN payloads, denormals, -0) must arrive unchanged.
  std::vector<uint32_t> bits(n);
  std::mt19937 gen(1234);
  for (auto& b : bits) b = gen();
  std::vector<float> expected(n), data(n, -1.0f);
  std::memcpy(expected.data(), bits.data(), n * sizeof(float));
  const int root = comm.size() - 1;
  if (comm.rank() == root) data = expected;
  comm.broadcast(data.data(), n, root);
  EXPECT_EQ(std::memcmp(data.data(), expected.data(), n * sizeof(float)), 0);
}

TEST(MpiCommunicator, AllreduceIsExact) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, (size_t{1} << 20) + 3}) {
    std::vector<float> v = check_input(comm.rank(), n);
    CommRequest r = comm.allreduce_sum_start(v.data(), n);
    comm.wait(r);
    EXPECT_EQ(count_wrong(v, comm.size()), 0u) << "count " << n;
    EXPECT_TRUE(r.completed());
    EXPECT_EQ(r.bytes(), n * sizeof(float));
  }
  comm.barrier();
}

// Reduce-scatter and all-gather (the sharded optimizer's collectives, issue 25): exact sums in
// each rank's block, equal blocks (nccl-tests' shape) and unequal ones (a bucket that does not
// divide by the ranks, and an empty block), two outstanding at once.
TEST(MpiCommunicator, ReduceScatterAndAllGatherAreExact) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  const auto ranks = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  std::vector<std::vector<size_t>> layouts{std::vector<size_t>(ranks, 1000), {}};
  for (size_t r = 0; r < ranks; ++r) layouts[1].push_back(r == 1 ? 0 : 777 + 13 * r);
  for (const auto& counts : layouts) {
    size_t total = 0, mine = 0;
    for (size_t r = 0; r < ranks; ++r) {
      if (r < me) mine += counts[r];
      total += counts[r];
    }
    const std::vector<float> send = check_input(comm.rank(), total);
    std::vector<float> recv(counts[me] + 1, -1.0f);  // one guard element past the block
    std::vector<float> gathered(total, -1.0f);
    for (size_t i = 0; i < counts[me]; ++i) gathered[mine + i] = static_cast<float>(me * 100'000 + i);  // this rank's block
    CommRequest rs = comm.reduce_scatter_start(send.data(), recv.data(), counts);
    CommRequest ag = comm.all_gather_start(gathered.data() + mine, gathered.data(), counts);  // in place
    comm.wait(rs);
    comm.wait(ag);
    size_t wrong = 0;
    for (size_t i = 0; i < counts[me]; ++i) wrong += recv[i] != expected_sum(comm.size(), mine + i);
    EXPECT_EQ(wrong, 0u) << "reduce-scatter, block of " << counts[me];
    EXPECT_EQ(recv[counts[me]], -1.0f) << "reduce-scatter wrote past its block";
    wrong = 0;
    size_t off = 0;
    for (size_t r = 0; r < ranks; ++r)
      for (size_t i = 0; i < counts[r]; ++i) wrong += gathered[off++] != static_cast<float>(r * 100'000 + i);
    EXPECT_EQ(wrong, 0u) << "all-gather in place";
    // Out of place: from a separate block into a fresh buffer.
    const std::vector<float> block(gathered.begin() + static_cast<std::ptrdiff_t>(mine),
                                   gathered.begin() + static_cast<std::ptrdiff_t>(mine + counts[me]));
    std::vector<float> out(total, -1.0f);
    CommRequest ag2 = comm.all_gather_start(block.data(), out.data(), counts);
    comm.wait(ag2);
    EXPECT_EQ(out, gathered) << "all-gather out of place";
    EXPECT_EQ(rs.op(), CommOp::reduce_scatter_sum);
    EXPECT_EQ(rs.bytes(), total * sizeof(float));
  }
  comm.barrier();
}

// Open MPI's non-blocking collectives allocate their temporary buffers per call (a bucket's
// size); glibc would give them back to the kernel when they are freed, and every later call,
// every step, would fault them in again page by page (28 MB a step per rank of a reduced Llama
// in 4 MiB buckets). The session keeps freed heap memory (mpi_session.cpp): after a first round
// of eight buckets in flight at once, a later one faults in next to nothing (512 pages without it).
TEST(MpiCommunicator, RepeatedCollectivesFaultInNoNewPages) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  constexpr size_t kFloats = size_t{1} << 20;  // 4 MiB, as a gradient bucket
  std::vector<std::vector<float>> buckets(8, std::vector<float>(kFloats, 1.0f));
  const auto round = [&] {
    std::vector<CommRequest> r;
    for (auto& b : buckets) r.push_back(comm.allreduce_sum_start(b.data(), kFloats));
    wait_all(comm, r);
  };
  round();
  long faults = LONG_MAX;  // the fewest of three rounds: the process's other threads fault now and then
  for (int i = 0; i < 3; ++i) {
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    round();
    ::getrusage(RUSAGE_SELF, &after);
    faults = std::min(faults, after.ru_minflt - before.ru_minflt);
  }
  const long touched = static_cast<long>(8 * kFloats * sizeof(float)) / ::sysconf(_SC_PAGESIZE);  // the collectives' data, in pages
  if (world().rank == 0) std::printf("8 collectives of 4 MiB after a first round: %ld minor faults (their data: %ld pages)\n", faults, touched);
  EXPECT_LT(faults, touched / 100) << "the collectives' temporary buffers are faulted in again on every call";
  comm.barrier();
}

TEST(MpiCommunicator, SeveralOutstandingRequestsComplete) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  // Like gradient buckets: started one after another, waited for at the end.
  const std::vector<size_t> sizes{1000, 250'000, 17, 600'000, 4096, 1};
  std::vector<std::vector<float>> buckets;
  std::vector<CommRequest> requests;
  for (size_t n : sizes) buckets.push_back(check_input(comm.rank(), n));
  for (auto& b : buckets) requests.push_back(comm.allreduce_sum_start(b.data(), b.size()));
  for (size_t i = 1; i < requests.size(); ++i) EXPECT_EQ(requests[i].seq(), requests[i - 1].seq() + 1);
  wait_all(comm, requests);
  for (size_t i = 0; i < buckets.size(); ++i) {
    EXPECT_EQ(count_wrong(buckets[i], comm.size()), 0u) << "bucket " << i;
    ASSERT_TRUE(requests[i].completed_at().has_value());
    EXPECT_LE(requests[i].started_at(), *requests[i].completed_at());
    EXPECT_GE(requests[i].seconds(), 0.0);
  }
}

TEST(MpiCommunicator, ProgressesWhileCallerComputes) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  std::vector<float> v = check_input(comm.rank(), 1 << 18);  // 1 MiB
  comm.barrier();
  CommRequest r = comm.allreduce_sum_start(v.data(), v.size());
  // "Compute" without any MPI call, long enough for a 1 MiB allreduce even oversubscribed.
  const auto compute_end = CommClock::now() + std::chrono::milliseconds(500);
  volatile double sink = 0;
  while (CommClock::now() < compute_end) sink = sink + 1.0;
  EXPECT_TRUE(comm.test(r)) << "the allreduce made no progress while the caller computed";
  comm.wait(r);
  ASSERT_TRUE(r.completed_at().has_value());
  EXPECT_LT(*r.completed_at(), compute_end);  // the trainer's overlap proof, in miniature
  EXPECT_EQ(count_wrong(v, comm.size()), 0u);
}

TEST(MpiCommunicator, TimeoutNamesTheRankThatHasNotStarted) {
  CommOptions o = fast_options();
  o.timeout = std::chrono::milliseconds(1500);
  MpiCommunicator comm(MPI_COMM_WORLD, world(), o);
  const int late = comm.size() - 1;
  std::vector<float> v = check_input(comm.rank(), 1000);
  if (comm.rank() != late) {
    CommRequest r = comm.allreduce_sum_start(v.data(), v.size());
    try {
      comm.wait(r);
      ADD_FAILURE() << "wait returned although rank " << late << " never started";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::fault);
      const std::string what = e.what();
      EXPECT_NE(what.find("allreduce #1"), std::string::npos) << what;
      EXPECT_NE(what.find("rank " + std::to_string(late) + " ("), std::string::npos) << what;
      EXPECT_NE(what.find("has not started operation #1"), std::string::npos) << what;
    }
    // Let the late rank join; the same request then completes normally.
    int token = 1;
    MPI_Send(&token, 1, MPI_INT, late, 99, MPI_COMM_WORLD);
    comm.wait(r);
  } else {
    for (int p = 0; p < comm.size() - 1; ++p) {
      int token = 0;
      MPI_Recv(&token, 1, MPI_INT, p, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    CommRequest r = comm.allreduce_sum_start(v.data(), v.size());
    comm.wait(r);
  }
  EXPECT_EQ(count_wrong(v, comm.size()), 0u);
}

TEST(AllreduceBench, ExactWithoutCorruptionAndCatchesACorruptedBuffer) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  BenchConfig c;
  c.min_bytes = 4;
  c.max_bytes = 4096;
  c.factor = 8;
  c.iters = 2;
  c.warmup = 1;
  for (const BenchRow& row : run_allreduce_bench(comm, c)) {
    EXPECT_EQ(row.out_of_place.wrong, 0u) << row.bytes;
    EXPECT_EQ(row.in_place.wrong, 0u) << row.bytes;
    EXPECT_GT(row.out_of_place.time_us, 0.0);
    EXPECT_GT(row.in_place.time_us, 0.0);
  }
  c.corrupt_rank = comm.size() - 1;
  for (const BenchRow& row : run_allreduce_bench(comm, c)) {  // one bad element, seen by every rank
    EXPECT_EQ(row.out_of_place.wrong, static_cast<uint64_t>(comm.size())) << row.bytes;
    EXPECT_EQ(row.in_place.wrong, static_cast<uint64_t>(comm.size())) << row.bytes;
  }
}

// Every element type MPI can reduce, out of place (the receive buffer starts as 0xff bytes, so
// an implementation that reduced in place would be caught) and in place.
TEST(AllreduceBench, EveryMpiTypeOutOfPlaceAndInPlace) {
  MpiCommunicator comm(MPI_COMM_WORLD, world(), fast_options());
  for (DataType t : kAllDataTypes) {
    EXPECT_EQ(comm.supports(t), t != DataType::float16 && t != DataType::bfloat16) << to_string(t);
    if (!comm.supports(t)) continue;
    BenchConfig c;
    c.type = t;
    c.min_bytes = 8;
    c.max_bytes = 1000;
    c.factor = 5;
    c.iters = 1;
    c.warmup = 0;
    const auto rows = run_allreduce_bench(comm, c);
    ASSERT_EQ(rows.size(), 4u) << to_string(t);  // 8, 40, 200, 1000 bytes
    for (const BenchRow& row : rows) {
      EXPECT_EQ(row.count, row.bytes / size_of(t));
      EXPECT_EQ(row.out_of_place.wrong + row.in_place.wrong, 0u) << to_string(t) << " " << row.bytes;
    }
  }
  BenchConfig half;
  half.type = DataType::float16;
  EXPECT_THROW(run_allreduce_bench(comm, half), Error);
}

}  // namespace
}  // namespace dlperf
