// MpiSession and world discovery; see mpi_session.h.
#include "comm/mpi_session.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/job_abort.h"
#include "comm/mpi_comm_handle.h"
#include "core/check.h"
#include "core/error.h"
#include "core/test_fault.h"

namespace dlperf {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
  }
}

// Open MPI's non-blocking allreduce (coll/libnbc) picks its algorithm by a rule that sends
// every in-place call, whatever its size, to the binomial tree: a reduce to rank 0, then a
// broadcast. Gradient buckets are reduced in place, and that tree moves each bucket over
// rank 0's link log2(p) times each way in sequence: on a 2-node fabric the allreduce ran at
// half the link's bandwidth (tests/slurm/multinode_test.sh measures it). The ring does the
// reduce-scatter and allgather at the link's bandwidth for any p. Set as the MCA default
// before MPI_Init only when the user (or the site's job profile) has not chosen: Open MPI
// reads OMPI_MCA_* from the environment of each process at initialisation.
void prefer_bandwidth_optimal_iallreduce() {
#if defined(OPEN_MPI)
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "ring", /*overwrite=*/0);
#endif
}

// Open MPI's non-blocking collectives allocate their temporary buffers per call, as large as the
// bucket (coll/libnbc), and free them on completion. glibc gives such memory back to the kernel
// (a chunk above its mmap threshold is unmapped; a thread arena's heap is trimmed), so every
// call, every step, faults the buffers in again page by page: a reduced Llama (bf16, 4 MiB
// buckets, 2 ranks) faulted in up to 7,000 pages a step per rank, about 14 ms of system time
// of a 200-300 ms step. Keeping freed memory in the process (a fixed mmap threshold of 32 MiB, glibc's
// largest, and no trimming below 1 GiB free) ends that. Set before MPI_Init, so MPI's own
// allocations follow it, and only when the user has not chosen malloc settings: glibc's
// tunables or its MALLOC_*_ variables, read at start-up, would be overridden.
void keep_freed_heap_memory() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) || std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr)
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace

std::string lone_rank_problem(int world_size) {
  if (world_size != 1) return "";
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(name);
    if (!v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || n <= 1) return "";  // the launcher started this one process
    return "MPI started this process as a job of its own (1 rank), but its launcher started " + std::to_string(n) + " (" + name +
           "): every task would run alone. The launcher and this MPI library do not speak the same process-management "
           "interface (srun --mpi=list shows srun's; Open MPI 5 speaks pmix, not pmi2; an mpiexec of another MPI)";
  }
  return "";
}

std::string shared_gpu(MPI_Comm comm, const WorldInfo& w, const std::string& gpu_bus_id, int visible_gpus) {
  struct Entry {
    char gpu[48];
    int visible;
  } mine{};
  gpu_bus_id.copy(mine.gpu, sizeof mine.gpu - 1);
  mine.visible = visible_gpus;
  std::vector<Entry> all(static_cast<size_t>(w.size));
  DLPERF_CHECK_MPI(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm));
  std::map<std::pair<std::string, std::string>, int> first;  // (host, GPU) -> the lowest rank using it
  for (int r = 0; r < w.size; ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    if (e.gpu[0] == '\0') continue;
    const auto [it, fresh] = first.emplace(std::make_pair(w.hosts[static_cast<size_t>(r)], std::string(e.gpu)), r);
    if (fresh) continue;
    return "ranks " + std::to_string(it->second) + " and " + std::to_string(r) + " on " + it->first.first + " both use GPU " +
           e.gpu + ": each rank sees " + std::to_string(e.visible) + " GPU(s) and takes its local rank modulo that count; show each "
           "rank all of its node's GPUs with one rank per GPU (srun --gpu-bind=none) or exactly one (srun --gpus-per-task=1): "
           "--gpu-bind=closest shows a rank every GPU of its socket";
  }
  return "";
}

WorldInfo discover_world(MPI_Comm world) {
  WorldInfo w;
  DLPERF_CHECK_MPI(MPI_Comm_rank(world, &w.rank));
  DLPERF_CHECK_MPI(MPI_Comm_size(world, &w.size));

  const MpiComm local = MpiComm::node(world);  // ranks sharing memory = one node, in world order
  DLPERF_CHECK_MPI(MPI_Comm_rank(local.get(), &w.local_rank));
  DLPERF_CHECK_MPI(MPI_Comm_size(local.get(), &w.local_size));

  // One leader per node (its local rank 0); the leaders' communicator numbers the nodes.
  MPI_Comm leaders_raw = MPI_COMM_NULL;
  DLPERF_CHECK_MPI(MPI_Comm_split(world, w.local_rank == 0 ? 0 : MPI_UNDEFINED, w.rank, &leaders_raw));
  MpiComm leaders(leaders_raw);
  if (w.local_rank == 0) {
    DLPERF_CHECK_MPI(MPI_Comm_rank(leaders.get(), &w.node_index));
    DLPERF_CHECK_MPI(MPI_Comm_size(leaders.get(), &w.node_count));
  }
  int node[2] = {w.node_index, w.node_count};
  DLPERF_CHECK_MPI(MPI_Bcast(node, 2, MPI_INT, 0, local.get()));
  w.node_index = node[0];
  w.node_count = node[1];

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  DLPERF_CHECK_MPI(MPI_Get_processor_name(name, &len));
  std::vector<char> all(static_cast<size_t>(w.size) * MPI_MAX_PROCESSOR_NAME, '\0');
  DLPERF_CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world));
  w.hosts.reserve(static_cast<size_t>(w.size));
  for (int r = 0; r < w.size; ++r) {
    const char* s = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    w.hosts.emplace_back(s, strnlen(s, MPI_MAX_PROCESSOR_NAME));
  }
  w.this_host = w.hosts[static_cast<size_t>(w.rank)];
  w.local_ranks.resize(static_cast<size_t>(w.size));
  DLPERF_CHECK_MPI(MPI_Allgather(&w.local_rank, 1, MPI_INT, w.local_ranks.data(), 1, MPI_INT, world));
  return w;
}

MpiSession::MpiSession(int& argc, char**& argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw Error(ErrorKind::internal, "MpiSession: MPI is already initialised (one session per process)");
  prefer_bandwidth_optimal_iallreduce();
  keep_freed_heap_memory();
  int provided = MPI_THREAD_SINGLE;
  DLPERF_CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    // The MPI communicator progresses non-blocking collectives from its own thread while the
    // caller keeps issuing MPI calls, and the heartbeat thread talks to peers: both need
    // MPI_THREAD_MULTIPLE. Without it there is no safe progress thread, so stop here.
    MPI_Finalize();
    throw Error(ErrorKind::library, std::string("MPI provides only ") + thread_level_name(provided) +
                                        "; dlperf needs MPI_THREAD_MULTIPLE for its progress and heartbeat threads "
                                        "(use an MPI library built with thread support)");
  }
  // Errors on the world communicator (and the communicators duplicated from it) return codes,
  // which DLPERF_CHECK_MPI turns into exceptions carrying the call and the rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  try {
    world_ = discover_world(MPI_COMM_WORLD);
  } catch (...) {
    MPI_Abort(MPI_COMM_WORLD, 3);  // a rank that cannot even learn the layout cannot finalize with the others
    throw;
  }
  set_error_identity(world_.rank, world_.this_host);
  set_test_fault_rank(world_.rank);
}

MpiSession::~MpiSession() {
  test_fault_point("finalize");
  MPI_Finalize();
  {
    std::lock_guard lock(exit_mu_);
    exited_ = true;
  }
  exit_cv_.notify_all();
  if (exit_watch_.joinable()) exit_watch_.join();
}

void MpiSession::bound_exit(std::chrono::milliseconds bound, std::string program, std::string alone) {
  std::lock_guard lock(exit_mu_);
  if (!alone.empty()) bound = std::min<std::chrono::milliseconds>(bound, kAloneGrace);
  exit_deadline_ = std::chrono::steady_clock::now() + bound;
  exit_bound_ = bound;
  exit_alone_ = std::move(alone);
  if (exit_watch_.joinable()) return;  // the running watch reads the new deadline
  exit_watch_ = std::thread([this, program = std::move(program)] {
    std::unique_lock held(exit_mu_);
    while (!exited_) {
      if (exit_cv_.wait_until(held, exit_deadline_, [&] { return exited_; })) return;
      if (std::chrono::steady_clock::now() < exit_deadline_) continue;  // restarted meanwhile
      if (!exit_alone_.empty()) {
        if (world_.rank != 0)
          std::fprintf(stderr, "%s: rank %d (%s): %s\n", program.c_str(), world_.rank, world_.this_host.c_str(), exit_alone_.c_str());
        std::fflush(stderr);
        std::_Exit(2);  // the launcher ends the ranks that went on (they also miss this rank's heartbeat)
      }
      std::fprintf(stderr, "%s: rank %d (%s): phase finalize: not finished after %.1f s (--timeout): a peer stopped, died or "
                           "was cut off after the last collective; ending this rank\n",
                   program.c_str(), world_.rank, world_.this_host.c_str(), std::chrono::duration<double>(exit_bound_).count());
      std::fflush(stderr);
      std::_Exit(3);  // MPI_Abort is not safe while this process may be inside MPI_Finalize
    }
  });
}

void MpiSession::abort(int exit_code) const { abort_job(exit_code); }

}  // namespace dlperf
