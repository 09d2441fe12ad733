// Allreduce benchmark; method in allreduce_bench.h.
#include "comm/allreduce_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace dlperf {

std::vector<size_t> bench_sizes(const BenchConfig& c) {
  std::vector<size_t> sizes;
  double b = static_cast<double>(c.min_bytes);
  while (b <= static_cast<double>(c.max_bytes) * (1 + 1e-12)) {
    size_t bytes = std::max<size_t>(4, static_cast<size_t>(b) / 4 * 4);
    if (sizes.empty() || bytes != sizes.back()) sizes.push_back(bytes);
    if (c.factor <= 1.0) break;
    b *= c.factor;
  }
  return sizes;
}

double bus_bandwidth(double algbw, int ranks) { return ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0.0; }

float check_value(int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) + i) % 13 + 1); }

float expected_sum(int ranks, size_t i) {
  long long s = 0;
  for (int r = 0; r < ranks; ++r) s += static_cast<long long>((static_cast<size_t>(r) + i) % 13 + 1);
  return static_cast<float>(s);
}

namespace {

// Sum of one value over ranks through the communicator itself (exact for counts < 2^24).
double sum_over_ranks(Communicator& comm, CommBuffer& scratch, double value) {
  float v = static_cast<float>(value);
  scratch.upload({&v, 1});
  CommRequest r = comm.allreduce_sum_start(scratch.data(), 1);
  comm.wait(r);
  scratch.download({&v, 1});
  return static_cast<double>(v);
}

uint64_t check_once(Communicator& comm, CommBuffer& buf, std::vector<float>& host, int corrupt_rank) {
  const size_t n = host.size();
  for (size_t i = 0; i < n; ++i) host[i] = check_value(comm.rank(), i);
  if (comm.rank() == corrupt_rank && n > 0) host[n / 2] += 1000.0f;
  buf.upload(host);
  CommRequest r = comm.allreduce_sum_start(buf.data(), n);
  comm.wait(r);
  buf.download(host);
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += host[i] != expected_sum(comm.size(), i);
  return wrong;
}

}  // namespace

std::vector<BenchRow> run_allreduce_bench(Communicator& comm, const BenchConfig& config) {
  std::vector<BenchRow> rows;
  auto scratch = comm.make_buffer(1);
  for (size_t bytes : bench_sizes(config)) {
    BenchRow row;
    row.bytes = bytes;
    row.count = bytes / sizeof(float);
    auto buf = comm.make_buffer(row.count);
    std::vector<float> host(row.count, 0.0f);
    buf->upload(host);

    for (int i = 0; i < config.warmup; ++i) {
      CommRequest r = comm.allreduce_sum_start(buf->data(), row.count);
      comm.wait(r);
    }
    comm.barrier();
    const auto t0 = CommClock::now();
    for (int i = 0; i < config.iters; ++i) {
      CommRequest r = comm.allreduce_sum_start(buf->data(), row.count);
      comm.wait(r);
    }
    const double local_s = std::chrono::duration<double>(CommClock::now() - t0).count() / config.iters;
    const double mean_s = sum_over_ranks(comm, *scratch, local_s) / comm.size();
    row.time_us = mean_s * 1e6;
    row.algbw_gbs = mean_s > 0 ? static_cast<double>(bytes) / mean_s / 1e9 : 0.0;
    row.busbw_gbs = bus_bandwidth(row.algbw_gbs, comm.size());

    const uint64_t local_wrong = check_once(comm, *buf, host, config.corrupt_rank);
    row.wrong = static_cast<uint64_t>(std::llround(sum_over_ranks(comm, *scratch, static_cast<double>(local_wrong))));
    rows.push_back(row);
  }
  return rows;
}

void print_bench_header(std::ostream& os, const Communicator& comm, int node_count, const BenchConfig& c) {
  char line[256];
  std::snprintf(line, sizeof line, "# dlperf-comm: allreduce (sum, float32, in place), backend %s, %d ranks on %d node(s)\n",
                to_string(comm.backend()), comm.size(), node_count);
  os << line;
  std::snprintf(line, sizeof line, "# time: mean of %d allreduces after %d warm-up and a barrier, averaged over ranks\n",
                c.iters, c.warmup);
  os << line;
  os << "# algbw = size / time; busbw = algbw * 2(n-1)/n (nccl-tests' allreduce definition); GB = 1e9 bytes\n";
  os << "# #wrong: elements differing from the exact sum of crafted small-integer inputs, over all ranks\n";
  std::snprintf(line, sizeof line, "%14s %12s %12s %12s %12s %8s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong");
  os << line;
}

void print_bench_row(std::ostream& os, const BenchRow& r) {
  char line[160];
  std::snprintf(line, sizeof line, "%14zu %12zu %12.2f %12.3f %12.3f %8llu\n", r.bytes, r.count, r.time_us, r.algbw_gbs,
                r.busbw_gbs, static_cast<unsigned long long>(r.wrong));
  os << line;
}

}  // namespace dlperf
