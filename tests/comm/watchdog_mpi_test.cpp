// Watchdog under mpirun (2, 3, 4 ranks), the paths that do not end the job (those that do are
// tests/mpi/phase_fault_test.sh, which stops or kills a rank in each phase of dlperf-train):
// wait_or_abort completes a non-blocking collective with the exact result, phases nest and
// restore, and an exception names the phase it escaped from until a later phase opens.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>

#include "comm/watchdog.h"
#include "core/check.h"
#include "mpi_test_env.h"

namespace dlperf {
namespace {

using test::world;

Watchdog make_watchdog() { return Watchdog(MPI_COMM_WORLD, world(), std::chrono::seconds(20), std::chrono::milliseconds(100), "test"); }

TEST(Watchdog, WaitOrAbortCompletesANonBlockingCollective) {
  Watchdog watch = make_watchdog();
  int mine = world().rank + 1, sum = 0;
  MPI_Request r = MPI_REQUEST_NULL;
  DLPERF_CHECK_MPI(MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
  watch.wait_or_abort(r, "test-allreduce");
  EXPECT_EQ(sum, world().size * (world().size + 1) / 2);  // 1 + 2 + ... + size
  EXPECT_EQ(r, MPI_REQUEST_NULL);
}

TEST(Watchdog, PhasesNestAndAnExceptionNamesItsPhase) {
  Watchdog watch = make_watchdog();
  {
    auto outer = watch.collective("outer", Watchdog::kNoBound);
    EXPECT_EQ(watch.phase_of_failure(), "outer");
    {
      auto inner = watch.collective("inner");
      EXPECT_EQ(watch.phase_of_failure(), "inner");
    }
    EXPECT_EQ(watch.phase_of_failure(), "outer");  // restored
    try {
      auto failing = watch.local("failing", std::chrono::seconds(20));
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    EXPECT_EQ(watch.phase_of_failure(), "failing");  // the innermost phase the exception left
    auto later = watch.collective("later");           // handled: a new phase clears it
    EXPECT_EQ(watch.phase_of_failure(), "later");
    DLPERF_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  }
  EXPECT_EQ(watch.phase_of_failure(), "local-work");
}

}  // namespace
}  // namespace dlperf
