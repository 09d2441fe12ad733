// pin_local_ranks under mpirun: ranks mpirun bound to a core each (its default for 2 ranks)
// keep theirs; ranks started unbound (--bind-to none, comm_mpi_pinning_shared) share the node's
// cores out. Either way every rank ends up bound to exactly the PUs its plan names and no two
// ranks of the node share one; more ranks than cores skip with the planner's usage error. The
// binding is restored afterwards, so later tests' threads are unaffected.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>

#include "comm/core_pinning.h"
#include "comm/topology.h"
#include "core/error.h"
#include "mpi_test_env.h"

namespace dlperf {
namespace {

std::vector<int> affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> pus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) pus.push_back(c);
  return pus;
}

TEST(CorePinning, LocalRanksGetDisjointCores) {
  const WorldInfo& w = test::world();
  const auto topo = Topology::this_machine();
  const std::vector<int> before = thread_binding(topo);
  PinPlan plan;
  try {
    plan = pin_local_ranks(MPI_COMM_WORLD, w, 1, 0, {});
  } catch (const Error& e) {  // every rank plans the same: all skip together
    ASSERT_EQ(e.kind(), ErrorKind::usage) << e.what();
    GTEST_SKIP() << e.what();
  }
  const std::vector<int> now = affinity();
  bind_thread(topo, before);
  EXPECT_EQ(now, plan.pus[static_cast<size_t>(w.local_rank)]) << plan.how;
  ASSERT_EQ(now.size(), 1u);
  std::vector<int> all(static_cast<size_t>(w.size));
  ASSERT_EQ(MPI_Allgather(now.data(), 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  if (w.node_count == 1) {
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "two ranks pinned to one PU: " << plan.how;
  }
}

}  // namespace
}  // namespace dlperf
