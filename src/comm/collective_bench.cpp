// dlperf-comm --op reduce_scatter | all_gather: the sharded optimizer's collectives measured like
// the allreduce (method and definitions in allreduce_bench.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>

#include "comm/allreduce_bench.h"
#include "core/error.h"

namespace dlperf {
namespace {

double mean_over_ranks(Communicator& comm, CommBuffer& scratch, double value) {
  scratch.upload_bytes(std::as_bytes(std::span<const double>(&value, 1)));
  CommRequest r = comm.allreduce_start(scratch.bytes(), scratch.bytes(), 1, DataType::float64);
  comm.wait(r);
  scratch.download_bytes(std::as_writable_bytes(std::span<double>(&value, 1)));
  return value / comm.size();
}

// One placement of one size: `launch` starts the operation once; `check` runs it on the check
// pattern and returns this rank's wrong elements.
template <class Launch, class Check>
BenchResult measure(Communicator& comm, CommBuffer& scratch, const BenchConfig& c, size_t bytes, Launch&& launch, Check&& check) {
  for (int i = 0; i < c.warmup; ++i) {
    CommRequest r = launch();
    comm.wait(r);
  }
  comm.barrier();
  const auto t0 = CommClock::now();
  for (int i = 0; i < c.iters; ++i) {
    CommRequest r = launch();
    comm.wait(r);
  }
  const double local_s = std::chrono::duration<double>(CommClock::now() - t0).count() / c.iters;
  BenchResult res;
  const double mean_s = mean_over_ranks(comm, scratch, local_s);
  res.time_us = mean_s * 1e6;
  res.algbw_gbs = mean_s > 0 ? static_cast<double>(bytes) / mean_s / 1e9 : 0.0;
  res.busbw_gbs = res.algbw_gbs * bus_factor(c.op, comm.size());
  res.wrong = static_cast<uint64_t>(std::llround(mean_over_ranks(comm, scratch, static_cast<double>(check())) * comm.size()));
  return res;
}

}  // namespace

std::string sharded_bench_problem(const BenchConfig& config, int ranks) {
  // Each rank's block is at least one float: below that every row would exceed the largest size asked for.
  const size_t least = static_cast<size_t>(std::max(ranks, 1)) * sizeof(float);
  if (config.max_bytes >= least) return {};
  return std::string("--op ") + op_name(config.op) + " on " + std::to_string(ranks) + " ranks moves at least " + std::to_string(least) +
         " bytes (one float per rank): --max-bytes (-e) " + std::to_string(config.max_bytes) + " is below that";
}

std::vector<BenchRow> run_sharded_bench(Communicator& comm, const BenchConfig& config,
                                        const std::function<void(const BenchRow&)>& on_row) {
  DLPERF_ASSERT(config.op == CommOp::reduce_scatter_sum || config.op == CommOp::all_gather, "a sharded collective");
  if (config.type != DataType::float32)
    throw Error(ErrorKind::usage, std::string("--op ") + op_name(config.op) + " measures float only (the sharded optimizer's type); drop --datatype");
  const auto n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  const int rank = comm.rank();
  if (const std::string why = sharded_bench_problem(config, comm.size()); !why.empty()) throw Error(ErrorKind::usage, why);
  auto scratch = comm.make_byte_buffer(sizeof(double));
  std::vector<BenchRow> rows;
  for (size_t size : bench_sizes(config)) {
    const size_t block = std::max<size_t>(1, size / sizeof(float) / n), total = block * n;  // whole blocks, at least one element
    if (!rows.empty() && rows.back().count == total) continue;
    BenchRow row;
    if (config.op == CommOp::all_gather) row.redop = "none";
    row.count = total;
    row.bytes = total * sizeof(float);
    const std::vector<size_t> counts(n, block);
    const size_t mine = me * block;
    auto send = comm.make_buffer(total), recv = comm.make_buffer(total);
    std::vector<float> pattern(total);  // this rank's check input: (rank + i) % 13 + 1 at element i
    for (size_t i = 0; i < total; ++i) pattern[i] = check_value(rank, i);
    std::vector<float> got(total);
    if (config.op == CommOp::reduce_scatter_sum) {
      const auto check_at = [&](float* out) {
        send->upload(pattern);
        CommRequest r = comm.reduce_scatter_start(send->data(), out, counts);
        comm.wait(r);
        (out == recv->data() ? recv : send)->download(got);
        const size_t at = out == recv->data() ? 0 : mine;
        size_t wrong = 0;
        for (size_t i = 0; i < block; ++i) wrong += got[at + i] != expected_sum(comm.size(), mine + i);
        return wrong;
      };
      row.out_of_place = measure(comm, *scratch, config, row.bytes, [&] { return comm.reduce_scatter_start(send->data(), recv->data(), counts); },
                                 [&] { return check_at(recv->data()); });
      if (comm.backend() == CommBackend::nccl) {  // NCCL's in place: the result in the rank's block of the send buffer
        row.in_place = measure(comm, *scratch, config, row.bytes,
                               [&] { return comm.reduce_scatter_start(send->data(), send->data() + mine, counts); },
                               [&] { return check_at(send->data() + mine); });
      } else {
        row.in_place.measured = false;
      }
    } else {
      std::vector<float> want(total);  // block r holds rank r's pattern
      for (size_t r = 0; r < n; ++r)
        for (size_t i = 0; i < block; ++i) want[r * block + i] = check_value(static_cast<int>(r), r * block + i);
      const auto check = [&](bool in_place) {
        std::vector<float> start(total, -1.0f), own(total, -1.0f);
        std::copy_n(want.begin() + static_cast<std::ptrdiff_t>(mine), block, start.begin() + static_cast<std::ptrdiff_t>(mine));
        std::copy_n(want.begin() + static_cast<std::ptrdiff_t>(mine), block, own.begin());
        recv->upload(start);
        send->upload(own);
        CommRequest r = comm.all_gather_start(in_place ? recv->data() + mine : send->data(), recv->data(), counts);
        comm.wait(r);
        recv->download(got);
        size_t wrong = 0;
        for (size_t i = 0; i < total; ++i) wrong += got[i] != want[i];
        return wrong;
      };
      row.out_of_place = measure(comm, *scratch, config, row.bytes, [&] { return comm.all_gather_start(send->data(), recv->data(), counts); },
                                 [&] { return check(false); });
      row.in_place = measure(comm, *scratch, config, row.bytes,
                             [&] { return comm.all_gather_start(recv->data() + mine, recv->data(), counts); }, [&] { return check(true); });
    }
    if (on_row) on_row(row);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace dlperf
