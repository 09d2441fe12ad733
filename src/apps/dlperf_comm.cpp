// dlperf-comm: allreduce benchmark over the communicator training uses (MPI or NCCL), with
// nccl-tests' options and output (all_reduce_perf), so scripts written for one read the other:
//   mpirun -np 2 dlperf-comm -b 8 -e 64M -f 2 -n 20 -w 5 -d float --backend mpi
// --op reduce_scatter | all_gather measures the sharded optimizer's collectives instead
// (reduce_scatter_perf, all_gather_perf: busbw = algbw (n-1)/n).
// One row per message size: size, count, type, redop, root, then time, algbw, busbw and #wrong
// out of place and in place; then "# Out of bounds values", "# Avg bus bandwidth" and one
// "# dlperf-comm result: key=value ..." line for scripts and ReFrame (method, formulas and the
// line's keys: comm/allreduce_bench.h, docs/communication.md). Exit 0 when every result is
// exact, 1 when some element is wrong, 2 on bad arguments (one line naming the flag), 3 on a
// fault (see comm/mpi_main.h).
#include <boost/program_options.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "comm/allreduce_bench.h"
#include "comm/make_communicator.h"
#include "comm/mpi_main.h"
#include "core/check.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/fnv.h"
#include "dlperf_version.h"
#include "core/given_options.h"
#include "core/parse_number.h"
#if defined(DLPERF_WITH_CUDA)
#include "comm/nccl/nccl_communicator.h"
#endif

namespace po = boost::program_options;

namespace {

struct Config {
  dlperf::BenchConfig bench;
  dlperf::CommBackend backend = dlperf::CommBackend::mpi;
  dlperf::CommOptions comm;
  std::string output;  // --output FILE.comm: the record dlperf-reduce reads ("" = none)
};

// "64M", "1K", "4096" -> bytes (binary multiples, as nccl-tests' -b/-e). The digits are the
// whole number (no sign, no blanks) and the result must fit 64 bits: "18014398509481985K"
// used to wrap around to 1 KiB.
size_t parse_bytes(const std::string& flag, const std::string& text) {
  const size_t digits_end = text.find_first_not_of("0123456789");
  const std::string digits = text.substr(0, digits_end), unit = digits_end == std::string::npos ? "" : text.substr(digits_end);
  const auto v = dlperf::parse_uint64(digits);
  if (digits.empty()) dlperf::throw_usage_error(flag + ": '" + text + "' is not a size (e.g. 4096, 64K, 32M, 1G)");
  int shift = 0;
  if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "m") shift = 20;
  else if (unit == "G" || unit == "g") shift = 30;
  else if (!unit.empty()) dlperf::throw_usage_error(flag + ": unknown unit '" + unit + "' in '" + text + "' (use K, M or G)");
  if (!v || *v > (std::numeric_limits<uint64_t>::max() >> shift))
    dlperf::throw_usage_error(flag + ": '" + text + "' is larger than 2^64 bytes");
  return static_cast<size_t>(*v << shift);
}

// Host memory the benchmark holds at once for a message of `bytes`, per rank: the send and
// receive buffers (host buffers on mpi; on nccl they are on the GPU), the expected result, the
// input pattern, zeros and the read-back copy (comm/allreduce_bench.cpp).
double host_bytes_needed(dlperf::CommBackend backend, size_t bytes) {
  return static_cast<double>(bytes) * (backend == dlperf::CommBackend::mpi ? 6.0 : 4.0);
}

// A largest message this node cannot hold is refused before anything is allocated, in one
// line (it ended in std::bad_alloc reported as an internal error).
void check_fits_memory(const Config& c) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: the allocation itself will tell
  const double have = static_cast<double>(pages) * static_cast<double>(page);
  const double need = host_bytes_needed(c.backend, c.bench.max_bytes);
  if (need > have) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "--max-bytes (-e) %.4g GiB needs about %.4g GiB of memory per rank (%d buffers of the largest message); "
                  "this node has %.4g GiB: lower -e", static_cast<double>(c.bench.max_bytes) / 1073741824.0, need / 1073741824.0,
                  c.backend == dlperf::CommBackend::mpi ? 6 : 4, have / 1073741824.0);
    dlperf::throw_usage_error(msg);
  }
}

// Returns false when --help or --version was printed.
bool parse(int argc, char** argv, bool print, Config& c) {
  std::string min_b = "8", max_b = "32M", backend = "mpi", type = "float", op = "allreduce";
  double timeout_s = 60;
  po::options_description visible("dlperf-comm options (the one-letter ones are nccl-tests')");
  visible.add_options()("help,h", "print this help")("version", "print the version")
      ("op", po::value(&op)->default_value(op), "allreduce, reduce_scatter or all_gather (float)")
      ("min-bytes,b", po::value(&min_b)->default_value(min_b), "smallest message (bytes; K, M, G suffixes)")
      ("max-bytes,e", po::value(&max_b)->default_value(max_b), "largest message")
      ("factor,f", po::value(&c.bench.factor)->default_value(c.bench.factor), "size multiplier between rows (> 1)")
      ("iters,n", po::value(&c.bench.iters)->default_value(c.bench.iters), "timed allreduces per size and placement")
      ("warmup,w", po::value(&c.bench.warmup)->default_value(c.bench.warmup), "untimed allreduces before them")
      ("datatype,d", po::value(&type)->default_value(type),
       "int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float or double (half and bfloat16: nccl only)")
      ("backend", po::value(&backend)->default_value(backend), "mpi (host buffers) or nccl (device buffers)")
      ("output,o", po::value(&c.output), "also write the result as a record for dlperf-reduce to FILE.comm (rank 0; replaced whole)")
      ("timeout", po::value(&timeout_s)->default_value(timeout_s), "seconds any wait may take before the job is aborted");
  po::options_description hidden;
  hidden.add_options()("corrupt-rank", po::value(&c.bench.corrupt_rank), "test hook: this rank corrupts one input");
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  try {
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(all).positional({}).run();  // no positional words
    po::store(parsed, vm);
    po::notify(vm);
    dlperf::check_given_texts(parsed, vm);  // -o "$OUT" with it unset; --timeout 1e-400 read as 0
  } catch (const po::error& e) {
    dlperf::throw_usage_error(e.what());
  }
  if (vm.count("help") || vm.count("version")) {
    if (print && vm.count("help")) std::cout << visible << '\n';
    else if (print) std::cout << "dlperf-comm " << DLPERF_VERSION << " (" << DLPERF_GIT_REVISION << ")\n";
    return false;
  }
  if (op == "allreduce") c.bench.op = dlperf::CommOp::allreduce_sum;
  else if (op == "reduce_scatter") c.bench.op = dlperf::CommOp::reduce_scatter_sum;
  else if (op == "all_gather") c.bench.op = dlperf::CommOp::all_gather;
  else dlperf::throw_usage_error("--op must be allreduce, reduce_scatter or all_gather (got '" + op + "')");
  if (c.bench.op != dlperf::CommOp::allreduce_sum && type != "float" && type != "float32")
    dlperf::throw_usage_error("--op " + op + " measures float only (the sharded optimizer's type); drop --datatype (-d)");
  c.bench.min_bytes = parse_bytes("--min-bytes (-b)", min_b);
  c.bench.max_bytes = parse_bytes("--max-bytes (-e)", max_b);
  if (!dlperf::parse_data_type(type, c.bench.type))
    dlperf::throw_usage_error("--datatype (-d) '" + type + "' is unknown: use int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float or double");
  if (c.bench.min_bytes < dlperf::size_of(c.bench.type))
    dlperf::throw_usage_error("--min-bytes (-b) must be at least one " + std::string(dlperf::to_string(c.bench.type)) + " (" +
                              std::to_string(dlperf::size_of(c.bench.type)) + " bytes)");
  if (c.bench.max_bytes < c.bench.min_bytes) dlperf::throw_usage_error("--max-bytes (-e) must be >= --min-bytes (-b)");
  if (!(c.bench.factor > 1.0 && std::isfinite(c.bench.factor)) && c.bench.max_bytes != c.bench.min_bytes)
    dlperf::throw_usage_error("--factor (-f) must be greater than 1 and finite");
  // A factor a hair above 1 measured sizes for ever (8 bytes x 1.000000000001 per step).
  if (c.bench.max_bytes != c.bench.min_bytes &&
      !(std::log(static_cast<double>(c.bench.max_bytes) / static_cast<double>(c.bench.min_bytes)) / std::log(c.bench.factor) <= 4096))
  {
    char f[40];
    std::snprintf(f, sizeof f, "%.17g", c.bench.factor);
    dlperf::throw_usage_error("--factor (-f) " + std::string(f) + " gives more than 4096 sizes from --min-bytes to --max-bytes: use a larger factor");
  }
  if (c.bench.iters < 1) dlperf::throw_usage_error("--iters (-n) must be at least 1");
  if (c.bench.warmup < 0) dlperf::throw_usage_error("--warmup (-w) must be >= 0");
  // Bounded as dlperf-train's --lock-timeout: 1e10 s overflowed the watchdog's clock and aborted
  // a healthy job at its first allreduce, and below a second a loaded collective can time out.
  if (!(timeout_s >= 1 && timeout_s <= 7 * 86400))
  {
    char got[32];
    std::snprintf(got, sizeof got, "%g", timeout_s);
    dlperf::throw_usage_error("--timeout must be 1 to 604800 seconds (got " + std::string(got) + ")");
  }
  c.comm.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  if (backend == "mpi") c.backend = dlperf::CommBackend::mpi;
  else if (backend == "nccl") c.backend = dlperf::CommBackend::nccl;
  else dlperf::throw_usage_error("--backend must be mpi or nccl (got '" + backend + "')");
  if (c.backend == dlperf::CommBackend::mpi && (c.bench.type == dlperf::DataType::float16 || c.bench.type == dlperf::DataType::bfloat16))
    dlperf::throw_usage_error("--datatype (-d) " + type + ": MPI has no such type; use --backend nccl, or float");
  // dlperf-reduce picks records out of a results directory by this suffix.
  // The name a link points to counts: a link named x.comm to results.h5 replaced the trace.
  if (!c.output.empty())
    for (const std::string& name : {c.output, dlperf::resolve_symlinks(c.output)}) {
      const std::string file = name.substr(name.find_last_of('/') + 1);
      if (file.size() < 6 || file.compare(file.size() - 5, 5, ".comm") != 0)
        dlperf::throw_usage_error("--output (-o) '" + dlperf::printable(name) +
                                  "' must be a file named *.comm (dlperf-reduce reads *.comm records beside *.h5 traces)");
    }
  check_fits_memory(c);
  return true;
}

// Every rank reads its own command line: one rank's bad input, --help or other options (an
// MPMD launch, a script that differs per node) left the others waiting in the first collective
// for ever, before any timeout is armed, or measured with mismatched buffers. Every rank ends
// alike, exit 2, rank 0 printing the first bad rank's message or the first that differs.
bool parse_agreed(const dlperf::WorldInfo& world, MPI_Comm comm, int argc, char** argv, Config& config) {
  std::string why;
  bool proceed = false;
  try {
    proceed = parse(argc, argv, world.rank == 0, config);
  } catch (const dlperf::Error& e) {
    if (e.kind() != dlperf::ErrorKind::usage) throw;
    why = e.what();
  }
  if (world.size == 1) {
    if (!why.empty()) dlperf::throw_usage_error(why);
    return proceed;
  }
  dlperf::Fnv1a args;
  for (int i = 1; i < argc; ++i) args.text(argv[i]);
  struct {
    uint64_t args;
    int bad;
  } mine{args.value(), why.empty() ? 0 : 1};
  std::vector<decltype(mine)> all(static_cast<size_t>(world.size));
  DLPERF_CHECK_MPI(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm));
  int culprit = -1;
  for (int r = 0; r < world.size && culprit < 0; ++r)
    if (all[static_cast<size_t>(r)].bad) culprit = r;
  if (culprit < 0) {
    for (int r = 1; r < world.size; ++r)
      if (all[static_cast<size_t>(r)].args != all[0].args)
        dlperf::throw_usage_error("rank " + std::to_string(r) +
                                  " was started with other options than rank 0: every rank of a job must run the same measurement");
    return proceed;
  }
  constexpr int kTag = 93;
  if (culprit > 0 && world.rank == culprit) DLPERF_CHECK_MPI(MPI_Send(why.data(), static_cast<int>(why.size()), MPI_CHAR, 0, kTag, comm));
  if (culprit > 0 && world.rank == 0) {
    MPI_Status st;
    DLPERF_CHECK_MPI(MPI_Probe(culprit, kTag, comm, &st));
    int n = 0;
    DLPERF_CHECK_MPI(MPI_Get_count(&st, MPI_CHAR, &n));
    why.assign(static_cast<size_t>(n), '\0');
    DLPERF_CHECK_MPI(MPI_Recv(why.data(), n, MPI_CHAR, culprit, kTag, comm, MPI_STATUS_IGNORE));
    why = "rank " + std::to_string(culprit) + ": " + why;
  }
  dlperf::throw_usage_error(why.empty() ? "another rank's options were refused (rank 0 says why)" : why);  // printed by rank 0
}

int run(dlperf::MpiSession& session, int argc, char** argv) {
  const dlperf::WorldInfo& world = session.world();
  Config config;
  if (!parse_agreed(world, session.world_comm(), argc, argv, config))  // --help or --version: printed by rank 0
    return world.rank == 0 ? dlperf::exit_after_printing("dlperf-comm") : 0;
  // Rank 0 writes the record: a place it cannot write is found now, not after the whole
  // measurement (exit 3 then, the measurement lost). Every rank learns it and stops alike.
  {
    std::string why;
    if (world.rank == 0 && !config.output.empty()) why = dlperf::output_file_problem(config.output);
    int bad = why.empty() ? 0 : 1;
    DLPERF_CHECK_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, session.world_comm()));
    if (bad) dlperf::throw_usage_error("--output (-o) " + config.output + ": " + why);  // printed by rank 0
  }
  if (config.bench.op != dlperf::CommOp::allreduce_sum)
    if (const std::string why = dlperf::sharded_bench_problem(config.bench, world.size); !why.empty()) dlperf::throw_usage_error(why);
  if (config.backend == dlperf::CommBackend::nccl) {
#if defined(DLPERF_WITH_CUDA)
    dlperf::select_device_by_local_rank(world, session.world_comm());
#else
    dlperf::throw_usage_error("--backend nccl: this dlperf was built without CUDA/NCCL; use --backend mpi");
#endif
  }
  auto comm = dlperf::make_communicator(config.backend, session.world_comm(), world, config.comm);
  const bool root = world.rank == 0;
  // One rank moves no byte over any link: bus bandwidth is 0 by definition (2(n-1)/n), so the
  // result line says NO_PEERS, never PASS, and stderr says what to run instead.
  if (root && world.size < 2)
    std::fprintf(stderr, "dlperf-comm: 1 rank: nothing crosses a link (bus bandwidth is 0 by definition); the result is status=NO_PEERS: "
                         "run 2 or more ranks (mpirun -np 2, srun -n 2)\n");
  if (root) dlperf::print_bench_header(std::cout, *comm, world.node_count, config.bench);
  const auto print = [&](const dlperf::BenchRow& row) {
    if (root) dlperf::print_bench_row(std::cout, row, config.bench.type), std::cout.flush();
  };
  const auto rows = config.bench.op == dlperf::CommOp::allreduce_sum ? dlperf::run_allreduce_bench(*comm, config.bench, print)
                                                                     : dlperf::run_sharded_bench(*comm, config.bench, print);
  uint64_t wrong = 0;
  for (const auto& row : rows) wrong += row.out_of_place.wrong + row.in_place.wrong;
  if (root) dlperf::print_bench_footer(std::cout, *comm, world.node_count, config.bench, rows);
  // Whole or not at all (a temporary renamed into place); a failed write is Error(fault): exit 3.
  if (root && !config.output.empty())
    dlperf::write_file_atomically(config.output, dlperf::format_bench_record(*comm, world.node_count, config.bench, rows));
  // The printed table is the only record of the measurement: a failed write (a full disk,
  // > /dev/full) is exit 3 with one line, not a silent exit 0.
  const std::string why = dlperf::flush_stdout_error();
  if (root && !why.empty()) {
    std::fprintf(stderr, "dlperf-comm: %s\n", why.c_str());
    return dlperf::kExitError;
  }
  return wrong > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dlperf::run_mpi_program(argc, argv, "dlperf-comm", [&](dlperf::MpiSession& s) { return run(s, argc, argv); });
}
