// The allreduce benchmark behind `dlperf-comm`, run through the same Communicator training
// uses, measured and printed the way nccl-tests' all_reduce_perf does (so its output reads,
// and is parsed, like theirs). Method: per message size, out of place (send != recv) and then
// in place, each `warmup` untimed allreduces, a barrier, then `iters` allreduces each started
// and waited in turn; time = mean per allreduce, averaged over ranks. algbw = bytes / time;
// busbw = algbw * 2(n-1)/n, nccl-tests' allreduce definition: the bytes each rank must send
// and receive in a ring, so it is comparable with link bandwidth and independent of n. The
// average bus bandwidth is the mean busbw over every size, out of place and in place, as
// nccl-tests' "# Avg bus bandwidth" is. Timed buffers hold zeros (values stay fixed however
// many times they are summed); then a check pass per size and placement fills every rank with
// small integers whose sum the element type holds exactly, and counts the elements that
// differ from the known sum, over all ranks (#wrong).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dlperf {

struct BenchConfig {
  CommOp op = CommOp::allreduce_sum;         // --op: allreduce_sum, reduce_scatter_sum, all_gather
  size_t min_bytes = 8;                      // -b
  size_t max_bytes = size_t{32} << 20;       // -e
  double factor = 2.0;                       // -f
  int iters = 20;                            // -n
  int warmup = 5;                            // -w
  DataType type = DataType::float32;         // -d
  int corrupt_rank = -1;  // test hook: this rank perturbs one input element before each check
};

struct BenchResult {
  bool measured = true;    // false: this placement is not measured (MPI's in-place reduce-scatter)
  double time_us = 0;      // mean per allreduce, averaged over ranks
  double algbw_gbs = 0;    // GB/s, 1e9 bytes
  double busbw_gbs = 0;
  uint64_t wrong = 0;      // elements differing from the exact sum, summed over ranks
};

struct BenchRow {
  const char* redop = "sum";  // "none" for all_gather, as nccl-tests prints it
  size_t bytes = 0;
  size_t count = 0;  // elements of the type
  BenchResult out_of_place, in_place;
};

// Sizes from min to max bytes, times factor each step, whole elements (at least one).
std::vector<size_t> bench_sizes(const BenchConfig& config);
double bus_bandwidth(double algbw, int ranks);  // algbw * 2(n-1)/n
// nccl-tests' bus-bandwidth factor of an operation: allreduce 2(n-1)/n, reduce-scatter and
// all-gather (n-1)/n (algbw counting the whole buffer, all ranks' blocks).
double bus_factor(CommOp op, int ranks);
const char* op_name(CommOp op);  // "allreduce", "reduce_scatter", "all_gather"

// dlperf-comm --op reduce_scatter | all_gather (collective_bench.cpp): the same sizes, method and
// rows, float only. A row's size and count are the whole buffer (every rank's block; each rank's
// block is count / n elements), as nccl-tests' reduce_scatter_perf and all_gather_perf print
// them; algbw = size / time, busbw = algbw (n-1)/n. In place: reduce-scatter into the rank's
// block of its own send buffer (NCCL only: MPI's in-place reduce-scatter puts the result at the
// buffer's start, so the MPI row says n/a); all-gather from the rank's block of the receive buffer.
// #wrong: reduce-scatter, block elements differing from the exact sum of the check pattern;
// all-gather, elements differing from their owner's pattern.
// Why `config` cannot be measured on `ranks` ranks by run_sharded_bench ("" when it can).
std::string sharded_bench_problem(const BenchConfig& config, int ranks);
std::vector<BenchRow> run_sharded_bench(Communicator& comm, const BenchConfig& config,
                                        const std::function<void(const BenchRow&)>& on_row = {});

// The check pattern for float32 on n ranks: rank r, element i holds (r + i) % 13 + 1; the sum
// is at most 13n, an integer float32 represents exactly whatever the reduction order.
float check_value(int rank, size_t i);
float expected_sum(int ranks, size_t i);

// The same idea for every type: small integers whose sum over `ranks` stays exactly
// representable (int8 up to 127, half up to 2048, bfloat16 up to 256), written in the
// type's bytes. Elements are (count) of size_of(type).
std::vector<std::byte> check_input(DataType type, int rank, int ranks, size_t count);
std::vector<std::byte> check_expected(DataType type, int ranks, size_t count);

// Collective: every rank runs it with the same config; on_row sees each row as it is done
// (dlperf-comm prints it then, as nccl-tests does). Error(usage) for a type the communicator
// cannot reduce.
std::vector<BenchRow> run_allreduce_bench(Communicator& comm, const BenchConfig& config,
                                          const std::function<void(const BenchRow&)>& on_row = {});

// nccl-tests' mean of busbw over every row, out of place and in place.
double average_bus_bandwidth(const std::vector<BenchRow>& rows);

void print_bench_header(std::ostream& os, const Communicator& comm, int node_count, const BenchConfig& config);
void print_bench_row(std::ostream& os, const BenchRow& row, DataType type);
// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", and the one-line
// summary for scripts and ReFrame (docs/communication.md):
//   # dlperf-comm result: op=allreduce backend=mpi type=float redop=sum ranks=2 nodes=1 sizes=23
//     min_bytes=8 max_bytes=33554432 avg_busbw_gbs=1.234 peak_busbw_gbs=2.345 peak_bytes=33554432 wrong=0 status=PASS
void print_bench_footer(std::ostream& os, const Communicator& comm, int node_count, const BenchConfig& config,
                        const std::vector<BenchRow>& rows);
// The summary's key=value fields alone ("op=allreduce ... status=PASS").
std::string bench_result_fields(const Communicator& comm, int node_count, const BenchConfig& config, const std::vector<BenchRow>& rows);

// dlperf-comm --output FILE.comm: the measurement as a small text record that dlperf-reduce
// tabulates beside the training runs (fabric health, docs/communication.md). Lines:
//   dlperf-comm record 1                      (kBenchRecordMagic; the version)
//   # ...                                     (comments)
//   result op=allreduce ... status=PASS       (bench_result_fields)
//   row BYTES COUNT OOP_US OOP_ALGBW OOP_BUSBW IP_US IP_ALGBW IP_BUSBW WRONG   (one per size)
inline constexpr const char* kBenchRecordMagic = "dlperf-comm record 1";
std::string format_bench_record(const Communicator& comm, int node_count, const BenchConfig& config, const std::vector<BenchRow>& rows);

}  // namespace dlperf
