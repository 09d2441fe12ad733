// MPI bootstrap: MpiSession initialises MPI with MPI_THREAD_MULTIPLE (the communicators run a
// progress thread and a heartbeat thread beside the caller), makes MPI errors on the world
// communicator return codes (so they become dlperf::Error instead of killing the job
// silently), learns the world layout once, and finalizes on destruction.
// Works the same under `mpirun` and `srun --mpi=pmix`: only MPI calls are used, no
// launcher environment variables.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
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

// A process that MPI started as a job of its own (world size 1) while its launcher started
// more: one line saying so, else "". The launcher's count is Open MPI mpirun's
// OMPI_COMM_WORLD_SIZE, else PMI_SIZE (MPICH's and Intel MPI's hydra, Slurm's pmi2 plugin), else
// srun's SLURM_STEP_NUM_TASKS (a batch script's own step sets none of them). An srun --mpi plugin
// the MPI library does not speak (pmi2 with Open MPI 5, a PMIx mismatch) starts every task as a
// lone rank: each would train alone on its node's first GPU and add a one-device run to the results.
std::string lone_rank_problem(int world_size);

// Collective over `comm`: the first two ranks on one host whose GPU (PCI bus id; "" for none)
// is the same, as one line naming them and why it happens, or "" (every rank returns the same).
// dlperf takes a rank's GPU as its local rank modulo the GPUs it sees, which is one per rank only
// when each rank sees all of the node's GPUs or exactly one; Slurm's --gpu-bind=closest shows a
// rank every GPU of its socket, and more ranks than GPUs on a socket then pair up. NCCL refuses
// two ranks on one GPU; MPI through host memory runs them, each with part of the GPU.
std::string shared_gpu(MPI_Comm comm, const WorldInfo& w, const std::string& gpu_bus_id, int visible_gpus);

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

  // Bounds the rest of this process once its last collective has returned (communicators'
  // goodbyes, MPI_Finalize, which waits for every rank): a peer stopped or killed after that
  // point would otherwise hold this rank in MPI_Finalize for ever. When `bound` passes before
  // MPI_Finalize returns, this rank prints one line (prefixed by `program`) and exits 3; the
  // launcher then ends the others. Calling it again restarts the clock.
  // `alone`: this rank stops for a usage error (bad input) it expects every rank to have hit
  // alike, so that all finalize at once and rank 0 alone prints it. A rank that hit it alone (its
  // node's copy of the data is damaged; a batch checked mid-run) would wait for peers that went on:
  // after kAloneGrace (or `bound`, if shorter) it prints `alone` with its rank and host unless
  // it is rank 0 (which printed it already), and exits 2.
  void bound_exit(std::chrono::milliseconds bound, std::string program, std::string alone = {});
  static constexpr std::chrono::seconds kAloneGrace{10};

 private:
  WorldInfo world_;
  std::mutex exit_mu_;
  std::condition_variable exit_cv_;
  std::chrono::steady_clock::time_point exit_deadline_{};
  bool exited_ = false;
  std::chrono::milliseconds exit_bound_{0};
  std::string exit_alone_;
  std::thread exit_watch_;
};

}  // namespace dlperf
