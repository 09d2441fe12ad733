// See thread_budget.h.
#include "train/cluster/thread_budget.h"

#include <algorithm>
#include <set>

#include "comm/mpi_comm_handle.h"
#include "core/check.h"

namespace dlperf {

std::string thread_oversubscription(MPI_Comm world, const WorldInfo& w, int threads, const std::vector<int>& cpus) {
  const MpiComm local = MpiComm::node(world);
  // Every rank's thread count and CPU list, on every rank of the node.
  const int count = static_cast<int>(cpus.size());
  std::vector<int> counts(static_cast<size_t>(w.local_size));
  DLPERF_CHECK_MPI(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, local.get()));
  std::vector<int> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  std::vector<int> all(static_cast<size_t>(offsets.back() + counts.back()));
  DLPERF_CHECK_MPI(MPI_Allgatherv(cpus.data(), count, MPI_INT, all.data(), counts.data(), offsets.data(), MPI_INT, local.get()));
  std::vector<int> per_rank(counts.size());
  DLPERF_CHECK_MPI(MPI_Allgather(&threads, 1, MPI_INT, per_rank.data(), 1, MPI_INT, local.get()));
  int total = 0;
  bool one_over = false;  // a rank with more threads than its own CPUs, beside ranks with CPUs to spare
  for (size_t r = 0; r < per_rank.size(); ++r) {
    total += per_rank[r];
    one_over = one_over || (counts[r] > 0 && per_rank[r] > counts[r]);
  }
  const std::set<int> used(all.begin(), all.end());
  // Per node (its first rank speaks for it): threads and CPUs, where threads outnumber CPUs.
  int mine[2] = {0, 0};
  if (w.local_rank == 0 && !used.empty() && (total > static_cast<int>(used.size()) || one_over))
    mine[0] = total, mine[1] = static_cast<int>(used.size());
  std::vector<int> every(2 * static_cast<size_t>(w.size));
  DLPERF_CHECK_MPI(MPI_Gather(mine, 2, MPI_INT, every.data(), 2, MPI_INT, 0, world));
  if (w.rank != 0) return "";
  int nodes = 0, first = -1;
  for (int r = 0; r < w.size; ++r)
    if (every[2 * static_cast<size_t>(r)] > 0 && nodes++ == 0) first = r;
  if (nodes == 0) return "";
  const auto f = static_cast<size_t>(first);
  return std::to_string(nodes) + " node(s) run more compute threads than the CPUs their ranks may use (first: " + w.hosts[f] + ", " +
         std::to_string(every[2 * f]) + " threads on " + std::to_string(every[2 * f + 1]) +
         " CPUs, or a rank more than its own): the threads take turns on the cores and every step slows; lower --threads so that the ranks' threads fit, or give "
         "each rank CPUs of its own (srun -c N --cpu-bind=cores, mpirun --map-by slot:PE=N) and --threads 0, or --pin-threads";
}

}  // namespace dlperf
