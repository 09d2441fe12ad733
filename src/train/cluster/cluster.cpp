#include "train/cluster/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <dnnl.hpp>
#include <fstream>
#include <hdf5.h>

#include "comm/make_communicator.h"
#include "core/check.h"
#include "dlperf_version.h"
#include "train/cluster/gpu_topology.h"
#include "train/trainer.h"

namespace dlperf {

double measure_clock_offset(MPI_Comm comm, int rounds) {
  int rank = 0, size = 1;
  DLPERF_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLPERF_CHECK_MPI(MPI_Comm_size(comm, &size));
  double offset = 0.0;
  for (int peer = 1; peer < size; ++peer) {
    if (rank == 0) {
      for (int r = 0; r < rounds; ++r) {
        double ping = 0;
        DLPERF_CHECK_MPI(MPI_Recv(&ping, 1, MPI_DOUBLE, peer, 71, comm, MPI_STATUS_IGNORE));
        const double t0 = steady_seconds();
        DLPERF_CHECK_MPI(MPI_Send(&t0, 1, MPI_DOUBLE, peer, 72, comm));
      }
    } else if (rank == peer) {
      double best_rtt = 1e30;
      for (int r = 0; r < rounds; ++r) {
        const double t1 = steady_seconds();
        DLPERF_CHECK_MPI(MPI_Send(&t1, 1, MPI_DOUBLE, 0, 71, comm));
        double t0 = 0;
        DLPERF_CHECK_MPI(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, 72, comm, MPI_STATUS_IGNORE));
        const double t2 = steady_seconds();
        if (t2 - t1 < best_rtt) {
          best_rtt = t2 - t1;
          offset = t0 - 0.5 * (t1 + t2);
        }
      }
    }
  }
  return offset;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

std::string per_rank_value(const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < values.size(); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == values[r]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {values[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  if (groups.size() <= 1) return groups.empty() ? "" : groups.front().first;
  std::string out;
  for (const auto& [value, ranks] : groups) {
    out += (out.empty() ? "" : "; ") + value + (ranks.size() == 1 ? " (rank " : " (ranks ");
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      out += (i ? ", " : "") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
      i = j + 1;
    }
    out += ")";
  }
  return out;
}

namespace {
std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

RunInfo describe_environment(const WorldInfo& world) {
  RunInfo info;
  info.nodes = world.node_count;
  info.devices_per_node = world.local_size;
  info.world_size = world.size;
  info.hosts = world.hosts;
  info.cpu_model = cpu_model();
  info.slurm_job_id = env_or_empty("SLURM_JOB_ID");
  info.slurm_nodelist = env_or_empty("SLURM_JOB_NODELIST");
  info.git_revision = DLPERF_GIT_REVISION;
  info.start_time_utc = utc_now_iso8601();
  info.versions["dlperf"] = DLPERF_VERSION;
  const auto* v = dnnl::version();
  info.versions["onednn"] = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  info.versions["hdf5"] = std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_s(mpi, static_cast<size_t>(len));
  if (auto nl = mpi_s.find_first_of("\n,"); nl != std::string::npos) mpi_s.resize(nl);
  info.versions["mpi"] = mpi_s;
  return info;
}

namespace {
// Each rank's record travels as doubles (integers exact up to 2^53): a header (clock offset,
// peak memory, device peak, the loader's bad samples, the allocation counter's peak), then per iteration start, end, the
// phases, comm, loss, the loader's queue depth, images and bytes, loss scale, skipped, the bytes moved (1.3), the
// bucket count and each bucket's start and end.
constexpr int kHeader = 5;
constexpr int kPerIteration = 11 + kPhaseCount;  // before the buckets
}  // namespace

std::vector<RankTrace> gather_traces(MPI_Comm comm, const RankTrace& mine) {
  int rank = 0, size = 1;
  DLPERF_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLPERF_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::vector<double> flat;
  flat.push_back(mine.clock_offset);
  flat.push_back(static_cast<double>(mine.peak_memory_bytes));
  flat.push_back(static_cast<double>(mine.device_memory_peak_bytes));
  flat.push_back(static_cast<double>(mine.data_bad_samples));
  flat.push_back(static_cast<double>(mine.allocated_peak_bytes));
  for (const auto& it : mine.iterations) {
    flat.push_back(it.start);
    flat.push_back(it.end);
    for (float p : it.phase_seconds) flat.push_back(p);
    flat.push_back(it.comm_seconds);
    flat.push_back(it.loss);
    flat.push_back(static_cast<double>(it.data_queue_depth));
    flat.push_back(static_cast<double>(it.data_images));
    flat.push_back(static_cast<double>(it.data_bytes_read));
    flat.push_back(it.loss_scale);
    flat.push_back(it.skipped ? 1.0 : 0.0);
    flat.push_back(static_cast<double>(it.comm_bytes));  // exact below 2^53
    flat.push_back(static_cast<double>(it.buckets.size()));
    for (const auto& b : it.buckets) {
      flat.push_back(b.start);
      flat.push_back(b.end);
    }
  }
  const int n = static_cast<int>(flat.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  DLPERF_CHECK_MPI(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<double> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  DLPERF_CHECK_MPI(MPI_Gatherv(flat.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, comm));
  std::vector<RankTrace> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r) {
    const double* p = all.data() + displs[static_cast<size_t>(r)];
    const int c = counts[static_cast<size_t>(r)];
    RankTrace t;
    t.clock_offset = p[0];
    t.peak_memory_bytes = static_cast<int64_t>(p[1]);
    t.device_memory_peak_bytes = static_cast<int64_t>(p[2]);
    t.data_bad_samples = static_cast<int64_t>(p[3]);
    t.allocated_peak_bytes = static_cast<int64_t>(p[4]);
    for (int i = kHeader; i + kPerIteration <= c;) {
      IterationTiming it;
      it.start = p[i];
      it.end = p[i + 1];
      for (int k = 0; k < kPhaseCount; ++k) it.phase_seconds[k] = static_cast<float>(p[i + 2 + k]);
      const double* q = p + i + 2 + kPhaseCount;
      it.comm_seconds = static_cast<float>(q[0]);
      it.loss = static_cast<float>(q[1]);
      it.data_queue_depth = static_cast<int64_t>(q[2]);
      it.data_images = static_cast<int64_t>(q[3]);
      it.data_bytes_read = static_cast<int64_t>(q[4]);
      it.loss_scale = static_cast<float>(q[5]);
      it.skipped = q[6] != 0.0;
      it.comm_bytes = static_cast<int64_t>(q[7]);
      const auto buckets = static_cast<int>(q[8]);
      i += kPerIteration;
      DLPERF_ASSERT(buckets >= 0 && i + 2 * buckets <= c, "a gathered trace holds whole iterations");
      for (int b = 0; b < buckets; ++b, i += 2) it.buckets.push_back({p[i], p[i + 1]});
      t.iterations.push_back(std::move(it));
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine) {
  int rank = 0, size = 1;
  DLPERF_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLPERF_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  DLPERF_CHECK_MPI(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  DLPERF_CHECK_MPI(MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, 0, comm));
  std::vector<std::string> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]), static_cast<size_t>(counts[static_cast<size_t>(r)])));
  return out;
}

std::string join_distinct(const std::vector<std::string>& parts) {
  std::vector<std::string> items;
  for (const auto& p : parts) {
    size_t from = 0;
    while (from <= p.size()) {
      const size_t comma = std::min(p.find(',', from), p.size());
      std::string item = p.substr(from, comma - from);
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (!item.empty() && std::find(items.begin(), items.end(), item) == items.end()) items.push_back(item);
      from = comma + 1;
    }
  }
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

void add_device_facts(RunInfo& info, const DeviceFacts& f) {
  if (f.model.empty()) return;
  info.gpu_model = f.model;
  info.gpu_memory_bytes = f.memory_bytes;
  for (const auto& [k, v] : f.versions) info.versions[k] = v;
  const std::string nccl = nccl_version();
  if (!nccl.empty()) info.versions["nccl"] = nccl;
  info.gpu_topology = describe_gpu_topology(cuda_pci_bus_ids());
}

namespace {
std::atomic<bool> g_stop{false};  // written by the signal handler only
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);  // `sbatch --signal=USR1@60`: an early warning before SIGTERM
  sigaction(SIGHUP, &sa, nullptr);   // the ssh session or terminal that started it closed
}

const std::atomic<bool>& stop_requested() { return g_stop; }
int stop_signal() { return g_signal.load(); }

BoundaryFlags agree_at_boundary(Communicator& control, const BoundaryFlags& mine) {
  // Counts of ranks: any > 0 (exact in a float up to 2^24 ranks).
  float flags[3] = {mine.stop ? 1.0f : 0.0f, mine.diverged ? 1.0f : 0.0f, static_cast<float>(mine.signalled_ranks)};
  CommRequest r = control.allreduce_sum_start(flags, 3);
  control.wait(r);
  return {flags[0] > 0.0f, flags[1] > 0.0f, static_cast<int>(flags[2])};
}

}  // namespace dlperf
