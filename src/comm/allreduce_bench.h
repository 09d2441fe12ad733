// The allreduce benchmark behind `dlperf-comm`, run through the same Communicator training uses.
// Method (after nccl-tests): per message size, `warmup` untimed allreduces, a barrier, then
// `iters` allreduces each started and waited in turn; time = mean per allreduce, averaged over
// ranks. algbw = bytes / time; busbw = algbw * 2(n-1)/n, nccl-tests' allreduce definition: the
// bytes each rank must send and receive in a ring, so it is comparable with link bandwidth and
// independent of n. Timed buffers hold zeros (values stay fixed however many times they are
// summed); then a separate check pass fills every rank with small integers whose sum is exact
// in float32 and counts the elements that differ from the known sum, over all ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <vector>

#include "comm/communicator.h"

namespace dlperf {

struct BenchConfig {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{32} << 20;
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  int corrupt_rank = -1;  // test hook: this rank perturbs one input element before the check
};

struct BenchRow {
  size_t bytes = 0;
  size_t count = 0;        // float32 elements
  double time_us = 0;      // mean per allreduce, averaged over ranks
  double algbw_gbs = 0;    // GB/s, 1e9 bytes
  double busbw_gbs = 0;
  uint64_t wrong = 0;      // elements differing from the exact sum, summed over ranks
};

std::vector<size_t> bench_sizes(const BenchConfig& config);  // bytes, multiples of 4
double bus_bandwidth(double algbw, int ranks);                // algbw * 2(n-1)/n

// The check pattern: rank r, element i holds (r + i) % 13 + 1; the sum over n ranks is at most
// 13n, an integer float32 represents exactly whatever the reduction order.
float check_value(int rank, size_t i);
float expected_sum(int ranks, size_t i);

// Collective: every rank runs it with the same config.
std::vector<BenchRow> run_allreduce_bench(Communicator& comm, const BenchConfig& config);

void print_bench_header(std::ostream& os, const Communicator& comm, int node_count, const BenchConfig& config);
void print_bench_row(std::ostream& os, const BenchRow& row);

}  // namespace dlperf
