// MPI bootstrap: MpiSession initialises MPI with MPI_THREAD_MULTIPLE (the communicators run a
// progress thread and a heartbeat thread beside the caller), makes MPI errors on the world
// communicator return codes (so they become dlperf::Error instead of killing the job
// silently), learns the world layout once, and finalizes on destruction.
// Works the same under `mpirun` and `srun --mpi=pmix`: only MPI calls are used, no
// launcher environment variables.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace dlperf {

// Where this rank sits. Ranks on one node share memory (MPI_COMM_TYPE_SHARED).
struct WorldInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;   // rank among the ranks of this node: picks the GPU / the core range
  int local_size = 1;
  int node_count = 1;
  int node_index = 0;   // 0 .. node_count-1, in order of the nodes' lowest world rank
  std::vector<std::string> hosts;  // [size] host name of every rank
  std::vector<int> local_ranks;    // [size] local_rank of every rank (recorded in the trace)
  std::string this_host;
};

// Collective over `world`: every rank must call it.
WorldInfo discover_world(MPI_Comm world);

class MpiSession {
 public:
  // Throws Error(library) when MPI cannot give MPI_THREAD_MULTIPLE.
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  MPI_Comm world_comm() const { return MPI_COMM_WORLD; }
  const WorldInfo& world() const { return world_; }

  // Ends every rank of the job (the top level calls this on a fault; see mpi_main.h).
  [[noreturn]] void abort(int exit_code) const;

 private:
  WorldInfo world_;
};

}  // namespace dlperf
