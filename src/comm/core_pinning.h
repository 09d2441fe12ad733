// Pinning each rank's threads (`--pin-threads`, `--threads T`) to cores of its own, chosen
// from the node's topology (hwloc, topology.h) rather than by slicing a list of CPU ids:
//  * one hardware thread per core while the cores suffice (two threads of one rank never
//    share a core's pipelines; SMT siblings are used only when the cores are too few);
//  * ranks that share one CPU set are spread over it in equal, contiguous slices of the
//    topology order (package > NUMA node > core), so 2 ranks on a 2-socket node get one
//    socket each instead of both landing on the first, and a slice stays inside one NUMA
//    node whenever the counts divide evenly;
//  * on GPU nodes, when the GPUs' locality is known (sysfs local_cpulist), a rank's cores come
//    from those close to its GPU, shared out among the ranks that use GPUs of that locality;
//  * ranks the launcher has already bound to disjoint sets (srun --cpu-bind) keep their own
//    set and take T cores from it; different but overlapping bindings are refused.
// The plan is a pure function of the topology and every local rank's binding (exchanged over
// MPI), so every rank computes the same plan and the slices are disjoint by construction.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "comm/mpi_session.h"
#include "comm/topology.h"

namespace dlperf {

struct PinRequest {
  int threads = 1;                               // T: cores per rank; 0: every core of the rank's share (below)
  int spare = 0;                                 // with threads 0: cores each rank leaves free (its image loader)
  std::vector<std::vector<int>> bindings;        // [local ranks] each one's current binding (PUs)
  std::vector<std::vector<int>> near;            // [local ranks] PUs close to its GPU; {} = unknown (all or none)
};

struct PinPlan {
  std::vector<std::vector<int>> pus;  // [local ranks] (T) PUs each rank's threads are bound to
  std::string how;                    // one line for the log: what was shared and why
  bool own_sets = false;              // the launcher bound each rank to CPUs of its own (kept): what a rank
                                      // leaves free of its set is its own, not shared with the node's ranks
};

// Error(usage) naming the numbers when the threads do not fit. threads 0 (--threads 0 without
// OMP_NUM_THREADS): ranks sharing a set take equal shares of its cores (of its hardware threads
// when the cores are fewer than the ranks), ranks bound to sets of their own every core of it,
// each less `spare`, at least 1; pus[k].size() is then rank k's thread count.
PinPlan plan_pinning(const Topology& topo, const PinRequest& request);

// Collective over the ranks of this node (all ranks of `world` must call it): exchanges the
// bindings, plans, binds the calling thread (threads created later inherit it) and returns
// the plan. `near` as in PinRequest (the same on every rank).
PinPlan pin_local_ranks(MPI_Comm world, const WorldInfo& w, int threads, int spare, const std::vector<std::vector<int>>& near);

}  // namespace dlperf
