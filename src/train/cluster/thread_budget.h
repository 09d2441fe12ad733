// Compute threads against the CPUs the ranks of a node may run on. A rank bound to one core
// that starts 2 threads (or 2 ranks sharing 2 cores with 2 threads each) ran every step 50-100x
// slower than one thread, exited 0 and was recorded as a normal run.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "comm/mpi_session.h"

namespace dlperf {

// Collective over `world`. Per node: the compute threads of its ranks against the CPUs in the
// union of their bindings (`cpus`: this rank's), and each rank's against its own. On rank 0, one
// line naming the first node where threads outnumber CPUs ("" elsewhere, and when none does).
std::string thread_oversubscription(MPI_Comm world, const WorldInfo& w, int threads, const std::vector<int>& cpus);

}  // namespace dlperf
