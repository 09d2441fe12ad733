// Allreduce benchmark; method in allreduce_bench.h.
#include "comm/allreduce_bench.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "core/error.h"

namespace dlperf {

std::vector<size_t> bench_sizes(const BenchConfig& c) {
  const size_t elem = size_of(c.type);
  std::vector<size_t> sizes;
  double b = static_cast<double>(c.min_bytes);
  while (b <= static_cast<double>(c.max_bytes) * (1 + 1e-12)) {
    size_t bytes = std::max<size_t>(elem, static_cast<size_t>(b) / elem * elem);
    if (sizes.empty() || bytes != sizes.back()) sizes.push_back(bytes);
    if (c.factor <= 1.0) break;
    b *= c.factor;
  }
  return sizes;
}

double bus_bandwidth(double algbw, int ranks) { return ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0.0; }

double bus_factor(CommOp op, int ranks) {
  if (ranks <= 0) return 0.0;
  const double n = ranks;
  return op == CommOp::allreduce_sum ? 2.0 * (n - 1) / n : (n - 1) / n;
}

const char* op_name(CommOp op) {
  switch (op) {
    case CommOp::reduce_scatter_sum: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
    default: return "allreduce";
  }
}

float check_value(int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) + i) % 13 + 1); }

float expected_sum(int ranks, size_t i) {
  long long s = 0;
  for (int r = 0; r < ranks; ++r) s += static_cast<long long>((static_cast<size_t>(r) + i) % 13 + 1);
  return static_cast<float>(s);
}

namespace {

// The largest integer sum the type holds exactly (consecutive integers up to it).
long long exact_limit(DataType t) {
  switch (t) {
    case DataType::int8: return 127;
    case DataType::uint8: return 255;
    case DataType::float16: return 2048;   // 11-bit significand
    case DataType::bfloat16: return 256;   // 8-bit significand
    case DataType::float32: return 1LL << 24;
    case DataType::int32: return INT32_MAX;
    case DataType::uint32: return UINT32_MAX;
    case DataType::float64: return 1LL << 53;
    case DataType::int64:
    case DataType::uint64: return LLONG_MAX;
  }
  return 0;
}

// Rank r < contributors holds (r + i) % modulus + 1 at element i, the others 0: the sum is at
// most modulus x contributors <= the type's limit. 13 values, as for float32, when they fit.
struct Pattern {
  long long modulus = 13;
  int contributors = 0;
};

Pattern pattern_for(DataType t, int ranks) {
  const long long limit = exact_limit(t);
  Pattern p;
  p.modulus = std::clamp<long long>(limit / std::max(ranks, 1), 1, 13);
  p.contributors = p.modulus * ranks <= limit ? ranks : static_cast<int>(limit);
  return p;
}

long long pattern_value(const Pattern& p, int rank, size_t i) {
  if (rank >= p.contributors) return 0;
  return static_cast<long long>((static_cast<size_t>(rank) + i) % static_cast<size_t>(p.modulus)) + 1;
}

// Exact small integer v as one element of type t.
void encode(DataType t, long long v, std::byte* out) {
  const auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
  switch (t) {
    case DataType::int8: put(static_cast<int8_t>(v)); break;
    case DataType::uint8: put(static_cast<uint8_t>(v)); break;
    case DataType::int32: put(static_cast<int32_t>(v)); break;
    case DataType::uint32: put(static_cast<uint32_t>(v)); break;
    case DataType::int64: put(static_cast<int64_t>(v)); break;
    case DataType::uint64: put(static_cast<uint64_t>(v)); break;
    case DataType::float32: put(static_cast<float>(v)); break;
    case DataType::float64: put(static_cast<double>(v)); break;
    case DataType::bfloat16:  // the upper half of the float32: exact for integers up to 256
      put(static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16));
      break;
    case DataType::float16: {  // IEEE binary16 of an integer 0 <= v <= 2048 (normal numbers)
      uint16_t bits = 0;
      if (v > 0) {
        const int e = std::bit_width(static_cast<unsigned long long>(v)) - 1;  // 2^e <= v < 2^(e+1)
        const long long frac = v - (1LL << e);
        const long long mantissa = e <= 10 ? frac << (10 - e) : frac >> (e - 10);
        bits = static_cast<uint16_t>(((e + 15) << 10) | mantissa);
      }
      put(bits);
      break;
    }
  }
}

// Sum of one value over ranks through the communicator itself (double: exact below 2^53).
double sum_over_ranks(Communicator& comm, CommBuffer& scratch, double value) {
  scratch.upload_bytes(std::as_bytes(std::span<const double>(&value, 1)));
  CommRequest r = comm.allreduce_start(scratch.bytes(), scratch.bytes(), 1, DataType::float64);
  comm.wait(r);
  scratch.download_bytes(std::as_writable_bytes(std::span<double>(&value, 1)));
  return value;
}

uint64_t count_wrong(const std::vector<std::byte>& got, const std::vector<std::byte>& want, size_t elem) {
  uint64_t wrong = 0;
  for (size_t off = 0; off < got.size(); off += elem) wrong += std::memcmp(&got[off], &want[off], elem) != 0;
  return wrong;
}

// Times one placement (send == recv: in place), then checks it with crafted inputs.
BenchResult measure(Communicator& comm, CommBuffer& scratch, CommBuffer& send, CommBuffer& recv, size_t count,
                    const BenchConfig& c, const std::vector<std::byte>& expected) {
  const size_t bytes = count * size_of(c.type);
  const std::vector<std::byte> zeros(bytes);
  send.upload_bytes(zeros);
  recv.upload_bytes(zeros);
  for (int i = 0; i < c.warmup; ++i) {
    CommRequest r = comm.allreduce_start(send.bytes(), recv.bytes(), count, c.type);
    comm.wait(r);
  }
  comm.barrier();
  const auto t0 = CommClock::now();
  for (int i = 0; i < c.iters; ++i) {
    CommRequest r = comm.allreduce_start(send.bytes(), recv.bytes(), count, c.type);
    comm.wait(r);
  }
  const double local_s = std::chrono::duration<double>(CommClock::now() - t0).count() / c.iters;
  BenchResult res;
  const double mean_s = sum_over_ranks(comm, scratch, local_s) / comm.size();
  res.time_us = mean_s * 1e6;
  res.algbw_gbs = mean_s > 0 ? static_cast<double>(bytes) / mean_s / 1e9 : 0.0;
  res.busbw_gbs = bus_bandwidth(res.algbw_gbs, comm.size());

  std::vector<std::byte> input = check_input(c.type, comm.rank(), comm.size(), count);
  if (comm.rank() == c.corrupt_rank && count > 0) {  // one element changed: never the exact sum
    const size_t at = count / 2;
    const long long v = pattern_value(pattern_for(c.type, comm.size()), comm.rank(), at);
    encode(c.type, v == 0 ? 1 : 0, input.data() + at * size_of(c.type));
  }
  send.upload_bytes(input);
  if (&send != &recv) recv.upload_bytes(std::vector<std::byte>(bytes, std::byte{0xff}));  // must all be overwritten
  CommRequest r = comm.allreduce_start(send.bytes(), recv.bytes(), count, c.type);
  comm.wait(r);
  std::vector<std::byte> got(bytes);
  recv.download_bytes(got);
  res.wrong = static_cast<uint64_t>(std::llround(sum_over_ranks(comm, scratch, static_cast<double>(count_wrong(got, expected, size_of(c.type))))));
  return res;
}

}  // namespace

std::vector<std::byte> check_input(DataType type, int rank, int ranks, size_t count) {
  const Pattern p = pattern_for(type, ranks);
  const size_t elem = size_of(type);
  std::vector<std::byte> out(count * elem);
  for (size_t i = 0; i < count; ++i) encode(type, pattern_value(p, rank, i), out.data() + i * elem);
  return out;
}

std::vector<std::byte> check_expected(DataType type, int ranks, size_t count) {
  const Pattern p = pattern_for(type, ranks);
  const size_t elem = size_of(type), period = static_cast<size_t>(p.modulus);
  std::vector<long long> sums(period, 0);  // the sum depends on i only through i % modulus
  for (size_t k = 0; k < period; ++k)
    for (int r = 0; r < p.contributors; ++r) sums[k] += pattern_value(p, r, k);
  std::vector<std::byte> out(count * elem);
  for (size_t i = 0; i < count; ++i) encode(type, sums[i % period], out.data() + i * elem);
  return out;
}

std::vector<BenchRow> run_allreduce_bench(Communicator& comm, const BenchConfig& config,
                                          const std::function<void(const BenchRow&)>& on_row) {
  if (!comm.supports(config.type))
    throw Error(ErrorKind::usage, std::string("--datatype ") + to_string(config.type) + ": the " + to_string(comm.backend()) +
                                      " backend cannot reduce it (MPI has no half or bfloat16 type); use --backend nccl");
  std::vector<BenchRow> rows;
  auto scratch = comm.make_byte_buffer(sizeof(double));
  for (size_t bytes : bench_sizes(config)) {
    BenchRow row;
    row.bytes = bytes;
    row.count = bytes / size_of(config.type);
    const auto expected = check_expected(config.type, comm.size(), row.count);
    auto send = comm.make_byte_buffer(bytes);
    auto recv = comm.make_byte_buffer(bytes);
    row.out_of_place = measure(comm, *scratch, *send, *recv, row.count, config, expected);
    row.in_place = measure(comm, *scratch, *recv, *recv, row.count, config, expected);
    if (on_row) on_row(row);
    rows.push_back(row);
  }
  return rows;
}

double average_bus_bandwidth(const std::vector<BenchRow>& rows) {
  double sum = 0;
  size_t n = 0;
  for (const auto& r : rows)
    for (const BenchResult* x : {&r.out_of_place, &r.in_place})
      if (x->measured) sum += x->busbw_gbs, ++n;
  return n ? sum / static_cast<double>(n) : 0.0;
}

void print_bench_header(std::ostream& os, const Communicator& comm, int node_count, const BenchConfig& c) {
  char line[320];
  std::snprintf(line, sizeof line, "# dlperf-comm: %s, backend %s, %d ranks on %d node(s)\n", op_name(c.op), to_string(comm.backend()),
                comm.size(), node_count);
  os << line;
  std::snprintf(line, sizeof line, "# minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d validation: 1\n",
                c.min_bytes, c.max_bytes, c.factor, c.warmup, c.iters);
  os << line;
  if (c.op == CommOp::allreduce_sum)
    os << "# time: mean per allreduce of the timed iterations, after the warm-up and a barrier, averaged over ranks\n"
          "# algbw = size / time; busbw = algbw * 2(n-1)/n (nccl-tests' allreduce definition); GB = 1e9 bytes\n"
          "# #wrong: elements differing from the exact sum of crafted small-integer inputs, over all ranks\n"
          "#\n";
  else
    os << "# time: mean per " << op_name(c.op) << " of the timed iterations, after the warm-up and a barrier, averaged over ranks\n"
       << "# size: the whole buffer (every rank's block of size/n); algbw = size / time; busbw = algbw * (n-1)/n (nccl-tests' "
       << op_name(c.op) << " definition); GB = 1e9 bytes\n"
       << "# #wrong: elements differing from the exact result of crafted small-integer inputs, over all ranks; n/a: not measured\n"
       << "#\n";
  std::snprintf(line, sizeof line, "# %76s %33s\n", "out-of-place", "in-place");
  os << line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  os << line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
  os << line << '\n';
}

void print_bench_row(std::ostream& os, const BenchRow& r, DataType type) {
  char line[320];
  int n = std::snprintf(line, sizeof line, "%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, to_string(type), r.redop, -1);
  for (const BenchResult* x : {&r.out_of_place, &r.in_place})
    n += x->measured ? std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  %7.2f  %6.2f  %6.2f  %6llu", x->time_us,
                                     x->algbw_gbs, x->busbw_gbs, static_cast<unsigned long long>(x->wrong))
                     : std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  %7s  %6s  %6s  %6s", "n/a", "n/a", "n/a", "n/a");
  os << line << '\n';
}

std::string bench_result_fields(const Communicator& comm, int node_count, const BenchConfig& c, const std::vector<BenchRow>& rows) {
  uint64_t wrong = 0;
  double peak = 0;
  size_t peak_bytes = 0;
  for (const auto& r : rows) {
    wrong += r.out_of_place.wrong + r.in_place.wrong;
    for (const BenchResult* x : {&r.out_of_place, &r.in_place})
      if (x->measured && x->busbw_gbs > peak) peak = x->busbw_gbs, peak_bytes = r.bytes;
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "op=%s backend=%s type=%s redop=%s ranks=%d nodes=%d sizes=%zu min_bytes=%zu "
                "max_bytes=%zu avg_busbw_gbs=%.4f peak_busbw_gbs=%.4f peak_bytes=%zu wrong=%llu status=%s",
                op_name(c.op), to_string(comm.backend()), to_string(c.type), c.op == CommOp::all_gather ? "none" : "sum",
                comm.size(), node_count, rows.size(),
                rows.empty() ? size_t{0} : rows.front().bytes, rows.empty() ? size_t{0} : rows.back().bytes,
                average_bus_bandwidth(rows), peak, peak_bytes, static_cast<unsigned long long>(wrong),
                wrong ? "FAIL" : comm.size() < 2 ? "NO_PEERS" : "PASS");
  return line;
}

void print_bench_footer(std::ostream& os, const Communicator& comm, int node_count, const BenchConfig& c,
                        const std::vector<BenchRow>& rows) {
  uint64_t wrong = 0;
  for (const auto& r : rows) wrong += r.out_of_place.wrong + r.in_place.wrong;
  char line[512];
  std::snprintf(line, sizeof line, "# Out of bounds values : %llu %s\n# Avg bus bandwidth    : %g \n#\n",
                static_cast<unsigned long long>(wrong), wrong ? "FAILED" : "OK", average_bus_bandwidth(rows));
  os << line << "# dlperf-comm result: " << bench_result_fields(comm, node_count, c, rows) << '\n';
}

std::string format_bench_record(const Communicator& comm, int node_count, const BenchConfig& c, const std::vector<BenchRow>& rows) {
  std::string out = std::string(kBenchRecordMagic) + "\n"
                    "# docs/communication.md: the result line, then one row per message size (GB/s = 1e9 bytes/s)\n"
                    "result " + bench_result_fields(comm, node_count, c, rows) + "\n"
                    "# bytes count oop_time_us oop_algbw_gbs oop_busbw_gbs ip_time_us ip_algbw_gbs ip_busbw_gbs wrong\n";
  char line[256];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "row %zu %zu %.3f %.4f %.4f %.3f %.4f %.4f %llu\n", r.bytes, r.count, r.out_of_place.time_us,
                  r.out_of_place.algbw_gbs, r.out_of_place.busbw_gbs, r.in_place.time_us, r.in_place.algbw_gbs, r.in_place.busbw_gbs,
                  static_cast<unsigned long long>(r.out_of_place.wrong + r.in_place.wrong));
    out += line;
  }
  return out;
}

}  // namespace dlperf
